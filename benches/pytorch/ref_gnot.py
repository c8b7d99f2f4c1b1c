"""GNOT for the reference training loop (train_ref.py): the General Neural Operator Transformer
and its simpler variant CGPT, built from our configuration (`arch = "gnot"`,
crates/ono-models/src/gnot/config.rs `GnotConfig`), in the interface every `ref_*.py` module has
(`ARCHS`, `build(arch, fields)`, `forward(model, pos, fx, grid, time, *, functions, mask, query,
query_mask)`, `load_reference(model, tensors)`, `loss(pred, y, mask)`).

What is restated: `GNOT` (`models/mmgpt.py`), `CGPTNO` (`models/cgpt.py`, what `train.py
--model-name CGPT` builds) and `MLP` (`models/mlp.py`) of https://github.com/thu-ml/GNOT at
commit 5ee2e6925a43f9a340a6016bad4da2c82a452cbe (byte-identical to HaoZhongkai/GNOT), with the
linear attention (`attn_type = 'linear'`, i.e. 'l1'), GELU, no Fourier embedding, as
fixtures/gnot/README.md describes them. The model files import dgl, which they use only to
unbatch and pad the samples, so the classes are rewritten here with the same torch operations in
the same order, the same construction order (after `torch.manual_seed(s)`, `build` draws the
parameters upstream's constructor draws: `check` proves it bit for bit) and the same parameter
names.

What follows our port rather than upstream's call signature (crates/ono-models/src/gnot/mod.rs):
- the samples come padded: `pos` (B, T, space_dim) are the query coordinates (the gate's input),
  `fx` (B, T, fun_dim) the per-point features the trunk appends to them (θ broadcast to every
  point, as our trainer appends it, crates/ono-train/src/decoder.rs); upstream's
  `cat([x, θ])` is `cat([pos, fx])`. The output keeps every row, (B, T, out_dim): dropping the
  rows of padded points is the caller's (upstream drops them inside);
- the input functions come as `functions`, one (values (B, N_l, c_l), mask (B, N_l) or None) per
  `function_dims` entry, the rows (x_i, f(x_i)) as the model reads them;
- `mask_padding` (our deviation, off by default): with it, the padded query rows (`mask`) and the
  padded input-function rows (each function's mask) are left out of every attention sum and
  normaliser, as ono_kernels::attention::gnot_cross does; a sample with no real row in an input
  function gets nothing from it. Off, masks are shape-checked and ignored: padded rows count, as
  upstream's (and `gnot_ragged_small` pins that down);
- inputs are cast to the model's dtype and must be finite; `time` and query points are refused,
  `grid` is not read.

`loss(pred, y, mask)` is GNOT's training loss as our trainer computes it
(crates/ono-train/src/loss.rs `channel_relative_l2`, upstream's `WeightedLpRelLoss(p=2)`): per
sample and channel √(Σ_n (ŷ−y)² / Σ_n y²) over the real points, averaged over samples ×
channels. It is a batch mean already (our LossSpec's reduction `mean` adds no further division),
and our trainer applies it to the normalized output against the normalized target.

Check: `python benches/pytorch/ref_gnot.py --check` reproduces every fixture case of
fixtures/gnot (gnot_small, gnot_ragged_small, cgpt_small, cgpt_noinput_small) through `build`,
`load_reference` and `forward`: the seeded initialisation, the parameter counts, output.eval,
loss.train, every gradient, and output.eval_f64 from a float64 forward; the parameter counts of
fixtures/gnot/reference_param_counts.json through our presets; and what no fixture reaches (the
masks of `mask_padding`, `loss` against upstream's pooled formula, dropout, the refusals).
Needs torch and numpy.
"""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gnot_step  # noqa: E402
import steplib  # noqa: E402

UPSTREAM = ("https://github.com/thu-ml/GNOT", "5ee2e6925a43f9a340a6016bad4da2c82a452cbe")
ARCHS = ("gnot",)
NETWORK = "ref_gnot.GNOT / ref_gnot.CGPTNO (restated from thu-ml/GNOT@5ee2e69)"

MODELS = ("gnot", "cgpt")

# GnotConfig's serde `default`: a missing field takes the `gnot` preset's value
# (crates/ono-models/src/gnot/presets.rs `base`).
DEFAULTS = dict(model="gnot", space_dim=2, fun_dim=11, out_dim=3, function_dims=[2], n_hidden=128,
                n_layers=3, n_head=1, n_experts=1, n_inner=4, mlp_layers=3, ffn_dropout=0.0,
                attn_dropout=0.0, mask_padding=False, block_order="cross_self")
