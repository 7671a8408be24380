//! The primitives' arguments, one struct per primitive, and [`Step`], the traced call.
//!
//! Each primitive lives in one file named after its trace op (`split.rs` for `split`): the
//! method on [`Schedule`], the struct of its arguments as traces record them, and how a trace
//! renumbers and replays them (the crate's `Primitive` trait). The `primitives!` list below
//! registers each one with one line; it declares the modules and builds [`Step`] from them.

use crate::error::ScheduleError;
use crate::schedule::Schedule;
use serde::{Deserialize, Serialize};

/// A primitive's arguments, as a trace records, renumbers and replays them.
pub(crate) trait Primitive {
    /// Whether the step only looks references up and leaves the function as it is.
    const QUERY: bool = false;
    /// Whether the step lowers the function to the next stage.
    const LOWERING: bool = false;

    /// Every reference id among the arguments (to renumber a trace).
    fn refs_mut(&mut self) -> Vec<&mut u32>;

    /// Runs the primitive on `s` (which records it again); returns the ids it produced.
    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>, ScheduleError>;
}

/// Whether `snake` is serde's `snake_case` of `camel` (`GetSpIters`, `get_sp_iters`).
const fn is_snake_case_of(camel: &str, snake: &str) -> bool {
    let (c, s) = (camel.as_bytes(), snake.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < c.len() {
        if c[i].is_ascii_uppercase() && i > 0 {
            if j >= s.len() || s[j] != b'_' {
                return false;
            }
            j += 1;
        }
        if j >= s.len() || s[j] != c[i].to_ascii_lowercase() {
            return false;
        }
        i += 1;
        j += 1;
    }
    j == s.len()
}

/// Declares the primitive modules and builds [`Step`]: `op: Args` per primitive, where `op`
/// is the module and the trace op and `Args` (its CamelCase) the struct of its arguments.
macro_rules! primitives {
    ($($op:ident: $T:ident,)*) => {
        $(mod $op;)*
        $(pub use $op::$T;)*

        /// One primitive call with its arguments. References are the ids the trace gave them.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
        pub enum Step {
            $(
                #[doc = concat!("[`Schedule::", stringify!($op), "`].")]
                $T($T),
            )*
        }

        $(
            impl From<$T> for Step {
                fn from(args: $T) -> Step {
                    Step::$T(args)
                }
            }

            // Serde names the variant by its snake_case: it must be the module's name.
            const _: () = assert!(
                is_snake_case_of(stringify!($T), stringify!($op)),
                concat!("`", stringify!($T), "` is not the CamelCase of `", stringify!($op), "`")
            );
        )*

        impl Step {
            /// The primitive's name (`split`, `get_block`, ...), as written in traces.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Step::$T(_) => stringify!($op),)*
                }
            }

            /// Whether the step only looks references up and leaves the function as it is.
            pub fn is_query(&self) -> bool {
                match self {
                    $(Step::$T(_) => <$T as Primitive>::QUERY,)*
                }
            }

            /// Whether the step lowers the function to the next stage.
            pub fn is_lowering(&self) -> bool {
                match self {
                    $(Step::$T(_) => <$T as Primitive>::LOWERING,)*
                }
            }

            /// Every reference id among the arguments (to renumber a trace).
            pub fn refs_mut(&mut self) -> Vec<&mut u32> {
                match self {
                    $(Step::$T(args) => args.refs_mut(),)*
                }
            }

            /// Runs the primitive on `s` (which records it again); returns the ids it produced.
            pub fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>, ScheduleError> {
                match self {
                    $(Step::$T(args) => args.apply(s),)*
                }
            }
        }
    };
}

primitives! {
    get_sparse_iteration: GetSparseIteration,
    get_sp_iters: GetSpIters,
    sparse_reorder: SparseReorder,
    sparse_fuse: SparseFuse,
    workspace: Workspace,
    lower_sparse_iter: LowerSparseIter,
    lower_sparse_buffer: LowerSparseBuffer,
    lower_atomic: LowerAtomic,
    horizontal_fusion: HorizontalFusion,
    contract: Contract,
    get_block: GetBlock,
    get_loops: GetLoops,
    split: Split,
    fuse: Fuse,
    reorder: Reorder,
    bind: Bind,
    parallel: Parallel,
    partition: Partition,
    specialize: Specialize,
    vectorize: Vectorize,
    unroll: Unroll,
    cache_read: CacheRead,
    cache_write: CacheWrite,
    cache_accumulate: CacheAccumulate,
    set_scope: SetScope,
    annotate: Annotate,
    unannotate: Unannotate,
    decompose_reduction: DecomposeReduction,
    rfactor: Rfactor,
    compute_at: ComputeAt,
    reverse_compute_at: ReverseComputeAt,
}

#[cfg(test)]
mod tests {
    use super::is_snake_case_of;

    #[test]
    fn snake_case_matches_serde() {
        assert!(is_snake_case_of("Split", "split"));
        assert!(is_snake_case_of("GetSpIters", "get_sp_iters"));
        assert!(!is_snake_case_of("GetSpIters", "get_spiters"));
        assert!(!is_snake_case_of("Split", "splits"));
        assert!(!is_snake_case_of("RFactor", "rfactor"));
    }
}
