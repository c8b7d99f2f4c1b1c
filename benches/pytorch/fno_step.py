"""Full training steps of the original PyTorch FNO2d (zongyi-li/fourier_neural_operator
`fourier_2d.py` at 4d3e0c3, the Darcy script's model) at the Darcy shapes, the counterpart of
`ono bench-step --arch fno2d --preset darcy --batch B`: forward, the script's loss
(`LpLoss(size_average=False)`: the sum over the batch of relative L2 errors), backward and a
`torch.optim.Adam(lr=1e-3, weight_decay=1e-4)` step, on random data; prints one JSON line (median
and min step seconds after the warm-up, peak RSS, and on CUDA torch's peak allocated memory).

The scripts train when imported, so the network is restated here from fixtures/fno/README.md (the
forward pass step by step); `--check` proves it is the reference's: it loads
fixtures/fno/fno2d_small.safetensors (weights made by the unmodified upstream class) and
compares output.eval, and it checks the Darcy configuration's parameter count, 2,368,001.

Usage: python benches/pytorch/fno_step.py [cpu|cuda [BATCH [STEPS [THREADS]]]] [--warmup N] [--check]
Needs torch and numpy.
"""
import argparse, json

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import steplib


class SpectralConv2d(nn.Module):
    def __init__(self, cin, cout, m1, m2):
        super().__init__()
        self.m1, self.m2 = m1, m2
        scale = 1 / (cin * cout)
        self.weights1 = nn.Parameter(scale * torch.rand(cin, cout, m1, m2, dtype=torch.cfloat))
        self.weights2 = nn.Parameter(scale * torch.rand(cin, cout, m1, m2, dtype=torch.cfloat))

    def forward(self, x):
        b, _, n1, n2 = x.shape
        xf = torch.fft.rfft2(x)
        out = torch.zeros(b, self.weights1.shape[1], n1, n2 // 2 + 1, dtype=torch.cfloat, device=x.device)
        out[:, :, :self.m1, :self.m2] = torch.einsum("bixy,ioxy->boxy", xf[:, :, :self.m1, :self.m2], self.weights1)
        out[:, :, -self.m1:, :self.m2] = torch.einsum("bixy,ioxy->boxy", xf[:, :, -self.m1:, :self.m2], self.weights2)
        return torch.fft.irfft2(out, s=(n1, n2))


class FNO2d(nn.Module):
    def __init__(self, m1, m2, width):
        super().__init__()
        self.padding = 9
        self.fc0 = nn.Linear(3, width)
        for l in range(4):
            setattr(self, f"conv{l}", SpectralConv2d(width, width, m1, m2))
            setattr(self, f"w{l}", nn.Conv2d(width, width, 1))
        self.fc1 = nn.Linear(width, 128)
        self.fc2 = nn.Linear(128, 1)

    def grid(self, shape, device):
        b, n1, n2 = shape[0], shape[1], shape[2]
        gx = torch.tensor(np.linspace(0, 1, n1), dtype=torch.float).reshape(1, n1, 1, 1).repeat(b, 1, n2, 1)
        gy = torch.tensor(np.linspace(0, 1, n2), dtype=torch.float).reshape(1, 1, n2, 1).repeat(b, n1, 1, 1)
        return torch.cat((gx, gy), dim=-1).to(device)

    def forward(self, x):
        x = torch.cat((x, self.grid(x.shape, x.device)), dim=-1)
        x = self.fc0(x).permute(0, 3, 1, 2)
        x = F.pad(x, [0, self.padding, 0, self.padding])
        for l in range(4):
            x = getattr(self, f"conv{l}")(x) + getattr(self, f"w{l}")(x)
            if l < 3:
                x = F.gelu(x)
        x = x[..., :-self.padding, :-self.padding].permute(0, 2, 3, 1)
        return self.fc2(F.gelu(self.fc1(x)))


def check():
    t, _ = steplib.fixture("fno", "fno2d_small")
    model = FNO2d(4, 4, 8)
    sd = {}
    for k, v in t.items():
        if k.startswith("param."):
            name = k[len("param."):]
            if name.endswith(".view_as_real"):
                sd[name[:-len(".view_as_real")]] = torch.view_as_complex(v.contiguous())
            else:
                sd[name] = v
    model.load_state_dict(sd)
    with torch.no_grad():
        out = model(t["input.x"])
    err = steplib.normwise(out, t["output.eval"])
    assert err < 1e-5, f"output.eval differs: {err}"
    assert steplib.count(FNO2d(12, 12, 32)) == 2368001
    print(json.dumps({"check": "fno2d_small output.eval", "rel_err": err, "darcy_params": 2368001}))


def main(device, batch=20, steps=5, threads=None, warmup=None):
    warmup = steplib.setup(argparse.Namespace(threads=threads, warmup=warmup, device=device))
    torch.manual_seed(0)
    model = FNO2d(12, 12, 32).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    s = 85
    x = torch.randn(batch, s, s, 1, device=device)
    y = torch.randn(batch, s, s, 1, device=device)

    def step():
        opt.zero_grad()
        steplib.rel_l2_sum(model(x), y).backward()
        opt.step()
    times = steplib.timed(step, device, steps, warmup)
    steplib.report({"arch": "FNO2d (PyTorch)", "preset": "darcy", "batch": batch, "points": s * s,
                    "params": steplib.count(model)}, times, device)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="FNO2d training steps at the Darcy shapes")
    p.add_argument("device", nargs="?", choices=["cpu", "cuda"])
    p.add_argument("ints", nargs="*", type=int, metavar="BATCH STEPS THREADS")
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--check", action="store_true")
    a = p.parse_args()
    if a.check:
        check()
    if a.device:
        main(a.device, *a.ints[:3], warmup=a.warmup)
