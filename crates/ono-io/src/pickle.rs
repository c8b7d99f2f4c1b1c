//! A small pickle virtual machine, for reading what Python pickled without running Python code.
//!
//! It knows the opcodes of protocols 2 to 5 that `torch.save` and `pickle.dump` emit for
//! containers, numbers, strings, bytes and calls (not the text opcodes of protocol 0/1, nor the
//! out-of-band buffers of protocol 5), the few globals that rebuild tensors from a `torch.save`
//! archive, and numpy's arrays: `numpy.core.multiarray._reconstruct` with `numpy.ndarray` and its
//! BUILD state, `numpy.core.numeric._frombuffer` (protocol 5), `numpy.dtype` with its byte order,
//! `numpy.core.multiarray.scalar` (numpy ≥ 2 spells the modules `numpy._core.…`), and
//! `_codecs.encode` and `bytes()`, through which protocol 2 pickles bytes. Every other global may
//! be named (it becomes [`Value::Global`]) but not called: a pickle cannot make this reader run
//! anything.
//!
//! The result is a neutral tree, [`Value`]: Python's containers and scalars, plus tensors (numpy
//! arrays and scalars become tensors too). Storages (the raw data of tensors) come from the
//! caller through `Persistent`, which is how [`crate::torch_save`] attaches the pickle to its
//! zip archive; [`load`] reads a plain pickle file, which has none.
//!
//! To teach the machine a new callable: a variant of `Global`, its `(module, name)` in
//! `Global::resolve`, its arguments in `Machine::call` and, if Python sets its state with BUILD,
//! its case in `Machine::build`; plus a variant of [`Value`] (which is `#[non_exhaustive]` for
//! that reason) if it builds a new kind of object. The opcode loop does not change.
//!
//! Input is untrusted: every read is bounds-checked; an array's bytes must be exactly what its
//! shape and dtype need; containers shared through the memo are not copied while the pickle runs;
//! the tree handed out is at most [`MAX_DEPTH`] deep and [`MAX_NODES`] large (a self-referencing
//! list or exponentially shared tuples are refused, not followed); and values are dropped without
//! recursion, so a deeply nested pickle cannot overflow the stack. Malformed input is an error,
//! never a panic.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

use tch::{Kind, Tensor};

use crate::{Error, Result};

/// Deepest nesting of containers in a [`Value`] tree (guards against self-referencing pickles).
pub const MAX_DEPTH: usize = 64;
/// Most values in a [`Value`] tree (guards against exponentially shared structures).
pub const MAX_NODES: usize = 1 << 22;

/// A value unpickled, as a tree that owns its parts.
#[derive(Debug)]
#[non_exhaustive]
pub enum Value {
    /// `None`.
    None,
    /// A `bool`.
    Bool(bool),
    /// An `int` that fits 64 bits (larger ones are refused).
    Int(i64),
    /// A `float`.
    Float(f64),
    /// A `str`.
    Str(String),
    /// A `bytes`.
    Bytes(Vec<u8>),
    /// A `tuple`.
    Tuple(Vec<Value>),
    /// A `list`.
    List(Vec<Value>),
    /// A `dict` or `collections.OrderedDict`.
    Dict(Dict),
    /// A class or function that was named but not called, as `module.name`.
    Global(String),
    /// A storage that no tensor wraps: its elements as a 1-D CPU tensor.
    Storage(Tensor),
    /// A tensor (or `nn.Parameter`, read as its data; or a numpy array or scalar, a 0-d scalar),
    /// contiguous, on the CPU, in its stored dtype (numpy's bytes in the host's byte order).
    Tensor(Tensor),
    /// A numpy dtype that no array holds, as numpy's `dtype.str` (`<f8`, `|b1`).
    Dtype(String),
}

/// A Python dict: its entries in insertion order (keys may repeat when the pickle sets a key
/// twice; the last one is what Python would keep).
#[derive(Debug)]
pub struct Dict {
    /// Key–value pairs in insertion order.
    pub entries: Vec<(Value, Value)>,
    /// `true` for a `collections.OrderedDict` (what `module.state_dict()` returns).
    pub ordered: bool,
}

impl Value {
    /// What the value is, for messages: "a list", "an int", "a tensor", ...
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "a bool",
            Value::Int(_) => "an int",
            Value::Float(_) => "a float",
            Value::Str(_) => "a str",
            Value::Bytes(_) => "bytes",
            Value::Tuple(_) => "a tuple",
            Value::List(_) => "a list",
            Value::Dict(d) if d.ordered => "a collections.OrderedDict",
            Value::Dict(_) => "a dict",
            Value::Global(_) => "a class or function",
            Value::Storage(_) => "a storage",
            Value::Tensor(_) => "a tensor",
            Value::Dtype(_) => "a numpy dtype",
        }
    }

    /// The key as Python's `str(key)` would print a str or int key; `None` for other keys.
    pub fn as_key(&self) -> Option<String> {
        match self {
            Value::Str(s) => Some(s.clone()),
            Value::Int(i) => Some(i.to_string()),
            _ => None,
        }
    }
}

impl Dict {
    /// The entries with the last value of each repeated key (as the Python dict), in the order
    /// keys were first inserted.
    pub fn deduplicated(&self) -> Vec<&(Value, Value)> {
        let mut out: Vec<&(Value, Value)> = Vec::with_capacity(self.entries.len());
        let mut at: HashMap<String, usize> = HashMap::new();
        for e in &self.entries {
            match e.0.as_key().and_then(|k| at.get(&k).copied()) {
                Some(i) => out[i] = e,
                None => {
                    if let Some(k) = e.0.as_key() {
                        at.insert(k, out.len());
                    }
                    out.push(e);
                }
            }
        }
        out
    }
}

/// A failure while unpickling: the message (without the pickle's name, which the caller adds).
#[derive(Debug)]
pub(crate) struct Fail(pub(crate) String);

impl From<tch::TchError> for Fail {
    fn from(e: tch::TchError) -> Self {
        Fail(format!("libtorch: {e}"))
    }
}

pub(crate) type R<T> = std::result::Result<T, Fail>;

macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::pickle::Fail(format!($($arg)*)))
    };
}
pub(crate) use bail;

/// Resolves persistent ids (BINPERSID), the pickle's references to data kept outside it.
pub(crate) trait Persistent {
    /// The object that `pid` names.
    fn load(&mut self, pid: &Obj) -> R<Obj>;
}

/// For pickles that must not hold persistent ids (plain pickle files).
pub(crate) struct NoPersistent;

impl Persistent for NoPersistent {
    fn load(&mut self, _pid: &Obj) -> R<Obj> {
        bail!("persistent ids are not supported here")
    }
}

/// Reads a plain pickle file (what `pickle.dump` writes: containers, numbers, strings, numpy
/// arrays): the object it holds, as a tree. A pickle that references data outside itself
/// (persistent ids, out-of-band buffers) or calls a global outside the module docs' list is
/// refused; every refusal is [`Error::Format`] naming the file, and a file that cannot be read
/// is [`Error::Io`].
pub fn load(path: &Path) -> Result<Value> {
    let bytes = std::fs::read(path).map_err(|source| Error::io(path, source))?;
    loads(&bytes, path)
}

/// [`load`] on a pickle in memory; `path` names it in errors.
pub fn loads(pickle: &[u8], path: &Path) -> Result<Value> {
    unpickle(pickle, &mut NoPersistent).map_err(|Fail(m)| Error::format(path, m))
}

