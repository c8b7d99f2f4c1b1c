//! A reader of `torch.save` zip archives (the default format of PyTorch ≥ 1.6), with a small
//! pickle virtual machine of its own.
//!
//! libtorch's `_load_parameters` (behind `Tensor::loadz_multi`) only accepts a plain `dict` at the
//! top of `data.pkl`; `torch.save(model.state_dict(), path)` writes a `collections.OrderedDict`
//! with a `_metadata` attribute, which it refuses. This module reads such archives directly:
//!
//! * the archive holds `<name>/data.pkl` (the pickle), `<name>/data/<key>` (the raw little-endian
//!   bytes of each storage), and optionally `<name>/byteorder` (must be `little`);
//! * `data.pkl` is run on a pickle machine that knows the opcodes of protocol 2 that `torch.save`
//!   emits and the few globals a state_dict needs (`collections.OrderedDict`,
//!   `torch._utils._rebuild_tensor_v2`, `torch._utils._rebuild_parameter`, the storage types);
//! * persistent ids `('storage', <storage type>, key, location, numel)` name the storages, which
//!   are read once each (views of one storage share it) and loaded on the CPU;
//! * the result must be a dict; nested dicts are flattened with `.` between the keys, and leaves
//!   that are not tensors are skipped.
//!
//! Anything else (a file that is not a zip, a missing `data.pkl`, a truncated storage, an unknown
//! opcode or global, a big-endian archive) is [`Error::Weights`], never a panic.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::rc::Rc;

use tch::{Kind, Tensor};

use crate::weights::NamedTensors;
use crate::{Error, Result};

/// Reads every tensor of a `torch.save` zip archive (a state_dict, an `OrderedDict` or nested
/// dicts of tensors) onto the CPU, named by their keys joined with `.`.
pub fn read_torch_state_dict(path: &Path) -> Result<NamedTensors> {
    read(path).map_err(|Fail(msg)| Error::Weights {
        path: path.display().to_string(),
        msg,
    })
}

/// An internal failure: the message of the [`Error::Weights`] it becomes.
struct Fail(String);

impl From<tch::TchError> for Fail {
    fn from(e: tch::TchError) -> Self {
        Fail(format!("libtorch: {e}"))
    }
}

type R<T> = std::result::Result<T, Fail>;

macro_rules! bail {
    ($($arg:tt)*) => {
        return Err(Fail(format!($($arg)*)))
    };
}

/// Deepest nesting of dicts that is flattened (guards against self-referencing pickles).
const MAX_DEPTH: usize = 64;
/// Most dict entries visited while flattening (guards against exponentially shared structures).
const MAX_VISITS: usize = 1 << 24;

fn read(path: &Path) -> R<NamedTensors> {
    if cfg!(target_endian = "big") {
        bail!("reading torch.save archives needs a little-endian host");
    }
    let file = File::open(path).map_err(|e| Fail(format!("cannot open: {e}")))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| {
        Fail(format!(
            "not a torch.save zip archive ({e}); the legacy non-zip format of PyTorch < 1.6 is \
             not supported"
        ))
    })?;
    let prefix = archive
        .file_names()
        .filter_map(|n| n.strip_suffix("data.pkl"))
        .find(|p| p.is_empty() || (p.ends_with('/') && p.matches('/').count() == 1))
        .map(str::to_string)
        .ok_or_else(|| Fail("no data.pkl in the archive".into()))?;
    let byteorder_name = format!("{prefix}byteorder");
    if archive.file_names().any(|n| n == byteorder_name) {
        let order = read_entry(&mut archive, &byteorder_name, 64)?;
        match String::from_utf8_lossy(&order).trim() {
            "little" => {}
            "big" => bail!("big-endian archives are not supported"),
            other => bail!("unknown byteorder {other:?}"),
        }
    }
    let pickle = read_entry(&mut archive, &format!("{prefix}data.pkl"), usize::MAX)?;
    let mut vm = Machine {
        reader: Reader {
            data: &pickle,
            pos: 0,
        },
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
        storages: Storages {
            archive,
            prefix,
            loaded: HashMap::new(),
        },
    };
    let root = vm.run()?;
    let mut out = NamedTensors::new();
    let flat = match &root {
        Value::Dict(_) => flatten(&root, "", &mut out, 0, &mut 0),
        other => Err(Fail(format!(
            "data.pkl holds {}, not a dict of tensors",
            other.type_name()
        ))),
    };
    dispose(root);
    flat.map(|()| out)
}

