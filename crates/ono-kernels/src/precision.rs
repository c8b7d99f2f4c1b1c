//! The float32 islands of mixed precision. Under bfloat16 or float16 compute (`ono_nn::precision`)
//! the matrix products of the layers take their inputs in the reduced kind; the kernels whose
//! accuracy needs more than the 8 (bfloat16) or 11 (float16) significant bits widen what they are
//! given to float32 first: second moments, Cholesky factors and whitening solves
//! ([`crate::orthonormal`]), FFTs and the pruned DFT ([`crate::spectral`], complex bfloat16 has no
//! FFT), and Nyström's iterative pseudo-inverse ([`crate::attention::moore_penrose_pinv`]).

use tch::{Kind, Tensor};

use crate::Result;

/// Whether `kind` is one of the 16-bit floating kinds.
pub fn is_reduced(kind: Kind) -> bool {
    matches!(kind, Kind::BFloat16 | Kind::Half)
}

/// `t` in float32 when it is bfloat16 or float16; any other kind (float64 included) unchanged.
pub fn widen(t: &Tensor) -> Result<Tensor> {
    Ok(if is_reduced(t.kind()) {
        t.f_to_kind(Kind::Float)?
    } else {
        t.shallow_clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::moore_penrose_pinv;
    use crate::orthonormal::{psd_safe_cholesky, second_moment, whiten, whiten_explicit_inverse};
    use crate::spectral::{spectral_conv, spectral_conv_fft};
    use tch::Device;

    /// A 16-bit input gives exactly the float32 computation on its (exactly representable)
    /// float32 copy, answered in float32: nothing inside ran in 16 bits.
    fn same_as_float32(half: &Tensor, f: impl Fn(&Tensor) -> Tensor) {
        let got = f(half);
        let want = f(&half.to_kind(Kind::Float));
        assert_eq!(got.kind(), Kind::Float);
        assert!(
            got.equal(&want),
            "{:?} input differs from float32",
            half.kind()
        );
    }

    #[test]
    fn float32_islands_widen_16_bit_inputs() {
        tch::manual_seed(5);
        let opts = (Kind::Float, Device::Cpu);
        let psi = Tensor::randn([2, 50, 4], opts);
        let l = {
            let c = second_moment(&psi, None).unwrap();
            psd_safe_cholesky(&c).unwrap().0
        };
        let x = Tensor::randn([2, 3, 8, 8], opts);
        let w: Vec<Tensor> = (0..2)
            .map(|_| Tensor::randn([3, 2, 3, 3, 2], opts))
            .collect();
        let w: Vec<&Tensor> = w.iter().collect();
        let a = Tensor::rand([2, 6, 6], opts).softmax(-1, Kind::Float);
        for kind in [Kind::BFloat16, Kind::Half] {
            same_as_float32(&psi.to_kind(kind), |p| second_moment(p, None).unwrap());
            same_as_float32(&psi.to_kind(kind), |p| whiten(p, &l).unwrap());
            same_as_float32(&psi.to_kind(kind), |p| {
                whiten_explicit_inverse(p, &l).unwrap()
            });
            let c = second_moment(&psi, None).unwrap().to_kind(kind);
            same_as_float32(&c, |c| psd_safe_cholesky(c).unwrap().0);
            same_as_float32(&x.to_kind(kind), |x| {
                spectral_conv(x, &w, &[3, 3], "backward").unwrap()
            });
            same_as_float32(&x.to_kind(kind), |x| {
                spectral_conv_fft(x, &w, &[3, 3], "backward").unwrap()
            });
            same_as_float32(&a.to_kind(kind), |a| moore_penrose_pinv(a, 6).unwrap());
        }
        // float64 stays float64.
        assert_eq!(
            widen(&psi.to_kind(Kind::Double)).unwrap().kind(),
            Kind::Double
        );
    }
}
