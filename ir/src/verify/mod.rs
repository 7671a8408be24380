//! The IR verifier: checks the invariants every stage of the IR must hold.
//!
//! [`verify_func`] runs after parsing and after every pass. It collects every broken rule
//! instead of stopping at the first, never panics (not even on dangling handles), and is
//! linear in the size of the function.
//!
//! Rules, by area:
//!
//! * **Names** — parameter names are unique; axis and buffer names are unique and do not
//!   clash; a scalar parameter's variable exists and has the parameter's name.
//! * **Axes** — the parent is declared earlier; `dense_fixed` has no parent, the other kinds
//!   have one; each kind has exactly the `nnz`/`indptr`/`indices` fields it needs, and those
//!   arrays are handle parameters; length and nnz are integer expressions over scalar
//!   parameters and literals; the index dtype is `i32` or `i64`.
//! * **Buffers** — in a sparse layout every axis with a parent directly follows it (storage
//!   rule); dense shapes and `extra_storage` are integers; storage is a handle parameter; the
//!   default value has the buffer's dtype.
//! * **Stages** — Stage I has no loops or blocks; Stage II and III have no `sp_iter`; Stage III
//!   has no sparse buffers (its axes only record the sparse structure of the arguments, which
//!   runs check before compiled code starts).
//! * **Sparse iterations** — one variable per iterated axis; a kind string of `S`/`R`, one
//!   letter per variable; each iterated axis's parent is iterated earlier (in the same or an
//!   enclosing `sp_iter`); `fuse` groups are parent chains; `attach` replaces a `dense_fixed`
//!   parent; no spatial iterator below a reduction iterator of the same `sp_iter`.
//! * **Kinds** — checked against the body, not trusted: every store of a sparse iteration
//!   (to a buffer that outlives it) depends on each of its spatial iterators through its
//!   indices, its `init` depends on no reduction iterator, and with spatial iterators it reads
//!   a buffer it writes only at the indices it writes it at (points are independent).
//! * **Accesses** — as many integer indices as the buffer has dimensions; stored and
//!   atomically added values have the buffer's dtype.
//! * **Reductions** — no store indexed by a reduction iterator of an enclosing `sp_iter` or a
//!   reduce iterator of an enclosing block.
//! * **Scoping** — every variable is used in scope and bound once, no binder shadows a name in
//!   scope, and statement-allocated buffers are used only in their statement list.
//! * **Types** — operators, conditions, intrinsics, loop bounds, block iterators and `let`s
//!   are well typed; there are no implicit conversions.

mod body;
mod decls;
mod error;
mod expr;
mod kinds;

pub use error::VerifyErrorKind;

/// Function attribute naming a write-only fault record (`insert_checks`): any point may
/// overwrite it, so its stores are exempt from the kind rules and the parallel checks.
pub const FAULT_RECORD_ATTR: &str = "fault_record";

/// The buffer a function's [`FAULT_RECORD_ATTR`] names, if any.
pub fn fault_record(f: &Func) -> Option<BufferId> {
    match f.attrs.get(FAULT_RECORD_ATTR) {
        Some(crate::func::AttrValue::Str(name)) => f.buffer_by_name(name),
        _ => None,
    }
}

use crate::arena::Handle;
use crate::func::{AxisId, BufferId, Func, Module, VarId};
use crate::span::{SourceFile, Span};
use std::collections::{HashMap, HashSet};
use std::fmt;

/// A broken rule and where it was found. Displays as the kind's message.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyError {
    /// The node the error is about (a statement, declaration or the function header);
    /// [`Span::NONE`] for IR that did not come from text.
    pub span: Span,
    /// Which rule, with the names involved.
    pub kind: VerifyErrorKind,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kind.fmt(f)
    }
}

impl std::error::Error for VerifyError {}

/// Checks every rule on one function and returns all the errors found, in source order
/// (declarations first, then the body).
pub fn verify_func(f: &Func) -> Result<(), Vec<VerifyError>> {
    verified(f).map(|_| ())
}

/// A function the verifier accepted: the proof that passes and the interpreter take, so that
/// what they assume (handles resolve, variable axes have row pointers, ...) holds by type.
/// Only [`verified`] makes one; it derefs to the function.
#[derive(Clone, Copy, Debug)]
pub struct Verified<'a>(&'a Func);

