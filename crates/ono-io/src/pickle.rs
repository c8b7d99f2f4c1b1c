//! A small pickle virtual machine, for reading what Python pickled without running Python code.
//!
//! It knows the opcodes of protocols 2 to 5 that `torch.save` and `pickle.dump` emit for
//! containers, numbers, strings and calls (not the text opcodes of protocol 0/1), and the few
//! globals that rebuild tensors from a `torch.save` archive. Every other global may be named
//! (it becomes [`Value::Global`]) but not called: a pickle cannot make this reader run anything.
//!
//! The result is a neutral tree, [`Value`]: Python's containers and scalars, plus tensors.
//! Storages (the raw data of tensors) come from the caller through [`Persistent`], which is how
//! [`crate::torch_save`] attaches the pickle to its zip archive.
//!
//! To teach the machine a new callable (numpy's `_reconstruct`, for GNOT's pickled arrays): a
//! variant of `Global`, its `(module, name)` in `Global::resolve`, its arguments in
//! `Machine::call` and, if Python sets its state with BUILD, its case in `Machine::build`; plus a
//! variant of [`Value`] (which is `#[non_exhaustive]` for that reason) if it builds a new kind of
//! object. The opcode loop does not change.
//!
//! Input is untrusted: every read is bounds-checked; containers shared through the memo are not
//! copied while the pickle runs; the tree handed out is at most [`MAX_DEPTH`] deep and
//! [`MAX_NODES`] large (a self-referencing list or exponentially shared tuples are refused, not
//! followed); and values are dropped without recursion, so a deeply nested pickle cannot overflow
//! the stack. Malformed input is an error, never a panic.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use tch::{Kind, Tensor};

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
    /// A tensor (or `nn.Parameter`, read as its data), contiguous, on the CPU.
    Tensor(Tensor),
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

/// For pickles that must not hold persistent ids.
#[cfg(test)]
pub(crate) struct NoPersistent;

#[cfg(test)]
impl Persistent for NoPersistent {
    fn load(&mut self, _pid: &Obj) -> R<Obj> {
        bail!("persistent ids are not supported here")
    }
}

/// Runs `pickle` to its STOP and returns the object it builds, as a tree.
pub(crate) fn unpickle(pickle: &[u8], persistent: &mut dyn Persistent) -> R<Value> {
    let mut vm = Machine {
        reader: Reader {
            data: pickle,
            pos: 0,
        },
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
        persistent,
    };
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
    /// Any other global, as `module.name`: it may be named, not called.
    Other(String),
}

impl Global {
    fn resolve(module: &str, name: &str) -> Global {
        let storage = Global::StorageType;
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
            Global::StorageType(kind) => format!("torch.{kind:?}Storage"),
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
        }
    }

    fn dict(entries: Vec<(Obj, Obj)>, ordered: bool) -> Obj {
        Obj::Dict(Rc::new(RefCell::new(DictObj { entries, ordered })))
    }
}

/// Drops a value without recursion, so that a deeply nested pickle cannot overflow the stack:
/// containers owned only here are emptied onto a work list before they are dropped. (Shared
/// containers only lose a reference; self-referencing ones are leaked, as without a collector.)
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
}

impl Drop for Machine<'_, '_> {
    fn drop(&mut self) {
        for v in self.stack.drain(..) {
            dispose(v);
        }
        for (_, v) in self.memo.drain() {
            dispose(v);
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
        let Some(Obj::Dict(dict)) = self.stack.last().filter(|_| items.len() % 2 == 0) else {
            dispose(Obj::Tuple(Rc::from(items)));
            bail!("SETITEM(S) of an odd number of values or on {}", target?);
        };
        let mut dict = dict.borrow_mut();
        let mut it = items.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            dict.entries.push((k, v));
        }
        Ok(())
    }

    fn append(&mut self, items: Vec<Obj>) -> R<()> {
        let Some(Obj::List(list)) = self.stack.last() else {
            dispose(Obj::Tuple(Rc::from(items)));
            bail!("APPEND(S) on {}", self.top()?.type_name());
        };
        list.borrow_mut().extend(items);
        Ok(())
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
                op::BINBYTES | op::SHORT_BINBYTES | op::BINBYTES8 => {
                    let n = match code {
                        op::BINBYTES => self.reader.len_u32()?,
                        op::BINBYTES8 => self.reader.len_u64()?,
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
    fn build(&mut self, _state: &Obj) -> R<()> {
        match self.top()? {
            // OrderedDict's `_metadata` (a state_dict), a tensor's Python attributes: neither
            // changes the data, so the state is dropped.
            Obj::Dict(_) | Obj::Tensor(_) => Ok(()),
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
            Global::Other(name) => bail!("unsupported global {name}"),
        }
    }
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
}
