"""Full training steps of the original GNOT (thu-ml/GNOT at 5ee2e69, `models/mmgpt.py` `GNOT`,
`models/cgpt.py` `CGPTNO`, `models/mlp.py`) at an ONO benchmark's shapes, the counterpart of
`ono bench-step --arch gnot --preset P --shapes S`: the preset's network (P: gnot, gnot_e3,
gnot_d256_e3 or cgpt, as `ono`'s presets; `bench-step` gives it no input functions, so neither
does this: the trunk takes [pos, fx] per point, θ is empty), one forward in training mode,
`ono bench-step`'s default (ono) recipe (Sum_b relative L2, plus 0.1 x the derivative term at the
Darcy shapes, AdamW lr 1e-3 weight decay 1e-5, clipping at 0.1; GNOT's train.py uses AdamW with
its own per-channel relative loss and OneCycle schedule, left out on both sides alike), random
data; one JSON line.

The model files import dgl, which they use only to unbatch and count the samples, so the
network is restated here with the same torch operations in the same order and the same module
names; the samples come in as a list (what `dgl.unbatch` would give), are padded by
`pad_sequence` and the output is un-padded by the same `cat`, as upstream. `--check` loads
fixtures/gnot/{gnot_small,cgpt_small} into the restatement and reproduces output.eval,
loss.train and every gradient, and checks the reference parameter counts.

Usage: python benches/pytorch/gnot_step.py [SHAPES cpu|cuda [STEPS [THREADS]]] [--preset P]
         [--warmup N] [--check]
SHAPES: darcy, ns2d, elasticity (ONO's benchmark shapes, as `ono bench-step --shapes`).
"""
import json

import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange
from torch.nn.utils.rnn import pad_sequence

import steplib


class MLP(nn.Module):
    """GELU(linear_pre x), n_layers × [GELU(linears.i h) + h], linear_post."""

    def __init__(self, n_input, n_hidden, n_output, n_layers=1):
        super().__init__()
        self.act = nn.GELU()
        self.n_layers = n_layers
        self.linear_pre = nn.Linear(n_input, n_hidden)
        self.linear_post = nn.Linear(n_hidden, n_output)
        self.linears = nn.ModuleList([nn.Linear(n_hidden, n_hidden) for _ in range(n_layers)])

    def forward(self, x):
        x = self.act(self.linear_pre(x))
        for i in range(self.n_layers):
            x = self.act(self.linears[i](x)) + x
        return self.linear_post(x)


