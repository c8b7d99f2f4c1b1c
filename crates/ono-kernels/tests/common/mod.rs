//! Naive f64 arrays for the oracles: plain `Vec<f64>` with explicit index arithmetic, so that the
//! reference computations share no code with the kernels under test.

#![allow(dead_code)]

use rand::Rng;
use tch::{Device, Kind, Tensor};

/// A row-major 4-D array (B, H, N, d).
#[derive(Clone, Debug)]
pub struct A4 {
    pub data: Vec<f64>,
    pub shape: [usize; 4],
}

impl A4 {
    pub fn zeros(shape: [usize; 4]) -> Self {
        Self {
            data: vec![0.0; shape.iter().product()],
            shape,
        }
    }
    pub fn random(rng: &mut impl Rng, shape: [usize; 4], scale: f64) -> Self {
        let n = shape.iter().product();
        Self {
            data: (0..n).map(|_| rng.gen_range(-scale..scale)).collect(),
            shape,
        }
    }
    fn idx(&self, b: usize, h: usize, n: usize, d: usize) -> usize {
        let [_, hs, ns, ds] = self.shape;
        ((b * hs + h) * ns + n) * ds + d
    }
    pub fn at(&self, b: usize, h: usize, n: usize, d: usize) -> f64 {
        self.data[self.idx(b, h, n, d)]
    }
    pub fn set(&mut self, b: usize, h: usize, n: usize, d: usize, x: f64) {
        let i = self.idx(b, h, n, d);
        self.data[i] = x;
    }
    pub fn tensor(&self) -> Tensor {
        let s: Vec<i64> = self.shape.iter().map(|&x| x as i64).collect();
        Tensor::from_slice(&self.data).view(s.as_slice())
    }
    /// Rows n of every (b, h) where keep(b, n) holds, in order (removes padded points).
    pub fn select_rows(&self, keep: impl Fn(usize, usize) -> bool, n_out: usize) -> Self {
        let [bs, hs, ns, ds] = self.shape;
        let mut out = Self::zeros([bs, hs, n_out, ds]);
        for b in 0..bs {
            for h in 0..hs {
                let mut r = 0;
                for n in 0..ns {
                    if keep(b, n) {
                        for d in 0..ds {
                            out.set(b, h, r, d, self.at(b, h, n, d));
                        }
                        r += 1;
                    }
                }
                assert_eq!(r, n_out);
            }
        }
        out
    }
}

pub fn row_softmax(x: &[f64]) -> Vec<f64> {
    let m = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = x.iter().map(|v| (v - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.into_iter().map(|v| v / s).collect()
}

pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

pub fn row(a: &A4, b: usize, h: usize, n: usize) -> Vec<f64> {
    (0..a.shape[3]).map(|d| a.at(b, h, n, d)).collect()
}

pub fn cpu_f64() -> (Kind, Device) {
    (Kind::Double, Device::Cpu)
}
