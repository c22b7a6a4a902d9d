//! The values of the small abstract interpreter that builds models from source: constants,
//! symbolic tensors (per-sample shapes), layers, module/model objects and framework names.

use super::layer::{Params, Shape, Spec};
use std::rc::Rc;

pub use crate::step::Fw;

/// A value of the interpreter.
#[derive(Debug, Clone)]
pub enum Val {
    /// Not known statically; the index names the reason (see `Interp::reason`).
    Unknown(u32),
    Int(i128),
    Float(f64),
    Str(Rc<str>),
    Bool(bool),
    None,
    Tuple(Rc<Vec<Val>>),
    /// A mutable list (index into the list arena).
    List(usize),
    Tensor(usize),
    /// `x.shape` / `x.size()` of a tensor: the batch first, then the per-sample dimensions.
    Dims(usize),
    /// The batch size of the tensor being traced (`x.size(0)`).
    Batch,
    Layer(usize),
    Obj(usize),
    /// A function of the file (index into `PythonModel::functions`).
    Func(usize),
    /// A method bound to an object.
    Method(usize, usize),
    /// A class defined in the file (index into the interpreter's class table).
    Class(usize),
    /// A framework name: module, class or function (`torch.nn.Conv2d`).
    Q(Rc<str>),
    /// A framework method bound to a value (`x.view`, `model.fit`).
    BoundQ(Box<Val>, Rc<str>),
    /// `model.parameters()`.
    Params(usize),
    /// `super()` inside a method.
    Super,
    /// An optimizer created in the file.
    Optimizer(usize),
    /// A Hugging Face configuration (`GPT2Config(...)`).
    HfConfig(Rc<crate::zoo::hf::Config>),
}

impl Val {
    pub fn int(&self) -> Option<i128> {
        match self {
            Val::Int(i) => Some(*i),
            Val::Bool(b) => Some(*b as i128),
            Val::Float(f) if f.fract() == 0.0 && f.abs() < 1e18 => Some(*f as i128),
            _ => None,
        }
    }

    pub fn float(&self) -> Option<f64> {
        match self {
            Val::Int(i) => Some(*i as f64),
            Val::Float(f) => Some(*f),
            Val::Bool(b) => Some(*b as i64 as f64),
            _ => None,
        }
    }

    pub fn is_unknown(&self) -> bool {
        matches!(self, Val::Unknown(_))
    }

    pub fn str(&self) -> Option<&str> {
        match self {
            Val::Str(s) => Some(s),
            _ => None,
        }
    }

    /// A truth value, when known.
    pub fn truthy(&self) -> Option<bool> {
        match self {
            Val::Int(i) => Some(*i != 0),
            Val::Float(f) => Some(*f != 0.0),
            Val::Str(s) => Some(!s.is_empty()),
            Val::Bool(b) => Some(*b),
            Val::None => Some(false),
            Val::Tuple(t) => Some(!t.is_empty()),
            Val::Layer(_) | Val::Obj(_) | Val::Func(_) | Val::Class(_) => Some(true),
            _ => None,
        }
    }

    /// Same value, for merging the two branches of an unknown condition.
    pub fn same(&self, other: &Val) -> bool {
        match (self, other) {
            (Val::Int(a), Val::Int(b)) => a == b,
            (Val::Float(a), Val::Float(b)) => a == b,
            (Val::Str(a), Val::Str(b)) => a == b,
            (Val::Bool(a), Val::Bool(b)) => a == b,
            (Val::None, Val::None) | (Val::Batch, Val::Batch) | (Val::Super, Val::Super) => true,
            (Val::Tuple(a), Val::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.same(y))
            }
            (Val::List(a), Val::List(b))
            | (Val::Tensor(a), Val::Tensor(b))
            | (Val::Dims(a), Val::Dims(b))
            | (Val::Layer(a), Val::Layer(b))
            | (Val::Obj(a), Val::Obj(b))
            | (Val::Func(a), Val::Func(b))
            | (Val::Class(a), Val::Class(b))
            | (Val::Params(a), Val::Params(b))
            | (Val::Optimizer(a), Val::Optimizer(b)) => a == b,
            (Val::Method(a, b), Val::Method(c, d)) => a == c && b == d,
            (Val::Q(a), Val::Q(b)) => a == b,
            _ => false,
        }
    }
}

