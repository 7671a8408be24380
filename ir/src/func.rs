//! Functions, modules, axes, buffers and statements: the one data model of all three stages.

use crate::arena::{Arena, Handle};
use crate::expr::{BinOp, Expr};
use crate::span::Span;
use crate::types::{AxisKind, DType, ForKind, IterKind, Scope, Stage, ThreadTag};
use indexmap::IndexMap;
use std::collections::HashMap;


/// Most iterations of one execution of a `while` loop (searches need about 64): a loop
/// whose condition still holds after this many is a runaway, reported instead of hanging.
pub const MAX_WHILE_ITERATIONS: i64 = 1 << 24;

/// Handle of a scalar variable in [`Func::vars`].
pub type VarId = Handle<Var>;
/// Handle of an axis in [`Func::axes`].
pub type AxisId = Handle<Axis>;
/// Handle of a buffer in [`Func::buffers`].
pub type BufferId = Handle<Buffer>;
/// Index of a parameter in [`Func::params`] (ABI order).
pub type ParamId = usize;

/// A scalar variable. Names are unique within a function.
#[derive(Clone, Debug, PartialEq)]
pub struct Var {
    /// Name as printed.
    pub name: String,
    /// Scalar type.
    pub dtype: DType,
}

/// What a parameter passes.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamKind {
    /// A pointer to an array, bound by buffers and axes (`indptr`, `indices`).
    Handle,
    /// A scalar, readable in expressions through its variable.
    Scalar(VarId),
}

/// A function parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Name as printed (for scalars, equal to the variable's name).
    pub name: String,
    /// Handle or scalar.
    pub kind: ParamKind,
    /// Where it was written.
    pub span: Span,
}

/// A sparse axis (Stage I and II).
///
/// Storage rule used everywhere: walking a buffer's axes left to right with a running flat
/// offset `off`, a fixed axis does `off = off * row_extent + pos` and a variable axis does
/// `off = indptr[off] + pos`. A variable or parented axis therefore must directly follow
/// its parent in every buffer that uses it.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// Name as printed.
    pub name: String,
    /// Dense/sparse × fixed/variable.
    pub kind: AxisKind,
    /// Parent axis; `None` for `dense_fixed` and for a root `sparse_fixed` (a set of
    /// coordinates: a sparse vector, DCSR's rows); variable axes always have one.
    pub parent: Option<AxisId>,
    /// Upper bound of coordinates (`0..length`).
    pub length: Expr,
    /// Variable axes: total stored positions (`indptr[last]`). Sparse-fixed: stored
    /// positions per row. Dense-fixed: `None`.
    pub nnz: Option<Expr>,
    /// Row pointer array (variable axes).
    pub indptr: Option<ParamId>,
    /// Coordinate array (sparse axes).
    pub indices: Option<ParamId>,
    /// Dtype of `indptr` and `indices` and of iterator variables.
    pub idtype: DType,
    /// Whether the coordinates of each row are sorted ascending.
    pub sorted: bool,
    /// Whether each row stores a coordinate at most once. Only a root `sparse_fixed` axis may
    /// repeat coordinates (`unique = false`, COO's row level): each of its positions is one
    /// entry, and its descendants are singletons.
    pub unique: bool,
    /// An assembled axis (a sparse output's pattern): its rows are the union or
    /// intersection of its members' rows, computed where the caller supplies no `indptr`.
    pub pattern: Option<AxisPattern>,
    /// Where it was declared.
    pub span: Span,
}

/// The pattern of an assembled axis (`pattern = union(JA, JB)`, `product(JA, KB)`). Its
/// `indptr`, `indices` and `nnz` are outputs of the run (the symbolic phase computes them)
/// unless the caller supplies the row pointer, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct AxisPattern {
    /// How the members' rows combine.
    pub op: PatternOp,
    /// The members: for a union or intersection, sorted sparse axes of the assembled axis's
    /// parent, length and index type; for a product `[JA, KB]`.
    pub members: Vec<AxisId>,
}

/// How an assembled axis's rows come from its members'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatternOp {
    /// Row `r` holds the coordinates of any member's row `r`, once, ascending.
    Union,
    /// Row `r` holds the coordinates of every member's row `r`, ascending.
    Intersect,
    /// `product(JA, KB)`: row `r` holds, once and ascending, the coordinates of `KB`'s rows
    /// `j` for each coordinate `j` of `JA`'s row `r` (the pattern of `A·B`, Gustavson's
    /// rows). Its coordinates are written by the symbolic phase, and accesses look them up.
    Product,
}

impl PatternOp {
    /// The keyword of the text form.
    pub fn name(self) -> &'static str {
        match self {
            PatternOp::Union => "union",
            PatternOp::Intersect => "intersect",
            PatternOp::Product => "product",
        }
    }

    /// The co-iteration that visits such a pattern, if one does.
    pub fn merge(self) -> Option<MergeOp> {
        match self {
            PatternOp::Union => Some(MergeOp::Union),
            PatternOp::Intersect => Some(MergeOp::Intersect),
            PatternOp::Product => None,
        }
    }
}

impl From<MergeOp> for PatternOp {
    fn from(op: MergeOp) -> PatternOp {
        match op {
            MergeOp::Union => PatternOp::Union,
            MergeOp::Intersect => PatternOp::Intersect,
        }
    }
}

impl AxisPattern {
    /// Whether a co-iteration `op(axes)` visits exactly this pattern's coordinates.
    pub fn is_iterated_by(&self, op: MergeOp, axes: &[AxisId]) -> bool {
        self.op.merge() == Some(op) && axes.len() == self.members.len() && axes.iter().all(|a| self.members.contains(a))
    }
}

impl Axis {
    /// Number of stored positions in one row, as an expression, for fixed axes.
    pub fn fixed_row_extent(&self) -> Option<&Expr> {
        match self.kind {
            AxisKind::DenseFixed => Some(&self.length),
            AxisKind::SparseFixed => self.nnz.as_ref(),
            _ => None,
        }
    }
}

