"""Full training steps of the original Galerkin Transformer (scaomath/galerkin-transformer at
f9e7d6a, `libs/model.py` `FourierTransformer2D` with `libs/layers.py`), the counterpart of
`ono bench-step --arch galerkin --preset darcy --overrides 'scaler_grids = {fine = 85, coarse = 29}'`:
ex2_darcy's network (d 128, 4 heads, 6 Galerkin layers, d_ff 256, freq_dim 32, 12 modes,
norm_eps 1e-7, the dropouts ex2_darcy.py runs) on ONO's Darcy shapes (batch 4, 85 x 85, the
paper's 85/29 grid pair: 85 -> 50 -> 29 by the scale factor 0.59, up 49 -> 85), one forward in
training mode, `ono bench-step`'s default (ono) recipe (Sum_b relative L2 + 0.1 x the
derivative term, AdamW lr 1e-3 weight decay 1e-5, clipping at 0.1; the reference trains with Adam,
OneCycleLR and its H1 loss, which both sides leave out alike), random data; one JSON line.

The package imports its data and plotting utilities at module level, so the network is restated
here from the reference's code with the same torch operations in the same order and the same
module names. One deviation, on both sides: the reference's attention calls `F.dropout(p_attn)`
with PyTorch's defaults (p = 0.5, training=True, in every mode; fixtures/galerkin/README.md);
like `ono`'s default (`attention_dropout = "training"`) the step drops the context matrix with
the configured encoder dropout in training only (`ATTN_DROPOUT`: "reference" restores the call,
None removes it, as the fixtures). The y-normaliser is left out of the step (ours keeps it in
the trainer). `--check` loads fixtures/galerkin/gt2d_small into the restatement and reproduces
output.eval, loss.train and every gradient, and checks ex2's parameter count, 2,220,829.

Usage: python benches/pytorch/galerkin_step.py [PRESET cpu|cuda [STEPS [THREADS]]] [--warmup N] [--check]
PRESET: darcy (the only one restated; bench-compare's "galerkin/darcy").
"""
import copy, json

import numpy as np
import torch
import torch.fft as fft
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.init import constant_, xavier_normal_, xavier_uniform_

import steplib

# "training" (ours), "reference" (F.dropout(p_attn): p 0.5 in every mode) or None (removed).
ATTN_DROPOUT = "training"


class Conv2dResBlock(nn.Module):
    """conv = (Conv2d without bias, Dropout), then the activation (no residual here)."""

    def __init__(self, in_dim, out_dim, kernel_size=3, padding=1, dilation=1, dropout=0.1, stride=1,
                 activation_type="silu"):
        super().__init__()
        self.activation = nn.SiLU() if activation_type == "silu" else nn.ReLU()
        self.conv = nn.Sequential(nn.Conv2d(in_dim, out_dim, kernel_size=kernel_size, padding=padding,
                                            dilation=dilation, stride=stride, bias=False),
                                  nn.Dropout(dropout))

    def forward(self, x):
        return self.activation(self.conv(x))


def interpolate(x, size):
    """The reference's two interpolation modes: a float scale factor (recomputed) or a size."""
    if isinstance(size, float):
        return F.interpolate(x, scale_factor=size, mode="bilinear", recompute_scale_factor=True,
                             align_corners=True)
    return F.interpolate(x, size=size, mode="bilinear", align_corners=True)


