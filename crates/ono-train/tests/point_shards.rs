//! The kernels' sums over points, with a sample's points split unevenly across 2 and 3 real
//! processes (Gloo, float64; one process holding no points): every output row, and the gradient
//! of every input row, equals one process's on the whole sample within 1e-10. Two faulty groups
//! must fail the same comparison: one that leaves the forward all-reduce out, and one whose
//! backward is a detach. A kernel that needs every point is refused by name. Then whole models
//! (ONO with the linear-transformer block, Transolver, the Galerkin Transformer with its pointwise
//! decoder, GNOT): one training forward, the relative L2 loss and its backward on the shares
//! give one process's outputs, loss, parameter gradients (the processes' shares summed) and
//! running statistics (ONO's EMA covariances) within 1e-10.

// Processes need the c10d shim (ono-train's `dist` feature, on in the workspace's tests).
#![cfg(feature = "dist")]

use std::rc::Rc;
use std::time::Duration;

use ono_dist::{Backend, Launch, ProcessGroup};
use ono_kernels::attention::{fourier, galerkin, gnot_linear, linear_transformer};
use ono_kernels::orthonormal::second_moment;
use ono_kernels::points::{self, PointGroup};
use ono_nn::loss::{relative_l2, Reduction};
use ono_testing::ranks::{assert_passed, is_child, run_ranks};
use ono_train::points::ProcessPoints;
use tch::{Device, Kind, Tensor};

const TOL: f64 = 1e-10;
/// Points of the sample (batch 2, the second sample's last two points padded).
const N: i64 = 7;

/// Each rank's contiguous share of the N points: uneven, and one share empty.
fn shares(world: usize) -> Vec<(i64, i64)> {
    let sizes: &[i64] = match world {
        2 => &[5, 2],
        3 => &[4, 0, 3],
        _ => panic!("no split for {world} ranks"),
    };
    let mut start = 0;
    sizes
        .iter()
        .map(|&n| {
            start += n;
            (start - n, n)
        })
        .collect()
}

#[test]
fn kernels_on_two_and_three_processes_equal_one() {
    if is_child() {
        return;
    }
    for world in [2, 3] {
        let ranks: Vec<usize> = (0..world).collect();
        for d in run_ranks("child_kernels", &ranks, world) {
            assert_passed(&d);
        }
    }
}

/// How a group completes the sums: exactly, or with one of the two faults.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    None,
    NoForwardSum,
    DetachedBackward,
}

struct Faulty {
    exact: ProcessPoints,
    group: Rc<ProcessGroup>,
    fault: Fault,
}

impl PointGroup for Faulty {
    fn sum(&self, t: &Tensor) -> ono_kernels::Result<Tensor> {
        match self.fault {
            Fault::None => self.exact.sum(t),
            Fault::NoForwardSum => Ok(t.shallow_clone()),
            Fault::DetachedBackward => {
                // The forward sum is exact; the other processes' part is a detached constant,
                // so the backward passes only this process's own gradient on (no all-reduce).
                let total = t.detach().contiguous().copy();
                self.group.all_reduce_sum(&[total.shallow_clone()]).unwrap();
                Ok(t + (total - t.detach()))
            }
        }
    }
    fn max(&self, t: &Tensor) -> ono_kernels::Result<Tensor> {
        self.exact.max(t)
    }
    fn world(&self) -> usize {
        self.exact.world()
    }
}

/// A kernel under test: its output from (q, k, v, mask) with points along dimension 2 of q, k,
/// v and 1 of the mask; `replicated` when the output is the same on every process (summed over
/// points) rather than per point.
struct Case {
    name: &'static str,
    replicated: bool,
    run: fn(&Tensor, &Tensor, &Tensor, Option<&Tensor>) -> ono_kernels::Result<Tensor>,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "galerkin",
            replicated: false,
            run: galerkin,
        },
        Case {
            name: "linear_transformer",
            replicated: false,
            run: linear_transformer,
        },
        Case {
            name: "gnot_linear",
            replicated: false,
            run: gnot_linear,
        },
        Case {
            name: "second_moment",
            replicated: true,
            run: |q, _, _, mask| {
                // ψ (B, N, k) from q's first head.
                second_moment(&q.select(1, 0), mask)
            },
        },
    ]
}

/// The whole sample's inputs, the same on every process (seeded), and the loss weights.
fn inputs() -> (Tensor, Tensor, Tensor, Tensor) {
    tch::manual_seed(17);
    let opts = (Kind::Double, Device::Cpu);
    let q = Tensor::randn([2, 2, N, 3], opts);
    let k = Tensor::randn([2, 2, N, 3], opts).f_mul_scalar(2.0).unwrap();
    let v = Tensor::randn([2, 2, N, 3], opts);
    let mask = Tensor::ones([2, N], opts);
    let _ = mask.narrow(1, N - 2, 2).select(0, 1).fill_(0.0);
    (q, k, v, mask)
}

