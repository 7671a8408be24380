//! The builders: [`Builder`] at each nesting level, and the declaration helpers.

use super::error::DslError;
use super::expr::{AxisRef, BufferRef, HandleRef, Owner, VarRef, E};
use crate::arena::Handle;
use crate::expr::Expr;
use crate::func::{
    AttrValue, Attrs, Axis, AxisPattern, Buffer, Func, PatternOp, Layout, Param, ParamKind, SpIter, Stmt, StmtKind, Storage, VarId,
};
use crate::span::Span;
use crate::types::{AxisKind, DType, Scope};
use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};

/// Identity of each [`func`](super::func) call, so handles of two functions are not mixed.
static NEXT_BUILDER: AtomicU32 = AtomicU32::new(1);

/// Whether `s` can be written as an identifier in `.sptir` ([`crate::names::is_identifier`]).
fn is_ident(s: &str) -> bool {
    crate::names::is_identifier(s)
}

/// Everything shared by the builders of one function.
pub(crate) struct State {
    id: u32,
    pub(crate) func: Func,
    pub(crate) error: Option<DslError>,
    params: HashSet<String>,
    decls: HashSet<String>,
    /// Variables in scope, innermost list last; the first holds scalar parameters and
    /// function-level `let`s.
    scopes: Vec<Vec<(String, VarId)>>,
}

impl State {
    pub(crate) fn new(name: String) -> State {
        State {
            id: NEXT_BUILDER.fetch_add(1, Ordering::Relaxed),
            func: Func::new(name),
            error: None,
            params: HashSet::new(),
            decls: HashSet::new(),
            scopes: vec![Vec::new()],
        }
    }

