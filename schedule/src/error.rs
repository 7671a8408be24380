//! The one error type of every schedule primitive.

use sparsec_ir::verify::VerifyError;
use sparsec_ir::Stage;

/// Why a primitive refused to run. Every variant names the rule that was broken and the
/// objects involved; a failed primitive leaves the schedule unchanged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    /// The function given to [`crate::Schedule::new`] does not verify.
    #[error("the function to schedule does not verify: {}", first(.0))]
    InvalidInput(Vec<VerifyError>),
    /// The primitive does not apply at the function's current stage.
    #[error("{primitive} does not apply to a Stage {stage} function")]
    WrongStage {
        /// The primitive.
        primitive: &'static str,
        /// The function's stage.
        stage: Stage,
    },
    /// No sparse iteration has this name.
    #[error("no sparse iteration is called `{name}`")]
    UnknownSpIter {
        /// The name asked for.
        name: String,
    },
    /// No block has this name.
    #[error("no block is called `{name}`")]
    UnknownBlock {
        /// The name asked for.
        name: String,
    },
    /// Several sparse iterations or blocks have this name, so a name lookup is ambiguous.
    #[error("more than one {what} is called `{name}`")]
    AmbiguousName {
        /// `sparse iteration` or `block`.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// An iterator reference does not belong to the sparse iteration it was used with.
    #[error("iterator `{iter}` does not belong to sparse iteration `{sp_iter}`")]
    UnknownIter {
        /// The sparse iteration.
        sp_iter: String,
        /// The iterator's variable name.
        iter: String,
    },
    /// The reference's target no longer exists (a primitive rebuilt or removed it).
    #[error("reference #{rv} is stale: {what} no longer exists")]
    StaleRef {
        /// The reference id.
        rv: u32,
        /// What it pointed to.
        what: String,
    },
    /// A reference of another kind was given (only possible through traces).
    #[error("reference #{rv} is not a {expected} reference")]
    WrongRefKind {
        /// The reference id.
        rv: u32,
        /// The kind wanted.
        expected: &'static str,
    },
    /// The same reference was given twice where distinct ones are needed.
    #[error("`{name}` is given more than once")]
    Duplicate {
        /// The repeated iterator or loop.
        name: String,
    },
    /// A new iterator order is not a permutation of the sparse iteration's iterators.
    #[error("the order {given:?} is not a permutation of the iterators {expected:?} of `{sp_iter}`")]
    NotAPermutation {
        /// The sparse iteration.
        sp_iter: String,
        /// The order given.
        given: Vec<String>,
        /// The current order.
        expected: Vec<String>,
    },
    /// A new order puts an axis before the iterator over its parent.
    #[error("axis `{axis}` would be iterated before its parent `{parent}`")]
    ParentAfterChild {
        /// The child axis.
        axis: String,
        /// Its parent (declared, or the `attach` target).
        parent: String,
    },
    /// A new order or a fuse takes only part of a fused group, which moves as a unit.
    #[error("the fused iterators {group:?} must stay together and in order")]
    SplitsFusedGroup {
        /// The iterators of the group.
        group: Vec<String>,
    },
    /// `sparse_fuse` got fewer than two iterators.
    #[error("{primitive} needs at least {min} {what}, got {got}")]
    TooFew {
        /// The primitive.
        primitive: &'static str,
        /// The minimum.
        min: usize,
        /// What is counted (`iterators`, `loops`, `factors`).
        what: &'static str,
        /// How many were given.
        got: usize,
    },
    /// The iterators to fuse are not adjacent in the current order.
    #[error("the iterators {iters:?} are not contiguous in the current order")]
    NotContiguous {
        /// The iterators given.
        iters: Vec<String>,
    },
    /// The axes to fuse are not a parent chain.
    #[error("axis `{parent}` is not the parent of axis `{axis}`, so they cannot be fused")]
    NotAParentChain {
        /// The axis that should be the child.
        axis: String,
        /// The axis before it.
        parent: String,
    },
    /// The first fused axis is not a root (`dense_fixed`) axis.
    #[error("the first fused axis `{axis}` is not a dense_fixed root axis")]
    NotARoot {
        /// The axis.
        axis: String,
    },
    /// An `attach` iterator cannot be fused.
    #[error("iterator `{iter}` iterates an attached axis and cannot be fused")]
    CannotFuseAttach {
        /// The iterator.
        iter: String,
    },
    /// Fused iterators must all be spatial or all be reductions.
    #[error("the iterators {iters:?} mix spatial and reduction kinds ({kinds})")]
    MixedKinds {
        /// The iterators.
        iters: Vec<String>,
        /// Their kind letters.
        kinds: String,
    },
    /// An annotation key must be non-empty.
    #[error("annotation key {key:?} is not valid")]
    InvalidKey {
        /// The key.
        key: String,
    },
    /// An annotation value that does not print as `.sptir` (a non-finite float).
    #[error("annotation value {value} is not valid")]
    InvalidValue {
        /// The value.
        value: String,
    },
    /// `unannotate` of a key that is not set.
    #[error("`{target}` has no annotation `{key}`")]
    NoSuchAnnotation {
        /// The annotated object.
        target: String,
        /// The key.
        key: String,
    },
    /// The split factors cannot be shown to cover the loop's extent.
    #[error("split factors with product {product} do not cover the extent {extent} of loop `{loop_var}`")]
    FactorsMismatch {
        /// The loop.
        loop_var: String,
        /// Its extent, printed.
        extent: String,
        /// Product of the given factors.
        product: i64,
    },
    /// More than one split factor is left to infer.
    #[error("split: {count} factors are `None`; at most one can be inferred")]
    MoreThanOneInferred {
        /// How many were `None`.
        count: usize,
    },
    /// A split factor is zero or negative.
    #[error("split factor {factor} is not positive")]
    NonPositiveFactor {
        /// The factor.
        factor: i64,
    },
    /// The loops are not a perfectly nested chain (each the only statement of the one above).
    #[error("loop `{inner}` is not directly and solely nested in loop `{outer}`")]
    LoopsNotNested {
        /// The outer loop.
        outer: String,
        /// The loop expected directly inside it.
        inner: String,
    },
    /// A loop's bounds use the variable of another loop that the primitive would move or
    /// merge.
    #[error("the bounds of loop `{loop_var}` depend on loop `{depends_on}`")]
    DependentExtent {
        /// The loop whose bounds depend.
        loop_var: String,
        /// The loop they depend on.
        depends_on: String,
    },
    /// The loop is not serial any more (already parallel, vectorized, unrolled or bound).
    #[error("loop `{loop_var}` is already {kind}")]
    AlreadyBound {
        /// The loop.
        loop_var: String,
        /// Its kind.
        kind: String,
    },
    /// The thread tag is already bound by an enclosing or enclosed loop.
    #[error("cannot bind `{loop_var}` to {tag}: loop `{other}` around or inside it is bound to it")]
    ThreadTagInUse {
        /// The loop.
        loop_var: String,
        /// The tag.
        tag: String,
        /// The loop already bound to it.
        other: String,
    },
    /// `vectorize` of a loop that contains other loops.
    #[error("cannot vectorize `{loop_var}`: it contains loop `{inner}`")]
    NotInnermost {
        /// The loop.
        loop_var: String,
        /// A loop inside it.
        inner: String,
    },
    /// A loop that drives a reduction iterator cannot run its iterations concurrently.
    #[error("loop `{loop_var}` drives reduction iterator `{iter}` of block `{block}` and cannot be {action}")]
    ReductionLoop {
        /// The loop.
        loop_var: String,
        /// The block.
        block: String,
        /// The block's reduction iterator.
        iter: String,
        /// `parallelized`, `vectorized` or `bound`.
        action: &'static str,
    },
    /// A trace instruction cannot be decoded.
    #[error("bad trace instruction `{inst}`: {reason}")]
    BadTrace {
        /// The instruction name.
        inst: String,
        /// What is wrong.
        reason: String,
    },
    /// A lowering pass applied through the schedule failed.
    #[error("lowering failed: {0}")]
    Lowering(String),
    /// The primitive produced IR that does not verify; the schedule is left unchanged.
    #[error("{primitive} produced IR that does not verify: {}", first(.errors))]
    InvalidOutput {
        /// The primitive.
        primitive: &'static str,
        /// The verifier's errors.
        errors: Vec<VerifyError>,
    },
}

fn first(errors: &[VerifyError]) -> String {
    let more = if errors.len() > 1 { format!(" (and {} more)", errors.len() - 1) } else { String::new() };
    errors.first().map_or_else(String::new, |e| format!("{e}{more}"))
}
