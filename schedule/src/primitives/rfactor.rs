//! `rfactor` (Stage II/III): factors a reduction through a buffer of partial sums.

use super::Primitive;
use crate::error::ScheduleError;
use crate::reduction::{
    block_at, fresh_block_name, for_stmt, levels, list_mut, point, taken_names, uses_any, vars_in_scope, vars_of, Level,
};
use crate::schedule::{stale, BlockRv, LoopRv, Schedule, Target};
use crate::tree::{self, Path};
use serde::{Deserialize, Serialize};
use sparsec_ir::expr::{BinOp, Expr};
use sparsec_ir::func::{Block, BlockIter, Buffer, For, Layout, Region, RegionRange, Stmt, StmtKind, Storage, VarId};
use sparsec_ir::span::Span;
use sparsec_ir::{IterKind, Scope};
use sparsec_passes::build::zero;
use sparsec_passes::simplify::simplify_expr;
use std::collections::{HashMap, HashSet};

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::rfactor`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rfactor {
    /// The reduction loop factored out.
    pub r#loop: LoopRv,
    /// Where its axis goes in the factor buffer.
    pub axis: usize,
}

impl Primitive for Rfactor {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.r#loop.0]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        Ok(vec![s.rfactor(self.r#loop, self.axis)?.id()])
    }
}

impl Schedule {
    /// Factors a reduction: `lp` drives exactly one reduction iterator of a block whose body
    /// is `C[idx] = C[idx] + e`. A new dense buffer `<C>_rf` (global scope) holds partial
    /// sums: its shape is the extents of the block's spatial iterators with the extent of
    /// `lp` inserted at `factor_axis`. The block is replaced, in place, by `<name>_rf`, in
    /// which `lp` drives a new spatial iterator (the other loops of the factored iterator
    /// drive new reduction iterators) and which adds `e` into the rf buffer (its `init`
    /// zeroes it). After that nest comes the write-back block, which keeps the block's name
    /// and `init`, iterates copies of the loops driving spatial iterators plus a copy of
    /// `lp` (now a reduction), and does `C[idx] = C[idx] + C_rf[...]`.
    ///
    /// Without an `init` (the form produced by lowering, where a separate nest initialises
    /// `C` before), the write-back adds the partial sums to `C`, so the meaning is kept up
    /// to the order of the float additions. The rf buffer is allocated just before the
    /// nest, inside the enclosing block, so every instance of that block gets fresh zeroed
    /// partial sums (a function-level buffer when the nest is at the top of the function).
    /// Where the reduced buffer is allocated inside the nest (a one-element `local` cache
    /// made by `cache_write` at a loop), the loops around that allocation stay as they are:
    /// the rf buffer, the rf nest and the write-back go inside them, and the rf buffer is not
    /// indexed by the spatial iterators they bind (each of their iterations has its own).
    /// With an `init`, the write-back block runs it (TensorIR's rfactor): a spatial point
    /// whose reduction domain is empty is then initialised, which the original block would
    /// not do. Returns the rf block.
    pub fn rfactor(&mut self, lp: LoopRv, factor_axis: usize) -> Result<BlockRv> {
        const P: &str = "rfactor";
        self.need_loop_stage(P)?;
        let mut g = self.func.clone();
        let (lpath, lv) = self.loop_path(&g, lp.0)?;
        let lname = Self::var_name(&g, lv);
        // The one block under `lp` (at its scope level) whose iterators `lp` drives.
        let mut found: Vec<Path> = Vec::new();
        if let Some(s) = tree::get(&g.body, &lpath) {
            find_blocks(s, &mut lpath.clone(), &mut |p, b| {
                if b.iters.iter().any(|i| i.binding.uses_var(lv)) {
                    found.push(p.clone());
                }
            });
        }
        if found.len() != 1 {
            return Err(ScheduleError::RfactorBlocks { loop_var: lname, count: found.len() });
        }
        let bp = found.remove(0);
        let b = block_at(&g, &bp, lp.0)?;
        let spatial: Vec<BlockIter> = b.iters.iter().filter(|i| i.kind == IterKind::Spatial).cloned().collect();
        let n_sp = spatial.iter().filter(|i| i.binding.uses_var(lv)).count();
        let red: Vec<&BlockIter> =
            b.iters.iter().filter(|i| i.kind == IterKind::Reduce && i.binding.uses_var(lv)).collect();
        if n_sp != 0 || red.len() != 1 {
            return Err(ScheduleError::NotOneReduceIter {
                loop_var: lname,
                block: b.name.clone(),
                spatial: n_sp,
                reduce: red.len(),
            });
        }
        let rstar = red[0].clone();
        // The body: C[idx] = C[idx] + e.
        let not_red = |reason: &str| ScheduleError::NotAReduction { block: b.name.clone(), reason: reason.to_string() };
        let (cbuf, cidx, e) = match b.body.as_slice() {
            [Stmt { kind: StmtKind::Store { buffer, indices, value }, .. }] => {
                let e = match value {
                    Expr::Binary(BinOp::Add, x, y) => match (&**x, &**y) {
                        (Expr::Load(c, i), e) if c == buffer && i == indices => e.clone(),
                        (e, Expr::Load(c, i)) if c == buffer && i == indices => e.clone(),
                        _ => return Err(not_red("the stored value is not `C[idx] + e`")),
                    },
                    _ => return Err(not_red("the stored value is not a sum")),
                };
                (*buffer, indices.clone(), e)
            }
            _ => return Err(not_red("the body is not a single store")),
        };
        let mut reads_c = false;
        e.walk(&mut |x| {
            if let Expr::Load(c, _) | Expr::AtomicAdd(c, _, _) = x {
                reads_c |= *c == cbuf;
            }
        });
        if reads_c {
            return Err(not_red("the added value reads the reduced buffer"));
        }
        if let Some(init) = &b.init {
            let mut other = false;
            sparsec_ir::walk_stmts(init, &mut |s| {
                other |= !matches!(&s.kind, StmtKind::Store { buffer, indices, .. } if *buffer == cbuf && *indices == cidx);
            });
            if other {
                return Err(not_red("the init does more than store to the reduced element"));
            }
        }
        let mut levels = levels(&g, &bp, &b.name)?;
        // Where the reduced buffer is allocated inside the nest (a one-element cache over a
        // row's nonzero), the loops around its allocation stay: the partial sums go inside
        // them, fresh in each of their iterations, and are not indexed by what they bind.
        let alloc = tree::find_all(&g.body, &|s| matches!(s.kind, StmtKind::Alloc(x) if x == cbuf));
        let cut = match alloc.as_slice() {
            [a] => levels.iter().rposition(|(p, _)| a.len() > p.len() && a.starts_with(p)).map_or(0, |k| k + 1),
            _ => 0,
        };
        let outside: Vec<(Path, Level)> = levels.drain(..cut).collect();
        let mut fixed: HashSet<VarId> = HashSet::new();
        for (_, lvl) in &outside {
            if let Level::Loop(l) = lvl {
                if b.iters.iter().any(|i| i.kind == IterKind::Reduce && i.binding.uses_var(l.var)) {
                    return Err(ScheduleError::MixedLoop { loop_var: Self::var_name(&g, l.var), block: b.name.clone() });
                }
                fixed.insert(l.var);
            }
        }
        // The spatial iterators that index the partial sums: those not bound by the loops
        // that stay.
        let rf_spatial: Vec<BlockIter> =
            spatial.iter().filter(|i| vars_of(&i.binding).iter().any(|v| !fixed.contains(v)) || fixed.is_empty()).cloned().collect();
        if levels.is_empty() {
            return Err(stale(lp.0, "loop"));
        }
        // Classify the loops: copied into the write-back (spatial and `lp`) or not.
        let reduce_all: Vec<&BlockIter> = b.iters.iter().filter(|i| i.kind == IterKind::Reduce).collect();
        let mut copied: HashSet<VarId> = HashSet::new();
        let mut not_copied: HashSet<VarId> = HashSet::new();
        let mut spatial_loops: HashSet<VarId> = HashSet::new();
        let mut lp_for: Option<For> = None;
        for (_, lvl) in &levels {
            let Level::Loop(l) = lvl else { continue };
            let s = spatial.iter().any(|i| i.binding.uses_var(l.var));
            let r = reduce_all.iter().any(|i| i.binding.uses_var(l.var));
            if s && r {
                return Err(ScheduleError::MixedLoop { loop_var: Self::var_name(&g, l.var), block: b.name.clone() });
            }
            if l.var == lv {
                lp_for = Some(l.clone());
                copied.insert(l.var);
            } else if s {
                copied.insert(l.var);
                spatial_loops.insert(l.var);
            } else {
                not_copied.insert(l.var);
            }
        }
        let lp_for = lp_for.ok_or_else(|| stale(lp.0, "loop"))?;
        for (_, lvl) in &levels {
            if let Level::Loop(l) = lvl {
                if copied.contains(&l.var) {
                    if let Some(v) = vars_of(&l.min).into_iter().chain(vars_of(&l.extent)).find(|v| not_copied.contains(v))
                    {
                        return Err(ScheduleError::DependentExtent {
                            loop_var: Self::var_name(&g, l.var),
                            depends_on: Self::var_name(&g, v),
                        });
                    }
                }
            }
        }
        // Guards: kept in the write-back when they only test spatial loops.
        let mut keep_guard: Vec<bool> = Vec::new();
        for (_, lvl) in &levels {
            if let Level::Guard(c) = lvl {
                let s = uses_any(c, &spatial_loops);
                let r = uses_any(c, &not_copied) || c.uses_var(lv);
                if s && r {
                    return Err(ScheduleError::GuardMixesIters {
                        block: b.name.clone(),
                        cond: sparsec_ir::text::print_expr(&g, c),
                    });
                }
                keep_guard.push(!r);
            }
        }
        // The rf buffer: where it lives and its shape.
        if factor_axis > rf_spatial.len() {
            return Err(ScheduleError::FactorAxisOutOfRange { axis: factor_axis, max: rf_spatial.len() });
        }
        let top = levels.first().map_or_else(|| bp.clone(), |(p, _)| p.clone());
        let at_function_level = top.len() == 1;
        let d_lp = g.vars[lv].dtype;
        let mut shape: Vec<Expr> = rf_spatial.iter().map(|i| i.extent.clone()).collect();
        shape.insert(factor_axis, lp_for.extent.clone());
        let in_scope = vars_in_scope(&g, &top);
        for e in &shape {
            if let Some(v) = vars_of(e).into_iter().find(|v| !in_scope.contains(v)) {
                return Err(ScheduleError::RfactorShape { var: Self::var_name(&g, v) });
            }
        }
        let cb = g.buffers.try_get(cbuf).cloned().ok_or_else(|| stale(lp.0, "buffer"))?;
        let mut btaken: HashSet<String> = g.buffers.iter().map(|(_, x)| x.name.clone()).collect();
        btaken.extend(g.axes.iter().map(|(_, a)| a.name.clone()));
        btaken.extend(g.params.iter().map(|p| p.name.clone()));
        btaken.extend(g.vars.iter().map(|(_, v)| v.name.clone()));
        let rf_name = sparsec_ir::names::fresh_in(&mut btaken, &format!("{}_rf", cb.name));
        let rf = g.buffers.append(Buffer {
            name: rf_name,
            dtype: cb.dtype,
            layout: Layout::Dense(shape),
            storage: Storage::Alloc(Scope::Global),
            extra_storage: None,
            default: None,
            modes: None,
            span: Span::NONE,
        });
        // The rf block: new iterators for the loops of the factored iterator.
        let mut taken_b = taken_names(&g, &bp);
        for it in &b.iters {
            taken_b.insert(Self::var_name(&g, it.var));
        }
        let mut rmap: HashMap<VarId, Expr> = HashMap::new(); // loop var -> new iterator
        let mut new_iters: Vec<BlockIter> = Vec::new();
        let mut rf_var = None;
        for (_, lvl) in &levels {
            let Level::Loop(l) = lvl else { continue };
            if !rstar.binding.uses_var(l.var) {
                continue;
            }
            let d = g.vars[l.var].dtype;
            let nv = g.add_var(sparsec_ir::names::fresh_in(&mut taken_b, &format!("v{}", Self::var_name(&g, l.var))), d);
            let binding = simplify_expr(Expr::binary(BinOp::Sub, Expr::Var(l.var), l.min.clone()));
            rmap.insert(l.var, simplify_expr(Expr::binary(BinOp::Add, Expr::Var(nv), l.min.clone())));
            let kind = if l.var == lv { IterKind::Spatial } else { IterKind::Reduce };
            if l.var == lv {
                rf_var = Some(nv);
            }
            new_iters.push(BlockIter { var: nv, kind, extent: l.extent.clone(), binding });
        }
        let rf_var = rf_var.ok_or_else(|| stale(lp.0, "loop"))?;
        let rstar_value = sparsec_passes::simplify::substitute_simplified(rstar.binding.clone(), &rmap);
        let body_map = HashMap::from([(rstar.var, rstar_value)]);
        let mut iters = Vec::new();
        for it in &b.iters {
            if it.var == rstar.var {
                iters.append(&mut new_iters);
            } else {
                iters.push(it.clone());
            }
        }
        let mut ridx: Vec<Expr> = rf_spatial.iter().map(|i| Expr::Var(i.var)).collect();
        ridx.insert(factor_axis, Expr::Var(rf_var));
        let e_rf = sparsec_passes::simplify::substitute_simplified(e.clone(), &body_map);
        let rf_update = Expr::binary(BinOp::Add, Expr::Load(rf, ridx.clone()), e_rf);
        let mut reads: Vec<Region> =
            b.reads.iter().filter(|r| r.buffer != cbuf).map(|r| subst_region(r, &body_map)).collect();
        reads.insert(0, point(rf, &ridx));
        let rf_block = Block {
            name: fresh_block_name(&g, &format!("{}_rf", b.name)),
            iters,
            reads,
            writes: vec![point(rf, &ridx)],
            init: Some(vec![Stmt::new(StmtKind::Store { buffer: rf, indices: ridx.clone(), value: zero(cb.dtype) })]),
            body: vec![Stmt::new(StmtKind::Store { buffer: rf, indices: ridx, value: rf_update })],
            attrs: b.attrs.clone(),
        };
        let rf_name = rf_block.name.clone();
        // The write-back nest: copies of the spatial loops and of `lp`, kept guards.
        let mut taken_w = taken_names(&g, &top);
        let mut lmap: HashMap<VarId, Expr> = HashMap::new();
        enum New {
            Loop(Box<For>, VarId, Expr, Expr),
            Guard(Expr),
        }
        let mut parts = Vec::new();
        let mut guards = keep_guard.into_iter();
        for (_, lvl) in &levels {
            match lvl {
                Level::Loop(l) if copied.contains(&l.var) => {
                    let d = g.vars[l.var].dtype;
                    let nv = g.add_var(sparsec_ir::names::fresh_in(&mut taken_w, &Self::var_name(&g, l.var)), d);
                    let (min, ext) =
                        (sparsec_passes::simplify::substitute_simplified(l.min.clone(), &lmap), sparsec_passes::simplify::substitute_simplified(l.extent.clone(), &lmap));
                    lmap.insert(l.var, Expr::Var(nv));
                    parts.push(New::Loop(Box::new(l.clone()), nv, min, ext));
                }
                Level::Loop(_) => {}
                Level::Guard(c) => {
                    if guards.next().unwrap_or(false) {
                        parts.push(New::Guard(sparsec_passes::simplify::substitute_simplified(c.clone(), &lmap)));
                    }
                }
            }
        }
        let mut wmap: HashMap<VarId, Expr> = HashMap::new();
        let mut witers = Vec::new();
        for it in &spatial {
            let d = g.vars[it.var].dtype;
            let nv = g.add_var(sparsec_ir::names::fresh_in(&mut taken_w, &Self::var_name(&g, it.var)), d);
            wmap.insert(it.var, Expr::Var(nv));
            witers.push(BlockIter {
                var: nv,
                kind: IterKind::Spatial,
                extent: it.extent.clone(),
                binding: sparsec_passes::simplify::substitute_simplified(it.binding.clone(), &lmap),
            });
        }
        let wk = g.add_var(sparsec_ir::names::fresh_in(&mut taken_w, &Self::var_name(&g, rf_var)), d_lp);
        let lp_new = lmap.get(&lv).cloned().ok_or_else(|| stale(lp.0, "loop"))?;
        witers.push(BlockIter {
            var: wk,
            kind: IterKind::Reduce,
            extent: lp_for.extent.clone(),
            binding: simplify_expr(Expr::binary(BinOp::Sub, lp_new, lp_for.min.clone())),
        });
        for it in &reduce_all {
            wmap.entry(it.var).or_insert_with(|| zero(g.vars[it.var].dtype));
        }
        let widx: Vec<Expr> = cidx.iter().map(|x| sparsec_passes::simplify::substitute_simplified(x.clone(), &wmap)).collect();
        let mut wridx: Vec<Expr> = rf_spatial.iter().map(|i| wmap[&i.var].clone()).collect();
        wridx.insert(factor_axis, Expr::Var(wk));
        let winit = b.init.clone().map(|mut s| {
            sparsec_passes::simplify::substitute_stmts(&mut s, &wmap);
            s
        });
        let wb = Block {
            name: b.name.clone(),
            iters: witers,
            reads: vec![point(cbuf, &widx), point(rf, &wridx)],
            writes: vec![point(cbuf, &widx)],
            init: winit,
            body: vec![Stmt::new(StmtKind::Store {
                buffer: cbuf,
                indices: widx.clone(),
                value: Expr::binary(BinOp::Add, Expr::Load(cbuf, widx), Expr::Load(rf, wridx)),
            })],
            attrs: b.attrs.clone(),
        };
        let mut inner = vec![Stmt::new(StmtKind::Block(wb))];
        for p in parts.into_iter().rev() {
            inner = vec![match p {
                New::Loop(l, nv, min, ext) => for_stmt(&l, nv, min, ext, inner),
                New::Guard(c) => Stmt::new(StmtKind::If { cond: c, then_body: inner, else_body: vec![] }),
            }];
        }
        // Install: the rf block in place, the write-back nest after the top statement, the
        // allocation before it.
        match tree::get_mut(&mut g.body, &bp) {
            Some(s) => s.kind = StmtKind::Block(rf_block),
            None => return Err(stale(lp.0, "block")),
        }
        let idx = top.last().map_or(0, |x| x.1);
        let list = list_mut(&mut g.body, &top).ok_or_else(|| stale(lp.0, "loop"))?;
        for (k, s) in inner.into_iter().enumerate() {
            list.insert(idx + 1 + k, s);
        }
        if !at_function_level {
            list.insert(idx, Stmt::new(StmtKind::Alloc(rf)));
        }
        self.commit(P, g)?;
        let out = self.new_rv(Target::Block(rf_name));
        self.record(Rfactor { r#loop: lp, axis: factor_axis }, vec![out]);
        Ok(BlockRv(out))
    }
}

/// A region with its expressions substituted.
fn subst_region(r: &Region, map: &HashMap<VarId, Expr>) -> Region {
    Region {
        buffer: r.buffer,
        ranges: r
            .ranges
            .iter()
            .map(|x| RegionRange {
                begin: sparsec_passes::simplify::substitute_simplified(x.begin.clone(), map),
                end: x.end.clone().map(|e| sparsec_passes::simplify::substitute_simplified(e, map)),
            })
            .collect(),
    }
}

/// Calls `f` on every block in `s` (itself included) that is not inside another block of
/// `s`, with its path (`path` is the path of `s`).
fn find_blocks(s: &Stmt, path: &mut Path, f: &mut impl FnMut(&Path, &Block)) {
    if let StmtKind::Block(b) = &s.kind {
        f(path, b);
        return;
    }
    for (l, child) in s.kind.child_lists().into_iter().enumerate() {
        for (i, c) in child.iter().enumerate() {
            path.push((l, i));
            find_blocks(c, path, f);
            path.pop();
        }
    }
}
