//! Register-tiled reductions over a vectorized loop (CPU).
//!
//! Recognises a serial loop `j` whose body is one `vectorized` loop `k` around one block
//! that accumulates into an element that does not move with `j`:
//!
//! ```text
//! for j in serial(..) { for k in vectorized(E) { block(.. = j, .. = k) { X[f(k)] = X[f(k)] + rhs } } }
//! ```
//!
//! with `f` stride 1 in `k`, and `rhs` built from `+ - * /` of values that do not depend on
//! `k` and of loads that are stride 1 in `k` from storage other than `X`. The translator then
//! swaps the loops: for each tile of `k` (vectors of the host's width, several per tile) it loads
//! `X` once, accumulates over `j` in registers (`scf.for` iteration arguments) and stores
//! once. A contracted update `X[f(k)] = fma(a, b, X[f(k)])` is tiled the same way. Each
//! element still sums its terms in the original order, so results are identical.
//! This is CSR SpMM's inner nest (`C[i, k] += A[i, j] * B[J[j], k]`).

use sparsec_ir::{BinOp, Block as IrBlock, BufferId, DType, Expr, For, ForKind, Func, Intrinsic, StmtKind, Storage, VarId};
use std::collections::HashSet;

/// A recognised nest (see the module docs).
pub(crate) struct Plan<'f> {
    /// The vectorized inner loop.
    pub kloop: &'f For,
    /// The block inside it.
    pub block: &'f IrBlock,
    /// The accumulated buffer and its indices.
    pub buffer: BufferId,
    pub indices: &'f [Expr],
    /// How each iteration updates the accumulator.
    pub update: Update<'f>,
    /// Element type (f32 or f64).
    pub dtype: DType,
    /// Variables that depend on `k` (the loop variable and block iterators bound to it).
    pub kvars: HashSet<VarId>,
    /// Variables that depend on `j`.
    pub jvars: HashSet<VarId>,
}

/// How a register-tiled accumulator is updated.
pub(crate) enum Update<'f> {
    /// `X + rhs` (`acc_left`) or `rhs + X`.
    Add { rhs: &'f Expr, acc_left: bool },
    /// `fma(a, b, X)`.
    Fma { a: &'f Expr, b: &'f Expr },
}

impl Plan<'_> {
    /// Whether `e` depends on `k`.
    pub fn on_k(&self, e: &Expr) -> bool {
        mentions(e, &self.kvars)
    }
}

fn mentions(e: &Expr, vars: &HashSet<VarId>) -> bool {
    let mut found = false;
    e.walk(&mut |x| found |= matches!(x, Expr::Var(v) if vars.contains(v)));
    found
}

fn same_home(func: &Func, a: BufferId, b: BufferId) -> bool {
    let s = |x: BufferId| func.buffers.try_get(x).map(|d| d.storage);
    match (s(a), s(b)) {
        (Some(Storage::Param(p)), Some(Storage::Param(q))) => p == q,
        _ => a == b,
    }
}

/// Whether `e` reads the storage of `x` or has atomics.
fn touches(func: &Func, e: &Expr, x: BufferId) -> bool {
    let mut found = false;
    e.walk(&mut |y| match y {
        Expr::Load(b, _) => found |= same_home(func, *b, x),
        Expr::AtomicAdd(..) => found = true,
        _ => {}
    });
    found
}

/// Whether `e` steps by one with `k` (affine in it with coefficient 1), block iterators read
/// through their bindings.
fn unit_stride(p: &Plan, func: &Func, e: &Expr) -> bool {
    let env: std::collections::HashMap<VarId, Expr> = p.block.iters.iter().map(|it| (it.var, it.binding.clone())).collect();
    func.steps_by_one(&e.clone().substitute(&env), p.kloop.var)
}

/// Whether an access is contiguous in `k`: the last index has coefficient 1, the others do
/// not depend on `k`; no index depends on `j` when `fixed_in_j`.
fn contiguous(p: &Plan, func: &Func, idx: &[Expr], fixed_in_j: bool) -> bool {
    let Some((last, rest)) = idx.split_last() else { return false };
    rest.iter().all(|e| !p.on_k(e))
        && unit_stride(p, func, last)
        && idx.iter().all(|e| !touches(func, e, p.buffer))
        && (!fixed_in_j || idx.iter().all(|e| !mentions(e, &p.jvars)))
}

/// Whether `e` can be computed on a vector of consecutive `k`.
fn vectorizable(p: &Plan, func: &Func, e: &Expr) -> bool {
    if touches(func, e, p.buffer) || func.expr_dtype(e) != p.dtype {
        return false;
    }
    if !p.on_k(e) {
        return true;
    }
    match e {
        Expr::Load(b, idx) => {
            func.buffers.try_get(*b).is_some_and(|d| d.dtype == p.dtype) && contiguous(p, func, idx, false)
        }
        Expr::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div, x, y) => {
            vectorizable(p, func, x) && vectorizable(p, func, y)
        }
        Expr::Call(Intrinsic::Fma, args) => args.iter().all(|x| vectorizable(p, func, x)),
        _ => false,
    }
}