class Interp2dEncoder(nn.Module):
    """conv0 → interpolate → act → conv1, conv2, conv3 (d//3, d//3, rest channels) → cat →
    interpolate → act."""

    def __init__(self, in_dim, out_dim, interp_size, activation_type="silu", dropout=0.1, padding=1):
        super().__init__()
        d0 = d1 = out_dim // 3
        d2 = out_dim - d0 - d1
        p1 = padding // 2 if padding // 2 >= 1 else 1
        p2 = padding // 4 if padding // 4 >= 1 else 1
        self.interp_size = interp_size
        block = lambda i, o, p: Conv2dResBlock(i, o, padding=p, activation_type=activation_type, dropout=dropout)
        self.conv0 = block(in_dim, out_dim, padding)
        self.conv1 = block(out_dim, d0, p1)
        self.conv2 = block(d0, d1, p2)
        self.conv3 = block(d1, d2, 1)
        self.activation = nn.SiLU() if activation_type == "silu" else nn.ReLU()

    def forward(self, x):
        x = self.activation(interpolate(self.conv0(x), self.interp_size[0]))
        x1 = self.conv1(x)
        x2 = self.conv2(x1)
        x3 = self.conv3(x2)
        out = torch.cat([x1, x2, x3], dim=1)
        return self.activation(interpolate(out, self.interp_size[1]))


class Interp2dUpsample(nn.Module):
    """interpolate → (Conv2dResBlock, Dropout, act) → interpolate."""

    def __init__(self, in_dim, out_dim, interp_size, activation_type="silu", dropout=0.1):
        super().__init__()
        self.activation = nn.SiLU() if activation_type == "silu" else nn.ReLU()
        self.dropout = nn.Dropout(dropout)
        self.conv = nn.Sequential(Conv2dResBlock(in_dim, out_dim, activation_type=activation_type,
                                                 dropout=dropout), self.dropout, self.activation)
        self.interp_size = interp_size

    def forward(self, x):
        x = F.interpolate(x, size=self.interp_size[0], mode="bilinear", align_corners=True)
        x = self.conv(x)
        return F.interpolate(x, size=self.interp_size[1], mode="bilinear", align_corners=True)


class DownScaler(nn.Module):
    def __init__(self, in_dim, out_dim, interp_size, dropout, activation_type):
        super().__init__()
        self.in_dim = in_dim
        self.downsample = Interp2dEncoder(in_dim, out_dim, interp_size, activation_type, dropout)

    def forward(self, x):
        n, bsz = x.size(1), x.size(0)
        x = x.view(bsz, n, n, self.in_dim).permute(0, 3, 1, 2)
        return self.downsample(x).permute(0, 2, 3, 1)


class UpScaler(nn.Module):
    def __init__(self, in_dim, out_dim, interp_size, dropout, activation_type):
        super().__init__()
        self.upsample = Interp2dUpsample(in_dim, out_dim, interp_size, activation_type, dropout)

    def forward(self, x):
        return self.upsample(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)


def linear_attention(query, key, value, dropout):
    """Galerkin: q (kᵀv / n), the dropout on the context matrix as ATTN_DROPOUT says."""
    seq_len = query.size(-2)
    p_attn = torch.matmul(key.transpose(-2, -1), value) / seq_len
    if ATTN_DROPOUT == "reference":
        p_attn = F.dropout(p_attn)
    elif ATTN_DROPOUT == "training":
        p_attn = F.dropout(p_attn, p=dropout.p, training=dropout.training)
    return torch.matmul(query, p_attn), p_attn