/// Runs `pickle` to its STOP and returns the object it builds, as a tree.
pub(crate) fn unpickle(pickle: &[u8], persistent: &mut dyn Persistent) -> R<Value> {
    let mut vm = Machine::new(pickle, persistent);
    let root = vm.run()?;
    let tree = to_value(&root, 0, &mut 0);
    dispose(root);
    tree
}

/// A Python callable or class named by GLOBAL / STACK_GLOBAL.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Global {
    OrderedDict,
    RebuildTensorV2,
    RebuildParameter,
    RebuildParameterWithState,
    RebuildFromTypeV2,
    TorchSize,
    /// A storage class (`torch.FloatStorage`, …, `torch.UntypedStorage` as bytes).
    StorageType(Kind),
    /// `numpy.core.multiarray._reconstruct`: an empty array that BUILD fills.
    NumpyReconstruct,
    /// `numpy.core.numeric._frombuffer`: protocol 5's array from its bytes.
    NumpyFromBuffer,
    /// `numpy.core.multiarray.scalar`: a numpy scalar from its dtype and bytes.
    NumpyScalar,
    /// `numpy.ndarray`, the type `_reconstruct` makes.
    NumpyNdarray,
    /// `numpy.dtype`, whose byte order BUILD sets.
    NumpyDtype,
    /// `_codecs.encode`: protocol 2's bytes, as a latin-1 str.
    CodecsEncode,
    /// `bytes`, which protocol 2 calls without arguments for `b''`.
    Bytes,
    /// Any other global, as `module.name`: it may be named, not called.
    Other(String),
}

/// The typed storage classes of `torch` (`torch.FloatStorage`, ...) and the dtype of each: what
/// `torch.save` names in a persistent id, read here and written by
/// [`torch_save::write_dict`](crate::torch_save::write_dict).
pub(crate) const STORAGE_TYPES: [(&str, Kind); 12] = [
    ("FloatStorage", Kind::Float),
    ("DoubleStorage", Kind::Double),
    ("HalfStorage", Kind::Half),
    ("BFloat16Storage", Kind::BFloat16),
    ("LongStorage", Kind::Int64),
    ("IntStorage", Kind::Int),
    ("ShortStorage", Kind::Int16),
    ("CharStorage", Kind::Int8),
    ("ByteStorage", Kind::Uint8),
    ("BoolStorage", Kind::Bool),
    ("ComplexFloatStorage", Kind::ComplexFloat),
    ("ComplexDoubleStorage", Kind::ComplexDouble),
];

/// The dtype of a `torch.<name>` storage class.
fn storage_kind(name: &str) -> Option<Kind> {
    STORAGE_TYPES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, k)| k)
}

impl Global {
    fn resolve(module: &str, name: &str) -> Global {
        let storage = Global::StorageType;
        if let Some(kind) = storage_kind(name).filter(|_| module == "torch") {
            return storage(kind);
        }
        match (module, name) {
            ("collections", "OrderedDict") => Global::OrderedDict,
            ("torch._utils", "_rebuild_tensor_v2") => Global::RebuildTensorV2,
            ("torch._utils", "_rebuild_parameter") => Global::RebuildParameter,
            ("torch._utils", "_rebuild_parameter_with_state") => Global::RebuildParameterWithState,
            ("torch._tensor", "_rebuild_from_type_v2") => Global::RebuildFromTypeV2,
            ("torch", "Size") => Global::TorchSize,
            ("torch" | "torch.storage", "UntypedStorage") => storage(Kind::Uint8),
            ("numpy.core.multiarray" | "numpy._core.multiarray", "_reconstruct") => {
                Global::NumpyReconstruct
            }
            ("numpy.core.numeric" | "numpy._core.numeric", "_frombuffer") => {
                Global::NumpyFromBuffer
            }
            ("numpy.core.multiarray" | "numpy._core.multiarray", "scalar") => Global::NumpyScalar,
            ("numpy", "ndarray") => Global::NumpyNdarray,
            ("numpy", "dtype") => Global::NumpyDtype,
            ("_codecs", "encode") => Global::CodecsEncode,
            ("builtins" | "__builtin__", "bytes") => Global::Bytes,
            _ => Global::Other(format!("{module}.{name}")),
        }
    }

    fn dotted(&self) -> String {
        match self {
            Global::OrderedDict => "collections.OrderedDict".into(),
            Global::RebuildTensorV2 => "torch._utils._rebuild_tensor_v2".into(),
            Global::RebuildParameter => "torch._utils._rebuild_parameter".into(),
            Global::RebuildParameterWithState => {
                "torch._utils._rebuild_parameter_with_state".into()
            }
            Global::RebuildFromTypeV2 => "torch._tensor._rebuild_from_type_v2".into(),
            Global::TorchSize => "torch.Size".into(),
            Global::StorageType(kind) => match STORAGE_TYPES.iter().find(|(_, k)| k == kind) {
                Some((name, _)) => format!("torch.{name}"),
                None => format!("torch.{kind:?}Storage"),
            },
            Global::NumpyReconstruct => "numpy.core.multiarray._reconstruct".into(),
            Global::NumpyFromBuffer => "numpy.core.numeric._frombuffer".into(),
            Global::NumpyScalar => "numpy.core.multiarray.scalar".into(),
            Global::NumpyNdarray => "numpy.ndarray".into(),
            Global::NumpyDtype => "numpy.dtype".into(),
            Global::CodecsEncode => "_codecs.encode".into(),
            Global::Bytes => "builtins.bytes".into(),
            Global::Other(name) => name.clone(),
        }
    }
}

/// A storage read by [`Persistent::load`]: its elements as a 1-D CPU tensor.
#[derive(Debug)]
pub(crate) struct Storage {
    pub(crate) kind: Kind,
    pub(crate) key: String,
    pub(crate) data: Tensor,
}

/// A Python value on the machine's stack. Lists and dicts are shared and mutable, as in Python
/// (the memo holds the same object as the stack).
#[derive(Clone)]
pub(crate) enum Obj {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    Tuple(Rc<[Obj]>),
    List(Rc<RefCell<Vec<Obj>>>),
    Dict(Rc<RefCell<DictObj>>),
    Global(Rc<Global>),
    Storage(Rc<Storage>),
    Tensor(Rc<Tensor>),
    /// A numpy array: empty from `_reconstruct` until BUILD gives it its data (the memo may hold
    /// it before then, so it is shared).
    NdArray(Rc<RefCell<Option<Tensor>>>),
    Dtype(Rc<RefCell<Dtype>>),
}

pub(crate) struct DictObj {
    entries: Vec<(Obj, Obj)>,
    ordered: bool,
}

impl Obj {
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Obj::None => "None",
            Obj::Bool(_) => "a bool",
            Obj::Int(_) => "an int",
            Obj::Float(_) => "a float",
            Obj::Str(_) => "a str",
            Obj::Bytes(_) => "bytes",
            Obj::Tuple(_) => "a tuple",
            Obj::List(_) => "a list",
            Obj::Dict(_) => "a dict",
            Obj::Global(_) => "a global",
            Obj::Storage(_) => "a storage",
            Obj::Tensor(_) => "a tensor",
            Obj::NdArray(_) => "a numpy array",
            Obj::Dtype(_) => "a numpy dtype",
        }
    }

    fn dict(entries: Vec<(Obj, Obj)>, ordered: bool) -> Obj {
        Obj::Dict(Rc::new(RefCell::new(DictObj { entries, ordered })))
    }
}