/// Reads a whole archive entry; `limit` bounds the bytes read.
fn read_entry(archive: &mut zip::ZipArchive<File>, name: &str, limit: usize) -> R<Vec<u8>> {
    let entry = archive
        .by_name(name)
        .map_err(|e| Fail(format!("archive entry {name}: {e}")))?;
    let size = entry.size();
    let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(0).min(limit).min(1 << 26));
    entry
        .take(u64::try_from(limit).unwrap_or(u64::MAX))
        .read_to_end(&mut buf)
        .map_err(|e| Fail(format!("{name}: {e}")))?;
    Ok(buf)
}

/// A Python callable or class named by GLOBAL / STACK_GLOBAL.
#[derive(Debug, Clone, PartialEq)]
enum Global {
    OrderedDict,
    RebuildTensorV2,
    RebuildParameter,
    RebuildParameterWithState,
    RebuildFromTypeV2,
    TorchSize,
    /// A storage class (`torch.FloatStorage`, …, `torch.UntypedStorage` as bytes).
    StorageType(Kind),
    Other(String),
}

impl Global {
    fn resolve(module: &str, name: &str) -> Global {
        let storage = |kind| Global::StorageType(kind);
        match (module, name) {
            ("collections", "OrderedDict") => Global::OrderedDict,
            ("torch._utils", "_rebuild_tensor_v2") => Global::RebuildTensorV2,
            ("torch._utils", "_rebuild_parameter") => Global::RebuildParameter,
            ("torch._utils", "_rebuild_parameter_with_state") => Global::RebuildParameterWithState,
            ("torch._tensor", "_rebuild_from_type_v2") => Global::RebuildFromTypeV2,
            ("torch", "Size") => Global::TorchSize,
            ("torch", "FloatStorage") => storage(Kind::Float),
            ("torch", "DoubleStorage") => storage(Kind::Double),
            ("torch", "HalfStorage") => storage(Kind::Half),
            ("torch", "BFloat16Storage") => storage(Kind::BFloat16),
            ("torch", "LongStorage") => storage(Kind::Int64),
            ("torch", "IntStorage") => storage(Kind::Int),
            ("torch", "ShortStorage") => storage(Kind::Int16),
            ("torch", "CharStorage") => storage(Kind::Int8),
            ("torch", "ByteStorage") => storage(Kind::Uint8),
            ("torch", "BoolStorage") => storage(Kind::Bool),
            ("torch", "ComplexFloatStorage") => storage(Kind::ComplexFloat),
            ("torch", "ComplexDoubleStorage") => storage(Kind::ComplexDouble),
            ("torch" | "torch.storage", "UntypedStorage") => storage(Kind::Uint8),
            _ => Global::Other(format!("{module}.{name}")),
        }
    }
}

/// A storage named by a persistent id, not yet read.
#[derive(Debug)]
struct StorageRef {
    kind: Kind,
    key: String,
    numel: usize,
}

/// A Python value on the machine's stack. Lists and dicts are shared and mutable, as in Python
/// (the memo holds the same object as the stack).
#[derive(Clone)]
enum Value {
    None,
    // Bools, floats and bytes are never needed by a state_dict: only their kind is kept.
    Bool,
    Int(i64),
    Float,
    Str(Rc<str>),
    Bytes,
    Tuple(Rc<[Value]>),
    List(Rc<RefCell<Vec<Value>>>),
    Dict(Rc<RefCell<Vec<(Value, Value)>>>),
    Global(Rc<Global>),
    Storage(Rc<StorageRef>),
    Tensor(Rc<Tensor>),
}

