//! Expressions: integer and float arithmetic, comparisons, logic, casts, calls and loads.

use crate::func::{BufferId, VarId};
use crate::types::DType;

/// A binary operator. Operands must have the same dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b`: float division, or integer division truncating toward zero.
    Div,
    /// `a // b`: integer division rounding toward negative infinity.
    FloorDiv,
    /// `a % b`: integer remainder with the sign of the divisor (pairs with `//`).
    FloorMod,
    /// `min(a, b)`
    Min,
    /// `max(a, b)`
    Max,
    /// `a == b`
    Eq,
    /// `a != b`
    Ne,
    /// `a < b`
    Lt,
    /// `a <= b`
    Le,
    /// `a > b`
    Gt,
    /// `a >= b`
    Ge,
    /// `a && b` on bools.
    And,
    /// `a || b` on bools.
    Or,
}

impl BinOp {
    /// Whether the result is a bool regardless of the operand dtype.
    pub fn is_comparison(self) -> bool {
        matches!(self, BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge)
    }

    /// Whether the operator takes bools.
    pub fn is_logical(self) -> bool {
        matches!(self, BinOp::And | BinOp::Or)
    }

    /// The infix symbol, or `None` for `min`/`max`, which print as calls.
    pub fn symbol(self) -> Option<&'static str> {
        Some(match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::FloorDiv => "//",
            BinOp::FloorMod => "%",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::And => "&&",
            BinOp::Or => "||",
            BinOp::Min | BinOp::Max => return None,
        })
    }

    /// Binding strength of the infix form: larger binds tighter.
    pub fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And => 2,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 3,
            BinOp::Add | BinOp::Sub => 4,
            BinOp::Mul | BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod => 5,
            BinOp::Min | BinOp::Max => 7,
        }
    }
}

/// A unary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// Arithmetic negation.
    Neg,
    /// Logical not.
    Not,
}

/// A built-in function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Intrinsic {
    /// e^x
    Exp,
    /// Natural logarithm.
    Log,
    /// Square root.
    Sqrt,
    /// Absolute value (ints and floats).
    Abs,
    /// Hyperbolic tangent.
    Tanh,
    /// 1 / (1 + e^-x)
    Sigmoid,
    /// x^y
    Pow,
    /// Round down.
    Floor,
    /// Round up.
    Ceil,
    /// `fma(a, b, c)`: `a * b + c` with one rounding (floats; the `contract` pass writes it).
    Fma,
    /// Largest finite value of a dtype (`max_value(f32)`); no operands.
    MaxValue(DType),
    /// Smallest finite value of a dtype (`min_value(f32)`); no operands.
    MinValue(DType),
}

impl Intrinsic {
    /// Name in `.sptir`.
    pub fn name(self) -> &'static str {
        match self {
            Intrinsic::Exp => "exp",
            Intrinsic::Log => "log",
            Intrinsic::Sqrt => "sqrt",
            Intrinsic::Abs => "abs",
            Intrinsic::Tanh => "tanh",
            Intrinsic::Sigmoid => "sigmoid",
            Intrinsic::Pow => "pow",
            Intrinsic::Floor => "floor",
            Intrinsic::Ceil => "ceil",
            Intrinsic::Fma => "fma",
            Intrinsic::MaxValue(_) => "max_value",
            Intrinsic::MinValue(_) => "min_value",
        }
    }

    /// Number of expression operands.
    pub fn arity(self) -> usize {
        match self {
            Intrinsic::MaxValue(_) | Intrinsic::MinValue(_) => 0,
            Intrinsic::Pow => 2,
            Intrinsic::Fma => 3,
            _ => 1,
        }
    }

    /// Looks up a unary/binary intrinsic by name (not `max_value`/`min_value`, which take a dtype).
    pub fn from_name(s: &str) -> Option<Intrinsic> {
        Some(match s {
            "exp" => Intrinsic::Exp,
            "log" => Intrinsic::Log,
            "sqrt" => Intrinsic::Sqrt,
            "abs" => Intrinsic::Abs,
            "tanh" => Intrinsic::Tanh,
            "sigmoid" => Intrinsic::Sigmoid,
            "pow" => Intrinsic::Pow,
            "floor" => Intrinsic::Floor,
            "ceil" => Intrinsic::Ceil,
            "fma" => Intrinsic::Fma,
            _ => return None,
        })
    }
}

