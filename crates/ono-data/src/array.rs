//! Named n-dimensional arrays as the file readers return them: logical shape, row-major (C-order)
//! data, and the element type the file stored. Every reader converts to this, so the
//! column-major → row-major reversal of MATLAB files happens once, in [`NamedArray::from_fortran`].

use tch::{Kind, Tensor};

use crate::{Error, Result};

/// The elements of an array, in the type the file stored.
#[derive(Debug, Clone, PartialEq)]
pub enum ArrayData {
    /// float64
    F64(Vec<f64>),
    /// float32
    F32(Vec<f32>),
    /// int64
    I64(Vec<i64>),
    /// int32
    I32(Vec<i32>),
    /// int16
    I16(Vec<i16>),
    /// int8
    I8(Vec<i8>),
    /// uint8 (also MATLAB logical)
    U8(Vec<u8>),
    /// uint16
    U16(Vec<u16>),
    /// uint32
    U32(Vec<u32>),
    /// uint64
    U64(Vec<u64>),
}

macro_rules! each_variant {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            ArrayData::F64($v) => $body,
            ArrayData::F32($v) => $body,
            ArrayData::I64($v) => $body,
            ArrayData::I32($v) => $body,
            ArrayData::I16($v) => $body,
            ArrayData::I8($v) => $body,
            ArrayData::U8($v) => $body,
            ArrayData::U16($v) => $body,
            ArrayData::U32($v) => $body,
            ArrayData::U64($v) => $body,
        }
    };
}

impl ArrayData {
    /// Number of elements.
    pub fn len(&self) -> usize {
        each_variant!(self, v => v.len())
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The numpy name of the element type (`float64`, `int32`, ...).
    pub fn dtype(&self) -> &'static str {
        match self {
            ArrayData::F64(_) => "float64",
            ArrayData::F32(_) => "float32",
            ArrayData::I64(_) => "int64",
            ArrayData::I32(_) => "int32",
            ArrayData::I16(_) => "int16",
            ArrayData::I8(_) => "int8",
            ArrayData::U8(_) => "uint8",
            ArrayData::U16(_) => "uint16",
            ArrayData::U32(_) => "uint32",
            ArrayData::U64(_) => "uint64",
        }
    }

    /// Every element as f64 (exact for every type but the largest 64-bit integers).
    pub fn to_f64(&self) -> Vec<f64> {
        #[allow(clippy::unnecessary_cast)] // the F64 arm
        let out = each_variant!(self, v => v.iter().map(|&x| x as f64).collect());
        out
    }

    /// The elements reordered from column-major to row-major order of `shape`, walking the
    /// row-major multi-index and its column-major offset together (no index table: a 1.4 GB
    /// variable needs only its copy).
    fn fortran_to_c(&self, shape: &[usize]) -> ArrayData {
        fn reorder<T: Copy>(v: &[T], shape: &[usize]) -> Vec<T> {
            let rank = shape.len();
            let mut col_strides = vec![1usize; rank];
            for d in 1..rank {
                col_strides[d] = col_strides[d - 1] * shape[d - 1];
            }
            let mut out = Vec::with_capacity(v.len());
            let mut idx = vec![0usize; rank];
            let mut off = 0usize;
            for _ in 0..v.len() {
                out.push(v[off]);
                for d in (0..rank).rev() {
                    idx[d] += 1;
                    off += col_strides[d];
                    if idx[d] < shape[d] {
                        break;
                    }
                    off -= col_strides[d] * shape[d];
                    idx[d] = 0;
                }
            }
            out
        }
        match self {
            ArrayData::F64(v) => ArrayData::F64(reorder(v, shape)),
            ArrayData::F32(v) => ArrayData::F32(reorder(v, shape)),
            ArrayData::I64(v) => ArrayData::I64(reorder(v, shape)),
            ArrayData::I32(v) => ArrayData::I32(reorder(v, shape)),
            ArrayData::I16(v) => ArrayData::I16(reorder(v, shape)),
            ArrayData::I8(v) => ArrayData::I8(reorder(v, shape)),
            ArrayData::U8(v) => ArrayData::U8(reorder(v, shape)),
            ArrayData::U16(v) => ArrayData::U16(reorder(v, shape)),
            ArrayData::U32(v) => ArrayData::U32(reorder(v, shape)),
            ArrayData::U64(v) => ArrayData::U64(reorder(v, shape)),
        }
    }
}

/// One array read from a file.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedArray {
    /// The variable's name in the file.
    pub name: String,
    /// Logical shape, as numpy / `scipy.io.loadmat` / MATLAB `size` report it.
    pub shape: Vec<usize>,
    /// Elements in row-major order of `shape`.
    pub data: ArrayData,
}

impl NamedArray {
    /// A row-major array; the element count must match the shape.
    pub fn new(name: impl Into<String>, shape: Vec<usize>, data: ArrayData) -> Result<Self> {
        let name = name.into();
        let n: usize = shape.iter().product();
        if n != data.len() {
            return Err(Error::Invalid(format!(
                "array `{name}`: shape {shape:?} holds {n} elements, the data {}",
                data.len()
            )));
        }
        Ok(Self { name, shape, data })
    }

    /// An array whose data are in column-major (Fortran, MATLAB) order of `shape`: reordered to
    /// row-major once, here, so that `a[i, j, k]` means what it means in MATLAB and numpy.
    pub fn from_fortran(
        name: impl Into<String>,
        shape: Vec<usize>,
        data: ArrayData,
    ) -> Result<Self> {
        let arr = Self::new(name, shape, data)?;
        if arr.shape.len() < 2 {
            return Ok(arr);
        }
        let data = arr.data.fortran_to_c(&arr.shape);
        Ok(Self { data, ..arr })
    }

    /// The numpy name of the element type.
    pub fn dtype(&self) -> &'static str {
        self.data.dtype()
    }

    /// A CPU tensor of the logical shape, in the stored type (unsigned 16/32/64-bit integers are
    /// widened to int64, which libtorch can hold).
    pub fn to_tensor(&self) -> Result<Tensor> {
        let shape: Vec<i64> = self.shape.iter().map(|&d| d as i64).collect();
        let t = match &self.data {
            ArrayData::F64(v) => Tensor::from_slice(v),
            ArrayData::F32(v) => Tensor::from_slice(v),
            ArrayData::I64(v) => Tensor::from_slice(v),
            ArrayData::I32(v) => Tensor::from_slice(v),
            ArrayData::I16(v) => Tensor::from_slice(v),
            ArrayData::I8(v) => Tensor::from_slice(v),
            ArrayData::U8(v) => Tensor::from_slice(v),
            ArrayData::U16(v) => {
                Tensor::from_slice(&v.iter().map(|&x| x as i64).collect::<Vec<_>>())
            }
            ArrayData::U32(v) => {
                Tensor::from_slice(&v.iter().map(|&x| x as i64).collect::<Vec<_>>())
            }
            ArrayData::U64(v) => {
                let w: Vec<i64> = v
                    .iter()
                    .map(|&x| i64::try_from(x))
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|_| {
                        Error::Invalid(format!("array `{}`: uint64 value above int64", self.name))
                    })?;
                Tensor::from_slice(&w)
            }
        };
        Ok(t.f_reshape(shape.as_slice())?)
    }

    /// [`NamedArray::to_tensor`] as float64 or float32.
    pub fn to_float_tensor(&self, kind: Kind) -> Result<Tensor> {
        Ok(self.to_tensor()?.f_to_kind(kind)?)
    }
}