/// How a buffer's elements are indexed.
#[derive(Clone, Debug, PartialEq)]
pub enum Layout {
    /// A sparse buffer over axes (Stage I and II).
    Sparse(Vec<AxisId>),
    /// A dense row-major buffer with this shape (Stage II allocations and Stage III).
    Dense(Vec<Expr>),
}

/// Where a buffer's storage comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Storage {
    /// Bound to a handle parameter (`match_sparse_buffer`, `match_buffer`).
    Param(ParamId),
    /// Allocated by the function (`alloc_sparse_buffer`, `alloc_buffer`).
    Alloc(Scope),
}

/// A buffer: sparse (bound to axes) or dense.
#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    /// Name as printed.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Axes or shape.
    pub layout: Layout,
    /// Parameter or allocation.
    pub storage: Storage,
    /// Extra elements past the last stored position (1 for an `indptr` buffer).
    pub extra_storage: Option<Expr>,
    /// Value of coordinates that are not stored; zero when `None`.
    pub default: Option<Expr>,
    /// Sparse buffers bound from a file: axis `k` stores mode (dimension) `modes[k]` of the
    /// tensor (`[1, 0]`: CSC of a matrix). `None`: axis `k` stores mode `k`.
    pub modes: Option<Vec<usize>>,
    /// Where it was declared.
    pub span: Span,
}

impl Buffer {
    /// The axes of a sparse buffer.
    pub fn axes(&self) -> &[AxisId] {
        match &self.layout {
            Layout::Sparse(a) => a,
            Layout::Dense(_) => &[],
        }
    }

    /// Number of indices an access takes.
    pub fn ndim(&self) -> usize {
        match &self.layout {
            Layout::Sparse(a) => a.len(),
            Layout::Dense(s) => s.len(),
        }
    }
}

/// Attribute value on functions, sparse iterations, blocks and loops.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum AttrValue {
    /// A flag.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
}

/// Ordered attribute map; order is kept for stable printing.
pub type Attrs = IndexMap<String, AttrValue>;

/// Annotation of a serial loop: compiled code runs this many iterations per trip where the
/// trip count allows (LLVM's `llvm.loop.unroll.count`), so their loads overlap; 1 keeps it
/// rolled (`llvm.loop.unroll.disable`). A hint to code generation; the meaning of the loop
/// is unchanged, and the interpreter ignores it.
pub const UNROLL_FACTOR_ATTR: &str = "unroll_factor";

/// Key prefix of a sparse iteration's workspace attribute: `"workspace.KC" = "position_map"`
/// has `lower_sparse_iter` find the positions of sparse axis `KC`'s coordinates through a
/// position map filled once per row, instead of a search per access. A choice of the
/// schedule (`Schedule::workspace`); the meaning is unchanged, and the interpreter's Stage I
/// ignores it.
pub const WORKSPACE_ATTR: &str = "workspace.";

/// The value of a [`WORKSPACE_ATTR`] attribute asking for a position map.
pub const POSITION_MAP: &str = "position_map";

/// One entry of a sparse iteration's axis list.
#[derive(Clone, Debug, PartialEq)]
pub enum SpIterAxis {
    /// A plain axis: one iterator.
    Axis(AxisId),
    /// `fuse(I, J, ...)`: the axes (each the parent of the next) iterate as one loop over
    /// the innermost axis's positions; one iterator per axis.
    Fuse(Vec<AxisId>),
    /// `attach(X, P)`: iterate `X` with the row picked by the coordinate of the iterator
    /// over `P` instead of `X`'s declared (dense-fixed) parent.
    Attach {
        /// The axis iterated.
        axis: AxisId,
        /// The new parent.
        parent: AxisId,
    },
    /// `union(A, B, ...)` / `intersect(A, B, ...)`: co-iteration. One iterator takes, in
    /// ascending order, the coordinates stored in any (every) one of the axes' rows; the
    /// axes share their parent (or are all roots), length and index type.
    Merge {
        /// Union or intersection.
        op: MergeOp,
        /// The co-iterated axes (at least two).
        axes: Vec<AxisId>,
    },
}

/// How a co-iteration ([`SpIterAxis::Merge`]) combines its axes' coordinates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeOp {
    /// Coordinates stored in at least one axis.
    Union,
    /// Coordinates stored in every axis.
    Intersect,
}

impl MergeOp {
    /// The keyword of the text form.
    pub fn name(self) -> &'static str {
        match self {
            MergeOp::Union => "union",
            MergeOp::Intersect => "intersect",
        }
    }
}

impl SpIterAxis {
    /// The axes this entry iterates, one per iterator variable. A co-iteration's one
    /// iterator counts as iterating its first axis (the others have the same parent and
    /// length); [`SpIterAxis::members`] lists them all.
    pub fn axes(&self) -> Vec<AxisId> {
        match self {
            SpIterAxis::Axis(a) => vec![*a],
            SpIterAxis::Fuse(g) => g.clone(),
            SpIterAxis::Attach { axis, .. } => vec![*axis],
            SpIterAxis::Merge { axes, .. } => axes.first().copied().into_iter().collect(),
        }
    }

    /// Every axis the entry iterates (a co-iteration's members; otherwise [`SpIterAxis::axes`]).
    pub fn members(&self) -> Vec<AxisId> {
        match self {
            SpIterAxis::Merge { axes, .. } => axes.clone(),
            other => other.axes(),
        }
    }

    /// Whether the entry co-iterates.
    pub fn is_merge(&self) -> bool {
        matches!(self, SpIterAxis::Merge { .. })
    }
}

/// A sparse iteration (Stage I): iterates the coordinate space of its axes.
#[derive(Clone, Debug, PartialEq)]
pub struct SpIter {
    /// Name (kept into block names by lowering).
    pub name: String,
    /// Iterated axes, outermost first.
    pub axes: Vec<SpIterAxis>,
    /// `S`/`R` per iterator variable, kept as written so the verifier can report bad ones.
    pub kinds: String,
    /// One variable per iterated axis; its value is the coordinate.
    pub vars: Vec<VarId>,
    /// Runs before the first reduction step of each spatial point.
    pub init: Option<Vec<Stmt>>,
    /// Body.
    pub body: Vec<Stmt>,
    /// Annotations.
    pub attrs: Attrs,
}

