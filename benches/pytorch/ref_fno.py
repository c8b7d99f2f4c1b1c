"""The FNO family for the reference training loop (train_ref.py): the original Fourier Neural
Operators and Geo-FNO, built from our configuration, in the interface every `ref_*.py` module has
(`ARCHS`, `build(arch, fields)`, `forward(model, pos, fx, grid, time)`, `load_reference(model,
tensors)`).

What is restated (the upstream scripts train when imported, so their classes are rewritten here
with the same torch operations, the same construction order and the same parameter names):
- `fno1d`, `fno2d`, `fno3d`: `SpectralConv{1,2,3}d` / `FNO{1,2,3}d` of
  https://github.com/zongyi-li/fourier_neural_operator at 4d3e0c3217ef766d714535751ce95ef625075436
  (`fourier_1d.py`, `fourier_2d.py`, `fourier_2d_time.py`, `fourier_3d.py`) and the same network in
  Geo-FNO's structured-mesh scripts (https://github.com/neuraloperator/Geo-FNO at
  d499bde15104f4ac34db6eaf57d3528a101e4ef6: `airfoils/naca_geofno.py`, `pipe/pipe.py`,
  `plasticity/plasticity_3d.py`), generalised as our `FnoSettings` (crates/ono-models/src/fno)
  generalises them: any width, modes, number of layers, input/output channels, padding per axis,
  optional physical coordinates in front of the input (`pos_input`), the unused BatchNorms.
- `geofno`: `SpectralConv2d` (with `fft2d` / `ifft2d`), `FNO2d` and `IPHI` of Geo-FNO's
  `elasticity/elas_geofno.py` at d499bde, as our `GeoFnoConfig` (crates/ono-models/src/geofno).
  The script's non-Hermitian conjugate extension in `ifft2d` (`flip(-1, -2)`, fixed upstream only
  in `elas_geofno_v2.py`) is kept, as our port keeps it.

One representation differs from upstream, not the arithmetic: each complex spectral weight is
kept, as our port keeps it, as a real (..., 2) parameter of (real, imaginary) pairs under the
upstream name and viewed as complex in the forward. The values, their random draws and the
gradients are upstream's (`grad` of the pair = `view_as_real` of upstream's complex `grad`), and
torch.optim steps and clips a complex parameter through its real view anyway; but
`Module.to(dtype=...)`, which the reference loop calls, would drop the imaginary part of a complex
parameter (and `Module.double()` would skip it).

Where our port computes the same map in another order, this module follows upstream; the results
differ by float32 rounding only: our FNO layer evaluates the kept modes as a pruned DFT (matrix
products) where corners do not overlap, not as full FFTs; our Geo-FNO evaluates IPHI once where
x_in = x_out, the script twice.

Check: `python benches/pytorch/ref_fno.py --check` reproduces every case of fixtures/fno and
fixtures/geofno but `nsl_fno_irregular_small` (NSL's FNO, another module) through `build` and
`forward`, and the reference configurations' parameter counts. Needs torch and numpy.
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import steplib  # noqa: E402

ARCHS = ("fno1d", "fno2d", "fno3d", "geofno")

# The geometry code's length: `nn.Linear(42, width)` is hard-coded in IPHI.
CODE_DIM = 42

# Missing fields take these values, as the Rust deserializers do: the dimension's first preset
# (crates/ono-models/src/fno/presets.rs) and the `elasticity` preset (geofno/presets.rs).
_FNO_BASE = dict(space_dim=None, fun_dim=1, out_dim=1, n_layers=4, pos_input=False, proj_hidden=128,
                 unused_batchnorms=False)
FNO_DEFAULTS = {
    1: dict(_FNO_BASE, space_dim=1, modes=[16], width=64, padding=[0]),            # burgers
    2: dict(_FNO_BASE, space_dim=2, modes=[12, 12], width=32, padding=[9, 9]),     # darcy
    3: dict(_FNO_BASE, space_dim=3, fun_dim=10, modes=[8, 8, 8], width=20,         # ns2d
            padding=[0, 0, 6], unused_batchnorms=True),
}
GEOFNO_DEFAULTS = dict(space_dim=2, fun_dim=42, out_dim=1, modes=[12, 12], width=32, latent=[40, 40],
                       iphi_width=32, proj_hidden=128)


def _index_grid(shape, dtype, device):
    """(n_1, ..., n_D, D): linspace(0, 1, n_j) along axis j, made by numpy in double and then cast,
    as the scripts' get_grid (float32 torch.linspace differs by an ulp at some points)."""
    axes = [torch.tensor(np.linspace(0, 1, n), dtype=torch.float64) for n in shape]
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1).to(dtype=dtype, device=device)


# ---------------------------------------------------------------------------------------------
# FNO on a regular grid
# ---------------------------------------------------------------------------------------------

def _complex_weight(scale, *shape):
    """`scale * torch.rand(*shape, dtype=torch.cfloat)` (upstream's init, same draws) as its real
    (..., 2) view, see the module documentation."""
    return nn.Parameter(torch.view_as_real(scale * torch.rand(*shape, dtype=torch.cfloat)).clone())