# GnotConfig's block orders; the reference (and so this restatement) has only the first.
BLOCK_ORDERS = ("cross_self", "self_cross", "cross_cross")
PRESETS = {
    "gnot": {},
    "gnot_e3": dict(n_experts=3),
    "gnot_d256_e3": dict(n_hidden=256, n_experts=3),
    "cgpt": dict(model="cgpt", fun_dim=12, function_dims=[]),
}
_INTS = ("space_dim", "fun_dim", "out_dim", "n_hidden", "n_head", "n_experts", "n_inner")
_USIZE = ("n_layers", "mlp_layers")  # Rust usize: serde refuses negative values
_FLOATS = ("ffn_dropout", "attn_dropout")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def config(fields):
    """`fields` (our GnotConfig's serde JSON without "arch") with the defaults filled in,
    type-checked as serde does and validated as `GnotConfig::validate`."""
    if not isinstance(fields, dict):
        raise ValueError(f"gnot: fields must be a dict, got {type(fields).__name__}")
    fields = dict(fields)
    if fields.pop("arch", "gnot") != "gnot":
        raise ValueError("gnot: the fields are for another arch")
    unknown = sorted(set(fields) - set(DEFAULTS))
    if unknown:  # serde's deny_unknown_fields
        raise ValueError(f"gnot configuration: unknown fields {unknown} (known: {sorted(DEFAULTS)})")
    c = {**DEFAULTS, **fields}
    for k, v in c.items():
        if k in _INTS:
            ok = _is_int(v)
        elif k in _USIZE:
            ok = _is_int(v) and v >= 0
        elif k in _FLOATS:
            # serde_json reads an integer into an f64 as well.
            ok = isinstance(v, (int, float)) and not isinstance(v, bool)
            if ok:
                c[k] = float(v)
        elif k == "function_dims":
            ok = isinstance(v, (list, tuple)) and all(_is_int(e) for e in v)
            if ok:
                c[k] = list(v)
        elif k == "mask_padding":
            ok = isinstance(v, bool)
        elif k == "block_order":
            ok = v in BLOCK_ORDERS
        else:  # model
            ok = v in MODELS
        if not ok:
            raise ValueError(f"gnot configuration: field {k} = {v!r} has the wrong type")

    def bad(msg):
        raise ValueError(f"gnot: {msg}")
    if c["space_dim"] < 1 or c["fun_dim"] < 0 or c["out_dim"] < 1:
        bad(f"space_dim {c['space_dim']} and out_dim {c['out_dim']} must be positive, "
            f"fun_dim {c['fun_dim']} >= 0")
    if any(ch < 1 for ch in c["function_dims"]):
        bad(f"every input function needs channels: function_dims {c['function_dims']}")
    if c["n_hidden"] < 1 or c["n_head"] < 1 or c["n_hidden"] % c["n_head"]:
        bad(f"n_hidden {c['n_hidden']} must be a positive multiple of n_head {c['n_head']}")
    if c["n_layers"] < 1 or c["n_experts"] < 1 or c["n_inner"] < 1:
        bad(f"n_layers {c['n_layers']}, n_experts {c['n_experts']} and n_inner {c['n_inner']} "
            "must be positive")
    if c["model"] == "cgpt" and (c["n_experts"] != 1 or c["n_inner"] != 4):
        bad("cgpt has one feed-forward layer of width 4*n_hidden per place (GPTConfig ignores "
            f"n_inner): n_experts must be 1 and n_inner 4, got {c['n_experts']} and {c['n_inner']}")
    for k in _FLOATS:
        if not 0.0 <= c[k] <= 1.0:
            bad(f"{k} must lie in [0, 1], got {c[k]}")
    if c["block_order"] != "cross_self":
        bad(f"block_order {c['block_order']!r}: the reference has only 'cross_self' (GNOT's "
            "Table 2 ablations are not published code), so there is nothing to restate")
    return c


################################################################################################
# The network (models/mlp.py, models/mmgpt.py, models/cgpt.py)
################################################################################################

# `models/mlp.py`'s MLP as gnot_step.py restates it (registered, and so drawn, in upstream's
# order: linear_pre, linear_post, linears).
MLP = gnot_step.MLP