impl SpIter {
    /// Parsed kinds, or `None` if the string is malformed.
    pub fn iter_kinds(&self) -> Option<Vec<IterKind>> {
        self.kinds.chars().map(IterKind::from_letter).collect()
    }
}

/// A `for` loop over `min .. min + extent`.
#[derive(Clone, Debug, PartialEq)]
pub struct For {
    /// Loop variable.
    pub var: VarId,
    /// First value.
    pub min: Expr,
    /// Trip count.
    pub extent: Expr,
    /// Serial, parallel, vectorized, unrolled or thread-bound.
    pub kind: ForKind,
    /// Body.
    pub body: Vec<Stmt>,
    /// Annotations.
    pub attrs: Attrs,
}

/// A block iterator: `var: kind(extent) = binding`.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockIter {
    /// The block-local variable.
    pub var: VarId,
    /// Spatial or reduction.
    pub kind: IterKind,
    /// Domain `0..extent`.
    pub extent: Expr,
    /// Value, in terms of the surrounding loop variables.
    pub binding: Expr,
}

/// One dimension of a region: a point or a half-open range `begin:end`.
#[derive(Clone, Debug, PartialEq)]
pub struct RegionRange {
    /// First index.
    pub begin: Expr,
    /// One past the last index; `None` for a single point.
    pub end: Option<Expr>,
}

/// A buffer region read or written by a block.
#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    /// The buffer.
    pub buffer: BufferId,
    /// One range per buffer dimension.
    pub ranges: Vec<RegionRange>,
}

/// A block (Stage II/III): a unit of computation with named iterators.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// Name.
    pub name: String,
    /// Iterators and their bindings.
    pub iters: Vec<BlockIter>,
    /// Regions read.
    pub reads: Vec<Region>,
    /// Regions written.
    pub writes: Vec<Region>,
    /// Runs when every reduction iterator is 0.
    pub init: Option<Vec<Stmt>>,
    /// Body.
    pub body: Vec<Stmt>,
    /// Annotations.
    pub attrs: Attrs,
}

/// A statement with its source span.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// What it does.
    pub kind: StmtKind,
    /// Where it was written.
    pub span: Span,
}

impl Stmt {
    /// A statement with no source span.
    pub fn new(kind: StmtKind) -> Stmt {
        Stmt { kind, span: Span::NONE }
    }
}

/// The statement forms.
#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// `buf[indices] = value`
    Store {
        /// Target.
        buffer: BufferId,
        /// Indices (coordinates, positions or flat offset by stage).
        indices: Vec<Expr>,
        /// Stored value.
        value: Expr,
    },
    /// A sparse iteration (Stage I).
    SpIter(SpIter),
    /// A loop (Stage II/III).
    For(For),
    /// A block (Stage II/III).
    Block(Block),
    /// `if cond { then } else { otherwise }`
    If {
        /// Condition (bool).
        cond: Expr,
        /// Taken branch.
        then_body: Vec<Stmt>,
        /// Other branch (may be empty).
        else_body: Vec<Stmt>,
    },
    /// `while cond { body }`. One execution runs at most [`MAX_WHILE_ITERATIONS`] times:
    /// a condition still true after that many is an error at every stage and on every
    /// backend (the interpreter; compiled code with `--checked`).
    While {
        /// Condition (bool), checked before each iteration.
        cond: Expr,
        /// Body.
        body: Vec<Stmt>,
    },
    /// `let v = value`: binds `v` until the end of the enclosing statement list.
    Let {
        /// The variable.
        var: VarId,
        /// Its value.
        value: Expr,
    },
    /// Allocates a buffer (declared with `Storage::Alloc`) until the end of the enclosing
    /// statement list; each execution gets fresh storage filled with the default value.
    Alloc(BufferId),
    /// Evaluates an expression for its effect (`atomic_add`).
    Evaluate(Expr),
}

/// A function: parameters, declarations and a body, at one stage.
#[derive(Clone, Debug, PartialEq)]
pub struct Func {
    /// Name.
    pub name: String,
    /// Stage of the IR in the body.
    pub stage: Stage,
    /// Parameters in ABI order.
    pub params: Vec<Param>,
    /// Annotations.
    pub attrs: Attrs,
    /// Every scalar variable.
    pub vars: Arena<Var>,
    /// Axes, in declaration order (a parent precedes its children).
    pub axes: Arena<Axis>,
    /// Buffers, in declaration order.
    pub buffers: Arena<Buffer>,
    /// Body.
    pub body: Vec<Stmt>,
    /// Where the header was written.
    pub span: Span,
}

impl Func {
    /// An empty Stage-I function.
    pub fn new(name: impl Into<String>) -> Func {
        Func {
            name: name.into(),
            stage: Stage::I,
            params: Vec::new(),
            attrs: Attrs::new(),
            vars: Arena::new(),
            axes: Arena::new(),
            buffers: Arena::new(),
            body: Vec::new(),
            span: Span::NONE,
        }
    }

    /// The length of the variable axis whose row `extent` counts, when every row of that axis
    /// holds at most its length entries: `extent` is `P[x + 1] - P[x]` over the row pointer
    /// `P` of a dense-variable axis, or of a sorted sparse-variable one (coordinates in
    /// `0 .. length` without duplicates). [`crate::args::check_structure`] enforces both
    /// before compiled code runs, so a loop of `extent` iterations from 0 stays below it.
    pub fn row_length_bound(&self, extent: &Expr) -> Option<&Expr> {
        let Expr::Binary(BinOp::Sub, end, start) = extent else { return None };
        let (Expr::Load(b1, i1), Expr::Load(b0, i0)) = (&**end, &**start) else { return None };
        let ([next], [row]) = (i1.as_slice(), i0.as_slice()) else { return None };
        let one = |e: &Expr| matches!(e, Expr::Int(1, _));
        let successor = matches!(next, Expr::Binary(BinOp::Add, a, b) if (**a == *row && one(b)) || (one(a) && **b == *row));
        let param = |b: &BufferId| match self.buffers.try_get(*b)?.storage {
            Storage::Param(p) => Some(p),
            Storage::Alloc(_) => None,
        };
        let p = param(b1).filter(|p| successor && Some(*p) == param(b0))?;
        self.axes
            .iter()
            .map(|(_, a)| a)
            .find(|a| a.indptr == Some(p) && (a.kind == AxisKind::DenseVariable || (a.kind == AxisKind::SparseVariable && a.sorted)))
            .map(|a| &a.length)
    }

