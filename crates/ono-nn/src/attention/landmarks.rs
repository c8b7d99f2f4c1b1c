//! How many landmarks Nyström attention takes on a sequence of n tokens.
//!
//! The reference always takes its m (256), zero-pads the sequence at the front to a multiple of m
//! and lets the padding take part in the landmark means and the softmaxes. On the meshes the
//! paper ran (972 points and more) that is a small perturbation; on a few hundred points it is
//! most of the landmarks (at n = 257, 255 of 256 landmarks are all-zero tokens) and its m×m
//! pseudo-inverse costs more than the rest of the step. `auto` follows the Nyströmformer
//! authors' and Hugging Face's codes, which attend exactly once the landmarks reach the sequence:
//! exact softmax attention when n ≤ 256, else min(256, ⌈n/2⌉) landmarks with the padding masked.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The landmarks `auto` takes at most, and the length up to which it attends exactly: the
/// reference's m.
pub const AUTO_LANDMARKS: i64 = 256;

/// The landmark setting of a Nyström attention: a number (the reference's path) or `"auto"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Landmarks {
    /// m landmarks whatever the length, the front padding unmasked: the reference.
    Fixed(i64),
    /// Exact attention up to [`AUTO_LANDMARKS`] tokens, then at most ⌈n/2⌉ of them.
    Auto,
}

/// What Nyström attention does on one sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NystromPlan {
    /// Softmax attention over every token.
    Exact,
    /// `landmarks` landmarks; `mask_padding`: whether the front padding is masked.
    Landmarks { landmarks: i64, mask_padding: bool },
}

impl Landmarks {
    pub fn validate(self) -> Result<()> {
        match self {
            Landmarks::Fixed(m) if m <= 0 => Err(Error::Config(format!(
                "landmarks must be positive or \"auto\", got {m}"
            ))),
            _ => Ok(()),
        }
    }

    /// The plan for a sequence of `n` tokens.
    pub fn plan(self, n: i64) -> NystromPlan {
        match self {
            Landmarks::Fixed(m) => NystromPlan::Landmarks {
                landmarks: m,
                mask_padding: false,
            },
            Landmarks::Auto if n <= AUTO_LANDMARKS => NystromPlan::Exact,
            Landmarks::Auto => NystromPlan::Landmarks {
                landmarks: AUTO_LANDMARKS.min((n + 1) / 2),
                mask_padding: true,
            },
        }
    }
}

impl Serialize for Landmarks {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Landmarks::Fixed(m) => s.serialize_i64(*m),
            Landmarks::Auto => s.serialize_str("auto"),
        }
    }
}

impl<'de> Deserialize<'de> for Landmarks {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Landmarks;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a positive number of landmarks or \"auto\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<Landmarks, E> {
                Ok(Landmarks::Fixed(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<Landmarks, E> {
                i64::try_from(v)
                    .map(Landmarks::Fixed)
                    .map_err(|_| E::custom(format!("{v} landmarks is too many")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Landmarks, E> {
                match v {
                    "auto" => Ok(Landmarks::Auto),
                    other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
                }
            }
        }
        d.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_attends_exactly_up_to_256_tokens_then_takes_at_most_half() {
        let auto = Landmarks::Auto;
        assert_eq!(auto.plan(1), NystromPlan::Exact);
        assert_eq!(auto.plan(256), NystromPlan::Exact);
        let at = |n| match auto.plan(n) {
            NystromPlan::Landmarks {
                landmarks,
                mask_padding: true,
            } => landmarks,
            other => panic!("{other:?}"),
        };
        assert_eq!(at(257), 129);
        assert_eq!(at(300), 150);
        assert_eq!(at(512), 256);
        assert_eq!(at(7225), 256);
        assert_eq!(
            Landmarks::Fixed(256).plan(10),
            NystromPlan::Landmarks {
                landmarks: 256,
                mask_padding: false
            }
        );
    }

    #[test]
    fn reads_a_number_or_auto_and_names_what_it_wants_otherwise() {
        #[derive(Deserialize, Serialize)]
        struct T {
            landmarks: Landmarks,
        }
        let t: T = serde_json::from_str(r#"{"landmarks": 64}"#).unwrap();
        assert_eq!(t.landmarks, Landmarks::Fixed(64));
        let t: T = serde_json::from_str(r#"{"landmarks": "auto"}"#).unwrap();
        assert_eq!(t.landmarks, Landmarks::Auto);
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"{"landmarks":"auto"}"#
        );
        let err = serde_json::from_str::<T>(r#"{"landmarks": "many"}"#)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("\"auto\""), "{err}");
        assert!(Landmarks::Fixed(0).validate().is_err());
    }
}
