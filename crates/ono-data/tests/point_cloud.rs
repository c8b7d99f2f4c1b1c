//! Variable-size point clouds: padding and masks, the masked relative L2 against the unpadded
//! per-sample value, GNOT's UnitTransformer over the real points only, and the refusals.

use ono_data::normalizer::{Normalizer, NormalizerKind};
use ono_data::point_cloud::{
    masked_rel_l2, masked_rel_l2_per_channel, pad_rows, PointCloudSplit, PointField, PointSample,
};
use ono_data::Error;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tch::{Device, Kind, Tensor};

fn vals(t: &Tensor) -> Vec<f64> {
    Vec::<f64>::try_from(t.to_kind(Kind::Double).reshape([-1])).unwrap()
}

/// Row-major (rows, cols) values in [-2, 2) with a channel-dependent offset, so that each
/// channel has its own mean.
fn random(rng: &mut ChaCha8Rng, rows: usize, cols: usize) -> Vec<f64> {
    (0..rows * cols)
        .map(|k| rng.gen_range(-2.0..2.0) + 3.0 * (k % cols) as f64 + 1.0)
        .collect()
}

fn tensor(v: &[f64], rows: usize, cols: usize) -> Tensor {
    Tensor::from_slice(v).reshape([rows as i64, cols as i64])
}

/// Samples with N_i = sizes[i], d = 2, c = 1, c_y = 3, θ of length 2 and one input function of
/// 3 columns with M_i = (i * 2) % 5 rows (0 for the first sample).
fn ragged(sizes: &[usize], seed: u64) -> PointCloudSplit {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let samples = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let m = (i * 2) % 5;
            PointSample {
                pos: tensor(&random(&mut rng, n, 2), n, 2),
                fx: tensor(&random(&mut rng, n, 1), n, 1),
                y: tensor(&random(&mut rng, n, 3), n, 3),
                theta: Some(tensor(&random(&mut rng, 1, 2), 1, 2).reshape([2])),
                funcs: vec![tensor(&random(&mut rng, m, 3), m, 3)],
            }
        })
        .collect();
    PointCloudSplit { samples }
}

/// Batch row `b` of a padded (B, M, C) tensor holds `src` in its first rows and zeros after.
fn assert_padded(what: &str, padded: &Tensor, b: i64, src: &Tensor) {
    let (m, c) = (padded.size()[1], padded.size()[2]);
    let n = src.size()[0];
    let row = vals(&padded.get(b));
    let want = vals(src);
    assert_eq!(
        &row[..(n * c) as usize],
        &want[..],
        "{what}: real rows of batch row {b}"
    );
    assert!(
        row[(n * c) as usize..].iter().all(|&v| v == 0.0),
        "{what}: padding of batch row {b} is not zero"
    );
    assert_eq!(row.len() as i64, m * c);
}

fn assert_mask(what: &str, mask: &Tensor, lengths: &[i64]) {
    let m = mask.size()[1];
    let got = vals(mask);
    for (b, &n) in lengths.iter().enumerate() {
        for j in 0..m {
            let want = if j < n { 1.0 } else { 0.0 };
            assert_eq!(
                got[b * m as usize + j as usize],
                want,
                "{what} mask [{b}, {j}]"
            );
        }
    }
}

#[test]
fn padding_puts_real_points_first_zeros_after_in_index_order() {
    let sizes = [1usize, 2, 3, 4, 5, 6];
    let split = ragged(&sizes, 1);
    split.validate("ragged").unwrap();
    assert_eq!(split.len(), 6);
    assert_eq!(split.max_points(), 6);
    // Not sorted, with a repeat, and without the largest sample: N_max must follow the batch.
    let idx = [3i64, 0, 4, 0, 2];
    let batch = split.batch(&idx, Device::Cpu, Kind::Double).unwrap();
    let n_max = 5;
    assert_eq!(batch.pos.size(), [5, n_max, 2]);
    assert_eq!(batch.fx.size(), [5, n_max, 1]);
    assert_eq!(batch.y.size(), [5, n_max, 3]);
    assert_eq!(batch.mask.size(), [5, n_max]);
    assert_eq!(batch.mask.kind(), Kind::Double);
    let lengths: Vec<i64> = idx.iter().map(|&i| sizes[i as usize] as i64).collect();
    assert_eq!(batch.lengths, lengths);
    assert_mask("points", &batch.mask, &lengths);
    for (b, &i) in idx.iter().enumerate() {
        let s = &split.samples[i as usize];
        assert_padded("pos", &batch.pos, b as i64, &s.pos);
        assert_padded("fx", &batch.fx, b as i64, &s.fx);
        assert_padded("y", &batch.y, b as i64, &s.y);
        let theta = batch.theta.as_ref().unwrap();
        assert_eq!(vals(&theta.get(b as i64)), vals(s.theta.as_ref().unwrap()));
    }
    // The input function is padded to its own longest M (idx 3 has M = 6 % 5 = 1, idx 4 has
    // 8 % 5 = 3, idx 0 has 0, idx 2 has 4).
    let f = &batch.funcs[0];
    let m_len: Vec<i64> = idx.iter().map(|&i| (i * 2) % 5).collect();
    assert_eq!(f.lengths, m_len);
    assert_eq!(f.values.size(), [5, 4, 3]);
    assert_mask("function", &f.mask, &m_len);
    for (b, &i) in idx.iter().enumerate() {
        assert_padded(
            "f0",
            &f.values,
            b as i64,
            &split.samples[i as usize].funcs[0],
        );
    }
}