    /// Index of the parameter called `name`.
    pub fn param_index(&self, name: &str) -> Option<ParamId> {
        self.params.iter().position(|p| p.name == name)
    }

    /// Handle of the axis called `name`.
    pub fn axis_by_name(&self, name: &str) -> Option<AxisId> {
        self.axes.iter().find(|(_, a)| a.name == name).map(|(h, _)| h)
    }

    /// Handle of the buffer called `name`.
    pub fn buffer_by_name(&self, name: &str) -> Option<BufferId> {
        self.buffers.iter().find(|(_, b)| b.name == name).map(|(h, _)| h)
    }

    /// Handle of the variable called `name`.
    pub fn var_by_name(&self, name: &str) -> Option<VarId> {
        self.vars.iter().find(|(_, v)| v.name == name).map(|(h, _)| h)
    }

    /// The variable of scalar parameter `p`, if it is a scalar.
    pub fn scalar_param_var(&self, p: ParamId) -> Option<VarId> {
        match self.params.get(p)?.kind {
            ParamKind::Scalar(v) => Some(v),
            ParamKind::Handle => None,
        }
    }

    /// Whether `e` depends only on literals and scalar parameters (a host can evaluate it
    /// from the arguments, as launch sizes need).
    pub fn scalar_only(&self, e: &Expr) -> bool {
        let mut ok = true;
        e.walk(&mut |x| match x {
            Expr::Var(v) => ok &= self.params.iter().any(|p| p.kind == ParamKind::Scalar(*v)),
            Expr::Load(..) | Expr::AtomicAdd(..) => ok = false,
            _ => {}
        });
        ok
    }

    /// Adds a variable.
    pub fn add_var(&mut self, name: impl Into<String>, dtype: DType) -> VarId {
        self.vars.append(Var { name: name.into(), dtype })
    }

    /// Buffers allocated by an `Alloc` statement somewhere in the body (as opposed to at
    /// function level).
    pub fn stmt_allocated_buffers(&self) -> Vec<BufferId> {
        let mut out = Vec::new();
        walk_stmts(&self.body, &mut |s| {
            if let StmtKind::Alloc(b) = s.kind {
                out.push(b);
            }
        });
        out
    }

    /// Whether the units of a GPU block share buffer `b`'s memory (a parameter, a global or a
    /// shared allocation).
    pub fn shared_by_units(&self, b: BufferId) -> bool {
        self.buffers.try_get(b).is_some_and(|x| matches!(x.storage, Storage::Param(_) | Storage::Alloc(Scope::Global | Scope::Shared)))
    }

    /// The first buffer that every unit of a GPU launch shares (a parameter or a global
    /// allocation) written in `stmts` by a store or an `atomic_add`.
    pub fn global_write(&self, stmts: &[Stmt]) -> Option<BufferId> {
        let global = |b: &BufferId| {
            self.buffers.try_get(*b).is_some_and(|x| matches!(x.storage, Storage::Param(_) | Storage::Alloc(Scope::Global)))
        };
        written_buffers(stmts).into_iter().find(global)
    }
}

/// The buffers that `stmts` write, by a store or an `atomic_add`, each once, in the order of
/// their first write.
pub fn written_buffers(stmts: &[Stmt]) -> Vec<BufferId> {
    let mut out: Vec<BufferId> = Vec::new();
    let mut add = |b: BufferId| {
        if !out.contains(&b) {
            out.push(b);
        }
    };
    walk_stmts(stmts, &mut |s| {
        if let StmtKind::Store { buffer, .. } = &s.kind {
            add(*buffer);
        }
        for e in s.kind.exprs() {
            e.walk(&mut |x| {
                if let Expr::AtomicAdd(b, ..) = x {
                    add(*b);
                }
            });
        }
    });
    out
}

/// Whether `s` holds a loop bound to a thread index (`threadIdx.*`, not a block index).
pub fn has_thread_loop(s: &Stmt) -> bool {
    let mut hit = false;
    walk_stmts(std::slice::from_ref(s), &mut |x| {
        if let StmtKind::For(f) = &x.kind {
            hit |= matches!(f.kind, ForKind::Thread(t) if !t.is_block());
        }
    });
    hit
}

/// Whether `s` holds a loop bound to a thread or block index.
pub fn has_bound_loop(s: &Stmt) -> bool {
    let mut hit = false;
    walk_stmts(std::slice::from_ref(s), &mut |x| hit |= matches!(&x.kind, StmtKind::For(l) if matches!(l.kind, ForKind::Thread(_))));
    hit
}

/// How a Stage-III function's top-level statements split into GPU kernels: each statement
/// holding a loop bound to a thread or block index is one kernel; each maximal run of
/// statements without one is one more (launched on a single unit). Backends and reports
/// name kernel `k` of `f` as `{f}_kernel{k}` in this order.
pub fn kernel_ranges(f: &Func) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    let mut open: Option<usize> = None;
    for (i, s) in f.body.iter().enumerate() {
        if !has_bound_loop(s) {
            open.get_or_insert(i);
            continue;
        }
        if let Some(from) = open.take() {
            out.push(from..i);
        }
        out.push(i..i + 1);
    }
    if let Some(from) = open {
        out.push(from..f.body.len());
    }
    out
}

