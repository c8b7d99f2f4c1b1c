"""PyTorch restatement of the Neural-Solver-Library (NSL) models that ono ports: FNO (`nsl_fno`),
F-FNO (`ffno`), U-FNO (`ufno`), the Latent Spectral Model (`lsm`) and Transolver (`transolver`),
from https://github.com/thuml/Neural-Solver-Library at commit
db942b72c6b3972bad217300e3cbdb8004a1a80b (`models/{FNO,F_FNO,U_FNO,U_Net,LSM,Transolver}.py`,
`layers/{Basic,Embedding,FNO_Layers,FFNO_Layers,GeoFNO_Projection,UNet_Blocks,
Neural_Spectral_Block,Physics_Attention}.py`), as the fixture READMEs describe them
(fixtures/{ffno,ufno,lsm,transolver}/README.md, fixtures/geofno/README.md).

It is written for a reference training loop that trains these models with torch.optim on the
same data as ono's Rust trainer, so it computes what the Rust ports compute
(crates/ono-models/src/nsl/**, crates/ono-nn/src/nsl_frame.rs): where the Rust port chose
otherwise than NSL, this module follows the port (listed below). Everything else, including the
parameter names, the module tree, the construction order and every random draw of the
initialisation, is NSL's: after `torch.manual_seed(s)`, `build` gives the parameters NSL's own
constructor gives (`check` proves it bit for bit on the native-initialisation fixtures).

The port's choices (from crates/ono-nn/src/nsl_frame.rs):
- the grid shape comes with each input (`grid`), not with the constructor (NSL's `shapelist`);
- the crop after padding to multiples of 16 is always the first n cells of each axis (NSL's
  `x[..., :-p1, :-p2]` is empty when exactly one padding is 0);
- a time is required when `time_input` and refused otherwise; it is (B,) or (B, 1);
- on point clouds, IPHI is evaluated once per forward and its ξ used by both projections (NSL
  evaluates it twice on the same input: the same values and the same summed gradient);
- the Geo-FNO mesh is `pos` when space_dim = 2, else the first two channels of fx (ono's
  Elasticity loader: pos = the point index, fx = (x, y));
- `unified_pos` on point clouds is refused (NSL ignores it there);
- NSL's reference defect in the Geo-FNO output projection (the conjugate extension flips the k1
  rows too) is reproduced, as the port does.

Interface: `ARCHS`, `build(arch, fields)`, `forward(model, pos, fx, grid, time)`,
`load_reference(model, tensors)`, `check()`.

Check: `python benches/pytorch/ref_nsl.py --check` reproduces every fixture case of these
families (fixtures/{ffno,ufno,lsm,transolver}, fixtures/geofno/nsl_fno_*) through `build`,
`load_reference` and `forward`, the parameter counts of fixtures/*/reference_param_counts.json,
and runs every code path the fixtures do not reach (1-D and 3-D grids, time inputs) once.
Needs torch and numpy.
"""
import json, math, os, sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import steplib  # noqa: E402

UPSTREAM = ("https://github.com/thuml/Neural-Solver-Library",
            "db942b72c6b3972bad217300e3cbdb8004a1a80b")

# The Rust `ArchConfig::ARCH` strings, and NSL's model class of each.
ARCHS = ("nsl_fno", "ffno", "ufno", "lsm", "transolver")
MODEL_CLASS = {
    "nsl_fno": "models.FNO.Model",
    "ffno": "models.F_FNO.Model",
    "ufno": "models.U_FNO.Model",
    "lsm": "models.LSM.Model",
    "transolver": "models.Transolver.Model",
}


################################################################################################
# Configuration: the serde JSON of the Rust configurations (crates/ono-models/src/nsl/settings.rs
# `NslSettings`, flattened, plus crates/ono-models/src/nsl/<arch>/config.rs).
################################################################################################

_INT, _BOOL, _STR, _PAIR = "int", "bool", "str", "pair"
_NSL_FIELDS = {
    "space_dim": _INT, "fun_dim": _INT, "out_dim": _INT, "time_input": _BOOL, "geotype": _STR,
    "grid_dims": _INT, "latent": _PAIR, "n_hidden": _INT, "modes": _INT, "unified_pos": _BOOL,
    "ref": _INT,
}
_ARCH_FIELDS = {
    "nsl_fno": {},
    "ffno": {"n_layers": _INT},
    "ufno": {"unet_norm": _STR},
    "lsm": {"n_heads": _INT, "unet_norm": _STR},
    "transolver": {"n_layers": _INT, "n_heads": _INT, "mlp_ratio": _INT, "slice_num": _INT},
}
_ENUMS = {"geotype": ("structured", "unstructured"), "unet_norm": ("batch", "instance")}
_USIZE = ("grid_dims", "n_layers")  # Rust `usize`: serde refuses negative values


def _darcy(arch):
    """The `darcy` preset of `arch` (each presets.rs over `NslSettings::bench("darcy", n)`):
    Rust's `from_fields` reads a configuration over it, so missing fields take these values."""
    base = dict(space_dim=2, fun_dim=1, out_dim=1, time_input=False, geotype="structured",
                grid_dims=2, latent=[96, 96], n_hidden=128, modes=12, unified_pos=True, ref=8)
    if arch == "ffno":
        base.update(n_layers=8)
    elif arch == "ufno":
        base.update(n_hidden=32, unet_norm="batch")
    elif arch == "lsm":
        base.update(n_hidden=64, unified_pos=False, n_heads=8, unet_norm="batch")
    elif arch == "transolver":
        base.update(n_layers=8, n_heads=8, mlp_ratio=2, slice_num=64)
    return base


class Config:
    """A validated configuration: the fields as attributes, and Rust's checks."""

    def __init__(self, arch, fields):
        if arch not in ARCHS:
            raise ValueError(f"unknown arch {arch!r}; this module serves {ARCHS}")
        if not isinstance(fields, dict):
            raise ValueError(f"{arch}: fields must be a dict, got {type(fields).__name__}")
        kinds = dict(_NSL_FIELDS, **_ARCH_FIELDS[arch])
        merged = _darcy(arch)
        for key, value in fields.items():
            if key not in kinds:
                raise ValueError(f"{arch} configuration: unknown field {key!r}, expected one of "
                                 f"{sorted(kinds)}")
            merged[key] = value
        for key, kind in kinds.items():
            _check_type(arch, key, kind, merged[key])
        self.arch = arch
        self.fields = merged
        for key, value in merged.items():
            setattr(self, key, list(value) if kinds[key] == _PAIR else value)
        self._validate()

    @property
    def structured(self):
        return self.geotype == "structured"

    @property
    def latent_dims(self):
        return self.grid_dims if self.structured else 2

    @property
    def preprocess_in(self):
        pos = self.ref ** self.latent_dims if self.unified_pos else self.space_dim
        return pos + self.fun_dim

    @property
    def dim_head(self):
        return self.n_hidden // self.n_heads if self.n_heads > 0 else 0

    def _validate(self):
        def bad(msg):
            raise ValueError(f"{self.arch}: {msg}")
        # NslFrameConfig::check_lift
        if self.n_hidden < 1 or self.fun_dim < 0 or self.space_dim < 0:
            bad(f"n_hidden {self.n_hidden} must be positive, fun_dim {self.fun_dim} and "
                f"space_dim {self.space_dim} >= 0")
        if self.structured:
            if not 1 <= self.grid_dims <= 3:
                bad(f"a structured grid has 1 to 3 axes, not {self.grid_dims}")
            if self.unified_pos and not 1 <= self.ref <= 64:
                bad(f"ref = {self.ref} must lie in 1..=64 with unified_pos")
        elif self.unified_pos:
            bad("unified_pos applies to structured grids only (NSL ignores it on point clouds)")
        if not self.unified_pos and self.space_dim == 0 and self.fun_dim == 0:
            bad("the preprocess needs positions or an input function")
        if self.arch == "transolver":
            if min(self.n_layers, self.mlp_ratio, self.slice_num, self.out_dim) < 1:
                bad("n_layers, mlp_ratio, slice_num and out_dim must be positive")
            if self.n_heads < 1 or self.dim_head < 1:
                bad(f"{self.n_heads} heads need at least one channel each of n_hidden "
                    f"{self.n_hidden}")
            return
        # NslSettings::check: the grid models also need the projection's modes to fit.
        if self.modes < 1 or self.out_dim < 1:
            bad(f"modes {self.modes} and out_dim {self.out_dim} must be positive")
        if not self.structured and any(s < 2 * self.modes or s // 2 + 1 < self.modes
                                       for s in self.latent):
            bad(f"the latent grid {self.latent} must hold 2*{self.modes} rows and {self.modes} "
                "rFFT columns")
        if self.arch == "ffno" and self.n_layers < 1:
            bad(f"n_layers {self.n_layers} must be positive")
        if self.arch == "lsm":
            if self.n_heads < 1 or self.n_hidden % self.n_heads:
                bad(f"n_heads {self.n_heads} must divide n_hidden {self.n_hidden}")
            if not self.structured and any(s < 16 or s % 16 for s in self.latent):
                bad(f"the point-cloud latent grid {self.latent} must be multiples of 16")


