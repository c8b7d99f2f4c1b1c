"""The PyTorch reference training loop: trains the reference's own network (a restatement in this
folder, `ref_*.py`, each proved on the fixtures by its `--check`) on a run handed off by
`ono train --handoff DIR` (or `ono reproduce --reference-python`), the way the reference scripts
train: `torch.optim.Adam`/`AdamW`, `torch.optim.lr_scheduler` (`OneCycleLR` stepped per batch,
`StepLR` and `CosineAnnealingLR` per epoch), `clip_grad_norm_`, the scripts' normalizers (ONO's
and GNOT's `UnitTransformer`, FNO's `UnitGaussianNormalizer` and the Galerkin Transformer's
population-std variant), their losses (the relative L2 summed over the batch with ONO's Darcy
derivative term and ONO's time_gen weighting of rollout frames, the Galerkin Transformer's H¹
loss, GNOT's per-channel loss on normalized values), teacher-forced or free-running rollouts,
and the test error as the mean over test samples of each sample's relative L2 (of the whole
rollout for time series). It writes DIR/result.json (`ono_train::handoff::ReferenceResult`).

What it shares with our run: the data tensors (DIR/data.safetensors, ours after reading and
subsampling, before any normalizer), the resolved recipe (DIR/handoff.json) and the seed. What
it does not: the random streams (its initialisation is the restatement's own torch init unless
`--init ours` loads DIR/init.safetensors, our initial weights; its batch order is torch's
`randperm`), and every line of training code.

Usage: python benches/pytorch/train_ref.py DIR [--init reference|ours] [--threads N] [--quiet]
Exit status 3 (and a `train_ref:` line on stderr): the run needs something not restated here.
Needs torch (and the packages of the restatement, e.g. nystrom-attention for ONO).
"""
import argparse, importlib, json, math, os, re, sys, time

import torch

import steplib

FORMAT = 1
# The exit status of a run the loop does not restate (an architecture, regime, loss or
# normalizer it lacks), as against a failure.
REFUSED = 3
# The restatements, each with ARCHS, build, forward, load_reference.
MODULES = ("ref_ono", "ref_fno", "ref_nsl", "ref_gnot", "ref_galerkin")


def refuse(msg):
    print(f"train_ref: {msg}", file=sys.stderr)
    sys.exit(REFUSED)


def network_module(arch):
    """The restatement that builds `arch`; says which modules could not be imported."""
    failed = []
    for name in MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError as e:
            failed.append(f"{name}: {e}")
            continue
        if arch in mod.ARCHS:
            return mod
    refuse(f"no restatement builds {arch!r}"
           + (f" (not importable: {'; '.join(failed)})" if failed else ""))


class Normalizer:
    """The scripts' normalizers, fitted on the training split: `unit` (ONO's and GNOT's
    UnitTransformer: per channel over samples and points, unbiased std + 1e-8), `gaussian` (FNO's
    UnitGaussianNormalizer: per point over samples, unbiased std, eps 1e-5 in encode and
    decode), `gaussian_population` (the Galerkin Transformer's, NumPy's population std)."""

    def __init__(self, kind, x):
        self.kind = kind
        if kind == "none":
            self.mean, self.std = None, None
        elif kind == "unit":
            self.mean = x.mean(dim=(0, 1), keepdim=True)
            self.std = x.std(dim=(0, 1), keepdim=True) + 1e-8
        elif kind in ("gaussian", "gaussian_population"):
            self.mean = x.mean(0, keepdim=True)
            self.std = x.std(0, keepdim=True, unbiased=(kind == "gaussian")) + 1e-5
        else:
            refuse(f"normalizer {kind!r} is not restated")

    def encode(self, x):
        return x if self.mean is None else (x - self.mean) / self.std

    def decode(self, x):
        return x if self.mean is None else x * self.std + self.mean


def rel_l2(p, y):
    """Σ_b of the relative L2 error of each sample (all points and channels together)."""
    return steplib.rel_l2_sum(p, y)