/// The plan for serial loop `j`, if it has the shape above.
pub(crate) fn plan<'f>(func: &'f Func, j: &'f For) -> Option<Plan<'f>> {
    if j.kind != ForKind::Serial {
        return None;
    }
    let [s] = j.body.as_slice() else { return None };
    let StmtKind::For(kloop) = &s.kind else { return None };
    let no_load = |e: &Expr| {
        let mut l = false;
        e.walk(&mut |x| l |= matches!(x, Expr::Load(..) | Expr::AtomicAdd(..)));
        !l
    };
    if kloop.kind != ForKind::Vectorized
        || kloop.min.uses_var(j.var)
        || kloop.extent.uses_var(j.var)
        || !no_load(&kloop.min)
        || !no_load(&kloop.extent)
    {
        return None;
    }
    let [s] = kloop.body.as_slice() else { return None };
    let StmtKind::Block(block) = &s.kind else { return None };
    if block.init.is_some() {
        return None;
    }
    let [s] = block.body.as_slice() else { return None };
    let StmtKind::Store { buffer, indices, value } = &s.kind else { return None };
    let dtype = func.buffers.try_get(*buffer)?.dtype;
    if !matches!(dtype, DType::F32 | DType::F64) {
        return None;
    }
    let is_acc = |e: &Expr| matches!(e, Expr::Load(b, idx) if b == buffer && idx == indices);
    let update = match value {
        Expr::Binary(BinOp::Add, x, y) => match (is_acc(x), is_acc(y)) {
            (true, _) => Update::Add { rhs: &**y, acc_left: true },
            (_, true) => Update::Add { rhs: &**x, acc_left: false },
            _ => return None,
        },
        Expr::Call(Intrinsic::Fma, args) => match args.as_slice() {
            [a, b, acc] if is_acc(acc) => Update::Fma { a, b },
            _ => return None,
        },
        _ => return None,
    };
    // Iterators bound to `k` or `j`, in order (a binding only sees earlier iterators).
    let mut kvars = HashSet::from([kloop.var]);
    let mut jvars = HashSet::from([j.var]);
    for it in &block.iters {
        if mentions(&it.binding, &kvars) {
            kvars.insert(it.var);
        }
        if mentions(&it.binding, &jvars) {
            jvars.insert(it.var);
        }
        if touches(func, &it.binding, *buffer) {
            return None;
        }
    }
    // An iterator needed outside the `j` loop (by the accumulator's index) must not need `j`.
    let p = Plan { kloop, block, buffer: *buffer, indices, update, dtype, kvars, jvars };
    let operands_vectorize = match p.update {
        Update::Add { rhs, .. } => vectorizable(&p, func, rhs),
        Update::Fma { a, b } => vectorizable(&p, func, a) && vectorizable(&p, func, b),
    };
    if !contiguous(&p, func, indices, true) || !operands_vectorize {
        return None;
    }
    Some(p)
}

/// `e` with block iterators replaced by their bindings and `from` renamed `to`.
fn resolve(e: &Expr, block: &IrBlock, from: VarId, to: VarId, depth: usize) -> Option<Expr> {
    if depth > 16 {
        return None;
    }
    let mut ok = true;
    let out = e.clone().map(&mut |x| match x {
        Expr::Var(v) if v == from => Expr::Var(to),
        Expr::Var(v) => match block.iters.iter().find(|it| it.var == v) {
            Some(it) => resolve(&it.binding, block, from, to, depth + 1).unwrap_or_else(|| {
                ok = false;
                Expr::Var(v)
            }),
            None => Expr::Var(v),
        },
        x => x,
    });
    ok.then_some(out)
}

/// When `init` (the statement just before the `j` loop) stores one constant to the
/// accumulated elements over the same range of `k`, that constant: the tiles then start
/// from it instead of loading what `init` stored (`init` still runs when `j` does not).
pub(crate) fn init_of<'f>(func: &Func, init: &'f sparsec_ir::Stmt, p: &Plan<'f>) -> Option<&'f Expr> {
    let StmtKind::For(l) = &init.kind else { return None };
    if !matches!(l.kind, ForKind::Serial | ForKind::Vectorized | ForKind::Unrolled)
        || l.min != p.kloop.min
        || l.extent != p.kloop.extent
        || l.min.uses_var(l.var)
        || l.extent.uses_var(l.var)
    {
        return None;
    }
    let [s] = l.body.as_slice() else { return None };
    let StmtKind::Block(b) = &s.kind else { return None };
    if b.init.is_some() {
        return None;
    }
    let [s] = b.body.as_slice() else { return None };
    let StmtKind::Store { buffer, indices, value } = &s.kind else { return None };
    let mut constant = true;
    value.walk(&mut |x| constant &= !matches!(x, Expr::Var(_) | Expr::Load(..) | Expr::AtomicAdd(..)));
    if *buffer != p.buffer || !constant || func.expr_dtype(value) != p.dtype || indices.len() != p.indices.len() {
        return None;
    }
    let k = p.kloop.var;
    for (a, c) in indices.iter().zip(p.indices) {
        if resolve(a, b, l.var, k, 0)? != resolve(c, p.block, k, k, 0)? {
            return None;
        }
    }
    Some(value)
}
