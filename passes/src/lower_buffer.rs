//! `lower_sparse_buffer`: Stage II → Stage III.
//!
//! Sparse buffers disappear; the axes stay as the record of the arguments' sparse structure
//! (which parameters are row pointers and coordinates, of which lengths), so that a Stage-III
//! program alone tells a backend what to validate. Every buffer becomes a flat 1-D buffer of its exact
//! storage length (declared from the parameters), and every access becomes one offset by the
//! storage rule: a fixed axis does `off * extent + pos`, a variable axis `indptr[off] + pos`,
//! and dense buffers are row-major.

use crate::build::{add, mul};
use crate::simplify::{simplify_expr, simplify_func};
use crate::PassError;
use sparsec_ir::expr::Expr;
use sparsec_ir::func::{AxisId, Buffer, BufferId, Func, Layout, ParamId, Region, RegionRange, Stmt, StmtKind, Storage};
use sparsec_ir::verify::Verified;
use sparsec_ir::{Arena, AxisKind, Span, Stage};
use std::collections::HashMap;

/// Lowers a Stage-II function to Stage III.
pub fn lower_sparse_buffer(f: &Func) -> Result<Func, PassError> {
    run(crate::verified_input("lower_sparse_buffer", f)?)
}

/// [`lower_sparse_buffer`] on verified input (the pass manager's entry).
pub(crate) fn run(f: Verified<'_>) -> Result<Func, PassError> {
    if f.stage != Stage::II {
        return Err(PassError::WrongStage { pass: "lower_sparse_buffer", expected: Stage::II, found: f.stage });
    }
    let mut l = Flattener { src: f, out: f.func().clone(), indptr: HashMap::new() };
    l.out.stage = Stage::III;
    l.out.buffers = Arena::new();
    // Same handles: buffer i of the output is buffer i of the input, flattened.
    for (_, b) in f.buffers.iter() {
        let size = l.storage_size(b);
        l.out.buffers.append(Buffer {
            name: b.name.clone(),
            dtype: b.dtype,
            layout: Layout::Dense(vec![simplify_expr(size)]),
            storage: b.storage,
            extra_storage: None,
            default: b.default.clone(),
            modes: None,
            span: b.span,
        });
    }
    let mut body = f.body.clone();
    l.stmts(&mut body);
    l.out.body = body;
    simplify_func(&mut l.out);
    Ok(l.out)
}

struct Flattener<'a> {
    /// The input, verified: its variable axes have row pointers and parents.
    src: Verified<'a>,
    out: Func,
    /// Flat buffer holding each variable axis's row pointers.
    indptr: HashMap<AxisId, BufferId>,
}