/// Drops a value without recursion, so that a deeply nested pickle cannot overflow the stack:
/// containers owned only here are emptied onto a work list before they are dropped. (Shared
/// containers only lose a reference; the machine empties the ones that can close a cycle when
/// it is dropped.)
fn dispose(value: Obj) {
    let mut work = vec![value];
    while let Some(v) = work.pop() {
        match v {
            Obj::Tuple(mut items) => {
                if let Some(items) = Rc::get_mut(&mut items) {
                    work.extend(items.iter_mut().map(|x| std::mem::replace(x, Obj::None)));
                }
            }
            Obj::List(mut items) => {
                if let Some(items) = Rc::get_mut(&mut items) {
                    work.append(items.get_mut());
                }
            }
            Obj::Dict(mut dict) => {
                if let Some(dict) = Rc::get_mut(&mut dict) {
                    for (k, v) in dict.get_mut().entries.drain(..) {
                        work.push(k);
                        work.push(v);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The tree of `obj`, at most [`MAX_DEPTH`] deep and [`MAX_NODES`] large.
fn to_value(obj: &Obj, depth: usize, nodes: &mut usize) -> R<Value> {
    *nodes += 1;
    if *nodes > MAX_NODES {
        bail!("more than {MAX_NODES} values (a pickle of shared structures?)");
    }
    let nested = |depth: usize| -> R<usize> {
        if depth >= MAX_DEPTH {
            bail!("containers nested deeper than {MAX_DEPTH} (a self-referencing container?)");
        }
        Ok(depth + 1)
    };
    Ok(match obj {
        Obj::None => Value::None,
        Obj::Bool(b) => Value::Bool(*b),
        Obj::Int(i) => Value::Int(*i),
        Obj::Float(f) => Value::Float(*f),
        Obj::Str(s) => Value::Str(s.to_string()),
        Obj::Bytes(b) => Value::Bytes(b.to_vec()),
        Obj::Tuple(items) => {
            let d = nested(depth)?;
            Value::Tuple(
                items
                    .iter()
                    .map(|i| to_value(i, d, nodes))
                    .collect::<R<_>>()?,
            )
        }
        Obj::List(items) => {
            let d = nested(depth)?;
            Value::List(
                items
                    .borrow()
                    .iter()
                    .map(|i| to_value(i, d, nodes))
                    .collect::<R<_>>()?,
            )
        }
        Obj::Dict(dict) => {
            let d = nested(depth)?;
            let dict = dict.borrow();
            let entries = dict
                .entries
                .iter()
                .map(|(k, v)| Ok((to_value(k, d, nodes)?, to_value(v, d, nodes)?)))
                .collect::<R<_>>()?;
            Value::Dict(Dict {
                entries,
                ordered: dict.ordered,
            })
        }
        Obj::Global(g) => Value::Global(g.dotted()),
        Obj::Storage(s) => Value::Storage(s.data.shallow_clone()),
        Obj::Tensor(t) => Value::Tensor(t.shallow_clone()),
        Obj::NdArray(a) => match &*a.borrow() {
            Some(t) => Value::Tensor(t.shallow_clone()),
            None => bail!("a numpy array without its data (_reconstruct without BUILD)"),
        },
        Obj::Dtype(d) => Value::Dtype(d.borrow().name()),
    })
}

/// A cursor over the pickle bytes; every read checks the length.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| Fail(format!("truncated at byte {}", self.pos)))?;
        let out = self.data.get(self.pos..end).unwrap_or_default();
        self.pos = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> R<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> R<u8> {
        Ok(self.array::<1>()?[0])
    }

    fn u32(&mut self) -> R<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn len_u32(&mut self) -> R<usize> {
        usize::try_from(self.u32()?).map_err(|_| Fail("length overflows".into()))
    }

    fn len_u64(&mut self) -> R<usize> {
        usize::try_from(u64::from_le_bytes(self.array()?))
            .map_err(|_| Fail("length overflows".into()))
    }

    /// A `\n`-terminated line (GLOBAL's arguments), without the `\n`.
    fn line(&mut self) -> R<&'a str> {
        let rest = self.data.get(self.pos..).unwrap_or_default();
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| Fail("unterminated GLOBAL".into()))?;
        let line = self.take(n)?;
        self.take(1)?;
        std::str::from_utf8(line).map_err(|_| Fail("GLOBAL name is not UTF-8".into()))
    }

    fn utf8(&mut self, n: usize) -> R<Rc<str>> {
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes)
            .map(Rc::from)
            .map_err(|_| Fail(format!("invalid UTF-8 string at byte {}", self.pos)))
    }
}

mod op {
    pub const PROTO: u8 = 0x80;
    pub const FRAME: u8 = 0x95;
    pub const STOP: u8 = b'.';
    pub const MARK: u8 = b'(';
    pub const EMPTY_DICT: u8 = b'}';
    pub const EMPTY_LIST: u8 = b']';
    pub const EMPTY_TUPLE: u8 = b')';
    pub const TUPLE: u8 = b't';
    pub const TUPLE1: u8 = 0x85;
    pub const TUPLE2: u8 = 0x86;
    pub const TUPLE3: u8 = 0x87;
    pub const DICT: u8 = b'd';
    pub const LIST: u8 = b'l';
    pub const POP: u8 = b'0';
    pub const POP_MARK: u8 = b'1';
    pub const DUP: u8 = b'2';
    pub const BINPUT: u8 = b'q';
    pub const LONG_BINPUT: u8 = b'r';
    pub const BINGET: u8 = b'h';
    pub const LONG_BINGET: u8 = b'j';
    pub const MEMOIZE: u8 = 0x94;
    pub const GLOBAL: u8 = b'c';
    pub const STACK_GLOBAL: u8 = 0x93;
    pub const REDUCE: u8 = b'R';
    pub const BUILD: u8 = b'b';
    pub const NEWOBJ: u8 = 0x81;
    pub const SETITEM: u8 = b's';
    pub const SETITEMS: u8 = b'u';
    pub const APPEND: u8 = b'a';
    pub const APPENDS: u8 = b'e';
    pub const BININT: u8 = b'J';
    pub const BININT1: u8 = b'K';
    pub const BININT2: u8 = b'M';
    pub const LONG1: u8 = 0x8a;
    pub const BINFLOAT: u8 = b'G';
    pub const BINUNICODE: u8 = b'X';
    pub const SHORT_BINUNICODE: u8 = 0x8c;
    pub const BINUNICODE8: u8 = 0x8d;
    pub const BINBYTES: u8 = b'B';
    pub const SHORT_BINBYTES: u8 = b'C';
    pub const BINBYTES8: u8 = 0x8e;
    pub const BYTEARRAY8: u8 = 0x96;
    pub const NONE: u8 = b'N';
    pub const NEWTRUE: u8 = 0x88;
    pub const NEWFALSE: u8 = 0x89;
    pub const BINPERSID: u8 = b'Q';
}

/// The pickle machine: a stack, the MARK positions, the memo and the source of persistent ids.
struct Machine<'a, 'p> {
    reader: Reader<'a>,
    stack: Vec<Obj>,
    marks: Vec<usize>,
    memo: HashMap<u32, Obj>,
    persistent: &'p mut dyn Persistent,
    /// Every list and dict APPEND(S) or SETITEM(S) filled: the only places a reference cycle
    /// can close (`l = []; l.append(l)`), emptied when the machine is dropped so that a
    /// self-referencing pickle leaks nothing (found by fuzzing, docs/fuzzing.md).
    filled: Vec<Obj>,
}

impl Drop for Machine<'_, '_> {
    fn drop(&mut self) {
        for v in self.stack.drain(..) {
            dispose(v);
        }
        for (_, v) in self.memo.drain() {
            dispose(v);
        }
        for c in self.filled.drain(..) {
            match &c {
                Obj::List(l) => dispose(Obj::Tuple(Rc::from(std::mem::take(&mut *l.borrow_mut())))),
                Obj::Dict(d) => {
                    let entries = std::mem::take(&mut d.borrow_mut().entries);
                    for (k, v) in entries {
                        dispose(k);
                        dispose(v);
                    }
                }
                _ => {}
            }
            dispose(c);
        }
    }
}

impl<'a, 'p> Machine<'a, 'p> {
    fn new(pickle: &'a [u8], persistent: &'p mut dyn Persistent) -> Self {
        Machine {
            reader: Reader {
                data: pickle,
                pos: 0,
            },
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
            persistent,
            filled: Vec::new(),
        }
    }
}

impl Machine<'_, '_> {
    fn pop(&mut self) -> R<Obj> {
        self.stack
            .pop()
            .ok_or_else(|| Fail("pop from an empty stack".into()))
    }

    fn top(&self) -> R<&Obj> {
        self.stack.last().ok_or_else(|| Fail("empty stack".into()))
    }

    /// The values pushed since the last MARK, which is removed.
    fn pop_mark(&mut self) -> R<Vec<Obj>> {
        let mark = self
            .marks
            .pop()
            .ok_or_else(|| Fail("no MARK on the stack".into()))?;
        if mark > self.stack.len() {
            bail!("the stack fell below its MARK");
        }
        Ok(self.stack.split_off(mark))
    }

    fn pop_n(&mut self, n: usize) -> R<Vec<Obj>> {
        let at = self
            .stack
            .len()
            .checked_sub(n)
            .ok_or_else(|| Fail("pop from an empty stack".into()))?;
        Ok(self.stack.split_off(at))
    }

    fn push_tuple(&mut self, items: Vec<Obj>) {
        self.stack.push(Obj::Tuple(Rc::from(items)));
    }

    fn memo_put(&mut self, idx: u32) -> R<()> {
        let v = self.top()?.clone();
        if let Some(old) = self.memo.insert(idx, v) {
            dispose(old);
        }
        Ok(())
    }

    fn memo_get(&mut self, idx: u32) -> R<()> {
        let v = self
            .memo
            .get(&idx)
            .cloned()
            .ok_or_else(|| Fail(format!("memo entry {idx} is missing")))?;
        self.stack.push(v);
        Ok(())
    }

    fn set_items(&mut self, items: Vec<Obj>) -> R<()> {
        let target = self.top().map(Obj::type_name);
        let Some(Obj::Dict(dict)) = self.stack.last().filter(|_| items.len().is_multiple_of(2))
        else {
            dispose(Obj::Tuple(Rc::from(items)));
            bail!("SETITEM(S) of an odd number of values or on {}", target?);
        };
        let dict = dict.clone();
        let mut it = items.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            dict.borrow_mut().entries.push((k, v));
        }
        self.fill(Obj::Dict(dict));
        Ok(())
    }

    fn append(&mut self, items: Vec<Obj>) -> R<()> {
        let Some(Obj::List(list)) = self.stack.last() else {
            dispose(Obj::Tuple(Rc::from(items)));
            bail!("APPEND(S) on {}", self.top()?.type_name());
        };
        list.borrow_mut().extend(items);
        let list = Obj::List(list.clone());
        self.fill(list);
        Ok(())
    }

    /// Remembers a container that was filled (see [`Machine::filled`]), once in a row.
    fn fill(&mut self, c: Obj) {
        let same = match (self.filled.last(), &c) {
            (Some(Obj::List(a)), Obj::List(b)) => Rc::ptr_eq(a, b),
            (Some(Obj::Dict(a)), Obj::Dict(b)) => Rc::ptr_eq(a, b),
            _ => false,
        };
        if !same {
            self.filled.push(c);
        }
    }

    /// Runs the pickle to its STOP and returns the object it builds.
    fn run(&mut self) -> R<Obj> {
        loop {
            let at = self.reader.pos;
            let code = self
                .reader
                .u8()
                .map_err(|_| Fail("ends without STOP".into()))?;
            match code {
                op::PROTO => {
                    let v = self.reader.u8()?;
                    if v > 5 {
                        bail!("unsupported pickle protocol {v}");
                    }
                }
                op::FRAME => {
                    self.reader.take(8)?;
                }
                op::STOP => return self.pop(),
                op::MARK => self.marks.push(self.stack.len()),
                op::POP => dispose(self.pop()?),
                op::POP_MARK => {
                    let items = self.pop_mark()?;
                    dispose(Obj::Tuple(Rc::from(items)));
                }
                op::DUP => {
                    let v = self.top()?.clone();
                    self.stack.push(v);
                }
                op::EMPTY_DICT => self.stack.push(Obj::dict(Vec::new(), false)),
                op::EMPTY_LIST => self
                    .stack
                    .push(Obj::List(Rc::new(RefCell::new(Vec::new())))),
                op::EMPTY_TUPLE => self.push_tuple(Vec::new()),
                op::DICT => {
                    let items = self.pop_mark()?;
                    self.stack.push(Obj::dict(Vec::new(), false));
                    self.set_items(items)?;
                }
                op::LIST => {
                    let items = self.pop_mark()?;
                    self.stack.push(Obj::List(Rc::new(RefCell::new(items))));
                }
                op::TUPLE => {
                    let items = self.pop_mark()?;
                    self.push_tuple(items);
                }
                op::TUPLE1 | op::TUPLE2 | op::TUPLE3 => {
                    let items = self.pop_n(usize::from(code - op::TUPLE1 + 1))?;
                    self.push_tuple(items);
                }
                op::BINPUT => {
                    let idx = self.reader.u8()?;
                    self.memo_put(u32::from(idx))?;
                }
                op::LONG_BINPUT => {
                    let idx = self.reader.u32()?;
                    self.memo_put(idx)?;
                }
                op::MEMOIZE => {
                    let idx = u32::try_from(self.memo.len())
                        .map_err(|_| Fail("memo overflows".into()))?;
                    self.memo_put(idx)?;
                }
                op::BINGET => {
                    let idx = self.reader.u8()?;
                    self.memo_get(u32::from(idx))?;
                }
                op::LONG_BINGET => {
                    let idx = self.reader.u32()?;
                    self.memo_get(idx)?;
                }
                op::GLOBAL => {
                    let module = self.reader.line()?;
                    let name = self.reader.line()?;
                    self.stack
                        .push(Obj::Global(Rc::new(Global::resolve(module, name))));
                }
                op::STACK_GLOBAL => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    let (Obj::Str(module), Obj::Str(name)) = (&module, &name) else {
                        dispose(module);
                        dispose(name);
                        bail!("STACK_GLOBAL needs two strings");
                    };
                    self.stack
                        .push(Obj::Global(Rc::new(Global::resolve(module, name))));
                }
                op::REDUCE | op::NEWOBJ => {
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    let (callable, args) = match (callable, args) {
                        (Obj::Global(callable), Obj::Tuple(args)) => (callable, args),
                        (callable, args) => {
                            let msg = format!(
                                "call of {} with {} as arguments",
                                callable.type_name(),
                                args.type_name()
                            );
                            dispose(callable);
                            dispose(args);
                            return Err(Fail(msg));
                        }
                    };
                    let v = self.call(&callable, &args);
                    dispose(Obj::Tuple(args));
                    self.stack.push(v?);
                }
                op::BUILD => {
                    let state = self.pop()?;
                    let built = self.build(&state);
                    dispose(state);
                    built?;
                }
                op::SETITEM => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    self.set_items(vec![k, v])?;
                }
                op::SETITEMS => {
                    let items = self.pop_mark()?;
                    self.set_items(items)?;
                }
                op::APPEND => {
                    let v = self.pop()?;
                    self.append(vec![v])?;
                }
                op::APPENDS => {
                    let items = self.pop_mark()?;
                    self.append(items)?;
                }
                op::BININT => {
                    let v = i32::from_le_bytes(self.reader.array()?);
                    self.stack.push(Obj::Int(i64::from(v)));
                }
                op::BININT1 => {
                    let v = self.reader.u8()?;
                    self.stack.push(Obj::Int(i64::from(v)));
                }
                op::BININT2 => {
                    let v = u16::from_le_bytes(self.reader.array()?);
                    self.stack.push(Obj::Int(i64::from(v)));
                }
                op::LONG1 => {
                    let n = usize::from(self.reader.u8()?);
                    let bytes = self.reader.take(n)?;
                    self.stack.push(Obj::Int(long_le(bytes)?));
                }
                op::BINFLOAT => {
                    // The one big-endian field of the pickle format.
                    let v = f64::from_be_bytes(self.reader.array()?);
                    self.stack.push(Obj::Float(v));
                }
                op::BINUNICODE | op::SHORT_BINUNICODE | op::BINUNICODE8 => {
                    let n = match code {
                        op::BINUNICODE => self.reader.len_u32()?,
                        op::BINUNICODE8 => self.reader.len_u64()?,
                        _ => usize::from(self.reader.u8()?),
                    };
                    let s = self.reader.utf8(n)?;
                    self.stack.push(Obj::Str(s));
                }
                // A bytearray (protocol 5's in-band buffer of a writable numpy array) reads as the
                // bytes it holds: nothing here mutates it.
                op::BINBYTES | op::SHORT_BINBYTES | op::BINBYTES8 | op::BYTEARRAY8 => {
                    let n = match code {
                        op::BINBYTES => self.reader.len_u32()?,
                        op::BINBYTES8 | op::BYTEARRAY8 => self.reader.len_u64()?,
                        _ => usize::from(self.reader.u8()?),
                    };
                    let bytes = self.reader.take(n)?;
                    self.stack.push(Obj::Bytes(Rc::from(bytes)));
                }
                op::NONE => self.stack.push(Obj::None),
                op::NEWTRUE => self.stack.push(Obj::Bool(true)),
                op::NEWFALSE => self.stack.push(Obj::Bool(false)),
                op::BINPERSID => {
                    let pid = self.pop()?;
                    let loaded = self.persistent.load(&pid);
                    dispose(pid);
                    self.stack.push(loaded?);
                }
                other => bail!(
                    "unsupported pickle opcode 0x{other:02x} ({:?}) at byte {at}",
                    char::from(other)
                ),
            }
        }
    }

    /// BUILD: sets the state of the object on top of the stack (Python's `__setstate__`).
    fn build(&mut self, state: &Obj) -> R<()> {
        match self.top()? {
            // OrderedDict's `_metadata` (a state_dict), a tensor's Python attributes: neither
            // changes the data, so the state is dropped.
            Obj::Dict(_) | Obj::Tensor(_) => Ok(()),
            // ndarray.__setstate__((version, shape, dtype, is_fortran, data)); old pickles have
            // no version, which numpy still accepts.
            Obj::NdArray(array) => {
                let Obj::Tuple(items) = state else {
                    bail!("numpy array state is {}", state.type_name());
                };
                let (shape, dtype, fortran, data) = match &items[..] {
                    [Obj::Int(1), shape, dtype, fortran, data] | [shape, dtype, fortran, data] => {
                        (shape, dtype, fortran, data)
                    }
                    _ => bail!("unsupported numpy array state of {} items", items.len()),
                };
                let Obj::Dtype(dtype) = dtype else {
                    bail!("numpy array dtype is {}", dtype.type_name());
                };
                let fortran = match fortran {
                    Obj::Bool(b) => *b,
                    Obj::Int(i) => *i != 0,
                    other => bail!("numpy array is_fortran is {}", other.type_name()),
                };
                let t = ndarray(data, &dtype.borrow(), shape, fortran)?;
                *array.borrow_mut() = Some(t);
                Ok(())
            }
            // dtype.__setstate__((version, byte order, subarray, names, fields, elsize,
            // alignment, flags[, metadata])).
            Obj::Dtype(dtype) => {
                let Obj::Tuple(items) = state else {
                    bail!("numpy dtype state is {}", state.type_name());
                };
                let (order, subarray, names) = match &items[..] {
                    [Obj::Int(3 | 4), Obj::Str(order), subarray, names, _, _, _, _]
                    | [Obj::Int(3 | 4), Obj::Str(order), subarray, names, _, _, _, _, _] => {
                        (order, subarray, names)
                    }
                    _ => bail!("unsupported numpy dtype state of {} items", items.len()),
                };
                if !matches!((subarray, names), (Obj::None, Obj::None)) {
                    bail!("structured and sub-array numpy dtypes are not supported");
                }
                let order = match &**order {
                    "<" => ByteOrder::Little,
                    ">" => ByteOrder::Big,
                    "=" => ByteOrder::Native,
                    "|" => ByteOrder::NotApplicable,
                    other => bail!("unknown numpy byte order {other:?}"),
                };
                dtype.borrow_mut().order = order;
                Ok(())
            }
            other => bail!("BUILD on {}", other.type_name()),
        }
    }

    /// Calls a global with positional arguments (REDUCE, NEWOBJ).
    fn call(&mut self, callable: &Global, args: &[Obj]) -> R<Obj> {
        match callable {
            Global::OrderedDict => match args {
                [] => Ok(Obj::dict(Vec::new(), true)),
                [Obj::List(_) | Obj::Tuple(_)] => {
                    let items: Vec<Obj> = match args.first() {
                        Some(Obj::List(l)) => l.borrow().clone(),
                        Some(Obj::Tuple(t)) => t.to_vec(),
                        _ => Vec::new(),
                    };
                    let mut entries = Vec::with_capacity(items.len());
                    for item in items {
                        let Obj::Tuple(kv) = &item else {
                            bail!("OrderedDict item is {}", item.type_name());
                        };
                        let [k, v] = &kv[..] else {
                            bail!("OrderedDict item of {} values", kv.len());
                        };
                        entries.push((k.clone(), v.clone()));
                    }
                    Ok(Obj::dict(entries, true))
                }
                _ => bail!("OrderedDict called with unsupported arguments"),
            },
            Global::RebuildTensorV2 => match args {
                [storage, offset, size, stride, _requires_grad, _hooks]
                | [storage, offset, size, stride, _requires_grad, _hooks, _] => {
                    rebuild_tensor(storage, offset, size, stride)
                }
                _ => bail!("_rebuild_tensor_v2 with {} arguments", args.len()),
            },
            Global::RebuildParameter | Global::RebuildParameterWithState => match args {
                [data @ Obj::Tensor(_), _, _] | [data @ Obj::Tensor(_), _, _, _] => {
                    Ok(data.clone())
                }
                _ => bail!("_rebuild_parameter with unsupported arguments"),
            },
            Global::RebuildFromTypeV2 => match args {
                [Obj::Global(func), _new_type, Obj::Tuple(func_args), _state]
                    if **func != Global::RebuildFromTypeV2 =>
                {
                    self.call(func, func_args)
                }
                _ => bail!("_rebuild_from_type_v2 with unsupported arguments"),
            },
            Global::TorchSize => match args {
                [t @ Obj::Tuple(_)] => Ok(t.clone()),
                _ => bail!("torch.Size with unsupported arguments"),
            },
            Global::StorageType(kind) => {
                bail!("construction of a {kind:?} storage is not supported")
            }
            Global::NumpyReconstruct => match args {
                [Obj::Global(ty), _shape, _dtype] if **ty == Global::NumpyNdarray => {
                    Ok(Obj::NdArray(Rc::new(RefCell::new(None))))
                }
                [Obj::Global(ty), _, _] => {
                    bail!("numpy array type {} is not supported", ty.dotted())
                }
                _ => bail!("_reconstruct with unsupported arguments"),
            },
            Global::NumpyFromBuffer => match args {
                [data, Obj::Dtype(dtype), shape, Obj::Str(order)] => {
                    let fortran = match &**order {
                        "C" => false,
                        "F" => true,
                        other => bail!("_frombuffer with order {other:?}"),
                    };
                    let t = ndarray(data, &dtype.borrow(), shape, fortran)?;
                    Ok(Obj::NdArray(Rc::new(RefCell::new(Some(t)))))
                }
                _ => bail!("_frombuffer with unsupported arguments"),
            },
            Global::NumpyScalar => match args {
                [Obj::Dtype(dtype), data] => {
                    let t = ndarray(data, &dtype.borrow(), &Obj::Tuple(Rc::from([])), false)?;
                    Ok(Obj::Tensor(Rc::new(t)))
                }
                _ => bail!("numpy scalar with unsupported arguments"),
            },
            Global::NumpyDtype => match args {
                // dtype(code, align, copy): native byte order until BUILD says otherwise.
                [Obj::Str(code), ..] if args.len() <= 3 => {
                    Ok(Obj::Dtype(Rc::new(RefCell::new(Dtype {
                        code: code.to_string(),
                        order: ByteOrder::Native,
                    }))))
                }
                _ => bail!("numpy.dtype with unsupported arguments"),
            },
            Global::NumpyNdarray => bail!("numpy.ndarray can only be named by _reconstruct"),
            Global::CodecsEncode => match args {
                [Obj::Str(text), Obj::Str(codec)] if matches!(&**codec, "latin1" | "latin-1") => {
                    let bytes = text
                        .chars()
                        .map(|c| u8::try_from(u32::from(c)))
                        .collect::<std::result::Result<Vec<u8>, _>>()
                        .map_err(|_| Fail("_codecs.encode of a non-latin-1 str".into()))?;
                    Ok(Obj::Bytes(Rc::from(bytes)))
                }
                _ => bail!("_codecs.encode with unsupported arguments (only latin-1 str)"),
            },
            Global::Bytes => match args {
                [] => Ok(Obj::Bytes(Rc::from([]))),
                _ => bail!("bytes with arguments"),
            },
            Global::Other(name) => bail!("unsupported global {name}"),
        }
    }
}