def heads(t, B, T, H, C):
    return t.view(B, T, H, C // H).transpose(1, 2)


class LinearAttention(nn.Module):
    """'l1' self-attention: softmax over the features of q and k, y = q (kᵀv) / (q·Σk) + q."""

    def __init__(self, d, n_head, attn_pdrop):
        super().__init__()
        self.key, self.query, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.attn_drop = nn.Dropout(attn_pdrop)
        self.proj = nn.Linear(d, d)
        self.n_head = n_head

    def forward(self, x):
        B, T, C = x.size()
        q = heads(self.query(x), B, T, self.n_head, C)
        k = heads(self.key(x), B, T, self.n_head, C)
        v = heads(self.value(x), B, T, self.n_head, C)
        q = q.softmax(dim=-1)
        k = k.softmax(dim=-1)
        k_cumsum = k.sum(dim=-2, keepdim=True)
        D_inv = 1. / (q * k_cumsum).sum(dim=-1, keepdim=True)
        context = k.transpose(-2, -1) @ v
        y = self.attn_drop((q @ context) * D_inv + q)
        return self.proj(rearrange(y, "b h n d -> b n (h d)"))


class LinearCrossAttention(nn.Module):
    """One query, keys.l / values.l per input function, contributions summed on top of q."""

    def __init__(self, d, n_head, n_inputs):
        super().__init__()
        self.query = nn.Linear(d, d)
        self.keys = nn.ModuleList([nn.Linear(d, d) for _ in range(n_inputs)])
        self.values = nn.ModuleList([nn.Linear(d, d) for _ in range(n_inputs)])
        self.proj = nn.Linear(d, d)
        self.n_head, self.n_inputs = n_head, n_inputs

    def forward(self, x, y):
        B, T1, C = x.size()
        q = heads(self.query(x), B, T1, self.n_head, C).softmax(dim=-1)
        out = q
        for i in range(self.n_inputs):
            T2 = y[i].size(1)
            k = heads(self.keys[i](y[i]), B, T2, self.n_head, C)
            v = heads(self.values[i](y[i]), B, T2, self.n_head, C)
            k = k.softmax(dim=-1)
            k_cumsum = k.sum(dim=-2, keepdim=True)
            D_inv = 1. / (q * k_cumsum).sum(dim=-1, keepdim=True)
            out = out + 1 * (q @ (k.transpose(-2, -1) @ v)) * D_inv
        return self.proj(rearrange(out, "b h n d -> b n (h d)"))


def ffn(d, inner):
    return nn.Sequential(nn.Linear(d, inner), nn.GELU(), nn.Linear(inner, d))


class Block(nn.Module):
    """`MIOECrossAttentionBlock` (experts: post-LN dense mixtures gated by the position) or
    `CrossAttentionBlock` (no experts: pre-LN MLPs of width 4d)."""

    def __init__(self, d, n_head, n_inputs, n_inner, space_dim, n_experts, pdrop, attn_pdrop):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.ln2_branch = nn.ModuleList([nn.LayerNorm(d) for _ in range(n_inputs)])
        self.ln3, self.ln4, self.ln5 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.selfattn = LinearAttention(d, n_head, attn_pdrop)
        self.crossattn = LinearCrossAttention(d, n_head, n_inputs)
        self.resid_drop1, self.resid_drop2 = nn.Dropout(pdrop), nn.Dropout(pdrop)
        self.n_experts, self.n_inputs = n_experts, n_inputs
        if n_experts:
            self.moe_mlp1 = nn.ModuleList([ffn(d, n_inner) for _ in range(n_experts)])
            self.moe_mlp2 = nn.ModuleList([ffn(d, n_inner) for _ in range(n_experts)])
            self.gatenet = nn.Sequential(nn.Linear(space_dim, n_inner), nn.GELU(), nn.Linear(n_inner, n_inner),
                                         nn.GELU(), nn.Linear(n_inner, n_experts))
        else:
            self.mlp1, self.mlp2 = ffn(d, 4 * d), ffn(d, 4 * d)

    def ln_branchs(self, y):
        return [self.ln2_branch[i](y[i]) for i in range(self.n_inputs)]

    def forward(self, x, y, pos):
        if not self.n_experts:
            x = x + self.resid_drop1(self.crossattn(self.ln1(x), self.ln_branchs(y)))
            x = x + self.mlp1(self.ln3(x))
            x = x + self.resid_drop2(self.selfattn(self.ln4(x)))
            return x + self.mlp2(self.ln5(x))
        gate_score = F.softmax(self.gatenet(pos), dim=-1).unsqueeze(2)
        x = x + self.resid_drop1(self.crossattn(self.ln1(x), self.ln_branchs(y)))
        x_moe1 = torch.stack([self.moe_mlp1[i](x) for i in range(self.n_experts)], dim=-1)
        x = x + self.ln3((gate_score * x_moe1).sum(dim=-1, keepdim=False))
        x = x + self.resid_drop2(self.selfattn(self.ln4(x)))
        x_moe2 = torch.stack([self.moe_mlp2[i](x) for i in range(self.n_experts)], dim=-1)
        return x + self.ln5((gate_score * x_moe2).sum(dim=-1, keepdim=False))


class GNOT(nn.Module):
    """`GNOT` (n_experts > 0) or `CGPTNO` (n_experts = 0): trunk_mlp([x, θ]), branch_mlps on the
    input functions once, the blocks, out_mlp, the padded rows dropped."""

    def __init__(self, trunk_size, branch_sizes, space_dim=2, output_size=3, n_layers=2, n_hidden=64,
                 n_head=1, n_experts=2, n_inner=4, mlp_layers=2, ffn_dropout=0.0, attn_dropout=0.0):
        super().__init__()
        self.space_dim = space_dim
        self.n_inputs = len(branch_sizes)
        self.trunk_mlp = MLP(trunk_size, n_hidden, n_hidden, n_layers=mlp_layers)
        self.branch_mlps = nn.ModuleList([MLP(b, n_hidden, n_hidden, n_layers=mlp_layers) for b in branch_sizes])
        self.blocks = nn.Sequential(*[
            Block(n_hidden, n_head, self.n_inputs, n_inner * n_hidden, space_dim, n_experts, ffn_dropout, attn_dropout)
            for _ in range(n_layers)])
        self.out_mlp = MLP(n_hidden, n_hidden, output_size, n_layers=mlp_layers)

    def forward(self, xs, u_p, inputs):
        x = pad_sequence(xs).permute(1, 0, 2)
        pos = x[:, :, 0:self.space_dim]
        x = torch.cat([x, u_p.unsqueeze(1).repeat([1, x.shape[1], 1])], dim=-1)
        x = self.trunk_mlp(x)
        z = [self.branch_mlps[i](inputs[i]) for i in range(self.n_inputs)]
        for block in self.blocks:
            x = block(x, z, pos)
        x = self.out_mlp(x)
        return torch.cat([x[i, :len(xi)] for i, xi in enumerate(xs)], dim=0)


# `ono`'s presets (crates/ono-models/src/gnot/presets.rs): args.py's defaults at width 128.
PRESETS = {
    "gnot": dict(n_layers=3, n_hidden=128, n_head=1, n_experts=1, n_inner=4, mlp_layers=3),
    "gnot_e3": dict(n_layers=3, n_hidden=128, n_head=1, n_experts=3, n_inner=4, mlp_layers=3),
    "gnot_d256_e3": dict(n_layers=3, n_hidden=256, n_head=1, n_experts=3, n_inner=4, mlp_layers=3),
    "cgpt": dict(n_layers=3, n_hidden=128, n_head=1, n_experts=0, n_inner=4, mlp_layers=3),
}
# fixtures/gnot/reference_param_counts.json: trunk 13, one 2-channel input function, 3 outputs.
COUNTS = {"gnot": 2185222, "gnot_e3": 3768844, "gnot_d256_e3": 15008780}


def check():
    for case in ["gnot_small", "cgpt_small"]:
        t, side = steplib.fixture("gnot", case)
        c = dict(side["constructor_kwargs"])
        for k in ["attn_type", "act", "horiz_fourier_dim"]:
            c.pop(k)
        c.setdefault("n_experts", 0)
        torch.manual_seed(0)
        model = GNOT(**c)
        model.load_state_dict({k[len("param."):]: v for k, v in t.items() if k.startswith("param.")})
        xs = [t["input.x"][b, :n] for b, n in enumerate(t["input.num_nodes"].tolist())]
        args = (xs, t["input.theta"], [t["input.f0"], t["input.f1"]])
        model.eval()
        with torch.no_grad():
            out_eval = model(*args)
        model.train()
        out = model(*args)
        counts = t["input.num_nodes"].tolist()
        loss = sum(steplib.rel_l2_sum(o.unsqueeze(0), y.unsqueeze(0))
                   for o, y in zip(out.split(counts), t["input.y"].split(counts)))
        loss.backward()
        tol = side["tolerances"]
        errs = steplib.compared(model, t, tol["output_rel"], tol["grad_rel"], True, output_eval=out_eval,
                                loss_train=loss)
        print(json.dumps({"check": f"gnot/{case}", "params": steplib.count(model), **errs}))
    for name, n in COUNTS.items():
        got = steplib.count(GNOT(13, [2], space_dim=2, output_size=3, **PRESETS[name]))
        assert got == n, (name, got, n)
    got = steplib.count(GNOT(14, [], space_dim=2, output_size=3, **PRESETS["cgpt"]))
    assert got == 1224963, got
    print(json.dumps({"check": "gnot reference parameter counts", **COUNTS, "cgpt": 1224963}))


def main(args):
    warmup = steplib.setup(args)
    shapes, device = steplib.SHAPES[args.shapes], args.device
    b, n, sd, fd = shapes["batch"], shapes["n"], shapes["space_dim"], shapes["fun_dim"]
    torch.manual_seed(0)
    model = GNOT(sd + fd, [], space_dim=sd, output_size=shapes["out_dim"], **PRESETS[args.preset]).to(device)
    pos = torch.rand(b, n, sd, device=device)
    fx = torch.randn(b, n, fd, device=device)
    y = torch.randn(b, n, shapes["out_dim"], device=device)
    xs = list(torch.cat([pos, fx], -1).unbind(0))
    theta = torch.zeros(b, 0, device=device)
    model.train()
    step = steplib.ono_step(model, lambda: steplib.ono_loss(model(xs, theta, []).reshape(b, n, -1), y, shapes))
    times = steplib.timed(step, device, args.steps, warmup)
    steplib.report(dict(preset=args.preset, shapes=args.shapes, impl="pytorch-GNOT (restated)", batch=b,
                        points=n, params=steplib.count(model)), times, device)


if __name__ == "__main__":
    p = steplib.parser(__doc__, "shapes", list(steplib.SHAPES))
    p.add_argument("--preset", default="gnot", choices=list(PRESETS))
    steplib.entry(p.parse_args(), "shapes", check, main)
