//! Reads/writes regions of each block: every access in the block's subtree, with index
//! expressions that use variables bound inside the block widened to the whole dimension.
//! Buffers allocated inside the block are left out.

use sparsec_ir::expr::Expr;
use sparsec_ir::func::{Block, BufferId, Func, Layout, Region, RegionRange, Stmt, StmtKind, VarId};
use crate::scope::{bound_inside, depends_on};
use sparsec_ir::AxisKind;
use std::collections::HashSet;

/// Fills in `reads` and `writes` of every block of `f`.
pub fn annotate(f: &mut Func) {
    let mut body = std::mem::take(&mut f.body);
    annotate_list(f, &mut body);
    f.body = body;
}

fn annotate_list(f: &Func, stmts: &mut [Stmt]) {
    for s in stmts {
        if let StmtKind::Block(b) = &mut s.kind {
            let (reads, writes) = block_regions(f, b);
            b.reads = reads;
            b.writes = writes;
        }
        for child in s.kind.child_lists_mut() {
            annotate_list(f, child);
        }
    }
}

#[derive(Default)]
struct Collect {
    /// Variables bound inside the block (loops, lets, inner block iterators).
    inner: HashSet<VarId>,
    /// Buffers allocated inside the block.
    local: HashSet<BufferId>,
    reads: Vec<(BufferId, Vec<Expr>)>,
    writes: Vec<(BufferId, Vec<Expr>)>,
}

fn block_regions(f: &Func, b: &Block) -> (Vec<Region>, Vec<Region>) {
    let mut c = Collect::default();
    for list in b.init.iter().chain(std::iter::once(&b.body)) {
        let (vars, bufs) = bound_inside(list);
        c.inner.extend(vars);
        c.local.extend(bufs);
    }
    for list in b.init.iter().chain(std::iter::once(&b.body)) {
        accesses(list, &mut c);
    }
    let to_regions = |acc: &[(BufferId, Vec<Expr>)]| {
        let mut out: Vec<Region> = Vec::new();
        for (buf, idx) in acc {
            if c.local.contains(buf) {
                continue;
            }
            let ranges = idx
                .iter()
                .enumerate()
                .map(|(d, e)| {
                    if depends_on(e, &c.inner, &c.local) {
                        RegionRange { begin: Expr::Int(0, f.expr_dtype(e)), end: Some(dim_extent(f, *buf, d)) }
                    } else {
                        RegionRange { begin: e.clone(), end: None }
                    }
                })
                .collect();
            let r = Region { buffer: *buf, ranges };
            if !out.contains(&r) {
                out.push(r);
            }
        }
        out
    };
    (to_regions(&c.reads), to_regions(&c.writes))
}

fn dim_extent(f: &Func, b: BufferId, d: usize) -> Expr {
    match &f.buffers[b].layout {
        Layout::Dense(shape) => shape[d].clone(),
        Layout::Sparse(axes) => {
            let a = &f.axes[axes[d]];
            match a.kind {
                AxisKind::SparseFixed => a.nnz.clone().unwrap_or(Expr::i32(0)),
                _ => a.length.clone(),
            }
        }
    }
}



fn accesses(stmts: &[Stmt], c: &mut Collect) {
    sparsec_ir::walk_stmts(stmts, &mut |s| {
        if let StmtKind::Store { buffer, indices, .. } = &s.kind {
            c.writes.push((*buffer, indices.clone()));
        }
        for e in s.kind.exprs() {
            e.walk(&mut |x| match x {
                Expr::Load(b, idx) => c.reads.push((*b, idx.clone())),
                Expr::AtomicAdd(b, idx, _) => {
                    c.reads.push((*b, idx.clone()));
                    c.writes.push((*b, idx.clone()));
                }
                _ => {}
            });
        }
    });
}