/// The byte order of a numpy dtype.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ByteOrder {
    Little,
    Big,
    /// `=`
    Native,
    /// `|`: one-byte types.
    NotApplicable,
}

/// A numpy dtype: its type code without byte order (`f8`, `i4`, `b1`, `O8`, `U5`, …) and the
/// byte order BUILD gave it. Only the codes of [`Dtype::kind`] make arrays; any other may be
/// named.
#[derive(Debug, Clone)]
pub(crate) struct Dtype {
    code: String,
    order: ByteOrder,
}

impl Dtype {
    /// numpy's `dtype.str` (`<f8`, `>i4`, `|b1`), with `=` for the native order.
    fn name(&self) -> String {
        let order = match self.order {
            ByteOrder::Little => '<',
            ByteOrder::Big => '>',
            ByteOrder::Native => '=',
            ByteOrder::NotApplicable => '|',
        };
        format!("{order}{}", self.code)
    }

    /// The tensor kind of the supported numeric dtypes.
    fn kind(&self) -> R<Kind> {
        Ok(match self.code.as_str() {
            "b1" => Kind::Bool,
            "u1" => Kind::Uint8,
            "i1" => Kind::Int8,
            "i2" => Kind::Int16,
            "i4" => Kind::Int,
            "i8" => Kind::Int64,
            "f2" => Kind::Half,
            "f4" => Kind::Float,
            "f8" => Kind::Double,
            code if code.starts_with('O') => {
                bail!("numpy arrays of Python objects (dtype object) are not supported")
            }
            code => bail!(
                "numpy dtype {code} is not supported (bool, uint8, int8, int16, int32, int64, \
                 float16, float32 and float64 are)"
            ),
        })
    }