/// Whether, in a statement list of a kernel, a statement outside every thread-bound loop
/// writes global memory beside a statement holding one: each unit of the block runs the
/// former redundantly while others run the latter, so they need a barrier between them.
pub fn writes_beside_thread_loops(f: &Func, stmts: &[Stmt]) -> bool {
    stmts.iter().any(has_thread_loop)
        && stmts.iter().any(|s| !has_thread_loop(s) && f.global_write(std::slice::from_ref(s)).is_some())
}

/// Whether units of a block must synchronise between the statements of `stmts` (a list inside
/// a kernel, which a loop of the kernel runs again where `reruns`): a statement outside every
/// thread-bound loop writes global memory beside one holding such a loop
/// ([`writes_beside_thread_loops`]), two statements holding thread-bound loops exchange data
/// through memory the block shares ([`threads_exchange`]), or, run again, one such statement
/// exchanges data with its own earlier run ([`threads_exchange_across_runs`]).
pub fn needs_barrier(f: &Func, stmts: &[Stmt], reruns: bool) -> bool {
    if writes_beside_thread_loops(f, stmts) {
        return true;
    }
    let bound: Vec<&Stmt> = stmts.iter().filter(|s| has_thread_loop(s)).collect();
    (reruns && bound.iter().any(|a| threads_exchange_across_runs(f, a)))
        || bound.iter().enumerate().any(|(i, a)| bound[i + 1..].iter().any(|b| threads_exchange(f, a, b)))
}

/// Whether a statement of a kernel that holds thread-bound loops, run again (the body of a
/// loop around it), may touch in one run an element of memory the block shares that another
/// unit wrote in an earlier run: `bind` proved its units independent within one run only.
/// It writes such a buffer and touches it at other indices, or at indices that read memory
/// the statement writes (a position found by a search in this run) or gather at the unit's
/// position (a scatter through an index array), and that no dimension pins to the unit (the
/// same expression, free of memory and of division, of a `threadIdx` loop's variable: rows
/// of one unit). `atomic_add`s among themselves commute and need no order, nor does a
/// checked run's fault record. (An offset read at a position the same for every unit is
/// taken to be the same in every run.)
pub fn threads_exchange_across_runs(f: &Func, a: &Stmt) -> bool {
    let mut names = LoopNames::default();
    let mut xs = Vec::new();
    names.accesses(std::slice::from_ref(a), &mut HashMap::new(), &mut Vec::new(), &mut xs);
    let units: Vec<VarId> = names.threads.iter().map(|t| t.1).collect();
    let pinned = |e: &Expr| {
        let (mut unit, mut plain) = (false, true);
        e.walk(&mut |x| match x {
            Expr::Var(v) => unit |= units.contains(v),
            Expr::Load(..) | Expr::AtomicAdd(..) => plain = false,
            Expr::Binary(BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod, ..) => plain = false,
            _ => {}
        });
        unit && plain
    };
    // Buffers the statement itself writes: a position read from one was computed in this run.
    let mine = written_buffers(std::slice::from_ref(a));
    // A checked run's fault record: any unit's report of a fault fails the run alike.
    let fault = crate::verify::fault_record(f);
    let of_unit = |e: &Expr| units.iter().any(|&u| e.uses_var(u));
    // A position read in this run, or gathered at the unit's own position (a scatter through
    // an index array: units meet each other's elements from run to run).
    let reads_memory = |idx: &[Expr]| {
        let mut found = false;
        for e in idx {
            e.walk(&mut |x| {
                if let Expr::Load(b, at) | Expr::AtomicAdd(b, at, _) = x {
                    found |= mine.contains(b) || at.iter().any(of_unit);
                }
            });
        }
        found
    };
    xs.iter().any(|x| {
        xs.iter().any(|y| {
            x.buffer == y.buffer
                && f.shared_by_units(x.buffer)
                && Some(x.buffer) != fault
                && x.write
                && !(x.atomic && y.atomic)
                && (x.indices != y.indices
                    || (reads_memory(&x.indices) && !x.indices.iter().zip(&y.indices).any(|(p, q)| p == q && pinned(p))))
        })
    })
}

/// Whether two statements of a kernel that hold thread-bound loops exchange data through
/// memory the units of a block share (a parameter, a global or a shared buffer): one writes an
/// element that the other reads or writes at indices that differ once every `threadIdx` loop's
/// variable is replaced by its unit's position, and every other loop's variable by a name for
/// its range (a unit walks the whole range either way). Then a unit may touch, in `b`, an
/// element another unit writes in `a`, and a barrier must order them. Equal indices mean each
/// unit only meets its own writes.
pub fn threads_exchange(f: &Func, a: &Stmt, b: &Stmt) -> bool {
    let shared = |b: BufferId| f.shared_by_units(b);
    let mut names = LoopNames::default();
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    names.accesses(std::slice::from_ref(a), &mut HashMap::new(), &mut Vec::new(), &mut xs);
    names.accesses(std::slice::from_ref(b), &mut HashMap::new(), &mut Vec::new(), &mut ys);
    xs.iter().any(|x| {
        ys.iter().any(|y| x.buffer == y.buffer && shared(x.buffer) && (x.write || y.write) && x.indices != y.indices)
    })
}

/// One access to a buffer, its indices in terms of the units' positions and loop ranges.
struct UnitAccess {
    buffer: BufferId,
    indices: Vec<Expr>,
    write: bool,
    /// An `atomic_add`.
    atomic: bool,
}

/// The names [`threads_exchange`] gives loop variables: per `threadIdx` tag, the first loop's
/// variable (with its `min`); per other loop, the first variable of a loop with the same range
/// and as many enclosing loops of that range.
#[derive(Default)]
struct LoopNames {
    threads: Vec<(ThreadTag, VarId, Expr)>,
    ranges: Vec<((Expr, Expr, usize), VarId)>,
}

