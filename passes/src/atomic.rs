//! `lower_atomic`: accumulations that several GPU threads may apply to the same element become
//! `atomic_add`.
//!
//! A store `B[idx] = B[idx] + e` (or `e + B[idx]`, with `e` not reading `B`) is rewritten to
//! `atomic_add(B[idx], e)` when
//! * an enclosing block is annotated `atomic = true` (a sparse iteration's annotation lands
//!   on its outermost block, so annotating the iteration covers all of it), or
//! * the pass proves the element is shared: `idx` does not depend on the variable of an
//!   enclosing loop bound to `blockIdx.*`/`threadIdx.*` (looking through block bindings and
//!   `let`s), so every iteration of that loop — every block or thread — updates the same
//!   element.
//!
//! A store into a `local` buffer is never rewritten: each unit has its own copy. For a
//! `shared` buffer only `threadIdx.*` loops count, since each block has its own.
//!
//! Other stores are left alone: an index that only may collide (say through `indices`) needs
//! the annotation. Run sequentially, `atomic_add` adds exactly like the store it replaces.

use crate::PassError;
use sparsec_ir::expr::{BinOp, Expr, Intrinsic};
use sparsec_ir::func::{AttrValue, BufferId, Func, Stmt, StmtKind, VarId};
use sparsec_ir::{ForKind, Scope, Stage, Storage, ThreadTag};
use std::collections::HashMap;

/// The annotation that forces atomics in a block.
pub const ATOMIC_ATTR: &str = "atomic";

/// Rewrites shared accumulations of a Stage II/III function into `atomic_add`.
pub fn lower_atomic(f: &Func) -> Result<Func, PassError> {
    run(crate::verified_input("lower_atomic", f)?)
}

/// [`lower_atomic`] on verified input (the pass manager's entry).
pub(crate) fn run(f: sparsec_ir::verify::Verified<'_>) -> Result<Func, PassError> {
    if f.stage == Stage::I {
        return Err(PassError::WrongStage { pass: "lower_atomic", expected: Stage::II, found: Stage::I });
    }
    let mut out = f.func().clone();
    let mut cx = Context { storage: out.buffers.iter().map(|(_, b)| b.storage).collect(), ..Context::default() };
    cx.stmts(&mut out.body);
    Ok(out)
}

/// What is known at a statement: thread-bound loops around it, the values of block
/// variables and `let`s, and whether an enclosing block asks for atomics.
#[derive(Default, Clone)]
struct Context {
    /// Where each buffer lives, by index.
    storage: Vec<Storage>,
    threads: Vec<(VarId, ThreadTag)>,
    values: HashMap<VarId, Expr>,
    forced: bool,
}

impl Context {
    fn stmts(&mut self, stmts: &mut [Stmt]) {
        let saved = self.values.clone();
        for s in stmts.iter_mut() {
            self.stmt(s);
        }
        self.values = saved;
    }

    fn stmt(&mut self, s: &mut Stmt) {
        match &mut s.kind {
            StmtKind::For(l) => {
                let mut inner = self.clone();
                let single = l.extent == Expr::Int(1, self_dtype(&l.extent));
                if let (ForKind::Thread(t), false) = (l.kind, single) {
                    inner.threads.push((l.var, t));
                }
                inner.stmts(&mut l.body);
            }
            StmtKind::Block(b) => {
                let mut inner = self.clone();
                for it in &b.iters {
                    inner.values.insert(it.var, it.binding.clone());
                }
                inner.forced |= matches!(b.attrs.get(ATOMIC_ATTR), Some(AttrValue::Bool(true)));
                if let Some(init) = &mut b.init {
                    inner.stmts(init);
                }
                inner.stmts(&mut b.body);
            }
            StmtKind::Let { var, value } => {
                self.values.insert(*var, value.clone());
            }
            StmtKind::If { then_body, else_body, .. } => {
                self.clone().stmts(then_body);
                self.clone().stmts(else_body);
            }
            StmtKind::While { body, .. } => self.clone().stmts(body),
            StmtKind::Store { buffer, indices, value } => {
                // A local buffer is each unit's own; a shared one is shared by the threads
                // of a block only.
                let home = self.storage.get(buffer.index()).copied();
                let across = |t: &ThreadTag| home != Some(Storage::Alloc(Scope::Shared)) || !t.is_block();
                let local = home == Some(Storage::Alloc(Scope::Local));
                if let Some(e) = accumulation(*buffer, indices, value).filter(|_| !local) {
                    if self.forced || self.shared(indices, across) {
                        s.kind = StmtKind::Evaluate(Expr::AtomicAdd(*buffer, indices.clone(), Box::new(e)));
                    }
                }
            }
            StmtKind::SpIter(_) | StmtKind::Alloc(_) | StmtKind::Evaluate(_) => {}
        }
    }

