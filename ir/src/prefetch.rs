//! Software prefetch of gathers: the loop annotation and the loads it covers.
//!
//! A serial loop annotated [`PREFETCH_DISTANCE_ATTR`] `= d` asks compiled code to prefetch,
//! at the start of each iteration `v`, what the loop's *gathers* will read `d` iterations
//! later. A gather of loop variable `v` is a load whose index reads an element that `v`
//! picks: `B[J[p + v], k]` (SpMM's row of B), `X[J[p + v]]` (SpMV), not `A[p + v]` (a
//! stream the hardware prefetches) nor `A[W[i] + v]` (the read of `W` does not move with
//! `v`). The element `d` iterations ahead is found by evaluating the index with `v + d`,
//! every read inside the index clamped to its array, so the look-ahead crosses into later
//! rows and never leaves an array. [`PREFETCH_MIN_BYTES_ATTR`] `= n` limits it to calls where
//! a gathered array holds at least `n` bytes (beyond the caches prefetching only costs).
//!
//! A hint to code generation: the meaning of the loop is unchanged, and the interpreter
//! and the GPU backends ignore it.

use crate::expr::Expr;
use crate::func::{Stmt, StmtKind, VarId};
use std::collections::HashSet;

/// Annotation of a serial loop: how many iterations ahead compiled code prefetches what the
/// loop's gathers read (module documentation).
pub const PREFETCH_DISTANCE_ATTR: &str = "prefetch_distance";

/// Annotation beside [`PREFETCH_DISTANCE_ATTR`]: the least size in bytes of a gathered
/// array from which a call prefetches.
pub const PREFETCH_MIN_BYTES_ATTR: &str = "prefetch_min_bytes";

/// A definition in scope at a gather, in the order the loop body makes them: a block
/// iterator's binding or a `let`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Binding<'f> {
    /// The variable defined.
    pub var: VarId,
    /// Its value.
    pub value: &'f Expr,
}

/// A gather found in a loop body.
#[derive(Clone, Debug, PartialEq)]
pub struct Gather<'f> {
    /// The load (`Expr::Load`).
    pub load: &'f Expr,
    /// The block iterators and `let`s in scope at the load, outermost first.
    pub scope: Vec<Binding<'f>>,
}

/// The gathers of `var` among the loads that `stmts` run on every iteration: in stores,
/// `let`s and evaluated expressions, inside blocks (not their `init`), not under a loop or
/// a condition. Each load appears once.
pub fn gathers<'f>(stmts: &'f [Stmt], var: VarId) -> Vec<Gather<'f>> {
    let mut deps = HashSet::from([var]);
    let mut out = Vec::new();
    collect(stmts, false, &mut deps, &mut Vec::new(), &mut out);
    out.retain(|g| ahead_computable(g, stmts));
    out
}

/// Whether the address of gather `g` can be computed iterations ahead at the top of the
/// loop whose body is `stmts`: it reads, directly or through the definitions in scope it
/// uses, no buffer the body writes or allocates (a binary search's cursor, a cache).
fn ahead_computable(g: &Gather<'_>, stmts: &[Stmt]) -> bool {
    let mut changing: HashSet<crate::func::BufferId> = crate::func::written_buffers(stmts).into_iter().collect();
    crate::walk_stmts(stmts, &mut |s| {
        if let StmtKind::Alloc(b) = s.kind {
            changing.insert(b);
        }
    });
    let Expr::Load(_, idx) = g.load else { return false };
    // The index, and each definition it uses (once), checked for reads of changing buffers.
    let mut exprs: Vec<&Expr> = idx.iter().collect();
    let mut taken = vec![false; g.scope.len()];
    let mut ok = true;
    while let Some(e) = exprs.pop() {
        let mut used: HashSet<VarId> = HashSet::new();
        e.walk(&mut |x| match x {
            Expr::Load(b, _) | Expr::AtomicAdd(b, ..) => ok &= !changing.contains(b),
            Expr::Var(v) => {
                used.insert(*v);
            }
            _ => {}
        });
        for (k, b) in g.scope.iter().enumerate() {
            if used.contains(&b.var) && !taken[k] {
                taken[k] = true;
                exprs.push(b.value);
            }
        }
    }
    ok
}

/// Whether `stmts` hold a gather of `var` anywhere, under loops and conditions too (where
/// a register tile of SpMM reads its rows of B: inside the feature loop).
pub fn has_gather(stmts: &[Stmt], var: VarId) -> bool {
    let mut deps = HashSet::from([var]);
    let mut out = Vec::new();
    collect(stmts, true, &mut deps, &mut Vec::new(), &mut out);
    out.iter().any(|g| ahead_computable(g, stmts))
}

/// Whether the load `e` is a gather of the variables in `deps`: its index reads an element
/// whose own index mentions one of them.
pub fn is_gather(e: &Expr, deps: &HashSet<VarId>) -> bool {
    let Expr::Load(_, idx) = e else { return false };
    let mut hit = false;
    for i in idx {
        i.walk(&mut |x| {
            if let Expr::Load(_, inner) = x {
                hit |= inner.iter().any(|j| mentions(j, deps));
            }
        });
    }
    hit
}

fn mentions(e: &Expr, deps: &HashSet<VarId>) -> bool {
    let mut hit = false;
    e.walk(&mut |x| hit |= matches!(x, Expr::Var(v) if deps.contains(v)));
    hit
}