class SpectralConv(nn.Module):
    """`SpectralConv{1,2,3}d`: 2^(D-1) complex weights (in, out, m_1, ..., m_D). Weight k covers,
    along each non-halved axis j, the lowest m_j modes when bit j of k-1 is clear, else the highest
    (the scripts' order: 2-D [:, :], [-, :]; 3-D [:, :, :], [-, :, :], [:, -, :], [-, -, :])."""

    def __init__(self, in_channels, out_channels, modes):
        super().__init__()
        self.in_channels, self.out_channels, self.modes = in_channels, out_channels, list(modes)
        scale = 1 / (in_channels * out_channels)
        for k in range(1, 2 ** (len(modes) - 1) + 1):
            self.register_parameter(f"weights{k}", _complex_weight(scale, in_channels, out_channels,
                                                                   *modes))
        letters = "xyz"[:len(modes)]
        self.equation = f"bi{letters},io{letters}->bo{letters}"

    def forward(self, x):
        d = len(self.modes)
        dims = tuple(range(-d, 0))
        spatial = tuple(x.shape[-d:])
        x_ft = torch.fft.rfftn(x, dim=dims)
        out_ft = torch.zeros(x.shape[0], self.out_channels, *spatial[:-1], spatial[-1] // 2 + 1,
                             dtype=x_ft.dtype, device=x.device)
        # Sequential slice assignment: where corners overlap (2 m_j > n_j) the later one wins.
        for c in range(2 ** (d - 1)):
            idx = (slice(None), slice(None)) + tuple(
                slice(-m, None) if j < d - 1 and (c >> j) & 1 else slice(None, m)
                for j, m in enumerate(self.modes))
            w = torch.view_as_complex(getattr(self, f"weights{c + 1}"))
            out_ft[idx] = torch.einsum(self.equation, x_ft[idx], w)
        return torch.fft.irfftn(out_ft, s=spatial, dim=dims)


