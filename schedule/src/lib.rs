//! # sparsec-schedule
//!
//! Schedules for sparsec programs, in the style of SparseTIR and TensorIR.
//!
//! A [`Schedule`] owns the function being transformed and a [`Trace`] of what was done.
//! Primitives are methods that take typed references ([`SpIterRv`], [`IterRv`],
//! [`BlockRv`], [`LoopRv`]) obtained from getters, and return a [`ScheduleError`] naming the
//! broken rule when they do not apply. A failed primitive leaves the function unchanged;
//! a successful one verifies its output and keeps the program's meaning.
//!
//! * Stage I: [`Schedule::get_sparse_iteration`], [`Schedule::get_sp_iters`],
//!   [`Schedule::sparse_reorder`], [`Schedule::sparse_fuse`], [`Schedule::workspace`];
//! * Stage II/III: [`Schedule::get_block`], [`Schedule::get_loops`], [`Schedule::split`],
//!   [`Schedule::fuse`], [`Schedule::reorder`], [`Schedule::bind`], [`Schedule::parallel`],
//!   [`Schedule::vectorize`], [`Schedule::unroll`], [`Schedule::partition`],
//!   [`Schedule::specialize`];
//! * caches (Stage II/III): [`Schedule::cache_read`], [`Schedule::cache_write`],
//!   [`Schedule::set_scope`];
//! * reductions and nest moves (Stage II/III): [`Schedule::decompose_reduction`],
//!   [`Schedule::rfactor`], [`Schedule::compute_at`], [`Schedule::reverse_compute_at`];
//! * any stage: [`Schedule::annotate`], [`Schedule::unannotate`], and the lowering steps
//!   [`Schedule::lower_sparse_iter`] and [`Schedule::lower_sparse_buffer`], and the GPU passes
//!   [`Schedule::lower_atomic`] and [`Schedule::horizontal_fusion`].
//!
//! [`Trace::replay`] re-applies a trace to the original function; traces serialise to JSON.
//!
//! Each primitive lives in one file of `src/primitives/`, named after its trace op
//! (`split.rs` for `split`): the method on [`Schedule`], the struct of its arguments (public
//! in [`primitives`], wrapped by the [`Step`] variant of the same name) and its replay (the
//! crate's `Primitive` trait). Helpers shared by several primitives stay in their own modules
//! (`loops.rs`, `sparse.rs`, `cache.rs`, `reduction.rs`, `move_nest.rs`). To add a primitive:
//! write `src/primitives/<op>.rs` like its neighbours, add the line `<op>: <Op>,` to the
//! `primitives!` list in `src/primitives/mod.rs`, and add its tests under `tests/` (and its
//! row in `docs/trace-format.md`).
//!
//! ```
//! use sparsec_ir::ThreadTag;
//! use sparsec_schedule::Schedule;
//!
//! let text = r#"func scale(a: handle, b: handle, indptr: handle, indices: handle, m: i32, n: i32, nnz: i32) {
//!   axis I = dense_fixed(m)
//!   axis J = sparse_variable(I, n, nnz, indptr, indices)
//!   buffer A = match_sparse_buffer(a, [I, J], f32)
//!   buffer B = match_sparse_buffer(b, [I, J], f32)
//!   sp_iter scale([I, J], "SS") as [i, j] {
//!     B[i, j] = A[i, j] * 2.0
//!   }
//! }"#;
//! let f = sparsec_ir::text::parse_func("scale", text).unwrap();
//! let mut sch = Schedule::new(f.clone()).unwrap();
//! let sp = sch.get_sparse_iteration("scale").unwrap();
//! let it = sch.get_sp_iters(sp).unwrap();
//! sch.sparse_fuse(sp, &it).unwrap();
//! sch.lower_sparse_iter().unwrap();
//! let block = sch.get_block("scale0").unwrap();
//! let ij = sch.get_loops(block).unwrap()[0];
//! let parts = sch.split(ij, &[None, Some(32)]).unwrap();
//! sch.bind(parts[0], ThreadTag::BlockIdxX).unwrap();
//! sch.bind(parts[1], ThreadTag::ThreadIdxX).unwrap();
//! // A failed primitive changes nothing.
//! assert!(sch.bind(parts[1], ThreadTag::ThreadIdxY).is_err());
//! // The trace replays on the original program.
//! let again = sch.trace().replay(&f).unwrap();
//! assert_eq!(again.text(), sch.text());
//! ```

#![warn(missing_docs)]

/// Default CPU and GPU schedules.
pub mod auto;
mod cache;
mod error;
mod loops;
mod move_nest;
pub mod primitives;
mod reduction;
mod schedule;
mod sparse;
mod trace;
mod tree;

pub use cache::CacheAt;
pub use loops::check_loop_kinds;
pub use error::ScheduleError;
pub use primitives::Step;
pub use schedule::{AnnotTarget, BlockRv, IterRv, LoopRv, Schedule, SpIterRv};
pub use trace::{Instruction, Trace, TraceError};