/// An expression tree. Expressions carry no spans; diagnostics point at the enclosing statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// Integer literal of an integer dtype.
    Int(i64, DType),
    /// Float literal of a float dtype.
    Float(f64, DType),
    /// Boolean literal.
    Bool(bool),
    /// A scalar variable (parameter, iterator, loop variable, block iterator or `let`).
    Var(VarId),
    /// Binary operation.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// Unary operation.
    Unary(UnOp, Box<Expr>),
    /// `select(cond, then, else)`: both arms are evaluated.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    /// Conversion to another dtype.
    Cast(DType, Box<Expr>),
    /// Built-in function call.
    Call(Intrinsic, Vec<Expr>),
    /// Element of a buffer. At Stage I indices are coordinates, at Stage II positions, at
    /// Stage III flat offsets.
    Load(BufferId, Vec<Expr>),
    /// `atomic_add(buf[idx], value)`: adds atomically and yields the old value.
    AtomicAdd(BufferId, Vec<Expr>, Box<Expr>),
}

impl Expr {
    /// An `i32` literal.
    pub fn i32(v: i64) -> Expr {
        Expr::Int(v, DType::I32)
    }

    /// A variable reference.
    pub fn var(v: VarId) -> Expr {
        Expr::Var(v)
    }

    /// Builds `a op b`.
    pub fn binary(op: BinOp, a: Expr, b: Expr) -> Expr {
        Expr::Binary(op, Box::new(a), Box::new(b))
    }

    /// Builds a load.
    pub fn load(buf: BufferId, indices: Vec<Expr>) -> Expr {
        Expr::Load(buf, indices)
    }

    /// The integer value of a literal.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Expr::Int(v, _) => Some(*v),
            _ => None,
        }
    }

    /// The value of an integer expression built from literals with `+`, `-`, `*` and integer
    /// casts (`None` for anything else or on overflow).
    pub fn literal_value(&self) -> Option<i64> {
        match self {
            Expr::Int(v, _) => Some(*v),
            Expr::Cast(t, x) if t.is_int() => x.literal_value(),
            Expr::Binary(op, a, b) => {
                let (a, b) = (a.literal_value()?, b.literal_value()?);
                match op {
                    BinOp::Add => a.checked_add(b),
                    BinOp::Sub => a.checked_sub(b),
                    BinOp::Mul => a.checked_mul(b),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Direct sub-expressions, in evaluation order.
    pub fn children(&self) -> Vec<&Expr> {
        match self {
            Expr::Int(..) | Expr::Float(..) | Expr::Bool(_) | Expr::Var(_) => vec![],
            Expr::Binary(_, a, b) => vec![a, b],
            Expr::Unary(_, a) | Expr::Cast(_, a) => vec![a],
            Expr::Select(c, a, b) => vec![c, a, b],
            Expr::Call(_, args) | Expr::Load(_, args) => args.iter().collect(),
            Expr::AtomicAdd(_, idx, v) => idx.iter().chain(std::iter::once(&**v)).collect(),
        }
    }

    /// Calls `f` on this expression and every sub-expression, parents first.
    pub fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Expr)) {
        f(self);
        for c in self.children() {
            c.walk(f);
        }
    }

    /// `self` with every variable in `map` replaced by its expression (not simplified).
    pub fn substitute(self, map: &std::collections::HashMap<VarId, Expr>) -> Expr {
        self.map(&mut |x| match x {
            Expr::Var(v) => map.get(&v).cloned().unwrap_or(Expr::Var(v)),
            other => other,
        })
    }

    /// Rebuilds the expression bottom-up: children first, then `f` on the node.
    pub fn map(self, f: &mut impl FnMut(Expr) -> Expr) -> Expr {
        let rebuilt = match self {
            e @ (Expr::Int(..) | Expr::Float(..) | Expr::Bool(_) | Expr::Var(_)) => e,
            Expr::Binary(op, a, b) => Expr::Binary(op, Box::new(a.map(f)), Box::new(b.map(f))),
            Expr::Unary(op, a) => Expr::Unary(op, Box::new(a.map(f))),
            Expr::Cast(t, a) => Expr::Cast(t, Box::new(a.map(f))),
            Expr::Select(c, a, b) => {
                Expr::Select(Box::new(c.map(f)), Box::new(a.map(f)), Box::new(b.map(f)))
            }
            Expr::Call(i, args) => Expr::Call(i, args.into_iter().map(|a| a.map(f)).collect()),
            Expr::Load(b, idx) => Expr::Load(b, idx.into_iter().map(|a| a.map(f)).collect()),
            Expr::AtomicAdd(b, idx, v) => Expr::AtomicAdd(
                b,
                idx.into_iter().map(|a| a.map(f)).collect(),
                Box::new(v.map(f)),
            ),
        };
        f(rebuilt)
    }

    /// Whether variable `v` occurs in the expression.
    pub fn uses_var(&self, v: VarId) -> bool {
        let mut found = false;
        self.walk(&mut |e| {
            if let Expr::Var(x) = e {
                found |= *x == v;
            }
        });
        found
    }
}