    /// Whether some thread-bound loop around the store whose units see the same buffer
    /// (`across` its tag) leaves every index unchanged.
    fn shared(&self, indices: &[Expr], across: impl Fn(&ThreadTag) -> bool) -> bool {
        self.threads.iter().any(|(v, t)| across(t) && !indices.iter().any(|e| self.depends(e, *v, 0)))
    }

    /// Whether `e` depends on `v`, looking through block bindings and `let`s.
    fn depends(&self, e: &Expr, v: VarId, depth: usize) -> bool {
        let mut hit = false;
        e.walk(&mut |x| {
            if let Expr::Var(w) = x {
                if *w == v {
                    hit = true;
                } else if let Some(val) = self.values.get(w) {
                    // Bindings form a DAG; the depth bound only guards against malformed IR.
                    hit |= depth < 64 && self.depends(val, v, depth + 1);
                }
            }
        });
        hit
    }
}

fn self_dtype(e: &Expr) -> sparsec_ir::DType {
    match e {
        Expr::Int(_, d) => *d,
        _ => sparsec_ir::DType::I32,
    }
}

/// `e` when `value` is `buf[idx] + e` or `e + buf[idx]` (or `fma(a, b, buf[idx])`, then `e`
/// is `a * b`) and `e` does not read `buf`: the store `buf[idx] = value` then only adds `e`.
pub fn accumulation(buf: BufferId, idx: &[Expr], value: &Expr) -> Option<Expr> {
    let is_self = |x: &Expr| matches!(x, Expr::Load(bb, ii) if *bb == buf && ii.as_slice() == idx);
    let reads_buf = |x: &Expr| {
        let mut r = false;
        x.walk(&mut |y| r |= matches!(y, Expr::Load(bb, _) | Expr::AtomicAdd(bb, _, _) if *bb == buf));
        r
    };
    match value {
        Expr::Binary(BinOp::Add, a, b) if is_self(a) && !reads_buf(b) => Some((**b).clone()),
        Expr::Binary(BinOp::Add, a, b) if is_self(b) && !reads_buf(a) => Some((**a).clone()),
        // A contracted `X = X + a * b`.
        Expr::Call(Intrinsic::Fma, args) => match args.as_slice() {
            [a, b, acc] if is_self(acc) && !reads_buf(a) && !reads_buf(b) => Some(Expr::binary(BinOp::Mul, a.clone(), b.clone())),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `stmts` only accumulate, so their iterations may run in any order: every store
/// is `B[i] = B[i] + e` (or an `atomic_add`), no other expression reads a buffer they write,
/// and they neither allocate nor hold `init` sections. Any stage.
pub fn accumulates_only(f: &Func, stmts: &[Stmt]) -> bool {
    use sparsec_ir::func::{walk_stmts, Storage};
    let mut written: Vec<Storage> = Vec::new();
    let mut ok = true;
    walk_stmts(stmts, &mut |s| {
        match &s.kind {
            StmtKind::Store { buffer, indices, value } => {
                ok &= accumulation(*buffer, indices, value).is_some();
                written.push(f.buffers[*buffer].storage);
            }
            StmtKind::Alloc(_) => ok = false,
            StmtKind::Block(b) => ok &= b.init.is_none(),
            StmtKind::SpIter(it) => ok &= it.init.is_none(),
            _ => {}
        }
        for e in s.kind.exprs() {
            e.walk(&mut |x| {
                if let Expr::AtomicAdd(b, _, _) = x {
                    written.push(f.buffers[*b].storage);
                }
            });
        }
    });
    if !ok {
        return false;
    }
    let reads_written = |e: &Expr| {
        let mut hit = false;
        e.walk(&mut |x| {
            if let Expr::Load(b, _) = x {
                hit |= written.contains(&f.buffers[*b].storage);
            }
        });
        hit
    };
    walk_stmts(stmts, &mut |s| match &s.kind {
        StmtKind::Store { buffer, indices, value } => {
            let added = accumulation(*buffer, indices, value);
            ok &= !indices.iter().any(reads_written) && !added.is_some_and(|e| reads_written(&e));
        }
        StmtKind::Evaluate(Expr::AtomicAdd(_, indices, e)) => {
            ok &= !indices.iter().any(reads_written) && !reads_written(e);
        }
        k => ok &= !k.exprs().into_iter().any(reads_written),
    });
    ok
}
