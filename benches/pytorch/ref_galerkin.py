"""PyTorch restatement of Cao's Galerkin / Fourier Transformer as ono ports it (arch galerkin).

`SimpleTransformer` (the 1-D Burgers model) and `FourierTransformer2D` (the 2-D Darcy models,
forward and inverse) of https://github.com/scaomath/galerkin-transformer at commit
f9e7d6abc24e958b1165f48b22625c5bab688043 (`libs/model.py`, `libs/layers.py`; the training losses
`WeightedL2Loss` / `WeightedL2Loss2d` of `libs/ft.py`), as fixtures/galerkin/README.md describes
them.

It is written for the reference training loop (train_ref.py), which trains the model with
torch.optim on the same data as ono's Rust trainer, so it computes what the Rust port computes
(crates/ono-models/src/galerkin/**, crates/ono-nn/src/{galerkin_attention,interp_scaler,
residual_spectral_conv}.rs, crates/ono-train/src/{step,loss}.rs): where the port chose otherwise
than the reference, this module follows the port. Everything else, including the parameter names,
the module tree, the construction order and every random draw of the initialisation, is the
reference's: after `torch.manual_seed(s)`, `build` gives the parameters the reference's own
constructor gives (`check` proves it bit for bit on the fixtures, whose models were built right
after `manual_seed(0)`). In particular the encoder layers are deep copies of one layer, so they
start equal, as in the reference (the Rust port draws each layer separately).

The port's choices (followed here):
- the attention dropout: the reference calls `F.dropout(p_attn)` with PyTorch's defaults (p = 0.5,
  in every mode, whatever `encoder_dropout` says; fixtures/galerkin/README.md). The port drops the
  context or score matrix with `encoder_dropout` in training only (`attention_dropout =
  "training"`, its default) and restores the defect with `attention_dropout = "reference"`;
- the y-normaliser is not part of the model (the trainer decodes the output), so the Dirichlet ring
  is zeroed before decoding, not after as in the reference's forward;
- `FourierTransformer2D`'s attention coordinates are the input points' coordinates interpolated
  bilinearly (corners aligned) to the coarse grid (the reference reads a separate coarse meshgrid;
  on a uniform grid the two agree to rounding, checked below); its output coordinates are the
  input grid's, or, when the output grid differs from the input grid (the inverse problem),
  `query`'s, an argument this module adds to the common interface;
- the grids need not be square, and `SimpleTransformer` takes a 2-D grid too (the reference's 2-D
  spectral layer assumes a square one);
- the interpolation sizes come from `scaler_grids` (the reference's `get_scaler_sizes`, restated in
  `scaler_sizes`) or from explicit `downscaler_size` / `upscaler_size`; only the size mode of the
  interpolation is needed (the scale-factor mode gives the same sizes, ⌊n·f⌋).

Interface: `ARCHS`, `build(arch, fields)`, `forward(model, pos, fx, grid, time, query=None)`,
`load_reference(model, tensors)`, `loss(pred, y, grid, h1_gamma, aux)`, `check()`.

Check: `python benches/pytorch/ref_galerkin.py --check` reproduces every case of fixtures/galerkin
(gt1d_small, ft1d_small, gt2d_small, inv2d_small: the seeded initialisation bit for bit, the
eval and train outputs, loss.train, every gradient within the cases' tolerances, the float64
output), the reference configurations' parameter counts (reference_param_counts.json) from the
port's presets, `scaler_sizes` on every pair of scaler_sizes.csv, `loss` on
fixtures/train/galerkin_losses.safetensors (the reference's own loss classes), and runs the paths
no fixture reaches (linear and softmax attention, 2-D SimpleTransformer, non-square grids, the
inverse problem's query, the reference dropout mode, float64) once. Needs torch and numpy.
"""
import copy, csv, json, math, os, sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.init import constant_, xavier_normal_, xavier_uniform_

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import steplib  # noqa: E402

UPSTREAM = ("https://github.com/scaomath/galerkin-transformer",
            "f9e7d6abc24e958b1165f48b22625c5bab688043")
ARCHS = ("galerkin",)
NETWORK = "SimpleTransformer / FourierTransformer2D (galerkin-transformer @ f9e7d6a, restated)"


################################################################################################
# Configuration: the serde JSON of crates/ono-models/src/galerkin/config.rs `GalerkinConfig`
################################################################################################

_ENUMS = {
    "model": ("simple_transformer", "fourier_transformer2d"),
    "attention_type": ("galerkin", "fourier", "linear", "softmax"),
    "ffn_activation": ("relu", "silu", "gelu"),
    "decoder": ("spectral", "pointwise"),
    "regressor_activation": ("silu", "relu"),
    "attention_dropout": ("training", "reference"),
    "downscaler_activation": ("relu", "silu"),
    "upscaler_activation": ("relu", "silu"),
}
_INT = ("space_dim", "fun_dim", "out_dim", "n_hidden", "n_head", "dim_feedforward", "freq_dim",
        "fourier_modes")
_USIZE = ("num_encoder_layers", "num_regressor_layers")
_FLOAT = ("xavier_init", "diagonal_weight", "norm_eps", "dropout", "encoder_dropout", "ffn_dropout",
          "decoder_dropout", "downscaler_dropout", "upscaler_dropout")
_SIZES = ("downscaler_size", "upscaler_size")

# presets.rs `base()`, the `burgers` preset: serde's default for every absent field.
BASE = dict(
    model="simple_transformer", space_dim=1, fun_dim=1, out_dim=1, n_hidden=96, n_head=1,
    num_encoder_layers=4, dim_feedforward=192, attention_type="galerkin", layer_norm=False,
    attn_norm=True, xavier_init=0.01,
    diagonal_weight=0.01, norm_eps=1e-5, ffn_activation="relu", decoder="spectral",
    regressor_activation="silu", freq_dim=48, fourier_modes=16, num_regressor_layers=2,
    dropout=0.0, encoder_dropout=0.0, ffn_dropout=0.0, decoder_dropout=0.0,
    attention_dropout="training", scaler_grids=None, downscaler_size=None, upscaler_size=None,
    downscaler_activation="silu", upscaler_activation="silu", downscaler_dropout=0.0,
    upscaler_dropout=0.0, dirichlet=False)


def _darcy_preset(fine, coarse, norm_eps):
    return dict(BASE, model="fourier_transformer2d", space_dim=2, n_hidden=128, n_head=4,
                num_encoder_layers=6, dim_feedforward=256, norm_eps=norm_eps, freq_dim=32,
                fourier_modes=12, encoder_dropout=0.05, ffn_dropout=0.1,
                scaler_grids=dict(fine=fine, coarse=coarse, output="fine", scale_factor=True),
                downscaler_activation="relu", upscaler_activation="silu", downscaler_dropout=0.05,
                dirichlet=True)


# presets.rs, for the parameter counts of the reference configurations.
PRESETS = {
    "burgers": dict(BASE),
    "burgers_fourier": dict(BASE, attention_type="fourier", xavier_init=1e-3),
    "darcy": _darcy_preset(141, 43, 1e-7),
    "darcy_211": _darcy_preset(211, 61, 1e-5),
    "darcy_inverse": dict(
        BASE, model="fourier_transformer2d", space_dim=2, n_hidden=192, n_head=4,
        num_encoder_layers=6, dim_feedforward=384, norm_eps=1e-7, decoder="pointwise",
        regressor_activation="silu", num_regressor_layers=1, dropout=0.05, encoder_dropout=0.05,
        ffn_dropout=0.05, decoder_dropout=0.05,
        scaler_grids=dict(fine=141, coarse=36, output="coarse", scale_factor=True),
        downscaler_activation="silu", upscaler_activation="silu", downscaler_dropout=0.05,
        upscaler_dropout=0.05, dirichlet=False),
}


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _bad(msg):
    raise ValueError(f"galerkin: {msg}")