class Run:
    """The hand-off read and checked: everything the loop does not restate is refused by name."""

    # What a split may hold besides fx, y and pos: points of the targets, loss-only channels, and
    # input functions on their own points (`f0`, `f1`, ...: GNOT's branches).
    EXTRA = ("query", "aux")

    def __init__(self, folder, device):
        with open(os.path.join(folder, "handoff.json")) as f:
            self.spec = spec = json.load(f)
        if spec.get("format") != FORMAT:
            raise SystemExit(f"train_ref: hand-off format {spec.get('format')}, this loop reads {FORMAT}")
        self.dtype = torch.float64 if spec["double"] else torch.float32
        data = steplib.load_safetensors(os.path.join(folder, "data.safetensors"))
        known = ("fx", "y", "pos") + self.EXTRA
        unsupported = sorted(k for k in data if "." in k and not (
            k.split(".", 1)[1] in known or re.fullmatch(r"f\d+", k.split(".", 1)[1])))
        unsupported += [k for k in ("test_grid",) if k in data]
        if unsupported:
            refuse("the loop feeds samples of one size at one resolution; the data also hold "
                   + ", ".join(unsupported))
        self.grid = [int(v) for v in data["grid"].tolist()] if "grid" in data else None
        self.target_grid = ([int(v) for v in data["query_grid"].tolist()] if "query_grid" in data
                            else self.grid)
        self.split = {}
        for s in ("train", "test"):
            self.split[s] = {k[len(s) + 1:]: v.to(device, self.dtype) for k, v in data.items()
                             if k.startswith(s + ".")}
        self.functions = sorted((k for k in self.split["train"] if re.fullmatch(r"f\d+", k)),
                                key=lambda k: int(k[1:]))
        regime = spec["regime"]
        if regime not in ("steady", "autoregressive"):
            refuse(f"the {regime} regime is not restated (steady, autoregressive)")
        loss = spec["loss"]
        if loss["kind"] not in ("rel_l2", "galerkin_h1", "gnot"):
            refuse(f"the {loss['kind']} loss is not restated (rel_l2, galerkin_h1, gnot)")
        norms = spec["normalizers"]
        if norms.get("normalize_theta", "none") != "none":
            refuse(f"normalize_theta = {norms['normalize_theta']} is not restated")

    def batch(self, split, idx):
        """The samples `idx` of a split: a dict with pos, fx, y and what else the split holds."""
        s = self.split[split]
        out = {}
        for k, v in s.items():
            # Shared positions (and query points) are stored once, (1, N, d).
            out[k] = v[idx] if v.shape[0] > 1 or k not in ("pos", "query") else v.expand(len(idx), -1, -1)
        return out

    def extra(self, b):
        """The keyword inputs of a forward beyond (pos, fx, grid): GNOT's input functions and
        query points."""
        kw = {}
        if self.functions:
            kw["functions"] = [(b[f], None) for f in self.functions]
        if "query" in b:
            kw["query"] = b["query"]
        return kw


def to_precision(model, dtype):
    """Real tensors to `dtype`, complex ones to its complex counterpart (`Module.to(dtype)` would
    drop the imaginary part of a complex parameter)."""
    complex_dtype = torch.complex128 if dtype == torch.float64 else torch.complex64
    return model._apply(lambda t: t.to(complex_dtype) if t.is_complex()
                        else t.to(dtype) if t.is_floating_point() else t)


def batches(n, bs, gen, fixed):
    """An epoch's batches: a fresh permutation, or (GNOT's loader) the fixed chunks of 0..n in
    the order `fixed` drew once."""
    if fixed is not None:
        return [torch.arange(c * bs, min(n, (c + 1) * bs)) for c in fixed]
    perm = torch.randperm(n, generator=gen)
    return [perm[i:i + bs] for i in range(0, n, bs)]


