//! Barriers in GPU kernels: where the units of a block (a cube) take the same path, and where
//! they must wait for each other. Both GPU backends place their barriers from this module.
//!
//! A statement list of a kernel needs barriers when [`needs_barrier`] says so (a redundant
//! statement writes global memory beside thread-bound nests, or two thread-bound nests
//! exchange data through memory), or when the kernel uses shared memory. Then every statement
//! of the list that holds a thread-bound loop is fenced by a barrier before and after it
//! ([`list_sync`]), and a list that neither starts nor ends with such a statement opens with
//! one ([`ListSync::opens`]: a loop body runs again right after its end). A barrier may only stand where control flow is *uniform*: every unit of the
//! block reaches it. [`Uniformity`] tracks that while a backend walks a kernel.

use crate::expr::Expr;
use crate::func::{has_thread_loop, needs_barrier, walk_stmts, BufferId, Func, Stmt, StmtKind, Storage, VarId};
use crate::types::ForKind;

/// Why a kernel cannot be synchronised.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    /// Statements that need a barrier between them sit under control flow that differs
    /// between the units of a block.
    #[error(
        "statements of a kernel that exchange data through memory under control flow that differs between \
         the units of a block are not supported: no barrier may order them there; map the nests to the same units"
    )]
    NonUniformBarrier,
}

/// The barriers of one statement list of a kernel ([`list_sync`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListSync {
    /// No barrier.
    None,
    /// A barrier before and after each statement that holds a thread-bound loop; `storage`
    /// when global memory must be ordered too (not only shared memory).
    AroundThreadNests {
        /// Whether the barrier must also order global memory.
        storage: bool,
    },
}

impl ListSync {
    /// Whether a barrier fences `s`, a statement of the list.
    pub fn fences(self, s: &Stmt) -> bool {
        matches!(self, ListSync::AroundThreadNests { .. }) && has_thread_loop(s)
    }

    /// Whether a barrier opens the list `stmts`: neither its first nor its last statement is
    /// fenced, so when the list is a loop body, units still running the end of one iteration
    /// (a write-back of shared memory) would race with units starting the next (its copy-in).
    pub fn opens(self, stmts: &[Stmt]) -> bool {
        matches!(self, ListSync::AroundThreadNests { .. })
            && stmts.first().is_some_and(|s| !has_thread_loop(s))
            && stmts.last().is_some_and(|s| !has_thread_loop(s))
    }
}

/// The barriers of `stmts`, a list of a kernel reached under uniform control flow or not
/// (`uniform`), which a loop of the kernel runs again or not (`reruns`), in a kernel that
/// allocates shared memory or not (`uses_shared`).
pub fn list_sync(f: &Func, stmts: &[Stmt], uniform: bool, uses_shared: bool, reruns: bool) -> Result<ListSync, SyncError> {
    let mixed = needs_barrier(f, stmts, reruns);
    if mixed && !uniform {
        return Err(SyncError::NonUniformBarrier);
    }
    if uniform && (mixed || uses_shared) && stmts.iter().any(has_thread_loop) {
        Ok(ListSync::AroundThreadNests { storage: mixed })
    } else {
        Ok(ListSync::None)
    }
}

/// Whether the kernel statements `stmts` allocate shared memory.
pub fn uses_shared(f: &Func, stmts: &[Stmt]) -> bool {
    let mut found = false;
    walk_stmts(stmts, &mut |s| {
        if let StmtKind::Alloc(b) = s.kind {
            found |= f.buffers.try_get(b).is_some_and(|x| x.storage == Storage::Alloc(crate::types::Scope::Shared));
        }
    });
    found
}

/// Whether the kernel statements `stmts` have a barrier anywhere: they allocate shared
/// memory, or some list in them needs one ([`needs_barrier`]).
pub fn has_barriers(f: &Func, stmts: &[Stmt]) -> bool {
    fn any_list(f: &Func, stmts: &[Stmt], reruns: bool) -> bool {
        needs_barrier(f, stmts, reruns)
            || stmts.iter().any(|s| {
                let again = reruns || reruns_body(s);
                s.kind.child_lists().into_iter().any(|l| any_list(f, l, again))
            })
    }
    uses_shared(f, stmts) || any_list(f, stmts, false)
}

/// Whether `s` runs its body again and again in one unit: a `while` loop, or a loop not bound
/// to a thread index (the lists under it are re-run, see [`list_sync`]).
pub fn reruns_body(s: &Stmt) -> bool {
    match &s.kind {
        StmtKind::While { .. } => true,
        StmtKind::For(l) => loop_reruns(l.kind),
        _ => false,
    }
}

/// Whether a loop of kind `kind` runs its body again in one unit: any loop not bound to a
/// thread or block index.
pub fn loop_reruns(kind: ForKind) -> bool {
    !matches!(kind, ForKind::Thread(_))
}

/// Which variables may differ between the units of a block, as a backend walks a kernel:
/// variables of loops bound to `threadIdx`, and `let`s, block iterators and loop variables
/// whose values use them or read memory the kernel may change.
#[derive(Clone, Debug)]
pub struct Uniformity {
    nonuniform: Vec<VarId>,
    /// Buffers written somewhere in the function (parameters by storage).
    written: Vec<BufferId>,
}

impl Uniformity {
    /// A tracker for the kernels of `f` (no variable bound yet).
    pub fn new(f: &Func) -> Self {
        let stores = crate::func::written_buffers(&f.body);
        // A buffer is written when any buffer over the same storage is.
        let written = f
            .buffers
            .iter()
            .filter(|(h, b)| {
                stores.iter().any(|w| *w == *h || matches!((b.storage, f.buffers.try_get(*w).map(|x| x.storage)), (Storage::Param(p), Some(Storage::Param(q))) if p == q))
            })
            .map(|(h, _)| h)
            .collect();
        Uniformity { nonuniform: Vec::new(), written }
    }

    /// Whether `e` has one value in every unit of a block: it reads no variable that may
    /// differ, and loads only from parameters the function never writes (so every unit
    /// reads the same element) at such indices.
    pub fn expr(&self, f: &Func, e: &Expr) -> bool {
        let mut ok = true;
        e.walk(&mut |x| match x {
            Expr::Var(v) => ok &= !self.nonuniform.contains(v),
            Expr::Load(b, _) => {
                ok &= f.buffers.try_get(*b).is_some_and(|x| matches!(x.storage, Storage::Param(_))) && !self.written.contains(b)
            }
            Expr::AtomicAdd(..) => ok = false,
            _ => {}
        });
        ok
    }

    /// Records `var`, bound to a value that is uniform or not. Bindings nest: undo with
    /// [`Uniformity::unbind`] in reverse order.
    pub fn bind(&mut self, var: VarId, uniform: bool) {
        if !uniform {
            self.nonuniform.push(var);
        }
    }

    /// Forgets the binding of `var` made by [`Uniformity::bind`].
    pub fn unbind(&mut self, var: VarId) {
        if let Some(p) = self.nonuniform.iter().rposition(|v| *v == var) {
            self.nonuniform.remove(p);
        }
    }

    /// Whether the body of loop kind `kind` with bounds `min`/`extent` runs under uniform
    /// control flow when the loop does, and whether its variable is uniform: a `threadIdx`
    /// loop's is not (nor its guarded body); a `blockIdx` or serial loop's is when its bounds are.
    pub fn loop_body(&self, f: &Func, kind: ForKind, min: &Expr, extent: &Expr) -> bool {
        let bounds = self.expr(f, min) && self.expr(f, extent);
        match kind {
            ForKind::Thread(t) => t.is_block() && bounds,
            _ => bounds,
        }
    }
}