class FNO(nn.Module):
    """`FNO{D}d`. forward(x) has the scripts' signature: x (B, n_1, ..., n_D, C) channels last, the
    input channels ([mesh coordinates,] input function); the index grid is appended inside."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = dict(cfg)
        d, w = len(cfg["modes"]), cfg["width"]
        self.dim = d
        in_channels = cfg["space_dim"] * cfg["pos_input"] + cfg["fun_dim"] + d
        conv = (nn.Conv1d, nn.Conv2d, nn.Conv3d)[d - 1]
        # Construction order of the scripts (it fixes the seeded init): fc0, conv*, w*, bn*, fc1, fc2.
        self.fc0 = nn.Linear(in_channels, w)
        for l in range(cfg["n_layers"]):
            setattr(self, f"conv{l}", SpectralConv(w, w, cfg["modes"]))
        for l in range(cfg["n_layers"]):
            setattr(self, f"w{l}", conv(w, w, 1))
        if cfg["unused_batchnorms"]:
            # Constructed but never called by fourier_2d_time.py, fourier_3d.py, plasticity_3d.py;
            # kept for their state_dict and parameter count.
            bn = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)[d - 1]
            for l in range(cfg["n_layers"]):
                setattr(self, f"bn{l}", bn(w))
        self.fc1 = nn.Linear(w, cfg["proj_hidden"])
        self.fc2 = nn.Linear(cfg["proj_hidden"], cfg["out_dim"])

    def forward(self, x):
        d, n_layers = self.dim, self.cfg["n_layers"]
        shape = tuple(x.shape[1:1 + d])
        grid = _index_grid(shape, self.fc0.weight.dtype, x.device).expand(x.shape[0], *shape, d)
        x = self.fc0(torch.cat((x, grid), dim=-1))
        x = x.permute(0, d + 1, *range(1, d + 1))
        pad = []
        for p in reversed(self.cfg["padding"]):
            pad += [0, p]
        if any(self.cfg["padding"]):
            x = F.pad(x, pad)
        for l in range(n_layers):
            x = getattr(self, f"conv{l}")(x) + getattr(self, f"w{l}")(x)
            if l + 1 < n_layers:
                x = F.gelu(x)
        # `x[..., :n]` rather than the scripts' `x[..., :-p]`, which is empty for p = 0.
        x = x[(Ellipsis,) + tuple(slice(None, n) for n in shape)]
        x = x.permute(0, *range(2, d + 2), 1)
        return self.fc2(F.gelu(self.fc1(x)))


# ---------------------------------------------------------------------------------------------
# Geo-FNO on point clouds (elas_geofno.py)
# ---------------------------------------------------------------------------------------------

class GeoSpectralConv2d(nn.Module):
    """elas_geofno.py `SpectralConv2d`: an FNO layer on a grid, or, given x_in, from points to the
    (s1, s2) grid by a non-uniform DFT at iphi(x_in), or, given x_out, from the grid to points."""

    def __init__(self, in_channels, out_channels, modes1, modes2, s1=32, s2=32):
        super().__init__()
        self.out_channels, self.modes1, self.modes2, self.s1, self.s2 = \
            out_channels, modes1, modes2, s1, s2
        scale = 1 / (in_channels * out_channels)
        self.weights1 = _complex_weight(scale, in_channels, out_channels, modes1, modes2)
        self.weights2 = _complex_weight(scale, in_channels, out_channels, modes1, modes2)

    def forward(self, u, x_in=None, x_out=None, iphi=None, code=None):
        m1, m2 = self.modes1, self.modes2
        if x_in is None:
            u_ft = torch.fft.rfft2(u)
            s1, s2 = u.shape[-2], u.shape[-1]
        else:
            u_ft = self.fft2d(u, x_in, iphi, code)
            s1, s2 = self.s1, self.s2
        w1, w2 = torch.view_as_complex(self.weights1), torch.view_as_complex(self.weights2)
        factor1 = torch.einsum("bixy,ioxy->boxy", u_ft[:, :, :m1, :m2], w1)
        factor2 = torch.einsum("bixy,ioxy->boxy", u_ft[:, :, -m1:, :m2], w2)
        if x_out is None:
            out_ft = torch.zeros(u.shape[0], self.out_channels, s1, s2 // 2 + 1, dtype=factor1.dtype,
                                 device=u.device)
            out_ft[:, :, :m1, :m2] = factor1
            out_ft[:, :, -m1:, :m2] = factor2
            return torch.fft.irfft2(out_ft, s=(s1, s2))
        return self.ifft2d(torch.cat([factor1, factor2], dim=-2), x_out, iphi, code)

    def _phases(self, x_points, iphi, code):
        """K = ξ0·k1 + ξ1·k2 (B, N, 2 m1, 2 m2 - 1) at ξ = iphi(x), k1 ∈ [0..m1-1, -m1..-1],
        k2 ∈ [0..m2-1, -(m2-1)..-1]."""
        m1, m2 = self.modes1, self.modes2
        dev = x_points.device
        k1 = torch.cat((torch.arange(0, m1, device=dev), torch.arange(-m1, 0, device=dev)))
        k2 = torch.cat((torch.arange(0, m2, device=dev), torch.arange(-(m2 - 1), 0, device=dev)))
        x = x_points if iphi is None else iphi(x_points, code)
        k1 = k1.to(x.dtype).reshape(2 * m1, 1)
        k2 = k2.to(x.dtype).reshape(1, 2 * m2 - 1)
        return x[..., 0, None, None] * k1 + x[..., 1, None, None] * k2

    def fft2d(self, u, x_in, iphi=None, code=None):
        # A plain sum over the points: no 1/N, no quadrature weights.
        basis = torch.exp(-1j * 2 * np.pi * self._phases(x_in, iphi, code))
        return torch.einsum("bcn,bnxy->bcxy", u + 0j, basis)

    def ifft2d(self, u_ft, x_out, iphi=None, code=None):
        basis = torch.exp(1j * 2 * np.pi * self._phases(x_out, iphi, code))
        # The script's conjugate extension: flip(-1, -2) also reverses the k1 rows, so it is not
        # the Hermitian one; every published Geo-FNO number (and our port) has it.
        u_ft = torch.cat([u_ft, u_ft[..., 1:].flip(-1, -2).conj()], dim=-1)
        return torch.einsum("bcxy,bnxy->bcn", u_ft, basis).real


class GeoFNO2d(nn.Module):
    """elas_geofno.py `FNO2d(modes1, modes2, width, in_channels=2, out_channels, is_mesh=True, s1, s2)`
    with the projection width `proj_hidden` (128 in the script)."""

    def __init__(self, modes1, modes2, width, in_channels, out_channels, s1, s2, proj_hidden=128):
        super().__init__()
        self.s1, self.s2 = s1, s2
        self.fc0 = nn.Linear(in_channels, width)
        self.conv0 = GeoSpectralConv2d(width, width, modes1, modes2, s1, s2)
        self.conv1 = GeoSpectralConv2d(width, width, modes1, modes2)
        self.conv2 = GeoSpectralConv2d(width, width, modes1, modes2)
        self.conv3 = GeoSpectralConv2d(width, width, modes1, modes2)
        self.conv4 = GeoSpectralConv2d(width, width, modes1, modes2, s1, s2)
        self.w1 = nn.Conv2d(width, width, 1)
        self.w2 = nn.Conv2d(width, width, 1)
        self.w3 = nn.Conv2d(width, width, 1)
        self.b0 = nn.Conv2d(2, width, 1)
        self.b1 = nn.Conv2d(2, width, 1)
        self.b2 = nn.Conv2d(2, width, 1)
        self.b3 = nn.Conv2d(2, width, 1)
        self.b4 = nn.Conv1d(2, width, 1)
        self.fc1 = nn.Linear(width, proj_hidden)
        self.fc2 = nn.Linear(proj_hidden, out_channels)

    def forward(self, u, code=None, x_in=None, x_out=None, iphi=None):
        # is_mesh: the input function is the mesh, which is also where the output is evaluated.
        x_in = u if x_in is None else x_in
        x_out = u if x_out is None else x_out
        grid = _index_grid((self.s1, self.s2), self.fc0.weight.dtype, u.device)
        grid = grid.permute(2, 0, 1).unsqueeze(0).expand(u.shape[0], 2, self.s1, self.s2)
        u = self.fc0(u).permute(0, 2, 1)
        uc = F.gelu(self.conv0(u, x_in=x_in, iphi=iphi, code=code) + self.b0(grid))
        for l in (1, 2, 3):
            uc = F.gelu(getattr(self, f"conv{l}")(uc) + getattr(self, f"w{l}")(uc)
                        + getattr(self, f"b{l}")(grid))
        u = self.conv4(uc, x_out=x_out, iphi=iphi, code=code) + self.b4(x_out.permute(0, 2, 1))
        return self.fc2(F.gelu(self.fc1(u.permute(0, 2, 1))))


class IPHI(nn.Module):
    """elas_geofno.py `IPHI(width)`: the learned deformation x -> ξ = x + x ⊙ net(x, code)."""

    def __init__(self, width=32):
        super().__init__()
        self.width = width
        self.fc0 = nn.Linear(4, width)
        self.fc_code = nn.Linear(CODE_DIM, width)
        self.fc_no_code = nn.Linear(3 * width, 4 * width)
        self.fc1 = nn.Linear(4 * width, 4 * width)
        self.fc2 = nn.Linear(4 * width, 4 * width)
        self.fc3 = nn.Linear(4 * width, 4 * width)
        self.fc4 = nn.Linear(4 * width, 2)

    def forward(self, x, code=None):
        # The script's constants are made on "cuda" in float32 at construction; made here on the
        # input's device in its dtype (float32(1e-4); float32(pi) * 2^k, the product in float32).
        center = torch.tensor([0.0001, 0.0001], dtype=x.dtype, device=x.device).reshape(1, 1, 2)
        B = np.pi * torch.pow(2, torch.arange(0, self.width // 4, dtype=x.dtype, device=x.device))
        B = B.reshape(1, 1, 1, self.width // 4)
        angle = torch.atan2(x[:, :, 1] - center[:, :, 1], x[:, :, 0] - center[:, :, 0])
        radius = torch.norm(x - center, dim=-1, p=2)
        xd = torch.stack([x[:, :, 0], x[:, :, 1], angle, radius], dim=-1)
        b, n, d = xd.shape
        x_sin = torch.sin(B * xd.view(b, n, d, 1)).view(b, n, d * self.width // 4)
        x_cos = torch.cos(B * xd.view(b, n, d, 1)).view(b, n, d * self.width // 4)
        xd = torch.cat([self.fc0(xd), x_sin, x_cos], dim=-1).reshape(b, n, 3 * self.width)
        if code is not None:
            cd = self.fc_code(code).unsqueeze(1).repeat(1, n, 1)
            xd = torch.cat([cd, xd], dim=-1)
        else:
            xd = self.fc_no_code(xd)
        xd = torch.tanh(self.fc1(xd))
        xd = torch.tanh(self.fc2(xd))
        xd = torch.tanh(self.fc3(xd))
        return x + x * self.fc4(xd)


class GeoFNO(nn.Module):
    """The script's two modules under its variable names (`model`, `model_iphi`: the state_dict
    prefixes of our export and of the fixture); forward(x, code) = model(x, code=code,
    iphi=model_iphi) with x (B, N, 2) the mesh and code (B, 42) or None."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = dict(cfg)
        (m1, m2), (s1, s2) = cfg["modes"], cfg["latent"]
        # The script builds `model` first, then `model_iphi`.
        self.model = GeoFNO2d(m1, m2, cfg["width"], 2, cfg["out_dim"], s1, s2, cfg["proj_hidden"])
        self.model_iphi = IPHI(cfg["iphi_width"])

    def forward(self, x, code=None):
        return self.model(x, code=code, iphi=self.model_iphi)