/// The arguments of a call, evaluated.
#[derive(Debug, Default)]
pub struct Args {
    pub pos: Vec<Val>,
    pub kw: Vec<(String, Val)>,
}

impl Args {
    /// The argument at position `i` or with keyword `name`.
    pub fn get(&self, i: usize, name: &str) -> Option<&Val> {
        self.kw
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
            .or_else(|| {
                if i == usize::MAX {
                    None
                } else {
                    self.pos.get(i)
                }
            })
    }

    /// A keyword-only argument.
    pub fn kw(&self, name: &str) -> Option<&Val> {
        self.get(usize::MAX, name)
    }

    pub fn int(&self, i: usize, name: &str, default: Option<u64>) -> Result<u64, String> {
        match self.get(i, name) {
            None | Some(Val::None) => default.ok_or_else(|| format!("`{name}` is missing")),
            Some(v) => v
                .int()
                .filter(|n| *n >= 0)
                .map(|n| n as u64)
                .ok_or_else(|| format!("`{name}` is not a constant")),
        }
    }

    pub fn opt_int(&self, i: usize, name: &str) -> Result<Option<u64>, String> {
        match self.get(i, name) {
            None | Some(Val::None) => Ok(None),
            Some(_) => self.int(i, name, None).map(Some),
        }
    }

    /// An int or a tuple of ints, expanded to `rank` entries.
    pub fn ints(
        &self,
        i: usize,
        name: &str,
        rank: usize,
        default: Option<u64>,
    ) -> Result<Vec<u64>, String> {
        match self.get(i, name) {
            None | Some(Val::None) => default
                .map(|d| vec![d; rank])
                .ok_or_else(|| format!("`{name}` is missing")),
            Some(v) => ints_of(v, rank).ok_or_else(|| format!("`{name}` is not a constant")),
        }
    }

    pub fn boolean(&self, i: usize, name: &str, default: bool) -> Result<bool, String> {
        match self.get(i, name) {
            None => Ok(default),
            Some(v) => v
                .truthy()
                .ok_or_else(|| format!("`{name}` is not a constant")),
        }
    }

    pub fn string(&self, i: usize, name: &str) -> Result<Option<String>, String> {
        match self.get(i, name) {
            None | Some(Val::None) => Ok(None),
            Some(Val::Str(s)) => Ok(Some(s.to_string())),
            Some(_) => Err(format!("`{name}` is not a constant string")),
        }
    }
}

/// An int or a tuple/list of ints, expanded to `rank` entries (a single int is repeated).
pub fn ints_of(v: &Val, rank: usize) -> Option<Vec<u64>> {
    match v {
        Val::Tuple(t) => {
            let out: Option<Vec<u64>> = t
                .iter()
                .map(|x| x.int().filter(|n| *n >= 0).map(|n| n as u64))
                .collect();
            let out = out?;
            if out.len() == 1 && rank > 1 {
                return Some(vec![out[0]; rank]);
            }
            (out.len() == rank || rank == 0).then_some(out)
        }
        _ => {
            let n = v.int().filter(|n| *n >= 0)? as u64;
            Some(vec![n; rank.max(1)])
        }
    }
}

/// A symbolic tensor: its per-sample shape and where it came from.
#[derive(Debug, Clone)]
pub struct Tensor {
    pub shape: Shape,
    /// Integer values (token ids): 8 bytes per element in PyTorch.
    pub int: bool,
    /// The application that produced it; `None` for model inputs.
    pub producer: Option<usize>,
}

/// One application of a layer or tensor operation.
#[derive(Debug, Clone)]
pub struct App {
    pub layer: Option<usize>,
    /// The class of the layer, or the operation (`F.relu`, `view`).
    pub op: Rc<str>,
    pub inputs: Vec<usize>,
    pub output: usize,
    /// Parameters the layer got at its first application.
    pub params: Params,
    /// The output shares storage with the input (views: `view`, `reshape`, `Flatten` in PyTorch).
    pub view: bool,
    /// A library model applied as a layer (its object): its layers are inlined.
    pub zoo: Option<usize>,
}

/// A layer built in the source.
#[derive(Debug, Clone)]
pub struct LayerDef {
    pub fw: Fw,
    /// The framework class (`Conv2D`, `Linear`).
    pub class: Rc<str>,
    pub spec: Result<Spec, String>,
    /// Keras name: `name=` or the automatic one (`conv2d_1`).
    pub name: String,
    /// Where it is created.
    pub span: (usize, usize),
    /// Parameters, once known (at creation for PyTorch, at first application for Keras).
    pub params: Option<Params>,
    /// Keras `trainable=False`.
    pub frozen: bool,
    /// PyTorch `inplace=True`: the output overwrites the input.
    pub inplace: bool,
    /// Keras `input_shape=` / `Input` in a Sequential.
    pub input_shape: Option<Shape>,
}