    /// Records a misuse; only the first one is reported.
    fn fail(&mut self, e: DslError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    fn check_ident(&mut self, what: &'static str, name: &str) {
        if !is_ident(name) {
            self.fail(DslError::InvalidName { what, name: name.to_string() });
        }
    }

    fn own(&mut self, owner: u32, what: &'static str) -> bool {
        if owner == self.id {
            true
        } else {
            self.fail(DslError::ForeignHandle { what });
            false
        }
    }

    fn axis(&mut self, a: AxisRef) -> Option<&Axis> {
        if !self.own(a.owner, "axis") {
            return None;
        }
        self.func.axes.try_get(a.id)
    }

    fn handle_param(&mut self, h: HandleRef) -> usize {
        self.own(h.owner, "parameter");
        h.index
    }

    fn in_scope(&self, v: VarId) -> bool {
        self.scopes.iter().any(|s| s.iter().any(|(_, x)| *x == v))
    }

    /// Checks an expression about to enter the IR: handles of this function, variables in
    /// scope, accesses with as many indices as their buffer has dimensions.
    pub(crate) fn take(&mut self, e: E) -> Expr {
        if let Some(err) = e.error {
            self.fail(*err);
        }
        match e.owner {
            Owner::Free => {}
            Owner::One(o) if o == self.id => {}
            _ => self.fail(DslError::ForeignHandle { what: "expression" }),
        }
        let mut problem = None;
        e.expr.walk(&mut |x| {
            if problem.is_some() {
                return;
            }
            match x {
                Expr::Var(v) if !self.in_scope(*v) => {
                    let name = self.func.vars.try_get(*v).map_or_else(|| format!("{v:?}"), |v| v.name.clone());
                    problem = Some(DslError::OutOfScope { name });
                }
                Expr::Load(b, idx) | Expr::AtomicAdd(b, idx, _) => match self.func.buffers.try_get(*b) {
                    Some(buf) if buf.ndim() != idx.len() => {
                        problem =
                            Some(DslError::Arity { buffer: buf.name.clone(), expected: buf.ndim(), found: idx.len() })
                    }
                    Some(_) => {}
                    None => problem = Some(DslError::ForeignHandle { what: "buffer" }),
                },
                _ => {}
            }
        });
        if let Some(p) = problem {
            self.fail(p);
        }
        e.expr
    }

    /// Binds a new variable in the innermost scope.
    fn bind_var(&mut self, name: &str, dtype: DType) -> VarRef {
        self.check_ident("variable", name);
        if self.scopes.iter().any(|s| s.iter().any(|(n, _)| n == name)) {
            self.fail(DslError::Shadowing { name: name.to_string() });
        }
        let id = self.func.add_var(name, dtype);
        if let Some(s) = self.scopes.last_mut() {
            s.push((name.to_string(), id));
        }
        VarRef { id, dtype, owner: self.id }
    }

    fn new_decl_name(&mut self, what: &'static str, name: &str) {
        self.check_ident(what, name);
        if !self.decls.insert(name.to_string()) {
            self.fail(DslError::Duplicate { what: "axis or buffer", name: name.to_string() });
        }
    }

    fn declare_axis(&mut self, name: &str, kind: AxisKind, fields: AxisFields, opts: AxisOpts) -> AxisRef {
        self.new_decl_name("axis", name);
        let parent = fields.parent.and_then(|p| self.axis(p).map(|_| p.id));
        let length = self.take(fields.length);
        let nnz = fields.nnz.map(|e| self.take(e));
        let indptr = fields.indptr.map(|h| self.handle_param(h));
        let indices = fields.indices.map(|h| self.handle_param(h));
        let id = self.func.axes.append(Axis {
            name: name.to_string(),
            kind,
            parent,
            length,
            nnz,
            indptr,
            indices,
            idtype: opts.idtype,
            sorted: opts.sorted,
            unique: opts.unique,
            pattern: fields.pattern,
            span: Span::NONE,
        });
        AxisRef { id, owner: self.id }
    }

    fn declare_buffer(
        &mut self,
        name: &str,
        axes: Vec<AxisRef>,
        dtype: DType,
        storage: Storage,
        opts: BufferOpts,
    ) -> BufferRef {
        self.new_decl_name("buffer", name);
        let axes = axes.into_iter().filter_map(|a| self.axis(a).map(|_| a.id)).collect();
        let extra_storage = opts.extra_storage.map(|e| self.take(e));
        let default = opts.default.map(|e| self.take(e.typed_as(dtype)));
        let id = self.func.buffers.append(Buffer {
            name: name.to_string(),
            dtype,
            layout: Layout::Sparse(axes),
            storage,
            extra_storage,
            default,
            modes: opts.modes,
            span: Span::NONE,
        });
        BufferRef { id, dtype, owner: self.id }
    }
}

/// The length, `nnz` and arrays of an axis declaration.
struct AxisFields {
    parent: Option<AxisRef>,
    length: E,
    nnz: Option<E>,
    indptr: Option<HandleRef>,
    indices: Option<HandleRef>,
    pattern: Option<AxisPattern>,
}

impl AxisFields {
    /// A variable axis's fields (`indices` for a sparse one).
    fn variable(parent: AxisRef, length: E, nnz: E, indptr: HandleRef, indices: Option<HandleRef>) -> AxisFields {
        AxisFields { parent: Some(parent), length, nnz: Some(nnz), indptr: Some(indptr), indices, pattern: None }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Top {}
    impl Sealed for super::Nested {}
    impl Sealed for super::InSpIter {}
}

/// Where a [`Builder`] adds statements; decides which methods it has.
pub trait Level: sealed::Sealed {
    /// Whether this is the function level (buffers allocated here are declarations, not
    /// `Alloc` statements).
    const TOP: bool;
}

/// The function level: parameters, axes, `match_sparse_buffer` and attributes are only
/// available here.
#[derive(Debug)]
pub struct Top;
/// A statement list inside a statement (an `init`, a branch of an `if`, a `while` body).
#[derive(Debug)]
pub struct Nested;
/// The body of a sparse iteration: like [`Nested`], plus [`init`](Builder::init).
#[derive(Debug)]
pub struct InSpIter;

impl Level for Top {
    const TOP: bool = true;
}
impl Level for Nested {
    const TOP: bool = false;
}
impl Level for InSpIter {
    const TOP: bool = false;
}

/// Builds one statement list of a function: statements are appended in call order, which
/// is the order of the equivalent text.
///
/// [`FuncBuilder`] (the function level), [`SpIterBody`] and [`Body`] are its three forms.
pub struct Builder<'a, L: Level> {
    st: &'a mut State,
    stmts: Vec<Stmt>,
    /// `init` of the sparse iteration being built ([`InSpIter`] only).
    init: Option<Vec<Stmt>>,
    /// Name of the sparse iteration being built ([`InSpIter`] only).
    sp_name: String,
    level: PhantomData<L>,
}

/// The function-level builder that [`func`](super::func) hands to its closure.
pub type FuncBuilder<'a> = Builder<'a, Top>;
/// The builder of a sparse iteration's body.
pub type SpIterBody<'a> = Builder<'a, InSpIter>;
/// The builder of a nested statement list (`init`, `if` branches, `while` bodies).
pub type Body<'a> = Builder<'a, Nested>;

impl<'a> Builder<'a, Top> {
    pub(crate) fn top(st: &'a mut State) -> Self {
        Builder { st, stmts: Vec::new(), init: None, sp_name: String::new(), level: PhantomData }
    }