impl LoopNames {
    /// Every access in `list`, with loop variables renamed and block and `let` variables
    /// replaced by their values (`env`); `open` holds the ranges of the enclosing loops.
    fn accesses(&mut self, list: &[Stmt], env: &mut HashMap<VarId, Expr>, open: &mut Vec<(Expr, Expr)>, out: &mut Vec<UnitAccess>) {
        let subst_all = |idx: &[Expr], env: &HashMap<VarId, Expr>| -> Vec<Expr> { idx.iter().map(|e| e.clone().substitute(env)).collect() };
        for s in list {
            for e in s.kind.exprs() {
                e.walk(&mut |x| match x {
                    Expr::Load(b, idx) => out.push(UnitAccess { buffer: *b, indices: subst_all(idx, env), write: false, atomic: false }),
                    Expr::AtomicAdd(b, idx, _) => out.push(UnitAccess { buffer: *b, indices: subst_all(idx, env), write: true, atomic: true }),
                    _ => {}
                });
            }
            match &s.kind {
                StmtKind::Store { buffer, indices, .. } => {
                    out.push(UnitAccess { buffer: *buffer, indices: subst_all(indices, env), write: true, atomic: false });
                }
                StmtKind::For(l) => {
                    let (min, extent) = (l.min.clone().substitute(env), l.extent.clone().substitute(env));
                    let value = match l.kind {
                        ForKind::Thread(t) if !t.is_block() => {
                            let (_, v, m) = match self.threads.iter().find(|x| x.0 == t) {
                                Some(x) => x.clone(),
                                None => {
                                    self.threads.push((t, l.var, min.clone()));
                                    (t, l.var, min.clone())
                                }
                            };
                            if m == min {
                                Expr::Var(v)
                            } else {
                                Expr::binary(BinOp::Add, Expr::binary(BinOp::Sub, Expr::Var(v), m), min.clone())
                            }
                        }
                        _ => {
                            let depth = open.iter().filter(|r| r.0 == min && r.1 == extent).count();
                            let key = (min.clone(), extent.clone(), depth);
                            match self.ranges.iter().find(|x| x.0 == key) {
                                Some(x) => Expr::Var(x.1),
                                None => {
                                    self.ranges.push((key, l.var));
                                    Expr::Var(l.var)
                                }
                            }
                        }
                    };
                    env.insert(l.var, value);
                    open.push((min, extent));
                    self.accesses(&l.body, env, open, out);
                    open.pop();
                }
                StmtKind::Block(b) => {
                    for it in &b.iters {
                        let value = it.binding.clone().substitute(env);
                        env.insert(it.var, value);
                    }
                    self.accesses(b.init.as_deref().unwrap_or_default(), env, open, out);
                    self.accesses(&b.body, env, open, out);
                }
                StmtKind::Let { var, value } => {
                    let value = value.clone().substitute(env);
                    env.insert(*var, value);
                }
                StmtKind::If { then_body, else_body, .. } => {
                    self.accesses(then_body, env, open, out);
                    self.accesses(else_body, env, open, out);
                }
                StmtKind::While { body, .. } => self.accesses(body, env, open, out),
                StmtKind::SpIter(_) | StmtKind::Alloc(_) | StmtKind::Evaluate(_) => {}
            }
        }
    }
}

/// In a kernel (`top`, one top-level statement), the first update in place of memory the
/// units of a block share (a store whose value or indices read the buffer it writes, or an
/// `atomic_add`; into a parameter, a global or a shared allocation) that lies outside a loop
/// bound to one of the kernel's thread indices: every unit that differs only in that index
/// would repeat the update. The same for global memory and the kernel's block indices: every
/// block along an index the update's loops leave unbound repeats it. GPU backends refuse
/// such a kernel. (A plain store repeated by several units writes the same value, which is
/// harmless.)
pub fn repeated_update(f: &Func, top: &Stmt) -> Option<RepeatedUpdate> {
    let mut tags: Vec<ThreadTag> = Vec::new();
    walk_stmts(std::slice::from_ref(top), &mut |x| {
        if let StmtKind::For(l) = &x.kind {
            if let ForKind::Thread(t) = l.kind {
                if !tags.contains(&t) {
                    tags.push(t);
                }
            }
        }
    });
    if tags.is_empty() {
        return None;
    }
    let shared = |b: BufferId| f.shared_by_units(b);
    let storage = |b: BufferId| f.buffers.try_get(b).map(|x| x.storage);
    let update = |s: &Stmt| -> Option<BufferId> {
        let mut hit = None;
        for e in s.kind.exprs() {
            e.walk(&mut |x| {
                if let Expr::AtomicAdd(b, ..) = x {
                    hit = hit.or(shared(*b).then_some(*b));
                }
            });
        }
        if let StmtKind::Store { buffer, indices, value } = &s.kind {
            let mut reads_itself = false;
            for e in indices.iter().chain(std::iter::once(value)) {
                e.walk(&mut |x| {
                    if let Expr::Load(b, _) = x {
                        reads_itself |= storage(*b).is_some() && storage(*b) == storage(*buffer);
                    }
                });
            }
            if reads_itself && shared(*buffer) {
                hit = hit.or(Some(*buffer));
            }
        }
        hit
    };
    // Blocks share global memory only (each has its own shared memory).
    let repeats = |b: BufferId, t: ThreadTag| !t.is_block() || matches!(storage(b), Some(Storage::Param(_) | Storage::Alloc(Scope::Global)));
    let (b, tag) = unbound_update(top, &mut Vec::new(), &tags, &update, &repeats)?;
    Some(RepeatedUpdate { buffer: f.buffers.try_get(b).map_or_else(|| format!("{b:?}"), |x| x.name.clone()), tag })
}

/// The first statement under `s` that `update` flags and that some tag of `tags` does not
/// bind (`bound`: the tags bound around `s`) along which `repeats` says it repeats.
fn unbound_update(
    s: &Stmt,
    bound: &mut Vec<ThreadTag>,
    tags: &[ThreadTag],
    update: &dyn Fn(&Stmt) -> Option<BufferId>,
    repeats: &dyn Fn(BufferId, ThreadTag) -> bool,
) -> Option<(BufferId, ThreadTag)> {
    if let Some(b) = update(s) {
        if let Some(t) = tags.iter().find(|t| !bound.contains(t) && repeats(b, **t)) {
            return Some((b, *t));
        }
    }
    let tag = match &s.kind {
        StmtKind::For(For { kind: ForKind::Thread(t), .. }) => Some(*t),
        _ => None,
    };
    bound.extend(tag);
    let found = s.kind.child_lists().into_iter().flatten().find_map(|c| unbound_update(c, bound, tags, update, repeats));
    if tag.is_some() {
        bound.pop();
    }
    found
}