def _heads(t, n_head):
    b, n, c = t.shape
    return t.view(b, n, n_head, c // n_head).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _normalized(q, k, v, mask):
    """One key/value set's term (q̃ (k̃ᵀ v)) / (q̃ · Σ k̃) for q̃ already softmaxed, as upstream
    writes it (context first, then × D_inv). `mask` (B, N_k) bool zeroes padded keys after the
    softmax, which removes them from kᵀv and from Σk̃ (our `mask_padding`); a sample with no real
    key then has a zero numerator and a zero denominator, and 0 × 1/1 keeps the NaN of 0/0 out
    of the output and the gradients, as ono_kernels::attention::gnot_cross does."""
    k = k.softmax(dim=-1)
    if mask is not None:
        k = k * mask[:, None, :, None].to(device=k.device, dtype=k.dtype)
    k_cumsum = k.sum(dim=-2, keepdim=True)
    denom = (q * k_cumsum).sum(dim=-1, keepdim=True)
    if mask is not None:
        denom = torch.where(denom != 0, denom, torch.ones_like(denom))
    return (q @ (k.transpose(-2, -1) @ v)) * (1. / denom)


class LinearAttention(nn.Module):
    """`LinearAttention` ('l1'): q̃ = softmax over each head's features, y = q̃ (k̃ᵀv)/(q̃·Σk̃) + q̃,
    attn_drop on y, proj."""

    def __init__(self, d, n_head, attn_pdrop):
        super().__init__()
        self.key = nn.Linear(d, d)
        self.query = nn.Linear(d, d)
        self.value = nn.Linear(d, d)
        self.attn_drop = nn.Dropout(attn_pdrop)
        self.proj = nn.Linear(d, d)
        self.n_head = n_head

    def forward(self, x, mask=None):
        q = _heads(self.query(x), self.n_head).softmax(dim=-1)
        k = _heads(self.key(x), self.n_head)
        v = _heads(self.value(x), self.n_head)
        y = self.attn_drop(_normalized(q, k, v, mask) + q)
        return self.proj(_merge(y))


class LinearCrossAttention(nn.Module):
    """`LinearCrossAttention`: one query, `keys.l` / `values.l` per input function, the terms
    summed (not averaged) on top of q̃; no dropout is applied (upstream builds attn_drop and
    never calls it). With no input function it is proj(q̃)."""

    def __init__(self, d, n_head, n_inputs, attn_pdrop):
        super().__init__()
        self.query = nn.Linear(d, d)
        self.keys = nn.ModuleList([nn.Linear(d, d) for _ in range(n_inputs)])
        self.values = nn.ModuleList([nn.Linear(d, d) for _ in range(n_inputs)])
        self.attn_drop = nn.Dropout(attn_pdrop)
        self.proj = nn.Linear(d, d)
        self.n_head, self.n_inputs = n_head, n_inputs

    def forward(self, x, ys, masks):
        q = _heads(self.query(x), self.n_head).softmax(dim=-1)
        out = q
        for i in range(self.n_inputs):
            k = _heads(self.keys[i](ys[i]), self.n_head)
            v = _heads(self.values[i](ys[i]), self.n_head)
            out = out + 1 * _normalized(q, k, v, masks[i])
        return self.proj(_merge(out))


def _ffn(d, inner):
    return nn.Sequential(nn.Linear(d, inner), nn.GELU(), nn.Linear(inner, d))


class _BlockBase(nn.Module):
    """What both blocks register first, in upstream's order: ln1, ln2_branch, ln3-5, selfattn,
    crossattn, the residual dropouts."""

    def __init__(self, c):
        super().__init__()
        d, n = c["n_hidden"], len(c["function_dims"])
        self.ln1 = nn.LayerNorm(d)
        self.ln2_branch = nn.ModuleList([nn.LayerNorm(d) for _ in range(n)])
        self.ln3, self.ln4, self.ln5 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.selfattn = LinearAttention(d, c["n_head"], c["attn_dropout"])
        self.crossattn = LinearCrossAttention(d, c["n_head"], n, c["attn_dropout"])
        self.resid_drop1 = nn.Dropout(c["ffn_dropout"])
        self.resid_drop2 = nn.Dropout(c["ffn_dropout"])
        self.n_inputs = n

    def ln_branchs(self, z):
        # Every block re-normalises the same branch outputs z_l with its own ln2_branch.l.
        return [self.ln2_branch[i](z[i]) for i in range(self.n_inputs)]


class MIOECrossAttentionBlock(_BlockBase):
    """GNOT's block: post-LN dense mixtures of `n_experts` experts, one geometric gate
    softmax(gatenet(pos)) weighting both."""

    def __init__(self, c):
        super().__init__(c)
        d, inner, e = c["n_hidden"], c["n_inner"] * c["n_hidden"], c["n_experts"]
        self.n_experts = e
        self.moe_mlp1 = nn.ModuleList([_ffn(d, inner) for _ in range(e)])
        self.moe_mlp2 = nn.ModuleList([_ffn(d, inner) for _ in range(e)])
        self.gatenet = nn.Sequential(nn.Linear(c["space_dim"], inner), nn.GELU(),
                                     nn.Linear(inner, inner), nn.GELU(), nn.Linear(inner, e))

    def forward(self, x, z, pos, qmask, fmasks):
        gate_score = F.softmax(self.gatenet(pos), dim=-1).unsqueeze(2)  # (B, T, 1, E)
        x = x + self.resid_drop1(self.crossattn(self.ln1(x), self.ln_branchs(z), fmasks))
        x_moe1 = torch.stack([self.moe_mlp1[i](x) for i in range(self.n_experts)], dim=-1)
        x = x + self.ln3((gate_score * x_moe1).sum(dim=-1, keepdim=False))
        x = x + self.resid_drop2(self.selfattn(self.ln4(x), qmask))
        x_moe2 = torch.stack([self.moe_mlp2[i](x) for i in range(self.n_experts)], dim=-1)
        return x + self.ln5((gate_score * x_moe2).sum(dim=-1, keepdim=False))


class CrossAttentionBlock(_BlockBase):
    """CGPT's block: pre-LN feed-forward layers of width 4d, no gate, no experts."""

    def __init__(self, c):
        super().__init__(c)
        d = c["n_hidden"]
        self.mlp1, self.mlp2 = _ffn(d, 4 * d), _ffn(d, 4 * d)

    def forward(self, x, z, pos, qmask, fmasks):
        x = x + self.resid_drop1(self.crossattn(self.ln1(x), self.ln_branchs(z), fmasks))
        x = x + self.mlp1(self.ln3(x))
        x = x + self.resid_drop2(self.selfattn(self.ln4(x), qmask))
        return x + self.mlp2(self.ln5(x))


class _Operator(nn.Module):
    """trunk_mlp([pos, fx]), branch_mlps on the input functions once, the blocks, out_mlp; built
    in upstream's order (trunk, branches, blocks, out_mlp)."""

    BLOCK = None

    def __init__(self, c):
        super().__init__()
        self.cfg = c
        d, m = c["n_hidden"], c["mlp_layers"]
        self.trunk_mlp = MLP(c["space_dim"] + c["fun_dim"], d, d, m)
        self.branch_mlps = nn.ModuleList([MLP(ch, d, d, m) for ch in c["function_dims"]])
        self.blocks = nn.Sequential(*[self.BLOCK(c) for _ in range(c["n_layers"])])
        self.out_mlp = MLP(d, d, c["out_dim"], m)

    def forward(self, pos, fx, values, qmask, fmasks):
        """(B, T, out_dim), every row; the arguments checked and cast by `forward` below."""
        x = self.trunk_mlp(pos if fx is None else torch.cat([pos, fx], dim=-1))
        z = [self.branch_mlps[i](values[i]) for i in range(len(values))]
        for block in self.blocks:
            x = block(x, z, pos, qmask, fmasks)
        return self.out_mlp(x)


class GNOT(_Operator):
    """`models/mmgpt.py` GNOT."""
    BLOCK = MIOECrossAttentionBlock


class CGPTNO(_Operator):
    """`models/cgpt.py` CGPTNO."""
    BLOCK = CrossAttentionBlock


################################################################################################
# Interface
################################################################################################

def build(arch, fields):
    """GNOT or CGPTNO (`fields["model"]`) for our configuration `fields` (the serde JSON of
    GnotConfig without "arch"; missing fields take the `gnot` preset's values), with upstream's
    own initialisation drawn from torch's global generator."""
    if arch not in ARCHS:
        raise ValueError(f"ref_gnot builds {ARCHS}, not {arch!r}")
    c = config(fields)
    return GNOT(c) if c["model"] == "gnot" else CGPTNO(c)


def _finite(what, t):
    # Our forward refuses non-finite inputs (ono_kernels::health); so does this one.
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"gnot: {what} is not finite")