impl Value {
    fn type_name(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool => "a bool",
            Value::Int(_) => "an int",
            Value::Float => "a float",
            Value::Str(_) => "a str",
            Value::Bytes => "bytes",
            Value::Tuple(_) => "a tuple",
            Value::List(_) => "a list",
            Value::Dict(_) => "a dict",
            Value::Global(_) => "a global",
            Value::Storage(_) => "a storage",
            Value::Tensor(_) => "a tensor",
        }
    }

    fn new_dict() -> Value {
        Value::Dict(Rc::new(RefCell::new(Vec::new())))
    }
}

/// Drops a value without recursion, so that a deeply nested pickle cannot overflow the stack:
/// containers owned only here are emptied onto a work list before they are dropped. (Shared
/// containers only lose a reference; self-referencing ones are leaked, as without a collector.)
fn dispose(value: Value) {
    let mut work = vec![value];
    while let Some(v) = work.pop() {
        match v {
            Value::Tuple(mut items) => {
                if let Some(items) = Rc::get_mut(&mut items) {
                    work.extend(items.iter_mut().map(|x| std::mem::replace(x, Value::None)));
                }
            }
            Value::List(mut items) => {
                if let Some(items) = Rc::get_mut(&mut items) {
                    work.append(items.get_mut());
                }
            }
            Value::Dict(mut items) => {
                if let Some(items) = Rc::get_mut(&mut items) {
                    for (k, v) in items.get_mut().drain(..) {
                        work.push(k);
                        work.push(v);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The storages of the archive, each read once.
struct Storages {
    archive: zip::ZipArchive<File>,
    prefix: String,
    loaded: HashMap<String, (Kind, Tensor)>,
}

impl Storages {
    /// The storage as a 1-D CPU tensor of `numel` elements.
    fn get(&mut self, s: &StorageRef) -> R<Tensor> {
        if let Some((kind, t)) = self.loaded.get(&s.key) {
            if *kind != s.kind || t.numel() != s.numel {
                bail!(
                    "storage {} is used as {:?} × {} and as {:?} × {}",
                    s.key,
                    kind,
                    t.numel(),
                    s.kind,
                    s.numel
                );
            }
            return Ok(t.shallow_clone());
        }
        let name = format!("{}data/{}", self.prefix, s.key);
        let nbytes = s
            .numel
            .checked_mul(s.kind.elt_size_in_bytes())
            .ok_or_else(|| Fail(format!("storage {}: size overflows", s.key)))?;
        let bytes = read_entry(&mut self.archive, &name, nbytes.saturating_add(1))?;
        if bytes.len() < nbytes {
            bail!(
                "storage {name} is truncated: {} bytes, expected {nbytes} ({} × {:?})",
                bytes.len(),
                s.numel,
                s.kind
            );
        }
        let numel = i64::try_from(s.numel)
            .map_err(|_| Fail(format!("storage {}: too many elements", s.key)))?;
        let data = bytes.get(..nbytes).unwrap_or_default();
        let t = if s.kind == Kind::Bool {
            // Any nonzero byte is true; never hand libtorch a bool byte other than 0 or 1.
            Tensor::f_from_data_size(data, &[numel], Kind::Uint8)?.f_ne(0)?
        } else {
            Tensor::f_from_data_size(data, &[numel], s.kind)?
        };
        self.loaded
            .insert(s.key.clone(), (s.kind, t.shallow_clone()));
        Ok(t)
    }
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
            .ok_or_else(|| Fail(format!("data.pkl is truncated at byte {}", self.pos)))?;
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

    /// A `\n`-terminated line (GLOBAL's arguments), without the `\n`.
    fn line(&mut self) -> R<&'a str> {
        let rest = self.data.get(self.pos..).unwrap_or_default();
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| Fail("data.pkl: unterminated GLOBAL".into()))?;
        let line = self.take(n)?;
        self.take(1)?;
        std::str::from_utf8(line).map_err(|_| Fail("data.pkl: GLOBAL name is not UTF-8".into()))
    }

    fn utf8(&mut self, n: usize) -> R<Rc<str>> {
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes).map(Rc::from).map_err(|_| {
            Fail(format!(
                "data.pkl: invalid UTF-8 string at byte {}",
                self.pos
            ))
        })
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
    pub const BINBYTES: u8 = b'B';
    pub const SHORT_BINBYTES: u8 = b'C';
    pub const NONE: u8 = b'N';
    pub const NEWTRUE: u8 = 0x88;
    pub const NEWFALSE: u8 = 0x89;
    pub const BINPERSID: u8 = b'Q';
}

/// The pickle machine: a stack, the MARK positions and the memo.
struct Machine<'a> {
    reader: Reader<'a>,
    stack: Vec<Value>,
    marks: Vec<usize>,
    memo: HashMap<u32, Value>,
    storages: Storages,
}

impl Drop for Machine<'_> {
    fn drop(&mut self) {
        for v in self.stack.drain(..) {
            dispose(v);
        }
        for (_, v) in self.memo.drain() {
            dispose(v);
        }
    }
}

impl Machine<'_> {
    fn pop(&mut self) -> R<Value> {
        self.stack
            .pop()
            .ok_or_else(|| Fail("data.pkl: pop from an empty stack".into()))
    }

    fn top(&self) -> R<&Value> {
        self.stack
            .last()
            .ok_or_else(|| Fail("data.pkl: empty stack".into()))
    }

    /// The values pushed since the last MARK, which is removed.
    fn pop_mark(&mut self) -> R<Vec<Value>> {
        let mark = self
            .marks
            .pop()
            .ok_or_else(|| Fail("data.pkl: no MARK on the stack".into()))?;
        if mark > self.stack.len() {
            bail!("data.pkl: the stack fell below its MARK");
        }
        Ok(self.stack.split_off(mark))
    }

    fn pop_n(&mut self, n: usize) -> R<Vec<Value>> {
        let at = self
            .stack
            .len()
            .checked_sub(n)
            .ok_or_else(|| Fail("data.pkl: pop from an empty stack".into()))?;
        Ok(self.stack.split_off(at))
    }

    fn push_tuple(&mut self, items: Vec<Value>) {
        self.stack.push(Value::Tuple(Rc::from(items)));
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
            .ok_or_else(|| Fail(format!("data.pkl: memo entry {idx} is missing")))?;
        self.stack.push(v);
        Ok(())
    }

    fn set_items(&mut self, items: Vec<Value>) -> R<()> {
        let target = self.top().map(Value::type_name);
        let Some(Value::Dict(dict)) = self.stack.last().filter(|_| items.len() % 2 == 0) else {
            dispose(Value::Tuple(Rc::from(items)));
            bail!(
                "data.pkl: SETITEM(S) of an odd number of values or on {}",
                target?
            );
        };
        let mut dict = dict.borrow_mut();
        let mut it = items.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            dict.push((k, v));
        }
        Ok(())
    }

    fn append(&mut self, items: Vec<Value>) -> R<()> {
        let Some(Value::List(list)) = self.stack.last() else {
            dispose(Value::Tuple(Rc::from(items)));
            bail!("data.pkl: APPEND(S) on {}", self.top()?.type_name());
        };
        list.borrow_mut().extend(items);
        Ok(())
    }

    /// Runs the pickle to its STOP and returns the object it builds.
    fn run(&mut self) -> R<Value> {
        loop {
            let at = self.reader.pos;
            let code = self
                .reader
                .u8()
                .map_err(|_| Fail("data.pkl ends without STOP".into()))?;
            match code {
                op::PROTO => {
                    let v = self.reader.u8()?;
                    if v > 5 {
                        bail!("data.pkl: unsupported pickle protocol {v}");
                    }
                }
                op::FRAME => {
                    self.reader.take(8)?;
                }
                op::STOP => return self.pop(),
                op::MARK => self.marks.push(self.stack.len()),
                op::EMPTY_DICT => self.stack.push(Value::new_dict()),
                op::EMPTY_LIST => self
                    .stack
                    .push(Value::List(Rc::new(RefCell::new(Vec::new())))),
                op::EMPTY_TUPLE => self.push_tuple(Vec::new()),
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
                        .map_err(|_| Fail("data.pkl: memo overflows".into()))?;
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
                        .push(Value::Global(Rc::new(Global::resolve(module, name))));
                }
                op::STACK_GLOBAL => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    let (Value::Str(module), Value::Str(name)) = (&module, &name) else {
                        dispose(module);
                        dispose(name);
                        bail!("data.pkl: STACK_GLOBAL needs two strings");
                    };
                    self.stack
                        .push(Value::Global(Rc::new(Global::resolve(module, name))));
                }
                op::REDUCE | op::NEWOBJ => {
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    let (callable, args) = match (callable, args) {
                        (Value::Global(callable), Value::Tuple(args)) => (callable, args),
                        (callable, args) => {
                            let msg = format!(
                                "data.pkl: call of {} with {} as arguments",
                                callable.type_name(),
                                args.type_name()
                            );
                            dispose(callable);
                            dispose(args);
                            return Err(Fail(msg));
                        }
                    };
                    let v = self.call(&callable, &args);
                    dispose(Value::Tuple(args));
                    self.stack.push(v?);
                }
                op::BUILD => {
                    let state = self.pop()?;
                    dispose(state);
                    match self.top()? {
                        // OrderedDict's `_metadata` (state_dict), a tensor's Python attributes.
                        Value::Dict(_) | Value::Tensor(_) => {}
                        other => bail!("data.pkl: BUILD on {}", other.type_name()),
                    }
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
                    self.stack.push(Value::Int(i64::from(v)));
                }
                op::BININT1 => {
                    let v = self.reader.u8()?;
                    self.stack.push(Value::Int(i64::from(v)));
                }
                op::BININT2 => {
                    let v = u16::from_le_bytes(self.reader.array()?);
                    self.stack.push(Value::Int(i64::from(v)));
                }
                op::LONG1 => {
                    let n = usize::from(self.reader.u8()?);
                    let bytes = self.reader.take(n)?;
                    self.stack.push(Value::Int(long_le(bytes)?));
                }
                op::BINFLOAT => {
                    self.reader.take(8)?;
                    self.stack.push(Value::Float);
                }
                op::BINUNICODE => {
                    let n = self.reader.len_u32()?;
                    let s = self.reader.utf8(n)?;
                    self.stack.push(Value::Str(s));
                }
                op::SHORT_BINUNICODE => {
                    let n = usize::from(self.reader.u8()?);
                    let s = self.reader.utf8(n)?;
                    self.stack.push(Value::Str(s));
                }
                op::BINBYTES | op::SHORT_BINBYTES => {
                    let n = if code == op::BINBYTES {
                        self.reader.len_u32()?
                    } else {
                        usize::from(self.reader.u8()?)
                    };
                    self.reader.take(n)?;
                    self.stack.push(Value::Bytes);
                }
                op::NONE => self.stack.push(Value::None),
                op::NEWTRUE | op::NEWFALSE => self.stack.push(Value::Bool),
                op::BINPERSID => {
                    let pid = self.pop()?;
                    let storage = persistent_load(&pid);
                    dispose(pid);
                    let storage = storage?;
                    self.stack.push(Value::Storage(Rc::new(storage)));
                }
                other => bail!(
                    "data.pkl: unsupported pickle opcode 0x{other:02x} ({:?}) at byte {at}",
                    char::from(other)
                ),
            }
        }
    }

    /// Calls a global with positional arguments (REDUCE, NEWOBJ).
    fn call(&mut self, callable: &Global, args: &[Value]) -> R<Value> {
        match callable {
            Global::OrderedDict => match args {
                [] => Ok(Value::new_dict()),
                [Value::List(_) | Value::Tuple(_)] => {
                    let items: Vec<Value> = match args.first() {
                        Some(Value::List(l)) => l.borrow().clone(),
                        Some(Value::Tuple(t)) => t.to_vec(),
                        _ => Vec::new(),
                    };
                    let mut entries = Vec::with_capacity(items.len());
                    for item in items {
                        let Value::Tuple(kv) = &item else {
                            bail!("data.pkl: OrderedDict item is {}", item.type_name());
                        };
                        let [k, v] = &kv[..] else {
                            bail!("data.pkl: OrderedDict item of {} values", kv.len());
                        };
                        entries.push((k.clone(), v.clone()));
                    }
                    Ok(Value::Dict(Rc::new(RefCell::new(entries))))
                }
                _ => bail!("data.pkl: OrderedDict called with unsupported arguments"),
            },
            Global::RebuildTensorV2 => match args {
                [storage, offset, size, stride, _requires_grad, _hooks]
                | [storage, offset, size, stride, _requires_grad, _hooks, _] => {
                    self.rebuild_tensor(storage, offset, size, stride)
                }
                _ => bail!("data.pkl: _rebuild_tensor_v2 with {} arguments", args.len()),
            },
            Global::RebuildParameter | Global::RebuildParameterWithState => match args {
                [data @ Value::Tensor(_), _, _] | [data @ Value::Tensor(_), _, _, _] => {
                    Ok(data.clone())
                }
                _ => bail!("data.pkl: _rebuild_parameter with unsupported arguments"),
            },
            Global::RebuildFromTypeV2 => match args {
                [Value::Global(func), _new_type, Value::Tuple(func_args), _state]
                    if **func != Global::RebuildFromTypeV2 =>
                {
                    self.call(func, func_args)
                }
                _ => bail!("data.pkl: _rebuild_from_type_v2 with unsupported arguments"),
            },
            Global::TorchSize => match args {
                [t @ Value::Tuple(_)] => Ok(t.clone()),
                _ => bail!("data.pkl: torch.Size with unsupported arguments"),
            },
            Global::StorageType(kind) => {
                bail!("data.pkl: construction of a {kind:?} storage is not supported")
            }
            Global::Other(name) => bail!("data.pkl: unsupported global {name}"),
        }
    }

    /// `_rebuild_tensor_v2`: the strided view of a storage, made contiguous.
    fn rebuild_tensor(
        &mut self,
        storage: &Value,
        offset: &Value,
        size: &Value,
        stride: &Value,
    ) -> R<Value> {
        let Value::Storage(storage) = storage else {
            bail!("data.pkl: tensor rebuilt from {}", storage.type_name());
        };
        let Value::Int(offset) = *offset else {
            bail!("data.pkl: tensor storage offset is {}", offset.type_name());
        };
        let size = int_tuple(size, "size")?;
        let stride = int_tuple(stride, "stride")?;
        if size.len() != stride.len() {
            bail!("data.pkl: tensor size {size:?} and stride {stride:?} differ in rank");
        }
        if offset < 0 || size.iter().chain(&stride).any(|&v| v < 0) {
            bail!("data.pkl: negative tensor offset, size or stride");
        }
        // Every element must lie inside the storage: offset + Σ (size - 1) · stride < numel.
        let empty = size.contains(&0);
        let mut last = Some(offset);
        for (&n, &s) in size.iter().zip(&stride) {
            last = last.and_then(|l| (n.max(1) - 1).checked_mul(s).and_then(|d| l.checked_add(d)));
        }
        let numel = i64::try_from(storage.numel).ok();
        let inside = match (last, numel) {
            (Some(last), Some(numel)) => (empty && offset <= numel) || last < numel,
            _ => false,
        };
        if !inside {
            bail!(
                "data.pkl: tensor of size {size:?}, stride {stride:?}, offset {offset} lies \
                 outside its storage {} of {} elements",
                storage.key,
                storage.numel
            );
        }
        let base = self.storages.get(storage)?;
        let t = base
            .f_as_strided(size.as_slice(), stride.as_slice(), offset)?
            .f_contiguous()?;
        Ok(Value::Tensor(Rc::new(t)))
    }
}