    /// Whether the bytes must be reversed to be read on this host.
    fn foreign(&self) -> bool {
        match self.order {
            ByteOrder::Little => cfg!(target_endian = "big"),
            ByteOrder::Big => cfg!(target_endian = "little"),
            ByteOrder::Native | ByteOrder::NotApplicable => false,
        }
    }
}

/// A numpy array of `shape` and `dtype` from its raw bytes (C or Fortran order, either byte
/// order), as a contiguous tensor in row-major order. The bytes must be exactly what the shape
/// and dtype need.
fn ndarray(data: &Obj, dtype: &Dtype, shape: &Obj, fortran: bool) -> R<Tensor> {
    let kind = dtype.kind()?;
    let data = match data {
        Obj::Bytes(b) => b,
        // An object array's state holds a list of its items.
        other => bail!("numpy array data is {}, not bytes", other.type_name()),
    };
    let Obj::Tuple(dims) = shape else {
        bail!("numpy array shape is {}", shape.type_name());
    };
    let mut shape = Vec::with_capacity(dims.len());
    for d in dims.iter() {
        match d {
            Obj::Int(n) if *n >= 0 => shape.push(*n),
            other => bail!("numpy array shape holds {}", other.type_name()),
        }
    }
    let what = format!(
        "numpy array of shape {shape:?} and dtype {}{}",
        dtype.name(),
        if fortran { " in Fortran order" } else { "" }
    );
    if fortran {
        // Column-major bytes are the row-major bytes of the reversed shape.
        shape.reverse();
    }
    let t = if dtype.foreign() {
        let unit = kind.elt_size_in_bytes();
        let mut swapped = data.to_vec();
        swapped.chunks_exact_mut(unit).for_each(<[u8]>::reverse);
        tensor_from_bytes(&swapped, &shape, kind)
    } else {
        tensor_from_bytes(data, &shape, kind)
    }
    .map_err(|Fail(m)| Fail(format!("{what}: {m}")))?;
    if fortran && shape.len() > 1 {
        let back: Vec<i64> = (0..shape.len() as i64).rev().collect();
        Ok(t.f_permute(back.as_slice())?.f_contiguous()?)
    } else {
        Ok(t)
    }
}

