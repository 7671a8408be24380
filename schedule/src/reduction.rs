//! Helpers of the reduction primitives (Stage II/III) `decompose_reduction` and `rfactor`,
//! some shared with `compute_at` (loop nests above a block, statement lists, names in scope).

use crate::error::ScheduleError;
use crate::schedule::stale;
use crate::tree::{self, Path};
use sparsec_ir::expr::Expr;
use sparsec_ir::func::{Block, BufferId, For, Func, ParamKind, Region, RegionRange, Stmt, StmtKind, VarId};
use std::collections::HashSet;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The statement list that holds the statement at `path`, mutably.
pub(crate) fn list_mut<'a>(body: &'a mut Vec<Stmt>, path: &[(usize, usize)]) -> Option<&'a mut Vec<Stmt>> {
    let (last, parent) = path.split_last()?;
    if parent.is_empty() {
        return Some(body);
    }
    let p = tree::get_mut(body, parent)?;
    p.kind.child_lists_mut().into_iter().nth(last.0)
}

/// The statement list that holds the statement at `path`.
pub(crate) fn list_at<'a>(body: &'a [Stmt], path: &[(usize, usize)]) -> Option<&'a [Stmt]> {
    let (last, parent) = path.split_last()?;
    if parent.is_empty() {
        return Some(body);
    }
    let p = tree::get(body, parent)?;
    p.kind.child_lists().into_iter().nth(last.0).map(Vec::as_slice)
}


/// Variables in scope just before the statement at `path` (bound by enclosing statements or
/// by earlier `let`s of enclosing lists), scalar parameters included.
pub(crate) fn vars_in_scope(f: &Func, path: &[(usize, usize)]) -> HashSet<VarId> {
    let mut vars: HashSet<VarId> = f.params.iter().filter_map(|p| match p.kind {
        ParamKind::Scalar(v) => Some(v),
        ParamKind::Handle => None,
    }).collect();
    let mut list: &[Stmt] = &f.body;
    for (k, &(_, i)) in path.iter().enumerate() {
        for prev in list.iter().take(i) {
            if let StmtKind::Let { var, .. } = prev.kind {
                vars.insert(var);
            }
        }
        let Some(s) = list.get(i) else { break };
        if k + 1 == path.len() {
            break;
        }
        vars.extend(tree::binders(&s.kind));
        match path.get(k + 1).and_then(|&(l, _)| s.kind.child_lists().into_iter().nth(l)) {
            Some(next) => list = next,
            None => break,
        }
    }
    vars
}

/// Names a new binder at the statement at `path` must avoid: names in scope there and the
/// names of axes, buffers and parameters.
pub(crate) fn taken_names(f: &Func, path: &[(usize, usize)]) -> HashSet<String> {
    let mut taken: HashSet<String> =
        vars_in_scope(f, path).into_iter().filter_map(|v| f.vars.try_get(v)).map(|v| v.name.clone()).collect();
    taken.extend(sparsec_ir::names::function_names(f));
    taken
}

/// A block name not used by any block of `f`.
pub(crate) fn fresh_block_name(f: &Func, base: &str) -> String {
    sparsec_ir::names::fresh_in(&mut sparsec_ir::names::block_names(f), base)
}

/// The statements between the enclosing block, two-way `if` (a `specialize`d loop's
/// branch) or the function body and the statement at `path`, outermost first, with their
/// paths.
pub(crate) fn nest_above<'f>(f: &'f Func, path: &Path) -> Vec<(Path, &'f Stmt)> {
    let mut out = Vec::new();
    for k in (1..path.len()).rev() {
        let p = path[..k].to_vec();
        let Some(s) = tree::get(&f.body, &p) else { break };
        if matches!(&s.kind, StmtKind::Block(_)) || matches!(&s.kind, StmtKind::If { else_body, .. } if !else_body.is_empty()) {
            break;
        }
        out.push((p, s));
    }
    out.reverse();
    out
}

/// Whether `e` uses any of `vars`.
pub(crate) fn uses_any(e: &Expr, vars: &HashSet<VarId>) -> bool {
    let mut found = false;
    e.walk(&mut |x| {
        if let Expr::Var(v) = x {
            found |= vars.contains(v);
        }
    });
    found
}

/// Every variable `e` uses.
pub(crate) fn vars_of(e: &Expr) -> Vec<VarId> {
    let mut out = Vec::new();
    e.walk(&mut |x| {
        if let Expr::Var(v) = x {
            out.push(*v);
        }
    });
    out
}


/// A point region.
pub(crate) fn point(buffer: BufferId, indices: &[Expr]) -> Region {
    Region { buffer, ranges: indices.iter().map(|e| RegionRange { begin: e.clone(), end: None }).collect() }
}




/// A loop statement.
pub(crate) fn for_stmt(l: &For, var: VarId, min: Expr, extent: Expr, body: Vec<Stmt>) -> Stmt {
    Stmt::new(StmtKind::For(For { var, min, extent, kind: l.kind, body, attrs: l.attrs.clone() }))
}

/// One statement of the nest above a block: a loop or a guard.
pub(crate) enum Level {
    Loop(For),
    Guard(Expr),
}

/// The nest above the block at `bp` as loops and guards; anything else is refused.
pub(crate) fn levels(g: &Func, bp: &Path, block: &str) -> Result<Vec<(Path, Level)>> {
    nest_above(g, bp)
        .into_iter()
        .map(|(p, s)| match &s.kind {
            StmtKind::For(l) => Ok((p, Level::Loop(l.clone()))),
            StmtKind::If { cond, else_body, .. } if else_body.is_empty() => Ok((p, Level::Guard(cond.clone()))),
            other => Err(ScheduleError::UnsupportedNest { block: block.to_string(), stmt: stmt_name(other) }),
        })
        .collect()
}

/// The keyword of a statement, for errors.
pub(crate) fn stmt_name(k: &StmtKind) -> &'static str {
    match k {
        StmtKind::Store { .. } => "store",
        StmtKind::SpIter(_) => "sp_iter",
        StmtKind::For(_) => "for",
        StmtKind::Block(_) => "block",
        StmtKind::If { .. } => "if",
        StmtKind::While { .. } => "while",
        StmtKind::Let { .. } => "let",
        StmtKind::Alloc(_) => "alloc_buffer",
        StmtKind::Evaluate(_) => "evaluate",
    }
}

/// The block at `path`.
pub(crate) fn block_at(g: &Func, path: &Path, rv: u32) -> Result<Block> {
    match tree::get(&g.body, path).map(|s| &s.kind) {
        Some(StmtKind::Block(b)) => Ok(b.clone()),
        _ => Err(stale(rv, "block")),
    }
}