def _np_round(x, decimals):
    # np.round: x·10^d rounded half to even, divided by 10^d (scaler_sizes.rs `np_round`).
    scale = 10.0 ** decimals
    return float(np.rint(x * scale)) / scale


def scale_factor(n_f, n_c):
    """The reference's scale factor for the grid pair (`DarcyDataset.get_scaler_sizes`,
    libs/ft.py L699-714, in the same float64 arithmetic; scaler_sizes.rs `scale_factor`)."""
    if n_f < 1 or n_c < 1:
        _bad(f"get_scaler_sizes needs positive grid sizes, got n_f {n_f}, n_c {n_c}")
    factor = _np_round(math.sqrt(n_c / n_f), 4)
    # The reference reads the last character of str(factor); repr is the same shortest form.
    last = repr(factor)[-1]
    last_digit = int(last) if last.isdigit() else 0
    factor = _np_round(factor, 3)
    if last_digit < 5:
        factor += 5e-3
    return math.trunc(factor / 5e-3 + 5e-1) * 5e-3


def scaler_sizes(n_f, n_c, use_scale_factor=True):
    """(factor, down, up) of `get_scaler_sizes(n_f, n_c, scale_factor)` as sizes: with the scale
    factor, the downscaler's sizes are ⌊n_f·f⌋ and ⌊⌊n_f·f⌋·f⌋ (what bilinear interpolation with
    `recompute_scale_factor=True` produces); without, (n_m, n_c). The upscaler: n_m → n_f, with
    n_m = round(n_f·f) − 1 (half to even, Python's `round`)."""
    f = scale_factor(n_f, n_c)
    n_m = round(n_f * f) - 1
    if use_scale_factor:
        d1 = math.floor(n_f * f)
        d2 = math.floor(d1 * f)
        down = [[d1, d1], [d2, d2]]
    else:
        down = [[n_m, n_m], [n_c, n_c]]
    return f, down, [[n_m, n_m], [n_f, n_f]]