class SimpleAttention(nn.Module):
    """Galerkin attention: linears.{0,1,2} (q, k, v), per-head LayerNorms norm_K and norm_V, the
    coordinates in front of every head, fc back to d."""

    def __init__(self, n_head, d_model, pos_dim, dropout, xavier_init, diagonal_weight, eps):
        super().__init__()
        self.d_k = d_model // n_head
        self.n_head = n_head
        self.pos_dim = pos_dim
        self.linears = nn.ModuleList([copy.deepcopy(nn.Linear(d_model, d_model)) for _ in range(3)])
        for param in self.linears.parameters():
            if param.ndim > 1:
                xavier_uniform_(param, gain=xavier_init)
                param.data += diagonal_weight * torch.diag(torch.ones(param.size(-1), dtype=torch.float))
            else:
                constant_(param, 0)
        self.norm_K = nn.ModuleList([copy.deepcopy(nn.LayerNorm(self.d_k, eps=eps)) for _ in range(n_head)])
        self.norm_V = nn.ModuleList([copy.deepcopy(nn.LayerNorm(self.d_k, eps=eps)) for _ in range(n_head)])
        self.fc = nn.Linear(d_model + n_head * pos_dim, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, pos):
        bsz = query.size(0)
        query, key, value = [layer(x).view(bsz, -1, self.n_head, self.d_k).transpose(1, 2)
                             for layer, x in zip(self.linears, (query, key, value))]
        key = torch.stack([norm(x) for norm, x in zip(self.norm_K, (key[:, i, ...] for i in range(self.n_head)))], dim=1)
        value = torch.stack([norm(x) for norm, x in zip(self.norm_V, (value[:, i, ...] for i in range(self.n_head)))], dim=1)
        pos = pos.unsqueeze(1).repeat([1, self.n_head, 1, 1])
        query, key, value = [torch.cat([pos, x], dim=-1) for x in (query, key, value)]
        x, _ = linear_attention(query, key, value, self.dropout)
        out_dim = self.n_head * (self.d_k + self.pos_dim)
        return self.fc(x.transpose(1, 2).contiguous().view(bsz, -1, out_dim))