/// A tensor of `shape` and `kind` from exactly as many host-order bytes as it needs. Bool bytes
/// other than 0 and 1 read as true: libtorch must never see them.
pub(crate) fn tensor_from_bytes(data: &[u8], shape: &[i64], kind: Kind) -> R<Tensor> {
    let nbytes = shape
        .iter()
        .try_fold(kind.elt_size_in_bytes(), |n, &d| {
            usize::try_from(d).ok().and_then(|d| n.checked_mul(d))
        })
        .filter(|&n| i64::try_from(n).is_ok())
        .ok_or_else(|| Fail("its size overflows".into()))?;
    if data.len() != nbytes {
        bail!("needs {nbytes} bytes, the data has {}", data.len());
    }
    Ok(if kind == Kind::Bool {
        Tensor::f_from_data_size(data, shape, Kind::Uint8)?.f_ne(0)?
    } else {
        Tensor::f_from_data_size(data, shape, kind)?
    })
}

/// `_rebuild_tensor_v2`: the strided view of a storage, made contiguous.
fn rebuild_tensor(storage: &Obj, offset: &Obj, size: &Obj, stride: &Obj) -> R<Obj> {
    let Obj::Storage(storage) = storage else {
        bail!("tensor rebuilt from {}", storage.type_name());
    };
    let Obj::Int(offset) = *offset else {
        bail!("tensor storage offset is {}", offset.type_name());
    };
    let size = int_tuple(size, "size")?;
    let stride = int_tuple(stride, "stride")?;
    if size.len() != stride.len() {
        bail!("tensor size {size:?} and stride {stride:?} differ in rank");
    }
    if offset < 0 || size.iter().chain(&stride).any(|&v| v < 0) {
        bail!("negative tensor offset, size or stride");
    }
    // Every element must lie inside the storage: offset + Σ (size - 1) · stride < numel.
    let empty = size.contains(&0);
    let mut last = Some(offset);
    for (&n, &s) in size.iter().zip(&stride) {
        last = last.and_then(|l| (n.max(1) - 1).checked_mul(s).and_then(|d| l.checked_add(d)));
    }
    let numel = i64::try_from(storage.data.numel()).ok();
    let inside = match (last, numel) {
        (Some(last), Some(numel)) => (empty && offset <= numel) || last < numel,
        _ => false,
    };
    if !inside {
        bail!(
            "tensor of size {size:?}, stride {stride:?}, offset {offset} lies outside its \
             storage {} of {} elements",
            storage.key,
            storage.data.numel()
        );
    }
    let t = storage
        .data
        .f_as_strided(size.as_slice(), stride.as_slice(), offset)?
        .f_contiguous()?;
    Ok(Obj::Tensor(Rc::new(t)))
}