#[test]
fn every_ragged_size_from_one_to_n_pads_exactly() {
    let sizes: Vec<usize> = (1..=9).collect();
    let split = ragged(&sizes, 2);
    let idx: Vec<i64> = (0..9).rev().collect();
    let batch = split.batch(&idx, Device::Cpu, Kind::Float).unwrap();
    assert_eq!(batch.pos.kind(), Kind::Float);
    assert_eq!(batch.mask.kind(), Kind::Float);
    // Row sums of the mask are the sizes, in batch order.
    let sums = vals(&batch.mask.sum_dim_intlist(&[1i64][..], false, Kind::Double));
    let want: Vec<f64> = idx.iter().map(|&i| (i + 1) as f64).collect();
    assert_eq!(sums, want);
    for (b, &i) in idx.iter().enumerate() {
        let s = &split.samples[i as usize];
        assert_padded("y", &batch.y, b as i64, &s.y.to_kind(Kind::Float));
    }
    // A single sample is its own unpadded self.
    let one = split.batch(&[4], Device::Cpu, Kind::Double).unwrap();
    assert_eq!(vals(&one.y), vals(&split.samples[4].y));
    assert!(vals(&one.mask).iter().all(|&m| m == 1.0));
}

#[test]
fn pad_rows_handles_all_empty_functions() {
    let a = Tensor::zeros([0, 2], (Kind::Double, Device::Cpu));
    let (v, m, l) = pad_rows("f", &[&a, &a], Kind::Float, Device::Cpu).unwrap();
    assert_eq!(v.size(), [2, 0, 2]);
    assert_eq!(m.size(), [2, 0]);
    assert_eq!(l, [0, 0]);
    let b = Tensor::zeros([3, 1], (Kind::Double, Device::Cpu));
    assert!(matches!(
        pad_rows("f", &[&a, &b], Kind::Float, Device::Cpu),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        pad_rows("f", &[], Kind::Float, Device::Cpu),
        Err(Error::Config { .. })
    ));
}

#[test]
fn batch_refuses_bad_indices_and_kinds() {
    let split = ragged(&[2, 3], 3);
    for idx in [&[][..], &[2][..], &[-1][..], &[0, 7][..]] {
        assert!(
            matches!(
                split.batch(idx, Device::Cpu, Kind::Float),
                Err(Error::Config { .. })
            ),
            "{idx:?}"
        );
    }
    assert!(matches!(
        split.batch(&[0], Device::Cpu, Kind::Int64),
        Err(Error::Config { .. })
    ));
}

#[test]
fn validate_refuses_inconsistent_samples() {
    let empty = PointCloudSplit::default();
    assert!(matches!(empty.validate("e"), Err(Error::Config { .. })));

    let mut s = ragged(&[2, 3], 4);
    s.samples[1].y = Tensor::zeros([3, 2], (Kind::Double, Device::Cpu));
    assert!(matches!(s.validate("s"), Err(Error::Shape { .. })));

    let mut s = ragged(&[2, 3], 4);
    s.samples[1].fx = Tensor::zeros([2, 1], (Kind::Double, Device::Cpu));
    assert!(matches!(s.validate("s"), Err(Error::Shape { .. })));

    let mut s = ragged(&[2, 3], 4);
    s.samples[0].pos = Tensor::zeros([0, 2], (Kind::Double, Device::Cpu));
    s.samples[0].fx = Tensor::zeros([0, 1], (Kind::Double, Device::Cpu));
    s.samples[0].y = Tensor::zeros([0, 3], (Kind::Double, Device::Cpu));
    assert!(matches!(s.validate("s"), Err(Error::Shape { .. })));

    let mut s = ragged(&[2, 3], 4);
    s.samples[1].theta = None;
    assert!(matches!(s.validate("s"), Err(Error::Invalid(_))));
    assert!(matches!(
        s.batch(&[0, 1], Device::Cpu, Kind::Float),
        Err(Error::Invalid(_))
    ));

    let mut s = ragged(&[2, 3], 4);
    s.samples[1].theta = Some(Tensor::zeros([3], (Kind::Double, Device::Cpu)));
    assert!(matches!(s.validate("s"), Err(Error::Shape { .. })));

    let mut s = ragged(&[2, 3], 4);
    s.samples[1].funcs.clear();
    assert!(matches!(s.validate("s"), Err(Error::Invalid(_))));
    assert!(matches!(
        s.batch(&[0, 1], Device::Cpu, Kind::Float),
        Err(Error::Invalid(_))
    ));

    let mut s = ragged(&[2, 3], 4);
    s.samples[1].funcs[0] = Tensor::zeros([2, 4], (Kind::Double, Device::Cpu));
    assert!(matches!(s.validate("s"), Err(Error::Shape { .. })));

    let s = ragged(&[2, 3], 4);
    let _ = s.samples[1].y.get(1).get(2).fill_(f64::NAN);
    assert!(matches!(s.validate("s"), Err(Error::Invalid(_))));

    let mut s = ragged(&[2, 3], 4);
    s.samples[0].pos = s.samples[0].pos.to_kind(Kind::Int64);
    assert!(matches!(s.validate("s"), Err(Error::Invalid(_))));
}