def _mask(m, b, n, what):
    if m is None:
        return None
    if tuple(m.shape) != (b, n):
        raise ValueError(f"gnot: the {what} mask must be ({b}, {n}), got {tuple(m.shape)}")
    return m


def forward(model, pos, fx, grid=None, time=None, *, functions=(), mask=None, query=None,
            query_mask=None):
    """What our `Gnot::forward` returns for ModelInput { pos, fx, mask, functions, grid }:
    (B, T, out_dim), the rows of padded points included. Train/eval follows `model.training`.

    - pos (B, T, space_dim): the query points' coordinates, the gate's input;
    - fx (B, T, fun_dim): θ and any other per-point features, appended to pos in the trunk
      (None, or 0 channels, when fun_dim = 0);
    - functions: one (values (B, N_l, function_dims[l]), mask (B, N_l) bool or None) per input
      function (a bare values tensor means no mask);
    - mask (B, T) bool: the real query points; masks are read only with `mask_padding`;
    - grid is not read; time, query and query_mask are refused (as ours: Error::Unsupported)."""
    c = model.cfg
    if time is not None:
        raise ValueError("gnot takes no time value")
    if query is not None or query_mask is not None:
        raise ValueError("gnot takes no query positions different from the input positions")
    if pos.dim() != 3 or pos.shape[0] < 1 or pos.shape[1] < 1 or pos.shape[2] != c["space_dim"]:
        raise ValueError(f"gnot: pos must be (B, T, {c['space_dim']}) with B, T > 0, got "
                         f"{tuple(pos.shape)}")
    b, t = pos.shape[0], pos.shape[1]
    if fx is None:
        if c["fun_dim"] != 0:
            raise ValueError(f"gnot: fx ({b}, {t}, {c['fun_dim']}) is required (θ and the other "
                             "per-point features of the trunk)")
    elif tuple(fx.shape) != (b, t, c["fun_dim"]):
        raise ValueError(f"gnot: fx must be ({b}, {t}, {c['fun_dim']}), got {tuple(fx.shape)}")
    _mask(mask, b, t, "query")
    functions = [(f, None) if isinstance(f, torch.Tensor) else tuple(f) for f in functions or ()]
    dims = c["function_dims"]
    if len(functions) != len(dims):
        raise ValueError(f"gnot: {len(dims)} input functions expected (function_dims {dims}), got "
                         f"{len(functions)}")
    for l, ((v, m), ch) in enumerate(zip(functions, dims)):
        if v.dim() != 3 or v.shape[0] != b or v.shape[1] < 1 or v.shape[2] != ch:
            raise ValueError(f"gnot: input function {l} must be ({b}, N > 0, {ch}), got "
                             f"{tuple(v.shape)}")
        _mask(m, b, v.shape[1], f"input function {l}'s")

    dtype = model.trunk_mlp.linear_pre.weight.dtype
    pos = pos.to(dtype)
    _finite("pos", pos)
    if fx is not None:
        fx = fx.to(dtype)
        _finite("fx", fx)
    values = []
    for v, _ in functions:
        v = v.to(dtype)
        _finite("an input function", v)
        values.append(v)
    on = c["mask_padding"]
    as_bool = lambda m: m.to(torch.bool) if (on and m is not None) else None  # noqa: E731
    return model(pos, fx, values, as_bool(mask), [as_bool(m) for _, m in functions])


