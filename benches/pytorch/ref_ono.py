"""ONO for the reference training loop (train_ref.py): the official `ONO2` (restated in ono2.py,
or upstream's `ONOmodel2.ONO2` when ONO_UPSTREAM names a checkout) built from our configuration
(`crates/ono-models/src/ono/config.rs`), in the interface every `ref_*.py` module has:
`ARCHS`, `build(arch, fields)`, `forward(model, pos, fx, grid, time)`, `load_reference(model,
tensors)`. `python benches/pytorch/ono_step.py --check` proves the network on the fixtures.

Only what the official code has is built: the linear-transformer and Nyström blocks, whitening
by the Cholesky factor (orthonormal) or BatchNorm; our ablations (Galerkin or softmax blocks,
LayerNorm or no normalisation of ψ) and the time input have no reference and are refused.
"""
import os
import sys

import torch

if os.environ.get("ONO_UPSTREAM"):
    sys.path.insert(0, os.environ["ONO_UPSTREAM"])
    from ONOmodel2 import ONO2  # noqa: E402
    NETWORK = "ONOmodel2.ONO2 (upstream)"
else:
    from ono2 import ONO2  # noqa: E402
    NETWORK = "ono2.ONO2 (restated)"

ARCHS = ("ono",)

BLOCKS = {"linear_transformer": None, "nystrom": "nystrom"}
WHITENING = {"orthonormal": True, "batch_norm": False}


def build(arch, fields):
    if arch not in ARCHS:
        raise ValueError(f"ref_ono builds {ARCHS}, not {arch!r}")
    if fields["nn_block"] not in BLOCKS:
        raise NotImplementedError(f"ONO's nn_block {fields['nn_block']!r} has no reference (ONO2 has "
                                  f"{sorted(BLOCKS)})")
    if fields["orthogonalization"] not in WHITENING:
        raise NotImplementedError(f"ONO's orthogonalization {fields['orthogonalization']!r} has no "
                                  f"reference (ONO2 has {sorted(WHITENING)})")
    if fields["time_input"]:
        raise NotImplementedError("ONO's time input is not restated")
    kwargs = dict(space_dim=fields["space_dim"], fun_dim=fields["fun_dim"], out_dim=fields["out_dim"],
                  n_layers=fields["n_layers"], n_hidden=fields["n_hidden"], n_head=fields["n_head"],
                  psi_dim=fields["psi_dim"], mlp_ratio=fields["mlp_ratio"],
                  attn_type=BLOCKS[fields["nn_block"]], orth=WHITENING[fields["orthogonalization"]],
                  momentum=fields["momentum"])
    if fields["nn_block"] == "nystrom":
        kwargs["num_landmarks"] = fields["landmarks"]
    return ONO2(**kwargs)


def forward(model, pos, fx, grid=None, time=None):
    if time is not None:
        raise NotImplementedError("ONO's time input is not restated")
    return model(pos, fx)


def load_reference(model, tensors):
    """Our export names the reference's tensors; a block's `feature_cov` is absent until its first
    training forward (the reference registers it as None), and is set when present."""
    tensors = dict(tensors)
    for i, block in enumerate(model.blocks):
        cov = tensors.pop(f"blocks.{i}.feature_cov", None)
        if cov is not None:
            if not block.orth:
                raise ValueError(f"blocks.{i}.feature_cov given to a block without whitening")
            block.feature_cov = cov.clone()
    own = model.state_dict()
    missing = sorted(set(own) - set(tensors))
    extra = sorted(set(tensors) - set(own))
    if missing or extra:
        raise ValueError(f"weights do not fit ONO2: missing {missing}, unexpected {extra}")
    for k, v in tensors.items():
        if tuple(v.shape) != tuple(own[k].shape):
            raise ValueError(f"{k}: shape {tuple(v.shape)}, ONO2 has {tuple(own[k].shape)}")
    model.load_state_dict(tensors)