/// What an object is.
#[derive(Debug, Clone)]
pub enum ObjKind {
    /// An instance of a class of the file (`class Net(nn.Module)`).
    Instance { class: usize, fw: Option<Fw> },
    /// `keras.Sequential([...])` / `nn.Sequential(...)`.
    Sequential { fw: Fw, items: Vec<Val> },
    /// `nn.ModuleList([...])`.
    ModuleList { items: Vec<Val> },
    /// `keras.Model(inputs, outputs)`.
    Functional {
        inputs: Vec<usize>,
        outputs: Vec<usize>,
    },
    /// A library model (`torchvision.models.resnet50()`, `GPT2LMHeadModel(config)`).
    Zoo(Rc<crate::zoo::Arch>),
}

/// An optimizer: its class, and how many state tensors per parameter it keeps.
#[derive(Debug, Clone)]
pub struct Optimizer {
    pub name: String,
    /// `None` when not known (an unsupported optimizer).
    pub slots: Option<u64>,
    /// Bytes per state element when not the parameters' own (8-bit optimizers: 1).
    pub slot_bytes: Option<u64>,
    pub span: (usize, usize),
}

/// Facts gathered about a model object while interpreting the file.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Keras: shape given to `build()` or to the first layer.
    pub input_shape: Option<Shape>,
    /// An example input the model was called with (`model(torch.randn(1, 3, 32, 32))`,
    /// `summary(model, (3, 32, 32))`): its per-sample shape, integer-ness, and where.
    pub example: Option<(Shape, bool, (usize, usize))>,
    pub optimizer: Option<Optimizer>,
    /// `fit(...)` calls: the `batch_size=` value and its span, or the call span (default 32).
    pub fits: Vec<Fit>,
    /// `model.half()` / `.to(torch.bfloat16)`: bytes per parameter.
    pub param_bytes: Option<u64>,
    /// `compile(...)` was called.
    pub compiled: bool,
}

#[derive(Debug, Clone)]
pub struct Fit {
    /// `batch_size=` folded, with the span of its value.
    pub batch: Option<(u64, (usize, usize))>,
    /// `batch_size=` given but not constant.
    pub batch_unknown: bool,
    /// The call.
    pub span: (usize, usize),
    /// The training data: the name passed as `x`, if a plain name.
    pub x_name: Option<String>,
    /// Rows of `x` when it is an array with a literal shape (`np.random.random((2, 3))`):
    /// `fit` never uses a batch larger than the data.
    pub x_rows: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct Obj {
    pub kind: ObjKind,
    /// Attributes in assignment order (PyTorch registers submodules in this order).
    pub attrs: Vec<(Rc<str>, Val)>,
    pub span: (usize, usize),
    pub facts: Facts,
    /// Keras model name (`name=`).
    pub name: Option<String>,
}

impl Obj {
    pub fn attr(&self, name: &str) -> Option<&Val> {
        self.attrs
            .iter()
            .rev()
            .find(|(k, _)| &**k == name)
            .map(|(_, v)| v)
    }

    pub fn set_attr(&mut self, name: &str, v: Val) {
        if let Some(slot) = self.attrs.iter_mut().find(|(k, _)| &**k == name) {
            slot.1 = v;
        } else {
            self.attrs.push((Rc::from(name), v));
        }
    }
}

/// A folded constant of the semantic model as an interpreter value.
pub fn from_const(v: &gpulint_semantic::python::Value) -> Val {
    match v {
        gpulint_semantic::python::Value::Int(i) => Val::Int(*i),
        gpulint_semantic::python::Value::Float(f) => Val::Float(*f),
        gpulint_semantic::python::Value::Str(s) => Val::Str(Rc::from(s.as_str())),
        gpulint_semantic::python::Value::Bool(b) => Val::Bool(*b),
        gpulint_semantic::python::Value::None => Val::None,
        gpulint_semantic::python::Value::Tuple(t) => {
            Val::Tuple(Rc::new(t.iter().map(from_const).collect()))
        }
    }
}
