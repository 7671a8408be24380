//! # sparsec-ir
//!
//! The one IR of sparsec, covering the three stages of SparseTIR:
//!
//! * **Stage I** — [`Axis`]es (dense/sparse × fixed/variable), sparse [`Buffer`]s bound to
//!   axes, and sparse iterations ([`SpIter`]) working in coordinate space.
//! * **Stage II** — [`For`] loops and [`Block`]s working in position space; sparse buffers remain.
//! * **Stage III** — dense (flat) buffers, loops, blocks and thread bindings.
//!
//! A [`Func`] owns its variables, axes and buffers in [`Arena`]s and refers to them with typed
//! [`Handle`]s. Around the data model sit the front end ([`text::parse`]), the back end
//! ([`text::print`]), and the validator ([`verify`]). Run-time data shared by the
//! interpreter and the backends is in [`data`].

pub mod arena;
pub mod args;
pub mod data;
pub mod dsl;
pub mod expr;
pub mod func;
pub mod injective;
pub mod names;
pub mod prefetch;
pub mod span;
pub mod sync;
pub mod text;
pub mod types;
pub mod value;
pub mod vector;
pub mod verify;

pub use arena::{Arena, Handle};
pub use expr::{BinOp, Expr, Intrinsic, UnOp};
pub use func::{
    fill_spans, has_bound_loop, has_thread_loop, kernel_ranges, map_exprs_deep, needs_barrier, repeated_update, scope_across_units, threads_exchange, walk_stmts, writes_beside_thread_loops, RepeatedUpdate, AttrValue, Attrs, Axis, AxisId, AxisPattern, Block, BlockIter, Buffer, BufferId, For, Func,
    Layout, MergeOp, Module, PatternOp, Param, ParamId, ParamKind, Region, RegionRange, SpIter, SpIterAxis, Stmt,
    StmtKind, Storage, Var, VarId, MAX_WHILE_ITERATIONS, POSITION_MAP, UNROLL_FACTOR_ATTR, WORKSPACE_ATTR, written_buffers,
};
pub use span::{Location, SourceFile, Span};
pub use types::{AxisKind, DType, ForKind, IterKind, Scope, Stage, ThreadTag};
