//! `lower_sparse_iter`: Stage I → Stage II.
//!
//! Each sparse iteration becomes nested loops and blocks in position space, following
//! section 3.3 of the SparseTIR paper. The work is split into sub-passes, one module each:
//!
//! * [`aux`] — `indptr`/`indices` as auxiliary sparse buffers, dense twins of sparse axes;
//! * [`blocks`] — grouping iterators into blocks, the loops and their extents, fused rows;
//! * [`access`] — coordinate → position translation of buffer accesses, and guards;
//! * [`search`] — explicit binary searches (coordinate lookups, fused-row recovery) and
//!   position maps (lookups a schedule gave a workspace, [`sparsec_ir::WORKSPACE_ATTR`]);
//! * [`regions`] — the reads/writes regions of each block.
//!
//! The `init` of a sparse iteration becomes its own loop nest over the spatial iterators,
//! placed right before the loops of the block holding the first reduction iterator. SparseTIR
//! puts it inside that block, where it never runs for an empty row; here every output is
//! initialised exactly once, as at Stage I.

mod access;
mod aux;
mod blocks;
mod regions;
mod search;

use crate::build::Namer;
use crate::PassError;
use sparsec_ir::func::{AxisId, Func, ParamKind, Stmt, StmtKind, VarId};
use sparsec_ir::verify::Verified;
use sparsec_ir::{Arena, Expr, Layout, Stage};
use std::collections::HashMap;

/// Lowers a Stage-I function to Stage II.
pub fn lower_sparse_iter(f: &Func) -> Result<Func, PassError> {
    run(crate::verified_input("lower_sparse_iter", f)?)
}

/// [`lower_sparse_iter`] on verified input (the pass manager's entry).
pub(crate) fn run(f: Verified<'_>) -> Result<Func, PassError> {
    if f.stage != Stage::I {
        return Err(PassError::WrongStage { pass: "lower_sparse_iter", expected: Stage::I, found: f.stage });
    }
    // A function that assembles a sparse output first fills the coordinates of its pattern.
    if !crate::assemble::assembled_axes(&f).is_empty() {
        let filled = crate::assemble::fill_iterations(&f);
        let filled = sparsec_ir::verify::verified(&filled).map_err(|errors| PassError::InvalidOutput {
            pass: "lower_sparse_iter (filling an assembled axis)",
            errors,
        })?;
        return lower(filled);
    }
    lower(f)
}

fn lower(f: Verified<'_>) -> Result<Func, PassError> {
    let mut l = Lowerer::new(f);
    let body = l.stmts(&f.body)?;
    l.out.body = body;
    regions::annotate(&mut l.out);
    crate::simplify::simplify_func(&mut l.out);
    Ok(l.out)
}

/// What the lowering knows about one Stage-I iterator while its loops are open.
#[derive(Clone, Debug)]
struct IterInfo {
    /// The Stage-I iterator variable.
    var: VarId,
    /// The axis it iterates.
    axis: AxisId,
    /// Position within its row (a block variable or a `let`).
    pos: Expr,
    /// Its coordinate, in Stage-II terms.
    coord: Expr,
    /// Positions from the root axis down to this one; indexes the auxiliary buffers.
    chain: Vec<Expr>,
    /// The Stage-I iterator whose value picks this iterator's row (parent, or attach target).
    row_src: Option<VarId>,
    /// A co-iteration's members: each axis, its cursor's position, and whether the cursor
    /// stands at the iterator's coordinate (empty for other iterators, whose `pos` is theirs).
    merged: Vec<(AxisId, Expr, Expr)>,
}

/// State of the lowering of one function.
pub(crate) struct Lowerer<'a> {
    src: Verified<'a>,
    out: Func,
    namer: Namer,
    /// Stage-I variables (parameters, `let`s) → Stage-II variables.
    var_map: HashMap<VarId, VarId>,
    aux: aux::Aux,
    /// Iterators in scope, innermost last.
    iters: Vec<IterInfo>,
    /// Block names used so far (kept unique for `get_block`).
    block_names: std::collections::HashSet<String>,
    /// Inside a store: the coordinates looked up so far (axis, row, coordinate) with their
    /// position and found condition, reused by a second access at the same coordinate.
    lookups: Option<Vec<((AxisId, Vec<Expr>, Expr), (Expr, Expr))>>,
    /// The position maps filled for the rows now open (innermost last).
    maps: Vec<PositionMap>,
}

/// A position map ([`sparsec_ir::WORKSPACE_ATTR`]) of a sparse axis, filled for one row: the
/// lookups of a coordinate in that row read its position from the map.
#[derive(Clone, Debug)]
struct PositionMap {
    /// The sparse axis.
    axis: AxisId,
    /// The map: one element per coordinate (and one more), holding a position in the row.
    buffer: sparsec_ir::BufferId,
    /// The row it holds (positions of the parent levels, as accesses inside the row's block
    /// write them).
    row: Vec<Expr>,
}

