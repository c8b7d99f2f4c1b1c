"""What the PyTorch step scripts share: the command line, the fixture reader, the reference losses
and the timing loop with its JSON line, so that every script times and reports a step the way
`ono bench-step` does (one process, warm-up steps untimed, median and fastest step, peak RSS).
"""
import argparse, json, os, resource, statistics, sys, time

import numpy as np
import torch

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures")

# The ONO presets' benchmark shapes, as `ono bench-step --shapes` has them
# (crates/ono-train/src/bench_step.rs): batch, grid (or points), space_dim, fun_dim, out_dim.
SHAPES = {
    "darcy": dict(batch=4, grid=(85, 85), n=85 * 85, space_dim=2, fun_dim=1, out_dim=1, square=85),
    "ns2d": dict(batch=8, grid=(64, 64), n=64 * 64, space_dim=2, fun_dim=10, out_dim=1, square=None),
    "elasticity": dict(batch=8, grid=None, n=972, space_dim=1, fun_dim=2, out_dim=1, square=None),
}


def parser(doc, first, choices):
    """The shared command line: FIRST DEVICE [STEPS] [THREADS], --warmup, --check."""
    p = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    p.add_argument(first, nargs="?", choices=choices)
    p.add_argument("device", nargs="?", choices=["cpu", "cuda"])
    p.add_argument("steps", nargs="?", type=int, default=5)
    p.add_argument("threads", nargs="?", type=int, default=None)
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed warm-up steps (default: 1 on the CPU, 2 on CUDA)")
    p.add_argument("--check", action="store_true",
                   help="reproduce the fixtures with the restated network first")
    p.add_argument("--precision", choices=["f32", "bf16", "f16"], default="f32",
                   help="bf16/f16: forward and loss under torch.autocast (f16 with a GradScaler), "
                        "the counterpart of `ono bench-step --precision`")
    return p


# Set by `setup` from --precision: the autocast dtype of the timed steps (None: float32).
AUTOCAST = None


def load_safetensors(path):
    """The tensors of a safetensors file (8-byte header length, JSON header, raw data)."""
    dtypes = {"F32": "<f4", "F64": "<f8", "I64": "<i8"}
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    out = {}
    for k, v in header.items():
        if k == "__metadata__" or v["dtype"] not in dtypes:
            continue
        a, b = v["data_offsets"]
        arr = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=dtypes[v["dtype"]]).reshape(v["shape"])
        out[k] = torch.from_numpy(arr.copy())
    return out


def fixture(folder, case):
    """`fixtures/<folder>/<case>`: its tensors and its JSON sidecar."""
    base = os.path.join(FIXTURES, folder, case)
    with open(base + ".json") as f:
        return load_safetensors(base + ".safetensors"), json.load(f)


def normwise(a, b):
    """max|a − b| / max|b|, the fixtures' error measure."""
    return ((a.double() - b.double()).abs().max() / b.double().abs().max()).item()


# Initial weights drawn here after `manual_seed(s)` against those a fixture stored, measured in
# float32 rounding units at each tensor's own scale: max|a − b| / (ε₃₂ · max|b|). The seeded
# integers are the same on every machine, but not every transform of them is:
# - trunc_normal_'s erfinv_ goes through MKL's vector math, which picks its kernel by the CPU's
#   instruction set (on one Intel AVX-512 machine `MKL_ENABLE_INSTRUCTIONS=AVX2` or `=SSE4_2`
#   moves its results by an ulp; Transolver's inits differed from the fixtures' by 7.45e-9 at
#   weights of about 0.06, 1.1 units here);
# - normal_ (xavier_normal_) on 16 or more float32 elements takes ATen's AVX2 kernel (angle, log
#   and sincos in float32 approximations) on an AVX2 machine and its AVX-512 kernel (in double)
#   on an AVX-512 one (ATen/native/cpu/DistributionTemplates.h): a few units at most, the angle's
#   float32 error times the Box–Muller radius.
# INIT_ULPS leaves room for those and no more: a different draw (another seed, another
# construction order) is off by the weights' own size, about 2^23 units, which `init_draws`
# checks every time.
INIT_ULPS = 16.0