class Config:
    """A validated configuration (config.rs `GalerkinConfig` with its `validate`): serde's
    defaults (the burgers preset) for absent fields, unknown fields refused."""

    def __init__(self, fields):
        if not isinstance(fields, dict):
            _bad(f"fields must be a dict, got {type(fields).__name__}")
        merged = dict(BASE)
        for key, value in fields.items():
            if key not in BASE:
                _bad(f"unknown field {key!r}, expected one of {sorted(BASE)}")
            merged[key] = value
        for key, value in merged.items():
            self._check_type(key, value)
        self.fields = merged
        for key, value in merged.items():
            setattr(self, key, value)
        for key in _FLOAT:
            setattr(self, key, float(merged[key]))
        self.two_d = self.model == "fourier_transformer2d"
        self.sizes = None
        self._validate()

    @staticmethod
    def _check_type(key, value):
        if key in _ENUMS:
            ok, want = value in _ENUMS[key], " or ".join(repr(e) for e in _ENUMS[key])
        elif key in _INT:
            ok, want = _is_int(value), "an integer"
        elif key in _USIZE:
            ok, want = _is_int(value) and value >= 0, "a non-negative integer"
        elif key in _FLOAT:
            ok, want = (isinstance(value, (int, float)) and not isinstance(value, bool)), "a number"
        elif key in ("dirichlet", "layer_norm", "attn_norm"):
            ok, want = isinstance(value, bool), "true or false"
        elif key in _SIZES:
            ok = value is None or (isinstance(value, (list, tuple)) and len(value) == 2 and all(
                isinstance(p, (list, tuple)) and len(p) == 2 and all(_is_int(s) for s in p)
                for p in value))
            want = "null or [[h, w], [h, w]]"
        elif key == "scaler_grids":
            ok = value is None or (
                isinstance(value, dict) and {"fine", "coarse"} <= set(value)
                and set(value) <= {"fine", "coarse", "output", "scale_factor"}
                and _is_int(value["fine"]) and _is_int(value["coarse"])
                and value.get("output", "fine") in ("fine", "coarse")
                and isinstance(value.get("scale_factor", True), bool))
            want = "null or {fine, coarse, output: fine|coarse, scale_factor: bool}"
        else:
            ok, want = False, "a known field"
        if not ok:
            _bad(f"{key} must be {want}, got {value!r}")

    def grid_dims(self):
        """The dimension of the decoder's FFTs: 2 for fourier_transformer2d, else space_dim."""
        return 2 if self.two_d else max(self.space_dim, 0)

    def scaler_sizes(self):
        """(down, up) of the 2-D model (config.rs `scaler_sizes`)."""
        g, down, up = self.scaler_grids, self.downscaler_size, self.upscaler_size
        if g is not None and down is None and up is None:
            fine, coarse = g["fine"], g["coarse"]
            f, down, up = scaler_sizes(fine, coarse, g.get("scale_factor", True))
            if down[1] != [coarse, coarse]:
                _bad(f"scaler_grids {g}: the scale-factor path interpolates by f = {f} twice, "
                     f"{fine} -> {down[0][0]} -> {down[1][0]}, which misses the coarse grid "
                     f"{coarse}; give explicit downscaler_size and upscaler_size (or "
                     "scale_factor = false) instead")
            if g.get("output", "fine") == "coarse":
                up = [[coarse, coarse], [coarse, coarse]]
            if any(s < 1 for pair in down + up for s in pair):
                _bad(f"scaler_grids {g} give the sizes {down}, {up}: too small a grid")
            return down, up
        if g is not None:
            _bad("give either scaler_grids or explicit downscaler_size and upscaler_size, not both")
        if down is not None and up is not None and all(s > 0 for p in list(down) + list(up)
                                                       for s in p):
            return [list(p) for p in down], [list(p) for p in up]
        _bad(f"fourier_transformer2d needs scaler_grids, or positive downscaler_size and "
             f"upscaler_size; got {down} and {up}")

    def _validate(self):
        if self.space_dim < 1 or (not self.two_d and self.space_dim > 2):
            _bad(f"space_dim must be 1 or 2 (fourier_transformer2d: any >= 1), got "
                 f"{self.space_dim}")
        if self.fun_dim < 1 or self.out_dim < 1:
            _bad(f"fun_dim {self.fun_dim} and out_dim {self.out_dim} must be positive")
        if self.n_hidden < 1 or self.n_head < 1 or self.n_hidden % self.n_head:
            _bad(f"n_hidden {self.n_hidden} must be a positive multiple of n_head {self.n_head}")
        if not self.layer_norm and not self.attn_norm:
            _bad("layer_norm and attn_norm are both false; the reference turns attn_norm on "
                 "then (set attn_norm = true)")
        if min(self.dim_feedforward, self.freq_dim, self.fourier_modes,
               self.num_regressor_layers) < 1:
            _bad("dim_feedforward, freq_dim, fourier_modes and num_regressor_layers must be "
                 "positive")
        for key in ("dropout", "encoder_dropout", "ffn_dropout", "decoder_dropout",
                    "downscaler_dropout", "upscaler_dropout"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                _bad(f"{key} must lie in [0, 1], got {getattr(self, key)}")
        finite = all(math.isfinite(v) for v in (self.norm_eps, self.xavier_init,
                                                 self.diagonal_weight))
        if not (finite and self.norm_eps > 0 and self.xavier_init >= 0):
            _bad(f"norm_eps {self.norm_eps} must be positive, xavier_init {self.xavier_init} >= 0, "
                 f"diagonal_weight {self.diagonal_weight} finite")
        if self.decoder == "pointwise" and not self.two_d:
            _bad("the pointwise decoder is ported for fourier_transformer2d only")
        if self.decoder == "spectral" and self.regressor_activation != "silu":
            _bad("regressor_activation other than silu is for the pointwise decoder only")
        explicit = self.downscaler_size is not None or self.upscaler_size is not None
        if not self.two_d:
            if explicit or self.scaler_grids is not None:
                _bad("scaler_grids, downscaler_size and upscaler_size belong to "
                     "fourier_transformer2d")
            return
        if self.n_hidden < 3:
            _bad("the downscaler splits n_hidden in three: at least 3")
        self.sizes = self.scaler_sizes()
        o1, o2 = self.sizes[1][1]
        m = self.fourier_modes
        if self.decoder == "spectral" and (m > o1 or m > o2 // 2 + 1):
            _bad(f"{m} Fourier modes do not fit the output grid [{o1}, {o2}]")


################################################################################################
# Layers (libs/layers.py, libs/model.py), in the reference's construction order
################################################################################################

def _act(name):
    return {"relu": F.relu, "silu": F.silu, "gelu": F.gelu}[name]


class Identity(nn.Module):
    """`layers.Identity(in, out)`: the feature lift `feat_extract.id` (a Linear)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.id = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.id(x)


class GalerkinAttention(nn.Module):
    """`SimpleAttention` with its per-head LayerNorms when `attn_norm` (norm_K with norm_V for
    galerkin and linear, norm_K with norm_Q for fourier and softmax), the coordinates in front of
    every head, and `fc` back to d."""

    def __init__(self, c):
        super().__init__()
        d, h = c.n_hidden, c.n_head
        self.kind, self.n_head, self.d_k, self.pos_dim = c.attention_type, h, d // h, c.space_dim
        self.dropout, self.dropout_mode = c.encoder_dropout, c.attention_dropout
        self.linears = nn.ModuleList([copy.deepcopy(nn.Linear(d, d)) for _ in range(3)])
        if c.xavier_init > 0:
            for param in self.linears.parameters():
                if param.ndim > 1:
                    xavier_uniform_(param, gain=c.xavier_init)
                    if c.diagonal_weight > 0.0:
                        param.data += c.diagonal_weight * torch.diag(
                            torch.ones(param.size(-1), dtype=torch.float))
                else:
                    constant_(param, 0)
        norms = lambda: nn.ModuleList([copy.deepcopy(nn.LayerNorm(self.d_k, eps=c.norm_eps))
                                       for _ in range(h)])
        self.norm = c.attn_norm
        if self.norm:
            self.norm_K = norms()
            if self.kind in ("galerkin", "linear"):
                self.norm_V = norms()
            else:
                self.norm_Q = norms()
        self.fc = nn.Linear(d + h * self.pos_dim, d)

    def _drop(self, m):
        if self.dropout_mode == "reference":
            return F.dropout(m)  # the reference's call: p = 0.5, training, in every mode
        if self.training and self.dropout > 0:
            return F.dropout(m, self.dropout, True)
        return m

    @staticmethod
    def _per_head(norms, x):
        return torch.stack([norm(x[:, i]) for i, norm in enumerate(norms)], dim=1)

    def forward(self, x, pos):
        b, n, _ = x.shape
        h, d_k = self.n_head, self.d_k
        q, k, v = [layer(x).view(b, n, h, d_k).transpose(1, 2) for layer in self.linears]
        if self.norm:
            k = self._per_head(self.norm_K, k)
            if self.kind in ("galerkin", "linear"):
                v = self._per_head(self.norm_V, v)
            else:
                q = self._per_head(self.norm_Q, q)
        pos = pos.to(q.dtype).unsqueeze(1).expand(b, h, n, self.pos_dim)
        q, k, v = [torch.cat([pos, t], dim=-1) for t in (q, k, v)]
        width = d_k + self.pos_dim
        if self.kind in ("galerkin", "linear"):
            if self.kind == "linear":
                q, k = q.softmax(dim=-1), k.softmax(dim=-2)
            context = torch.matmul(k.transpose(-2, -1), v) / n
            out = torch.matmul(q, self._drop(context))
        else:
            scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(width)
            scores = scores.softmax(dim=-1) if self.kind == "softmax" else scores / n
            out = torch.matmul(self._drop(scores), v)
        return self.fc(out.transpose(1, 2).reshape(b, n, h * width))


class FeedForward(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.lr1 = nn.Linear(c.n_hidden, c.dim_feedforward)
        self.lr2 = nn.Linear(c.dim_feedforward, c.n_hidden)
        self.act, self.p = _act(c.ffn_activation), c.ffn_dropout

    def forward(self, x):
        return self.lr2(F.dropout(self.act(self.lr1(x)), self.p, self.training))


class EncoderLayer(nn.Module):
    """`SimpleTransformerEncoderLayer`: x + drop(Attn), x + drop(FFN), each followed by a
    LayerNorm(d) with `layer_norm` (the paper's regular normalization)."""

    def __init__(self, c):
        super().__init__()
        self.attn = GalerkinAttention(c)
        self.post = c.layer_norm
        if self.post:
            self.layer_norm1 = nn.LayerNorm(c.n_hidden, eps=c.norm_eps)
            self.layer_norm2 = nn.LayerNorm(c.n_hidden, eps=c.norm_eps)
        self.ff = FeedForward(c)
        self.p = c.encoder_dropout

    def forward(self, x, pos):
        x = x + F.dropout(self.attn(x, pos), self.p, self.training)
        if self.post:
            x = self.layer_norm1(x)
        x = x + F.dropout(self.ff(x), self.p, self.training)
        return self.layer_norm2(x) if self.post else x


class SpectralConv(nn.Module):
    """`SpectralConv1d` / `SpectralConv2d`: SiLU(K(x) + linear(x)), K keeping the lowest modes
    of an "ortho" rFFT (2-D: the [:m, :m] and [-m:, :m] blocks, the later winning where they
    overlap); the weights real (in, out, m..., 2) as the reference stores them."""

    def __init__(self, cin, cout, modes, p):
        super().__init__()
        self.modes, self.cout, self.p = list(modes), cout, p
        self.linear = nn.Linear(cin, cout)
        shape = (cin, cout, *modes, 2)
        if len(modes) == 1:
            self.fourier_weight = nn.Parameter(torch.empty(shape))
            xavier_normal_(self.fourier_weight, gain=1 / (cin * cout))
        else:
            self.fourier_weight = nn.ParameterList(
                [nn.Parameter(torch.empty(shape)) for _ in range(2)])
            for param in self.fourier_weight:
                xavier_normal_(param, gain=1 / (cin * cout) * np.sqrt(cin + cout))

    def forward(self, x):
        d = len(self.modes)
        res = self.linear(x)
        x = F.dropout(x, self.p, self.training)
        x = x.movedim(-1, 1)
        spatial = list(x.shape[2:])
        dims = tuple(range(-d, 0))
        xf = torch.fft.rfftn(x, dim=dims, norm="ortho")
        out = torch.zeros(x.shape[0], self.cout, *spatial[:-1], spatial[-1] // 2 + 1,
                          dtype=xf.dtype, device=x.device)
        weights = [self.fourier_weight] if d == 1 else list(self.fourier_weight)
        letters = "xy"[:d]
        for c, w in enumerate(weights):
            idx = [slice(None), slice(None)]
            for j, m in enumerate(self.modes):
                start = spatial[j] - m if (j + 1 < d and (c >> j) & 1) else 0
                idx.append(slice(start, start + m))
            idx = tuple(idx)
            out[idx] = torch.einsum(f"bi{letters},io{letters}->bo{letters}", xf[idx],
                                    torch.view_as_complex(w.contiguous()))
        x = torch.fft.irfftn(out, s=spatial, dim=dims, norm="ortho")
        return F.silu(x.movedim(1, -1) + res)


class SpectralRegressor(nn.Module):
    """fc([x, coordinates]) (FourierTransformer2D only) → spectral layers → Linear, SiLU, Linear;
    the head's width is freq_dim for SimpleTransformer, 2·2·freq_dim for FourierTransformer2D."""

    def __init__(self, c):
        super().__init__()
        if c.two_d:
            self.fc = nn.Linear(c.n_hidden + c.space_dim, c.freq_dim)
        modes = [c.fourier_modes] * c.grid_dims()
        first = c.freq_dim if c.two_d else c.n_hidden
        self.spectral_conv = nn.ModuleList(
            [SpectralConv(first if j == 0 else c.freq_dim, c.freq_dim, modes, c.decoder_dropout)
             for j in range(c.num_regressor_layers)])
        hidden = 2 * c.grid_dims() * c.freq_dim if c.two_d else c.freq_dim
        self.regressor = nn.Sequential(nn.Linear(c.freq_dim, hidden), nn.SiLU(),
                                       nn.Linear(hidden, c.out_dim))

    def forward(self, x, coords=None):
        if hasattr(self, "fc"):
            x = self.fc(torch.cat([x, coords.to(x.dtype)], dim=-1))
        for layer in self.spectral_conv:
            x = layer(x)
        return self.regressor(x)


class PointwiseRegressor(nn.Module):
    """`PointwiseRegressor` with spacial_fc: fc([x, coordinates]) (no activation), then
    num_regressor_layers × (Linear → activation → dropout), then `out`."""

    def __init__(self, c):
        super().__init__()
        h = c.n_hidden
        self.fc = nn.Linear(c.n_hidden + c.space_dim, h)
        # `ff.{j}.0`: the reference's Sequential(Linear, activation); the activation is applied
        # in forward.
        self.ff = nn.ModuleList([nn.Sequential(nn.Linear(h, h))
                                 for _ in range(c.num_regressor_layers)])
        self.out = nn.Linear(h, c.out_dim)
        self.act, self.p = _act(c.regressor_activation), c.decoder_dropout

    def forward(self, x, coords):
        x = self.fc(torch.cat([x, coords.to(x.dtype)], dim=-1))
        for layer in self.ff:
            x = F.dropout(self.act(layer(x)), self.p, self.training)
        return self.out(x)


class ConvBlock(nn.Module):
    """`Conv2dResBlock(residual=False)`: `conv` = (3×3 Conv2d without bias, Dropout); the
    caller applies the activation."""

    def __init__(self, cin, cout, p):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.Dropout(p))

    def forward(self, x):
        return self.conv(x)


def _interpolate(x, size):
    return F.interpolate(x, size=tuple(size), mode="bilinear", align_corners=True)


class Interp2dEncoder(nn.Module):
    """conv0 → interpolate → act → conv1, conv2, conv3 chained (d//3, d//3, the rest) → cat →
    interpolate → act; every conv followed by the activation."""

    def __init__(self, cin, d, sizes, act, p):
        super().__init__()
        d0 = d1 = d // 3
        self.conv0 = ConvBlock(cin, d, p)
        self.conv1 = ConvBlock(d, d0, p)
        self.conv2 = ConvBlock(d0, d1, p)
        self.conv3 = ConvBlock(d1, d - d0 - d1, p)
        self.sizes, self.act = sizes, _act(act)

    def forward(self, x):
        a = self.act
        x = a(_interpolate(a(self.conv0(x)), self.sizes[0]))
        x1 = a(self.conv1(x))
        x2 = a(self.conv2(x1))
        x3 = a(self.conv3(x2))
        return a(_interpolate(torch.cat([x1, x2, x3], dim=1), self.sizes[1]))


class Interp2dUpsample(nn.Module):
    """interpolate → `conv` = (ConvBlock, Dropout, act) with the block's own act too (two in a
    row) → interpolate."""

    def __init__(self, d, sizes, act, p):
        super().__init__()
        self.conv = nn.Sequential(ConvBlock(d, d, p), nn.Dropout(p))
        self.sizes, self.act = sizes, _act(act)

    def forward(self, x):
        x = _interpolate(x, self.sizes[0])
        x = self.act(self.conv[1](self.act(self.conv[0](x))))
        return _interpolate(x, self.sizes[1])


class Scaler(nn.Module):
    """`DownScaler` / `UpScaler`: the name level `downsample` / `upsample`."""

    def __init__(self, name, module):
        super().__init__()
        self.add_module(name, module)
        self.inner = name

    def forward(self, x):
        return getattr(self, self.inner)(x)


class GalerkinTransformer(nn.Module):
    """`SimpleTransformer` or `FourierTransformer2D` (config `model`), built in the reference's
    order: feature lift or scalers, one encoder layer deep-copied, the regressor."""

    def __init__(self, c):
        super().__init__()
        self.cfg = c
        if c.two_d:
            down, up = c.sizes
            self.downscaler = Scaler("downsample", Interp2dEncoder(
                c.fun_dim, c.n_hidden, down, c.downscaler_activation, c.downscaler_dropout))
            self.upscaler = Scaler("upsample", Interp2dUpsample(
                c.n_hidden, up, c.upscaler_activation, c.upscaler_dropout))
        else:
            self.feat_extract = Identity(c.fun_dim, c.n_hidden)
        layer = EncoderLayer(c)
        self.encoder_layers = nn.ModuleList(
            [copy.deepcopy(layer) for _ in range(c.num_encoder_layers)])
        self.regressor = (PointwiseRegressor(c) if c.decoder == "pointwise"
                          else SpectralRegressor(c))

    def _dropout(self, x):
        return F.dropout(x, self.cfg.dropout, self.training)

    def forward_points(self, fx, pos, shape):
        """SimpleTransformer: (B, N, fun_dim), (B, N, p) → (B, grid..., out_dim)."""
        x = self.feat_extract(fx)
        for layer in self.encoder_layers:
            x = layer(x, pos)
        x = self._dropout(x)
        return self.regressor(x.reshape(fx.shape[0], *shape, self.cfg.n_hidden))

    def forward_2d(self, node, coarse, grid):
        """FourierTransformer2D before the normaliser and the boundary condition: node (B, n1,
        n2, fun_dim), coarse (B, nc1·nc2, p) the attention's coordinates, grid (B, o1, o2, p) the
        output grid's coordinates → (B, o1, o2, out_dim)."""
        c, b = self.cfg, node.shape[0]
        x = self.downscaler(node.permute(0, 3, 1, 2))
        nc1, nc2 = x.shape[2], x.shape[3]
        x = self._dropout(x.permute(0, 2, 3, 1).reshape(b, nc1 * nc2, c.n_hidden))
        for layer in self.encoder_layers:
            x = layer(x, coarse)
        x = x.reshape(b, nc1, nc2, c.n_hidden).permute(0, 3, 1, 2)
        x = self._dropout(self.upscaler(x).permute(0, 2, 3, 1))
        if tuple(grid.shape[:3]) != tuple(x.shape[:3]):
            _bad(f"the output grid's coordinates must be {tuple(x.shape[:3])}, got "
                 f"{tuple(grid.shape)}")
        return self.regressor(x, grid)

    def boundary(self, x):
        """The Dirichlet ring (x[:, 1:-1, 1:-1] kept, the outer ring 0) when configured."""
        if not self.cfg.dirichlet:
            return x
        return F.pad(x[:, 1:-1, 1:-1], (0, 0, 1, 1, 1, 1))


################################################################################################
# Interface
################################################################################################

def build(arch, fields):
    """The model of `arch` from its configuration fields (the Rust serde JSON without "arch", data
    dims set), with the reference's own initialisation drawn from torch's global generator."""
    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}; this module serves {ARCHS}")
    return GalerkinTransformer(Config(fields))


def _param_dtype(model):
    return model.regressor.regressor[0].weight.dtype if isinstance(
        model.regressor, SpectralRegressor) else model.regressor.out.weight.dtype


def _grid_shape(c, grid, n, two_d_scalers):
    d = c.grid_dims()
    if grid is not None:
        shape = [int(s) for s in (grid.tolist() if torch.is_tensor(grid) else grid)]
    elif d == 1:
        shape = [n]
    else:
        _bad(f"a {d}-D model needs the points as a regular grid; pass its shape")
    fits = len(shape) == d and all(s > 0 for s in shape) and math.prod(shape) == n
    expected = f"a {d}-D grid of the {n} points"
    if not two_d_scalers:
        m = c.fourier_modes
        fits = fits and all(m <= (s // 2 + 1 if j + 1 == d else s) for j, s in enumerate(shape))
        expected += f" with room for {m} Fourier modes per axis"
    if c.scaler_grids is not None:
        fine = c.scaler_grids["fine"]
        fits = fits and shape == [fine, fine]
        expected = f"the fine grid [{fine}, {fine}] of scaler_grids"
    if not fits:
        _bad(f"grid {shape}: expected {expected}")
    return shape


def forward(model, pos, fx, grid=None, time=None, query=None):
    """What the Rust `NeuralOperator::forward` returns for ModelInput { pos, fx, grid, query }:
    (B, N, out_dim), or (B, M, out_dim) in the query's order when fourier_transformer2d's output
    grid (the upscaler's last size) differs from the input grid. Train/eval follows
    `model.training`. `time` is refused, as the port refuses it; `query` is the output grid's M
    points in row-major order, required exactly when the output grid differs from the input's."""
    c = model.cfg
    if time is not None:
        raise ValueError("galerkin takes no time input")
    if pos.dim() != 3 or pos.shape[0] < 1 or pos.shape[1] < 1 or pos.shape[2] != c.space_dim:
        _bad(f"pos must be (B, N, {c.space_dim}) with B, N > 0, got {tuple(pos.shape)}")
    b, n = pos.shape[0], pos.shape[1]
    if fx is None or tuple(fx.shape) != (b, n, c.fun_dim):
        _bad(f"fx must be ({b}, {n}, {c.fun_dim}), got {None if fx is None else tuple(fx.shape)}")
    shape = _grid_shape(c, grid, n, c.two_d)
    if not c.two_d and query is not None:
        _bad("the point model takes no query")
    dtype = _param_dtype(model)
    pos, fx = pos.to(dtype), fx.to(dtype)
    for t, what in ((pos, "pos"), (fx, "fx"), (query, "query")):
        if t is not None and not torch.isfinite(t).all():
            _bad(f"the input {what} is not finite")
    if not c.two_d:
        out = model.forward_points(fx, pos, shape)
        return out.reshape(b, -1, c.out_dim)
    down, up = c.sizes
    out_grid = list(up[1])
    fine = pos.reshape(b, *shape, c.space_dim)
    coarse = _interpolate(fine.permute(0, 3, 1, 2), down[1]).permute(0, 2, 3, 1).reshape(
        b, down[1][0] * down[1][1], c.space_dim)
    if shape == out_grid:
        if query is not None:
            _bad("the output grid is the input grid: no query")
        coords = fine
    else:
        m = out_grid[0] * out_grid[1]
        if query is None or tuple(query.shape) != (b, m, c.space_dim):
            _bad(f"the output grid {out_grid} differs from the input grid {shape}: pass its "
                 f"points as query ({b}, {m}, {c.space_dim}), got "
                 f"{None if query is None else tuple(query.shape)}")
        coords = query.to(dtype).reshape(b, *out_grid, c.space_dim)
    out = model.forward_2d(fx.reshape(b, *shape, c.fun_dim), coarse, coords)
    return model.boundary(out).reshape(b, -1, c.out_dim)


def _spectral_weights(model):
    return {n for n, _ in model.named_parameters() if ".fourier_weight" in n}


def load_reference(model, tensors):
    """Loads every parameter of `model` from `tensors` (the reference's names, e.g.
    `encoder_layers.0.attn.norm_K.1.bias`, `regressor.spectral_conv.0.fourier_weight.1`),
    strictly: nothing missing, nothing extra, every shape equal. The spectral weights are real
    (…, 2) tensors in the reference and in ono's export; they are also taken as
    `<name>.view_as_real` or as complex tensors."""
    own = dict(model.named_parameters())
    own.update(model.named_buffers())
    spectral = _spectral_weights(model)
    given, named, problems = {}, set(), []
    for key, value in tensors.items():
        name = key[:-len(".view_as_real")] if key.endswith(".view_as_real") else key
        named.add(name)
        if name not in own:
            problems.append(f"not in the model: {key}")
        elif (key != name or value.is_complex()) and name not in spectral:
            problems.append(f"{key}: {name} is not a spectral weight")
        elif name in given:
            problems.append(f"{name} is given twice")
        else:
            if value.is_complex():
                value = torch.view_as_real(value)
            if list(value.shape) != list(own[name].shape):
                problems.append(f"{key}: shape {list(value.shape)}, the model has "
                                f"{list(own[name].shape)}")
            else:
                given[name] = value
    missing = sorted(set(own) - named)
    if missing:
        problems.append(f"missing: {missing}")
    if problems:
        raise ValueError(f"load_reference ({type(model).__name__}): " + "; ".join(problems))
    with torch.no_grad():
        for name, value in given.items():
            own[name].copy_(value)


def loss(pred, y, grid, h1_gamma, aux):
    """The training loss of `LossKind::GalerkinH1` (crates/ono-train/src/step.rs `galerkin`,
    loss.rs `galerkin_h1_loss_1d/2d`): the reference's `WeightedL2Loss` on a 1-D grid,
    `WeightedL2Loss2d` on a 2-D one, each a batch MEAN, with h = 1/n (the first axis in 2-D).

    - 1-D: mean_b √(Σ(p−u)² / Σu²) + mean_b √(γh·Σ_interior(u′ − D̂p)² / Σu′²), D̂ the central
      difference, u′ = `aux` (B, N, 1).
    - 2-D: mean_b √(mean(p−u)² / (mean u² + ε)) + mean_b √(γh·mean_interior[(K(∇u − ∇ₕp))²] /
      (2·mean(K·(∇u)²) + ε)), ε = 1e-10, `aux` (B, N, 3) = (∂_row u, ∂_column u, K).

    `pred`, `y`: decoded (B, N, 1) on the grid `grid` ([n] or [n1, n2], row-major); `aux` is read
    only when h1_gamma > 0 (then required)."""
    b = pred.shape[0]
    with_h1 = h1_gamma > 0.0
    if with_h1 and aux is None:
        raise ValueError("the galerkin_h1 loss with h1_gamma > 0 needs the targets' derivatives "
                         "as aux")
    grid = None if grid is None else [int(s) for s in grid]
    if grid is not None and (tuple(pred.shape[1:]) != (math.prod(grid), 1)
                             or y.shape != pred.shape):
        _bad(f"the galerkin_h1 loss needs scalar (B, {math.prod(grid)}, 1) predictions and "
             f"targets on the grid {grid}, got {tuple(pred.shape)} and {tuple(y.shape)}")
    k = pred.dtype
    if grid is not None and len(grid) == 1:
        n = grid[0]
        p, u = pred.reshape(b, n), y.reshape(b, n)
        if n < 3:
            _bad("galerkin_h1_loss_1d needs n >= 3")
        h = 1.0 / n
        l2 = ((p - u).square().sum(1, dtype=k) / u.square().sum(1, dtype=k)).sqrt().mean(dtype=k)
        if not with_h1:
            return l2
        du = aux.reshape(b, n)
        dp = (p[:, 2:] - p[:, :-2]) / (2.0 * h)
        h1 = ((du[:, 1:-1] - dp).square().sum(1, dtype=k) * (h1_gamma * h)
              / du.square().sum(1, dtype=k)).sqrt().mean(dtype=k)
        return l2 + h1
    if grid is not None and len(grid) == 2:
        n1, n2 = grid
        if n1 < 3 or n2 < 3:
            _bad("galerkin_h1_loss_2d needs n1, n2 >= 3")
        eps = 1e-10
        p, u = pred.reshape(b, n1, n2), y.reshape(b, n1, n2)
        h = 1.0 / n1
        l2 = ((p - u).square().mean((1, 2), dtype=k)
              / (u.square().mean((1, 2), dtype=k) + eps)).sqrt().mean(dtype=k)
        if not with_h1:
            return l2
        grad_u = aux[..., 0:2].reshape(b, n1, n2, 2)
        coeff = aux[..., 2].reshape(b, n1, n2).unsqueeze(3)
        d_rows = p[:, 2:, 1:-1] - p[:, :-2, 1:-1]
        d_cols = p[:, 1:-1, 2:] - p[:, 1:-1, :-2]
        grad_p = torch.stack([d_rows, d_cols], 3) / (2.0 * h)
        norm = (coeff * grad_u.square()).mean((1, 2, 3), dtype=k) * 2.0 + eps
        inner = lambda t: t[:, 1:-1, 1:-1]
        num = (inner(coeff) * (inner(grad_u) - grad_p)).square().mean((1, 2, 3), dtype=k)
        h1 = (num * (h1_gamma * h) / norm).sqrt().mean(dtype=k)
        return l2 + h1
    raise ValueError("the galerkin_h1 loss needs targets on a 1-D or 2-D grid")


################################################################################################
# Check against the fixtures
################################################################################################

CASES = ("gt1d_small", "ft1d_small", "gt2d_small", "inv2d_small", "gt1d_post_ln_small",
         "ft1d_post_ln_small")


def fields_of_reference(meta):
    """`fields` of a fixture case: its constructor kwargs read as crates/ono-models/src/galerkin/
    reference.rs `from_reference` reads them (the keys these cases have; the data dims are the
    kwargs' node_feats, pos_dim, n_targets)."""
    kw = meta["constructor_kwargs"]
    two_d = meta["model_class"] == "FourierTransformer2D"
    assert meta["model_class"] in ("SimpleTransformer", "FourierTransformer2D")
    assert kw["spacial_dim"] == kw["pos_dim"]
    # SimpleTransformerEncoderLayer: attn_norm = default(attn_norm, not layer_norm), and on when
    # both are off.
    layer_norm = bool(kw.get("layer_norm", False))
    attn_norm = kw.get("attn_norm")
    attn_norm = (not layer_norm if attn_norm is None else bool(attn_norm)) or not layer_norm
    decoder = "pointwise" if kw["decoder_type"] == "pointwise" else "spectral"
    attention = kw["attention_type"]
    enc_drop = 0.1 if attention in ("linear", "softmax") else kw.get("encoder_dropout", 0.05)
    fields = dict(
        model="fourier_transformer2d" if two_d else "simple_transformer",
        space_dim=kw["pos_dim"], fun_dim=kw["node_feats"], out_dim=kw["n_targets"],
        n_hidden=kw["n_hidden"], n_head=kw["n_head"],
        num_encoder_layers=kw["num_encoder_layers"],
        dim_feedforward=kw.get("dim_feedforward", 2 * kw["n_hidden"]),
        attention_type=attention, layer_norm=layer_norm, attn_norm=attn_norm,
        xavier_init=kw["xavier_init"],
        diagonal_weight=kw.get("diagonal_weight", 1e-2),
        norm_eps=kw.get("norm_eps", 1e-5) if two_d else 1e-5,
        ffn_activation=kw.get("attn_activation") or "relu", decoder=decoder,
        regressor_activation=(kw.get("regressor_activation") or
                              ("silu" if decoder == "spectral" else "relu")),
        freq_dim=kw.get("freq_dim", BASE["freq_dim"]),
        fourier_modes=kw.get("fourier_modes", BASE["fourier_modes"]),
        num_regressor_layers=kw.get("num_regressor_layers", 2), dropout=kw.get("dropout", 0.05),
        encoder_dropout=enc_drop, ffn_dropout=kw.get("ffn_dropout", enc_drop),
        decoder_dropout=kw.get("decoder_dropout", 0.1), attention_dropout="training",
        scaler_grids=None, downscaler_size=kw.get("downscaler_size") if two_d else None,
        upscaler_size=kw.get("upscaler_size") if two_d else None,
        downscaler_activation=kw.get("downscaler_activation") or "silu",
        upscaler_activation=kw.get("upscaler_activation") or "silu",
        downscaler_dropout=kw.get("downscaler_dropout", 0.1),
        upscaler_dropout=kw.get("upscaler_dropout", 0.1),
        dirichlet=kw.get("boundary_condition") == "dirichlet")
    return fields


def reference_call(model, t, dtype):
    """`model(node, None, pos, grid)['preds']` of the reference as reference.rs evaluates the
    port on a fixture: the 1-D model is the plain forward; the 2-D model takes the coarse `pos`
    and the output `grid` as given and applies the y-normaliser, then the boundary condition."""
    get = lambda k: t["input." + k].to(dtype)
    node, pos = get("node"), get("pos")
    if not model.cfg.two_d:
        return forward(model, pos, node)
    out = model.forward_2d(node, pos, get("grid"))
    out = out * (get("normalizer_y.std") + 1e-5) + get("normalizer_y.mean")
    return model.boundary(out)


def to_precision(model, dtype):
    # train_ref.py's: complex tensors to the complex counterpart (none here; kept for symmetry).
    complex_dtype = torch.complex128 if dtype == torch.float64 else torch.complex64
    return model._apply(lambda t: t.to(complex_dtype) if t.is_complex()
                        else t.to(dtype) if t.is_floating_point() else t)


def _meshgrid(n, b, dtype):
    """(b, n·n, 2): np.meshgrid(linspace(0, 1, n), linspace(0, 1, n)) flattened row-major,
    x fastest (DarcyDataset's convention)."""
    x, y = np.meshgrid(np.linspace(0, 1, n), np.linspace(0, 1, n))
    g = torch.tensor(np.stack([x.ravel(), y.ravel()], -1), dtype=dtype)
    return g.unsqueeze(0).expand(b, n * n, 2).contiguous()


def _check_case(name):
    t, meta = steplib.fixture("galerkin", name)
    t = {k: v.clone() for k, v in t.items()}
    tol = meta["tolerances"]
    out_tol, grad_tol = tol["output_rel"], tol["grad_rel"]
    overrides = tol.get("grad_rel_overrides", {})
    fields = fields_of_reference(meta)
    stored = {k[len("param."):]: v for k, v in t.items() if k.startswith("param.")}
    stored.update({k[len("buffer."):]: v for k, v in t.items() if k.startswith("buffer.")})
    rec, failures = {"case": f"galerkin/{name}"}, []

    def bound(key, err, limit):
        rec[key] = err
        if not err <= limit:
            failures.append(f"{key} {err:.3g} > {limit:.3g}")

    # The reference's initialisation: the same draws after the same seed, to the last bits that
    # MKL's vector math may round otherwise on another CPU (steplib).
    torch.manual_seed(0)
    model = build("galerkin", fields)
    own = dict(model.named_parameters())
    if set(own) != set(stored):
        failures.append(f"parameter names differ: {sorted(set(own) ^ set(stored))}")
        print(json.dumps(dict(rec, ok=False, failures=failures)), flush=True)
        return failures
    # The post-LayerNorms draw nothing (ones and zeros), and the post-LN fixtures perturbed
    # them after construction (make_post_ln_small.py): the draws are every other tensor.
    drawn = lambda n: ".layer_norm1." not in n and ".layer_norm2." not in n
    ulps, init_failures = steplib.init_draws(
        lambda: build("galerkin", fields),
        lambda m: [(p, stored[n]) for n, p in m.named_parameters() if drawn(n)])
    rec["init (float32 ulps after manual_seed(0))"] = ulps
    failures += init_failures
    count = steplib.count(model)
    rec["params"] = count
    if count != meta["param_count_real"] or count != meta["param_count_numel"]:
        failures.append(f"parameter count {count} != {meta['param_count_real']}")

    torch.manual_seed(123)
    model = build("galerkin", fields)
    load_reference(model, stored)
    y = t["input.y"]

    model.eval()
    with torch.no_grad():
        bound("output.eval", steplib.normwise(reference_call(model, t, torch.float32),
                                              t["output.eval"]), out_tol)
    model.train()
    out = reference_call(model, t, torch.float32)
    lossv = steplib.rel_l2_sum(out, y)
    lossv.backward()
    if "output.train" in t:
        bound("output.train", steplib.normwise(out.detach(), t["output.train"]), out_tol)
    bound("loss.train", steplib.normwise(lossv.detach(), t["loss.train"]), out_tol)
    worst = (None, 0.0, 0.0)
    for n, p in model.named_parameters():
        ref = t["grad." + n]
        mine = p.grad if p.grad is not None else torch.zeros_like(p)
        if ref.abs().max() == 0:
            err = mine.abs().max().item()
            if err != 0:
                failures.append(f"grad {n}: {err:.3g}, the reference has none")
            continue
        err, limit = steplib.normwise(mine, ref), overrides.get(n, grad_tol)
        if not err <= limit:
            failures.append(f"grad {n} {err:.3g} > {limit:.3g}")
        if err / limit >= worst[2]:
            worst = (n, err, err / limit)
    rec["grad worst (name, err, err/bound)"] = list(worst)

    # The same forward in float64 (train_ref's conversion) against the reference's float64.
    model.eval()
    to_precision(model, torch.float64)
    with torch.no_grad():
        out64 = reference_call(model, t, torch.float64)
        bound("output.eval_f64", steplib.normwise(out64, t["output.eval_f64"]),
              steplib.F64_STORED_REL)
        # The ModelInput path (what train_ref calls) against the reference call without the
        # normaliser: the points' own coordinates, interpolated to the coarse grid in 2-D.
        t64 = {k: v.double() for k, v in t.items()}
        node, pos = t64["input.node"], t64["input.pos"]
        b = node.shape[0]
        if not model.cfg.two_d:
            n = node.shape[1]
            same = forward(model, pos, node, [n]) - forward(model, pos, node)
            bound("forward: grid [n] vs None (max abs)", same.abs().max().item(), 0.0)
        else:
            # In exact float64 coordinates: the fixture's are float32 linspaces.
            n_f = node.shape[1]
            n_c = int(round(pos.shape[1] ** 0.5))
            fine, coarse = _meshgrid(n_f, b, torch.float64), _meshgrid(n_c, b, torch.float64)
            bound("input.pos vs the float64 coarse meshgrid (max abs)",
                  (pos - coarse).abs().max().item(), 1e-7)
            down, up = model.cfg.sizes
            interp = _interpolate(fine.reshape(b, n_f, n_f, 2).permute(0, 3, 1, 2), down[1])
            interp = interp.permute(0, 2, 3, 1).reshape(b, -1, 2)
            bound("coarse coordinates: interpolated vs meshgrid (max abs)",
                  (interp - coarse).abs().max().item(), 1e-15)
            out_n = up[1][0]
            query = None if out_n == n_f else coarse
            mine = forward(model, fine, node.reshape(b, n_f * n_f, -1), [n_f, n_f], query=query)
            out_coords = (fine if query is None else coarse).reshape(b, out_n, out_n, 2)
            ref = model.boundary(model.forward_2d(node, coarse, out_coords))
            bound("forward (ModelInput path) vs the reference call without the normaliser",
                  steplib.normwise(mine, ref.reshape(mine.shape)), 1e-12)
    rec["ok"] = not failures
    print(json.dumps(rec), flush=True)
    return failures


def _check_counts():
    """The reference configurations' counts (reference_param_counts.json) from the presets,
    built on the meta device."""
    with open(os.path.join(steplib.FIXTURES, "galerkin", "reference_param_counts.json")) as f:
        want = json.load(f)["configs"]
    rows = (("ex1_burgers_galerkin", "burgers"), ("ex1_burgers_fourier", "burgers_fourier"),
            ("ex2_darcy", "darcy"), ("ex3_darcy_inv", "darcy_inverse"))
    failures, got = [], {}
    for label, preset in rows:
        with torch.device("meta"):
            got[label] = steplib.count(build("galerkin", PRESETS[preset]))
        if got[label] != want[label]["param_count_real"]:
            failures.append(f"{label}: {got[label]} != {want[label]['param_count_real']}")
    print(json.dumps({"check": "reference_param_counts", "counts": got, "ok": not failures}),
          flush=True)
    return failures


def _check_scaler_sizes():
    """`scaler_sizes` against the reference's get_scaler_sizes and PyTorch's interpolation on
    every pair of scaler_sizes.csv."""
    failures, rows = [], 0
    with open(os.path.join(steplib.FIXTURES, "galerkin", "scaler_sizes.csv")) as f:
        for r in csv.DictReader(f):
            rows += 1
            n_f, n_c = int(r["n_f"]), int(r["n_c"])
            f_, down, up = scaler_sizes(n_f, n_c, True)
            _, down_ns, _ = scaler_sizes(n_f, n_c, False)
            ok = repr(f_) == r["factor"] and up == [[int(r["n_m"])] * 2, [n_f, n_f]]
            ok &= down_ns == [[int(r["n_m"])] * 2, [n_c, n_c]]
            if r["down1"]:
                ok &= down[0][0] == int(r["down1"])
            if r["down2"]:
                ok &= down[1][0] == int(r["down2"])
            if not ok:
                failures.append(f"scaler sizes {n_f}/{n_c}: {f_!r} {down} {up} vs {dict(r)}")
    print(json.dumps({"check": "scaler_sizes.csv", "pairs": rows, "ok": not failures}),
          flush=True)
    return failures[:10]


def _check_loss():
    """`loss` against fixtures/train/galerkin_losses.safetensors (WeightedL2Loss and
    WeightedL2Loss2d of the reference, float64), with and without the H¹ term."""
    t = steplib.load_safetensors(os.path.join(steplib.FIXTURES, "train",
                                              "galerkin_losses.safetensors"))
    failures, rec = [], {"check": "galerkin losses (fixtures/train)"}

    def close(key, got, want):
        err = abs(got.item() - want) / abs(want)
        rec[key] = err
        if not err <= steplib.F64_STORED_REL:
            failures.append(f"loss {key}: {got.item()} vs {want} ({err:.3g})")

    b, n = t["pred_1d"].shape
    h, gamma = t["h_gamma_1d"].tolist()
    assert abs(h - 1.0 / n) < 1e-15
    p, u, du = (t[k].reshape(b, n, 1) for k in ("pred_1d", "u_1d", "du_1d"))
    close("1d", loss(p, u, [n], gamma, du), t["loss_1d"].item())
    close("1d metric", loss(p, u, [n], 0.0, None), t["metric_1d"].item())
    close("1d gamma 0", loss(p, u, [n], 0.0, du), t["metric_1d"].item())
    b, n1, n2 = t["pred_2d"].shape
    h, gamma = t["h_gamma_2d"].tolist()
    assert abs(h - 1.0 / n1) < 1e-15
    p, u = (t[k].reshape(b, n1 * n2, 1) for k in ("pred_2d", "u_2d"))
    aux = torch.cat([t["grad_2d"].reshape(b, n1 * n2, 2), t["coeff_2d"].reshape(b, n1 * n2, 1)], -1)
    close("2d", loss(p, u, [n1, n2], gamma, aux), t["loss_2d"].item())
    close("2d metric", loss(p, u, [n1, n2], 0.0, None), t["metric_2d"].item())
    swapped = torch.cat([aux[..., 1:2], aux[..., 0:1], aux[..., 2:]], -1)
    if abs(loss(p, u, [n1, n2], gamma, swapped).item() - t["loss_2d"].item()) < 1e-6:
        failures.append("loss 2d: the derivative channels are interchangeable")
    try:
        loss(p, u, [n1, n2], gamma, None)
        failures.append("loss: h1_gamma > 0 without aux accepted")
    except ValueError:
        pass
    rec["ok"] = not failures
    print(json.dumps(rec), flush=True)
    return failures


def _check_paths():
    """Runs what no fixture reaches once: every attention kind and FFN activation, the 2-D
    SimpleTransformer on a non-square grid, FourierTransformer2D from scaler_grids (forward and
    inverse, with the query), the reference dropout mode, float64, and the refusals."""
    failures, ran = [], 0
    gen = torch.Generator().manual_seed(7)
    small = dict(n_hidden=6, n_head=2, num_encoder_layers=2, dim_feedforward=8, freq_dim=4,
                 fourier_modes=3, num_regressor_layers=2)
    setups = [
        (dict(small, attention_type="linear", ffn_activation="gelu"), [16], None),
        (dict(small, attention_type="softmax", ffn_activation="silu", out_dim=2), [16], None),
        (dict(small, attention_type="fourier", space_dim=2, fun_dim=2), [7, 10], None),
        (dict(small, attention_type="galerkin", space_dim=2, encoder_dropout=0.1, dropout=0.1,
              ffn_dropout=0.1, decoder_dropout=0.1), [6, 5], None),
        (dict(small, model="fourier_transformer2d", space_dim=2, dirichlet=True,
              scaler_grids=dict(fine=29, coarse=8, scale_factor=False),
              downscaler_activation="relu"), [29, 29], None),
        (dict(small, model="fourier_transformer2d", space_dim=2, decoder="pointwise",
              num_regressor_layers=1, scaler_grids=dict(fine=24, coarse=7, output="coarse")),
         [24, 24], 7),
        (dict(small, model="fourier_transformer2d", space_dim=2, attention_type="softmax",
              downscaler_size=[[9, 11], [5, 6]], upscaler_size=[[8, 9], [12, 13]]), [12, 13], None),
    ]
    for fields, grid, query_n in setups:
        try:
            torch.manual_seed(1)
            model = build("galerkin", fields)
            c = model.cfg
            b, n = 2, math.prod(grid)
            if c.two_d:
                pos = torch.stack(torch.meshgrid(torch.linspace(0, 1, grid[1]),
                                                 torch.linspace(0, 1, grid[0]), indexing="xy"),
                                  -1).reshape(1, n, 2).expand(b, n, 2)
            else:
                pos = torch.rand(b, n, c.space_dim, generator=gen)
            fx = torch.randn(b, n, c.fun_dim, generator=gen)
            query = None if query_n is None else _meshgrid(query_n, b, torch.float32)
            model.train()
            out = forward(model, pos, fx, grid, query=query)
            out.square().mean().backward()
            m = n if query is None else query.shape[1]
            assert list(out.shape) == [b, m, c.out_dim] and torch.isfinite(out).all(), out.shape
            assert all(p.grad is not None for p in model.parameters()), "a parameter without grad"
            model.eval()
            with torch.no_grad():
                a = forward(model, pos, fx, grid, query=query)
                assert torch.equal(a, forward(model, pos, fx, grid, query=query))
                to_precision(model, torch.float64)
                a64 = forward(model, pos.double(), fx.double(), grid,
                              query=None if query is None else query.double())
                assert a64.dtype == torch.float64
                assert steplib.normwise(a.double(), a64) < 1e-4, steplib.normwise(a.double(), a64)
            if c.dirichlet:
                ring = a.reshape(b, *grid, -1)
                assert ring[:, 0].abs().max() == 0 and ring[:, :, -1].abs().max() == 0
            ran += 1
        except Exception as e:  # noqa: BLE001 - reported, then raised by check()
            failures.append(f"{fields}: {type(e).__name__}: {e}")
    # The reference's attention dropout drops in evaluation too; refusals.
    torch.manual_seed(2)
    model = build("galerkin", dict(small, attention_dropout="reference")).eval()
    pos, fx = torch.rand(1, 16, 1, generator=gen), torch.randn(1, 16, 1, generator=gen)
    with torch.no_grad():
        if torch.equal(forward(model, pos, fx), forward(model, pos, fx)):
            failures.append("attention_dropout = reference is deterministic in evaluation")
    refusals = {
        "time": lambda: forward(model, pos, fx, time=torch.zeros(1)),
        "query on the point model": lambda: forward(model, pos, fx, query=pos),
        "too many modes": lambda: forward(model, pos[:, :3], fx[:, :3]),
        "an unknown field": lambda: build("galerkin", dict(small, width=3)),
        "a bad enum": lambda: build("galerkin", dict(small, attention_type="cosine")),
        "the pointwise decoder on the point model": lambda: build("galerkin",
                                                                  dict(small, decoder="pointwise")),
        "scale factor missing the coarse grid": lambda: build("galerkin", dict(
            small, model="fourier_transformer2d", space_dim=2,
            scaler_grids=dict(fine=29, coarse=8))),
        "no query for a coarse output": lambda: forward(
            build("galerkin", setups[5][0]), _meshgrid(24, 1, torch.float32),
            torch.zeros(1, 576, 1), [24, 24]),
    }
    for what, call in refusals.items():
        try:
            call()
            failures.append(f"accepted {what}")
        except ValueError:
            pass
    # load_reference: strict, and the spectral weights' other spellings.
    ref = {k: v.clone() for k, v in model.state_dict().items()}
    w = "regressor.spectral_conv.0.fourier_weight"
    for layout in (dict({k: v for k, v in ref.items() if k != w}, **{w + ".view_as_real": ref[w]}),
                   dict(ref, **{w: torch.view_as_complex(ref[w])})):
        load_reference(model, layout)
    name = next(iter(ref))
    for bad in ({k: v for k, v in ref.items() if k != name}, dict(ref, **{"no.such": ref[name]}),
                dict(ref, **{name: torch.zeros(3, 3, 3)}),
                dict(ref, **{name + ".view_as_real": ref[name]})):
        try:
            load_reference(model, bad)
            failures.append("load_reference accepted a bad set of weights")
        except ValueError:
            pass
    print(json.dumps({"check": "paths without fixtures", "ran": ran, "of": len(setups),
                      "ok": not failures}), flush=True)
    return failures


def check():
    torch.set_num_threads(1)
    found = sorted(f[:-len(".json")] for f in os.listdir(os.path.join(steplib.FIXTURES, "galerkin"))
                   if f.endswith(".json") and f != "reference_param_counts.json")
    failures = []
    if sorted(CASES) != found:
        failures.append(f"fixture cases {found}, this check knows {sorted(CASES)}")
    for name in CASES:
        failures += [f"{name}: {f}" for f in _check_case(name)]
    failures += _check_counts()
    failures += _check_scaler_sizes()
    failures += _check_loss()
    failures += _check_paths()
    if failures:
        raise AssertionError("ref_galerkin check failed:\n  " + "\n  ".join(failures))
    print(json.dumps({"check": "ref_galerkin", "cases": len(CASES), "ok": True}), flush=True)


if __name__ == "__main__":
    steplib.check_main(__doc__, check)
