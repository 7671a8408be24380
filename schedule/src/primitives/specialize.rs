//! `specialize` (Stage II/III): a copy of a loop for long extents, to schedule on its own.
//!
//! `for j in serial(e) { body }` becomes
//! `if e >= N { for j_1 in serial(e) { body' } } else { for j in serial(e) { body } }`, where
//! `body'` is `body` with fresh variables and fresh block names (`<block>_long`). Both
//! branches compute what the loop did, so the function means the same; later primitives may
//! then reassociate one of them (SpMV's rows of at least `N` nonzeros summed in partial sums)
//! and leave the other as it was. Halide's `specialize` does the same for a condition.

use super::Primitive;
use crate::error::ScheduleError;
use crate::loops::{bin, loop_at};
use crate::schedule::{LoopRv, Schedule, Target};
use crate::tree::{self, binders, Fresh};
use serde::{Deserialize, Serialize};
use sparsec_ir::expr::{BinOp, Expr};
use sparsec_ir::func::{Stmt, StmtKind, VarId};
use sparsec_ir::ForKind;
use sparsec_passes::build::int;
use std::collections::HashMap;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::specialize`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Specialize {
    /// The loop.
    pub r#loop: LoopRv,
    /// The least extent the copy runs for.
    pub min_extent: i64,
}

impl Primitive for Specialize {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.r#loop.0]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        Ok(s.specialize(self.r#loop, self.min_extent)?.into_iter().map(LoopRv::id).collect())
    }
}

impl Schedule {
    /// Runs a serial loop whose extent is at least `min_extent` as a copy of it with fresh
    /// variables and block names, and otherwise as it was (module documentation). Returns the
    /// copy and the loop. A loop that allocates buffers, or is not serial, is refused.
    pub fn specialize(&mut self, lp: LoopRv, min_extent: i64) -> Result<[LoopRv; 2]> {
        const P: &str = "specialize";
        self.need_loop_stage(P)?;
        let mut g = self.func.clone();
        let (path, _) = self.loop_path(&g, lp.0)?;
        let l = loop_at(&g, &path, lp.0)?.clone();
        let name = Self::var_name(&g, l.var);
        if min_extent < 1 {
            return Err(ScheduleError::LoopNotSpecializable { loop_var: name, why: format!("the least extent {min_extent} is not positive") });
        }
        if l.kind != ForKind::Serial {
            return Err(ScheduleError::AlreadyBound { loop_var: name, kind: l.kind.name().to_string() });
        }
        let mut allocates = false;
        sparsec_ir::walk_stmts(&l.body, &mut |s| allocates |= matches!(s.kind, StmtKind::Alloc(_)));
        if allocates {
            return Err(ScheduleError::LoopNotSpecializable { loop_var: name, why: "its body allocates buffers".into() });
        }
        let original = tree::get(&g.body, &path).cloned().ok_or_else(|| crate::schedule::stale(lp.0, "loop"))?;
        // Fresh variables for every binder of the loop, fresh names for its blocks.
        let mut fresh = Fresh::at(&g, &path);
        let mut vars: HashMap<VarId, VarId> = HashMap::new();
        sparsec_ir::walk_stmts(std::slice::from_ref(&original), &mut |s| {
            for v in binders(&s.kind) {
                vars.entry(v).or_insert(v);
            }
        });
        for v in vars.clone().into_keys() {
            let (base, dtype) = (g.vars[v].name.clone(), g.vars[v].dtype);
            vars.insert(v, g.add_var(fresh.name(&base), dtype));
        }
        let mut copy = original.clone();
        rename(std::slice::from_mut(&mut copy), &vars);
        let subst: HashMap<VarId, Expr> = vars.iter().map(|(&a, &b)| (a, Expr::Var(b))).collect();
        sparsec_ir::map_exprs_deep(std::slice::from_mut(&mut copy), &mut |e| e.substitute(&subst));
        let mut taken = sparsec_ir::names::block_names(&g);
        rename_blocks(std::slice::from_mut(&mut copy), &mut taken);
        let d = g.vars[l.var].dtype;
        let cond = bin(BinOp::Ge, l.extent.clone(), int(min_extent, d));
        let new_var = vars[&l.var];
        let mut stmt = Stmt::new(StmtKind::If { cond, then_body: vec![copy], else_body: vec![original] });
        let slot = tree::get_mut(&mut g.body, &path).ok_or_else(|| crate::schedule::stale(lp.0, "loop"))?;
        stmt.span = slot.span;
        *slot = stmt;
        self.commit(P, g)?;
        let long = self.new_rv(Target::Loop(new_var));
        let short = self.new_rv(Target::Loop(l.var));
        self.record(Specialize { r#loop: lp, min_extent }, vec![long, short]);
        Ok([LoopRv(long), LoopRv(short)])
    }
}

/// Renames the binders of `stmts` by `map`.
fn rename(stmts: &mut [Stmt], map: &HashMap<VarId, VarId>) {
    for s in stmts {
        match &mut s.kind {
            StmtKind::For(l) => l.var = map.get(&l.var).copied().unwrap_or(l.var),
            StmtKind::Block(b) => {
                for it in &mut b.iters {
                    it.var = map.get(&it.var).copied().unwrap_or(it.var);
                }
            }
            StmtKind::Let { var, .. } => *var = map.get(var).copied().unwrap_or(*var),
            _ => {}
        }
        for c in s.kind.child_lists_mut() {
            rename(c, map);
        }
    }
}

/// Gives every block in `stmts` a fresh name `<name>_long`.
fn rename_blocks(stmts: &mut [Stmt], taken: &mut std::collections::HashSet<String>) {
    for s in stmts {
        if let StmtKind::Block(b) = &mut s.kind {
            b.name = sparsec_ir::names::fresh_in(taken, &format!("{}_long", b.name));
        }
        for c in s.kind.child_lists_mut() {
            rename_blocks(c, taken);
        }
    }
}