/// A tuple of ints (a tensor's size or stride).
fn int_tuple(v: &Value, what: &str) -> R<Vec<i64>> {
    let Value::Tuple(items) = v else {
        bail!("data.pkl: tensor {what} is {}", v.type_name());
    };
    items
        .iter()
        .map(|i| match i {
            Value::Int(n) => Ok(*n),
            other => Err(Fail(format!(
                "data.pkl: tensor {what} holds {}",
                other.type_name()
            ))),
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
            None => bail!(
                "data.pkl: integer of {} bytes does not fit 64 bits",
                bytes.len()
            ),
        }
    }
    let v = i64::from_le_bytes(buf);
    if bytes.len() > 8 && (v < 0) != negative {
        bail!(
            "data.pkl: integer of {} bytes does not fit 64 bits",
            bytes.len()
        );
    }
    Ok(v)
}

/// `persistent_load` of torch.load: `('storage', storage type, key, location, numel)`.
fn persistent_load(pid: &Value) -> R<StorageRef> {
    let Value::Tuple(items) = pid else {
        bail!("data.pkl: persistent id is {}", pid.type_name());
    };
    match &items[..] {
        [Value::Str(tag), Value::Global(ty), Value::Str(key), _location, Value::Int(numel)]
            if &**tag == "storage" =>
        {
            let Global::StorageType(kind) = **ty else {
                bail!("data.pkl: unsupported storage type {ty:?}");
            };
            let numel = usize::try_from(*numel)
                .map_err(|_| Fail(format!("data.pkl: storage {key} has {numel} elements")))?;
            Ok(StorageRef {
                kind,
                key: key.to_string(),
                numel,
            })
        }
        _ => bail!("data.pkl: unsupported persistent id (expected ('storage', type, key, location, numel))"),
    }
}