/// √(Σ(p−t)² / Σt²) over the given channels of unpadded (N, C) rows.
fn rel_l2(p: &[f64], t: &[f64], c: usize, channels: &[usize]) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (k, (a, b)) in p.iter().zip(t).enumerate() {
        if channels.contains(&(k % c)) {
            num += (a - b) * (a - b);
            den += b * b;
        }
    }
    (num / den).sqrt()
}

#[test]
fn masked_rel_l2_equals_the_unpadded_per_sample_value() {
    let sizes = [3usize, 7, 1, 5];
    let c = 3;
    let target = ragged(&sizes, 5);
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let preds: Vec<Tensor> = sizes
        .iter()
        .map(|&n| tensor(&random(&mut rng, n, c), n, c))
        .collect();
    let idx: Vec<i64> = (0..sizes.len() as i64).collect();
    let batch = target.batch(&idx, Device::Cpu, Kind::Double).unwrap();
    let refs: Vec<&Tensor> = preds.iter().collect();
    let (pred, pmask, _) = pad_rows("pred", &refs, Kind::Double, Device::Cpu).unwrap();
    assert_eq!(vals(&pmask), vals(&batch.mask));

    // Whatever a model writes on padded rows — here NaN and a huge value — must not count.
    let pad = batch.mask.eq(0.0).unsqueeze(-1).expand_as(&pred);
    let mut junk = pred.copy();
    let _ = junk.masked_fill_(&pad, 1e30);
    let _ = junk.get(2).get(6).fill_(f64::NAN);

    let per_sample = vals(&masked_rel_l2(&junk, &batch.y, &batch.mask).unwrap());
    let per_channel = vals(&masked_rel_l2_per_channel(&junk, &batch.y, &batch.mask).unwrap());
    for (b, &n) in sizes.iter().enumerate() {
        let (p, t) = (vals(&preds[b]), vals(&target.samples[b].y));
        assert_eq!(p.len(), n * c);
        let want = rel_l2(&p, &t, c, &[0, 1, 2]);
        assert!(
            (per_sample[b] - want).abs() <= 1e-12 * want,
            "sample {b}: {} vs {want}",
            per_sample[b]
        );
        for ch in 0..c {
            let want = rel_l2(&p, &t, c, &[ch]);
            let got = per_channel[b * c + ch];
            assert!(
                (got - want).abs() <= 1e-12 * want,
                "sample {b} channel {ch}: {got} vs {want}"
            );
        }
    }

    // The same computation without the mask is contaminated: it sees the 1e30 padding.
    let ones = Tensor::ones_like(&batch.mask);
    let unmasked =
        vals(&masked_rel_l2(&junk.nan_to_num(0.0, None, None), &batch.y, &ones).unwrap());
    assert!(
        unmasked[0] > 1e20,
        "padding should dominate an unmasked norm"
    );

    // Shape refusals.
    assert!(matches!(
        masked_rel_l2(&pred, &batch.y.narrow(2, 0, 2), &batch.mask),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        masked_rel_l2(&pred, &batch.y, &batch.mask.narrow(1, 0, 2)),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        masked_rel_l2_per_channel(&pred.get(0), &batch.y.get(0), &batch.mask),
        Err(Error::Shape { .. })
    ));
}

/// Per-channel mean and unbiased std (+ 1e-8) of row-major (rows, c) values.
fn stats(v: &[f64], c: usize) -> (Vec<f64>, Vec<f64>) {
    let rows = v.len() / c;
    let mean: Vec<f64> = (0..c)
        .map(|ch| (0..rows).map(|r| v[r * c + ch]).sum::<f64>() / rows as f64)
        .collect();
    let std = (0..c)
        .map(|ch| {
            let ss: f64 = (0..rows).map(|r| (v[r * c + ch] - mean[ch]).powi(2)).sum();
            (ss / (rows - 1) as f64).sqrt() + 1e-8
        })
        .collect();
    (mean, std)
}

