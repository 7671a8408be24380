//! `split` (Stage II/III): splits a loop into nested loops.
//!
//! Loop extents are assumed non-negative, as every lowering pass produces them.

use super::Primitive;
use crate::error::ScheduleError;
use crate::loops::{bin, for_stmt, loop_at};
use crate::schedule::{stale, LoopRv, Schedule, Target};
use crate::tree::{self, Fresh};
use serde::{Deserialize, Serialize};
use sparsec_ir::expr::{BinOp, Expr};
use sparsec_ir::func::{Attrs, Stmt, StmtKind, VarId};
use sparsec_ir::ForKind;
use sparsec_passes::build::int;
use sparsec_passes::simplify::simplify_expr;
use std::collections::HashMap;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::split`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Split {
    /// The loop.
    pub r#loop: LoopRv,
    /// The factors, outermost first; `null` is inferred.
    pub factors: Vec<Option<i64>>,
}

impl Primitive for Split {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.r#loop.0]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        Ok(s.split(self.r#loop, &self.factors)?.into_iter().map(LoopRv::id).collect())
    }
}

impl Schedule {
    /// Splits a loop into nested loops with the given factors (outermost first). At most
    /// one factor may be `None`; it is inferred as `ceil(extent / product of the others)`.
    /// When the factors do not divide the extent exactly (or the extent is symbolic) the
    /// body is guarded by `if fused < extent`. Returns the new loops, outermost first.
    pub fn split(&mut self, lp: LoopRv, factors: &[Option<i64>]) -> Result<Vec<LoopRv>> {
        const P: &str = "split";
        self.need_loop_stage(P)?;
        let mut g = self.func.clone();
        let (path, _) = self.loop_path(&g, lp.0)?;
        let l = loop_at(&g, &path, lp.0)?.clone();
        let name = Self::var_name(&g, l.var);
        if factors.len() < 2 {
            return Err(ScheduleError::TooFew { primitive: P, min: 2, what: "factors", got: factors.len() });
        }
        if let Some(&f) = factors.iter().flatten().find(|&&f| f <= 0) {
            return Err(ScheduleError::NonPositiveFactor { factor: f });
        }
        let nones = factors.iter().filter(|f| f.is_none()).count();
        if nones > 1 {
            return Err(ScheduleError::MoreThanOneInferred { count: nones });
        }
        if l.kind != ForKind::Serial {
            return Err(ScheduleError::AlreadyBound { loop_var: name, kind: l.kind.name().to_string() });
        }
        let d = g.vars[l.var].dtype;
        let product = factors.iter().flatten().try_fold(1i64, |p, &f| p.checked_mul(f));
        let extent = simplify_expr(l.extent.clone());
        let mismatch = |product: i64| ScheduleError::FactorsMismatch {
            loop_var: name.clone(),
            extent: sparsec_ir::text::print_expr(&g, &l.extent),
            product,
        };
        let Some(product) = product else { return Err(mismatch(i64::MAX)) };
        // The factor to infer (if any) and whether a guard is needed.
        let (inferred, guard) = match (nones, extent.as_int()) {
            (0, Some(e)) if product < e => return Err(mismatch(product)),
            (0, Some(e)) => (None, product != e),
            (0, None) => return Err(mismatch(product)),
            (_, Some(e)) => {
                let e = e.max(0);
                let f = e / product + i64::from(e % product != 0);
                (Some(int(f, d)), f.checked_mul(product) != Some(e))
            }
            (_, None) if product == 1 => (Some(extent.clone()), false),
            (_, None) => {
                let up = bin(BinOp::Add, extent.clone(), int(product - 1, d));
                (Some(simplify_expr(bin(BinOp::FloorDiv, up, int(product, d)))), true)
            }
        };
        let extents: Vec<Expr> =
            factors.iter().map(|f| f.map_or_else(|| inferred.clone().unwrap_or(int(1, d)), |f| int(f, d))).collect();
        let mut fresh = Fresh::at(&g, &path);
        let vars: Vec<VarId> = (0..factors.len()).map(|k| g.add_var(fresh.name(&format!("{name}_{k}")), d)).collect();
        // fused = ((v0 * e1 + v1) * e2 + v2) ...
        let mut fused = Expr::Var(vars[0]);
        for (v, e) in vars.iter().zip(&extents).skip(1) {
            fused = bin(BinOp::Add, bin(BinOp::Mul, fused, e.clone()), Expr::Var(*v));
        }
        let fused = simplify_expr(fused);
        let value = simplify_expr(bin(BinOp::Add, l.min.clone(), fused.clone()));
        let mut body = l.body.clone();
        sparsec_passes::simplify::substitute_stmts(&mut body, &HashMap::from([(l.var, value)]));
        if guard {
            let cond = bin(BinOp::Lt, fused, l.extent.clone());
            body = vec![Stmt::new(StmtKind::If { cond, then_body: body, else_body: vec![] })];
        }
        for (k, (v, e)) in vars.iter().zip(&extents).enumerate().rev() {
            let attrs = if k == 0 { l.attrs.clone() } else { Attrs::new() };
            body = vec![for_stmt(*v, int(0, d), e.clone(), ForKind::Serial, body, attrs)];
        }
        let mut new = body.pop().ok_or_else(|| stale(lp.0, "loop"))?;
        let slot = tree::get_mut(&mut g.body, &path).ok_or_else(|| stale(lp.0, "loop"))?;
        new.span = slot.span;
        *slot = new;
        self.commit(P, g)?;
        let outs: Vec<u32> = vars.iter().map(|v| self.new_rv(Target::Loop(*v))).collect();
        self.record(Split { r#loop: lp, factors: factors.to_vec() }, outs.clone());
        Ok(outs.into_iter().map(LoopRv).collect())
    }
}