# A float64 result now against the float64 one a fixture stored (normwise: outputs, losses). It
# is there to catch a formula error that float32 rounding would hide, and such an error shows at
# 1e-7 or more. Other kernel paths (MKL's and ATen's, picked by the CPU's instruction set) move
# float64 results by a few ulps per operation: at most 6.7e-15 over every case of ref_fno,
# ref_galerkin, ref_gnot and ref_nsl, against fixtures made on another machine, on an Intel
# AVX-512 machine under its own kernels, `ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2`
# and `cargo xtask test`'s baseline. 1e-10 is 10^4 times that and 10^3 times below float32.
F64_STORED_REL = 1e-10


def init_ulps(pairs):
    """max over (drawn, stored) tensor pairs of max|a − b| / (ε₃₂ · max|b|); complex tensors as
    real pairs. A stored all-zero tensor must be drawn as exactly zero (else: inf)."""
    eps = torch.finfo(torch.float32).eps
    worst = 0.0
    for a, b in pairs:
        a, b = a.detach(), b.detach()
        if a.is_complex():
            a = torch.view_as_real(a)
        if b.is_complex():
            b = torch.view_as_real(b)
        a, b = a.double(), b.double().reshape(a.shape)
        diff = (a - b).abs().max().item() if a.numel() else 0.0
        scale = b.abs().max().item() if b.numel() else 0.0
        if diff == 0.0:
            continue
        worst = max(worst, diff / (eps * scale) if scale > 0 else float("inf"))
    return worst


def init_draws(build, pairs_of, seed=0, other_seed=1):
    """The init check of a restatement: `build()` after `manual_seed(seed)` must give the stored
    weights within INIT_ULPS (`pairs_of(model)` pairs each drawn tensor with its stored one), and
    after `manual_seed(other_seed)` must not, so that the bound cannot hide another draw. Returns
    (ulps, failures)."""
    torch.manual_seed(seed)
    ulps = init_ulps(pairs_of(build()))
    failures = []
    if not ulps <= INIT_ULPS:
        failures.append(f"init after manual_seed({seed}): {ulps:.3g} float32 ulps at the "
                        f"weights' scale > {INIT_ULPS:g}")
    torch.manual_seed(other_seed)
    other = init_ulps(pairs_of(build()))
    if not other > INIT_ULPS:
        failures.append(f"negative control: the init after manual_seed({other_seed}) is within "
                        f"{INIT_ULPS:g} ulps of the fixture's ({other:.3g}), so the bound proves "
                        "nothing")
    return ulps, failures


def worst_grad(model, t, per_tensor=False):
    """The largest gradient error over all parameters, relative to the largest reference gradient
    of all (the ONO fixtures' measure) or, `per_tensor`, of the same tensor (the FNO, Galerkin and
    GNOT fixtures')."""
    if per_tensor:
        return max(normwise(p.grad, t["grad." + n]) for n, p in model.named_parameters())
    scale = max(t["grad." + n].abs().max().item() for n, _ in model.named_parameters())
    return max((p.grad.double() - t["grad." + n].double()).abs().max().item()
               for n, p in model.named_parameters()) / scale


def compared(model, t, out_tol, grad_tol, per_tensor, **outputs):
    """The errors of `outputs` (fixture key with "." spelled "_" → tensor) and of the model's
    gradients against fixture `t`; fails beyond the tolerances."""
    errs = {k.replace("_", "."): normwise(v.detach(), t[k.replace("_", ".")]) for k, v in outputs.items()}
    grad_key = "grad (worst, per tensor)" if per_tensor else "grad (worst, over the largest)"
    errs[grad_key] = worst_grad(model, t, per_tensor)
    assert max(errs[k.replace("_", ".")] for k in outputs) <= out_tol, errs
    assert errs[grad_key] <= grad_tol, errs
    return errs


def entry(args, first, check, main):
    """`--check` first, then the timing when FIRST and DEVICE are given."""
    if args.check:
        check()
    if getattr(args, first) and args.device:
        main(args)