def main():
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("folder")
    p.add_argument("--init", choices=["reference", "ours"], default="reference",
                   help="the restatement's own seeded init (default) or our initial weights")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: the hand-off's)")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args()
    started = time.perf_counter()

    spec = json.load(open(os.path.join(args.folder, "handoff.json")))
    threads = args.threads if args.threads is not None else spec.get("threads", 0)
    if threads and threads > 0:
        torch.set_num_threads(threads)
    device = torch.device("cuda" if spec.get("device") == "cuda" else "cpu")
    run = Run(args.folder, device)
    spec, grid = run.spec, run.grid
    mod = network_module(spec["arch"])

    torch.manual_seed(spec["seed"])
    try:
        model = mod.build(spec["arch"], spec["model"])
    except NotImplementedError as e:
        refuse(f"{spec['arch']}: {e}")
    model = to_precision(model.to(device), run.dtype)
    if args.init == "ours":
        init = steplib.load_safetensors(os.path.join(args.folder, "init.safetensors"))
        mod.load_reference(model, {k: v.to(device) for k, v in init.items()})

    norms = spec["normalizers"]
    x_norm = Normalizer(norms["normalize_x"], run.split["train"]["fx"])
    y_norm = Normalizer(norms["normalize_y"], run.split["train"]["y"])
    # Positions and query points share one per-channel normalizer (GNOT's); the input functions
    # on their own points are fed as they are, as ours.
    pos_norm = Normalizer(norms.get("normalize_pos", "none"), run.split["train"]["pos"])
    for s in run.split.values():
        s["fx"] = x_norm.encode(s["fx"])
        s["pos"] = pos_norm.encode(s["pos"])
        if "query" in s:
            s["query"] = pos_norm.encode(s["query"])

    o = spec["optimizer"]
    cls = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam}[o["kind"]]
    opt = cls(model.parameters(), lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"],
              weight_decay=o["weight_decay"])
    n, bs, epochs = run.split["train"]["fx"].shape[0], spec["batch_size"], spec["epochs"]
    sch = spec["schedule"]
    per_batch = None
    per_epoch = None
    if sch["kind"] == "one_cycle":
        if sch["total_steps"] != epochs * math.ceil(n / bs):
            raise SystemExit("train_ref: one_cycle total_steps disagrees with the batches")
        per_batch = torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=sch["max_lr"], total_steps=sch["total_steps"], pct_start=sch["pct_start"],
            anneal_strategy=sch["anneal_strategy"], cycle_momentum=sch["cycle_momentum"],
            base_momentum=sch["base_momentum"], max_momentum=sch["max_momentum"],
            div_factor=sch["div_factor"], final_div_factor=sch["final_div_factor"],
            three_phase=sch["three_phase"])
    elif sch["kind"] == "step":
        per_epoch = torch.optim.lr_scheduler.StepLR(opt, step_size=sch["step_size"], gamma=sch["gamma"])
    elif sch["kind"] == "cosine":
        per_epoch = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=sch["t_max"])
    elif sch["kind"] != "constant":
        refuse(f"schedule {sch['kind']!r} is not restated")

    loss = spec["loss"]
    autoregressive = spec["regime"] == "autoregressive"
    teacher = spec["teacher_forcing"]
    cumulative = loss["rollout"] == "cumulative"
    alpha = loss["alpha"]
    mean = loss["reduction"] == "mean"
    clip = o["max_grad_norm"]

    kind = loss["kind"]

    def step_loss(out, b):
        """(the loss to optimize, its Σ over the batch to log) of a steady forward's output:
        the relative L2 summed over the batch (+ ONO's Darcy derivative term), or the Galerkin
        and GNOT losses, batch means by definition (GNOT's on normalized values)."""
        y, n_b = b["y"], b["y"].shape[0]
        if kind == "gnot":
            m = mod.loss(out, y_norm.encode(y))
            return m, m * n_b
        pred = y_norm.decode(out)
        if kind == "galerkin_h1":
            m = mod.loss(pred, y, run.target_grid, loss["h1_gamma"], b.get("aux"))
            return m, m * n_b
        total = (steplib.darcy_loss(pred, y, run.target_grid[0], alpha) if alpha > 0
                 else rel_l2(pred, y))
        return (total / n_b if mean else total), total

    def rollout(pos, fx, steps, y=None):
        """Frames (B, N, C) of a rollout; with `y`, also (the loss to optimize, the plain Σ over
        the batch and the frames)."""
        frames, plain, weighted = [], 0.0, 0.0
        for t in range(steps):
            pred = mod.forward(model, pos, fx, grid)
            c = pred.shape[-1]
            nxt = pred
            if y is not None:
                yt = y[..., t]
                plain = plain + rel_l2(pred, yt)
                weighted = weighted + plain
                if teacher:
                    nxt = yt
            fx = torch.cat((fx[..., c:], nxt), dim=-1)
            frames.append(pred)
        optimized = weighted if cumulative else plain
        if y is not None and mean:
            optimized = optimized / y.shape[0]
        return frames, optimized, plain

    def evaluate():
        model.eval()
        test = run.split["test"]
        m = test["fx"].shape[0]
        total, per_step = 0.0, None
        with torch.no_grad():
            for i in range(0, m, bs):
                b = run.batch("test", torch.arange(i, min(m, i + bs)))
                y = b["y"]
                if autoregressive:
                    frames, _, _ = rollout(b["pos"], b["fx"], y.shape[-1])
                    pred = torch.stack(frames, -1)
                    steps = torch.stack([rel_l2(pred[..., t], y[..., t]) for t in range(y.shape[-1])])
                    per_step = steps if per_step is None else per_step + steps
                else:
                    pred = y_norm.decode(mod.forward(model, b["pos"], b["fx"], grid, **run.extra(b)))
                total += rel_l2(pred, y).item()
        model.train()
        return total / m, ([] if per_step is None else (per_step / m).tolist())

    gen = torch.Generator().manual_seed(spec["seed"])
    fixed = None
    if spec["batch_order"] == "fixed_chunks":
        fixed = torch.randperm(math.ceil(n / bs), generator=gen).tolist()
    history, best, last = [], None, None
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    model.train()
    for epoch in range(epochs):
        e0 = time.perf_counter()
        loss_sum = 0.0
        for idx in batches(n, bs, gen, fixed):
            b = run.batch("train", idx)
            opt.zero_grad()
            if autoregressive:
                _, optimized, plain = rollout(b["pos"], b["fx"], b["y"].shape[-1], b["y"])
            else:
                out = mod.forward(model, b["pos"], b["fx"], grid, **run.extra(b))
                optimized, plain = step_loss(out, b)
            optimized.backward()
            if clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            # The rate this step uses, as ours logs it (the scheduler moves it on after).
            lr = opt.param_groups[0]["lr"]
            opt.step()
            if per_batch is not None:
                per_batch.step()
            loss_sum += plain.item()
        if per_epoch is not None:
            per_epoch.step()
        due = (epoch + 1) % spec["eval_every_epochs"] == 0 or epoch + 1 == epochs
        err, steps = evaluate() if due else (None, [])
        if err is not None:
            last = (err, steps)
            if best is None or err < best[0]:
                best = (err, steps)
        history.append(dict(epoch=epoch, train_loss=loss_sum / n, test_rel_l2=err, lr=lr,
                            seconds=time.perf_counter() - e0))
        if not args.quiet:
            print(f"epoch {epoch + 1}/{epochs}: train loss {loss_sum / n:.4e}, test rel L2 "
                  f"{'-' if err is None else f'{err:.4e}'}, {history[-1]['seconds']:.1f} s", flush=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
    final = best if spec["select_best"] else last
    result = dict(format=FORMAT, test_rel_l2=final[0], per_step=final[1], history=history,
                  wall_s=time.perf_counter() - t0, params=steplib.count(model), init=args.init,
                  network=f"{mod.__name__}: {getattr(mod, 'NETWORK', type(model).__name__)}",
                  torch=torch.__version__, threads=torch.get_num_threads())
    out = os.path.join(args.folder, "result.json")
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=2)
    os.replace(tmp, out)
    print(json.dumps({"test_rel_l2": final[0], "wall_s": result["wall_s"],
                      "total_s": time.perf_counter() - started}))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