# ---------------------------------------------------------------------------------------------
# The interface
# ---------------------------------------------------------------------------------------------

def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _fields(arch, fields):
    """The configuration with the defaults filled in, type-checked and validated as the Rust
    config's serde and `validate` do."""
    if not isinstance(fields, dict):
        raise ValueError(f"{arch}: fields must be a dict, got {type(fields).__name__}")
    fields = dict(fields)
    if fields.get("arch", arch) != arch:
        raise ValueError(f"fields are for arch {fields['arch']!r}, not {arch!r}")
    fields.pop("arch", None)
    if arch == "geofno":
        defaults, lists = GEOFNO_DEFAULTS, {"modes": 2, "latent": 2}
        bools = ()
    else:
        d = int(arch[3])  # "fno{d}d"
        defaults, lists = FNO_DEFAULTS[d], {"modes": d, "padding": d}
        bools = ("pos_input", "unused_batchnorms")
    unknown = sorted(set(fields) - set(defaults))
    if unknown:
        raise ValueError(f"{arch}: unknown fields {unknown} (known: {sorted(defaults)})")
    cfg = {**defaults, **fields}
    for k, v in cfg.items():
        if k in bools:
            ok = isinstance(v, bool)
        elif k in lists:
            ok = isinstance(v, (list, tuple)) and all(_is_int(e) for e in v)
            if ok and len(v) != lists[k]:
                raise ValueError(f"{arch}: {k} must be {lists[k]} numbers, got {v}")
            if ok:
                cfg[k] = list(v)
        else:
            ok = _is_int(v)
        if not ok:
            raise ValueError(f"{arch}: field {k} = {v!r} has the wrong type")
    c = cfg
    if arch == "geofno":
        (m1, m2), (s1, s2) = c["modes"], c["latent"]
        if m1 < 1 or m2 < 1 or 2 * m1 > s1 or m2 > s2 // 2 + 1:
            raise ValueError(f"geofno: modes {c['modes']} must be positive and fit the latent grid "
                             f"{s1} x {s2} (2*m1 <= s1, m2 <= s2/2 + 1)")
        if c["width"] < 1 or c["proj_hidden"] < 1 or c["out_dim"] < 1:
            raise ValueError(f"geofno: width, proj_hidden and out_dim must be positive: {c}")
        if c["iphi_width"] < 4 or c["iphi_width"] % 4:
            raise ValueError(f"geofno: iphi_width {c['iphi_width']} must be a positive multiple of 4")
    else:
        if any(m < 1 for m in c["modes"]) or any(p < 0 for p in c["padding"]):
            raise ValueError(f"{arch}: modes must be positive and padding >= 0: {c}")
        if c["width"] < 1 or c["proj_hidden"] < 1 or c["out_dim"] < 1 or c["n_layers"] < 1:
            raise ValueError(f"{arch}: width, proj_hidden, out_dim and n_layers must be positive: {c}")
        if c["fun_dim"] < 0 or c["space_dim"] < 0:
            raise ValueError(f"{arch}: fun_dim and space_dim must be >= 0: {c}")
        if c["pos_input"] and c["space_dim"] == 0:
            raise ValueError(f"{arch}: pos_input needs coordinates (space_dim > 0)")
    return cfg