/// Σ out ⊙ w: a loss whose gradient at the output is w, different at every element.
fn weights(size: &[i64]) -> Tensor {
    let n: i64 = size.iter().product();
    Tensor::arange(n, (Kind::Double, Device::Cpu))
        .f_mul_scalar(0.37)
        .unwrap()
        .sin()
        .view(size)
}

fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    match (a.defined(), b.defined()) {
        // An input the kernel does not read (v of the second moment) has no gradient either way.
        (false, false) => 0.0,
        (true, false) => max_diff(a, &a.zeros_like()),
        (false, true) => max_diff(&b.zeros_like(), b),
        _ if a.numel() == 0 => 0.0,
        _ => (a - b).abs().max().double_value(&[]),
    }
}

/// [`max_diff`] relative to `b`'s largest magnitude: the models' outputs and gradients range
/// over orders of magnitude (the Galerkin decoder's xavier(0.01) init makes its output ~1e-7),
/// so an absolute 1e-10 would pass anything there.
fn rel_diff(a: &Tensor, b: &Tensor) -> f64 {
    let scale = if b.defined() && b.numel() > 0 {
        b.abs().max().double_value(&[])
    } else {
        0.0
    };
    max_diff(a, b) / scale.max(f64::MIN_POSITIVE)
}

/// One case on this rank's share under `group`, against the whole sample on one process:
/// the largest difference of the outputs and of the inputs' gradients.
fn compare(case: &Case, group: Rc<dyn PointGroup>, share: (i64, i64), masked: bool) -> f64 {
    let world = group.world() as f64;
    let (q, k, v, mask) = inputs();
    let mask = masked.then_some(&mask);
    // One process, the whole sample.
    let leaves: Vec<Tensor> = [&q, &k, &v]
        .iter()
        .map(|t| t.copy().set_requires_grad(true))
        .collect();
    let out = (case.run)(&leaves[0], &leaves[1], &leaves[2], mask).unwrap();
    (&out * weights(&out.size())).sum(Kind::Double).backward();
    // This process's share of the points.
    let (start, len) = share;
    let local: Vec<Tensor> = [&q, &k, &v]
        .iter()
        .map(|t| t.narrow(2, start, len).copy().set_requires_grad(true))
        .collect();
    let local_mask = mask.map(|m| m.narrow(1, start, len).copy());
    let got = points::scope(group, || {
        (case.run)(&local[0], &local[1], &local[2], local_mask.as_ref())
    })
    .unwrap();
    let (want, w) = if case.replicated {
        // The same value on every process: each back-propagates its 1/P share.
        (out.shallow_clone(), weights(&out.size()) / world)
    } else {
        let w = weights(&out.size()).narrow(2, start, len);
        (out.narrow(2, start, len), w)
    };
    let mut worst = max_diff(&got, &want);
    let loss = (&got * &w).sum(Kind::Double);
    if !loss.requires_grad() {
        // No gradient reaches this process's inputs at all (a detached sum): a fault.
        return f64::INFINITY;
    }
    loss.backward();
    for (l, full) in local.iter().zip(&leaves) {
        // Undefined where the kernel does not read the input (v of the second moment).
        let full = full.grad();
        let full = match full.defined() {
            true => full.narrow(2, start, len),
            false => full,
        };
        worst = worst.max(max_diff(&l.grad(), &full));
    }
    worst
}