/// A tuple of ints (a tensor's size or stride).
fn int_tuple(v: &Obj, what: &str) -> R<Vec<i64>> {
    let Obj::Tuple(items) = v else {
        bail!("tensor {what} is {}", v.type_name());
    };
    items
        .iter()
        .map(|i| match i {
            Obj::Int(n) => Ok(*n),
            other => Err(Fail(format!("tensor {what} holds {}", other.type_name()))),
        })
        .collect()
}

/// LONG1's little-endian two's-complement integer, which must fit an i64.
fn long_le(bytes: &[u8]) -> R<i64> {
    let negative = bytes.last().is_some_and(|&b| b & 0x80 != 0);
    let fill = if negative { 0xff } else { 0x00 };
    let mut buf = [fill; 8];
    for (i, &b) in bytes.iter().enumerate() {
        match buf.get_mut(i) {
            Some(slot) => *slot = b,
            None if b == fill => {}
            None => bail!("integer of {} bytes does not fit 64 bits", bytes.len()),
        }
    }
    let v = i64::from_le_bytes(buf);
    if bytes.len() > 8 && (v < 0) != negative {
        bail!("integer of {} bytes does not fit 64 bits", bytes.len());
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list that contains itself (`l = []; l.append(l)`, through the memo) and a dict that
    /// holds itself (through DUP) are freed when the machine is: no leak (the fuzzer's finding).
    #[test]
    fn self_referencing_containers_are_freed() {
        for pickle in [
            &b"\x80\x02]q\x00h\x00a."[..],
            &b"\x80\x02}q\x00X\x01\x00\x00\x00kh\x00s."[..],
        ] {
            let weak = {
                let mut none = NoPersistent;
                let mut vm = Machine::new(pickle, &mut none);
                let root = vm.run().unwrap();
                let weak = match &root {
                    Obj::List(l) => WeakObj::List(Rc::downgrade(l)),
                    Obj::Dict(d) => WeakObj::Dict(Rc::downgrade(d)),
                    other => panic!("{}", other.type_name()),
                };
                dispose(root);
                weak
            };
            assert!(weak.gone(), "the container outlived its machine");
        }
    }

    enum WeakObj {
        List(std::rc::Weak<RefCell<Vec<Obj>>>),
        Dict(std::rc::Weak<RefCell<DictObj>>),
    }

    impl WeakObj {
        fn gone(&self) -> bool {
            match self {
                WeakObj::List(w) => w.upgrade().is_none(),
                WeakObj::Dict(w) => w.upgrade().is_none(),
            }
        }
    }

    fn run(p: &[u8]) -> R<Value> {
        unpickle(p, &mut NoPersistent)
    }

    #[test]
    fn scalars_containers_and_the_memo() {
        // pickle.dumps({'a': [1, -2, 3.5, True, None], 'b': (b'xy', 'z'), 7: 2**40}, protocol=2)
        // written by hand: the opcodes are the ones CPython emits.
        let mut p =
            b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02(K\x01J\xfe\xff\xff\xffG".to_vec();
        p.extend_from_slice(&3.5f64.to_be_bytes());
        p.extend_from_slice(b"\x88Ne");
        p.extend_from_slice(b"X\x01\x00\x00\x00bC\x02xyX\x01\x00\x00\x00z\x86K\x07\x8a\x06\x00\x00\x00\x00\x00\x01u.");
        let v = run(&p).unwrap();
        let Value::Dict(d) = v else { panic!("{v:?}") };
        assert!(!d.ordered);
        assert_eq!(d.entries.len(), 3);
        match &d.entries[0] {
            (Value::Str(k), Value::List(items)) if k == "a" => {
                assert!(matches!(
                    items[..],
                    [
                        Value::Int(1),
                        Value::Int(-2),
                        Value::Float(f),
                        Value::Bool(true),
                        Value::None
                    ] if f == 3.5
                ));
            }
            other => panic!("{other:?}"),
        }
        match &d.entries[1] {
            (Value::Str(k), Value::Tuple(items)) if k == "b" => match &items[..] {
                [Value::Bytes(b), Value::Str(z)] => {
                    assert_eq!(b, b"xy");
                    assert_eq!(z, "z");
                }
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            d.entries[2],
            (Value::Int(7), Value::Int(v)) if v == 1 << 40
        ));
    }

    #[test]
    fn a_shared_list_appears_wherever_it_is_referenced() {
        // l = [1]; pickle.dumps((l, l), protocol=2)
        let v = run(b"\x80\x02]q\x00K\x01ah\x00\x86q\x01.").unwrap();
        let Value::Tuple(items) = v else {
            panic!("{v:?}")
        };
        assert!(
            matches!(&items[..], [Value::List(a), Value::List(b)] if a.len() == 1 && b.len() == 1)
        );
    }

    #[test]
    fn globals_may_be_named_but_not_called() {
        let v = run(b"\x80\x02cnumpy\ndtype\nq\x00.").unwrap();
        assert!(
            matches!(v, Value::Global(ref g) if g == "numpy.dtype"),
            "{v:?}"
        );
        let Fail(msg) = run(b"\x80\x02cos\nsystem\nX\x02\x00\x00\x00ls\x85R.").unwrap_err();
        assert!(msg.contains("unsupported global os.system"), "{msg}");
    }

    #[test]
    fn self_references_and_huge_sharing_are_refused() {
        // l = []; l.append(l)
        let Fail(msg) = run(b"\x80\x02]q\x00h\x00a.").unwrap_err();
        assert!(msg.contains("nested"), "{msg}");
        // t0 = (); t(k+1) = (t(k), t(k)) for 30 levels: 2^30 leaves, shared through the memo.
        let mut p2 = b"\x80\x02)".to_vec();
        for k in 0u8..30 {
            p2.extend_from_slice(&[b'q', k, b'0', b'h', k, b'h', k, 0x86]);
        }
        p2.push(b'.');
        let Fail(msg) = run(&p2).unwrap_err();
        assert!(msg.contains("values"), "{msg}");
    }

    #[test]
    fn broken_pickles_are_errors() {
        for (p, word) in [
            (&b"\x80\x02"[..], "STOP"),
            (b"\x80\x02I1\n.", "0x49"),
            (b"\x80\x06N.", "protocol"),
            (b"\x80\x02h\x05.", "memo"),
            (b"\x80\x02s.", "empty stack"),
            (b"\x80\x02Q.", "empty stack"),
            (b"\x80\x02NQ.", "persistent"),
            (b"\x80\x02X\xff\x00\x00\x00ab.", "truncated"),
            (
                b"\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.",
                "64 bits",
            ),
            (b"\x80\x02NNb.", "BUILD on None"),
        ] {
            let Fail(msg) = run(p).unwrap_err();
            assert!(msg.contains(word), "{p:?}: {msg}");
        }
    }

    /// BINUNICODE of `s`.
    fn str_op(s: &str) -> Vec<u8> {
        let len = u32::try_from(s.len()).unwrap().to_le_bytes();
        [&b"X"[..], &len, s.as_bytes()].concat()
    }

    /// numpy's `__reduce__` of one array, written by hand: `_reconstruct(ndarray, (0,), b'b')`,
    /// memoized as 0, then BUILD with `(1, shape, dtype(code) with byte order `order`, fortran,
    /// data)`; no STOP.
    fn np_array(code: &str, order: &str, shape: &[u8], fortran: bool, data: &[u8]) -> Vec<u8> {
        let mut p = b"\x80\x03cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85C\x01b\x87Rq\x00(K\x01("
            .to_vec();
        for &d in shape {
            p.extend([b'K', d]);
        }
        p.extend(b"tcnumpy\ndtype\n");
        p.extend(str_op(code));
        p.extend(b"\x89\x88\x87R(K\x03");
        p.extend(str_op(order));
        p.extend(b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb");
        p.push(if fortran { 0x88 } else { 0x89 });
        p.push(b'B');
        p.extend(u32::try_from(data.len()).unwrap().to_le_bytes());
        p.extend(data);
        p.extend(b"tb");
        p
    }

    fn tensor(p: &[u8]) -> Tensor {
        match run(p) {
            Ok(Value::Tensor(t)) => t,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hand_written_numpy_arrays() {
        // Big-endian int16 0x0102 and 0xfffe.
        let mut p = np_array("i2", ">", &[2], false, &[0x01, 0x02, 0xff, 0xfe]);
        p.push(b'.');
        let t = tensor(&p);
        assert_eq!(t.kind(), Kind::Int16);
        assert_eq!(Vec::<i64>::try_from(&t).unwrap(), [258, -2]);
        // Fortran-order uint8 (2, 2) stored column by column: 1, 3, 2, 4.
        let mut p = np_array("u1", "|", &[2, 2], true, &[1, 3, 2, 4]);
        p.push(b'.');
        let t = tensor(&p);
        assert_eq!(t.size(), [2, 2]);
        assert_eq!(Vec::<i64>::try_from(t.reshape([-1])).unwrap(), [1, 2, 3, 4]);
        // Any nonzero byte is true.
        let mut p = np_array("b1", "|", &[3], false, &[0, 2, 1]);
        p.push(b'.');
        let t = tensor(&p);
        assert_eq!(t.kind(), Kind::Bool);
        assert_eq!(Vec::<bool>::try_from(&t).unwrap(), [false, true, true]);
        // The memo holds the array _reconstruct made; BUILD fills that same array.
        let mut p = np_array("f8", "<", &[], false, &2.5f64.to_le_bytes());
        p.extend(b"h\x00\x86.");
        let Ok(Value::Tuple(items)) = run(&p) else {
            panic!()
        };
        for item in &items {
            let Value::Tensor(t) = item else {
                panic!("{item:?}")
            };
            assert_eq!(t.size(), Vec::<i64>::new());
            assert_eq!(t.double_value(&[]), 2.5);
        }
        // A dtype on its own reads as its name.
        let v = run(b"\x80\x03cnumpy\ndtype\nX\x02\x00\x00\x00f4\x85R.").unwrap();
        assert!(matches!(v, Value::Dtype(ref d) if d == "=f4"), "{v:?}");
        // Protocol 2's bytes: latin-1 text through _codecs.encode ('\u{ff}' is one byte).
        let v = run(
            b"\x80\x02c_codecs\nencode\nX\x03\x00\x00\x00a\xc3\xbfX\x06\x00\x00\x00latin1\x86R.",
        )
        .unwrap();
        assert!(matches!(v, Value::Bytes(ref b) if b == b"a\xff"), "{v:?}");
    }

    #[test]
    fn malformed_numpy_arrays_are_errors() {
        let with_stop = |mut p: Vec<u8>| {
            p.push(b'.');
            p
        };
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                with_stop(np_array("f4", "<", &[3], false, &[0; 11])),
                "numpy array of shape [3] and dtype <f4: needs 12 bytes, the data has 11",
            ),
            (
                with_stop(np_array("f8", "<", &[2, 3], true, &[0; 40])),
                "shape [2, 3] and dtype <f8 in Fortran order: needs 48 bytes",
            ),
            (
                with_stop(np_array("f8", "?", &[1], false, &[0; 8])),
                "unknown numpy byte order",
            ),
            (
                with_stop(np_array("u2", "<", &[1], false, &[0; 2])),
                "numpy dtype u2 is not supported",
            ),
            (
                b"\x80\x03cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85C\x01b\x87R."
                    .to_vec(),
                "without its data",
            ),
            (b"\x80\x03cnumpy\nndarray\n)R.".to_vec(), "can only be named"),
            (
                b"\x80\x03cnumpy._core.numeric\n_frombuffer\n(C\x00cnumpy\ndtype\nX\x02\x00\x00\x00f8\x85R)X\x01\x00\x00\x00AtR."
                    .to_vec(),
                "_frombuffer with order \"A\"",
            ),
            (
                b"\x80\x02c_codecs\nencode\nX\x02\x00\x00\x00\xc4\x80X\x06\x00\x00\x00latin1\x86R."
                    .to_vec(),
                "non-latin-1",
            ),
            (b"\x80\x02c__builtin__\nbytes\nK\x01\x85R.".to_vec(), "bytes with arguments"),
        ];
        for (p, word) in cases {
            let Fail(msg) = run(&p).unwrap_err();
            assert!(msg.contains(word), "`{word}` not in: {msg}");
        }
        // A shape whose byte count overflows is refused before anything is allocated.
        let mut p = np_array("f8", "<", &[], false, &[]);
        let at = p.windows(3).position(|w| w == b"K\x01(").unwrap() + 3;
        p.splice(
            at..at,
            b"J\xff\xff\xff\x7fJ\xff\xff\xff\x7fJ\xff\xff\xff\x7f"
                .iter()
                .copied(),
        );
        p.push(b'.');
        let Fail(msg) = run(&p).unwrap_err();
        assert!(msg.contains("overflows"), "{msg}");
    }
}
