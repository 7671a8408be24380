//! What the verifier reports: one variant per rule.

use crate::types::{AxisKind, DType, Stage};

/// One broken rule, with the names involved. The message names the offending axis, buffer or
/// variable and says what was expected.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum VerifyErrorKind {
    // ---- handles and names --------------------------------------------------------------
    /// A handle or parameter index that does not point into its arena.
    #[error("{what} handle #{index} is out of range (the function has {len})")]
    DanglingHandle {
        /// `variable`, `axis`, `buffer` or `parameter`.
        what: &'static str,
        /// The raw index.
        index: usize,
        /// How many items the arena holds.
        len: usize,
    },
    /// Two parameters share a name.
    #[error("parameter `{name}` is declared twice")]
    DuplicateParam {
        /// The name.
        name: String,
    },
    /// A scalar parameter whose variable is not the parameter's namesake.
    #[error("scalar parameter `{param}` is bound to variable `{var}`; the names must match")]
    ParamVarName {
        /// The parameter.
        param: String,
        /// The variable's name.
        var: String,
    },
    /// A parameter, axis, buffer or variable name that cannot be printed and parsed back.
    #[error("{what} name `{name}` is not an identifier (ASCII letters, digits and `_`, not starting with a digit, not a keyword or `inf`/`nan`)")]
    BadName {
        /// `parameter`, `axis`, `buffer` or `variable`.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// Two axes, two buffers, or an axis and a buffer share a name.
    #[error("`{name}` is declared twice (first as {first}, then as {second})")]
    NameClash {
        /// The name.
        name: String,
        /// `an axis` or `a buffer`.
        first: &'static str,
        /// `an axis` or `a buffer`.
        second: &'static str,
    },
    /// Two functions of a module share a name.
    #[error("function `{name}` is defined twice")]
    DuplicateFunc {
        /// The name.
        name: String,
    },

    // ---- axes ---------------------------------------------------------------------------
    /// An axis whose parent comes later in the axis arena (or is the axis itself).
    #[error("axis `{axis}`'s parent `{parent}` is defined after it")]
    AxisParentAfter {
        /// The axis.
        axis: String,
        /// Its parent.
        parent: String,
    },
    /// A `dense_fixed` axis with a parent.
    #[error("axis `{axis}` is dense_fixed and must not have a parent, found parent `{parent}`")]
    UnexpectedAxisParent {
        /// The axis.
        axis: String,
        /// The parent it has.
        parent: String,
    },
    /// `unique = false` on an axis other than a root `sparse_fixed` one.
    #[error("axis `{axis}` is declared `unique = false`, but only a root sparse_fixed axis may repeat coordinates (COO's row level), not {what}")]
    NonUniqueAxis {
        /// The axis.
        axis: String,
        /// What it is instead.
        what: String,
    },
    /// A spatial iterator over an axis that repeats coordinates: its points are not distinct.
    #[error("sp_iter `{sp_iter}`: iterator `{var}` over `{axis}` must be a reduction (`R`): the axis repeats coordinates (`unique = false`), so its points are not distinct and no init can run once per point; zero the output in a separate sp_iter")]
    SpatialOverRepeats {
        /// The sp_iter.
        sp_iter: String,
        /// The iterator variable.
        var: String,
        /// The non-unique axis.
        axis: String,
    },
    /// An `init` in a sparse iteration over an axis that repeats coordinates: no spatial point
    /// is visited once, so there is nothing to run it once per.
    #[error("sp_iter `{sp_iter}` iterates `{axis}`, which repeats coordinates (`unique = false`), so it has no init: zero the output in a separate sp_iter")]
    InitOverRepeats {
        /// The sp_iter.
        sp_iter: String,
        /// The non-unique axis.
        axis: String,
    },
    /// A Stage-I access to a dimension over an axis that repeats coordinates, by anything but
    /// the iterator over that axis: a coordinate names no single position there.
    #[error("`{buffer}` is indexed in axis `{axis}`, which repeats coordinates (`unique = false`), by something other than an iterator over `{axis}`: a coordinate names no single entry there, so such an axis is read and written only at its own iterator")]
    NonUniqueIndex {
        /// The buffer.
        buffer: String,
        /// The non-unique axis.
        axis: String,
    },
    /// A variable axis without a parent.
    #[error("axis `{axis}` is {} and needs a parent axis", kind.name())]
    MissingAxisParent {
        /// The axis.
        axis: String,
        /// Its kind.
        kind: AxisKind,
    },
    /// An axis lacks a field its kind needs (`nnz`, `indptr`, `indices`).
    #[error("{} axis `{axis}` needs `{field}`", kind.name())]
    AxisFieldMissing {
        /// The axis.
        axis: String,
        /// Its kind.
        kind: AxisKind,
        /// The missing field.
        field: &'static str,
    },
    /// An axis has a field its kind does not take.
    #[error("{} axis `{axis}` must not have `{field}`", kind.name())]
    AxisFieldUnexpected {
        /// The axis.
        axis: String,
        /// Its kind.
        kind: AxisKind,
        /// The extra field.
        field: &'static str,
    },
    /// `indptr` or `indices` of an axis names a scalar parameter.
    #[error("`{field}` of axis `{axis}` must be a handle parameter, but `{param}` is a scalar")]
    AxisArrayNotHandle {
        /// The axis.
        axis: String,
        /// `indptr` or `indices`.
        field: &'static str,
        /// The parameter named.
        param: String,
    },
    /// The length or nnz of an axis is not an integer.
    #[error("`{field}` of axis `{axis}` must be an integer, found {found}")]
    AxisExprNotInt {
        /// The axis.
        axis: String,
        /// `length` or `nnz`.
        field: &'static str,
        /// Its dtype.
        found: DType,
    },
    /// The length or nnz of an axis uses something other than scalar parameters and literals.
    #[error("`{field}` of axis `{axis}` may only use scalar parameters and literals, found {culprit}")]
    AxisExprNotParamExpr {
        /// The axis.
        axis: String,
        /// `length` or `nnz`.
        field: &'static str,
        /// What it uses instead (`variable `i``, `a load from `X``).
        culprit: String,
    },
    /// An axis index dtype that is not an integer.
    #[error("index dtype of axis `{axis}` must be i32 or i64, found {found}")]
    AxisIdType {
        /// The axis.
        axis: String,
        /// Its idtype.
        found: DType,
    },

    // ---- buffers ------------------------------------------------------------------------
    /// `modes` that is not a permutation of the buffer's axes, or on a buffer that is not a
    /// sparse parameter.
    #[error("buffer `{buffer}`: modes {modes:?} {problem}")]
    BadModes {
        /// The buffer.
        buffer: String,
        /// The declared modes.
        modes: Vec<usize>,
        /// What is wrong.
        problem: String,
    },
    /// A sparse buffer's axis does not directly follow its parent (storage rule).
    #[error("buffer `{buffer}`: axis `{axis}` must directly follow its parent `{parent}` (storage rule), but {found}")]
    BufferAxisOrder {
        /// The buffer.
        buffer: String,
        /// The axis.
        axis: String,
        /// Its parent.
        parent: String,
        /// What precedes it instead (`it comes first`, `it follows `K``).
        found: String,
    },
    /// A dense buffer dimension that is not an integer.
    #[error("dimension {dim} of buffer `{buffer}` must be an integer, found {found}")]
    BufferShapeNotInt {
        /// The buffer.
        buffer: String,
        /// 0-based dimension.
        dim: usize,
        /// Its dtype.
        found: DType,
    },
    /// A buffer bound to a scalar parameter.
    #[error("buffer `{buffer}` must be bound to a handle parameter, but `{param}` is a scalar")]
    BufferStorageNotHandle {
        /// The buffer.
        buffer: String,
        /// The parameter.
        param: String,
    },
    /// `extra_storage` that is not an integer.
    #[error("`extra_storage` of buffer `{buffer}` must be an integer, found {found}")]
    BufferExtraStorageNotInt {
        /// The buffer.
        buffer: String,
        /// Its dtype.
        found: DType,
    },
    /// A default value of the wrong dtype.
    #[error("default value of buffer `{buffer}` must be {expected}, found {found}")]
    BufferDefaultDType {
        /// The buffer.
        buffer: String,
        /// The buffer's dtype.
        expected: DType,
        /// The default's dtype.
        found: DType,
    },

    // ---- stages -------------------------------------------------------------------------
    /// A statement form the stage does not have.
    #[error("`{stmt}` is not allowed at Stage {stage} ({hint})")]
    StmtNotAllowed {
        /// `sp_iter`, `for` or `block`.
        stmt: &'static str,
        /// The function's stage.
        stage: Stage,
        /// Where the form belongs.
        hint: &'static str,
    },
    /// A sparse buffer in a Stage III function.
    #[error("buffer `{buffer}` is sparse at Stage III, where every buffer is dense")]
    SparseBufferAtStageIII {
        /// The buffer.
        buffer: String,
    },

    // ---- sparse iterations --------------------------------------------------------------
    /// An sp_iter binding a different number of variables than it iterates axes.
    #[error("sp_iter `{sp_iter}` iterates {axes} axes but binds {vars} variables")]
    SpIterVarCount {
        /// The sp_iter.
        sp_iter: String,
        /// Axes iterated (fused ones counted one by one).
        axes: usize,
        /// Variables bound.
        vars: usize,
    },
    /// A kind string of the wrong length.
    #[error("iterator kind string {kinds:?} has length {len} but sp_iter {sp_iter} has {iters} iterators")]
    KindsLength {
        /// The kind string.
        kinds: String,
        /// Its length in characters.
        len: usize,
        /// The sp_iter.
        sp_iter: String,
        /// Number of iterator variables.
        iters: usize,
    },
    /// A kind string with a letter other than `S`/`R`.
    #[error("iterator kind string {kinds:?} of sp_iter {sp_iter} contains {letter:?}; only 'S' (spatial) and 'R' (reduction) are allowed")]
    KindsLetter {
        /// The kind string.
        kinds: String,
        /// The sp_iter.
        sp_iter: String,
        /// The first bad letter.
        letter: char,
    },
    /// An iterated axis whose parent is not iterated before it.
    #[error("sp_iter `{sp_iter}` iterates axis `{axis}` but no iterator over its parent `{parent}` comes earlier in it or in an enclosing sp_iter")]
    MissingParentIterator {
        /// The sp_iter.
        sp_iter: String,
        /// The axis.
        axis: String,
        /// Its (possibly attached) parent.
        parent: String,
    },
    /// A `fuse(...)` group whose members are not a parent chain.
    #[error("fuse in sp_iter `{sp_iter}`: axis `{axis}` must be a child of `{expected}` (each fused axis is the parent of the next), but {found}")]
    FuseNotChain {
        /// The sp_iter.
        sp_iter: String,
        /// The member that breaks the chain.
        axis: String,
        /// The previous member.
        expected: String,
        /// Its actual parent (`its parent is `X``, `it has no parent`).
        found: String,
    },
    /// `attach(X, P)` where X's declared parent is not dense_fixed.
    #[error("attach({axis}, {new_parent}) in sp_iter `{sp_iter}`: the declared parent of `{axis}` must be dense_fixed, but {found}")]
    AttachParent {
        /// The sp_iter.
        sp_iter: String,
        /// The axis attached.
        axis: String,
        /// The new parent.
        new_parent: String,
        /// What the declared parent is instead.
        found: String,
    },
    /// A co-iterated axis that cannot be merged with the first: not a sorted sparse axis
    /// with rows of its own, or another parent, length or index type.
    #[error("{op}(..) in sp_iter `{sp_iter}`: `{axis}` cannot be co-iterated with `{first}`: {why}")]
    MergeAxes {
        /// The sp_iter.
        sp_iter: String,
        /// `union` or `intersect`.
        op: &'static str,
        /// The member at fault.
        axis: String,
        /// The first member.
        first: String,
        /// What is wrong.
        why: String,
    },
    /// A store indexed, at a sparse dimension, by a union's iterator: the coordinate may be
    /// absent from that axis (where only another member stores it).
    #[error("the store to `{buffer}` takes `{var}`, the iterator of union(..) in sp_iter `{sp_iter}`, as its coordinate in sparse axis `{axis}`, which may not store it; write a dense buffer, or iterate intersect(..) or the axis itself")]
    StoreAtUnionCoordinate {
        /// The buffer.
        buffer: String,
        /// The union's iterator.
        var: String,
        /// The sp_iter.
        sp_iter: String,
        /// The buffer's axis at that index.
        axis: String,
    },
    /// A store indexed, at a sparse dimension, by an iterator over another axis: the
    /// coordinate may be absent from that axis.
    #[error("the store to `{buffer}` takes `{var}`, an iterator over `{iterated}`, as its coordinate in `{axis}`, which may not store it: a sparse dimension is written by its own axis's iterator")]
    StoreAtLookedUpCoordinate {
        /// The buffer.
        buffer: String,
        /// The iterator.
        var: String,
        /// The buffer's axis at that index.
        axis: String,
        /// What the iterator iterates.
        iterated: String,
    },
    /// An assembled axis (`pattern = ..`) that cannot be one.
    #[error("axis `{axis}` cannot be assembled: {why}")]
    AssembledAxis {
        /// The axis.
        axis: String,
        /// What is wrong.
        why: String,
    },
    /// A Stage-I access to an assembled axis through something other than an iterator of
    /// its pattern's co-iteration.
    #[error("`{buffer}` is indexed in its assembled axis `{axis}` by something other than the iterator of {pattern}: an assembled axis is written and read only while its pattern is iterated")]
    AssembledIndex {
        /// The buffer.
        buffer: String,
        /// The assembled axis.
        axis: String,
        /// `union(JA, JB)`.
        pattern: String,
    },
    /// A workspace attribute (`"workspace.KC" = "position_map"`) that cannot apply.
    #[error("sp_iter `{sp_iter}`: attribute `{key}`: {why}")]
    BadWorkspace {
        /// The sp_iter.
        sp_iter: String,
        /// The attribute's key.
        key: String,
        /// What is wrong.
        why: String,
    },
    /// An axis iterated below a co-iterated one: a co-iteration's iterator picks no row of
    /// any one member.
    #[error("sp_iter `{sp_iter}`: `{axis}` lies below `{parent}`, which a co-iteration iterates; a coordinate of a union or intersection picks no row of `{parent}`")]
    BelowMerge {
        /// The sp_iter.
        sp_iter: String,
        /// The child axis.
        axis: String,
        /// The co-iterated parent.
        parent: String,
    },
    /// A spatial iterator below a reduction iterator of the same sp_iter that has an init.
    #[error("sp_iter `{sp_iter}`: spatial iterator `{var}` over `{axis}` lies below `{parent}`, which a reduction iterator of the same sp_iter iterates, so its init cannot run once per spatial point before the reduction: zero the output in a separate sp_iter and drop the init")]
    SpatialUnderReduction {
        /// The sp_iter.
        sp_iter: String,
        /// The spatial iterator variable.
        var: String,
        /// Its axis.
        axis: String,
        /// The parent iterated by a reduction.
        parent: String,
    },
    /// A buffer over a handle that an axis reads as its indptr or indices, with another dtype.
    #[error("buffer `{buffer}` reads the {field} array of axis `{axis}` as {found}, but the axis's index dtype is {expected}")]
    BufferAxisArrayDType {
        /// The buffer.
        buffer: String,
        /// The axis.
        axis: String,
        /// `indptr` or `indices`.
        field: &'static str,
        /// The axis's index dtype.
        expected: DType,
        /// The buffer's dtype.
        found: DType,
    },
    /// A store of a sparse iteration that does not depend on one of its spatial iterators.
    #[error("sp_iter `{sp_iter}`: the store to `{buffer}` does not depend on spatial iterator `{var}`, so it reduces over it: declare it `R` (kinds \"{kinds}\")")]
    SpatialNotWritten {
        /// The sp_iter.
        sp_iter: String,
        /// The iterator declared spatial.
        var: String,
        /// The buffer stored to.
        buffer: String,
        /// The kind string with the reduced iterators marked `R`.
        kinds: String,
    },
    /// A spatial iterator over an axis whose rows may repeat a coordinate (ELL padding) that
    /// indexes a store by its coordinate: two of its positions may write one element.
    #[error("sp_iter `{sp_iter}`: spatial iterator `{var}` walks `{axis}`, whose rows may store a coordinate twice (sparse_fixed rows are padded), so the store to `{buffer}`[{at}] may write one element from two positions; index the store by `{var}` only as the position of `{axis}` (in a buffer over `{axis}`), or reduce over `{var}`")]
    SpatialOverRepeatedCoordinates {
        /// The sp_iter.
        sp_iter: String,
        /// The spatial iterator.
        var: String,
        /// Its axis.
        axis: String,
        /// The buffer stored to.
        buffer: String,
        /// The store's indices, printed.
        at: String,
    },
    /// A store of a sparse iteration whose indices do not tell the values of a spatial
    /// iterator apart: two points may write one element.
    #[error("sp_iter `{sp_iter}`: the store to `{buffer}`[{at}] may write one element for several values of spatial iterator `{var}`, so its points are not independent (they would race in parallel); index the store by `{var}` itself, or iterate over `{buffer}`'s axes and reduce over the rest")]
    SpatialPointsShared {
        /// The sp_iter.
        sp_iter: String,
        /// The spatial iterator.
        var: String,
        /// The buffer stored to.
        buffer: String,
        /// The store's indices, printed.
        at: String,
    },
    /// A sparse iteration with spatial iterators that reads a buffer it writes at another
    /// point's element: its iterations depend on each other.
    #[error("sp_iter `{sp_iter}`: `{buffer}` is read at [{read}] but written at [{written}], so spatial points depend on each other; they must be independent (write the dependent part as its own iteration or loop)")]
    DependentPoints {
        /// The sp_iter.
        sp_iter: String,
        /// The buffer.
        buffer: String,
        /// Indices of the read.
        read: String,
        /// Indices of a write.
        written: String,
    },
    /// An `init` that depends on a reduction iterator (it runs once per spatial point).
    #[error("sp_iter `{sp_iter}`: the init depends on reduction iterator `{var}`, but it runs once per spatial point, before the reduction")]
    InitReadsReduction {
        /// The sp_iter.
        sp_iter: String,
        /// The reduction iterator.
        var: String,
    },
    /// A store of a block that does not depend on one of its spatial iterators.
    #[error("block `{block}`: the store to `{buffer}` does not depend on spatial iterator `{var}`, so it reduces over it: declare it reduce")]
    BlockSpatialNotWritten {
        /// The block.
        block: String,
        /// The iterator declared spatial.
        var: String,
        /// The buffer stored to.
        buffer: String,
    },
    /// A block's `init` that depends on a reduce iterator.
    #[error("block `{block}`: the init depends on reduce iterator `{var}`, but it runs once per spatial point, before the reduction")]
    BlockInitReadsReduce {
        /// The block.
        block: String,
        /// The reduce iterator.
        var: String,
    },
    /// A block that reads a buffer it writes at another point's element.
    #[error("block `{block}`: `{buffer}` is read at [{read}] but written at [{written}], so spatial points depend on each other; they must be independent")]
    BlockDependentPoints {
        /// The block.
        block: String,
        /// The buffer.
        buffer: String,
        /// Indices of the read.
        read: String,
        /// Indices of a write.
        written: String,
    },
    /// A spatial binding not proven one-to-one in the loops that drive the block: two
    /// iterations may reach the same spatial point.
    #[error("block `{block}`: the binding `{var} = {binding}` is not provably one-to-one in the loops that drive the block, so two iterations may share a spatial point (bind loop variables, `v + c`, `c * v + w` with `w` below `c`, or `f // n` with `f % n`; else declare it reduce)")]
    BlockBindingNotInjective {
        /// The block.
        block: String,
        /// The spatial iterator.
        var: String,
        /// Its binding, printed.
        binding: String,
    },
    /// An iterator variable whose dtype is not its axis's index dtype.
    #[error("iterator `{var}` of sp_iter `{sp_iter}` has type {found}, but axis `{axis}` has index dtype {expected}")]
    SpIterVarDType {
        /// The sp_iter.
        sp_iter: String,
        /// The variable.
        var: String,
        /// Its axis.
        axis: String,
        /// The axis idtype.
        expected: DType,
        /// The variable's dtype.
        found: DType,
    },

    // ---- accesses -----------------------------------------------------------------------
    /// An access with the wrong number of indices.
    #[error("buffer `{buffer}` takes {expected} indices, found {found}")]
    IndexCount {
        /// The buffer.
        buffer: String,
        /// Its number of dimensions.
        expected: usize,
        /// Indices given.
        found: usize,
    },
    /// A non-integer index.
    #[error("index {dim} of buffer `{buffer}` must be an integer, found {found}")]
    IndexNotInt {
        /// The buffer.
        buffer: String,
        /// 0-based position of the index.
        dim: usize,
        /// Its dtype.
        found: DType,
    },
    /// A store of a value of another dtype than the buffer's.
    #[error("store to buffer `{buffer}` of element type {expected} has a value of type {found}")]
    StoreDType {
        /// The buffer.
        buffer: String,
        /// Its dtype.
        expected: DType,
        /// The value's dtype.
        found: DType,
    },
    /// An atomic add of a value of another dtype than the buffer's.
    #[error("atomic_add to buffer `{buffer}` of element type {expected} adds a value of type {found}")]
    AtomicAddDType {
        /// The buffer.
        buffer: String,
        /// Its dtype.
        expected: DType,
        /// The value's dtype.
        found: DType,
    },

    // ---- reductions ---------------------------------------------------------------------
    /// A store indexed by a reduction iterator of an enclosing sp_iter.
    #[error("reduction iterator `{var}` of sp_iter `{sp_iter}` indexes the store to `{buffer}`: a reduction may only write outputs indexed by spatial iterators")]
    SpIterReductionWrite {
        /// The reduction variable.
        var: String,
        /// The buffer written.
        buffer: String,
        /// The sp_iter binding it.
        sp_iter: String,
    },
    /// A store indexed by a reduce iterator of an enclosing block.
    #[error("reduce iterator `{var}` of block `{block}` indexes the store to `{buffer}`: a block may only write outputs indexed by spatial iterators")]
    BlockReductionWrite {
        /// The reduce variable.
        var: String,
        /// The buffer written.
        buffer: String,
        /// The block binding it.
        block: String,
    },

    // ---- scoping ------------------------------------------------------------------------
    /// A variable used where it is not bound.
    #[error("variable `{var}` is used outside its scope")]
    VarOutOfScope {
        /// The variable.
        var: String,
    },
    /// A variable handle bound by two binders.
    #[error("variable `{var}` is bound twice")]
    VarBoundTwice {
        /// The variable.
        var: String,
    },
    /// A binder whose name is already bound in scope.
    #[error("`{var}` shadows a variable of the same name that is already in scope")]
    Shadowing {
        /// The name.
        var: String,
    },
    /// A statement-allocated buffer used outside the list that allocates it.
    #[error("buffer `{buffer}` is used outside the statement list that allocates it")]
    BufferOutOfScope {
        /// The buffer.
        buffer: String,
    },
    /// An `Alloc` statement for a buffer bound to a parameter.
    #[error("buffer `{buffer}` is bound to a parameter and cannot be allocated by a statement")]
    AllocOfParamBuffer {
        /// The buffer.
        buffer: String,
    },
    /// A buffer allocated by more than one statement.
    #[error("buffer `{buffer}` is allocated by more than one statement")]
    AllocTwice {
        /// The buffer.
        buffer: String,
    },

    // ---- types --------------------------------------------------------------------------
    /// A literal whose dtype does not fit it.
    #[error("literal {literal} is not a valid {dtype} value")]
    LiteralDType {
        /// The literal as text.
        literal: String,
        /// Its dtype.
        dtype: DType,
    },
    /// Binary operands (or `pow`'s arguments) of different dtypes.
    #[error("operands of `{op}` have different types: {lhs} and {rhs}")]
    OperandMismatch {
        /// The operator.
        op: &'static str,
        /// Left dtype.
        lhs: DType,
        /// Right dtype.
        rhs: DType,
    },
    /// An operator applied to an operand of the wrong kind of dtype.
    #[error("`{op}` needs {expected} operands, found {found}")]
    OperandType {
        /// The operator or intrinsic.
        op: &'static str,
        /// `bool`, `numeric`, `float`, ...
        expected: &'static str,
        /// The operand's dtype.
        found: DType,
    },
    /// An intrinsic called with the wrong number of arguments.
    #[error("`{name}` takes {expected} arguments, found {found}")]
    IntrinsicArity {
        /// The intrinsic.
        name: &'static str,
        /// Its arity.
        expected: usize,
        /// Arguments given.
        found: usize,
    },
    /// An `if`, `while` or `select` condition that is not bool.
    #[error("condition of `{what}` must be bool, found {found}")]
    ConditionNotBool {
        /// `if`, `while` or `select`.
        what: &'static str,
        /// The condition's dtype.
        found: DType,
    },
    /// `select` arms of different dtypes.
    #[error("arms of `select` have different types: {then} and {otherwise}")]
    SelectArms {
        /// Type of the first arm.
        then: DType,
        /// Type of the second arm.
        otherwise: DType,
    },
    /// A loop bound that is not an integer.
    #[error("{what} of loop `{var}` must be an integer, found {found}")]
    LoopBoundNotInt {
        /// The loop variable.
        var: String,
        /// `start` or `extent`.
        what: &'static str,
        /// Its dtype.
        found: DType,
    },
    /// A loop bound of another integer dtype than the loop variable.
    #[error("{what} of loop `{var}` has type {found}, but `{var}` is {expected}")]
    LoopBoundDType {
        /// The loop variable.
        var: String,
        /// `start` or `extent`.
        what: &'static str,
        /// The variable's dtype.
        expected: DType,
        /// The bound's dtype.
        found: DType,
    },
    /// A block iterator extent that is not an integer.
    #[error("extent of block iterator `{var}` must be an integer, found {found}")]
    BlockIterExtentNotInt {
        /// The iterator.
        var: String,
        /// The extent's dtype.
        found: DType,
    },
    /// A block iterator variable that is not an integer.
    #[error("block iterator `{var}` must be an integer, found {found}")]
    BlockIterNotInt {
        /// The iterator.
        var: String,
        /// Its dtype.
        found: DType,
    },
    /// A block iterator binding of another dtype than the iterator.
    #[error("binding of block iterator `{var}` has type {found}, but `{var}` is {expected}")]
    BlockIterBindingDType {
        /// The iterator.
        var: String,
        /// The iterator's dtype.
        expected: DType,
        /// The binding's dtype.
        found: DType,
    },
    /// A `let` whose value has another dtype than its variable.
    #[error("`let {var}` declares type {expected} but the value has type {found}")]
    LetDType {
        /// The variable.
        var: String,
        /// The variable's dtype.
        expected: DType,
        /// The value's dtype.
        found: DType,
    },
    /// An evaluated expression that is not a call (only calls can stand as statements).
    #[error("only calls can be evaluated as statements")]
    EvaluateNotCall,
}