    pub(crate) fn into_stmts(self) -> Vec<Stmt> {
        self.stmts
    }

    /// Adds the function attribute `key = value` (`attrs(key = value)` in the header).
    pub fn attr(&mut self, key: impl Into<String>, value: impl Into<AttrValue>) -> &mut Self {
        let key = key.into();
        if self.st.func.attrs.insert(key.clone(), value.into()).is_some() {
            self.st.fail(DslError::DuplicateAttr { key });
        }
        self
    }

    /// Declares the next parameter as a `handle` (an array bound by buffers and axes).
    pub fn handle(&mut self, name: &str) -> HandleRef {
        self.param(name, ParamKind::Handle)
    }

    /// Declares the next parameter as a scalar of `dtype`; it is a variable usable in
    /// expressions.
    pub fn scalar(&mut self, name: &str, dtype: DType) -> VarRef {
        let v = self.st.bind_var(name, dtype);
        self.param(name, ParamKind::Scalar(v.id));
        v
    }

    fn param(&mut self, name: &str, kind: ParamKind) -> HandleRef {
        self.st.check_ident("parameter", name);
        if !self.st.params.insert(name.to_string()) {
            self.st.fail(DslError::Duplicate { what: "parameter", name: name.to_string() });
        }
        let index = self.st.func.params.len();
        self.st.func.params.push(Param { name: name.to_string(), kind, span: Span::NONE });
        HandleRef { index, owner: self.st.id }
    }

    /// Declares axes with non-default options (`idtype`, `sorted`):
    /// `f.axis_with(AxisOpts::new().idtype(I64)).sparse_variable(...)`.
    pub fn axis_with(&mut self, opts: AxisOpts) -> AxisDecl<'_, 'a> {
        AxisDecl { b: self, opts }
    }

    /// `axis name = dense_fixed(length)`
    pub fn dense_fixed(&mut self, name: &str, length: impl Into<E>) -> AxisRef {
        self.axis_with(AxisOpts::new()).dense_fixed(name, length)
    }

    /// `axis name = dense_variable(parent, length, nnz, indptr)`
    pub fn dense_variable(
        &mut self,
        name: &str,
        parent: AxisRef,
        length: impl Into<E>,
        nnz: impl Into<E>,
        indptr: HandleRef,
    ) -> AxisRef {
        self.axis_with(AxisOpts::new()).dense_variable(name, parent, length, nnz, indptr)
    }

    /// `axis name = sparse_fixed(parent, length, nnz_per_row, indices)`
    pub fn sparse_fixed(
        &mut self,
        name: &str,
        parent: AxisRef,
        length: impl Into<E>,
        nnz_per_row: impl Into<E>,
        indices: HandleRef,
    ) -> AxisRef {
        self.axis_with(AxisOpts::new()).sparse_fixed(name, parent, length, nnz_per_row, indices)
    }

    /// `axis name = sparse_fixed(length, nnz, indices)`: a root axis storing `nnz` distinct
    /// coordinates (a sparse vector, DCSR's rows).
    pub fn sparse_root(&mut self, name: &str, length: impl Into<E>, nnz: impl Into<E>, indices: HandleRef) -> AxisRef {
        self.axis_with(AxisOpts::new()).sparse_root(name, length, nnz, indices)
    }

    /// `axis name = sparse_variable(parent, length, nnz, indptr, indices)`
    pub fn sparse_variable(
        &mut self,
        name: &str,
        parent: AxisRef,
        length: impl Into<E>,
        nnz: impl Into<E>,
        indptr: HandleRef,
        indices: HandleRef,
    ) -> AxisRef {
        self.axis_with(AxisOpts::new()).sparse_variable(name, parent, length, nnz, indptr, indices)
    }