impl<'a> Lowerer<'a> {
    fn new(src: Verified<'a>) -> Self {
        let mut out = src.func().clone();
        out.stage = Stage::II;
        out.vars = Arena::new();
        out.body = Vec::new();
        let mut var_map = HashMap::new();
        for p in out.params.iter_mut() {
            if let ParamKind::Scalar(v) = p.kind {
                let nv = out.vars.append(src.vars[v].clone());
                var_map.insert(v, nv);
                p.kind = ParamKind::Scalar(nv);
            }
        }
        let remap = |e: &Expr| remap_vars(e.clone(), &var_map);
        for (_, a) in out.axes.iter_mut() {
            a.length = remap(&a.length);
            a.nnz = a.nnz.as_ref().map(remap);
        }
        for (_, b) in out.buffers.iter_mut() {
            if let Layout::Dense(shape) = &mut b.layout {
                for e in shape.iter_mut() {
                    *e = remap(e);
                }
            }
            b.extra_storage = b.extra_storage.as_ref().map(remap);
            b.default = b.default.as_ref().map(remap);
        }
        let namer = Namer::for_func(&out);
        Lowerer { src, out, namer, var_map, aux: aux::Aux::default(), iters: Vec::new(), block_names: Default::default(), lookups: None, maps: Vec::new() }
    }

    /// The innermost iterator bound to Stage-I variable `v`.
    fn iter_of(&self, v: VarId) -> Option<&IterInfo> {
        self.iters.iter().rev().find(|i| i.var == v)
    }

    /// The innermost iterator over axis `a` (a co-iteration stands for none of its members).
    fn iter_over(&self, a: AxisId) -> Option<&IterInfo> {
        self.iters.iter().rev().find(|i| i.axis == a && i.merged.is_empty())
    }

    /// Lowers a statement list into a list of its own.
    fn stmts(&mut self, stmts: &[Stmt]) -> Result<Vec<Stmt>, PassError> {
        self.stmt_lists(&[stmts])
    }

    /// Lowers statement lists one after the other into one list: its names are picked in one
    /// scope, so no binder of a later list shadows one of an earlier list.
    fn stmt_lists(&mut self, lists: &[&[Stmt]]) -> Result<Vec<Stmt>, PassError> {
        self.namer.push();
        let mut out = Vec::new();
        let r = lists.iter().flat_map(|l| l.iter()).try_for_each(|s| self.stmt(s, &mut out));
        self.namer.pop();
        r.map(|()| out)
    }

    fn stmt(&mut self, s: &Stmt, out: &mut Vec<Stmt>) -> Result<(), PassError> {
        let span = s.span;
        let push = |out: &mut Vec<Stmt>, kind| out.push(Stmt { kind, span });
        match &s.kind {
            StmtKind::SpIter(it) => {
                let mut lowered = self.sp_iter(it)?;
                // The loops and blocks made for the iteration point at it.
                sparsec_ir::fill_spans(&mut lowered, span);
                out.extend(lowered);
            }
            StmtKind::Store { buffer, indices, value } => {
                let mut pre = Vec::new();
                self.lookups = Some(Vec::new());
                let lowered = (|| -> Result<_, PassError> {
                    let value = self.expr(value, &mut pre)?;
                    let (idx, found) = self.access(*buffer, indices, &mut pre)?;
                    Ok((value, idx, found))
                })();
                self.lookups = None;
                let (value, idx, found) = lowered?;
                out.append(&mut pre);
                let st = StmtKind::Store { buffer: *buffer, indices: idx, value };
                match found {
                    None => push(out, st),
                    // A store to a coordinate outside the structure is dropped.
                    Some(cond) => push(out, StmtKind::If { cond, then_body: vec![Stmt { kind: st, span }], else_body: vec![] }),
                }
            }
            StmtKind::Evaluate(e) => {
                let mut pre = Vec::new();
                let e = self.expr(e, &mut pre)?;
                out.append(&mut pre);
                push(out, StmtKind::Evaluate(e));
            }
            StmtKind::Let { var, value } => {
                let mut pre = Vec::new();
                let value = self.expr(value, &mut pre)?;
                out.append(&mut pre);
                let v = self.src.vars[*var].clone();
                let nv = self.out.add_var(self.namer.var(&v.name), v.dtype);
                self.var_map.insert(*var, nv);
                push(out, StmtKind::Let { var: nv, value });
            }
            StmtKind::If { cond, then_body, else_body } => {
                let mut pre = Vec::new();
                let cond = self.expr(cond, &mut pre)?;
                out.append(&mut pre);
                let then_body = self.stmts(then_body)?;
                let else_body = self.stmts(else_body)?;
                push(out, StmtKind::If { cond, then_body, else_body });
            }
            StmtKind::While { cond, body } => {
                let mut pre = Vec::new();
                let cond = self.expr(cond, &mut pre)?;
                if !pre.is_empty() {
                    return Err(PassError::Unsupported {
                        pass: "lower_sparse_iter",
                        what: "a coordinate lookup in a `while` condition".into(),
                    });
                }
                let body = self.stmts(body)?;
                push(out, StmtKind::While { cond, body });
            }
            StmtKind::Alloc(b) => push(out, StmtKind::Alloc(*b)),
            StmtKind::For(_) | StmtKind::Block(_) => {
                return Err(PassError::WrongStage { pass: "lower_sparse_iter", expected: Stage::I, found: Stage::II })
            }
        }
        Ok(())
    }
}

/// Replaces variables according to `map` (others stay).
fn remap_vars(e: Expr, map: &HashMap<VarId, VarId>) -> Expr {
    e.map(&mut |x| match x {
        Expr::Var(v) => Expr::Var(*map.get(&v).unwrap_or(&v)),
        other => other,
    })
}
