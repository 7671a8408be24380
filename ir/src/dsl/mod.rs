//! A Rust DSL for Stage-I programs that reads like the `.sptir` text and builds the same IR
//! as the parser.
//!
//! [`func`] runs a closure on a [`FuncBuilder`]; parameters, axes and buffers are declared
//! with methods named like their text form and return typed handles ([`HandleRef`],
//! [`VarRef`], [`AxisRef`], [`BufferRef`]); statements are added in call order. Expressions
//! are [`E`] values built with operators (`+ - * / %`, unary `-` and `!`), comparison
//! methods ([`E::lt`], [`E::eq_`], ...), free functions ([`min`], [`max`], [`select`],
//! [`cast`], [`exp`], [`max_value`], ...) and buffer accesses ([`BufferRef::at`]). Rust
//! literals convert into expressions; `f64` and `i32` values (unsuffixed literals) are
//! *untyped* and take the dtype of what they meet, defaulting to the text's `f32`/`i32` —
//! see [`E`] for the exact rule.
//!
//! ```
//! # #![allow(non_snake_case)]
//! use sparsec_ir::dsl::*;
//! let f = func("csrmm", |f| {
//!     let (a, b, c) = (f.handle("a"), f.handle("b"), f.handle("c"));
//!     let (indptr, indices) = (f.handle("indptr"), f.handle("indices"));
//!     let (m, n) = (f.scalar("m", I32), f.scalar("n", I32));
//!     let (feat_size, nnz) = (f.scalar("feat_size", I32), f.scalar("nnz", I32));
//!     let I = f.dense_fixed("I", m);
//!     let J = f.sparse_variable("J", I, n, nnz, indptr, indices);
//!     let J_detach = f.dense_fixed("J_detach", n);
//!     let K = f.dense_fixed("K", feat_size);
//!     let A = f.match_sparse_buffer("A", a, [I, J], F32);
//!     let B = f.match_sparse_buffer("B", b, [J_detach, K], F32);
//!     let C = f.match_sparse_buffer("C", c, [I, K], F32);
//!     f.sp_iter("csrmm", [I, J, K], "SRS", |s, [i, j, k]| {
//!         s.init(|s| s.store(C.at([i, k]), 0.0));
//!         s.store(C.at([i, k]), C.at([i, k]) + A.at([i, j]) * B.at([j, k]));
//!     });
//! })
//! .unwrap();
//!
//! let text = "func csrmm(a: handle, b: handle, c: handle, indptr: handle, indices: handle, \
//!             m: i32, n: i32, feat_size: i32, nnz: i32) {
//!   axis I = dense_fixed(m)
//!   axis J = sparse_variable(I, n, nnz, indptr, indices)
//!   axis J_detach = dense_fixed(n)
//!   axis K = dense_fixed(feat_size)
//!   buffer A = match_sparse_buffer(a, [I, J], f32)
//!   buffer B = match_sparse_buffer(b, [J_detach, K], f32)
//!   buffer C = match_sparse_buffer(c, [I, K], f32)
//!   sp_iter csrmm([I, J, K], \"SRS\") as [i, j, k] {
//!     init {
//!       C[i, k] = 0.0
//!     }
//!     C[i, k] = C[i, k] + A[i, j] * B[j, k]
//!   }
//! }";
//! assert_eq!(f, sparsec_ir::text::parse_func("csrmm.sptir", text).unwrap());
//! ```
//!
//! # Correspondence with the text
//!
//! | text | DSL |
//! |---|---|
//! | `func f(a: handle, m: i32) attrs(k = 1)` | `func("f", \|f\| { let a = f.handle("a"); let m = f.scalar("m", I32); f.attr("k", 1); ... })` |
//! | `axis J = sparse_variable(I, n, nnz, indptr, indices, idtype = i64)` | `f.axis_with(AxisOpts::new().idtype(I64)).sparse_variable("J", I, n, nnz, indptr, indices)` |
//! | `buffer A = match_sparse_buffer(a, [I, J], f32)` | `f.match_sparse_buffer("A", a, [I, J], F32)` |
//! | `buffer T = alloc_sparse_buffer([I], f32, local, default = 1.0)` | `s.buffer_with(BufferOpts::new().default_value(1.0)).alloc_sparse_buffer("T", [I], F32, Scope::Local)` |
//! | `sp_iter s([fuse(I, J), K], "SSR") as [i, j, k] { init { .. } .. }` | `s.sp_iter("s", (fuse([I, J]), K), "SSR", \|s, [i, j, k]\| { s.init(\|s\| ..); .. })` |
//! | `sp_iter s([I, attach(X, J)], "SS") as [i, x] attrs(a = true)` | `s.sp_iter_with("s", (I, attach(X, J)), "SS").vars(["i", "x"]).attr("a", true).body(\|s, [i, x]\| ..)` |
//! | `C[i, k] = v` | `s.store(C.at([i, k]), v)` |
//! | `let x = e` / `let y: i64 = e` | `let x = s.let_("x", e);` / `s.let_typed("y", I64, e)` |
//! | `if c { .. } else if d { .. } else { .. }` | `s.if_(c, \|s\| ..).else_if(d, \|s\| ..).else_(\|s\| ..)` |
//! | `while c { .. }` | `s.while_(c, \|s\| ..)` |
//! | `atomic_add(C[i], v)` | `s.atomic_add(C.at([i]), v)` |
//! | `a // b`, `a % b`, `a < b`, `a == b`, `a && b` | `a.floordiv(b)`, `a % b`, `a.lt(b)`, `a.eq_(b)`, `a & b` |
//!
//! Iterator variables of [`Builder::sp_iter`] are named after their axes in lower case;
//! [`SpIterDecl::vars`] names them explicitly.
//!
//! # Errors
//!
//! Library code never panics on misuse: [`func`] returns the first misuse as a
//! [`DslError`] (invalid, duplicate, shadowing or unknown names, variables used out of
//! scope, handles of another function, wrong number of iterator variables or of indices,
//! misplaced `init`, repeated attributes), and otherwise runs
//! [`verify_func`] on the result, returning its errors as
//! [`DslError::Verify`].
//!
//! # Equality with the parser
//!
//! The parser allocates variables in text order: scalar parameters first, then iterators
//! when their `sp_iter` is reached (before its `init` and body), and `let`s when reached.
//! The DSL allocates them in call order, which is the same as long as `init` comes first
//! (enforced); scalar parameters declared late are renumbered to come first. Axes and
//! buffers are numbered in call order, like declarations in the text. Only Stage-I
//! programs are built; loops and blocks (Stages II and III) are produced by lowering.