def load_reference(model, tensors):
    """Copies `tensors` (the reference's names, the fixtures' `param.*` without the prefix; there
    are no buffers) into the model, strictly: every parameter, nothing else, each with its
    shape. Raises ValueError naming what does not fit."""
    own = dict(model.named_parameters())
    own.update(model.named_buffers())
    problems = []
    extra = sorted(set(tensors) - set(own))
    missing = sorted(set(own) - set(tensors))
    if missing:
        problems.append(f"missing {missing}")
    if extra:
        problems.append(f"not in the model: {extra}")
    for name in sorted(set(own) & set(tensors)):
        mine, theirs = own[name], tensors[name]
        if tuple(theirs.shape) != tuple(mine.shape):
            problems.append(f"{name}: shape {tuple(theirs.shape)}, the model has "
                            f"{tuple(mine.shape)}")
        elif theirs.is_complex() or not theirs.is_floating_point():
            problems.append(f"{name}: dtype {theirs.dtype}, a real floating tensor is expected")
    if problems:
        raise ValueError(f"weights do not fit {type(model).__name__}: " + "; ".join(problems))
    with torch.no_grad():
        for name, tensor in own.items():
            tensor.copy_(tensors[name])


def loss(pred, y, mask=None):
    """GNOT's training loss as ours (`channel_relative_l2`): per sample and channel
    √(Σ_n (ŷ−y)² / Σ_n y²) over the real points (`mask` (B, N) bool), averaged over samples ×
    channels. A channel that is 0 in a sample gives NaN, as upstream (its issue #10)."""
    if pred.dim() != 3 or tuple(y.shape) != tuple(pred.shape) or (
            mask is not None and tuple(mask.shape) != tuple(pred.shape[:2])):
        raise ValueError(f"gnot loss: pred and y (B, N, C), mask (B, N); got {tuple(pred.shape)}, "
                         f"{tuple(y.shape)}, {None if mask is None else tuple(mask.shape)}")
    err, norm = (pred - y).square(), y.square()
    if mask is not None:
        m = mask.to(pred.dtype).unsqueeze(2)
        err, norm = err * m, norm * m
    return (err.sum(dim=1) / norm.sum(dim=1)).sqrt().mean()


################################################################################################
# Check against the fixtures
################################################################################################

EXPECTED_CASES = {"gnot_small", "gnot_ragged_small", "cgpt_small", "cgpt_noinput_small"}
# fixtures/gnot/reference_param_counts.json: its configurations are our presets (presets.rs).
COUNT_PRESETS = {"GNOT_d128_E1": "gnot", "GNOT_d128_E3": "gnot_e3", "GNOT_d256_E3": "gnot_d256_e3",
                 "CGPTNO_readme_no_inputs": "cgpt"}