class FeedForward(nn.Module):
    def __init__(self, in_dim, dim_feedforward, dropout):
        super().__init__()
        self.lr1 = nn.Linear(in_dim, dim_feedforward)
        self.activation = nn.ReLU()
        self.lr2 = nn.Linear(dim_feedforward, in_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.lr2(self.dropout(self.activation(self.lr1(x))))


class EncoderLayer(nn.Module):
    """`SimpleTransformerEncoderLayer` without post-LayerNorms: x + drop(Attn), x + drop(FFN)."""

    def __init__(self, c):
        super().__init__()
        self.attn = SimpleAttention(c["n_head"], c["n_hidden"], c["pos_dim"], c["encoder_dropout"],
                                    c["xavier_init"], c["diagonal_weight"], c["norm_eps"])
        self.ff = FeedForward(c["n_hidden"], c["dim_feedforward"], c["ffn_dropout"])
        self.dropout1 = nn.Dropout(c["encoder_dropout"])
        self.dropout2 = nn.Dropout(c["encoder_dropout"])

    def forward(self, x, pos):
        x = x + self.dropout1(self.attn(x, x, x, pos=pos))
        return x + self.dropout2(self.ff(x))


class SpectralConv2d(nn.Module):
    """SiLU(irfft2(two corner blocks of rfft2(x) × real (in, out, m, m, 2) weights) + linear(x)),
    "ortho" normalisation."""

    def __init__(self, in_dim, out_dim, modes, dropout):
        super().__init__()
        self.in_dim, self.out_dim, self.modes = in_dim, out_dim, modes
        self.linear = nn.Linear(in_dim, out_dim)
        self.activation = nn.SiLU()
        self.fourier_weight = nn.ParameterList(
            [nn.Parameter(torch.FloatTensor(in_dim, out_dim, modes, modes, 2)) for _ in range(2)])
        for param in self.fourier_weight:
            xavier_normal_(param, gain=1 / (in_dim * out_dim) * np.sqrt(in_dim + out_dim))
        self.dropout = nn.Dropout(dropout)

    @staticmethod
    def complex_matmul_2d(a, b):
        op = lambda x, y: torch.einsum("bixy,ioxy->boxy", x, y)
        return torch.stack([op(a[..., 0], b[..., 0]) - op(a[..., 1], b[..., 1]),
                            op(a[..., 1], b[..., 0]) + op(a[..., 0], b[..., 1])], dim=-1)

    def forward(self, x):
        batch_size, n, m = x.size(0), x.size(1), self.modes
        x = x.view(-1, n, n, self.in_dim)
        res = self.linear(x)
        x = self.dropout(x).permute(0, 3, 1, 2)
        x_ft = fft.rfft2(x, s=(n, n), norm="ortho")
        x_ft = torch.stack([x_ft.real, x_ft.imag], dim=-1)
        out_ft = torch.zeros(batch_size, self.out_dim, n, n // 2 + 1, 2, device=x.device)
        out_ft[:, :, :m, :m] = self.complex_matmul_2d(x_ft[:, :, :m, :m], self.fourier_weight[0])
        out_ft[:, :, -m:, :m] = self.complex_matmul_2d(x_ft[:, :, -m:, :m], self.fourier_weight[1])
        out_ft = torch.complex(out_ft[..., 0], out_ft[..., 1])
        x = fft.irfft2(out_ft, s=(n, n), norm="ortho").permute(0, 2, 3, 1)
        return self.activation(x + res)


class SpectralRegressor(nn.Module):
    """fc([x, grid]) → spectral layers → Linear, SiLU, Linear."""

    def __init__(self, in_dim, freq_dim, out_dim, modes, num_layers, spacial_dim, dropout):
        super().__init__()
        self.fc = nn.Linear(in_dim + spacial_dim, freq_dim)
        self.spectral_conv = nn.ModuleList(
            [SpectralConv2d(freq_dim, freq_dim, modes, dropout) for _ in range(num_layers)])
        hidden = 2 * spacial_dim * freq_dim
        self.regressor = nn.Sequential(nn.Linear(freq_dim, hidden), nn.SiLU(), nn.Linear(hidden, out_dim))

    def forward(self, x, grid):
        x = self.fc(torch.cat([x, grid], dim=-1))
        for layer in self.spectral_conv:
            x = layer(x)
        return self.regressor(x)


class FourierTransformer2D(nn.Module):
    """downscaler → encoder layers on the coarse grid → upscaler → spectral regressor →
    (normaliser) → Dirichlet ring. `c`: the reference's constructor keywords this needs."""

    def __init__(self, c, normalizer=None):
        super().__init__()
        self.n_hidden = c["n_hidden"]
        self.normalizer = normalizer
        self.dirichlet = c["boundary_condition"] == "dirichlet"
        self.downscaler = DownScaler(c["node_feats"], c["n_hidden"], c["downscaler_size"],
                                     c["downscaler_dropout"], c["downscaler_activation"])
        self.upscaler = UpScaler(c["n_hidden"], c["n_hidden"], c["upscaler_size"], c["upscaler_dropout"],
                                 c["upscaler_activation"])
        self.feat_extract = nn.Identity()
        self.dpo = nn.Dropout(c["dropout"])
        layer = EncoderLayer(c)
        self.encoder_layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(c["num_encoder_layers"])])
        self.regressor = SpectralRegressor(c["n_hidden"], c["freq_dim"], c["n_targets"], c["fourier_modes"],
                                           c["num_regressor_layers"], c["spacial_dim"], c["decoder_dropout"])

    def forward(self, node, pos, grid):
        bsz = node.size(0)
        n_s = int(pos.size(1) ** 0.5)
        x = self.downscaler(node).view(bsz, -1, self.n_hidden)
        x = self.dpo(self.feat_extract(x))
        for encoder in self.encoder_layers:
            x = encoder(x, pos)
        x = self.upscaler(x.view(bsz, n_s, n_s, self.n_hidden))
        x = self.regressor(self.dpo(x), grid)
        if self.normalizer is not None:
            mean, std = self.normalizer
            x = x * (std + 1e-5) + mean
        if self.dirichlet:
            x = x[:, 1:-1, 1:-1].contiguous()
            x = F.pad(x, (0, 0, 1, 1, 1, 1), "constant", 0)
        return x