impl Flattener<'_> {
    /// Exact number of elements of a buffer.
    fn storage_size(&self, b: &Buffer) -> Expr {
        let f = self.src.func();
        let mut size = match &b.layout {
            Layout::Dense(shape) => {
                let mut it = shape.iter().cloned();
                let first = it.next().unwrap_or(Expr::i32(1));
                it.fold(first, |acc, d| mul(f, acc, d))
            }
            Layout::Sparse(axes) => {
                let mut size = Expr::i32(1);
                for &a in axes {
                    let axis = &f.axes[a];
                    size = match axis.kind {
                        AxisKind::DenseFixed => mul(f, size, axis.length.clone()),
                        AxisKind::SparseFixed => mul(f, size, axis.nnz.clone().unwrap_or(Expr::i32(0))),
                        AxisKind::DenseVariable | AxisKind::SparseVariable => {
                            axis.nnz.clone().unwrap_or(Expr::i32(0))
                        }
                    };
                }
                size
            }
        };
        if let Some(extra) = &b.extra_storage {
            size = add(f, size, extra.clone());
        }
        size
    }

    /// A flat buffer bound to the `indptr` parameter of variable axis `a`.
    fn indptr_of(&mut self, a: AxisId) -> BufferId {
        if let Some(&b) = self.indptr.get(&a) {
            return b;
        }
        let axis = self.src.axes[a].clone();
        let param: ParamId = axis.indptr.expect("verified: variable axes have indptr");
        let existing = self.out.buffers.iter().find(|(_, b)| b.storage == Storage::Param(param)).map(|(h, _)| h);
        let b = existing.unwrap_or_else(|| {
            // Rows of `a` = flat positions of its parent.
            let parent = axis.parent.expect("verified: variable axes have a parent");
            let mut chain = vec![parent];
            while let Some(p) = self.src.axes[*chain.last().expect("non-empty")].parent {
                chain.push(p);
            }
            chain.reverse();
            let probe = Buffer {
                name: String::new(),
                dtype: axis.idtype,
                layout: Layout::Sparse(chain),
                storage: Storage::Param(param),
                extra_storage: Some(Expr::Int(1, axis.idtype)),
                default: None,
                modes: None,
                span: Span::NONE,
            };
            let size = simplify_expr(self.storage_size(&probe));
            let names: Vec<String> = self.out.buffers.iter().map(|(_, b)| b.name.clone()).collect();
            let mut name = format!("{}_indptr", axis.name);
            while names.contains(&name) {
                name.push('_');
            }
            self.out.buffers.append(Buffer { name, layout: Layout::Dense(vec![size]), extra_storage: None, ..probe })
        });
        self.indptr.insert(a, b);
        b
    }

    /// The flat offset of an access. Dtypes are taken in the output, which holds the
    /// `indptr` buffers this pass adds.
    fn offset(&mut self, b: BufferId, idx: Vec<Expr>) -> Expr {
        let layout = self.src.buffers[b].layout.clone();
        let src = self.src.func();
        let mut off: Option<Expr> = None;
        match layout {
            Layout::Dense(shape) => {
                let f = &self.out;
                for (d, p) in shape.iter().zip(idx) {
                    off = Some(match off {
                        None => p,
                        Some(o) => add(f, mul(f, o, d.clone()), p),
                    });
                }
            }
            Layout::Sparse(axes) => {
                for (&a, p) in axes.iter().zip(idx) {
                    let axis = &src.axes[a];
                    off = Some(match (axis.kind, off) {
                        (AxisKind::DenseVariable | AxisKind::SparseVariable, o) => {
                            let ip = self.indptr_of(a);
                            let row = o.unwrap_or(Expr::Int(0, axis.idtype));
                            add(&self.out, Expr::Load(ip, vec![row]), p)
                        }
                        (_, None) => p,
                        (kind, Some(o)) => {
                            let extent = if kind == AxisKind::SparseFixed {
                                axis.nnz.clone().unwrap_or(Expr::i32(0))
                            } else {
                                axis.length.clone()
                            };
                            let f = &self.out;
                            add(f, mul(f, o, extent), p)
                        }
                    });
                }
            }
        }
        simplify_expr(off.unwrap_or(Expr::i32(0)))
    }

    fn expr(&mut self, e: Expr) -> Expr {
        e.map(&mut |x| match x {
            Expr::Load(b, idx) => {
                let o = self.offset(b, idx);
                Expr::Load(b, vec![o])
            }
            Expr::AtomicAdd(b, idx, v) => {
                let o = self.offset(b, idx);
                Expr::AtomicAdd(b, vec![o], v)
            }
            other => other,
        })
    }

    fn region(&mut self, r: Region) -> Region {
        let whole = r.ranges.iter().any(|rr| rr.end.is_some());
        let range = if whole {
            let Layout::Dense(shape) = &self.out.buffers[r.buffer].layout else { unreachable!("flattened") };
            RegionRange { begin: Expr::i32(0), end: Some(shape[0].clone()) }
        } else {
            let idx = r.ranges.into_iter().map(|rr| self.expr(rr.begin)).collect();
            RegionRange { begin: self.offset(r.buffer, idx), end: None }
        };
        Region { buffer: r.buffer, ranges: vec![range] }
    }

    fn stmts(&mut self, stmts: &mut [Stmt]) {
        for s in stmts {
            if let StmtKind::Store { buffer, indices, .. } = &mut s.kind {
                let idx: Vec<Expr> = std::mem::take(indices).into_iter().map(|e| self.expr(e)).collect();
                let o = self.offset(*buffer, idx);
                *indices = vec![o];
            }
            if let StmtKind::Block(b) = &mut s.kind {
                b.reads = std::mem::take(&mut b.reads).into_iter().map(|r| self.region(r)).collect();
                b.writes = std::mem::take(&mut b.writes).into_iter().map(|r| self.region(r)).collect();
            }
            let is_store = matches!(s.kind, StmtKind::Store { .. });
            let is_block = matches!(s.kind, StmtKind::Block(_));
            if !is_block {
                let mut first = is_store;
                s.kind.map_exprs(&mut |e| {
                    // Store indices were flattened above; the value still needs it.
                    if first {
                        first = false;
                        return e;
                    }
                    self.expr(e)
                });
            } else if let StmtKind::Block(b) = &mut s.kind {
                for it in &mut b.iters {
                    it.binding = self.expr(std::mem::replace(&mut it.binding, Expr::Bool(false)));
                    it.extent = self.expr(std::mem::replace(&mut it.extent, Expr::Bool(false)));
                }
            }
            for child in s.kind.child_lists_mut() {
                self.stmts(child);
            }
        }
    }
}