def fields_of_reference(case):
    """Our configuration of a fixture case, from the constructor's keyword arguments with the
    classes' defaults, as crates/ono-models/src/gnot/reference.rs `from_reference` reads them.
    CGPTNO takes no space_dim (it has no gate): the case's data.space_dim splits trunk_size."""
    kw = case["constructor_kwargs"]
    model = {"GNOT": "gnot", "CGPTNO": "cgpt"}[case["model_class"]]
    if kw.get("attn_type", "linear") != "linear" or kw.get("act", "gelu") != "gelu" \
            or kw.get("horiz_fourier_dim", 0) != 0:
        raise ValueError(f"{case['case']}: a reference option that is not ported")
    branch = kw.get("branch_sizes")
    if branch is None and model == "cgpt":
        branch = []
    space_dim = kw.get("space_dim", 2) if model == "gnot" else case["data"]["space_dim"]
    experts, inner = (kw.get("n_experts", 2), kw.get("n_inner", 4)) if model == "gnot" else (1, 4)
    return dict(model=model, space_dim=space_dim, fun_dim=kw["trunk_size"] - space_dim,
                out_dim=kw.get("output_size", 3), function_dims=list(branch),
                n_hidden=kw.get("n_hidden", 64), n_layers=kw.get("n_layers", 2),
                n_head=kw.get("n_head", 1), n_experts=experts, n_inner=inner,
                mlp_layers=kw.get("mlp_layers", 2), ffn_dropout=float(kw.get("ffn_dropout", 0.0)),
                attn_dropout=float(kw.get("attn_dropout", 0.0)), mask_padding=False)


def _cases():
    path = os.path.join(steplib.FIXTURES, "gnot")
    out = []
    for f in sorted(os.listdir(path)):
        if not f.endswith(".json") or f.startswith("reference_param_counts"):
            continue
        with open(os.path.join(path, f)) as fh:
            meta = json.load(fh)
        if meta.get("family") == "gnot" and meta.get("model_class") in ("GNOT", "CGPTNO"):
            out.append(f[:-len(".json")])
    return out


def fixture_inputs(t, fields, dtype=None):
    """The fixture's `model(g, u_p, inputs)` in our convention, as reference.rs: pos = the padded
    coordinates, fx = the rest of x's columns then θ broadcast to every point, the input
    functions f0, f1, ... without masks (upstream masks nothing); and the real counts."""
    x = t["input.x"]
    cast = (lambda v: v) if dtype is None else (lambda v: v.to(dtype))  # noqa: E731
    b, n, _ = x.shape
    p = fields["space_dim"]
    parts = [x[..., p:]]
    if "input.theta" in t:
        parts.append(t["input.theta"].unsqueeze(1).expand(b, n, -1))
    fx = torch.cat(parts, -1)
    functions = []
    while f"input.f{len(functions)}" in t:
        functions.append((cast(t[f"input.f{len(functions)}"]), None))
    return cast(x[..., :p]), cast(fx), functions, t["input.num_nodes"].tolist()


def _unpad(out, counts):
    return torch.cat([out[i, :n] for i, n in enumerate(counts)], dim=0)


def _to_double(model):
    return model._apply(lambda t: t.double() if t.is_floating_point() else t)


def _check_case(name):
    t, meta = steplib.fixture("gnot", name)
    tol = meta["tolerances"]
    out_tol, grad_tol = tol["output_rel"], tol["grad_rel"]
    overrides = tol.get("grad_rel_overrides", {})
    fields = fields_of_reference(meta)
    stored = {k[len("param."):]: v for k, v in t.items() if k.startswith("param.")}
    stored.update({k[len("buffer."):]: v for k, v in t.items() if k.startswith("buffer.")})
    rec, failures = {"case": name, "model": fields["model"]}, []

    def bound(key, err, limit):
        rec[key] = err
        if not err <= limit:
            failures.append(f"{key} {err:.3g} > {limit:.3g}")

    # The fixture's model was built right after torch.manual_seed(0): the same draws here.
    torch.manual_seed(0)
    model = build("gnot", fields)
    own = dict(model.named_parameters())
    if set(own) == set(stored):
        # To the last bits that MKL's vector math may round otherwise on another CPU (steplib).
        ulps, init_failures = steplib.init_draws(
            lambda: build("gnot", fields),
            lambda m: [(p, stored[n]) for n, p in m.named_parameters()])
        rec["init (float32 ulps after manual_seed(0))"] = ulps
        failures += init_failures
    count = sum(p.numel() for p in model.parameters())
    rec["params"] = count
    if count != meta["param_count_real"] or count != meta["param_count_numel"]:
        failures.append(f"parameter count {count} != {meta['param_count_real']}")
    load_reference(model, stored)

    pos, fx, functions, counts = fixture_inputs(t, fields)
    y = t["input.y"]
    # Train mode: every dropout is 0, so output.eval is the train output too (the fixture's
    # train_equals_eval_forward).
    model.train()
    out = _unpad(forward(model, pos, fx, functions=functions), counts)
    ref_loss = sum(steplib.rel_l2_sum(o.unsqueeze(0), yy.unsqueeze(0))
                   for o, yy in zip(out.split(counts), y.split(counts)))
    ref_loss.backward()
    bound("output (train mode)", steplib.normwise(out.detach(), t["output.eval"]), out_tol)
    bound("loss.train", steplib.normwise(ref_loss.detach(), t["loss.train"]), out_tol)
    worst = (None, 0.0, 0.0)
    for n, p in model.named_parameters():
        err, limit = steplib.normwise(p.grad, t["grad." + n]), overrides.get(n, grad_tol)
        if err > limit:
            failures.append(f"grad {n} {err:.3g} > {limit:.3g}")
        if err / limit > worst[2]:
            worst = (n, err, err / limit)
    rec["grad worst (name, err, err/bound)"] = list(worst)

    model.eval()
    with torch.no_grad():
        bound("output.eval", steplib.normwise(_unpad(forward(model, pos, fx, functions=functions),
                                                     counts), t["output.eval"]), out_tol)
        _to_double(model)
        out64 = _unpad(forward(model, pos.double(), fx.double(),
                               functions=[(v.double(), m) for v, m in functions]), counts)
        if out64.dtype != torch.float64:
            failures.append(f"the float64 forward returned {out64.dtype}")
        bound("output.eval_f64", steplib.normwise(out64, t["output.eval_f64"]),
              steplib.F64_STORED_REL)
    rec["ok"] = not failures
    print(json.dumps(rec), flush=True)
    return failures