def build(arch, fields):
    """The reference network of `arch` for our configuration `fields` (the Rust config's serde
    fields without "arch"; missing ones take the Rust defaults), with the scripts' own init."""
    if arch not in ARCHS:
        raise ValueError(f"ref_fno builds {ARCHS}, not {arch!r}")
    cfg = _fields(arch, fields)
    return GeoFNO(cfg) if arch == "geofno" else FNO(cfg)


def _finite(name, t):
    # Our forward refuses non-finite inputs (ono_kernels::health); so does this one.
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} is not finite")


def forward(model, pos, fx, grid=None, time=None):
    """(B, N, out_dim), what our `NeuralOperator::forward(ModelInput { pos, fx, grid })` returns.

    FNO: the N points are the row-major grid `grid` (optional in 1-D); pos enters only with
    pos_input, in front of fx. Geo-FNO: the mesh is pos when space_dim = 2, else fx[..., :2]; the
    rest of fx is the geometry code (42 channels, constant over the points) or absent."""
    if time is not None:
        raise ValueError("the FNO family takes no time input")
    cfg = model.cfg
    if pos.dim() != 3 or pos.shape[0] < 1 or pos.shape[1] < 1:
        raise ValueError(f"pos must be (B, N, space_dim) with B, N > 0, got {tuple(pos.shape)}")
    b, n = pos.shape[0], pos.shape[1]
    want_fx = (b, n, cfg["fun_dim"])
    if (fx is None and cfg["fun_dim"] != 0) or (fx is not None and tuple(fx.shape) != want_fx):
        raise ValueError(f"fx must be ({b}, {n}, {cfg['fun_dim']}), got "
                         f"{None if fx is None else tuple(fx.shape)}")
    if isinstance(model, GeoFNO):
        return _geofno_forward(model, pos, fx)
    dtype = model.fc0.weight.dtype
    d = model.dim
    if grid is None:
        if d != 1:
            raise ValueError(f"fno{d}d: the points must be a regular grid; pass its shape")
        grid = [n]
    grid = [int(s) for s in grid]
    if len(grid) != d or math.prod(grid) != n:
        raise ValueError(f"fno{d}d: grid {grid} is not a {d}-D grid of the {n} points")
    for j, (m, s, p) in enumerate(zip(cfg["modes"], grid, cfg["padding"])):
        cap = (s + p) // 2 + 1 if j + 1 == d else s + p
        if m > cap:
            raise ValueError(f"fno{d}d: {m} modes do not fit axis {j} of the grid {grid} (padding {p})")
    parts = []
    if cfg["pos_input"]:
        if pos.shape[2] != cfg["space_dim"]:
            raise ValueError(f"pos must be ({b}, {n}, {cfg['space_dim']}), got {tuple(pos.shape)}")
        parts.append(pos.to(dtype))
    if fx is not None:
        parts.append(fx.to(dtype))
    x = torch.cat(parts, -1) if parts else pos.new_zeros(b, n, 0, dtype=dtype)
    _finite("the input (pos or fx)", x)
    out = model(x.reshape(b, *grid, x.shape[-1]))
    return out.reshape(b, n, cfg["out_dim"])


