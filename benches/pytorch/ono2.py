"""The official ONO network restated: `ONO2`, `ONOBlock`, `MLP` and `psd_safe_cholesky` of
zhijie-group/Orthogonal-Neural-operator `ONOmodel2.py` at c9bc85d (L214-297, L405-470, L569),
with the same torch operations in the same order and the same module names (so the fixtures'
state dicts load), for the two attention blocks the presets use: the default
`linear_attention_transformer.linear_attention_transformer.SelfAttention` (0.19.1) and
`nystrom_attention.NystromAttention` (0.0.11), both imported, not restated.

Left out: the attention types no preset uses (performer, reformer, linformer, the in-file
Galerkin `LinearAttention`), whose imports `ONOmodel2.py` makes at module level, and the time
input (`Time_Input`, Plasticity). `trunc_normal_` is torch's (upstream takes timm's, the same
algorithm); the initialisation does not matter to the fixtures, which load their weights.
`python benches/pytorch/ono_step.py --check` proves the equivalence on the fixtures.
"""
import warnings

import torch
import torch.nn as nn
from linear_attention_transformer.linear_attention_transformer import SelfAttention as LinearSelfAttention
from nystrom_attention import NystromAttention

ACTIVATION = {"gelu": nn.GELU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "relu": nn.ReLU, "silu": nn.SiLU}


class MLP(nn.Module):
    """linear_pre (Linear, act), n_layers hidden layers (residual when `res`), linear_post."""

    def __init__(self, n_input, n_hidden, n_output, n_layers=1, act="gelu", res=True):
        super().__init__()
        if act not in ACTIVATION:
            raise NotImplementedError(act)
        act = ACTIVATION[act]
        self.n_layers = n_layers
        self.res = res
        self.linear_pre = nn.Sequential(nn.Linear(n_input, n_hidden), act())
        self.linear_post = nn.Linear(n_hidden, n_output)
        self.linears = nn.ModuleList([nn.Sequential(nn.Linear(n_hidden, n_hidden), act()) for _ in range(n_layers)])

    def forward(self, x):
        x = self.linear_pre(x)
        for i in range(self.n_layers):
            x = self.linears[i](x) + x if self.res else self.linears[i](x)
        return self.linear_post(x)


def psd_safe_cholesky(A, upper=False, out=None, jitter=None):
    """torch.linalg.cholesky; only if it fails, retry with a jitter of 1e-6·10^i (1e-8 in double)
    added cumulatively to the diagonal of a copy, i = 0..9."""
    try:
        return torch.linalg.cholesky(A, upper=upper, out=out)
    except RuntimeError as e:
        isnan = torch.isnan(A)
        if isnan.any():
            # Upstream raises an undefined NanError here (a NameError in effect).
            raise RuntimeError(f"cholesky_cpu: {isnan.sum().item()} of {A.numel()} elements of the "
                               f"{A.shape} tensor are NaN.") from e
        if jitter is None:
            jitter = 1e-6 if A.dtype == torch.float32 else 1e-8
        Aprime = A.clone()
        jitter_prev = 0
        for i in range(10):
            jitter_new = jitter * (10 ** i)
            Aprime.diagonal(dim1=-2, dim2=-1).add_(jitter_new - jitter_prev)
            jitter_prev = jitter_new
            try:
                L = torch.linalg.cholesky(Aprime, upper=upper, out=out)
                warnings.warn(f"A not p.d., added jitter of {jitter_new} to the diagonal", RuntimeWarning)
                return L
            except RuntimeError:
                continue
        raise e


