//! `fuse` (Stage II/III): fuses perfectly nested loops into one.

use super::Primitive;
use crate::error::ScheduleError;
use crate::loops::{bin, for_stmt};
use crate::schedule::{stale, LoopRv, Schedule, Target};
use crate::tree::{self, Fresh};
use serde::{Deserialize, Serialize};
use sparsec_ir::expr::{BinOp, Expr};
use sparsec_ir::ForKind;
use sparsec_passes::build::{cast_to, int};
use sparsec_passes::simplify::simplify_expr;
use std::collections::HashMap;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::fuse`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fuse {
    /// The loops, outermost first.
    pub loops: Vec<LoopRv>,
}

impl Primitive for Fuse {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        self.loops.iter_mut().map(|r| &mut r.0).collect()
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        Ok(vec![s.fuse(&self.loops)?.id()])
    }
}

impl Schedule {
    /// Fuses perfectly nested loops (outermost first) into one loop whose extent is the
    /// product of theirs. No loop's bounds may use the variable of another fused loop.
    pub fn fuse(&mut self, loops: &[LoopRv]) -> Result<LoopRv> {
        const P: &str = "fuse";
        self.need_loop_stage(P)?;
        if loops.len() < 2 {
            return Err(ScheduleError::TooFew { primitive: P, min: 2, what: "loops", got: loops.len() });
        }
        let mut g = self.func.clone();
        let ls = self.resolve_loops(&g, loops)?;
        Self::check_chain(&g, &ls)?;
        for (k, (_, l)) in ls.iter().enumerate() {
            if l.kind != ForKind::Serial {
                return Err(ScheduleError::AlreadyBound {
                    loop_var: Self::var_name(&g, l.var),
                    kind: l.kind.name().to_string(),
                });
            }
            for (_, o) in &ls[..k] {
                if l.min.uses_var(o.var) || l.extent.uses_var(o.var) {
                    return Err(ScheduleError::DependentExtent {
                        loop_var: Self::var_name(&g, l.var),
                        depends_on: Self::var_name(&g, o.var),
                    });
                }
            }
        }
        let outer = &ls[0].1;
        let d = g.vars[outer.var].dtype;
        let extents: Vec<Expr> = ls.iter().map(|(_, l)| cast_to(&g, l.extent.clone(), d)).collect();
        let total = simplify_expr(extents[1..].iter().fold(extents[0].clone(), |a, e| bin(BinOp::Mul, a, e.clone())));
        let name = ls.iter().map(|(_, l)| Self::var_name(&g, l.var)).collect::<Vec<_>>().join("_");
        let v = g.add_var(Fresh::at(&g, &ls[0].0).name(&format!("{name}_fused")), d);
        // Old variable k = min_k + (v // (e_{k+1} * ... * e_n)) % e_k (no `%` for the first).
        let mut map = HashMap::new();
        let n = ls.len();
        for (k, (_, l)) in ls.iter().enumerate() {
            let mut e = Expr::Var(v);
            if k + 1 < n {
                let stride = extents[k + 2..].iter().fold(extents[k + 1].clone(), |a, x| bin(BinOp::Mul, a, x.clone()));
                e = bin(BinOp::FloorDiv, e, stride);
            }
            if k > 0 {
                e = bin(BinOp::FloorMod, e, extents[k].clone());
            }
            let ld = g.vars[l.var].dtype;
            let e = cast_to(&g, simplify_expr(e), ld);
            map.insert(l.var, simplify_expr(bin(BinOp::Add, l.min.clone(), e)));
        }
        let mut body = ls[n - 1].1.body.clone();
        sparsec_passes::simplify::substitute_stmts(&mut body, &map);
        let mut new = for_stmt(v, int(0, d), total, ForKind::Serial, body, outer.attrs.clone());
        let slot = tree::get_mut(&mut g.body, &ls[0].0).ok_or_else(|| stale(loops[0].0, "loop"))?;
        new.span = slot.span;
        *slot = new;
        self.commit(P, g)?;
        let out = self.new_rv(Target::Loop(v));
        self.record(Fuse { loops: loops.to_vec() }, vec![out]);
        Ok(LoopRv(out))
    }
}