    /// `buffer name = match_sparse_buffer(handle, [axes], dtype)`
    pub fn match_sparse_buffer(
        &mut self,
        name: &str,
        handle: HandleRef,
        axes: impl IntoIterator<Item = AxisRef>,
        dtype: DType,
    ) -> BufferRef {
        self.buffer_with(BufferOpts::new()).match_sparse_buffer(name, handle, axes, dtype)
    }
}

impl<'a> Builder<'a, InSpIter> {
    /// The sparse iteration's `init` block. It must come before every statement of the body
    /// and at most once (as in the text), else [`DslError::MisplacedInit`].
    pub fn init(&mut self, body: impl FnOnce(&mut Body<'_>)) {
        if self.init.is_some() || !self.stmts.is_empty() {
            self.st.fail(DslError::MisplacedInit { sp_iter: self.sp_name.clone() });
            return;
        }
        let stmts = nested(self.st, body);
        self.init = Some(stmts);
    }
}

/// Runs `body` on a fresh nested statement list in a new scope.
fn nested(st: &mut State, body: impl FnOnce(&mut Body<'_>)) -> Vec<Stmt> {
    st.scopes.push(Vec::new());
    let mut b =
        Builder::<Nested> { st: &mut *st, stmts: Vec::new(), init: None, sp_name: String::new(), level: PhantomData };
    body(&mut b);
    let stmts = std::mem::take(&mut b.stmts);
    st.scopes.pop();
    stmts
}

impl<'a, L: Level> Builder<'a, L> {
    fn push(&mut self, kind: StmtKind) {
        self.stmts.push(Stmt::new(kind));
    }

    /// `target = value`, where `target` is a buffer element `buf.at(...)`. An untyped
    /// literal value takes the buffer's dtype (see [`E`]).
    pub fn store(&mut self, target: impl Into<E>, value: impl Into<E>) {
        let target = target.into();
        let value = value.into().typed_as(target.dtype);
        let value = self.st.take(value);
        match self.st.take(target) {
            Expr::Load(buffer, indices) => self.push(StmtKind::Store { buffer, indices, value }),
            _ => self.st.fail(DslError::NotAnElement { what: "store" }),
        }
    }

    /// `let name = value`; the variable's dtype is the value's.
    pub fn let_(&mut self, name: &str, value: impl Into<E>) -> VarRef {
        let value = self.st.take(value.into());
        let dtype = self.st.func.expr_dtype(&value);
        let var = self.st.bind_var(name, dtype);
        self.push(StmtKind::Let { var: var.id, value });
        var
    }

    /// `let name: dtype = value`
    pub fn let_typed(&mut self, name: &str, dtype: DType, value: impl Into<E>) -> VarRef {
        let value = self.st.take(value.into());
        let var = self.st.bind_var(name, dtype);
        self.push(StmtKind::Let { var: var.id, value });
        var
    }

    /// `if cond { then }`; chain [`IfElse::else_`] or [`IfElse::else_if`] for the other
    /// branch.
    pub fn if_(&mut self, cond: impl Into<E>, then: impl FnOnce(&mut Body<'_>)) -> IfElse<'_> {
        let cond = self.st.take(cond.into());
        let then_body = nested(self.st, then);
        self.push(StmtKind::If { cond, then_body, else_body: Vec::new() });
        IfElse { st: &mut *self.st, stmt: self.stmts.last_mut() }
    }

    /// `while cond { body }`
    pub fn while_(&mut self, cond: impl Into<E>, body: impl FnOnce(&mut Body<'_>)) {
        let cond = self.st.take(cond.into());
        let body = nested(self.st, body);
        self.push(StmtKind::While { cond, body });
    }

    /// Evaluates an expression for its effect (an [`atomic_add`](super::atomic_add)).
    pub fn eval(&mut self, e: impl Into<E>) {
        let e = self.st.take(e.into());
        self.push(StmtKind::Evaluate(e));
    }

    /// `atomic_add(target, value)` as a statement; `target` must be `buf.at(...)`.
    pub fn atomic_add(&mut self, target: impl Into<E>, value: impl Into<E>) {
        self.eval(super::expr::atomic_add(target, value));
    }

    /// `sp_iter name([axes], "kinds") as [vars] { ... }`: a sparse iteration whose iterator
    /// variables are named after their axes in lower case (`I` → `i`, `I_T` → `i_t`) and
    /// handed to `body` as an array; the array's length must be the number of iterated axes
    /// ([`DslError::IterVarCount`]). Use [`sp_iter_with`](Builder::sp_iter_with) for other
    /// names or attributes.
    pub fn sp_iter<const N: usize>(
        &mut self,
        name: impl Into<String>,
        axes: impl super::SpAxes,
        kinds: &str,
        body: impl FnOnce(&mut SpIterBody<'_>, [VarRef; N]),
    ) {
        self.sp_iter_with(name, axes, kinds).body(body);
    }

    /// Starts a sparse iteration with options: [`SpIterDecl::vars`], [`SpIterDecl::attr`],
    /// then [`SpIterDecl::body`].
    pub fn sp_iter_with(
        &mut self,
        name: impl Into<String>,
        axes: impl super::SpAxes,
        kinds: &str,
    ) -> SpIterDecl<'_, 'a, L> {
        SpIterDecl {
            b: self,
            name: name.into(),
            axes: axes.into_sp_axes(),
            kinds: kinds.to_string(),
            vars: None,
            attrs: Attrs::new(),
        }
    }

    /// Declares buffers with options (`extra_storage`, `default`):
    /// `s.buffer_with(BufferOpts::new().default_value(1.0)).alloc_sparse_buffer(...)`.
    pub fn buffer_with(&mut self, opts: BufferOpts) -> BufferDecl<'_, 'a, L> {
        BufferDecl { b: self, opts }
    }

    /// `buffer name = alloc_sparse_buffer([axes], dtype, scope)`. At function level it lives
    /// for the whole call; in a statement list it is allocated afresh each time it is
    /// reached (an `Alloc` statement) and lives until the end of the list.
    pub fn alloc_sparse_buffer(
        &mut self,
        name: &str,
        axes: impl IntoIterator<Item = AxisRef>,
        dtype: DType,
        scope: Scope,
    ) -> BufferRef {
        self.buffer_with(BufferOpts::new()).alloc_sparse_buffer(name, axes, dtype, scope)
    }

    /// The axis called `name` ([`DslError::Unknown`] if there is none).
    pub fn axis_named(&mut self, name: &str) -> AxisRef {
        let id = self.st.func.axis_by_name(name).unwrap_or_else(|| {
            self.st.fail(DslError::Unknown { what: "axis", name: name.to_string() });
            Handle::from_index(u32::MAX as usize)
        });
        AxisRef { id, owner: self.st.id }
    }

    /// The buffer called `name` ([`DslError::Unknown`] if there is none).
    pub fn buffer_named(&mut self, name: &str) -> BufferRef {
        match self.st.func.buffer_by_name(name) {
            Some(id) => BufferRef { id, dtype: self.st.func.buffers[id].dtype, owner: self.st.id },
            None => {
                self.st.fail(DslError::Unknown { what: "buffer", name: name.to_string() });
                BufferRef { id: Handle::from_index(u32::MAX as usize), dtype: DType::F32, owner: self.st.id }
            }
        }
    }

    /// The variable called `name` in scope here ([`DslError::Unknown`] if there is none).
    pub fn var_named(&mut self, name: &str) -> VarRef {
        let found = self.st.scopes.iter().rev().find_map(|s| s.iter().rev().find(|(n, _)| n == name).map(|(_, v)| *v));
        match found.and_then(|v| self.st.func.vars.try_get(v).map(|x| (v, x.dtype))) {
            Some((id, dtype)) => VarRef { id, dtype, owner: self.st.id },
            None => {
                self.st.fail(DslError::Unknown { what: "variable", name: name.to_string() });
                VarRef { id: Handle::from_index(u32::MAX as usize), dtype: DType::I32, owner: self.st.id }
            }
        }
    }
}

/// The `else` part of an [`if_`](Builder::if_).
pub struct IfElse<'b> {
    st: &'b mut State,
    stmt: Option<&'b mut Stmt>,
}

impl<'b> IfElse<'b> {
    fn else_body(stmt: Option<&'b mut Stmt>) -> Option<&'b mut Vec<Stmt>> {
        match stmt {
            Some(Stmt { kind: StmtKind::If { else_body, .. }, .. }) => Some(else_body),
            _ => None,
        }
    }

    /// `else { body }`
    pub fn else_(self, body: impl FnOnce(&mut Body<'_>)) {
        let stmts = nested(self.st, body);
        if let Some(e) = Self::else_body(self.stmt) {
            *e = stmts;
        }
    }

    /// `else if cond { then }`, which can be continued with another `else_if` or `else_`.
    pub fn else_if(self, cond: impl Into<E>, then: impl FnOnce(&mut Body<'_>)) -> IfElse<'b> {
        let cond = self.st.take(cond.into());
        let then_body = nested(self.st, then);
        let inner = Self::else_body(self.stmt).map(|e| {
            *e = vec![Stmt::new(StmtKind::If { cond, then_body, else_body: Vec::new() })];
            e
        });
        IfElse { st: self.st, stmt: inner.and_then(|e| e.last_mut()) }
    }
}

/// Options of an axis declaration: `idtype` (default `i32`), `sorted` and `unique` (default
/// `true`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisOpts {
    idtype: DType,
    sorted: bool,
    unique: bool,
}

impl Default for AxisOpts {
    fn default() -> Self {
        AxisOpts { idtype: DType::I32, sorted: true, unique: true }
    }
}

impl AxisOpts {
    /// The defaults: `idtype = i32`, sorted.
    pub fn new() -> Self {
        Self::default()
    }

    /// `idtype = dtype`: type of `indptr`, `indices` and the iterators.
    pub fn idtype(self, dtype: DType) -> Self {
        AxisOpts { idtype: dtype, ..self }
    }

    /// `sorted = sorted`: whether the coordinates of a row are ascending.
    pub fn sorted(self, sorted: bool) -> Self {
        AxisOpts { sorted, ..self }
    }

    /// `unique = unique`: whether a row stores each coordinate once (only a root
    /// `sparse_fixed` axis may repeat them: COO's row level).
    pub fn unique(self, unique: bool) -> Self {
        AxisOpts { unique, ..self }
    }
}

/// Axis declarations with [`AxisOpts`]; see [`FuncBuilder::axis_with`].
pub struct AxisDecl<'b, 'a> {
    b: &'b mut Builder<'a, Top>,
    opts: AxisOpts,
}

impl AxisDecl<'_, '_> {
    fn declare(self, name: &str, kind: AxisKind, fields: AxisFields) -> AxisRef {
        self.b.st.declare_axis(name, kind, fields, self.opts)
    }

    /// `axis name = dense_fixed(length, ...)`
    pub fn dense_fixed(self, name: &str, length: impl Into<E>) -> AxisRef {
        let fields = AxisFields { parent: None, length: length.into(), nnz: None, indptr: None, indices: None, pattern: None };
        self.declare(name, AxisKind::DenseFixed, fields)
    }

    /// `axis name = dense_variable(parent, length, nnz, indptr, ...)`
    pub fn dense_variable(
        self,
        name: &str,
        parent: AxisRef,
        length: impl Into<E>,
        nnz: impl Into<E>,
        indptr: HandleRef,
    ) -> AxisRef {
        let fields = AxisFields::variable(parent, length.into(), nnz.into(), indptr, None);
        self.declare(name, AxisKind::DenseVariable, fields)
    }

    /// `axis name = sparse_fixed(parent, length, nnz_per_row, indices, ...)`
    pub fn sparse_fixed(
        self,
        name: &str,
        parent: AxisRef,
        length: impl Into<E>,
        nnz_per_row: impl Into<E>,
        indices: HandleRef,
    ) -> AxisRef {
        let fields = AxisFields {
            parent: Some(parent),
            length: length.into(),
            nnz: Some(nnz_per_row.into()),
            indptr: None,
            indices: Some(indices),
            pattern: None,
        };
        self.declare(name, AxisKind::SparseFixed, fields)
    }

    /// `axis name = sparse_fixed(length, nnz, indices, ...)`: a root axis storing `nnz`
    /// distinct coordinates (a sparse vector, DCSR's rows).
    pub fn sparse_root(self, name: &str, length: impl Into<E>, nnz: impl Into<E>, indices: HandleRef) -> AxisRef {
        let fields = AxisFields {
            parent: None,
            length: length.into(),
            nnz: Some(nnz.into()),
            indptr: None,
            indices: Some(indices),
            pattern: None,
        };
        self.declare(name, AxisKind::SparseFixed, fields)
    }

    /// `axis name = sparse_variable(parent, length, nnz, indptr, indices, ...)`
    pub fn sparse_variable(
        self,
        name: &str,
        parent: AxisRef,
        length: impl Into<E>,
        nnz: impl Into<E>,
        indptr: HandleRef,
        indices: HandleRef,
    ) -> AxisRef {
        let fields = AxisFields::variable(parent, length.into(), nnz.into(), indptr, Some(indices));
        self.declare(name, AxisKind::SparseVariable, fields)
    }

    /// `axis name = sparse_variable(parent, length, nnz, indptr, indices, ..., pattern =
    /// op(members))`: an assembled axis (a sparse output's pattern), its rows the union or
    /// intersection of the members' rows, or (`PatternOp::Product`, members `[JA, KB]`) the
    /// pattern of a product.
    #[allow(clippy::too_many_arguments)]
    pub fn assembled(
        self,
        name: &str,
        parent: AxisRef,
        length: impl Into<E>,
        nnz: impl Into<E>,
        indptr: HandleRef,
        indices: HandleRef,
        op: impl Into<PatternOp>,
        members: &[AxisRef],
    ) -> AxisRef {
        let members = members.iter().filter_map(|m| self.b.st.axis(*m).map(|_| m.id)).collect();
        let fields = AxisFields {
            pattern: Some(AxisPattern { op: op.into(), members }),
            ..AxisFields::variable(parent, length.into(), nnz.into(), indptr, Some(indices))
        };
        self.declare(name, AxisKind::SparseVariable, fields)
    }
}

/// Options of a buffer declaration: `extra_storage`, `default` and `modes` (all unset by
/// default).
#[derive(Clone, Debug)]
pub struct BufferOpts {
    extra_storage: Option<E>,
    default: Option<E>,
    modes: Option<Vec<usize>>,
}

impl BufferOpts {
    /// No options.
    pub fn new() -> Self {
        BufferOpts { extra_storage: None, default: None, modes: None }
    }

    /// `modes = [..]`: axis `k` stores mode `modes[k]` of a tensor bound from a file
    /// (`[1, 0]`: a matrix in CSC).
    pub fn modes(self, modes: impl IntoIterator<Item = usize>) -> Self {
        BufferOpts { modes: Some(modes.into_iter().collect()), ..self }
    }

    /// `extra_storage = e`: elements past the last stored position.
    pub fn extra_storage(self, e: impl Into<E>) -> Self {
        BufferOpts { extra_storage: Some(e.into()), ..self }
    }

    /// `default = v`: value of coordinates that are not stored (an untyped literal takes
    /// the buffer's dtype).
    pub fn default_value(self, v: impl Into<E>) -> Self {
        BufferOpts { default: Some(v.into()), ..self }
    }
}

impl Default for BufferOpts {
    fn default() -> Self {
        Self::new()
    }
}

/// Buffer declarations with [`BufferOpts`]; see [`Builder::buffer_with`].
pub struct BufferDecl<'b, 'a, L: Level> {
    b: &'b mut Builder<'a, L>,
    opts: BufferOpts,
}

impl<L: Level> BufferDecl<'_, '_, L> {
    /// `buffer name = alloc_sparse_buffer([axes], dtype, scope, ...)` (see
    /// [`Builder::alloc_sparse_buffer`]).
    pub fn alloc_sparse_buffer(
        self,
        name: &str,
        axes: impl IntoIterator<Item = AxisRef>,
        dtype: DType,
        scope: Scope,
    ) -> BufferRef {
        let axes = axes.into_iter().collect();
        let buf = self.b.st.declare_buffer(name, axes, dtype, Storage::Alloc(scope), self.opts);
        if !L::TOP {
            self.b.push(StmtKind::Alloc(buf.id));
        }
        buf
    }
}

impl BufferDecl<'_, '_, Top> {
    /// `buffer name = match_sparse_buffer(handle, [axes], dtype, ...)`
    pub fn match_sparse_buffer(
        self,
        name: &str,
        handle: HandleRef,
        axes: impl IntoIterator<Item = AxisRef>,
        dtype: DType,
    ) -> BufferRef {
        let p = self.b.st.handle_param(handle);
        let axes = axes.into_iter().collect();
        self.b.st.declare_buffer(name, axes, dtype, Storage::Param(p), self.opts)
    }
}

/// A sparse iteration being declared; see [`Builder::sp_iter_with`]. Nothing is added
/// until [`body`](SpIterDecl::body) is called.
#[must_use = "a sparse iteration is only added by `.body(...)`"]
pub struct SpIterDecl<'b, 'a, L: Level> {
    b: &'b mut Builder<'a, L>,
    name: String,
    axes: Vec<super::SpAxis>,
    kinds: String,
    vars: Option<Vec<String>>,
    attrs: Attrs,
}

impl<L: Level> SpIterDecl<'_, '_, L> {
    /// Names of the iterator variables, one per iterated axis (`as [i, j, k]`).
    pub fn vars<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.vars = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Adds the attribute `key = value` (`attrs(key = value)`).
    pub fn attr(mut self, key: impl Into<String>, value: impl Into<AttrValue>) -> Self {
        let key = key.into();
        if self.attrs.insert(key.clone(), value.into()).is_some() {
            self.b.st.fail(DslError::DuplicateAttr { key });
        }
        self
    }

    /// Builds the body: `body` gets the body's builder and the iterator variables.
    pub fn body<const N: usize>(self, body: impl FnOnce(&mut SpIterBody<'_>, [VarRef; N])) {
        let SpIterDecl { b, name, axes, kinds, vars, attrs } = self;
        let st = &mut *b.st;
        let mut ir_axes = Vec::new();
        let mut iterated = Vec::new();
        for a in axes {
            let ok = a.refs().iter().all(|r| st.axis(*r).is_some());
            if !ok {
                continue;
            }
            iterated.extend(a.iterated().iter().map(|r| r.id));
            ir_axes.push(a.to_ir());
        }
        let names: Vec<String> = vars.unwrap_or_else(|| {
            iterated
                .iter()
                .map(|a| st.func.axes.try_get(*a).map_or_else(String::new, |x| x.name.to_lowercase()))
                .collect()
        });
        if names.len() != iterated.len() || N != iterated.len() {
            let vars = if names.len() != iterated.len() { names.len() } else { N };
            st.fail(DslError::IterVarCount { sp_iter: name, axes: iterated.len(), vars });
            return;
        }
        st.scopes.push(Vec::new());
        let refs: Vec<VarRef> = names
            .iter()
            .zip(&iterated)
            .map(|(n, a)| {
                let dtype = st.func.axes.try_get(*a).map_or(DType::I32, |x| x.idtype);
                st.bind_var(n, dtype)
            })
            .collect();
        let ids = refs.iter().map(|v| v.id).collect();
        let mut child = Builder::<InSpIter> {
            st: &mut *st,
            stmts: Vec::new(),
            init: None,
            sp_name: name.clone(),
            level: PhantomData,
        };
        if let Ok(arr) = <[VarRef; N]>::try_from(refs) {
            body(&mut child, arr);
        }
        let (init, stmts) = (child.init.take(), std::mem::take(&mut child.stmts));
        st.scopes.pop();
        b.push(StmtKind::SpIter(SpIter { name, axes: ir_axes, kinds, vars: ids, init, body: stmts, attrs }));
    }
}

// ---- attribute values ----------------------------------------------------------------------

impl From<bool> for AttrValue {
    fn from(v: bool) -> Self {
        AttrValue::Bool(v)
    }
}
impl From<i64> for AttrValue {
    fn from(v: i64) -> Self {
        AttrValue::Int(v)
    }
}
impl From<i32> for AttrValue {
    fn from(v: i32) -> Self {
        AttrValue::Int(v as i64)
    }
}
impl From<f64> for AttrValue {
    fn from(v: f64) -> Self {
        AttrValue::Float(v)
    }
}
impl From<&str> for AttrValue {
    fn from(v: &str) -> Self {
        AttrValue::Str(v.to_string())
    }
}
impl From<String> for AttrValue {
    fn from(v: String) -> Self {
        AttrValue::Str(v)
    }
}