def _check_counts():
    """The counts of reference_param_counts.json through our presets (with the configurations'
    data dimensions, which the presets carry), and the serde default: {} is the `gnot` preset."""
    with open(os.path.join(steplib.FIXTURES, "gnot", "reference_param_counts.json")) as f:
        configs = json.load(f)["configs"]
    failures, got = [], {}
    if set(configs) != set(COUNT_PRESETS):
        failures.append(f"reference_param_counts.json holds {sorted(configs)}, the check knows "
                        f"{sorted(COUNT_PRESETS)}")
    for label, preset in COUNT_PRESETS.items():
        if label not in configs:
            continue
        with torch.device("meta"):
            n = sum(p.numel() for p in build("gnot", PRESETS[preset]).parameters())
        got[preset] = n
        if n != configs[label]["param_count_real"]:
            failures.append(f"{label} ({preset}): {n} != {configs[label]['param_count_real']}")
    with torch.device("meta"):
        n = sum(p.numel() for p in build("gnot", {}).parameters())
    if n != got.get("gnot"):
        failures.append(f"build('gnot', {{}}) has {n} parameters, the gnot preset {got.get('gnot')}")
    print(json.dumps({"check": "reference_param_counts", **got, "ok": not failures}), flush=True)
    return failures


def _check_paths():
    """What no fixture reaches, on gnot_ragged_small's weights and inputs in float64:
    - `mask_padding`: a sample padded and masked gives the output of the sample alone (queries
      and both input functions trimmed), the padding unmasked does not; without masks it is
      upstream's forward; a sample whose input function is all padding gets nothing from it
      (its output does not depend on those rows) and finite gradients;
    - `loss` against upstream's WeightedLpRelLoss on the concatenated real rows (sum pooling
      per sample);
    - dropout in training only; the refusals."""
    failures = []
    t, meta = steplib.fixture("gnot", "gnot_ragged_small")
    fields = fields_of_reference(meta)
    stored = {k[len("param."):]: v for k, v in t.items() if k.startswith("param.")}
    dt = torch.float64
    pos, fx, functions, counts = fixture_inputs(t, fields, dt)
    fx = fx.to(dt)
    lens = list(zip(*meta["data"]["input_points"]))  # per sample: (N0_b, N1_b)
    qmask = torch.arange(pos.shape[1])[None, :] < torch.tensor(counts)[:, None]
    fmasks = [torch.arange(v.shape[1])[None, :] < torch.tensor([ln[l] for ln in lens])[:, None]
              for l, (v, _) in enumerate(functions)]
    masked_fns = [(v, m) for (v, _), m in zip(functions, fmasks)]

    def model_with(**kw):
        m = build("gnot", dict(fields, **kw))
        load_reference(m, stored)
        return _to_double(m).eval()

    def rel(a, b):
        return steplib.normwise(a, b)

    rec = {"check": "paths without fixtures (masks, loss, dropout, refusals)"}
    with torch.no_grad():
        masked, plain = model_with(mask_padding=True), model_with()
        i, n = 1, counts[1]
        alone = forward(masked, pos[i:i + 1, :n], fx[i:i + 1, :n],
                        functions=[(v[i:i + 1, :lens[i][l]], None)
                                   for l, (v, _) in enumerate(functions)])[0]
        padded = forward(masked, pos, fx, functions=masked_fns, mask=qmask)[i, :n]
        unmasked = forward(plain, pos, fx, functions=masked_fns, mask=qmask)[i, :n]
        rec["masked padded vs alone"] = rel(padded, alone)
        rec["unmasked padded vs alone"] = rel(unmasked, alone)
        if not rec["masked padded vs alone"] <= 1e-12:
            failures.append(f"mask_padding: padded {rec['masked padded vs alone']:.3g} from alone")
        if not rec["unmasked padded vs alone"] > 1e-6:
            failures.append("without mask_padding the padding should change the output")
        no_masks = forward(masked, pos, fx, functions=functions)
        up = forward(plain, pos, fx, functions=functions)
        if not torch.equal(no_masks, up):
            failures.append("mask_padding without masks differs from upstream's forward")
        rec["f64 vs output.eval_f64 (ragged)"] = rel(_unpad(up, counts), t["output.eval_f64"])

    # An input function with no real row in sample 1.
    empty = [m.clone() for m in fmasks]
    empty[1][1] = False
    other = functions[1][0].clone()
    other[1] = torch.randn(other[1].shape, generator=torch.Generator().manual_seed(7), dtype=dt)
    masked.train()
    a = forward(masked, pos, fx, functions=[(functions[0][0], empty[0]), (functions[1][0], empty[1])],
                mask=qmask)
    a.square().sum().backward()
    grads_ok = all(bool(torch.isfinite(p.grad).all()) for p in masked.parameters())
    with torch.no_grad():
        bb = forward(masked, pos, fx, functions=[(functions[0][0], empty[0]), (other, empty[1])],
                     mask=qmask)
    rec["empty input function: output change"] = rel(a.detach(), bb)
    if not (bool(torch.isfinite(a).all()) and grads_ok and torch.equal(a.detach(), bb)):
        failures.append("an all-padded input function must contribute nothing and stay finite")

    # GNOT's loss against upstream's pooled formula on the real rows only.
    gen = torch.Generator().manual_seed(3)
    pred = torch.randn(pos.shape[0], pos.shape[1], 3, generator=gen, dtype=dt)
    y = torch.randn(pred.shape, generator=gen, dtype=dt)
    pr, yr = _unpad(pred, counts), _unpad(y, counts)
    pool = lambda v: torch.stack([s.sum(0) for s in v.split(counts)])  # noqa: E731 (SumPooling)
    upstream = ((pool((pr - yr).abs() ** 2) / pool(yr.abs() ** 2)) ** (1 / 2)).mean()
    rec["loss (masked) vs upstream"] = rel(loss(pred, y, qmask), upstream)
    full = ((pred - y).square().sum(1) / y.square().sum(1)).sqrt().mean()
    rec["loss (unmasked) vs formula"] = rel(loss(pred, y), full)
    if not max(rec["loss (masked) vs upstream"], rec["loss (unmasked) vs formula"]) <= 1e-14:
        failures.append("loss differs from WeightedLpRelLoss")

    # Dropout: in training only.
    dropped = model_with(ffn_dropout=0.3, attn_dropout=0.3)
    with torch.no_grad():
        e1 = forward(dropped, pos, fx, functions=functions)
        e2 = forward(dropped, pos, fx, functions=functions)
        dropped.train()
        tr = forward(dropped, pos, fx, functions=functions)
    if not torch.equal(e1, e2) or torch.equal(e1, tr):
        failures.append("dropout must act in training only")

    refusals = {
        "time": lambda: forward(plain, pos, fx, time=torch.zeros(2, 1), functions=functions),
        "query": lambda: forward(plain, pos, fx, query=pos, functions=functions),
        "one function of two": lambda: forward(plain, pos, fx, functions=functions[:1]),
        "fx missing": lambda: forward(plain, pos, None, functions=functions),
        "bad mask": lambda: forward(plain, pos, fx, functions=functions, mask=qmask[:, :3]),
        "non-finite": lambda: forward(plain, pos * float("nan"), fx, functions=functions),
        "unknown field": lambda: build("gnot", dict(fields, heads=2)),
        "cgpt with experts": lambda: build("gnot", dict(fields, model="cgpt")),
        "load: missing": lambda: load_reference(plain, {k: v for k, v in stored.items()
                                                        if k != "out_mlp.linear_post.bias"}),
    }
    for what, call in refusals.items():
        try:
            call()
            failures.append(f"not refused: {what}")
        except ValueError:
            pass
    rec["refusals"] = len(refusals)
    rec["ok"] = not failures
    print(json.dumps(rec), flush=True)
    return failures


def check():
    torch.set_num_threads(1)
    cases = _cases()
    missing = EXPECTED_CASES - set(cases)
    failures = [f"fixture cases not found: {sorted(missing)}"] if missing else []
    for name in cases:
        failures += [f"{name}: {f}" for f in _check_case(name)]
    failures += _check_counts()
    failures += _check_paths()
    if failures:
        raise AssertionError("ref_gnot check failed:\n  " + "\n  ".join(failures))
    print(json.dumps({"check": "ref_gnot", "cases": len(cases), "ok": True}), flush=True)


if __name__ == "__main__":
    steplib.check_main(__doc__, check)