/// An update that several units of a GPU block would repeat (see [`repeated_update`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepeatedUpdate {
    /// The buffer updated.
    pub buffer: String,
    /// The kernel's thread index that the update's loops leave unbound.
    pub tag: ThreadTag,
}

impl std::fmt::Display for RepeatedUpdate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = self.tag.name();
        write!(
            f,
            "buffer `{}` is updated in place outside every loop bound to {t} in its kernel, so every unit along {t} \
             would repeat the update; bind the update's loops to {t} as well",
            self.buffer
        )
    }
}

/// In a kernel (`top`), the first buffer whose scope the GPU cannot give the meaning the IR
/// gives it: a `local` buffer (private to a unit on a GPU) allocated outside a loop bound to a
/// thread index and written inside it, where the IR means one buffer for all those units (one
/// only read there is fine: every unit runs the code outside the loop and holds the same
/// values); or
/// a `shared` buffer (one per block on a GPU) allocated inside such a loop, where the IR means
/// one per unit. GPU backends refuse such a kernel.
pub fn scope_across_units(f: &Func, top: &Stmt) -> Option<String> {
    fn thread_loop(s: &Stmt) -> bool {
        matches!(&s.kind, StmtKind::For(l) if matches!(l.kind, ForKind::Thread(t) if !t.is_block()))
    }
    fn writes(list: &[Stmt], b: BufferId) -> bool {
        let mut hit = false;
        walk_stmts(list, &mut |s| {
            hit |= matches!(&s.kind, StmtKind::Store { buffer, .. } if *buffer == b);
            for e in s.kind.exprs() {
                e.walk(&mut |x| hit |= matches!(x, Expr::AtomicAdd(c, ..) if *c == b));
            }
        });
        hit
    }
    fn visit(f: &Func, list: &[Stmt], in_thread: bool, out: &mut Option<String>) {
        for (i, s) in list.iter().enumerate() {
            if out.is_some() {
                return;
            }
            if let StmtKind::Alloc(b) = s.kind {
                let Some(buf) = f.buffers.try_get(b) else { continue };
                let rest = &list[i + 1..];
                match buf.storage {
                    Storage::Alloc(Scope::Local) => {
                        let mut spans = false;
                        walk_stmts(rest, &mut |x| {
                            if let StmtKind::For(l) = &x.kind {
                                spans |= thread_loop(x) && writes(&l.body, b);
                            }
                        });
                        if spans {
                            *out = Some(format!(
                                "local buffer `{}` is allocated outside a thread-bound loop that writes it: on a GPU \
                                 every unit would get its own copy; allocate it inside that loop (cache at the \
                                 thread-bound loop) or use shared scope",
                                buf.name
                            ));
                        }
                    }
                    Storage::Alloc(Scope::Shared) if in_thread => {
                        *out = Some(format!(
                            "shared buffer `{}` is allocated inside a thread-bound loop: on a GPU the units of a block \
                             share one copy; allocate it outside the thread-bound loops",
                            buf.name
                        ));
                    }
                    _ => {}
                }
            }
            let inner = in_thread || thread_loop(s);
            for child in s.kind.child_lists() {
                visit(f, child, inner, out);
            }
        }
    }
    let mut out = None;
    visit(f, std::slice::from_ref(top), false, &mut out);
    out
}

/// Calls `f` on every statement of `stmts`, recursively, parents first (inits included).
pub fn walk_stmts(stmts: &[Stmt], f: &mut impl FnMut(&Stmt)) {
    for s in stmts {
        f(s);
        for child in s.kind.child_lists() {
            walk_stmts(child, f);
        }
    }
}

/// Gives `span` to every statement of `stmts`, recursively, that has none: what a pass made
/// from one source statement points at it.
pub fn fill_spans(stmts: &mut [Stmt], span: Span) {
    for s in stmts {
        if !s.span.is_known() {
            s.span = span;
        }
        for child in s.kind.child_lists_mut() {
            fill_spans(child, span);
        }
    }
}

/// Applies `f` to every expression of `stmts` and of their nested statements.
pub fn map_exprs_deep(stmts: &mut [Stmt], f: &mut impl FnMut(Expr) -> Expr) {
    for s in stmts {
        s.kind.map_exprs(f);
        for child in s.kind.child_lists_mut() {
            map_exprs_deep(child, f);
        }
    }
}

impl StmtKind {
    /// Applies `f` to every expression the statement holds directly (a sparse iteration
    /// holds none; nested statements are not visited).
    pub fn map_exprs(&mut self, f: &mut impl FnMut(Expr) -> Expr) {
        let mut apply = |e: &mut Expr| *e = f(std::mem::replace(e, Expr::Bool(false)));
        match self {
            StmtKind::Store { indices, value, .. } => {
                indices.iter_mut().for_each(&mut apply);
                apply(value);
            }
            StmtKind::SpIter(_) | StmtKind::Alloc(_) => {}
            StmtKind::For(l) => {
                apply(&mut l.min);
                apply(&mut l.extent);
            }
            StmtKind::Block(b) => {
                for it in &mut b.iters {
                    apply(&mut it.extent);
                    apply(&mut it.binding);
                }
                for r in b.reads.iter_mut().chain(b.writes.iter_mut()) {
                    for rr in &mut r.ranges {
                        apply(&mut rr.begin);
                        if let Some(e) = &mut rr.end {
                            apply(e);
                        }
                    }
                }
            }
            StmtKind::If { cond, .. } | StmtKind::While { cond, .. } => apply(cond),
            StmtKind::Let { value, .. } => apply(value),
            StmtKind::Evaluate(e) => apply(e),
        }
    }

