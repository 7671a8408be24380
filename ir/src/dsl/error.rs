//! [`DslError`]: misuse of the DSL, and verifier errors of the finished function.

use crate::verify::VerifyError;

/// Why [`func`](super::func) could not build a function.
///
/// The builder keeps going after a misuse (a closure cannot be aborted without panicking)
/// and [`func`](super::func) reports the *first* misuse; when there is none, the finished
/// function is verified and every verifier error is returned in [`DslError::Verify`].
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DslError {
    /// A parameter, axis, buffer or variable name that is not an identifier of the text
    /// format (`[A-Za-z_][A-Za-z0-9_]*`, not a keyword, not `inf`/`nan`).
    #[error("`{name}` is not a valid {what} name")]
    InvalidName {
        /// What was being named (`parameter`, `axis`, `buffer`, `variable`).
        what: &'static str,
        /// The rejected name.
        name: String,
    },
    /// A name declared twice: two parameters, or two axes/buffers (which share one
    /// namespace, as in the text).
    #[error("{what} `{name}` is already declared")]
    Duplicate {
        /// `parameter` or `axis or buffer`.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// A variable binder (iterator, `let`) whose name is already bound in scope.
    #[error("`{name}` shadows a variable of the same name that is already in scope")]
    Shadowing {
        /// The name.
        name: String,
    },
    /// A by-name lookup ([`Builder::axis_named`](super::Builder::axis_named), ...) that
    /// found nothing.
    #[error("unknown {what} `{name}`")]
    Unknown {
        /// `axis`, `buffer` or `variable`.
        what: &'static str,
        /// The name looked up.
        name: String,
    },
    /// A variable used outside the statement list that binds it (e.g. an iterator that
    /// escaped its `sp_iter` closure).
    #[error("variable `{name}` is used outside the scope that binds it")]
    OutOfScope {
        /// The variable's name.
        name: String,
    },
    /// An axis, buffer, parameter or variable handle created by another [`func`](super::func)
    /// call.
    #[error("{what} handle belongs to another function")]
    ForeignHandle {
        /// `axis`, `buffer`, `parameter` or `variable`/`expression`.
        what: &'static str,
    },
    /// A sparse iteration whose number of iterator variables (the closure's array pattern,
    /// or the names given) differs from the number of axes it iterates.
    #[error("sparse iteration `{sp_iter}` iterates {axes} axes but binds {vars} variables")]
    IterVarCount {
        /// The sparse iteration.
        sp_iter: String,
        /// Axes iterated (a `fuse` group counts each of its axes).
        axes: usize,
        /// Variables bound.
        vars: usize,
    },
    /// A buffer access with the wrong number of indices.
    #[error("buffer `{buffer}` takes {expected} indices, found {found}")]
    Arity {
        /// The buffer.
        buffer: String,
        /// Its number of dimensions.
        expected: usize,
        /// Indices given.
        found: usize,
    },
    /// A store or `atomic_add` whose target is not a buffer element `buf.at(...)`.
    #[error("`{what}` expects a buffer element `buf.at(...)` as its target")]
    NotAnElement {
        /// `store` or `atomic_add`.
        what: &'static str,
    },
    /// `init` given twice, or after statements of the body (the text requires it first).
    #[error("`init` of sparse iteration `{sp_iter}` must come before its body, and only once")]
    MisplacedInit {
        /// The sparse iteration.
        sp_iter: String,
    },
    /// The same attribute key given twice.
    #[error("attribute `{key}` is given twice")]
    DuplicateAttr {
        /// The key.
        key: String,
    },
    /// The finished function does not verify; every verifier error, in order.
    #[error("the function does not verify: {}", first(.0))]
    Verify(Vec<VerifyError>),
}

fn first(errors: &[VerifyError]) -> String {
    let more = if errors.len() > 1 { format!(" (and {} more)", errors.len() - 1) } else { String::new() };
    errors.first().map_or_else(String::new, |e| format!("{e}{more}"))
}