impl std::ops::Deref for Verified<'_> {
    type Target = Func;
    fn deref(&self) -> &Func {
        self.0
    }
}

impl<'a> Verified<'a> {
    /// The function.
    pub fn func(self) -> &'a Func {
        self.0
    }
}

/// Verifies `f` and returns the proof, or every error found (as [`verify_func`]).
pub fn verified(f: &Func) -> Result<Verified<'_>, Vec<VerifyError>> {
    let mut v = Verifier::new(f);
    v.run();
    if v.errors.is_empty() {
        Ok(Verified(f))
    } else {
        Err(v.errors)
    }
}

/// Checks every function of a module, and that function names are unique.
pub fn verify_module(m: &Module) -> Result<(), Vec<VerifyError>> {
    let mut errors = Vec::new();
    let mut seen = HashSet::new();
    for f in &m.funcs {
        if !seen.insert(f.name.as_str()) {
            errors.push(VerifyError { span: f.span, kind: VerifyErrorKind::DuplicateFunc { name: f.name.clone() } });
        }
        if let Err(e) = verify_func(f) {
            errors.extend(e);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Renders errors as diagnostics against the source they were parsed from: each as
/// `file:line:col: message`, the source line and a caret, followed by a newline.
pub fn render_errors(errors: &[VerifyError], src: &SourceFile) -> String {
    errors.iter().map(|e| src.render(e.span, &e.to_string()) + "\n").collect()
}

/// Whether `s` prints as a name that parses back ([`crate::names::is_identifier`]).
fn is_name(s: &str) -> bool {
    crate::names::is_identifier(s)
}

/// What a binder brought into scope, popped at the end of its statement list.
#[derive(Clone, Copy)]
enum Entry {
    Var(VarId),
    Buffer(BufferId),
}

/// The construct whose reduction iterator a variable is.
#[derive(Clone, Copy)]
enum Reducer<'f> {
    SpIter(&'f str),
    Block(&'f str),
}

/// Walks one function, keeping scopes, and collects errors.
struct Verifier<'f> {
    f: &'f Func,
    errors: Vec<VerifyError>,
    /// Where errors found now are reported (the current statement or declaration).
    span: Span,
    /// Binders in scope, innermost last.
    scope: Vec<Entry>,
    /// Per variable: how many times it is bound in the current scope.
    var_in_scope: Vec<u32>,
    /// Per variable: whether it was bound anywhere so far.
    var_bound: Vec<bool>,
    /// Names of variables in scope, with counts.
    names: HashMap<&'f str, u32>,
    /// Per buffer: whether it may be used here (function-level buffers always may).
    buffer_in_scope: Vec<u32>,
    /// Per buffer: whether an `Alloc` statement allocates it.
    stmt_alloc: Vec<bool>,
    /// Per buffer: whether its `Alloc` statement was seen.
    alloc_seen: Vec<bool>,
    /// Per variable: the sp_iter or block whose reduction iterator it is, while in scope.
    reducer: Vec<Option<Reducer<'f>>>,
    /// Per axis: how many iterators of enclosing sp_iters iterate it.
    axis_iterated: Vec<u32>,
    /// Iterators of enclosing sp_iters: the sp_iter and what each iterates.
    sp_vars: Vec<(VarId, &'f str, body::Iterated)>,
    /// Loops between the innermost enclosing block (or the function) and here, with their
    /// extents: the loops that drive a block met here.
    loops: Vec<(VarId, &'f crate::expr::Expr)>,
    /// `let`s met since that block whose values depend on those loops.
    loop_lets: HashSet<VarId>,
    /// Buffers allocated since that block under some of those loops, with the loops: each
    /// iteration of them has its own buffer.
    loop_allocs: Vec<(BufferId, Vec<VarId>)>,
}

impl<'f> Verifier<'f> {
    fn new(f: &'f Func) -> Self {
        Verifier {
            f,
            errors: Vec::new(),
            span: f.span,
            scope: Vec::new(),
            var_in_scope: vec![0; f.vars.len()],
            var_bound: vec![false; f.vars.len()],
            names: HashMap::new(),
            buffer_in_scope: vec![0; f.buffers.len()],
            stmt_alloc: vec![false; f.buffers.len()],
            alloc_seen: vec![false; f.buffers.len()],
            reducer: vec![None; f.vars.len()],
            axis_iterated: vec![0; f.axes.len()],
            sp_vars: Vec::new(),
            loops: Vec::new(),
            loop_lets: HashSet::new(),
            loop_allocs: Vec::new(),
        }
    }

    fn run(&mut self) {
        for b in self.f.stmt_allocated_buffers() {
            if let Some(s) = self.stmt_alloc.get_mut(b.index()) {
                *s = true;
            }
        }
        self.params();
        let names = self.axes();
        self.buffers(names);
        self.body();
    }

    /// Records an error at the current span.
    fn err(&mut self, kind: VerifyErrorKind) {
        self.errors.push(VerifyError { span: self.span, kind });
    }

    /// Records an out-of-range handle.
    fn dangling<T>(&mut self, what: &'static str, h: Handle<T>, len: usize) {
        self.err(VerifyErrorKind::DanglingHandle { what, index: h.index(), len });
    }

    // ---- names for messages (never fail) -----------------------------------------------

    fn var_name(&self, v: VarId) -> String {
        self.f.vars.try_get(v).map_or_else(|| format!("#{}", v.index()), |v| v.name.clone())
    }

    fn axis_name(&self, a: AxisId) -> String {
        self.f.axes.try_get(a).map_or_else(|| format!("#{}", a.index()), |a| a.name.clone())
    }

    fn buffer_name(&self, b: BufferId) -> String {
        self.f.buffers.try_get(b).map_or_else(|| format!("#{}", b.index()), |b| b.name.clone())
    }

    // ---- scopes ------------------------------------------------------------------------

    /// Binds `v` in the current scope: it must exist, be bound nowhere else, and not shadow
    /// a name in scope. `reducer` marks reduction iterators.
    fn bind(&mut self, v: VarId, reducer: Option<Reducer<'f>>) {
        self.bind_checked(v, reducer, true);
    }

    /// [`Self::bind`], checking for shadowing only when `check_shadow` is set.
    fn bind_checked(&mut self, v: VarId, reducer: Option<Reducer<'f>>, check_shadow: bool) {
        let Some(var) = self.f.vars.try_get(v) else {
            self.dangling("variable", v, self.f.vars.len());
            return;
        };
        let i = v.index();
        if !is_name(&var.name) {
            self.err(VerifyErrorKind::BadName { what: "variable", name: var.name.clone() });
        }
        if self.var_bound[i] {
            self.err(VerifyErrorKind::VarBoundTwice { var: var.name.clone() });
        } else if check_shadow && self.names.get(var.name.as_str()).is_some_and(|&n| n > 0) {
            self.err(VerifyErrorKind::Shadowing { var: var.name.clone() });
        }
        self.var_bound[i] = true;
        self.var_in_scope[i] += 1;
        *self.names.entry(var.name.as_str()).or_insert(0) += 1;
        self.reducer[i] = reducer;
        self.scope.push(Entry::Var(v));
    }

    /// Makes a statement-allocated buffer usable until the end of the current list.
    fn bind_buffer(&mut self, b: BufferId) {
        if let Some(n) = self.buffer_in_scope.get_mut(b.index()) {
            *n += 1;
            self.scope.push(Entry::Buffer(b));
        }
    }

    /// Ends the scopes opened since `mark` (a length of `self.scope`).
    fn pop_to(&mut self, mark: usize) {
        while self.scope.len() > mark {
            match self.scope.pop() {
                Some(Entry::Var(v)) => {
                    let i = v.index();
                    self.var_in_scope[i] -= 1;
                    if self.var_in_scope[i] == 0 {
                        self.reducer[i] = None;
                    }
                    if let Some(n) = self.f.vars.try_get(v).and_then(|var| self.names.get_mut(var.name.as_str())) {
                        *n -= 1;
                    }
                }
                Some(Entry::Buffer(b)) => self.buffer_in_scope[b.index()] -= 1,
                None => {}
            }
        }
    }
}
