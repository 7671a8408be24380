//! The one error type of every schedule primitive.

use sparsec_ir::verify::VerifyError;
use sparsec_ir::Stage;

/// Why a primitive refused to run. Every variant names the rule that was broken and the
/// objects involved; a failed primitive leaves the schedule unchanged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    /// `partition` of a loop that is not `parallel`.
    #[error("partition: loop `{loop_var}` is not parallel (make it parallel first: that proves its iterations independent)")]
    NotParallel {
        /// The loop.
        loop_var: String,
    },
    /// `partition` weights that are not a one-dimensional integer buffer.
    #[error("partition: buffer `{buffer}` is not a one-dimensional integer buffer of prefix sums")]
    NotWeights {
        /// The buffer.
        buffer: String,
    },
    /// No buffer has this name.
    #[error("no buffer is called `{name}`")]
    UnknownBuffer {
        /// The name asked for.
        name: String,
    },
    /// The cache location is not a loop or block around the block given.
    #[error("the cache location is not a loop or block around block `{block}`")]
    CacheSiteNotAround {
        /// The block.
        block: String,
    },
    /// The buffer is not accessed as the primitive needs.
    #[error("{primitive}: buffer `{buffer}` is not accessed there as needed")]
    BufferNotAccessed {
        /// The buffer.
        buffer: String,
        /// The primitive.
        primitive: &'static str,
    },
    /// `cache_read` of a buffer that the cached body writes.
    #[error("cache_read: buffer `{buffer}` is written in the cached body (use cache_write)")]
    CacheReadOfWrittenBuffer {
        /// The buffer.
        buffer: String,
    },
    /// The region cannot be held in a dense cache.
    #[error("buffer `{buffer}` cannot be cached: dimension {dim}: {reason}")]
    UncacheableRegion {
        /// The buffer.
        buffer: String,
        /// The dimension.
        dim: usize,
        /// Why.
        reason: String,
    },
    /// A cache's write-back would rewrite elements that other iterations of an enclosing
    /// parallel or thread-bound loop own.
    #[error(
        "cache_write of `{buffer}` inside loop `{loop}`, which runs in parallel: every iteration would write back \
         the whole region, also elements other iterations write; cache at a loop whose iterations own their elements"
    )]
    SharedWriteBack {
        /// The buffer.
        buffer: String,
        /// The parallel loop.
        r#loop: String,
    },
    /// A cache's write-back inside a block whose parallel units accumulate into shared
    /// elements (a reduction iterator bound to a parallel loop, or `atomic` accumulation).
    #[error(
        "cache_write of `{buffer}` inside block `{block}`, whose parallel units accumulate into the same elements: \
         each would write back its own partial sum over the others'"
    )]
    SharedAccumulator {
        /// The buffer.
        buffer: String,
        /// The block.
        block: String,
    },
    /// `cache_accumulate` of a buffer that the body does more with than the block's sums.
    #[error(
        "cache_accumulate of `{buffer}` for block `{block}`: {reason}; only a block that adds to the buffer \
         (`X[i] = X[i] + e`, no init), alone in the cached body, can sum into a zeroed cache"
    )]
    NotAnAccumulation {
        /// The buffer.
        buffer: String,
        /// The block.
        block: String,
        /// What else happens.
        reason: String,
    },
    /// Another buffer over the same parameter is accessed in the cached body.
    #[error("buffer `{buffer}` cannot be cached: `{other}` aliases it there")]
    AliasedBuffer {
        /// The buffer.
        buffer: String,
        /// The aliasing buffer.
        other: String,
    },
    /// Atomic updates cannot go through a cache.
    #[error("buffer `{buffer}` is updated atomically in the cached body")]
    AtomicInCache {
        /// The buffer.
        buffer: String,
    },
    /// `set_scope` of a buffer bound to a parameter.
    #[error("buffer `{buffer}` is bound to a parameter; only allocated buffers have a scope to set")]
    NotAllocated {
        /// The buffer.
        buffer: String,
    },
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
    /// `workspace` cannot give the axis a workspace in this sparse iteration.
    #[error("no workspace for axis `{axis}` in `{sp_iter}`: {why}")]
    NoWorkspace {
        /// The sparse iteration.
        sp_iter: String,
        /// The axis.
        axis: String,
        /// Why not.
        why: String,
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
    /// A co-iteration's iterator cannot be fused.
    #[error("iterator `{iter}` co-iterates (union or intersect) and cannot be fused")]
    CannotFuseMerge {
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
    /// Reordering would run a block's iterations in another order where they do not commute.
    #[error(
        "reorder would change the order of loops `{outer}` and `{inner}`: block `{block}` runs their iterations in \
         order (neither picks its spatial point, and its updates are not accumulations `X = X + e`)"
    )]
    OrderMatters {
        /// The block.
        block: String,
        /// The loop that was outside.
        outer: String,
        /// The loop that was inside.
        inner: String,
    },
    /// `specialize` of a loop it cannot copy.
    #[error("specialize: loop `{loop_var}` cannot be copied: {why}")]
    LoopNotSpecializable {
        /// The loop.
        loop_var: String,
        /// Why not.
        why: String,
    },
    /// The loop is not serial any more (already parallel, vectorized, unrolled or bound).
    #[error("loop `{loop_var}` is already {kind}")]
    AlreadyBound {
        /// The loop.
        loop_var: String,
        /// Its kind.
        kind: String,
    },
    /// Binding a loop to a block index inside a kernel would repeat, once per block of that
    /// dimension, a statement beside it that writes memory the blocks share.
    #[error("cannot bind `{loop_var}` to {tag}: a statement of the same kernel outside it writes `{buffer}`, and every block of {tag} would repeat it unordered with the others' updates; move that statement into a kernel of its own (or bind this loop's nest at the top)")]
    RepeatedByBlocks {
        /// The loop.
        loop_var: String,
        /// The tag.
        tag: String,
        /// The buffer written beside the loop.
        buffer: String,
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
    /// A loop whose iterations are not proven independent: a statement under it may race
    /// with the same statement of another iteration.
    #[error("loop `{loop_var}` cannot be {action}: {why}")]
    NotIndependent {
        /// The loop.
        loop_var: String,
        /// The buffer of the racy access.
        buffer: String,
        /// Why no proof was found, naming the statement.
        why: String,
        /// `parallelized`, `vectorized` or `bound`.
        action: &'static str,
    },
    /// `decompose_reduction` of a block without `init`.
    #[error("block `{block}` has no init to decompose")]
    NoInit {
        /// The block.
        block: String,
    },
    /// The loop is not a loop around the block inside the block's enclosing block.
    #[error("loop `{loop_var}` is not a loop around block `{block}` (inside its enclosing block)")]
    NotAnEnclosingLoop {
        /// The loop.
        loop_var: String,
        /// The block.
        block: String,
    },
    /// A statement other than `for` or a guard `if` lies between a block and its
    /// enclosing block, where the primitive needs a loop nest.
    #[error("a `{stmt}` lies in the loop nest of block `{block}`")]
    UnsupportedNest {
        /// The block.
        block: String,
        /// The statement's keyword.
        stmt: &'static str,
    },
    /// A loop above the decomposition point drives a reduction iterator, so the init would
    /// run more than once per reduction.
    #[error("loop `{loop_var}` above `{at}` drives a reduction iterator of block `{block}`")]
    ReductionLoopAbove {
        /// The loop.
        loop_var: String,
        /// The decomposition loop.
        at: String,
        /// The block.
        block: String,
    },
    /// A loop drives both spatial and reduction iterators of the block.
    #[error("loop `{loop_var}` drives both spatial and reduction iterators of block `{block}`")]
    MixedLoop {
        /// The loop.
        loop_var: String,
        /// The block.
        block: String,
    },
    /// A loop of the nest drives no iterator of the block.
    #[error("loop `{loop_var}` drives no iterator of block `{block}`")]
    UnboundLoop {
        /// The loop.
        loop_var: String,
        /// The block.
        block: String,
    },
    /// A reduction iterator is not 0 at the first iteration of its loops, so the first
    /// reduction step is not where the init runs.
    #[error("reduction iterator `{iter}` of block `{block}` is not 0 at the first iteration of its loops")]
    InitNotAtStart {
        /// The block.
        block: String,
        /// The iterator.
        iter: String,
    },
    /// `rfactor`: the loop does not drive the iterators of exactly one block.
    #[error("rfactor: loop `{loop_var}` drives iterators of {count} blocks, not exactly one")]
    RfactorBlocks {
        /// The loop.
        loop_var: String,
        /// How many blocks it drives.
        count: usize,
    },
    /// `rfactor`: the loop must drive exactly one reduction iterator and no spatial one.
    #[error("rfactor: loop `{loop_var}` drives {spatial} spatial and {reduce} reduction iterators of block `{block}`, not exactly one reduction")]
    NotOneReduceIter {
        /// The loop.
        loop_var: String,
        /// The block.
        block: String,
        /// Spatial iterators it drives.
        spatial: usize,
        /// Reduction iterators it drives.
        reduce: usize,
    },
    /// `rfactor`: the block is not a sum reduction `C[idx] = C[idx] + e`.
    #[error("rfactor: block `{block}` is not a sum reduction: {reason}")]
    NotAReduction {
        /// The block.
        block: String,
        /// What does not match.
        reason: String,
    },
    /// `rfactor`: the factor axis is past the rf buffer's dimensions.
    #[error("rfactor: factor axis {axis} is out of range 0..={max}")]
    FactorAxisOutOfRange {
        /// The axis given.
        axis: usize,
        /// The largest valid axis.
        max: usize,
    },
    /// `rfactor`: a guard of the nest tests both spatial and reduction loops, so the
    /// write-back cannot keep or drop it.
    #[error("rfactor: guard `{cond}` around block `{block}` tests both spatial and reduction loops")]
    GuardMixesIters {
        /// The block.
        block: String,
        /// The guard, printed.
        cond: String,
    },
    /// `rfactor`: the rf buffer's shape uses a variable not defined where it is allocated.
    #[error("rfactor: the rf buffer's shape uses `{var}`, which is not defined where the buffer is allocated")]
    RfactorShape {
        /// The variable.
        var: String,
    },
    /// `compute_at`/`reverse_compute_at`: the block and the loop are not in sibling nests
    /// of the same statement list.
    #[error("{primitive}: block `{block}` and loop `{loop_var}` are not in sibling loop nests")]
    NotSiblingNests {
        /// The primitive.
        primitive: &'static str,
        /// The block.
        block: String,
        /// The loop.
        loop_var: String,
    },
    /// `compute_at`/`reverse_compute_at`: the moved block is not alone in a perfect loop
    /// nest below the common statement list.
    #[error("{primitive}: block `{block}` is not alone in a perfect loop nest")]
    NotAPerfectNest {
        /// The primitive.
        primitive: &'static str,
        /// The block.
        block: String,
    },
    /// `compute_at`/`reverse_compute_at`: the moved nest's outer loops do not match the
    /// loops around the target loop.
    #[error("{primitive}: loop `{loop_var}` of the moved nest does not match loop `{target}` ({reason})")]
    LoopMismatch {
        /// The primitive.
        primitive: &'static str,
        /// The moved nest's loop (or `-` when it has too few loops).
        loop_var: String,
        /// The target nest's loop.
        target: String,
        /// What differs.
        reason: &'static str,
    },
    /// `compute_at` needs the producer before the consumer's nest, `reverse_compute_at` the
    /// consumer after the producer's nest.
    #[error("{primitive}: block `{block}`'s nest must come {expected} the nest of loop `{loop_var}`")]
    WrongOrder {
        /// The primitive.
        primitive: &'static str,
        /// The block.
        block: String,
        /// The loop.
        loop_var: String,
        /// `before` or `after`.
        expected: &'static str,
    },
    /// `compute_at`/`reverse_compute_at`: moving the nest would reorder conflicting
    /// accesses to a buffer (one of them a write).
    #[error("{primitive}: moving block `{block}` reorders accesses to buffer `{buffer}` ({reason})")]
    AccessConflict {
        /// The primitive.
        primitive: &'static str,
        /// The moved block.
        block: String,
        /// The buffer.
        buffer: String,
        /// Which accesses.
        reason: String,
    },
    /// A trace instruction does not fit the trace (a reference defined nowhere earlier, or
    /// another number of outputs than the primitive returns).
    #[error("trace instruction {index} (`{inst}`): {reason}")]
    BadTrace {
        /// Its position in the trace, from 0.
        index: usize,
        /// The primitive.
        inst: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A lowering pass applied through the schedule failed.
    #[error("lowering failed: {0}")]
    Lowering(#[from] sparsec_passes::PassError),
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
