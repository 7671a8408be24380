//! Small helpers for building IR inside passes: expression constructors that insert casts
//! where index dtypes differ, statement constructors, and scope-aware fresh names.

use sparsec_ir::expr::{BinOp, Expr};
use sparsec_ir::func::{Func, Stmt, StmtKind};
use sparsec_ir::{BufferId, DType};
use std::collections::HashSet;

/// Casts `e` to `d` unless it already has that dtype (integer literals are retyped).
pub fn cast_to(f: &Func, e: Expr, d: DType) -> Expr {
    match e {
        Expr::Int(v, _) if d.is_int() => Expr::Int(v, d),
        e if f.expr_dtype(&e) == d => e,
        e => Expr::Cast(d, Box::new(e)),
    }
}

/// `a op b`, with `b` cast to `a`'s dtype.
pub fn bin(f: &Func, op: BinOp, a: Expr, b: Expr) -> Expr {
    let d = f.expr_dtype(&a);
    let b = cast_to(f, b, d);
    Expr::binary(op, a, b)
}

/// `a + b`
pub fn add(f: &Func, a: Expr, b: Expr) -> Expr {
    bin(f, BinOp::Add, a, b)
}

/// `a - b`
pub fn sub(f: &Func, a: Expr, b: Expr) -> Expr {
    bin(f, BinOp::Sub, a, b)
}

/// `a * b`
pub fn mul(f: &Func, a: Expr, b: Expr) -> Expr {
    bin(f, BinOp::Mul, a, b)
}

/// An integer literal of dtype `d`.
pub fn int(v: i64, d: DType) -> Expr {
    Expr::Int(v, d)
}

/// The zero of a dtype (`false` for bool).
pub fn zero(d: DType) -> Expr {
    match d {
        DType::Bool => Expr::Bool(false),
        d if d.is_float() => Expr::Float(0.0, d),
        d => Expr::Int(0, d),
    }
}

/// A statement without a source span.
pub fn stmt(kind: StmtKind) -> Stmt {
    Stmt::new(kind)
}

/// `buf[indices] = value`
pub fn store(buffer: BufferId, indices: Vec<Expr>, value: Expr) -> Stmt {
    stmt(StmtKind::Store { buffer, indices, value })
}

/// Fresh names: unique among function-wide names (axes, buffers, parameters) and among the
/// variables in scope, so that the printed IR is unambiguous.
#[derive(Debug, Default)]
pub struct Namer {
    globals: HashSet<String>,
    scopes: Vec<HashSet<String>>,
}

impl Namer {
    /// A namer that knows the axis, buffer and parameter names of `f`.
    pub fn for_func(f: &Func) -> Namer {
        Namer { globals: sparsec_ir::names::function_names(f), scopes: vec![HashSet::new()] }
    }

    fn taken(&self, n: &str) -> bool {
        self.globals.contains(n) || self.scopes.iter().any(|s| s.contains(n))
    }

    fn pick(&self, base: &str) -> String {
        sparsec_ir::names::fresh_name(base, |n| self.taken(n))
    }

    /// A fresh variable name, valid until the current scope is popped.
    pub fn var(&mut self, base: &str) -> String {
        let n = self.pick(base);
        self.scopes.last_mut().expect("scope").insert(n.clone());
        n
    }

    /// A fresh function-wide name (for axes and buffers).
    pub fn global(&mut self, base: &str) -> String {
        let n = self.pick(base);
        self.globals.insert(n.clone());
        n
    }

    /// Opens a variable scope.
    pub fn push(&mut self) {
        self.scopes.push(HashSet::new());
    }

    /// Closes the innermost variable scope.
    pub fn pop(&mut self) {
        self.scopes.pop();
    }
}