fn collect<'f>(stmts: &'f [Stmt], deep: bool, deps: &mut HashSet<VarId>, scope: &mut Vec<Binding<'f>>, out: &mut Vec<Gather<'f>>) {
    let depth = scope.len();
    for s in stmts {
        let mut add = |e: &'f Expr, scope: &Vec<Binding<'f>>, deps: &HashSet<VarId>| {
            e.walk(&mut |x| {
                if is_gather(x, deps) && !out.iter().any(|g: &Gather<'f>| g.load == x) {
                    out.push(Gather { load: x, scope: scope.clone() });
                }
            })
        };
        match &s.kind {
            StmtKind::Store { indices, value, .. } => {
                for e in indices.iter().chain([value]) {
                    add(e, scope, deps);
                }
            }
            StmtKind::Evaluate(e) => add(e, scope, deps),
            StmtKind::Let { var, value } => {
                add(value, scope, deps);
                if mentions(value, deps) {
                    deps.insert(*var);
                }
                scope.push(Binding { var: *var, value });
            }
            StmtKind::Block(b) => {
                let inner = scope.len();
                for it in &b.iters {
                    if mentions(&it.binding, deps) {
                        deps.insert(it.var);
                    }
                    scope.push(Binding { var: it.var, value: &it.binding });
                }
                collect(&b.body, deep, deps, scope, out);
                scope.truncate(inner);
            }
            StmtKind::For(l) if deep => collect(&l.body, deep, deps, scope, out),
            StmtKind::If { then_body, else_body, .. } if deep => {
                collect(then_body, deep, deps, scope, out);
                collect(else_body, deep, deps, scope, out);
            }
            StmtKind::While { body, .. } if deep => collect(body, deep, deps, scope, out),
            _ => {}
        }
    }
    scope.truncate(depth);
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse_func;

    fn body_of_loop<'f>(f: &'f crate::Func, name: &str) -> (&'f [Stmt], VarId) {
        fn find<'f>(f: &crate::Func, stmts: &'f [Stmt], name: &str) -> Option<&'f crate::For> {
            stmts.iter().find_map(|s| match &s.kind {
                StmtKind::For(l) if f.vars[l.var].name == name => Some(l),
                StmtKind::For(l) => find(f, &l.body, name),
                StmtKind::Block(b) => find(f, &b.body, name),
                _ => None,
            })
        }
        let l = find(f, &f.body, name).expect("the loop exists");
        (&l.body, l.var)
    }

    #[test]
    fn gathers_are_loads_through_an_index_the_loop_variable_picks() {
        let text = "func g(a: handle, x: handle, y: handle, p: handle, c: handle, m: i32, nnz: i32, n: i32) stage III {
  buffer A = match_buffer(a, [nnz], f32)
  buffer X = match_buffer(x, [n], f32)
  buffer Y = match_buffer(y, [m], f32)
  buffer P = match_buffer(p, [m + 1], i32)
  buffer C = match_buffer(c, [nnz], i32)
  for i in serial(m) {
    for j in serial(P[i + 1] - P[i]) {
      block b(vi: spatial(m) = i, vj: reduce(n) = j) {
        reads(A[0:nnz], X[0:n], P[0:m + 1], C[0:nnz], Y[vi])
        writes(Y[vi])
        let q = P[vi] + vj
        Y[vi] = Y[vi] + A[q] * X[C[q]] + X[P[vi]]
      }
    }
  }
}";
        let f = parse_func("g.sptir", text).unwrap();
        let (body, j) = body_of_loop(&f, "j");
        let found = gathers(body, j);
        let printed: Vec<String> = found.iter().map(|g| crate::text::print_expr(&f, g.load)).collect();
        // X[C[q]] moves with j through `q`; A[q] is a stream; X[P[vi]] does not move with j.
        assert_eq!(printed, vec!["X[C[q]]".to_string()]);
        let names: Vec<&str> = found[0].scope.iter().map(|b| f.vars[b.var].name.as_str()).collect();
        assert_eq!(names, vec!["vi", "vj", "q"]);
        // A gather whose address goes through state the body computes (a search's cursor)
        // cannot be evaluated ahead: it is none.
        let text = text.replace("let q = P[vi] + vj", "buffer L = alloc_buffer([1], i32, local)\n        L[0] = P[vi]\n        let q = L[0] + vj");
        let g2 = parse_func("g.sptir", &text).unwrap();
        let (body2, j2) = body_of_loop(&g2, "j");
        assert!(gathers(body2, j2).is_empty() && !has_gather(body2, j2));
        let all = {
            let mut deps = HashSet::from([j2]);
            let mut out = Vec::new();
            collect(body2, false, &mut deps, &mut Vec::new(), &mut out);
            out.len()
        };
        assert_eq!(all, 1, "X[C[q]] still moves with j; only its address is not computable ahead");
        // The row loop's body holds the nonzero loop, whose loads are that loop's.
        let (body, i) = body_of_loop(&f, "i");
        assert!(gathers(body, i).is_empty(), "gathers under a nested loop are not the outer loop's");
        assert!(has_gather(body, i), "X[P[vi]] moves with i");
        let (body, j) = body_of_loop(&f, "j");
        assert!(has_gather(body, j));
    }
}
