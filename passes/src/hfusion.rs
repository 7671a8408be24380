//! `horizontal_fusion`: independent GPU kernels of a function become one launch.
//!
//! A kernel is a top-level loop bound to `blockIdx.x`. Each run of consecutive kernels that
//! do not depend on each other becomes one loop over the sum of their `blockIdx.x` extents;
//! kernel `k` runs where `e_1 + ... + e_{k-1} <= bx < e_1 + ... + e_k`, with its block index
//! offset accordingly. Thread loops (`threadIdx.*`) are padded to the largest extent of their
//! tag in the run and guarded, so the fused kernel has one block shape.
//!
//! Two kernels are independent when no buffer one writes is read or written by the other,
//! except that updates by `atomic_add` alone commute (the buckets of a hyb SpMM all add into
//! the same output).

use crate::build::{add, bin, sub};
use crate::simplify::{simplify_expr, substitute_stmts};
use crate::PassError;
use sparsec_ir::expr::{BinOp, Expr};
use sparsec_ir::func::{For, Func, Stmt, StmtKind, Storage};
use sparsec_ir::{walk_stmts, Attrs, ForKind, Stage, ThreadTag};
use std::collections::{HashMap, HashSet};

/// Fuses runs of independent `blockIdx.x` kernels into single launches.
pub fn horizontal_fusion(f: &Func) -> Result<Func, PassError> {
    run(crate::verified_input("horizontal_fusion", f)?)
}

/// [`horizontal_fusion`] on verified input (the pass manager's entry).
pub(crate) fn run(f: sparsec_ir::verify::Verified<'_>) -> Result<Func, PassError> {
    if f.stage == Stage::I {
        return Err(PassError::WrongStage { pass: "horizontal_fusion", expected: Stage::II, found: Stage::I });
    }
    let mut out = f.func().clone();
    let body = std::mem::take(&mut out.body);
    let mut fused: Vec<Stmt> = Vec::new();
    let mut run: Vec<Stmt> = Vec::new();
    for s in body {
        if !is_kernel(&s) {
            flush(&out, &mut run, &mut fused)?;
            fused.push(s);
            continue;
        }
        if run.iter().any(|k| conflict(&out, k, &s)) {
            flush(&out, &mut run, &mut fused)?;
        }
        run.push(s);
    }
    flush(&out, &mut run, &mut fused)?;
    out.body = fused;
    Ok(out)
}

fn is_kernel(s: &Stmt) -> bool {
    matches!(&s.kind, StmtKind::For(l) if l.kind == ForKind::Thread(ThreadTag::BlockIdxX))
}

/// Where the data of a buffer lives: its parameter, or the buffer itself if allocated.
fn storage_key(f: &Func, b: sparsec_ir::BufferId) -> (bool, usize) {
    match f.buffers.try_get(b).map(|x| x.storage) {
        Some(Storage::Param(p)) => (true, p),
        _ => (false, b.index()),
    }
}

/// Storage read, written by plain stores, and updated atomically by a statement.
fn effects(f: &Func, s: &Stmt) -> (HashSet<(bool, usize)>, HashSet<(bool, usize)>, HashSet<(bool, usize)>) {
    let (mut reads, mut writes, mut atomics) = (HashSet::new(), HashSet::new(), HashSet::new());
    walk_stmts(std::slice::from_ref(s), &mut |x| {
        if let StmtKind::Store { buffer, .. } = &x.kind {
            writes.insert(storage_key(f, *buffer));
        }
        for e in x.kind.exprs() {
            e.walk(&mut |y| match y {
                Expr::Load(b, _) => {
                    reads.insert(storage_key(f, *b));
                }
                Expr::AtomicAdd(b, _, _) => {
                    atomics.insert(storage_key(f, *b));
                }
                _ => {}
            });
        }
    });
    (reads, writes, atomics)
}

/// Whether two kernels must stay in order.
fn conflict(f: &Func, a: &Stmt, b: &Stmt) -> bool {
    let (ra, wa, xa) = effects(f, a);
    let (rb, wb, xb) = effects(f, b);
    let touches = |r: &HashSet<_>, w: &HashSet<_>, x: &HashSet<_>, k| r.contains(k) || w.contains(k) || x.contains(k);
    // A plain write meets anything; an atomic update meets reads and plain writes.
    wa.iter().any(|k| touches(&rb, &wb, &xb, k))
        || wb.iter().any(|k| touches(&ra, &wa, &xa, k))
        || xa.iter().any(|k| rb.contains(k))
        || xb.iter().any(|k| ra.contains(k))
}

