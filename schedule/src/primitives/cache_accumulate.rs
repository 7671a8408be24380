//! `cache_accumulate` (Stage II/III): sums a block's accumulation in a zeroed cache and adds
//! the cache to the buffer afterwards.
//!
//! `cache_write` keeps a buffer's region in a cache and writes it back, which is wrong where
//! other units add to the same elements (a row split over several units, `atomic`
//! accumulation): each would write its own total over the others'. Here the cache starts at
//! zero and the write-back adds (`X[i] = X[i] + cache[..]`), an accumulation like the ones it
//! replaces, which `lower_atomic` makes atomic where the block asks for atomics. The sum is
//! regrouped (the block's terms first, then the buffer's value): equal for integers, within
//! rounding for floats.

use super::Primitive;
use crate::cache::{redirect, uses_of, CacheAt};
use crate::error::ScheduleError;
use crate::schedule::{BlockRv, Schedule, Target};
use crate::trace::scope_name;
use crate::tree::{self, Fresh};
use serde::{Deserialize, Serialize};
use sparsec_ir::expr::{BinOp, Expr};
use sparsec_ir::func::{Region, RegionRange, Stmt, StmtKind};
use sparsec_ir::Scope;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::cache_accumulate`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheAccumulate {
    /// The block that adds to the buffer.
    pub block: BlockRv,
    /// The buffer.
    pub buffer: String,
    /// The cache's memory scope.
    #[serde(with = "scope_name")]
    #[schemars(schema_with = "crate::trace::scope_schema")]
    pub scope: Scope,
    /// The loop or block whose body sums into the cache.
    pub at: u32,
}

impl Primitive for CacheAccumulate {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.block.0, &mut self.at]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        let at: CacheAt = s.cache_at_from_rv(self.at)?;
        Ok(vec![s.cache_accumulate(self.block, &self.buffer, self.scope, at)?.id()])
    }
}

impl Schedule {
    /// Sums what `block` adds to `buffer` in the body of `at` into a cache in `scope` that
    /// starts at zero, and adds the cache to the buffer at the end of the body. `block` must
    /// only accumulate (`X[i] = X[i] + e` with `e` not reading `X`, no `init`), and no other
    /// statement of the body may touch the buffer. The region need not be the unit's own (as
    /// `cache_write` requires): the add-back is itself an accumulation. Returns the add-back
    /// block.
    pub fn cache_accumulate(&mut self, block: BlockRv, buffer: &str, scope: Scope, at: impl Into<CacheAt>) -> Result<BlockRv> {
        let at = at.into();
        let mut g = self.func.clone();
        let crate::cache::CachePlan { site, start, buf, dims, guard } =
            self.cache_plan(&g, "cache_accumulate", block, buffer, at, crate::cache::CacheKind::Accumulate)?;
        let refuse = |reason: &str| ScheduleError::NotAnAccumulation {
            buffer: buffer.to_string(),
            block: self.block_name(&g, block.0),
            reason: reason.to_string(),
        };
        let block_path = self.block_path(&g, block.0)?;
        let Some(Stmt { kind: StmtKind::Block(b), .. }) = tree::get(&g.body, &block_path) else {
            return Err(stale(block.0));
        };
        if b.init.is_some() || !sparsec_passes::accumulates_only(&g, &b.body) {
            return Err(refuse("the block does not only add to it"));
        }
        let in_block = uses_of(std::slice::from_ref(tree::get(&g.body, &block_path).ok_or_else(|| stale(block.0))?), buf);
        let whole = match tree::get(&g.body, &site).map(|s| &s.kind) {
            Some(StmtKind::For(l)) => uses_of(&l.body, buf),
            Some(StmtKind::Block(x)) => uses_of(&x.body, buf),
            _ => return Err(stale(at.id())),
        };
        if whole.reads.len() != in_block.reads.len() || whole.writes.len() != in_block.writes.len() {
            return Err(refuse("other statements of the body access it"));
        }
        let dtype = g.buffers[buf].dtype;
        let cache = Self::add_cache_buffer(&mut g, buf, scope, &dims);
        let base = format!("{}_{}", g.buffers[buf].name, scope.name());
        let zero_name = Self::unique_block_name(&g, &format!("{base}_zero"));
        let mut fresh = Fresh::at(&g, &site);
        let mut zero = Self::build_copy(&mut g, &mut fresh, zero_name, buf, cache, &dims, guard.as_ref(), true);
        let add_name = {
            let mut g2 = g.clone();
            g2.body.push(zero.clone());
            Self::unique_block_name(&g2, &format!("{base}_add"))
        };
        let mut add = Self::build_copy(&mut g, &mut fresh, add_name.clone(), buf, cache, &dims, guard.as_ref(), false);
        // The copy in becomes `cache[..] = 0`, the copy back `X[..] = X[..] + cache[..]`.
        edit_copy(&mut zero, &mut |blk| {
            if let [Stmt { kind: StmtKind::Store { value, .. }, .. }] = blk.body.as_mut_slice() {
                *value = sparsec_passes::build::zero(dtype);
            }
            blk.reads.clear();
        });
        edit_copy(&mut add, &mut |blk| {
            if let [Stmt { kind: StmtKind::Store { buffer: dst, indices, value }, .. }] = blk.body.as_mut_slice() {
                let old = Expr::Load(*dst, indices.clone());
                *value = Expr::binary(BinOp::Add, old, value.clone());
                let ranges = indices.iter().map(|e| RegionRange { begin: e.clone(), end: None }).collect();
                blk.reads.push(Region { buffer: *dst, ranges });
            }
        });
        let body = Self::site_body(&mut g, &site, at.id())?;
        redirect(&mut body[start..], buf, cache, &dims);
        body.insert(start, zero);
        body.insert(start, Stmt::new(StmtKind::Alloc(cache)));
        body.push(add);
        self.commit("cache_accumulate", g)?;
        let rv = self.new_rv(Target::Block(add_name));
        self.record(CacheAccumulate { block, buffer: buffer.into(), scope, at: at.id() }, vec![rv]);
        Ok(BlockRv(rv))
    }
}

fn stale(rv: u32) -> ScheduleError {
    crate::schedule::stale(rv, "cache_accumulate argument")
}

/// Applies `f` to the block inside a copy built by `build_copy` (under its loops and guards).
fn edit_copy(s: &mut Stmt, f: &mut dyn FnMut(&mut sparsec_ir::func::Block)) {
    match &mut s.kind {
        StmtKind::Block(b) => f(b),
        StmtKind::For(l) => l.body.iter_mut().for_each(|x| edit_copy(x, f)),
        StmtKind::If { then_body, .. } => then_body.iter_mut().for_each(|x| edit_copy(x, f)),
        _ => {}
    }
}