# ex2_darcy as `ono`'s `darcy` preset has it (crates/ono-models/src/galerkin/presets.rs), at the
# grid pair 85/29 with the scale-factor path's sizes.
DARCY = dict(node_feats=1, pos_dim=2, n_targets=1, n_hidden=128, num_encoder_layers=6, n_head=4,
             dim_feedforward=256, xavier_init=0.01, diagonal_weight=0.01, norm_eps=1e-7, spacial_dim=2,
             freq_dim=32, boundary_condition="dirichlet", num_regressor_layers=2, fourier_modes=12,
             downscaler_activation="relu", upscaler_activation="silu", dropout=0.0, downscaler_dropout=0.05,
             upscaler_dropout=0.0, ffn_dropout=0.1, encoder_dropout=0.05, decoder_dropout=0.0,
             downscaler_size=(0.59, 0.59), upscaler_size=((49, 49), (85, 85)))
PRESETS = {"darcy": DARCY}


def meshgrid(n, bsz):
    """np.meshgrid(linspace(0, 1, n), linspace(0, 1, n)) stacked as (bsz, n, n, 2), x fastest."""
    x, y = np.meshgrid(np.linspace(0, 1, n), np.linspace(0, 1, n))
    g = torch.tensor(np.stack([x, y], -1), dtype=torch.float)
    return g.unsqueeze(0).repeat(bsz, 1, 1, 1)


def check():
    global ATTN_DROPOUT
    ATTN_DROPOUT = None
    t, side = steplib.fixture("galerkin", "gt2d_small")
    c = dict(side["constructor_kwargs"])
    c["downscaler_size"] = [tuple(s) for s in c["downscaler_size"]]
    c["upscaler_size"] = [tuple(s) for s in c["upscaler_size"]]
    torch.manual_seed(0)
    model = FourierTransformer2D(c, normalizer=(t["input.normalizer_y.mean"], t["input.normalizer_y.std"]))
    model.load_state_dict({k[len("param."):]: v for k, v in t.items() if k.startswith("param.")})
    args = (t["input.node"], t["input.pos"], t["input.grid"])
    model.eval()
    with torch.no_grad():
        out_eval = model(*args)
    model.train()
    loss = steplib.rel_l2_sum(model(*args), t["input.y"])
    loss.backward()
    tol = side["tolerances"]
    errs = steplib.compared(model, t, tol["output_rel"], tol["grad_rel"], True, output_eval=out_eval,
                            loss_train=loss)
    darcy = FourierTransformer2D(dict(DARCY, upscaler_size=((77, 77), (141, 141))))
    assert steplib.count(darcy) == 2220829, steplib.count(darcy)
    ATTN_DROPOUT = "training"
    print(json.dumps({"check": "galerkin/gt2d_small", "params": steplib.count(model), **errs,
                      "darcy_params": 2220829}))


def main(args):
    warmup = steplib.setup(args)
    c, shapes, device = PRESETS[args.preset], steplib.SHAPES["darcy"], args.device
    b, (n, _) = shapes["batch"], shapes["grid"]
    torch.manual_seed(0)
    model = FourierTransformer2D(c).to(device)
    n_c = 29
    node = torch.randn(b, n, n, 1, device=device)
    pos = meshgrid(n_c, b).reshape(b, n_c * n_c, 2).to(device)
    grid = meshgrid(n, b).to(device)
    y = torch.randn(b, n, n, 1, device=device)
    with torch.no_grad():
        assert model.downscaler(node[:1]).shape[1] == n_c, "the scale factor misses the coarse grid"
    model.train()
    step = steplib.ono_step(model, lambda: steplib.ono_loss(model(node, pos, grid), y, shapes))
    times = steplib.timed(step, device, args.steps, warmup)
    steplib.report(dict(preset=args.preset, impl="pytorch-FourierTransformer2D (restated)", batch=b,
                        points=n * n, coarse=n_c * n_c, params=steplib.count(model)), times, device)


if __name__ == "__main__":
    steplib.entry(steplib.parser(__doc__, "preset", list(PRESETS)).parse_args(), "preset", check, main)
