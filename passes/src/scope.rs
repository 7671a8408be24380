//! What a statement list binds: the variables and allocations that live only inside it, and
//! whether an expression depends on them. Used to decide what can be seen from outside a body
//! (block regions, cache regions).

use sparsec_ir::expr::Expr;
use sparsec_ir::func::{BufferId, Stmt, StmtKind, VarId};
use std::collections::HashSet;

/// Variables bound (loops, `let`s, block and sparse iterators) and buffers allocated anywhere
/// inside `stmts`.
pub fn bound_inside(stmts: &[Stmt]) -> (HashSet<VarId>, HashSet<BufferId>) {
    let mut vars = HashSet::new();
    let mut bufs = HashSet::new();
    sparsec_ir::walk_stmts(stmts, &mut |s| match &s.kind {
        StmtKind::For(l) => {
            vars.insert(l.var);
        }
        StmtKind::Let { var, .. } => {
            vars.insert(*var);
        }
        StmtKind::Block(b) => vars.extend(b.iters.iter().map(|i| i.var)),
        StmtKind::SpIter(it) => vars.extend(it.vars.iter().copied()),
        StmtKind::Alloc(b) => {
            bufs.insert(*b);
        }
        _ => {}
    });
    (vars, bufs)
}

/// Whether `e` uses one of `vars` or reads or updates one of `bufs`.
pub fn depends_on(e: &Expr, vars: &HashSet<VarId>, bufs: &HashSet<BufferId>) -> bool {
    let mut hit = false;
    e.walk(&mut |x| match x {
        Expr::Var(v) => hit |= vars.contains(v),
        Expr::Load(b, _) | Expr::AtomicAdd(b, _, _) => hit |= bufs.contains(b),
        _ => {}
    });
    hit
}
