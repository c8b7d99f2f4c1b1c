"""Full training steps of the official PyTorch ONO (ONO2) at an ono preset's shapes, the counterpart
of `ono bench-step`: forward in training mode, the reference loss (sum of relative L2, plus 0.1 x
Darcy's derivative loss at the Darcy preset), backward, clip_grad_norm_(0.1) and an AdamW step
(lr 1e-3, weight decay 1e-5) on random data; prints one JSON line (median and min step seconds
after the warm-up, peak RSS, and on CUDA torch's peak allocated and reserved memory).

Usage: ONO_UPSTREAM=<checkout of zhijie-group/Orthogonal-Neural-operator> \
         python benches/pytorch/ono_step.py PRESET cpu|cuda [STEPS] [THREADS]
Needs torch and the packages ONOmodel2.py imports (see fixtures/ono/generate_fixtures.py).
The parameter counts printed must equal `ono bench-step`'s (same architecture).
"""
import os, sys, time, json, resource, statistics
import torch
sys.path.insert(0, os.environ.get('ONO_UPSTREAM', 'upstream'))
from ONOmodel2 import ONO2  # noqa: E402

PRESETS = {
    'darcy': dict(cfg=dict(n_layers=10, n_hidden=128, n_head=8, psi_dim=32, mlp_ratio=2, attn_type='nystrom', space_dim=2, fun_dim=1, out_dim=1), batch=4, n=85 * 85, grid=85),
    'ns2d': dict(cfg=dict(n_layers=8, n_hidden=128, n_head=8, psi_dim=16, mlp_ratio=1, attn_type=None, space_dim=2, fun_dim=10, out_dim=1), batch=8, n=64 * 64, grid=None),
    'elasticity': dict(cfg=dict(n_layers=8, n_hidden=128, n_head=8, psi_dim=8, mlp_ratio=1, attn_type='nystrom', space_dim=1, fun_dim=2, out_dim=1), batch=8, n=972, grid=None),
}

def rel_l2_sum(p, y):
    b = p.shape[0]
    p, y = p.reshape(b, -1), y.reshape(b, -1)
    return (torch.norm(p - y, 2, 1) / torch.norm(y, 2, 1)).sum()

def central_diff(x, s):
    h = 1.0 / s
    x = torch.nn.functional.pad(x, (1, 1, 1, 1))
    dx = (x[:, 1:-1, 2:] - x[:, 1:-1, :-2]) / (2 * h)
    dy = (x[:, 2:, 1:-1] - x[:, :-2, 1:-1]) / (2 * h)
    return dx, dy

def darcy_loss(p, y, s):
    b = p.shape[0]
    l2 = rel_l2_sum(p, y)
    p = p.reshape(b, s, s)[:, 1:-1, 1:-1]
    p = torch.nn.functional.pad(p, (1, 1, 1, 1))
    px, py = central_diff(p, s)
    tx, ty = central_diff(y.reshape(b, s, s), s)
    return l2 + 0.1 * (rel_l2_sum(px, tx) + rel_l2_sum(py, ty))

def main(name, device, steps=5, warmup=1, threads=None):
    if threads:
        torch.set_num_threads(threads)
    p = PRESETS[name]
    torch.manual_seed(0)
    model = ONO2(orth=True, momentum=0.9, **p['cfg']).to(device)
    params = sum(q.numel() for q in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-5)
    b, n = p['batch'], p['n']
    sd = p['cfg']['space_dim']
    pos = torch.rand(b, n, sd, device=device)
    fx = torch.randn(b, n, p['cfg']['fun_dim'], device=device)
    y = torch.randn(b, n, 1, device=device)
    model.train()
    times = []
    for i in range(warmup + steps):
        if device == 'cuda':
            torch.cuda.synchronize()
        t = time.perf_counter()
        opt.zero_grad()
        out = model(pos, fx)
        loss = darcy_loss(out, y, p['grid']) if p['grid'] else rel_l2_sum(out, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        opt.step()
        if device == 'cuda':
            torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - t)
    rec = dict(preset=name, impl='pytorch-ONO2', device=device, batch=b, points=n, params=params, steps=steps,
               median_s=statistics.median(times), min_s=min(times),
               peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, threads=torch.get_num_threads())
    if device == 'cuda':
        rec['peak_cuda_allocated_mb'] = torch.cuda.max_memory_allocated() / 2**20
        rec['peak_cuda_reserved_mb'] = torch.cuda.max_memory_reserved() / 2**20
    print(json.dumps(rec), flush=True)

if __name__ == '__main__':
    name, device = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    threads = int(sys.argv[4]) if len(sys.argv) > 4 else None
    main(name, device, steps=steps, warmup=2 if device == 'cuda' else 1, threads=threads)