fn mean_std(n: &Normalizer) -> (Vec<f64>, Vec<f64>) {
    let t = n.tensors("");
    (vals(&t["mean"]), vals(&t["std"]))
}

fn close(a: &[f64], b: &[f64], tol: f64) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= tol * y.abs().max(1.0))
}

#[test]
fn unit_transformer_uses_the_real_points_only() {
    let sizes = [2usize, 9, 4, 1, 6];
    let split = ragged(&sizes, 7);
    let concat: Vec<f64> = split.samples.iter().flat_map(|s| vals(&s.y)).collect();
    let (mean, std) = stats(&concat, 3);

    let norm = split.fit_unit(PointField::Y).unwrap();
    assert_eq!(norm.kind(), NormalizerKind::Unit);
    let (m, s) = mean_std(&norm);
    assert!(close(&m, &mean, 1e-12), "{m:?} vs {mean:?}");
    assert!(close(&s, &std, 1e-12), "{s:?} vs {std:?}");

    // Fitting on the padded (S, N_max, C) tensor counts the zeros of the padding: the
    // contamination of GNOT issue #12 applied to the statistics. It must differ clearly.
    let idx: Vec<i64> = (0..sizes.len() as i64).collect();
    let padded = split.batch(&idx, Device::Cpu, Kind::Double).unwrap().y;
    let (pm, ps) = mean_std(&Normalizer::fit(NormalizerKind::Unit, &padded).unwrap());
    for ch in 0..3 {
        assert!(
            (pm[ch] - mean[ch]).abs() > 0.1,
            "channel {ch}: padded mean {}",
            pm[ch]
        );
        assert!(
            (ps[ch] - std[ch]).abs() > 0.1,
            "channel {ch}: padded std {}",
            ps[ch]
        );
    }

    // θ: one row per sample.
    let thetas: Vec<f64> = split
        .samples
        .iter()
        .flat_map(|s| vals(s.theta.as_ref().unwrap()))
        .collect();
    let (tm, ts) = stats(&thetas, 2);
    let (m, s) = mean_std(&split.fit_unit(PointField::Theta).unwrap());
    assert!(close(&m, &tm, 1e-12) && close(&s, &ts, 1e-12));

    // Normalizing before batching keeps the padding at zero and encodes the real rows.
    let enc = split.normalized(PointField::Y, &norm).unwrap();
    let b = enc.batch(&idx, Device::Cpu, Kind::Double).unwrap();
    for (i, sample) in split.samples.iter().enumerate() {
        let want: Vec<f64> = vals(&sample.y)
            .iter()
            .enumerate()
            .map(|(k, v)| (v - mean[k % 3]) / std[k % 3])
            .collect();
        let got = vals(&b.y.get(i as i64));
        assert!(close(&got[..want.len()], &want, 1e-12));
        assert!(got[want.len()..].iter().all(|&v| v == 0.0));
    }
    // Positions untouched.
    assert_eq!(vals(&enc.samples[1].pos), vals(&split.samples[1].pos));

    // θ asked for where there is none; a single point (no unbiased std).
    let mut no_theta = ragged(&[2, 3], 8);
    no_theta.samples.iter_mut().for_each(|s| s.theta = None);
    assert!(matches!(
        no_theta.fit_unit(PointField::Theta),
        Err(Error::Config { .. })
    ));
    assert!(matches!(
        ragged(&[1], 9).fit_unit(PointField::Y),
        Err(Error::Invalid(_))
    ));
}

#[test]
fn normalizer_from_stats_checks_its_input() {
    let m = Tensor::from_slice(&[1.0f64, 2.0]);
    let s = Tensor::from_slice(&[0.5f64, 4.0]);
    let n = Normalizer::from_stats(NormalizerKind::Unit, m.copy(), s.copy()).unwrap();
    let x = Tensor::from_slice(&[2.0f64, 10.0, 0.0, 2.0]).reshape([1, 2, 2]);
    assert_eq!(vals(&n.encode(&x).unwrap()), [2.0, 2.0, -2.0, 0.0]);
    assert_eq!(vals(&n.decode(&n.encode(&x).unwrap()).unwrap()), vals(&x));
    assert!(matches!(
        Normalizer::from_stats(
            NormalizerKind::Unit,
            m.copy(),
            Tensor::from_slice(&[1.0f64])
        ),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        Normalizer::from_stats(NormalizerKind::Unit, m, Tensor::from_slice(&[1.0f64, 0.0])),
        Err(Error::Invalid(_))
    ));
}