def _check_type(arch, key, kind, value):
    ok = {
        _INT: isinstance(value, int) and not isinstance(value, bool)
        and (value >= 0 or key not in _USIZE),
        _BOOL: isinstance(value, bool),
        _STR: isinstance(value, str) and value in _ENUMS.get(key, (value,)),
        _PAIR: isinstance(value, (list, tuple)) and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value),
    }[kind]
    if not ok:
        want = {_INT: "a non-negative integer" if key in _USIZE else "an integer", _BOOL: "true or false", _PAIR: "[s1, s2]",
                _STR: " or ".join(repr(e) for e in _ENUMS.get(key, ()))}[kind]
        raise ValueError(f"{arch} configuration: {key} must be {want}, got {value!r}")


def fields_of_reference(arch, case):
    """`fields` of a fixture case (its JSON): NSL's `args` and the constructor's s1, s2, read as
    the Rust fixture reader reads them (crates/ono-models/src/nsl/reference.rs `NslArgs`, and
    each <arch>/reference.rs)."""
    kwargs = case["constructor_kwargs"]
    args = next(v for k, v in kwargs.items() if k.startswith("args"))
    return _fields_of_args(arch, args, kwargs)


def _fields_of_args(arch, args, kwargs):
    flag = lambda k: bool(args.get(k, False))  # NSL's flags are ints (1/0) or bools
    geotype = args["geotype"]
    if geotype == "unstructured":
        geo = "unstructured"
    elif geotype.startswith("structured"):
        geo = "structured"
    else:
        raise ValueError(f"NSL geotype {geotype!r}")
    fields = dict(
        space_dim=args["space_dim"], fun_dim=args["fun_dim"], out_dim=args["out_dim"],
        time_input=flag("time_input"), geotype=geo,
        grid_dims=len(args.get("shapelist", [0, 0])) if geo == "structured" else 2,
        latent=[kwargs.get("s1", 96), kwargs.get("s2", 96)], n_hidden=args["n_hidden"],
        modes=args["modes"], unified_pos=flag("unified_pos"), ref=args.get("ref", 8))
    norm = "batch" if args.get("task") == "steady" else "instance"
    if arch == "ffno":
        fields.update(n_layers=args["n_layers"])
    elif arch == "ufno":
        fields.update(unet_norm=norm)
    elif arch == "lsm":
        fields.update(n_heads=args["n_heads"], unet_norm=norm)
    elif arch == "transolver":
        fields.update(n_layers=args["n_layers"], n_heads=args["n_heads"],
                      mlp_ratio=args["mlp_ratio"], slice_num=args["slice_num"])
    return fields


################################################################################################
# Layers (layers/*.py)
################################################################################################

class Mlp(nn.Module):
    """`layers/Basic.py` MLP(n_in, n_hidden, n_out, n_layers=0, res=False, act='gelu'):
    Linear → GELU → Linear (every use in these models has n_layers = 0)."""

    def __init__(self, n_in, n_hidden, n_out):
        super().__init__()
        self.linear_pre = nn.Sequential(nn.Linear(n_in, n_hidden), nn.GELU())
        self.linear_post = nn.Linear(n_hidden, n_out)

    def forward(self, x):
        return self.linear_post(self.linear_pre(x))


def timestep_embedding(t, dim, max_period=10000):
    """`layers/Embedding.py` timestep_embedding for t (B, 1): (B, 1, dim), cos first, a zero
    column for odd dim; in t's dtype."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=t.dtype, device=t.device)
                      / half)
    args = t[:, None] * freqs[None]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        emb = torch.cat([emb, torch.zeros_like(emb[:, :, :1])], dim=-1)
    return emb


def unified_pos_embedding(shape, ref, dtype, device):
    """`layers/Embedding.py` unified_pos_embedding for any of 1–3 axes: (N, ref^D), the distance of
    grid point i_1·n_2·… + i_D at (l_{n_1}[i_1], …) to reference point a_1·ref^(D−1) + … at
    (l_ref[a_1], …), l_n = numpy's double linspace(0, 1, n) cast to `dtype`, the rest in `dtype`."""
    def grid(sizes):
        axes = [torch.tensor(np.linspace(0, 1, n), dtype=dtype, device=device) for n in sizes]
        mesh = torch.meshgrid(*axes, indexing="ij")
        return torch.stack([m.reshape(-1) for m in mesh], dim=-1)
    g, r = grid(shape), grid([ref] * len(shape))
    return torch.sqrt(torch.sum((g[:, None, :] - r[None, :, :]) ** 2, dim=-1))


def _out_ft_like(x_ft, shape):
    return torch.zeros(shape, dtype=x_ft.dtype, device=x_ft.device)


