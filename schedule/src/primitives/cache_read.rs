//! `cache_read` (Stage II/III): reads a region of a buffer through a cache.
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

/// The arguments of [`Schedule::cache_read`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheRead {
    /// The block that reads the buffer.
    pub block: BlockRv,
    /// The buffer.
    pub buffer: String,
    /// The cache's memory scope.
    #[serde(with = "scope_name")]
    #[schemars(schema_with = "crate::trace::scope_schema")]
    pub scope: Scope,
    /// The loop or block whose body reads through the cache.
    pub at: u32,
}

impl Primitive for CacheRead {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.block.0, &mut self.at]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        let at: CacheAt = s.cache_at_from_rv(self.at)?;
        Ok(vec![s.cache_read(self.block, &self.buffer, self.scope, at)?.id()])
    }
}

impl Schedule {
    /// Reads the region of `buffer` that the body of `at` reads through a cache in `scope`:
    /// the body starts by copying the region into the cache, and every read of `buffer` in the
    /// body reads the cache instead. `block` (inside `at`) must read `buffer`, and nothing in
    /// `at` may write it. Returns the copy block.
    pub fn cache_read(&mut self, block: BlockRv, buffer: &str, scope: Scope, at: impl Into<CacheAt>) -> Result<BlockRv> {
        let at = at.into();
        let mut g = self.func.clone();
        let crate::cache::CachePlan { site, start, buf, dims, guard } = self.cache_plan(&g, "cache_read", block, buffer, at, crate::cache::CacheKind::Read)?;
        let cache = Self::add_cache_buffer(&mut g, buf, scope, &dims);
        let name = Self::unique_block_name(&g, &format!("{}_{}", g.buffers[buf].name, scope.name()));
        let mut fresh = Fresh::at(&g, &site);
        let copy = Self::build_copy(&mut g, &mut fresh, name.clone(), buf, cache, &dims, guard.as_ref(), true);
        let body = Self::site_body(&mut g, &site, at.id())?;
        redirect(&mut body[start..], buf, cache, &dims);
        body.insert(start, copy);
        body.insert(start, Stmt::new(StmtKind::Alloc(cache)));
        self.commit("cache_read", g)?;
        let rv = self.new_rv(Target::Block(name));
        self.record(CacheRead { block, buffer: buffer.into(), scope, at: at.id() }, vec![rv]);
        Ok(BlockRv(rv))
    }
}