    /// Nested statement lists (init first, then body; `then` before `else`).
    pub fn child_lists(&self) -> Vec<&Vec<Stmt>> {
        match self {
            StmtKind::SpIter(it) => it.init.iter().chain(std::iter::once(&it.body)).collect(),
            StmtKind::For(f) => vec![&f.body],
            StmtKind::Block(b) => b.init.iter().chain(std::iter::once(&b.body)).collect(),
            StmtKind::If { then_body, else_body, .. } => vec![then_body, else_body],
            StmtKind::While { body, .. } => vec![body],
            StmtKind::Store { .. } | StmtKind::Let { .. } | StmtKind::Alloc(_) | StmtKind::Evaluate(_) => vec![],
        }
    }

    /// [`StmtKind::child_lists`], mutable.
    pub fn child_lists_mut(&mut self) -> Vec<&mut Vec<Stmt>> {
        match self {
            StmtKind::SpIter(it) => it.init.iter_mut().chain(std::iter::once(&mut it.body)).collect(),
            StmtKind::For(f) => vec![&mut f.body],
            StmtKind::Block(b) => b.init.iter_mut().chain(std::iter::once(&mut b.body)).collect(),
            StmtKind::If { then_body, else_body, .. } => vec![then_body, else_body],
            StmtKind::While { body, .. } => vec![body],
            StmtKind::Store { .. } | StmtKind::Let { .. } | StmtKind::Alloc(_) | StmtKind::Evaluate(_) => vec![],
        }
    }

    /// Expressions held directly by this statement (not by nested statements).
    pub fn exprs(&self) -> Vec<&Expr> {
        match self {
            StmtKind::Store { indices, value, .. } => indices.iter().chain(std::iter::once(value)).collect(),
            StmtKind::SpIter(_) | StmtKind::Alloc(_) => vec![],
            StmtKind::For(f) => vec![&f.min, &f.extent],
            StmtKind::Block(b) => {
                let mut v: Vec<&Expr> = Vec::new();
                for it in &b.iters {
                    v.push(&it.extent);
                    v.push(&it.binding);
                }
                for r in b.reads.iter().chain(&b.writes) {
                    for rr in &r.ranges {
                        v.push(&rr.begin);
                        v.extend(rr.end.as_ref());
                    }
                }
                v
            }
            StmtKind::If { cond, .. } | StmtKind::While { cond, .. } => vec![cond],
            StmtKind::Let { value, .. } => vec![value],
            StmtKind::Evaluate(e) => vec![e],
        }
    }
}

/// A compilation unit: one or more functions.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Module {
    /// Functions in source order.
    pub funcs: Vec<Func>,
}

impl Module {
    /// The function called `name`.
    pub fn func(&self, name: &str) -> Option<&Func> {
        self.funcs.iter().find(|f| f.name == name)
    }
}

impl Func {
    /// `e` as `base + coef * v` with `base` and `coef` free of `v`, if it is affine in `v`
    /// (sums, differences and products by `v`-free factors); the parts are not simplified.
    pub fn affine_in(&self, e: &Expr, v: VarId) -> Option<(Expr, Expr)> {
        let dt = self.expr_dtype(e);
        let int = |x: i64| Expr::Int(x, dt);
        let has = |x: &Expr| x.uses_var(v);
        Some(match e {
            Expr::Var(x) if *x == v => (int(0), int(1)),
            x if !has(x) => (x.clone(), int(0)),
            Expr::Binary(op @ (BinOp::Add | BinOp::Sub), a, b) => {
                let ((ba, ca), (bb, cb)) = (self.affine_in(a, v)?, self.affine_in(b, v)?);
                (Expr::binary(*op, ba, bb), Expr::binary(*op, ca, cb))
            }
            Expr::Binary(BinOp::Mul, a, b) if !has(b) => {
                let (ba, ca) = self.affine_in(a, v)?;
                (Expr::binary(BinOp::Mul, ba, (**b).clone()), Expr::binary(BinOp::Mul, ca, (**b).clone()))
            }
            Expr::Binary(BinOp::Mul, a, b) if !has(a) => {
                let (bb, cb) = self.affine_in(b, v)?;
                (Expr::binary(BinOp::Mul, (**a).clone(), bb), Expr::binary(BinOp::Mul, (**a).clone(), cb))
            }
            _ => return None,
        })
    }

    /// Whether `e` steps by one with `v`: affine in it ([`Func::affine_in`]) with
    /// coefficient 1.
    pub fn steps_by_one(&self, e: &Expr, v: VarId) -> bool {
        self.affine_in(e, v).is_some_and(|(_, c)| c.literal_value() == Some(1))
    }

    /// The dtype an expression evaluates to, assuming it is well typed (the verifier checks
    /// that): comparisons and logic give `bool`, other operators the left operand's dtype.
    pub fn expr_dtype(&self, e: &Expr) -> DType {
        use crate::expr::{BinOp, Intrinsic};
        match e {
            Expr::Int(_, d) | Expr::Float(_, d) | Expr::Cast(d, _) => *d,
            Expr::Bool(_) => DType::Bool,
            Expr::Var(v) => self.vars.try_get(*v).map_or(DType::I32, |v| v.dtype),
            Expr::Binary(op, a, _) => {
                if op.is_comparison() || matches!(op, BinOp::And | BinOp::Or) {
                    DType::Bool
                } else {
                    self.expr_dtype(a)
                }
            }
            Expr::Unary(_, a) => self.expr_dtype(a),
            Expr::Select(_, a, _) => self.expr_dtype(a),
            Expr::Call(Intrinsic::MaxValue(d) | Intrinsic::MinValue(d), _) => *d,
            Expr::Call(_, args) => args.first().map_or(DType::F32, |a| self.expr_dtype(a)),
            Expr::Load(b, _) | Expr::AtomicAdd(b, _, _) => {
                self.buffers.try_get(*b).map_or(DType::F32, |b| b.dtype)
            }
        }
    }
}