def rel_l2_sum(p, y):
    """Σ_b ‖p_b − y_b‖₂ / ‖y_b‖₂ (the reference scripts' `LpLoss(size_average=False)`)."""
    b = p.shape[0]
    p, y = p.reshape(b, -1), y.reshape(b, -1)
    return (torch.norm(p - y, 2, 1) / torch.norm(y, 2, 1)).sum()


def central_diff(x, s):
    h = 1.0 / s
    x = torch.nn.functional.pad(x, (1, 1, 1, 1))
    dx = (x[:, 1:-1, 2:] - x[:, 1:-1, :-2]) / (2 * h)
    dy = (x[:, 2:, 1:-1] - x[:, :-2, 1:-1]) / (2 * h)
    return dx, dy


def darcy_loss(p, y, s, alpha=0.1):
    """ONO's Darcy loss: relative L2 plus alpha (0.1) × the relative L2 of the central
    differences."""
    b = p.shape[0]
    l2 = rel_l2_sum(p, y)
    p = p.reshape(b, s, s)[:, 1:-1, 1:-1]
    p = torch.nn.functional.pad(p, (1, 1, 1, 1))
    px, py = central_diff(p, s)
    tx, ty = central_diff(y.reshape(b, s, s), s)
    return l2 + alpha * (rel_l2_sum(px, tx) + rel_l2_sum(py, ty))


def ono_loss(out, y, shapes):
    """`ono bench-step`'s loss under its default (ono) recipe at these shapes."""
    return darcy_loss(out, y, shapes["square"]) if shapes["square"] else rel_l2_sum(out, y)


def ono_step(model, loss_of):
    """The `ono` recipe's step: AdamW (lr 1e-3, weight decay 1e-5), clipping at 0.1; under
    --precision bf16/f16 the forward and the loss run in torch.autocast (f16 with a GradScaler)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-5)
    device = next(model.parameters()).device.type
    scaler = torch.amp.GradScaler(device) if AUTOCAST == torch.float16 else None

    def step():
        opt.zero_grad()
        if AUTOCAST is None:
            loss_of().backward()
        else:
            with torch.autocast(device, dtype=AUTOCAST):
                loss = loss_of()
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
            else:
                loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
    return step


def timed(step, device, steps, warmup):
    """Seconds of each of `steps` calls of `step` after `warmup` untimed ones (synchronised on CUDA)."""
    times = []
    for i in range(warmup + steps):
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        step()
        if device == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - t)
    return times


def report(rec, times, device):
    """Prints the JSON line: `rec` with the step times, peak RSS, threads and torch's CUDA peaks."""
    rec = dict(rec, device=device, precision={None: "f32", torch.bfloat16: "bf16",
                                              torch.float16: "f16"}[AUTOCAST],
               steps=len(times), median_s=statistics.median(times),
               min_s=min(times), peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               threads=torch.get_num_threads(), torch=torch.__version__)
    if device == "cuda":
        rec["peak_cuda_allocated_mb"] = torch.cuda.max_memory_allocated() / 2**20
        rec["peak_cuda_reserved_mb"] = torch.cuda.max_memory_reserved() / 2**20
    print(json.dumps(rec), flush=True)


def count(model):
    """Real parameters (a complex one counts twice)."""
    return sum(p.numel() * (2 if p.is_complex() else 1) for p in model.parameters())


def setup(args):
    """Threads and the warm-up count from the command line."""
    global AUTOCAST
    AUTOCAST = {"f32": None, "bf16": torch.bfloat16, "f16": torch.float16}[
        getattr(args, "precision", "f32")]
    if args.threads:
        torch.set_num_threads(args.threads)
    return args.warmup if args.warmup is not None else (2 if args.device == "cuda" else 1)


def check_main(doc, check):
    """The command line of a `ref_*.py` restatement: `--check` runs `check`, which raises
    AssertionError on a failure (exit 1); without it, the help (exit 2)."""
    p = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    p.add_argument("--check", action="store_true", help="reproduce the fixtures (see above)")
    if not p.parse_args().check:
        p.print_help()
        raise SystemExit(2)
    try:
        check()
    except AssertionError as e:
        print(e, file=sys.stderr)
        raise SystemExit(1)
