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

/// A lower-bound search over `0..len` in the one-element buffers `low` and `high` (of
/// `len`'s dtype): `low[0] = 0; high[0] = len; while low[0] < high[0] { let mid = low[0] +
/// (high[0] - low[0]) // 2; if right { low[0] = mid + 1 } else { high[0] = mid } }`, where
/// `right` (which reads `mid`) says that the answer lies above `mid`. The answer is left
/// in `low[0]`.
pub fn lower_bound(f: &Func, low: BufferId, high: BufferId, mid: sparsec_ir::VarId, len: Expr, right: Expr) -> Vec<Stmt> {
    let dtype = f.expr_dtype(&len);
    let at = |b| Expr::Load(b, vec![Expr::i32(0)]);
    let mid_value = add(f, at(low), Expr::binary(BinOp::FloorDiv, sub(f, at(high), at(low)), int(2, dtype)));
    let step = stmt(StmtKind::If {
        cond: right,
        then_body: vec![store(low, vec![Expr::i32(0)], add(f, Expr::Var(mid), int(1, dtype)))],
        else_body: vec![store(high, vec![Expr::i32(0)], Expr::Var(mid))],
    });
    vec![
        store(low, vec![Expr::i32(0)], int(0, dtype)),
        store(high, vec![Expr::i32(0)], len),
        stmt(StmtKind::While {
            cond: Expr::binary(BinOp::Lt, at(low), at(high)),
            body: vec![stmt(StmtKind::Let { var: mid, value: mid_value }), step],
        }),
    ]
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