def _geofno_forward(model, pos, fx):
    cfg = model.cfg
    b, n = pos.shape[0], pos.shape[1]
    dtype = model.model.fc0.weight.dtype
    if pos.shape[2] != cfg["space_dim"]:
        raise ValueError(f"pos must be ({b}, {n}, {cfg['space_dim']}), got {tuple(pos.shape)}")
    mesh_in_pos = cfg["space_dim"] == 2
    code_dim = cfg["fun_dim"] - (0 if mesh_in_pos else 2)
    if (not mesh_in_pos and cfg["fun_dim"] < 2) or code_dim not in (0, CODE_DIM):
        raise ValueError(f"geofno: the mesh must be pos (B, N, 2) or the first two fx channels, then "
                         f"the geometry code ({CODE_DIM} channels) or nothing; space_dim "
                         f"{cfg['space_dim']}, fun_dim {cfg['fun_dim']}")
    fx = None if fx is None else fx.to(dtype)
    if mesh_in_pos:
        mesh, code = pos.to(dtype), fx
    else:
        mesh, code = fx[..., :2], (fx[..., 2:] if code_dim > 0 else None)
    _finite("the mesh coordinates", mesh)
    if code is not None:
        _finite("the geometry code", code)
        if code.shape[-1] != CODE_DIM:
            raise ValueError(f"geofno: the code must have {CODE_DIM} channels, got {code.shape[-1]}")
        if not bool((code == code[:, :1]).all()):
            raise ValueError("geofno: the geometry code must be the same at every point of a sample")
        code = code[:, 0]
    return model(mesh, code)


def complex_weights(model):
    """The names of the complex weights (kept as real (..., 2) pairs)."""
    return {f"{prefix}.{name}" if prefix else name
            for prefix, m in model.named_modules() if isinstance(m, (SpectralConv, GeoSpectralConv2d))
            for name, _ in m.named_parameters(recurse=False)}


def load_reference(model, tensors):
    """Copies `tensors` (reference names: `fc0.weight`, `conv0.weights1`, `bn0.running_mean`,
    `model.conv4.weights2`, `model_iphi.fc1.bias`, ...) into the model, strictly: every parameter
    and buffer, nothing else, each with its shape. A complex weight may come as the real (..., 2)
    pairs under its own name (our export), as `<name>.view_as_real` (the fixtures) or as the complex
    tensor (a reference state_dict)."""
    own = dict(model.named_parameters())
    own.update(model.named_buffers())
    cplx = complex_weights(model)
    given, problems, bad = {}, [], set()
    for key, t in tensors.items():
        name = key[:-len(".view_as_real")] if key.endswith(".view_as_real") else key
        bad.add(name)  # taken back below once the tensor fits
        if name not in own:
            problems.append(f"unexpected {key}")
        elif name in given:
            problems.append(f"{name} given twice")
        elif key != name and name not in cplx:
            problems.append(f"{key}: {name} is not a complex weight")
        elif t.is_complex() and (key != name or name not in cplx):
            problems.append(f"{key}: complex, the model's {name} is real")
        else:
            if t.is_complex():
                t = torch.view_as_real(t)
            target = own[name]
            if tuple(t.shape) != tuple(target.shape):
                problems.append(f"{key}: shape {tuple(t.shape)}, the model has {tuple(target.shape)}")
            elif t.is_floating_point() != target.is_floating_point():
                problems.append(f"{key}: dtype {t.dtype}, the model has {target.dtype}")
            else:
                given[name] = t
                bad.discard(name)
    missing = sorted(set(own) - set(given) - bad)
    if missing:
        problems.append(f"missing {missing}")
    if problems:
        raise ValueError(f"weights do not fit {type(model).__name__}: " + "; ".join(problems))
    with torch.no_grad():
        for name, t in given.items():
            own[name].copy_(t)


