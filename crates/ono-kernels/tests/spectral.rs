//! The FNO spectral multiply on pure Fourier modes, whose exact response is known: a mode inside
//! the kept corners is multiplied by exactly its complex weight; a mode above the cut vanishes.

use std::f64::consts::PI;

use ono_kernels::spectral::{
    corner_count, spectral_conv, spectral_conv_fft, spectral_conv_pruned, FFT_UP_TO_POINTS,
};
use ono_testing::{assert_close, assert_gradients, seeded};
use rand::Rng;
use tch::{Kind, Tensor};

fn random(rng: &mut impl Rng, shape: &[i64]) -> Tensor {
    let n: i64 = shape.iter().product();
    Tensor::from_slice(
        &(0..n)
            .map(|_| rng.gen_range(-1.0..1.0))
            .collect::<Vec<f64>>(),
    )
    .view(shape)
}

/// Re((a + ib) e^{iθ}) = a cos θ − b sin θ with θ = 2π Σ_j f_j t_j / n_j on a grid of `sizes`,
/// as a (1, 1, sizes...) tensor.
fn rotated_wave(sizes: &[i64], freq: &[i64], a: f64, b: f64) -> Tensor {
    let total: i64 = sizes.iter().product();
    let vals: Vec<f64> = (0..total)
        .map(|mut flat| {
            let mut phase = 0.0;
            for j in (0..sizes.len()).rev() {
                let t = flat % sizes[j];
                flat /= sizes[j];
                phase += 2.0 * PI * (freq[j] * t) as f64 / sizes[j] as f64;
            }
            a * phase.cos() - b * phase.sin()
        })
        .collect();
    let mut shape = vec![1, 1];
    shape.extend_from_slice(sizes);
    Tensor::from_slice(&vals).view(shape.as_slice())
}

/// cos θ: the pure mode itself.
fn plane_wave(sizes: &[i64], freq: &[i64]) -> Tensor {
    rotated_wave(sizes, freq, 1.0, 0.0)
}

type Conv = fn(&Tensor, &[&Tensor], &[i64], &str) -> ono_kernels::Result<Tensor>;

/// Both computations, each checked on its own (`spectral_conv` picks one by the grid's size): the
/// pruned DFT and the reference's FFTs.
const PATHS: [(&str, Conv); 2] = [("pruned", spectral_conv_pruned), ("fft", spectral_conv_fft)];

#[test]
fn a_kept_mode_is_scaled_by_exactly_its_weight_in_every_corner() {
    let mut rng = seeded(41);
    // (sizes, modes, frequency, corner, index of the frequency inside that corner)
    type Case = (Vec<i64>, Vec<i64>, Vec<i64>, usize, Vec<i64>);
    let cases: Vec<Case> = vec![
        (vec![16], vec![5], vec![3], 0, vec![3]),
        (vec![8, 10], vec![3, 4], vec![1, 2], 0, vec![1, 2]),
        (vec![8, 10], vec![3, 4], vec![-2, 3], 1, vec![1, 3]),
        (
            vec![6, 8, 6],
            vec![2, 3, 3],
            vec![1, -1, 2],
            2,
            vec![1, 2, 2],
        ),
        (
            vec![6, 8, 6],
            vec![2, 3, 3],
            vec![-1, -2, 1],
            3,
            vec![1, 1, 1],
        ),
    ];
    for (sizes, modes, freq, corner, at) in cases {
        let d = sizes.len();
        let mut wshape = vec![1, 1];
        wshape.extend_from_slice(&modes);
        wshape.push(2);
        let weights: Vec<Tensor> = (0..corner_count(d))
            .map(|_| random(&mut rng, &wshape))
            .collect();
        let refs: Vec<&Tensor> = weights.iter().collect();
        let x = plane_wave(&sizes, &freq);
        let mut w = weights[corner].get(0).get(0);
        for &i in &at {
            w = w.get(i);
        }
        let (a, b) = (w.double_value(&[0]), w.double_value(&[1]));
        for (_, conv) in PATHS {
            let y = conv(&x, &refs, &modes, "backward").unwrap();
            assert_close(&y, &rotated_wave(&sizes, &freq, a, b), 1e-10, 1e-12);
        }
    }
}

