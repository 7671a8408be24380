//! Navigation in a function body: statement paths, lookups, substitution and fresh names.

use sparsec_ir::func::{Func, Stmt, StmtKind, VarId};

use std::collections::HashSet;

/// Position of a statement: for each level, (index of the child list, index in it). The
/// first step's list index is always 0 (the function body).
pub(crate) type Path = Vec<(usize, usize)>;

/// Paths of every statement matching `pred`, in pre-order.
pub(crate) fn find_all(body: &[Stmt], pred: &impl Fn(&Stmt) -> bool) -> Vec<Path> {
    fn rec(stmts: &[Stmt], list: usize, pred: &impl Fn(&Stmt) -> bool, prefix: &mut Path, out: &mut Vec<Path>) {
        for (i, s) in stmts.iter().enumerate() {
            prefix.push((list, i));
            if pred(s) {
                out.push(prefix.clone());
            }
            for (l, child) in s.kind.child_lists().into_iter().enumerate() {
                rec(child, l, pred, prefix, out);
            }
            prefix.pop();
        }
    }
    let mut out = Vec::new();
    rec(body, 0, pred, &mut Vec::new(), &mut out);
    out
}

/// The statement at `path`.
pub(crate) fn get<'a>(body: &'a [Stmt], path: &[(usize, usize)]) -> Option<&'a Stmt> {
    let (&(_, i0), rest) = path.split_first()?;
    let mut s = body.get(i0)?;
    for &(l, i) in rest {
        s = s.kind.child_lists().into_iter().nth(l)?.get(i)?;
    }
    Some(s)
}

/// The statement at `path`, mutably.
pub(crate) fn get_mut<'a>(body: &'a mut [Stmt], path: &[(usize, usize)]) -> Option<&'a mut Stmt> {
    let (&(_, i0), rest) = path.split_first()?;
    let mut s = body.get_mut(i0)?;
    for &(l, i) in rest {
        s = s.kind.child_lists_mut().into_iter().nth(l)?.get_mut(i)?;
    }
    Some(s)
}

/// The statements enclosing `path`, outermost first (not including the statement itself).
pub(crate) fn ancestors<'a>(body: &'a [Stmt], path: &[(usize, usize)]) -> Vec<&'a Stmt> {
    (1..path.len()).filter_map(|k| get(body, &path[..k])).collect()
}

/// Fresh variable names for binders placed at one statement: distinct from the axis,
/// buffer and parameter names, from every variable in scope there (bound by an enclosing
/// statement or an earlier `let` of an enclosing list), from every variable bound inside
/// the statement, and from each other. Names in unrelated subtrees may repeat, as they do
/// after lowering.
pub(crate) struct Fresh {
    taken: HashSet<String>,
}

/// Variables a statement binds for its children (a `let`, for the rest of its list).
pub(crate) fn binders(k: &StmtKind) -> Vec<VarId> {
    match k {
        StmtKind::SpIter(it) => it.vars.clone(),
        StmtKind::For(l) => vec![l.var],
        StmtKind::Block(b) => b.iters.iter().map(|i| i.var).collect(),
        StmtKind::Let { var, .. } => vec![*var],
        _ => vec![],
    }
}

impl Fresh {
    /// A name source for new binders at the statement at `path` of `f`.
    pub(crate) fn at(f: &Func, path: &[(usize, usize)]) -> Fresh {
        let mut vars: Vec<VarId> = Vec::new();
        let mut list: &[Stmt] = &f.body;
        for (k, &(_, i)) in path.iter().enumerate() {
            let Some(s) = list.get(i) else { break };
            for prev in &list[..i] {
                if let StmtKind::Let { var, .. } = prev.kind {
                    vars.push(var);
                }
            }
            if k + 1 == path.len() {
                sparsec_ir::walk_stmts(std::slice::from_ref(s), &mut |x| vars.extend(binders(&x.kind)));
            } else {
                vars.extend(binders(&s.kind));
                match path.get(k + 1).and_then(|&(l, _)| s.kind.child_lists().into_iter().nth(l)) {
                    Some(next) => list = next,
                    None => break,
                }
            }
        }
        let mut taken: HashSet<String> = vars.iter().filter_map(|v| f.vars.try_get(*v)).map(|v| v.name.clone()).collect();
        taken.extend(sparsec_ir::names::function_names(f));
        Fresh { taken }
    }

    /// `base` if free, else `base_1`, `base_2`, ...
    pub(crate) fn name(&mut self, base: &str) -> String {
        sparsec_ir::names::fresh_in(&mut self.taken, base)
    }
}

/// Whether a statement is the `for` loop over `v`.
pub(crate) fn is_loop_over(s: &Stmt, v: VarId) -> bool {
    matches!(&s.kind, StmtKind::For(l) if l.var == v)
}