class SpectralConv(nn.Module):
    """`layers/FNO_Layers.py` SpectralConv{1,2,3}d (also `FFNO_Layers.SpectralConv1d`): rFFT
    (default norm), the 2^(D−1) corner blocks (low/high on every axis but the last) times
    `weights1 … weights{2^(D−1)}`, the rest zero, inverse rFFT."""

    def __init__(self, cin, cout, modes):
        super().__init__()
        self.cout, self.modes = cout, list(modes)
        scale = 1 / (cin * cout)
        for k in range(1, 2 ** (len(modes) - 1) + 1):
            self.register_parameter(f"weights{k}", nn.Parameter(
                scale * torch.rand(cin, cout, *modes, dtype=torch.cfloat)))

    def forward(self, x):
        d = len(self.modes)
        spatial = list(x.shape[2:])
        for j, (m, n) in enumerate(zip(self.modes, spatial)):
            if m > (n // 2 + 1 if j == d - 1 else n):
                raise ValueError(f"SpectralConv: {m} modes do not fit axis {j} of {spatial}")
        dims = tuple(range(-d, 0))
        x_ft = torch.fft.rfftn(x, dim=dims)
        out = _out_ft_like(x_ft, [x.shape[0], self.cout] + spatial[:-1] + [spatial[-1] // 2 + 1])
        letters = "xyz"[:d]
        for c in range(2 ** (d - 1)):
            # Corner c is high (the last m cells) on axis j < D−1 where bit j of c is set, in
            # NSL's order weights1, weights2, …, so overlapping corners overwrite alike.
            idx = [slice(None), slice(None)] + [
                slice(-m, None) if j < d - 1 and (c >> j) & 1 else slice(None, m)
                for j, m in enumerate(self.modes)]
            out[tuple(idx)] = torch.einsum(f"bi{letters},io{letters}->bo{letters}",
                                           x_ft[tuple(idx)], getattr(self, f"weights{c + 1}"))
        return torch.fft.irfftn(out, s=spatial, dim=dims)


class FactorizedSpectralConv(nn.Module):
    """`layers/FFNO_Layers.py` SpectralConv{2,3}d: per axis an rFFT ("ortho"), the first m modes
    times the complex view of `fourier_weight.{axis}` (in, out, m, 2), the inverse rFFT; summed in
    axis order."""

    def __init__(self, cin, cout, modes):
        super().__init__()
        self.cin, self.modes = cin, list(modes)
        self.fourier_weight = nn.ParameterList([])
        for m in modes:
            param = nn.Parameter(torch.empty(cin, cout, m, 2))
            nn.init.xavier_normal_(param)
            self.fourier_weight.append(param)

    def forward(self, x):
        d = len(self.modes)
        letters = "xyz"[:d]
        out = None
        for j, m in enumerate(self.modes):
            dim, n = 2 + j, x.shape[2 + j]
            if m > n // 2 + 1:
                raise ValueError(f"FactorizedSpectralConv: {m} modes do not fit axis {j} "
                                 f"of {list(x.shape[2:])}")
            x_ft = torch.fft.rfft(x, dim=dim, norm="ortho")
            shape = list(x_ft.shape)
            shape[dim] = n // 2 + 1
            # NSL's zero buffer has the input's channel count (it only runs with in == out).
            shape[1] = self.cin
            o_ft = _out_ft_like(x_ft, shape)
            keep = [slice(None)] * (d + 2)
            keep[dim] = slice(None, m)
            axis = letters[j]
            o_ft[tuple(keep)] = torch.einsum(f"bi{letters},io{axis}->bo{letters}",
                                             x_ft[tuple(keep)],
                                             torch.view_as_complex(self.fourier_weight[j]))
            part = torch.fft.irfft(o_ft, n=n, dim=dim, norm="ortho")
            out = part if out is None else out + part
        return out


def _wavenumbers(m, extended, device):
    """[0 … m−1, −m … −1] (first axis), or [0 … m−1, −(m−1) … −1] (second, extended)."""
    low = torch.arange(0, m, device=device)
    high = torch.arange(-(m - 1) if extended else -m, 0, device=device)
    return torch.cat((low, high))


class GeoSpectralConv(nn.Module):
    """`layers/GeoFNO_Projection.py` SpectralConv2d_IrregularGeo between the points (at the
    computational coordinates ξ) and an (s1, s2) grid."""

    def __init__(self, cin, cout, modes, latent):
        super().__init__()
        self.cout, self.m1, self.m2 = cout, modes, modes
        self.s1, self.s2 = latent
        scale = 1 / (cin * cout)
        self.weights1 = nn.Parameter(scale * torch.rand(cin, cout, modes, modes, dtype=torch.cfloat))
        self.weights2 = nn.Parameter(scale * torch.rand(cin, cout, modes, modes, dtype=torch.cfloat))

    def _corners(self, u_ft):
        mul = lambda a, w: torch.einsum("bixy,ioxy->boxy", a, w)
        return (mul(u_ft[:, :, :self.m1, :self.m2], self.weights1),
                mul(u_ft[:, :, -self.m1:, :self.m2], self.weights2))

    @staticmethod
    def _phase(xi, k1, k2):
        """K = ξ0·k1 + ξ1·k2: (B, N, len k1, len k2)."""
        return xi[..., 0, None, None] * k1[:, None] + xi[..., 1, None, None] * k2[None, :]

    def points_to_grid(self, u, xi):
        """`fft2d` then the corner products and irfft2: u (B, C, N) → (B, O, s1, s2). Only the
        columns k2 < m2 of NSL's 2·m2 − 1 are ever read, so only they are formed."""
        k1 = _wavenumbers(self.m1, False, xi.device)
        k2 = torch.arange(0, self.m2, device=xi.device)
        basis = torch.exp(-1j * 2 * np.pi * self._phase(xi, k1, k2))
        u_ft = torch.einsum("bcn,bnxy->bcxy", u + 0j, basis)
        f1, f2 = self._corners(u_ft)
        out = _out_ft_like(f1, [u.shape[0], self.cout, self.s1, self.s2 // 2 + 1])
        out[:, :, :self.m1, :self.m2] = f1
        out[:, :, -self.m1:, :self.m2] = f2
        return torch.fft.irfft2(out, s=(self.s1, self.s2))

    def grid_to_points(self, u, xi):
        """rfft2, the corner products, then `ifft2d` at ξ: u (B, C, n1, n2) → (B, O, N), with
        NSL's conjugate extension (its flip also reverses the k1 rows; reproduced)."""
        u_ft = torch.cat(self._corners(torch.fft.rfft2(u)), dim=-2)
        u_ft = torch.cat([u_ft, u_ft[..., 1:].flip(-1, -2).conj()], dim=-1)
        k1 = _wavenumbers(self.m1, False, xi.device)
        k2 = _wavenumbers(self.m2, True, xi.device)
        basis = torch.exp(1j * 2 * np.pi * self._phase(xi, k1, k2))
        return torch.einsum("bcxy,bnxy->bcn", u_ft, basis).real


class Iphi(nn.Module):
    """`layers/GeoFNO_Projection.py` IPHI(width=32): ξ = x + x ⊙ φ(x), without a geometry code
    (`fc_code` is built, as NSL builds it, and never used)."""

    def __init__(self, width=32):
        super().__init__()
        self.width = width
        self.fc0 = nn.Linear(4, width)
        self.fc_code = nn.Linear(42, width)
        self.fc_no_code = nn.Linear(3 * width, 4 * width)
        self.fc1 = nn.Linear(4 * width, 4 * width)
        self.fc2 = nn.Linear(4 * width, 4 * width)
        self.fc3 = nn.Linear(4 * width, 4 * width)
        self.fc4 = nn.Linear(4 * width, 2)

    def forward(self, x):
        # NSL's constants (float32 on CUDA there) in the input's dtype.
        center = torch.tensor([0.0001, 0.0001], dtype=x.dtype, device=x.device).reshape(1, 1, 2)
        freqs = np.pi * torch.pow(2, torch.arange(0, self.width // 4, dtype=x.dtype,
                                                  device=x.device)).reshape(1, 1, 1, -1)
        angle = torch.atan2(x[:, :, 1] - center[:, :, 1], x[:, :, 0] - center[:, :, 0])
        radius = torch.norm(x - center, dim=-1, p=2)
        xd = torch.stack([x[:, :, 0], x[:, :, 1], angle, radius], dim=-1)
        b, n, d = xd.shape
        x_sin = torch.sin(freqs * xd.view(b, n, d, 1)).view(b, n, d * self.width // 4)
        x_cos = torch.cos(freqs * xd.view(b, n, d, 1)).view(b, n, d * self.width // 4)
        h = torch.cat([self.fc0(xd), x_sin, x_cos], dim=-1).reshape(b, n, 3 * self.width)
        h = self.fc_no_code(h)
        h = torch.tanh(self.fc1(h))
        h = torch.tanh(self.fc2(h))
        h = torch.tanh(self.fc3(h))
        return x + x * self.fc4(h)


_CONV = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}
_BATCH_NORM = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}
_INSTANCE_NORM = {1: nn.InstanceNorm1d, 2: nn.InstanceNorm2d, 3: nn.InstanceNorm3d}
_MAX_POOL = {1: nn.MaxPool1d, 2: nn.MaxPool2d, 3: nn.MaxPool3d}
_UPSAMPLE = {1: "linear", 2: "bilinear", 3: "trilinear"}


class DoubleConv(nn.Module):
    """`layers/UNet_Blocks.py` DoubleConv{D}D: (3×…×3 conv without bias → norm → ReLU) × 2, norm
    BatchNorm ("bn", steady tasks) or affine InstanceNorm ("in")."""

    def __init__(self, dims, cin, cout, mid=None, norm="batch"):
        super().__init__()
        mid = mid or cout
        conv, nrm = _CONV[dims], (_BATCH_NORM[dims] if norm == "batch" else
                                  (lambda c: _INSTANCE_NORM[dims](c, affine=True)))
        self.double_conv = nn.Sequential(
            conv(cin, mid, kernel_size=3, padding=1, bias=False), nrm(mid), nn.ReLU(inplace=True),
            conv(mid, cout, kernel_size=3, padding=1, bias=False), nrm(cout), nn.ReLU(inplace=True))

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, dims, cin, cout, norm):
        super().__init__()
        self.maxpool_conv = nn.Sequential(_MAX_POOL[dims](2), DoubleConv(dims, cin, cout, norm=norm))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    """Up{D}D (bilinear = True): upsample ×2 with aligned corners, (2-D only) zero-pad to the
    skip's size, cat [skip, upsampled], DoubleConv with mid = in // 2."""

    def __init__(self, dims, cin, cout, norm):
        super().__init__()
        self.dims = dims
        self.up = nn.Upsample(scale_factor=2, mode=_UPSAMPLE[dims], align_corners=True)
        self.conv = DoubleConv(dims, cin, cout, cin // 2, norm=norm)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        if self.dims == 2:
            dy, dx = x2.shape[2] - x1.shape[2], x2.shape[3] - x1.shape[3]
            x1 = F.pad(x1, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        elif x1.shape[2:] != x2.shape[2:]:
            raise ValueError(f"U-Net: an upsampled map {list(x1.shape[2:])} of another size than "
                             f"its skip {list(x2.shape[2:])} (NSL pads only in 2-D)")
        return self.conv(torch.cat([x2, x1], dim=1))


class OutConv(nn.Module):
    def __init__(self, dims, cin, cout):
        super().__init__()
        self.conv = _CONV[dims](cin, cout, kernel_size=1)

    def forward(self, x):
        return self.conv(x)


def _add_unet_blocks(module, dims, c, norm):
    """Registers NSL's multiscale modules (`models/U_Net.py`, `models/LSM.py`, bilinear) on
    `module`, at its root: inc, down1 … down4, up1 … up4, outc."""
    module.inc = DoubleConv(dims, c, c, norm=norm)
    module.down1 = Down(dims, c, 2 * c, norm)
    module.down2 = Down(dims, 2 * c, 4 * c, norm)
    module.down3 = Down(dims, 4 * c, 8 * c, norm)
    module.down4 = Down(dims, 8 * c, 8 * c, norm)
    module.up1 = Up(dims, 16 * c, 4 * c, norm)
    module.up2 = Up(dims, 8 * c, 2 * c, norm)
    module.up3 = Up(dims, 4 * c, c, norm)
    module.up4 = Up(dims, 2 * c, c, norm)
    module.outc = OutConv(dims, c, c)


def _multiscale(module, x, norm, through=None):
    """U_Net.multiscale; LSM's form when `through` = [process1 … process5] sits where each level
    enters the upward path. Refuses what the Rust U-Net refuses (crates/ono-nn/src/unet.rs)."""
    if any(n < 16 for n in x.shape[2:]):
        raise ValueError(f"U-Net: every axis needs at least 16 cells (four halvings), got "
                         f"{list(x.shape[2:])}")
    cells = math.prod(n // 16 for n in x.shape[2:])
    if (norm == "batch" and module.training and x.shape[0] * cells == 1) or \
            (norm == "instance" and cells == 1):
        raise ValueError(f"U-Net: one value per channel at the coarsest level of {list(x.shape)} "
                         f"with {norm} norm")
    p = through or [lambda t: t] * 5
    x1 = module.inc(x)
    x2 = module.down1(x1)
    x3 = module.down2(x2)
    x4 = module.down3(x3)
    x5 = module.down4(x4)
    h = module.up1(p[4](x5), p[3](x4))
    h = module.up2(h, p[2](x3))
    h = module.up3(h, p[1](x2))
    h = module.up4(h, p[0](x1))
    return module.outc(h)


class NeuralSpectralBlock(nn.Module):
    """`layers/Neural_Spectral_Block.py` NeuralSpectralBlock{D}D(width, num_basis, patch,
    num_token, n_heads); the patch size comes with each call (the latent grid / 16 per axis)."""

    def __init__(self, dims, width, num_basis=12, num_token=4, n_heads=8):
        super().__init__()
        self.dims, self.width, self.num_basis = dims, width, num_basis
        self.head, self.num_token = n_heads, num_token
        self.weights = nn.Parameter((1 / width) * torch.rand(width, num_basis * 2, dtype=torch.float))
        self.latent = nn.Parameter((1 / width) * torch.rand(n_heads, num_token, width // n_heads,
                                                            dtype=torch.float))
        self.encoder_attn = _CONV[dims](width, width * 2, kernel_size=1, stride=1)
        self.decoder_attn = _CONV[dims](width, width, kernel_size=1, stride=1)

    @staticmethod
    def _attn(q, k, v):
        # No 1/√d scale, as NSL.
        a = torch.softmax(torch.einsum("bhlc,bhsc->bhls", q, k), dim=-1)
        return torch.einsum("bhls,bhsc->bhlc", a, v)

    def forward(self, x, patch):
        b, c = x.shape[:2]
        size, d, h = list(x.shape[2:]), self.dims, self.head
        counts = [n // p for n, p in zip(size, patch)]
        # patchify: (B, C, n1/p1, p1, …) → (B·Π n/p, C, p1, …), the patch index (b, i_1, …)
        split = [b, c] + [v for cp in zip(counts, patch) for v in cp]
        order = [0] + [2 + 2 * j for j in range(d)] + [1] + [3 + 2 * j for j in range(d)]
        xp = x.reshape(split).permute(order).reshape([-1, c] + list(patch))
        bp, cells = xp.shape[0], math.prod(patch)
        # encoder: interleaved (key, value) channels (head·d + i)·2 + s
        kv = self.encoder_attn(xp).view(bp, 2 * c, -1).permute(0, 2, 1).contiguous() \
            .view(bp, cells, h, c // h, 2).permute(4, 0, 2, 1, 3)
        latent = self.latent[None].repeat(bp, 1, 1, 1)
        tok = self._attn(latent, kv[0], kv[1]) + latent
        tok = tok.permute(0, 1, 3, 2).contiguous().view(bp, c, self.num_token)
        # transition
        modes = (1.0 / float(self.num_basis)) * torch.arange(self.num_basis, dtype=x.dtype,
                                                             device=x.device)
        arg = modes[None, None, None, :] * tok[:, :, :, None] * math.pi
        basis = torch.cat([torch.sin(arg), torch.cos(arg)], dim=-1)
        tok = torch.einsum("bilm,im->bil", basis, self.weights) + tok
        # decoder: the tokens are keys and values
        tok = tok.view(bp, h, c // h, self.num_token).permute(0, 1, 3, 2).contiguous()
        q = self.decoder_attn(xp).view(bp, c, -1).permute(0, 2, 1).contiguous() \
            .view(bp, cells, h, c // h).permute(0, 2, 1, 3).contiguous()
        out = self._attn(q, tok, tok).permute(0, 1, 3, 2).contiguous().view(xp.shape) + xp
        # de-patchify
        back = [0, d + 1] + [v for j in range(d) for v in (1 + j, d + 2 + j)]
        return out.view([b] + counts + [c] + list(patch)).permute(back).reshape(x.shape)


################################################################################################
# The shared frame (crates/ono-nn/src/nsl_frame.rs): points → latent grid → points.
################################################################################################

class NslLift(nn.Module):
    """The inputs at the points → n_hidden channels at the points:
    preprocess([unified pos | pos], fx) [+ shift] [+ time_fc(emb(t))]. Registers `preprocess`
    and, with a time input, `time_fc` at the model's root, in NSL's order."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        h = cfg.n_hidden
        self.preprocess = Mlp(cfg.preprocess_in, 2 * h, h)
        if cfg.time_input:
            self.time_fc = nn.Sequential(nn.Linear(h, h), nn.SiLU(), nn.Linear(h, h))
        self._pos_cache = {}

    def _grid_shape(self, grid, n):
        cfg = self.cfg
        if not cfg.structured:
            return None
        if grid is None:
            if cfg.grid_dims != 1:
                raise ValueError(f"{cfg.arch}: the points must be a regular {cfg.grid_dims}-D "
                                 "grid; pass its shape")
            grid = [n]
        grid = [int(s) for s in grid]
        if len(grid) != cfg.grid_dims or min(grid) < 1 or math.prod(grid) != n:
            raise ValueError(f"{cfg.arch}: grid {grid} is not a {cfg.grid_dims}-D grid of the "
                             f"{n} points")
        return grid

    def _unified(self, shape, dtype, device):
        key = (tuple(shape), dtype, str(device))
        if key not in self._pos_cache:
            self._pos_cache[key] = unified_pos_embedding(shape, self.cfg.ref, dtype, device)
        return self._pos_cache[key]

    def lift(self, pos, fx, grid, time, shift=None):
        """(B, N, n_hidden) and the grid shape (structured) or None."""
        cfg = self.cfg
        dtype = self.preprocess.linear_post.weight.dtype
        if pos.dim() != 3 or min(pos.shape[:2]) < 1 or \
                (pos.shape[2] != cfg.space_dim and not cfg.unified_pos):
            raise ValueError(f"{cfg.arch}: pos must be (B, N, {cfg.space_dim}), got "
                             f"{list(pos.shape)}")
        b, n = pos.shape[:2]
        shape = self._grid_shape(grid, n)
        if shape is not None and cfg.unified_pos:
            # NSL reads only B and N of the positions here.
            feats = [self._unified(shape, dtype, pos.device)[None].expand(b, n, -1)]
        else:
            feats = [pos.to(dtype)]
        if fx is not None and list(fx.shape) == [b, n, cfg.fun_dim]:
            if cfg.fun_dim:
                feats.append(fx.to(dtype))
        elif fx is not None or cfg.fun_dim:
            raise ValueError(f"{cfg.arch}: fx must be ({b}, {n}, {cfg.fun_dim})"
                             + ("" if cfg.fun_dim else " or None")
                             + f", got {None if fx is None else list(fx.shape)}")
        h = self.preprocess(torch.cat(feats, dim=-1))
        if shift is not None:
            h = h + shift
        if cfg.time_input:
            if time is None:
                raise ValueError(f"{cfg.arch}: built with time_input, but no time was given")
            t = time.to(dtype).reshape(-1, 1) if time.dim() in (1, 2) else time
            if list(t.shape) != [b, 1] or list(time.shape) not in ([b], [b, 1]):
                raise ValueError(f"{cfg.arch}: time must be ({b},) or ({b}, 1), got "
                                 f"{list(time.shape)}")
            # (B, 1, C) broadcast over the points; NSL repeats it over N first (same rows).
            h = h + self.time_fc(timestep_embedding(t, cfg.n_hidden))
        elif time is not None:
            raise ValueError(f"{cfg.arch}: a time was given to a model built without time_input")
        return h, shape


def pad_to_16(size):
    return (16 - size % 16) % 16


class NslFrame(NslLift):
    """The lift, then (structured) the row-major grid zero-padded to multiples of 16 per axis (2-D
    and 3-D; 1-D unpadded), or (point cloud) the Geo-FNO projection onto the (s1, s2) latent grid
    at ξ = IPHI(mesh); `leave` goes back. Registers `fftproject_in`, `fftproject_out`, `iphi` on
    point clouds."""

    def __init__(self, cfg):
        super().__init__(cfg)
        if not cfg.structured:
            h = cfg.n_hidden
            self.fftproject_in = GeoSpectralConv(h, h, cfg.modes, cfg.latent)
            self.fftproject_out = GeoSpectralConv(h, h, cfg.modes, cfg.latent)
            self.iphi = Iphi()

    def enter(self, pos, fx, grid, time):
        h, shape = self.lift(pos, fx, grid, time)
        b, n, c = h.shape
        if shape is not None:
            x = h.reshape([b] + shape + [c]).permute([0, len(shape) + 1] + list(range(1, len(shape) + 1)))
            if len(shape) >= 2:
                spec = [v for s in reversed(shape) for v in (0, pad_to_16(s))]
                if any(spec):
                    x = F.pad(x, spec)
            return x, ("grid", shape)
        cfg = self.cfg
        if cfg.space_dim == 2:
            mesh = pos
        elif fx is not None and cfg.fun_dim >= 2:
            mesh = fx[..., :2]
        else:
            raise ValueError(f"{cfg.arch}: the Geo-FNO projection needs the points' 2-D "
                             "coordinates: pos (B, N, 2), or fx (B, N, >= 2) starting with them")
        xi = self.iphi(mesh.to(h.dtype))
        return self.fftproject_in.points_to_grid(h.permute(0, 2, 1), xi), ("cloud", xi)

    def leave(self, x, ctx):
        kind, place = ctx
        if kind == "grid":
            x = x[(Ellipsis,) + tuple(slice(0, s) for s in place)]
            return x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)
        return self.fftproject_out.grid_to_points(x, place).permute(0, 2, 1)

    def heads(self, h):
        return self.fc2(F.gelu(self.fc1(h)))


################################################################################################
# The families
################################################################################################

class NslFno(NslFrame):
    """`models/FNO.py` (arch `nsl_fno`): frame → 3 × GELU(conv_l + w_l) → conv3 + w3 → frame →
    fc1 → GELU → fc2. Always four layers."""

    def __init__(self, cfg):
        super().__init__(cfg)
        h, d = cfg.n_hidden, cfg.latent_dims
        for l in range(4):
            setattr(self, f"conv{l}", SpectralConv(h, h, [cfg.modes] * d))
        for l in range(4):
            setattr(self, f"w{l}", _CONV[d](h, h, 1))
        self.fc1 = nn.Linear(h, h)
        self.fc2 = nn.Linear(h, cfg.out_dim)

    def forward(self, pos, fx=None, grid=None, time=None):
        x, ctx = self.enter(pos, fx, grid, time)
        for l in range(4):
            x = getattr(self, f"conv{l}")(x) + getattr(self, f"w{l}")(x)
            if l < 3:
                x = F.gelu(x)
        return self.heads(self.leave(x, ctx))


class Ffno(NslFrame):
    """`models/F_FNO.py` (arch `ffno`): frame → n_layers × (x ← x + K_l(x)), no activation →
    frame → fc1 → GELU → fc2. K_l is factorised on 2-D/3-D latent grids, NSL's FNO layer in 1-D."""

    def __init__(self, cfg):
        super().__init__(cfg)
        h, d = cfg.n_hidden, cfg.latent_dims
        layer = SpectralConv if d == 1 else FactorizedSpectralConv
        self.spectral_layers = nn.ModuleList([layer(h, h, [cfg.modes] * d)
                                              for _ in range(cfg.n_layers)])
        self.fc1 = nn.Linear(h, h)
        self.fc2 = nn.Linear(h, cfg.out_dim)

    def forward(self, pos, fx=None, grid=None, time=None):
        x, ctx = self.enter(pos, fx, grid, time)
        for layer in self.spectral_layers:
            x = x + layer(x)
        return self.heads(self.leave(x, ctx))


class UNet(NslFrame):
    """`models/U_Net.py` as U-FNO embeds it: a whole NSL U-Net model (its own frame, the
    multiscale modules, fc1, fc2), of which U-FNO calls only `multiscale`; the rest is built and
    counted as NSL does, and gets no gradient."""

    def __init__(self, cfg):
        super().__init__(cfg)
        _add_unet_blocks(self, cfg.latent_dims, cfg.n_hidden, cfg.unet_norm)
        self.fc1 = nn.Linear(cfg.n_hidden, cfg.n_hidden)
        self.fc2 = nn.Linear(cfg.n_hidden, cfg.out_dim)

    def multiscale(self, x):
        return _multiscale(self, x, self.cfg.unet_norm)


class Ufno(NslFrame):
    """`models/U_FNO.py` (arch `ufno`): frame → GELU(conv0 + w0) → GELU(conv1 + w1) →
    GELU(conv2 + w2 + u_net2) → conv3 + w3 + u_net3 → frame → fc1 → GELU → fc2."""

    def __init__(self, cfg):
        super().__init__(cfg)
        h, d = cfg.n_hidden, cfg.latent_dims
        for l in range(4):
            setattr(self, f"conv{l}", SpectralConv(h, h, [cfg.modes] * d))
        for l in range(4):
            setattr(self, f"w{l}", _CONV[d](h, h, 1))
        self.u_net2 = UNet(cfg)
        self.u_net3 = UNet(cfg)
        self.fc1 = nn.Linear(h, h)
        self.fc2 = nn.Linear(h, cfg.out_dim)

    def forward(self, pos, fx=None, grid=None, time=None):
        x, ctx = self.enter(pos, fx, grid, time)
        for l in range(4):
            y = getattr(self, f"conv{l}")(x) + getattr(self, f"w{l}")(x)
            if l >= 2:
                y = y + getattr(self, f"u_net{l}").multiscale(x)
            x = F.gelu(y) if l < 3 else y
        return self.heads(self.leave(x, ctx))


class Lsm(NslFrame):
    """`models/LSM.py` (arch `lsm`): frame → U-Net whose five levels pass through Neural Spectral
    Blocks (process1 … process5) on their way up → frame → fc1 (c → 2c) → GELU → fc2."""

    def __init__(self, cfg):
        super().__init__(cfg)
        c, d = cfg.n_hidden, cfg.latent_dims
        _add_unet_blocks(self, d, c, cfg.unet_norm)
        for k, width in enumerate([c, 2 * c, 4 * c, 8 * c, 8 * c]):
            setattr(self, f"process{k + 1}", NeuralSpectralBlock(d, width, n_heads=cfg.n_heads))
        self.fc1 = nn.Linear(c, 2 * c)
        self.fc2 = nn.Linear(2 * c, cfg.out_dim)

    def forward(self, pos, fx=None, grid=None, time=None):
        x, ctx = self.enter(pos, fx, grid, time)
        if any(s < 16 or s % 16 for s in x.shape[2:]):
            raise ValueError(f"lsm: a latent grid of multiples of 16 per axis (NSL does not pad "
                             f"1-D grids), got {list(x.shape[2:])}")
        patch = [s // 16 for s in x.shape[2:]]
        through = [lambda t, k=k: getattr(self, f"process{k + 1}")(t, patch) for k in range(5)]
        return self.heads(self.leave(_multiscale(self, x, self.cfg.unet_norm, through), ctx))


class PhysicsAttention(nn.Module):
    """`layers/Physics_Attention.py`: Physics_Attention_Irregular_Mesh (linear projections, no
    temperature clamp) or _Structured_Mesh_{D}D (3×…×3 conv projections, τ clamped to
    [0.1, 5])."""

    def __init__(self, dim, heads, dim_head, slice_num, dims):
        super().__init__()
        inner = dim_head * heads
        self.dim_head, self.heads, self.dims = dim_head, heads, dims
        self.scale = dim_head ** -0.5
        self.temperature = nn.Parameter(torch.ones([1, heads, 1, 1]) * 0.5)
        if dims is None:
            self.in_project_x = nn.Linear(dim, inner)
            self.in_project_fx = nn.Linear(dim, inner)
        else:
            self.in_project_x = _CONV[dims](dim, inner, 3, 1, 1)
            self.in_project_fx = _CONV[dims](dim, inner, 3, 1, 1)
        self.in_project_slice = nn.Linear(dim_head, slice_num)
        # NSL's draws (Transolver's initialize_weights then overwrites this weight).
        if not self.in_project_slice.weight.is_meta:
            torch.nn.init.orthogonal_(self.in_project_slice.weight)
        self.to_q = nn.Linear(dim_head, dim_head, bias=False)
        self.to_k = nn.Linear(dim_head, dim_head, bias=False)
        self.to_v = nn.Linear(dim_head, dim_head, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner, dim), nn.Dropout(0.0))

    def _heads(self, proj, z, grid):
        b, n, c = z.shape
        if self.dims is None:
            y = proj(z)
        else:
            d = len(grid)
            zg = z.reshape([b] + grid + [c]).permute([0, d + 1] + list(range(1, d + 1)))
            y = proj(zg).permute([0] + list(range(2, d + 2)) + [1]).reshape(b, n, -1)
        return y.reshape(b, n, self.heads, self.dim_head).permute(0, 2, 1, 3)

    def forward(self, z, grid):
        b, n, _ = z.shape
        fx_mid = self._heads(self.in_project_fx, z, grid)
        x_mid = self._heads(self.in_project_x, z, grid)
        tau = self.temperature if self.dims is None else torch.clamp(self.temperature, 0.1, 5)
        w = torch.softmax(self.in_project_slice(x_mid) / tau, dim=-1)  # (B, H, N, G)
        norm = w.sum(2)
        tok = torch.einsum("bhnc,bhng->bhgc", fx_mid, w) / (norm + 1e-5)[:, :, :, None]
        q, k, v = self.to_q(tok), self.to_k(tok), self.to_v(tok)
        attn = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * self.scale, dim=-1)
        out = torch.einsum("bhgc,bhng->bhnc", torch.matmul(attn, v), w)
        return self.to_out(out.permute(0, 2, 1, 3).reshape(b, n, -1))


class TransolverBlock(nn.Module):
    """`models/Transolver.py` Transolver_block: pre-norm Physics-Attention and MLP; the last block
    returns mlp2(ln_3(·))."""

    def __init__(self, cfg, last, dims):
        super().__init__()
        c = cfg.n_hidden
        self.ln_1 = nn.LayerNorm(c)
        self.Attn = PhysicsAttention(c, cfg.n_heads, cfg.dim_head, cfg.slice_num, dims)
        self.ln_2 = nn.LayerNorm(c)
        self.mlp = Mlp(c, c * cfg.mlp_ratio, c)
        self.last = last
        if last:
            self.ln_3 = nn.LayerNorm(c)
            self.mlp2 = nn.Linear(c, cfg.out_dim)

    def forward(self, h, grid):
        h = self.Attn(self.ln_1(h), grid) + h
        h = self.mlp(self.ln_2(h)) + h
        return self.mlp2(self.ln_3(h)) if self.last else h


class Transolver(NslLift):
    """`models/Transolver.py` (arch `transolver`): the lift + `placeholder`, then n_layers blocks
    at the points (no latent grid)."""

    def __init__(self, cfg):
        super().__init__(cfg)
        dims = cfg.grid_dims if cfg.structured else None
        self.blocks = nn.ModuleList([TransolverBlock(cfg, l == cfg.n_layers - 1, dims)
                                     for l in range(cfg.n_layers)])
        self.placeholder = nn.Parameter((1 / cfg.n_hidden) * torch.rand(cfg.n_hidden,
                                                                        dtype=torch.float))
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m):
        # Every nn.Linear (the lift's too): timm 0.9.2 trunc_normal_(std=0.02), the same
        # algorithm and bounds (±2 absolute) as torch's.
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.constant_(m.bias, 0)
        elif isinstance(m, nn.LayerNorm):
            nn.init.constant_(m.bias, 0)
            nn.init.constant_(m.weight, 1.0)

    def forward(self, pos, fx=None, grid=None, time=None):
        h, shape = self.lift(pos, fx, grid, time, shift=self.placeholder[None, None, :])
        for block in self.blocks:
            h = block(h, shape)
        return h


_FAMILY = {"nsl_fno": NslFno, "ffno": Ffno, "ufno": Ufno, "lsm": Lsm, "transolver": Transolver}


################################################################################################
# Interface
################################################################################################

def build(arch, fields):
    """The model of `arch` from its configuration fields (the Rust serde JSON without "arch"),
    with NSL's own initialisation drawn from torch's global generator."""
    cfg = Config(arch, fields)
    return _FAMILY[cfg.arch](cfg)


def forward(model, pos, fx=None, grid=None, time=None):
    """What the Rust `NeuralOperator::forward` returns for ModelInput { pos, fx, grid, time }:
    (B, N, out_dim). Train/eval follows `model.training`."""
    return model(pos, fx, grid, time)


def load_reference(model, tensors):
    """Loads every parameter and buffer of `model` from `tensors` (the reference's names;
    complex ones possibly as "<name>.view_as_real", or under their own name as the real (…, 2)
    pairs ono's export writes), strictly."""
    own = dict(model.named_parameters())
    own.update(model.named_buffers())
    given = {}
    for key, value in tensors.items():
        name = key
        pairs = (key in own and own[key].is_complex() and not value.is_complex()
                 and value.dim() == own[key].dim() + 1)
        if key.endswith(".view_as_real") or pairs:
            name = key[:-len(".view_as_real")] if not pairs else key
            if value.is_complex() or value.dim() < 1 or value.shape[-1] != 2:
                raise ValueError(f"{key}: a real view (…, 2) was expected, got {value.dtype} "
                                 f"{list(value.shape)}")
            value = torch.view_as_complex(value.to(torch.float32 if value.dtype != torch.float64
                                                   else value.dtype).contiguous())
        if name in given:
            raise ValueError(f"{name} is given twice")
        given[name] = value
    missing, extra = sorted(set(own) - set(given)), sorted(set(given) - set(own))
    problems = []
    if missing:
        problems.append(f"missing: {missing}")
    if extra:
        problems.append(f"not in the model: {extra}")
    for name in sorted(set(own) & set(given)):
        mine, theirs = own[name], given[name]
        if list(mine.shape) != list(theirs.shape):
            problems.append(f"{name}: shape {list(theirs.shape)}, the model has {list(mine.shape)}")
        elif mine.is_complex() != theirs.is_complex():
            problems.append(f"{name}: {'complex' if theirs.is_complex() else 'real'} given for a "
                            f"{'complex' if mine.is_complex() else 'real'} tensor")
    if problems:
        raise ValueError(f"load_reference ({type(model).__name__}): " + "; ".join(problems))
    with torch.no_grad():
        for name, tensor in own.items():
            tensor.copy_(given[name])


################################################################################################
# Check against the fixtures
################################################################################################

FOLDERS = ("ffno", "ufno", "lsm", "transolver", "geofno", "fno")
EXPECTED_CASES = {
    "ffno_darcy_small", "ffno_irregular_small", "ufno_darcy_small", "ufno_darcy_wellcond",
    "lsm_darcy_small", "lsm_darcy_wellcond", "lsm_irregular_small", "transolver_darcy_small",
    "transolver_darcy_wellcond", "transolver_irregular_small", "transolver_irregular_wellcond",
    "nsl_fno_irregular_small",
}


def _cases():
    """(folder, case name, arch) of every fixture whose model class is one of ours."""
    out = []
    for folder in FOLDERS:
        path = os.path.join(steplib.FIXTURES, folder)
        for f in sorted(os.listdir(path)):
            if not f.endswith(".json") or f.startswith("reference_param_counts"):
                continue
            with open(os.path.join(path, f)) as fh:
                cls = json.load(fh).get("model_class", "")
            for arch, prefix in MODEL_CLASS.items():
                if cls.startswith(prefix + " ") or cls == prefix:
                    out.append((folder, f[:-len(".json")], arch))
    return out


def _split(t):
    """The fixture's stored model tensors (param.* and buffer.*), the prefix removed."""
    out = {}
    for k, v in t.items():
        for prefix in ("param.", "buffer."):
            if k.startswith(prefix):
                out[k[len(prefix):]] = v
    return out


def _count(model):
    real = sum(p.numel() * (2 if p.is_complex() else 1) for p in model.parameters())
    return real, sum(p.numel() for p in model.parameters())


def _to_double(model):
    # Module.double() leaves complex tensors alone, and .to(float64) drops their imaginary part.
    return model._apply(lambda t: t.to(torch.complex128) if t.is_complex() else
                        (t.double() if t.is_floating_point() else t))


def _reset_running_stats(model):
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()


def _grad_of(t, name):
    if "grad." + name in t:
        return t["grad." + name]
    return torch.view_as_complex(t["grad." + name + ".view_as_real"].contiguous())


def _check_case(folder, name, arch):
    t, meta = steplib.fixture(folder, name)
    t = {k: v.clone() for k, v in t.items()}  # aligned storage (fixtures/geofno/README.md)
    tol = meta["tolerances"]
    out_tol, grad_tol = tol["output_rel"], tol["grad_rel"]
    train_tol = tol.get("output_train_rel", out_tol)
    overrides = tol.get("grad_rel_overrides", {})
    skipped = set(tol.get("grad_not_comparable", {}).get("names", []))
    without_grad = set(meta.get("params_without_grad", {}).get("names", []))
    fields = fields_of_reference(arch, meta)
    stored = _split(t)
    rec, failures = {"case": name, "arch": arch}, []

    def bound(key, err, limit):
        rec[key] = err
        if not err <= limit:
            failures.append(f"{key} {err:.3g} > {limit:.3g}")

    # NSL's initialisation: the same draws after the same seed (native-initialisation cases),
    # to the last bits that MKL's vector math may round otherwise on another CPU (steplib).
    if "weights" not in meta:
        def pairs(m):
            return [(p, torch.view_as_complex(stored[n + ".view_as_real"].contiguous())
                     if p.is_complex() else stored[n]) for n, p in m.named_parameters()]
        ulps, init_failures = steplib.init_draws(lambda: build(arch, fields), pairs)
        rec["init (float32 ulps after manual_seed(0))"] = ulps
        failures += init_failures
    torch.manual_seed(0)
    model = build(arch, fields)
    counts = _count(model)
    rec["params"] = list(counts)
    if counts != (meta["param_count_real"], meta["param_count_numel"]):
        failures.append(f"parameter counts {counts} != "
                        f"{(meta['param_count_real'], meta['param_count_numel'])}")

    load_reference(model, stored)
    cfg = model.cfg
    x, fx, y = t["input.x"], t.get("input.fx"), t["input.y"]
    args = meta["constructor_kwargs"]
    args = next(v for k, v in args.items() if k.startswith("args"))
    # NSL's Model.forward(x, fx) in ono's convention: pos = x, the grid = NSL's shapelist.
    grid = list(args["shapelist"]) if cfg.structured else None

    # Train mode: output.train (or output.eval: no BatchNorm), loss.train, the gradients, and
    # the running statistics after one pass from (0, 1, 0).
    bn = any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
    _reset_running_stats(model)
    model.train()
    out = forward(model, x, fx, grid)
    loss = steplib.rel_l2_sum(out, y)
    loss.backward()
    if "output.train" in t:
        bound("output.train", steplib.normwise(out.detach(), t["output.train"]), train_tol)
    else:
        bound("output.train (= output.eval)", steplib.normwise(out.detach(), t["output.eval"]),
              out_tol)
    bound("loss.train", steplib.normwise(loss.detach(), t["loss.train"]), out_tol)
    worst = (None, 0.0, 0.0)
    for n, p in model.named_parameters():
        ref = _grad_of(t, n)
        mine = p.grad if p.grad is not None else torch.zeros_like(p)
        if n in without_grad or ref.abs().max() == 0:
            err = mine.abs().max().item()
            if err != 0:
                failures.append(f"grad {n}: {err:.3g}, the reference has none")
            continue
        if n in skipped:
            continue
        mine, ref = (torch.view_as_real(mine), torch.view_as_real(ref)) if p.is_complex() \
            else (mine, ref)
        err, limit = steplib.normwise(mine, ref), overrides.get(n, grad_tol)
        if err > limit:
            failures.append(f"grad {n} {err:.3g} > {limit:.3g}")
        if err / limit > worst[2]:
            worst = (n, err, err / limit)
    rec["grad worst (name, err, err/bound)"] = list(worst)
    rec["grads not comparable (skipped)"] = len(skipped)
    if bn:
        buf = max((steplib.normwise(b.detach(), stored[n]) if b.is_floating_point()
                   else float((b != stored[n]).any()))
                  for n, b in model.named_buffers())
        bound("BatchNorm buffers after the train pass", buf, train_tol)

    # Eval mode with the stored statistics, in float32 and (from the upcast float32 tensors) in
    # float64 against the reference's float64 evaluation.
    load_reference(model, stored)
    model.eval()
    with torch.no_grad():
        bound("output.eval", steplib.normwise(forward(model, x, fx, grid), t["output.eval"]),
              out_tol)
        _to_double(model)
        out64 = forward(model, x.double(), None if fx is None else fx.double(), grid)
        bound("output.eval_f64", steplib.normwise(out64, t["output.eval_f64"]),
              steplib.F64_STORED_REL)
    rec["ok"] = not failures
    print(json.dumps(rec), flush=True)
    return failures


def _count_configs():
    """(label, arch, args, kwargs, real, numel) of every NSL count in reference_param_counts.json."""
    out = []
    for folder, arch in (("ffno", "ffno"), ("ufno", "ufno"), ("lsm", "lsm"),
                         ("transolver", "transolver")):
        with open(os.path.join(steplib.FIXTURES, folder, "reference_param_counts.json")) as f:
            for bench, c in json.load(f)["configs"].items():
                out.append((f"{folder}/{bench}", arch, c["args_used"], c["param_count_real"],
                            c["param_count_numel"]))
    with open(os.path.join(steplib.FIXTURES, "fno", "reference_param_counts.json")) as f:
        for bench, c in json.load(f)["nsl_FNO"]["configs"].items():
            out.append((f"fno/nsl_FNO/{bench}", "nsl_fno", c["args_used"], c["param_count_real"],
                        c["param_count_numel"]))
    with open(os.path.join(steplib.FIXTURES, "geofno", "reference_param_counts.json")) as f:
        c = json.load(f)["nsl_FNO_elasticity"]
        out.append(("geofno/nsl_FNO_elasticity", "nsl_fno", c["args_used"], c["param_count_real"],
                    c["param_count_numel"]))
    return out


def _check_counts():
    """The StandardBench configurations' parameter counts, built on the meta device (no memory,
    no initialisation arithmetic: U-FNO's reach 233M)."""
    failures, got = [], {}
    for label, arch, args, real, numel in _count_configs():
        with torch.device("meta"):
            counts = _count(build(arch, _fields_of_args(arch, args, {})))
        got[label] = counts[0]
        if counts != (real, numel):
            failures.append(f"{label}: {counts} != {(real, numel)}")
    print(json.dumps({"check": "reference_param_counts", "configs": len(got),
                      "ok": not failures}), flush=True)
    return failures


def _check_paths():
    """Runs what no fixture reaches (1-D and 3-D grids, time inputs, fx-less grids, the Geo-FNO
    mesh from fx) once per arch: shapes, finiteness, and that a time of shape (B,) and (B, 1)
    give the same output."""
    failures, ran = [], 0
    gen = torch.Generator().manual_seed(5)
    base = dict(n_hidden=4, modes=3, ref=3, n_layers=2, n_heads=2, mlp_ratio=1, slice_num=3,
                unet_norm="batch", out_dim=2)
    setups = [
        (dict(geotype="structured", grid_dims=1, space_dim=1, fun_dim=1, unified_pos=False), [32]),
        (dict(geotype="structured", grid_dims=2, space_dim=2, fun_dim=0, unified_pos=True,
              time_input=True), [17, 20]),
        (dict(geotype="structured", grid_dims=3, space_dim=3, fun_dim=2, unified_pos=False),
         [16, 16, 16]),
        (dict(geotype="unstructured", space_dim=1, fun_dim=2, unified_pos=False, time_input=True,
              latent=[16, 16]), None),
    ]
    for arch in ARCHS:
        for extra, grid in setups:
            fields = {k: v for k, v in dict(base, **extra).items() if k in
                      dict(_NSL_FIELDS, **_ARCH_FIELDS[arch])}
            torch.manual_seed(1)
            model = build(arch, fields)
            b, n = 2, (math.prod(grid) if grid else 23)
            pos = torch.rand(b, n, fields["space_dim"], generator=gen)
            fx = torch.rand(b, n, fields["fun_dim"], generator=gen) if fields["fun_dim"] else None
            t = torch.rand(b, generator=gen) if fields.get("time_input") else None
            try:
                model.train()
                out = forward(model, pos, fx, grid, t)
                out.square().mean().backward()
                if fields.get("time_input"):
                    model.eval()
                    with torch.no_grad():
                        same = forward(model, pos, fx, grid, t) - forward(model, pos, fx, grid,
                                                                          t[:, None])
                    assert same.abs().max() == 0, "time (B,) and (B, 1) differ"
                assert list(out.shape) == [b, n, 2] and torch.isfinite(out).all(), out.shape
                ran += 1
            except Exception as e:  # noqa: BLE001 - reported, then raised by check()
                failures.append(f"{arch} {extra} {grid}: {type(e).__name__}: {e}")
    print(json.dumps({"check": "paths without fixtures (1-D, 3-D, time, fx mesh)", "ran": ran,
                      "ok": not failures}), flush=True)
    return failures


def check():
    torch.set_num_threads(1)
    cases = _cases()
    missing = EXPECTED_CASES - {name for _, name, _ in cases}
    failures = [f"fixture cases not found: {sorted(missing)}"] if missing else []
    for folder, name, arch in cases:
        failures += [f"{name}: {f}" for f in _check_case(folder, name, arch)]
    failures += _check_counts()
    failures += _check_paths()
    if failures:
        raise AssertionError("ref_nsl check failed:\n  " + "\n  ".join(failures))
    print(json.dumps({"check": "ref_nsl", "cases": len(cases), "ok": True}), flush=True)


if __name__ == "__main__":
    steplib.check_main(__doc__, check)