#[test]
fn modes_above_the_cut_vanish_and_norms_agree_on_single_modes() {
    let mut rng = seeded(42);
    let w = random(&mut rng, &[1, 1, 4, 2]);
    for (_, conv) in PATHS {
        let x = plane_wave(&[16], &[6]);
        for norm in ["backward", "ortho", "forward"] {
            let y = conv(&x, &[&w], &[4], norm).unwrap();
            assert_close(&y, &Tensor::zeros_like(&y), 0.0, 1e-12);
        }
        // For a round trip rfft → irfft every normalisation gives the same operator.
        let x = plane_wave(&[16], &[2]);
        let a = conv(&x, &[&w], &[4], "backward").unwrap();
        let b = conv(&x, &[&w], &[4], "ortho").unwrap();
        assert_close(&a, &b, 1e-12, 1e-12);
    }
}

#[test]
fn channels_are_contracted_by_the_weight_matrix() {
    let mut rng = seeded(43);
    // x_i = α_i cos θ; out_o = Σ_i α_i Re(w_io e^{iθ}).
    let alpha = [0.5, -1.5];
    let x = Tensor::cat(
        &[
            plane_wave(&[12], &[2]) * alpha[0],
            plane_wave(&[12], &[2]) * alpha[1],
        ],
        1,
    );
    let w = random(&mut rng, &[2, 3, 3, 2]);
    for (o, (_, conv)) in (0..3).flat_map(|o| PATHS.map(|p| (o, p))) {
        let y = conv(&x, &[&w], &[3], "backward").unwrap();
        let mut want = Tensor::zeros([1, 1, 12], (Kind::Double, tch::Device::Cpu));
        for (i, al) in alpha.iter().enumerate() {
            let wio = w.get(i as i64).get(o).get(2);
            want += rotated_wave(&[12], &[2], wio.double_value(&[0]), wio.double_value(&[1])) * *al;
        }
        assert_close(&y.narrow(1, o, 1), &want, 1e-10, 1e-12);
    }
}

#[test]
fn spectral_conv_has_correct_f64_gradients() {
    let mut rng = seeded(44);
    let x = random(&mut rng, &[1, 2, 6, 5]);
    let w1 = random(&mut rng, &[2, 2, 2, 2, 2]);
    let w2 = random(&mut rng, &[2, 2, 2, 2, 2]);
    let r = random(&mut rng, &[1, 2, 6, 5]);
    for (_, conv) in PATHS {
        assert_gradients(
            |t| (conv(&t[0], &[&t[1], &t[2]], &[2, 2], "backward").unwrap() * &r).sum(Kind::Double),
            &[x.shallow_clone(), w1.shallow_clone(), w2.shallow_clone()],
            1e-6,
            1e-6,
        );
    }
}

#[test]
fn bad_configurations_are_errors() {
    let x = Tensor::zeros([1, 1, 8], (Kind::Float, tch::Device::Cpu));
    let w = Tensor::zeros([1, 1, 6, 2], (Kind::Float, tch::Device::Cpu));
    assert!(
        spectral_conv(&x, &[&w], &[6], "backward").is_err(),
        "6 > 8/2 + 1 modes"
    );
    let w = Tensor::zeros([1, 1, 3, 2], (Kind::Float, tch::Device::Cpu));
    assert!(spectral_conv(&x, &[&w], &[3], "sideways").is_err());
    assert!(spectral_conv(&x, &[&w, &w], &[3], "backward").is_err());
    assert!(
        spectral_conv(&x, &[&w], &[4], "backward").is_err(),
        "weights of the wrong size"
    );
}