/// Replaces the current run by its fusion (a single kernel stays as it is). A fusion that
/// does not verify stays unfused: widening a thread loop can make a block binding that uses
/// it reach a point twice (`k0 * 32 + k1` with `k1` padded to 64), which the guard prevents
/// at run time but the verifier cannot see.
fn flush(f: &Func, run: &mut Vec<Stmt>, out: &mut Vec<Stmt>) -> Result<(), PassError> {
    match run.len() {
        0 => {}
        1 => out.append(run),
        _ => {
            let fused = fuse(f, run.clone())?;
            let mut g = f.clone();
            g.body = out.clone();
            g.body.push(fused.clone());
            if sparsec_ir::verify::verify_func(&g).is_ok() {
                out.push(fused);
                run.clear();
            } else {
                out.append(run);
            }
        }
    }
    Ok(())
}

fn fuse(f: &Func, kernels: Vec<Stmt>) -> Result<Stmt, PassError> {
    let loops: Vec<For> = kernels
        .into_iter()
        .map(|s| match s.kind {
            StmtKind::For(l) => l,
            _ => unreachable!("only kernels are fused"),
        })
        .collect();
    // Largest extent per thread tag, over the whole run.
    let mut widest: HashMap<ThreadTag, Expr> = HashMap::new();
    for l in &loops {
        walk_stmts(&l.body, &mut |s| {
            if let StmtKind::For(inner) = &s.kind {
                if let ForKind::Thread(t) = inner.kind {
                    let e = widest.remove(&t).map_or(inner.extent.clone(), |w| {
                        if w == inner.extent {
                            w
                        } else {
                            simplify_expr(bin(f, BinOp::Max, w, inner.extent.clone()))
                        }
                    });
                    widest.insert(t, e);
                }
            }
        });
        if widest.keys().any(|t| t.is_block()) {
            return Err(PassError::Unsupported {
                pass: "horizontal_fusion",
                what: "kernels with blockIdx.y or blockIdx.z loops".into(),
            });
        }
    }
    let var = loops[0].var;
    let total = loops.iter().skip(1).fold(loops[0].extent.clone(), |acc, l| add(f, acc, l.extent.clone()));
    let bx = Expr::Var(var);
    // Branches from the last kernel up: if bx < end_k { kernel k } else { ... }.
    let mut starts = vec![loops[0].min.clone()];
    for l in &loops[..loops.len() - 1] {
        let next = add(f, starts.last().cloned().expect("non-empty"), l.extent.clone());
        starts.push(simplify_expr(next));
    }
    let mut chain: Vec<Stmt> = Vec::new();
    for (k, l) in loops.iter().enumerate().rev() {
        let mut body = l.body.clone();
        // This kernel's block index, counted from its own start.
        let own = simplify_expr(add(f, sub(f, bx.clone(), starts[k].clone()), l.min.clone()));
        if l.var != var {
            substitute_stmts(&mut body, &HashMap::from([(l.var, own.clone())]));
        }
        pad_threads(f, &mut body, &widest);
        chain = if k + 1 == loops.len() {
            body
        } else {
            let end = simplify_expr(add(f, starts[k].clone(), l.extent.clone()));
            vec![Stmt::new(StmtKind::If { cond: bin(f, BinOp::Lt, bx.clone(), end), then_body: body, else_body: chain })]
        };
    }
    Ok(Stmt::new(StmtKind::For(For {
        var,
        min: loops[0].min.clone(),
        extent: simplify_expr(total),
        kind: ForKind::Thread(ThreadTag::BlockIdxX),
        body: chain,
        attrs: Attrs::new(),
    })))
}

/// Widens every thread loop to its tag's widest extent and guards the extra threads.
fn pad_threads(f: &Func, stmts: &mut [Stmt], widest: &HashMap<ThreadTag, Expr>) {
    for s in stmts.iter_mut() {
        if let StmtKind::For(l) = &mut s.kind {
            if let ForKind::Thread(t) = l.kind {
                if let Some(w) = widest.get(&t) {
                    if *w != l.extent {
                        let end = add(f, l.min.clone(), l.extent.clone());
                        let guard = bin(f, BinOp::Lt, Expr::Var(l.var), simplify_expr(end));
                        let body = std::mem::take(&mut l.body);
                        l.body = vec![Stmt::new(StmtKind::If { cond: guard, then_body: body, else_body: vec![] })];
                        l.extent = w.clone();
                    }
                }
            }
        }
        for child in s.kind.child_lists_mut() {
            pad_threads(f, child, widest);
        }
    }
}