#[test]
fn child_kernels() {
    if !is_child() {
        return;
    }
    let launch = Launch::from_env().unwrap().unwrap();
    let group =
        Rc::new(ProcessGroup::new(&launch, Backend::Gloo, Duration::from_secs(30)).unwrap());
    let (rank, world) = (group.rank(), group.world());
    let share = shares(world)[rank];
    for case in cases() {
        for masked in [false, true] {
            for fault in [Fault::None, Fault::NoForwardSum, Fault::DetachedBackward] {
                let g = Rc::new(Faulty {
                    exact: ProcessPoints::new(group.clone()),
                    group: group.clone(),
                    fault,
                });
                let diff = compare(&case, g, share, masked);
                // Every rank judges the run as a whole: a rank whose own rows happen to agree
                // still sees a fault through the others'.
                let worst = Tensor::from_slice(&[diff]);
                group.all_reduce_max(&[worst.shallow_clone()]).unwrap();
                let worst = worst.double_value(&[0]);
                let what = format!("{} masked={masked} {fault:?} on {world} ranks", case.name);
                if fault == Fault::None {
                    assert!(worst <= TOL, "{what}: differs by {worst:e}");
                } else {
                    assert!(worst > 1e-6, "{what}: the fault went unseen ({worst:e})");
                }
                println!("rank {rank}: {what}: {worst:e}");
            }
        }
    }
    // An operation that needs every point is refused by name.
    let (q, k, v, _) = inputs();
    let e = points::scope(Rc::new(ProcessPoints::new(group.clone())), || {
        fourier(&q, &k, &v, None)
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("Fourier-type attention needs every point"),
        "{e}"
    );
    group.barrier().unwrap();
}

#[test]
fn models_on_two_and_three_processes_equal_one() {
    if is_child() {
        return;
    }
    for world in [2, 3] {
        let ranks: Vec<usize> = (0..world).collect();
        for d in run_ranks("child_models", &ranks, world) {
            assert_passed(&d);
        }
    }
}

/// A model of `arch`'s `preset` with the fields of `edit` changed, for points in 2-D with one
/// input and one output channel, in float64, initialised alike on every process.
fn model(arch: &str, preset: &str, edit: &serde_json::Value) -> ono_models::Model {
    let mut fields = ono_models::ModelConfig::preset(arch, preset)
        .unwrap()
        .fields()
        .unwrap();
    for (k, v) in edit.as_object().unwrap() {
        fields[k] = v.clone();
    }
    let mut cfg = ono_models::ModelConfig::from_fields(arch, fields).unwrap();
    cfg.set_data_dims(ono_models::DataDims {
        space_dim: 2,
        fun_dim: 1,
        out_dim: 1,
        time_input: false,
        functions: Vec::new(),
    });
    tch::manual_seed(5);
    ono_models::Model::new(&cfg, Device::Cpu, Kind::Double).unwrap()
}

/// One training forward and backward of `arch` on this process's share of the points against
/// the whole sample on one: outputs, loss, parameter gradients (the shares summed over the
/// processes) and every other variable (ONO's EMA covariances) after the step, each relative to
/// its largest magnitude on one process (the gradients to the largest of them all). Returns the largest difference and what it was in.
fn compare_model(
    (arch, preset, edit): &(&str, &str, serde_json::Value),
    sums: Rc<dyn PointGroup>,
    group: &Rc<ProcessGroup>,
    share: (i64, i64),
) -> (f64, String) {
    tch::manual_seed(23);
    let opts = (Kind::Double, Device::Cpu);
    let pos = Tensor::rand([2, N, 2], opts);
    let fx = Tensor::randn([2, N, 1], opts);
    let y = Tensor::randn([2, N, 1], opts);
    let loss = |out: &Tensor, y: &Tensor| relative_l2(out, y, Reduction::Sum, None).unwrap();
    let whole = model(arch, preset, edit);
    let out = whole
        .forward(&ono_models::ModelInput::new(&pos, &fx), true)
        .unwrap();
    let full_loss = loss(&out, &y);
    full_loss.backward();

    let (start, len) = share;
    let split = model(arch, preset, edit);
    let world = group.world() as f64;
    let (lpos, lfx, ly) = (
        pos.narrow(1, start, len),
        fx.narrow(1, start, len),
        y.narrow(1, start, len),
    );
    let (got, got_loss) = points::scope(sums, || {
        let got = split.forward(&ono_models::ModelInput::new(&lpos, &lfx), true)?;
        let l = loss(&got, &ly);
        // Every process holds the whole loss; weighted 1/P, the parameter gradients summed
        // over the processes are one process's (ono_kernels::points).
        (&l / world).backward();
        Ok::<_, ono_models::Error>((got, l))
    })
    .unwrap();
    let mut worst = (
        rel_diff(&got, &out.narrow(1, start, len)),
        "output".to_string(),
    );
    let mut note = |d: f64, what: &str| {
        // NaN counts as the worst.
        if d.is_nan() || d > worst.0 {
            worst = (d, what.to_string());
        }
    };
    note(rel_diff(&got_loss, &full_loss), "loss");
    let (mine, theirs) = (split.var_store().variables(), whole.var_store().variables());
    // Gradients relative to the model's largest: a parameter whose gradient is zero in exact
    // arithmetic (a LayerNorm bias before a softmax over the points) holds only rounding.
    let grad_scale = theirs
        .values()
        .filter(|t| t.requires_grad() && t.grad().defined())
        .map(|t| t.grad().abs().max().double_value(&[]))
        .fold(f64::MIN_POSITIVE, f64::max);
    // In one order on every process: each gradient is a collective.
    let mut names: Vec<&String> = mine.keys().collect();
    names.sort();
    for name in names {
        let (t, full) = (&mine[name], &theirs[name]);
        if t.requires_grad() {
            let g = t.grad();
            let g = if g.defined() { g } else { t.zeros_like() };
            group.all_reduce_sum(&[g.shallow_clone()]).unwrap();
            note(
                max_diff(&g, &full.grad()) / grad_scale,
                &format!("gradient of {name}"),
            );
        } else {
            // Running statistics: the same on every process as on one.
            note(rel_diff(t, full), name);
        }
    }
    worst
}

#[test]
fn child_models() {
    if !is_child() {
        return;
    }
    let launch = Launch::from_env().unwrap().unwrap();
    let group =
        Rc::new(ProcessGroup::new(&launch, Backend::Gloo, Duration::from_secs(60)).unwrap());
    let (rank, world) = (group.rank(), group.world());
    let share = shares(world)[rank];
    let models = [
        // The paper's Elasticity ONO with the linear-transformer block (its Nyström block needs
        // every point).
        (
            "ono",
            "elasticity",
            serde_json::json!({"nn_block": "linear_transformer", "n_layers": 2}),
        ),
        ("transolver", "elasticity", serde_json::json!({})),
        ("gnot", "gnot", serde_json::json!({"n_layers": 2})),
        // The Burgers Galerkin Transformer with the reference's pointwise decoder (its spectral
        // decoder needs every point).
        (
            "galerkin",
            "burgers",
            serde_json::json!({"decoder": "pointwise", "num_encoder_layers": 2}),
        ),
        // Its linear attention: the keys' softmax over every process's points.
        (
            "galerkin",
            "burgers",
            serde_json::json!({"decoder": "pointwise", "num_encoder_layers": 2,
                               "attention_type": "linear", "n_head": 2}),
        ),
    ];
    for case in &models {
        let arch = case.0;
        let exact = Rc::new(ProcessPoints::new(group.clone()));
        let (worst, what) = compare_model(case, exact, &group, share);
        assert!(
            worst <= TOL,
            "{arch} on {world} ranks: {what} differs by {worst:e}"
        );
        println!("rank {rank}: {arch} on {world} ranks: {worst:e} ({what})");
        // The same comparison must catch either fault. On 2 processes only: with a fault, the
        // process holding no points of the 3 has an empty covariance, and ONO's Cholesky
        // refuses it there before any comparison (an error on one process, not a wrong value).
        let faults = if world == 2 {
            &[Fault::NoForwardSum, Fault::DetachedBackward][..]
        } else {
            &[]
        };
        for &fault in faults {
            let faulty = Rc::new(Faulty {
                exact: ProcessPoints::new(group.clone()),
                group: group.clone(),
                fault,
            });
            let (worst, what) = compare_model(case, faulty, &group, share);
            assert!(
                worst.is_nan() || worst > TOL,
                "{arch} with {fault:?} passed: {worst:e}"
            );
            println!("rank {rank}: {arch} {fault:?} on {world} ranks: {worst:e} ({what})");
        }
    }
    // What needs every point is refused by name, in one line, before any collective.
    let refused = [
        (
            "galerkin",
            "burgers",
            serde_json::json!({}),
            "the Galerkin Transformer's spectral decoder needs every point",
        ),
        (
            "galerkin",
            "burgers",
            serde_json::json!({"decoder": "pointwise", "attention_type": "fourier"}),
            "Fourier-type attention needs every point",
        ),
        (
            "galerkin",
            "burgers",
            serde_json::json!({"decoder": "pointwise", "attention_type": "softmax"}),
            "softmax attention over points needs every point",
        ),
        (
            "transolver",
            "darcy",
            serde_json::json!({}),
            "structured geometry (`geotype = \"structured\"`; `unstructured` takes the points \
             as a cloud) needs every point",
        ),
        (
            "fno2d",
            "darcy",
            serde_json::json!({}),
            "the FNO's spectral layers needs every point",
        ),
    ];
    let len = share.1;
    let opts = (Kind::Double, Device::Cpu);
    let (pos, fx) = (
        Tensor::rand([1, len, 2], opts),
        Tensor::randn([1, len, 1], opts),
    );
    for (arch, preset, edit, want) in refused {
        let m = model(arch, preset, &edit);
        let e = points::scope(Rc::new(ProcessPoints::new(group.clone())), || {
            m.forward(&ono_models::ModelInput::new(&pos, &fx), true)
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains(want) && !e.contains('\n'), "{arch} {edit}: {e}");
    }
    group.barrier().unwrap();
}