/// The pruned-DFT computation (the default where corners do not overlap on grids above
/// `FFT_UP_TO_POINTS`) equals the reference's
/// FFT computation to float64 rounding, outputs and gradients, in 1-D, 2-D and 3-D, for odd and
/// even sizes, with the Nyquist bin kept, in every normalisation.
#[test]
fn the_pruned_dft_equals_the_fft_computation() {
    let mut rng = seeded(7);
    let cases: Vec<(Vec<i64>, Vec<i64>)> = vec![
        (vec![9], vec![5]),              // odd n, all bins
        (vec![10], vec![6]),             // Nyquist bin kept
        (vec![13, 10], vec![4, 6]),      // odd first axis, Nyquist on the last
        (vec![94, 94], vec![12, 12]),    // the FNO2d Darcy shape
        (vec![8, 7, 11], vec![3, 2, 4]), // FNO3d-like
        (vec![6, 6, 6], vec![3, 3, 4]),  // corners touching (2m = n), Nyquist kept
    ];
    for (sizes, modes) in cases {
        for norm in ["backward", "ortho", "forward"] {
            let (b, ci, co) = (2, 3, 2);
            let mut xs = vec![b, ci];
            xs.extend_from_slice(&sizes);
            let x = random(&mut rng, &xs).set_requires_grad(true);
            let mut ws = vec![ci, co];
            ws.extend_from_slice(&modes);
            ws.push(2);
            let w: Vec<Tensor> = (0..corner_count(sizes.len()))
                .map(|_| random(&mut rng, &ws).set_requires_grad(true))
                .collect();
            let refs: Vec<&Tensor> = w.iter().collect();
            let a = spectral_conv_pruned(&x, &refs, &modes, norm).unwrap();
            let b_ = spectral_conv_fft(&x, &refs, &modes, norm).unwrap();
            let scale = b_.abs().max().double_value(&[]);
            let err = (&a - &b_).abs().max().double_value(&[]) / scale;
            assert!(err < 1e-12, "{sizes:?} {modes:?} {norm}: output {err}");
            let r = random(&mut rng, &a.size());
            let mut inputs = vec![x.shallow_clone()];
            inputs.extend(w.iter().map(|t| t.shallow_clone()));
            let ga = Tensor::run_backward(&[(&a * &r).sum(Kind::Double)], &inputs, false, false);
            let gb = Tensor::run_backward(&[(&b_ * &r).sum(Kind::Double)], &inputs, false, false);
            for (i, (p, q)) in ga.iter().zip(&gb).enumerate() {
                let err = (p - q).abs().max().double_value(&[])
                    / q.abs().max().double_value(&[]).max(1e-300);
                assert!(
                    err < 1e-11,
                    "{sizes:?} {modes:?} {norm}: gradient {i} {err}"
                );
            }
        }
    }
}

/// `spectral_conv` is the FFT computation on grids of at most `FFT_UP_TO_POINTS` points and where
/// corners overlap, and the pruned DFT above that size: bit for bit the chosen path's output.
#[test]
fn spectral_conv_picks_its_computation_by_grid_size() {
    let mut rng = seeded(8);
    let side = (FFT_UP_TO_POINTS as f64).sqrt() as i64;
    // (sizes, modes, expected path)
    let cases: [(Vec<i64>, Vec<i64>, &str); 4] = [
        (vec![side, side], vec![4, 4], "fft"),
        (vec![side + 1, side], vec![4, 4], "pruned"),
        (vec![FFT_UP_TO_POINTS + 1], vec![4], "pruned"),
        (vec![side + 1, side], vec![side / 2 + 1, 4], "fft"), // overlapping corners
    ];
    for (sizes, modes, path) in cases {
        let mut xs = vec![1, 2];
        xs.extend_from_slice(&sizes);
        let x = random(&mut rng, &xs);
        let mut ws = vec![2, 2];
        ws.extend_from_slice(&modes);
        ws.push(2);
        let w: Vec<Tensor> = (0..corner_count(sizes.len()))
            .map(|_| random(&mut rng, &ws))
            .collect();
        let refs: Vec<&Tensor> = w.iter().collect();
        let y = spectral_conv(&x, &refs, &modes, "backward").unwrap();
        let want = match path {
            "fft" => spectral_conv_fft(&x, &refs, &modes, "backward").unwrap(),
            _ => spectral_conv_pruned(&x, &refs, &modes, "backward").unwrap(),
        };
        assert!(y.equal(&want), "{sizes:?} {modes:?}: not the {path} path");
    }
    // The pruned DFT alone refuses overlapping corners.
    let x = random(&mut rng, &[1, 1, 8, 6]);
    let w = random(&mut rng, &[1, 1, 5, 3, 2]);
    assert!(spectral_conv_pruned(&x, &[&w, &w], &[5, 3], "backward").is_err());
    // A GPU takes the FFTs at any size (checked only where one is present).
    if tch::Cuda::is_available() {
        let dev = tch::Device::Cuda(0);
        let x = random(&mut rng, &[1, 2, 64, 64]).to_device(dev);
        let w: Vec<Tensor> = (0..2)
            .map(|_| random(&mut rng, &[2, 2, 8, 8, 2]).to_device(dev))
            .collect();
        let refs: Vec<&Tensor> = w.iter().collect();
        let y = spectral_conv(&x, &refs, &[8, 8], "backward").unwrap();
        let fft = spectral_conv_fft(&x, &refs, &[8, 8], "backward").unwrap();
        assert!(y.equal(&fft), "CUDA: not the FFT path");
    }
}
