//! `cache_write` (Stage II/III): writes a region of a buffer through a cache.
//!
//! The region and the copies are described in the `cache` module.

use super::Primitive;
use crate::cache::{redirect, CacheAt};
use crate::error::ScheduleError;
use crate::schedule::{BlockRv, Schedule, Target};
use crate::trace::scope_name;
use crate::tree::Fresh;
use serde::{Deserialize, Serialize};
use sparsec_ir::func::{Stmt, StmtKind};
use sparsec_ir::Scope;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::cache_write`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheWrite {
    /// The block that writes the buffer.
    pub block: BlockRv,
    /// The buffer.
    pub buffer: String,
    /// The cache's memory scope.
    #[serde(with = "scope_name")]
    #[schemars(schema_with = "crate::trace::scope_schema")]
    pub scope: Scope,
    /// The loop or block whose body writes through the cache.
    pub at: u32,
}

impl Primitive for CacheWrite {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.block.0, &mut self.at]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        let at: CacheAt = s.cache_at_from_rv(self.at)?;
        Ok(vec![s.cache_write(self.block, &self.buffer, self.scope, at)?.id()])
    }
}

impl Schedule {
    /// Writes the region of `buffer` that the body of `at` accesses through a cache in
    /// `scope`: the body starts by copying the region in (unless its first statement stores
    /// the whole region: `cache::overwrites_region`), works on the cache, and ends by copying it back. `block` (inside `at`) must write `buffer`. Returns the write-back block.
    pub fn cache_write(&mut self, block: BlockRv, buffer: &str, scope: Scope, at: impl Into<CacheAt>) -> Result<BlockRv> {
        let at = at.into();
        let mut g = self.func.clone();
        let crate::cache::CachePlan { site, start, buf, dims, guard } = self.cache_plan(&g, "cache_write", block, buffer, at, crate::cache::CacheKind::Write)?;
        let cache = Self::add_cache_buffer(&mut g, buf, scope, &dims);
        let base = format!("{}_{}", g.buffers[buf].name, scope.name());
        let load_name = Self::unique_block_name(&g, &base);
        let mut fresh = Fresh::at(&g, &site);
        let load = Self::build_copy(&mut g, &mut fresh, load_name.clone(), buf, cache, &dims, guard.as_ref(), true);
        let store_name = {
            let mut g2 = g.clone();
            g2.body.push(load.clone());
            Self::unique_block_name(&g2, &format!("{base}_writeback"))
        };
        let store = Self::build_copy(&mut g, &mut fresh, store_name.clone(), buf, cache, &dims, guard.as_ref(), false);
        // An accumulator whose first act is its `init` needs no copy in.
        let first = Self::site_body(&mut g, &site, at.id())?.get(start).cloned();
        let dead = first.is_some_and(|s| crate::cache::overwrites_region(&g, &s, buf, &dims, guard.as_ref()));
        let body = Self::site_body(&mut g, &site, at.id())?;
        redirect(&mut body[start..], buf, cache, &dims);
        if !dead {
            body.insert(start, load);
        }
        body.insert(start, Stmt::new(StmtKind::Alloc(cache)));
        body.push(store);
        self.commit("cache_write", g)?;
        let rv = self.new_rv(Target::Block(store_name));
        self.record(CacheWrite { block, buffer: buffer.into(), scope, at: at.id() }, vec![rv]);
        Ok(BlockRv(rv))
    }
}