/// Flattens a dict into `out`: tensors under their keys joined with `.`, nested dicts recursed
/// into, other values skipped. A key repeated in one dict keeps its last value, as in Python.
fn flatten(
    value: &Value,
    prefix: &str,
    out: &mut NamedTensors,
    depth: usize,
    visits: &mut usize,
) -> R<()> {
    let Value::Dict(dict) = value else {
        return Ok(());
    };
    if depth >= MAX_DEPTH {
        bail!("data.pkl: dicts nested deeper than {MAX_DEPTH} (a self-referencing dict?)");
    }
    let dict = dict.borrow();
    let mut seen = HashSet::new();
    for (k, v) in dict.iter().rev() {
        *visits += 1;
        if *visits > MAX_VISITS {
            bail!("data.pkl: more than {MAX_VISITS} dict entries");
        }
        let key = match k {
            Value::Str(s) => s.to_string(),
            Value::Int(i) => i.to_string(),
            _ => continue,
        };
        if !seen.insert(key.clone()) {
            continue;
        }
        let name = if prefix.is_empty() {
            key
        } else {
            format!("{prefix}.{key}")
        };
        match v {
            Value::Tensor(t) => {
                if out.contains_key(&name) {
                    bail!("two tensors are named {name:?} once nested keys are joined");
                }
                out.insert(name, t.shallow_clone());
            }
            Value::Dict(_) => flatten(v, &name, out, depth + 1, visits)?,
            _ => {}
        }
    }
    Ok(())
}
