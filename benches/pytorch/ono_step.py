"""Full training steps of the PyTorch ONO (ONO2) at an ono preset's shapes, the counterpart of
`ono bench-step`: forward in training mode, the reference loss (sum of relative L2, plus 0.1 x
Darcy's derivative loss at the Darcy preset), backward, clip_grad_norm_(0.1) and an AdamW step
(lr 1e-3, weight decay 1e-5) on random data; prints one JSON line (median and min step seconds
after the warm-up, peak RSS, and on CUDA torch's peak allocated and reserved memory).

The network is upstream's `ONOmodel2.ONO2` when ONO_UPSTREAM names a checkout of
zhijie-group/Orthogonal-Neural-operator (with the packages its imports need), else the
restatement in ono2.py (same torch operations; needs nystrom-attention 0.0.11,
linear-attention-transformer 0.19.1 and their dependencies). `--check` loads
fixtures/ono/{linear_small,nystrom_small} and their `_wellcond` twins (made by the unmodified
upstream class) into it and reproduces their outputs, loss and gradients within each fixture's
suggested float32 tolerances.

Usage: [ONO_UPSTREAM=<checkout>] python benches/pytorch/ono_step.py [PRESET cpu|cuda [STEPS [THREADS]]]
         [--warmup N] [--check]
The parameter counts printed must equal `ono bench-step`'s (same architecture).
"""
import json, os, sys

import torch

import steplib

if os.environ.get("ONO_UPSTREAM"):
    sys.path.insert(0, os.environ["ONO_UPSTREAM"])
    from ONOmodel2 import ONO2  # noqa: E402
    IMPL = "pytorch-ONO2 (upstream)"
else:
    from ono2 import ONO2  # noqa: E402
    IMPL = "pytorch-ONO2 (restated, benches/pytorch/ono2.py)"

PRESETS = {
    'darcy': dict(n_layers=10, n_hidden=128, n_head=8, psi_dim=32, mlp_ratio=2, attn_type='nystrom', space_dim=2, fun_dim=1, out_dim=1),
    'ns2d': dict(n_layers=8, n_hidden=128, n_head=8, psi_dim=16, mlp_ratio=1, attn_type=None, space_dim=2, fun_dim=10, out_dim=1),
    'elasticity': dict(n_layers=8, n_hidden=128, n_head=8, psi_dim=8, mlp_ratio=1, attn_type='nystrom', space_dim=1, fun_dim=2, out_dim=1),
}


def check():
    """Each fixture's state dict loaded into ONO2: eval output, then a train pass, its loss and
    gradients, against the stored ones (normwise relative errors, one line each)."""
    for case in ["linear_small", "nystrom_small", "linear_small_wellcond", "nystrom_small_wellcond"]:
        t, side = steplib.fixture("ono", case)
        torch.manual_seed(0)
        model = ONO2(**side["config"])
        for i, block in enumerate(model.blocks):
            block.feature_cov = t[f"param.blocks.{i}.feature_cov"].clone()
        model.load_state_dict({k[len("param."):]: v for k, v in t.items() if k.startswith("param.")})
        model.eval()
        with torch.no_grad():
            out_eval = model(t["input.pos"], t["input.fx"])
        model.train()
        out_train = model(t["input.pos"], t["input.fx"])
        loss = steplib.rel_l2_sum(out_train, t["input.y"])
        loss.backward()
        tol = side["suggested_tolerances"]["float32_port_vs_float32_reference"]
        errs = steplib.compared(model, t, tol["outputs_and_loss"], tol["grads"], False, output_eval=out_eval,
                                output_train=out_train, loss_train=loss)
        print(json.dumps({"check": f"ono/{case}", "impl": IMPL, "params": steplib.count(model), **errs}))


def main(args):
    warmup = steplib.setup(args)
    cfg = PRESETS[args.preset]
    shapes = steplib.SHAPES[args.preset]
    device = args.device
    torch.manual_seed(0)
    model = ONO2(orth=True, momentum=0.9, **cfg).to(device)
    b, n = shapes["batch"], shapes["n"]
    pos = torch.rand(b, n, cfg["space_dim"], device=device)
    fx = torch.randn(b, n, cfg["fun_dim"], device=device)
    y = torch.randn(b, n, 1, device=device)
    model.train()
    step = steplib.ono_step(model, lambda: steplib.ono_loss(model(pos, fx), y, shapes))
    times = steplib.timed(step, device, args.steps, warmup)
    steplib.report(dict(preset=args.preset, impl=IMPL, batch=b, points=n, params=steplib.count(model)),
                   times, device)


if __name__ == '__main__':
    steplib.entry(steplib.parser(__doc__, "preset", list(PRESETS)).parse_args(), "preset", check, main)
