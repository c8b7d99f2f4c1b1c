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

Usage: python benches/pytorch/fno_step.py cpu|cuda [BATCH] [STEPS] [THREADS] [--check]
Needs torch and numpy.
"""
import json, os, resource, statistics, sys, time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


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


def count_real(model):
    return sum(p.numel() * (2 if p.is_complex() else 1) for p in model.parameters())


def load_safetensors(path):
    """The float32 tensors of a safetensors file (8-byte header length, JSON header, raw data)."""
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    out = {}
    for k, v in header.items():
        if k == "__metadata__" or v["dtype"] != "F32":
            continue
        a, b = v["data_offsets"]
        arr = np.frombuffer(raw[8 + n + a:8 + n + b], dtype="<f4").reshape(v["shape"])
        out[k] = torch.from_numpy(arr.copy())
    return out


def check():
    root = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "fno")
    t = load_safetensors(os.path.join(root, "fno2d_small.safetensors"))
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
    err = ((out - t["output.eval"]).abs().max() / t["output.eval"].abs().max()).item()
    assert err < 1e-5, f"output.eval differs: {err}"
    assert count_real(FNO2d(12, 12, 32)) == 2368001
    print(json.dumps({"check": "fno2d_small output.eval", "rel_err": err, "darcy_params": 2368001}))


def main(device, batch=20, steps=5, threads=None, warmup=1):
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = FNO2d(12, 12, 32).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    s = 85
    x = torch.randn(batch, s, s, 1, device=device)
    y = torch.randn(batch, s, s, 1, device=device)
    times = []
    for i in range(warmup + steps):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad()
        out = model(x)
        d = (out - y).reshape(batch, -1)
        loss = (torch.norm(d, 2, 1) / torch.norm(y.reshape(batch, -1), 2, 1)).sum()
        loss.backward()
        opt.step()
        if device == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    rep = {
        "arch": "FNO2d (PyTorch)", "preset": "darcy", "batch": batch, "points": s * s,
        "steps": steps, "median_s": statistics.median(times), "min_s": min(times),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "params": count_real(model), "threads": torch.get_num_threads(), "device": device,
        "torch": torch.__version__,
    }
    if device == "cuda":
        rep["cuda_peak_allocated_mb"] = torch.cuda.max_memory_allocated() / 2**20
    print(json.dumps(rep))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--check"]
    if "--check" in sys.argv:
        check()
    if args:
        main(args[0], *[int(a) for a in args[1:4]])