def param_counts(model):
    """(complex entries counted twice, PyTorch numel of upstream's complex weights): the FNO
    scripts' count_params and Geo-FNO's."""
    real = sum(p.numel() for p in model.parameters())
    params = dict(model.named_parameters())
    return real, real - sum(params[n].numel() // 2 for n in complex_weights(model))


# ---------------------------------------------------------------------------------------------
# The check
# ---------------------------------------------------------------------------------------------

CASES = (("fno", "fno1d_small"), ("fno", "fno2d_small"), ("fno", "fno3d_small"),
         ("geofno", "airfoil_geofno_small"), ("geofno", "plasticity_geofno_small"),
         ("geofno", "elas_geofno_small"))
SKIPPED = {"nsl_fno_irregular_small": "NSL models/FNO.py (arch nsl_fno), another module"}


def case_fields(side):
    """(arch, fields) of a fixture case: its constructor kwargs and the constants of its script,
    as crates/ono-models/src/{fno,geofno}/reference.rs read them."""
    kw, shapes = side["constructor_kwargs"], side["tensors"]
    out_dim = shapes["output.eval"]["shape"][-1]
    if side["model_class"].startswith("FNO2d + IPHI"):
        fno, iphi = kw["model = FNO2d"], kw["model_iphi = IPHI"]
        assert fno["is_mesh"] and fno["in_channels"] == 2
        return "geofno", dict(space_dim=2, fun_dim=CODE_DIM if "input.code" in shapes else 0,
                              out_dim=fno["out_channels"], modes=[fno["modes1"], fno["modes2"]],
                              width=fno["width"], latent=[fno["s1"], fno["s2"]],
                              iphi_width=iphi["width"], proj_hidden=128)
    d = int(side["model_class"][3])
    geo = side["family"] == "geofno"
    modes = [kw["modes"]] if d == 1 else [kw[f"modes{j}"] for j in range(1, d + 1)]
    padding = {(False, 1): [0], (False, 2): [9, 9], (False, 3): [0, 0, 6],
               (True, 2): [8, 8], (True, 3): [5, 5, 5]}[(geo, d)]
    channels = shapes["input.x"]["shape"][-1]
    pos_input = geo and d == 2  # Geo-FNO's 2-D scripts feed the mesh coordinates
    return f"fno{d}d", dict(space_dim=channels if pos_input else d,
                            fun_dim=0 if pos_input else channels, out_dim=out_dim, modes=modes,
                            width=kw["width"], n_layers=4, padding=padding, pos_input=pos_input,
                            proj_hidden=128, unused_batchnorms="buffers" in side)


def case_inputs(arch, fields, t, dtype):
    """(pos, fx, grid, y) of a fixture case in our convention (B, N, ·)."""
    x = t["input.x"].to(dtype)
    b = x.shape[0]
    if arch == "geofno":
        n = x.shape[1]
        fx = t["input.code"].to(dtype).unsqueeze(1).expand(b, n, CODE_DIM) if "input.code" in t else None
        return x, fx, None, t["input.y"].to(dtype).reshape(b, n, -1)
    shape = list(x.shape[1:-1])
    n = math.prod(shape)
    x = x.reshape(b, n, x.shape[-1])
    # Our ModelInput for a grid: pos = the index grid, which FNO reads only with pos_input.
    pos, fx = (x, None) if fields["pos_input"] else (
        _index_grid(shape, dtype, x.device).reshape(1, n, len(shape)).expand(b, n, len(shape)), x)
    grid = None if len(shape) == 1 else shape  # 1-D: the default grid
    return pos, fx, grid, t["input.y"].to(dtype).reshape(b, n, -1)


def _check_loader(model, ref):
    """load_reference takes the three layouts of a complex weight (the fixtures' `.view_as_real`,
    our export's real (..., 2) under the bare name, a complex tensor) and refuses a missing, an
    extra and a misshapen tensor."""
    bare = {k[:-len(".view_as_real")] if k.endswith(".view_as_real") else k: v for k, v in ref.items()}
    cplx = complex_weights(model)
    for layout in (bare, {k: torch.view_as_complex(v) if k in cplx else v for k, v in bare.items()}):
        load_reference(model, layout)
        for k, v in model.state_dict().items():
            assert torch.equal(v, bare[k]), k
    name = next(iter(ref))
    for bad in ({k: v for k, v in ref.items() if k != name},
                dict(ref, **{"no.such.weight": torch.zeros(1)}),
                dict(ref, **{name: torch.zeros(*ref[name].shape, 3)})):
        try:
            load_reference(model, bad)
        except ValueError:
            continue
        raise AssertionError("load_reference accepted a bad set of weights")


def check_case(folder, case):
    t, side = steplib.fixture(folder, case)
    arch, fields = case_fields(side)
    ref = {k[len("param."):]: v.clone() for k, v in t.items() if k.startswith("param.")}
    tol = side["tolerances"]
    overrides = tol.get("grad_rel_overrides", {})
    rec = {"case": f"{folder}/{case}", "arch": arch, "fields": fields}
    failures = []

    # The seeded init is the scripts' own: under the fixture's seed it rebuilds its weights, to
    # the last bits that MKL's vector math may round otherwise on another CPU (steplib).
    def pairs(m):
        fresh = dict(m.state_dict())
        return [(fresh[k[:-len(".view_as_real")] if k.endswith(".view_as_real") else k], v)
                for k, v in ref.items()]
    ulps, init_failures = steplib.init_draws(lambda: build(arch, fields), pairs)
    rec["init_seed0_float32_ulps"] = ulps
    failures += init_failures
    torch.manual_seed(0)
    model = build(arch, fields)

    _check_loader(model, ref)
    torch.manual_seed(123)
    model = build(arch, fields)
    load_reference(model, ref)
    rec["params_real"], rec["params_numel"] = param_counts(model)
    if (rec["params_real"], rec["params_numel"]) != (side["param_count_real"], side["param_count_numel"]):
        failures.append(f"parameter counts {rec['params_real']}/{rec['params_numel']} != "
                        f"{side['param_count_real']}/{side['param_count_numel']}")

    pos, fx, grid, y = case_inputs(arch, fields, t, torch.float32)
    b = y.shape[0]
    model.eval()
    with torch.no_grad():
        out_eval = forward(model, pos, fx, grid)
    errs = {"output.eval": steplib.normwise(out_eval, t["output.eval"].reshape(out_eval.shape))}
    model.train()
    loss = steplib.rel_l2_sum(forward(model, pos, fx, grid), y)
    loss.backward()
    errs["loss.train"] = steplib.normwise(loss.detach(), t["loss.train"])
    for k, e in errs.items():
        if not e <= tol["output_rel"]:
            failures.append(f"{k}: {e:.3g} > {tol['output_rel']}")

    worst = (0.0, None, None)
    cplx = complex_weights(model)
    for name, p in model.named_parameters():
        g = p.grad if p.grad is not None else torch.zeros_like(p)
        key = f"grad.{name}.view_as_real" if name in cplx else f"grad.{name}"
        want = t[key]
        bound = overrides.get(name, tol["grad_rel"])
        if want.abs().max().item() == 0:
            # The fixture's zeros stand for torch's None: the tensor takes no part in the forward.
            e = g.abs().max().item()
            ok = e == 0
        else:
            e = steplib.normwise(g, want)
            ok = e <= bound
        if not ok:
            failures.append(f"{key}: {e:.3g} > {bound}")
        if e / bound >= worst[0]:
            worst = (e / bound, name, e)
    errs["grad_worst"] = {"name": worst[1], "rel": worst[2], "of_bound": worst[0]}

    # The same forward in float64 against output.eval_f64: formula errors apart from rounding.
    # (Module.to as the reference loop calls it.)
    m64 = model.to(dtype=torch.float64)
    pos64, fx64, grid64, _ = case_inputs(arch, fields, {k: v.double() if v.is_floating_point() else v
                                                       for k, v in t.items()}, torch.float64)
    m64.eval()
    with torch.no_grad():
        out64 = forward(m64, pos64, fx64, grid64)
    errs["output.eval_f64"] = steplib.normwise(out64, t["output.eval_f64"].reshape(out64.shape))
    if not errs["output.eval_f64"] <= steplib.F64_STORED_REL:
        failures.append(f"output.eval_f64: {errs['output.eval_f64']:.3g} > "
                        f"{steplib.F64_STORED_REL:g}")

    # The scripts' own call, model(x) on channels-last input, is what forward wraps.
    if arch != "geofno":
        with torch.no_grad():
            m32 = model.to(dtype=torch.float32)
            direct = m32(t["input.x"]).reshape(b, -1, fields["out_dim"])
            same = torch.equal(direct, forward(m32, *case_inputs(arch, fields, t, torch.float32)[:3]))
        if not same:
            failures.append("forward(...) differs from model(x)")
    rec.update(errs)
    rec["ok"] = not failures
    if failures:
        rec["failures"] = failures
    print(json.dumps(rec), flush=True)
    return failures


def _counted(arch, fields):
    # On the meta device: the counts need no memory and no random draws.
    with torch.device("meta"):
        return param_counts(build(arch, fields))


def check_counts():
    """The reference configurations' parameter counts (reference_param_counts.json) from our
    presets' fields."""
    base = dict(n_layers=4, proj_hidden=128, unused_batchnorms=False, pos_input=False, out_dim=1)
    fno = json.load(open(os.path.join(steplib.FIXTURES, "fno", "reference_param_counts.json")))["configs"]
    geo = json.load(open(os.path.join(steplib.FIXTURES, "geofno", "reference_param_counts.json")))["configs"]
    mesh2d = dict(base, space_dim=2, fun_dim=0, pos_input=True, padding=[8, 8], width=32)
    rows = [
        ("fno/FNO1d_burgers", fno["FNO1d_burgers"], "fno1d",
         dict(base, space_dim=1, fun_dim=1, modes=[16], width=64, padding=[0])),
        ("fno/FNO2d_darcy", fno["FNO2d_darcy"], "fno2d",
         dict(base, space_dim=2, fun_dim=1, modes=[12, 12], width=32, padding=[9, 9])),
        ("fno/FNO3d_ns", fno["FNO3d_ns"], "fno3d",
         dict(base, space_dim=3, fun_dim=10, modes=[8, 8, 8], width=20, padding=[0, 0, 6],
              unused_batchnorms=True)),
        ("geofno/airfoil", geo["airfoil"], "fno2d", dict(mesh2d, modes=[24, 12])),
        ("geofno/pipe", geo["pipe"], "fno2d", dict(mesh2d, modes=[12, 12])),
        ("geofno/plasticity", geo["plasticity"], "fno3d",
         dict(base, space_dim=3, fun_dim=1, out_dim=4, modes=[12, 12, 8], width=32, padding=[5, 5, 5],
              unused_batchnorms=True)),
        ("geofno/elasticity", geo["elasticity"], "geofno", dict(GEOFNO_DEFAULTS)),
    ]
    failures = []
    for label, want, arch, fields in rows:
        got = _counted(arch, fields)
        rec = {"counts": label, "arch": arch, "params_real": got[0], "params_numel": got[1],
               "ok": got == (want["param_count_real"], want["param_count_numel"])}
        if arch == "geofno":
            with torch.device("meta"):
                m = build(arch, fields)
            parts = {"model": param_counts(m.model), "model_iphi": param_counts(m.model_iphi)}
            rec["parts"] = parts
            rec["ok"] &= all(parts[k] == (want[k]["param_count_real"], want[k]["param_count_numel"])
                             for k in parts)
        if not rec["ok"]:
            failures.append(f"{label}: {got} != ({want['param_count_real']}, {want['param_count_numel']})")
        print(json.dumps(rec), flush=True)
    return failures


def check():
    torch.set_num_threads(1)
    failures = []
    for folder, case in CASES:
        failures += [f"{folder}/{case}: {f}" for f in check_case(folder, case)]
    failures += check_counts()
    for case, why in SKIPPED.items():
        print(json.dumps({"case": f"geofno/{case}", "skipped": why}), flush=True)
    if failures:
        raise AssertionError("ref_fno check failed:\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    steplib.check_main(__doc__, check)