mod builder;
mod error;
mod expr;

pub use crate::types::{DType, Scope};
pub use builder::{
    AxisDecl, AxisOpts, Body, BufferDecl, BufferOpts, Builder, FuncBuilder, IfElse, InSpIter, Level, Nested,
    SpIterBody, SpIterDecl, Top,
};
pub use error::DslError;
pub use expr::{
    abs, atomic_add, cast, ceil, exp, floor, fma, floordiv, floormod, log, max, max_value, min, min_value, pow, select,
    sigmoid, sqrt, tanh, AxisRef, BufferRef, HandleRef, Indices, VarRef, E,
};

use crate::expr::Expr;
use crate::func::{Func, MergeOp, ParamKind, SpIterAxis, Stmt, StmtKind, VarId};
use crate::verify::verify_func;

/// `i32`
pub const I32: DType = DType::I32;
/// `i64`
pub const I64: DType = DType::I64;
/// `f16`
pub const F16: DType = DType::F16;
/// `bf16`
pub const BF16: DType = DType::BF16;
/// `f32`
pub const F32: DType = DType::F32;
/// `f64`
pub const F64: DType = DType::F64;
/// `bool`
pub const BOOL: DType = DType::Bool;

/// Builds a Stage-I function: runs `build` on the function-level builder, then checks it.
///
/// Returns the first misuse of the DSL, or else the verifier's errors, as a [`DslError`].
pub fn func(name: impl Into<String>, build: impl FnOnce(&mut FuncBuilder<'_>)) -> Result<Func, DslError> {
    let mut st = builder::State::new(name.into());
    let mut b = FuncBuilder::top(&mut st);
    build(&mut b);
    let body = b.into_stmts();
    if let Some(e) = st.error {
        return Err(e);
    }
    let mut f = st.func;
    f.body = body;
    renumber_vars(&mut f);
    verify_func(&f).map_err(DslError::Verify)?;
    Ok(f)
}

/// One entry of a sparse iteration's axis list: an axis ([`AxisRef`] converts into it),
/// [`fuse`], [`attach`], [`union`] or [`intersect`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpAxis(SpAxisKind);

#[derive(Clone, Debug, PartialEq, Eq)]
enum SpAxisKind {
    Axis(AxisRef),
    Fuse(Vec<AxisRef>),
    Attach(AxisRef, AxisRef),
    Merge(MergeOp, Vec<AxisRef>),
}

impl SpAxis {
    /// Every axis mentioned (for `attach`, the parent too).
    fn refs(&self) -> Vec<AxisRef> {
        match &self.0 {
            SpAxisKind::Axis(a) => vec![*a],
            SpAxisKind::Fuse(g) => g.clone(),
            SpAxisKind::Attach(a, p) => vec![*a, *p],
            SpAxisKind::Merge(_, g) => g.clone(),
        }
    }

    /// The axes iterated, one per iterator variable.
    fn iterated(&self) -> Vec<AxisRef> {
        match &self.0 {
            SpAxisKind::Axis(a) | SpAxisKind::Attach(a, _) => vec![*a],
            SpAxisKind::Fuse(g) => g.clone(),
            SpAxisKind::Merge(_, g) => g.first().copied().into_iter().collect(),
        }
    }

    fn to_ir(&self) -> SpIterAxis {
        match &self.0 {
            SpAxisKind::Axis(a) => SpIterAxis::Axis(a.id),
            SpAxisKind::Fuse(g) => SpIterAxis::Fuse(g.iter().map(|a| a.id).collect()),
            SpAxisKind::Attach(a, p) => SpIterAxis::Attach { axis: a.id, parent: p.id },
            SpAxisKind::Merge(op, g) => SpIterAxis::Merge { op: *op, axes: g.iter().map(|a| a.id).collect() },
        }
    }
}

impl From<AxisRef> for SpAxis {
    fn from(a: AxisRef) -> SpAxis {
        SpAxis(SpAxisKind::Axis(a))
    }
}

/// `fuse(I, J, ...)`: the axes (each the parent of the next) iterate as one loop; one
/// iterator variable per axis.
pub fn fuse(axes: impl IntoIterator<Item = AxisRef>) -> SpAxis {
    SpAxis(SpAxisKind::Fuse(axes.into_iter().collect()))
}

/// `union(axes)`: one iterator over the coordinates stored in any of the axes' rows
/// (co-iteration; the axes share parent, length and index type).
pub fn union(axes: impl IntoIterator<Item = AxisRef>) -> SpAxis {
    SpAxis(SpAxisKind::Merge(MergeOp::Union, axes.into_iter().collect()))
}

/// `intersect(axes)`: one iterator over the coordinates stored in every one of the axes' rows.
pub fn intersect(axes: impl IntoIterator<Item = AxisRef>) -> SpAxis {
    SpAxis(SpAxisKind::Merge(MergeOp::Intersect, axes.into_iter().collect()))
}

/// `attach(axis, parent)`: iterate `axis` with its row picked by the iterator over `parent`
/// instead of its declared (dense-fixed) parent.
pub fn attach(axis: AxisRef, parent: AxisRef) -> SpAxis {
    SpAxis(SpAxisKind::Attach(axis, parent))
}

/// The axis list of a sparse iteration: arrays and `Vec`s of axes (or of [`SpAxis`]), and
/// tuples (up to 8) mixing axes, [`fuse`], [`attach`], [`union`] and [`intersect`].
pub trait SpAxes {
    /// The entries, outermost first.
    fn into_sp_axes(self) -> Vec<SpAxis>;
}

impl<T: Into<SpAxis>, const N: usize> SpAxes for [T; N] {
    fn into_sp_axes(self) -> Vec<SpAxis> {
        self.into_iter().map(Into::into).collect()
    }
}

impl<T: Into<SpAxis>> SpAxes for Vec<T> {
    fn into_sp_axes(self) -> Vec<SpAxis> {
        self.into_iter().map(Into::into).collect()
    }
}

macro_rules! tuple_sp_axes {
    ($($T:ident $v:ident),+) => {
        impl<$($T: Into<SpAxis>),+> SpAxes for ($($T,)+) {
            fn into_sp_axes(self) -> Vec<SpAxis> {
                let ($($v,)+) = self;
                vec![$($v.into()),+]
            }
        }
    };
}
tuple_sp_axes!(A a);
tuple_sp_axes!(A a, B b);
tuple_sp_axes!(A a, B b, C c);
tuple_sp_axes!(A a, B b, C c, D d);
tuple_sp_axes!(A a, B b, C c, D d, F f);
tuple_sp_axes!(A a, B b, C c, D d, F f, G g);
tuple_sp_axes!(A a, B b, C c, D d, F f, G g, H h);
tuple_sp_axes!(A a, B b, C c, D d, F f, G g, H h, I i);

// ---- variable numbering ----------------------------------------------------------------------

/// Renumbers variables as the parser would: scalar parameters first, in parameter order,
/// then the others in creation order.
fn renumber_vars(f: &mut Func) {
    let mut order: Vec<VarId> =
        f.params.iter().filter_map(|p| if let ParamKind::Scalar(v) = p.kind { Some(v) } else { None }).collect();
    let first: std::collections::HashSet<VarId> = order.iter().copied().collect();
    order.extend(f.vars.handles().filter(|v| !first.contains(v)));
    if order.len() != f.vars.len() || order.iter().enumerate().all(|(i, v)| v.index() == i) {
        return;
    }
    let mut map = vec![VarId::from_index(0); f.vars.len()];
    let mut vars = crate::arena::Arena::new();
    for old in &order {
        map[old.index()] = vars.append(f.vars[*old].clone());
    }
    f.vars = vars;
    let m = |v: VarId| map.get(v.index()).copied().unwrap_or(v);
    for p in &mut f.params {
        if let ParamKind::Scalar(v) = &mut p.kind {
            *v = m(*v);
        }
    }
    for (_, a) in f.axes.iter_mut() {
        remap_expr(&mut a.length, &m);
        if let Some(n) = &mut a.nnz {
            remap_expr(n, &m);
        }
    }
    for (_, b) in f.buffers.iter_mut() {
        for e in b.extra_storage.iter_mut().chain(b.default.iter_mut()) {
            remap_expr(e, &m);
        }
        if let crate::func::Layout::Dense(shape) = &mut b.layout {
            shape.iter_mut().for_each(|e| remap_expr(e, &m));
        }
    }
    remap_stmts(&mut f.body, &m);
}

fn remap_expr(e: &mut Expr, m: &impl Fn(VarId) -> VarId) {
    let old = std::mem::replace(e, Expr::Bool(false));
    *e = old.map(&mut |x| match x {
        Expr::Var(v) => Expr::Var(m(v)),
        other => other,
    });
}

fn remap_stmts(stmts: &mut [Stmt], m: &impl Fn(VarId) -> VarId) {
    for s in stmts {
        match &mut s.kind {
            StmtKind::Store { indices, value, .. } => {
                indices.iter_mut().for_each(|e| remap_expr(e, m));
                remap_expr(value, m);
            }
            StmtKind::SpIter(it) => {
                it.vars.iter_mut().for_each(|v| *v = m(*v));
                if let Some(init) = &mut it.init {
                    remap_stmts(init, m);
                }
                remap_stmts(&mut it.body, m);
            }
            StmtKind::For(l) => {
                l.var = m(l.var);
                remap_expr(&mut l.min, m);
                remap_expr(&mut l.extent, m);
                remap_stmts(&mut l.body, m);
            }
            StmtKind::Block(b) => {
                for it in &mut b.iters {
                    it.var = m(it.var);
                    remap_expr(&mut it.extent, m);
                    remap_expr(&mut it.binding, m);
                }
                for r in b.reads.iter_mut().chain(b.writes.iter_mut()) {
                    for rr in &mut r.ranges {
                        remap_expr(&mut rr.begin, m);
                        if let Some(e) = &mut rr.end {
                            remap_expr(e, m);
                        }
                    }
                }
                if let Some(init) = &mut b.init {
                    remap_stmts(init, m);
                }
                remap_stmts(&mut b.body, m);
            }
            StmtKind::If { cond, then_body, else_body } => {
                remap_expr(cond, m);
                remap_stmts(then_body, m);
                remap_stmts(else_body, m);
            }
            StmtKind::While { cond, body } => {
                remap_expr(cond, m);
                remap_stmts(body, m);
            }
            StmtKind::Let { var, value } => {
                *var = m(*var);
                remap_expr(value, m);
            }
            StmtKind::Alloc(_) => {}
            StmtKind::Evaluate(e) => remap_expr(e, m),
        }
    }
}