class ONOBlock(nn.Module):
    """x = Attn(ln_1 x) + x; x = mlp(ln_2 x) + x; ψ = proj(x) whitened by the Cholesky factor of
    its uncentred second moment (the batch's in training, an EMA buffer in evaluation), or
    BatchNorm1d without `orth`; fx = (ψ softplus(mu)) (ψᵀ fx) + fx; fx = mlp2(ln_3 fx)."""

    def __init__(self, num_heads, hidden_dim, dropout, attention_dropout, act="gelu", mlp_ratio=4,
                 orth=False, attn_type=None, last_layer=False, momentum=0.9, psi_dim=64, out_dim=1,
                 num_landmarks=256):
        super().__init__()
        self.orth = orth
        self.momentum = momentum
        self.psi_dim = psi_dim
        if self.orth:
            self.register_buffer("feature_cov", None)
        else:
            self.bn = nn.BatchNorm1d(psi_dim)
        self.register_parameter("mu", nn.Parameter(torch.zeros(psi_dim)))
        self.ln_1 = nn.LayerNorm(hidden_dim)
        if attn_type == "nystrom":
            # num_landmarks: upstream leaves NystromAttention's default, 256; fewer make the
            # pseudo-inverse affordable on a CPU (our `landmarks`).
            self.Attn = NystromAttention(hidden_dim, heads=num_heads, dim_head=hidden_dim // num_heads,
                                         dropout=dropout, num_landmarks=num_landmarks)
        elif attn_type is None:
            self.Attn = LinearSelfAttention(hidden_dim, causal=False, heads=num_heads, dropout=dropout,
                                            attn_dropout=attention_dropout)
        else:
            raise NotImplementedError(f"attn_type {attn_type!r} is not restated (nystrom or None)")
        self.attn_type = attn_type
        self.ln_2 = nn.LayerNorm(hidden_dim)
        self.mlp = MLP(hidden_dim, hidden_dim * mlp_ratio, hidden_dim, n_layers=0, res=False, act=act)
        self.proj = nn.Linear(hidden_dim, psi_dim)
        self.ln_3 = nn.LayerNorm(hidden_dim)
        self.mlp2 = (nn.Linear(hidden_dim, out_dim) if last_layer
                     else MLP(hidden_dim, hidden_dim * mlp_ratio, hidden_dim, n_layers=0, res=False, act=act))

    def forward(self, x, fx, T=None):
        x = self.Attn(self.ln_1(x)) + x
        x = self.mlp(self.ln_2(x)) + x
        if self.orth:
            x_ = self.proj(x)
            if self.training:
                batch_cov = torch.einsum("blc, bld->cd", x_, x_) / x_.shape[0] / x_.shape[1]
                with torch.no_grad():
                    if self.feature_cov is None:
                        self.feature_cov = batch_cov
                    else:
                        self.feature_cov.mul_(self.momentum).add_(batch_cov, alpha=1 - self.momentum)
            else:
                batch_cov = self.feature_cov
            L = psd_safe_cholesky(batch_cov)
            L_inv_T = L.inverse().transpose(-2, -1)
            x_ = x_ @ L_inv_T
        else:
            x_ = self.proj(x)
            x_ = self.bn(x_.transpose(-2, -1)).transpose(-2, -1)
        fx = (x_ * torch.nn.functional.softplus(self.mu)) @ (x_.transpose(-2, -1) @ fx) + fx
        fx = self.mlp2(self.ln_3(fx))
        return x, fx


class ONO2(nn.Module):
    """preprocess = MLP(space_dim + fun_dim → 2h → 2h) split into the eigenfunction stream x and
    fx; n_layers ONOBlocks; the last block's mlp2 is the output head."""

    def __init__(self, space_dim=1, n_layers=5, n_hidden=256, dropout=0.0, attn_dropout=0.0, n_head=8,
                 Time_Input=False, act="gelu", attn_type=None, mlp_ratio=1, orth=False, psi_dim=64,
                 momentum=0.9, fun_dim=1, out_dim=1, num_landmarks=256):
        super().__init__()
        if Time_Input:
            raise NotImplementedError("Time_Input is not restated")
        self.__name__ = "ONO"
        self.n_hidden = n_hidden
        self.space_dim = space_dim
        self.preprocess = MLP(fun_dim + space_dim, n_hidden * 2, n_hidden * 2, n_layers=0, res=False, act=act)
        self.blocks = nn.ModuleList([
            ONOBlock(num_heads=n_head, hidden_dim=n_hidden, dropout=dropout, attention_dropout=attn_dropout,
                     act=act, attn_type=attn_type, mlp_ratio=mlp_ratio, orth=orth, momentum=momentum,
                     psi_dim=psi_dim, out_dim=out_dim, last_layer=(i == n_layers - 1),
                     num_landmarks=num_landmarks)
            for i in range(n_layers)])
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.Linear):
            torch.nn.init.trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.constant_(m.bias, 0)
        elif isinstance(m, (nn.LayerNorm, nn.BatchNorm1d)):
            nn.init.constant_(m.bias, 0)
            nn.init.constant_(m.weight, 1.0)

    def forward(self, x, fx, T=None):
        if fx is not None:
            x = torch.cat((x, fx), -1)
        x, fx = self.preprocess(x).chunk(2, dim=-1)
        for block in self.blocks:
            x, fx = block(x, fx)
        return fx
