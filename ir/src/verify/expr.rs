//! Expressions: types, variable scoping and buffer accesses.

use super::{Verifier, VerifyErrorKind as K};
use crate::expr::{BinOp, Expr, Intrinsic, UnOp};
use crate::func::{Buffer, BufferId, Region, VarId};
use crate::types::DType;

/// How an operator is written in messages.
fn op_name(op: BinOp) -> &'static str {
    match op {
        BinOp::Min => "min",
        BinOp::Max => "max",
        _ => op.symbol().unwrap_or("?"),
    }
}

impl<'f> Verifier<'f> {
    /// Checks an expression and returns its dtype, or `None` when an error already made it
    /// unknown (so that one fault is not reported again by every enclosing node).
    pub(super) fn expr(&mut self, e: &'f Expr) -> Option<DType> {
        match e {
            Expr::Int(v, d) => {
                if !d.is_int() || (*d == DType::I32 && i32::try_from(*v).is_err()) {
                    self.err(K::LiteralDType { literal: v.to_string(), dtype: *d });
                }
                Some(*d)
            }
            Expr::Float(v, d) => {
                if !d.is_float() {
                    self.err(K::LiteralDType { literal: format!("{v:?}"), dtype: *d });
                }
                Some(*d)
            }
            Expr::Bool(_) => Some(DType::Bool),
            Expr::Var(v) => self.use_var(*v),
            Expr::Binary(op, a, b) => self.binary(*op, a, b),
            Expr::Unary(op, a) => {
                let t = self.expr(a)?;
                match op {
                    UnOp::Neg if t == DType::Bool => {
                        self.err(K::OperandType { op: "-", expected: "numeric", found: t });
                        None
                    }
                    UnOp::Not if t != DType::Bool => {
                        self.err(K::OperandType { op: "!", expected: "bool", found: t });
                        None
                    }
                    _ => Some(t),
                }
            }
            Expr::Select(c, a, b) => {
                self.cond("select", c);
                let (ta, tb) = (self.expr(a), self.expr(b));
                match (ta, tb) {
                    (Some(x), Some(y)) if x != y => {
                        self.err(K::SelectArms { then: x, otherwise: y });
                        None
                    }
                    _ => ta.or(tb),
                }
            }
            Expr::Cast(d, a) => {
                self.expr(a);
                Some(*d)
            }
            Expr::Call(i, args) => self.call(*i, args),
            Expr::Load(b, idx) => self.access(*b, idx).map(|b| b.dtype),
            Expr::AtomicAdd(b, idx, value) => {
                let buf = self.access(*b, idx);
                let t = self.expr(value);
                if let (Some(buf), Some(t)) = (buf, t) {
                    if t != buf.dtype {
                        self.err(K::AtomicAddDType { buffer: buf.name.clone(), expected: buf.dtype, found: t });
                    }
                }
                buf.map(|b| b.dtype)
            }
        }
    }

    /// Checks a condition of `what` (`if`, `while`, `select`): it must be bool.
    pub(super) fn cond(&mut self, what: &'static str, e: &'f Expr) {
        if let Some(t) = self.expr(e) {
            if t != DType::Bool {
                self.err(K::ConditionNotBool { what, found: t });
            }
        }
    }

    fn binary(&mut self, op: BinOp, a: &'f Expr, b: &'f Expr) -> Option<DType> {
        let gives_bool = op.is_comparison() || op.is_logical();
        let (ta, tb) = (self.expr(a), self.expr(b));
        let (Some(ta), Some(tb)) = (ta, tb) else {
            return gives_bool.then_some(DType::Bool);
        };
        if ta != tb {
            self.err(K::OperandMismatch { op: op_name(op), lhs: ta, rhs: tb });
            return gives_bool.then_some(DType::Bool);
        }
        if op.is_logical() {
            if ta != DType::Bool {
                self.err(K::OperandType { op: op_name(op), expected: "bool", found: ta });
            }
            Some(DType::Bool)
        } else if op.is_comparison() {
            Some(DType::Bool)
        } else {
            if ta == DType::Bool {
                self.err(K::OperandType { op: op_name(op), expected: "numeric", found: ta });
                return None;
            }
            Some(ta)
        }
    }

    fn call(&mut self, i: Intrinsic, args: &'f [Expr]) -> Option<DType> {
        let types: Vec<Option<DType>> = args.iter().map(|a| self.expr(a)).collect();
        if args.len() != i.arity() {
            self.err(K::IntrinsicArity { name: i.name(), expected: i.arity(), found: args.len() });
        }
        let before = self.errors.len();
        match i {
            Intrinsic::MaxValue(d) | Intrinsic::MinValue(d) => {
                if d == DType::Bool {
                    self.err(K::OperandType { op: i.name(), expected: "numeric", found: d });
                }
                return Some(d);
            }
            Intrinsic::Abs => {
                for t in types.iter().flatten() {
                    if *t == DType::Bool {
                        self.err(K::OperandType { op: i.name(), expected: "numeric", found: *t });
                    }
                }
            }
            _ => {
                // Operands of `pow` and `fma` share one dtype.
                let known: Vec<DType> = types.iter().flatten().copied().collect();
                if let Some(&y) = known.iter().find(|&&y| y != known[0]) {
                    self.err(K::OperandMismatch { op: i.name(), lhs: known[0], rhs: y });
                    return None;
                }
                if let Some(t) = types.iter().flatten().find(|t| !t.is_float()) {
                    self.err(K::OperandType { op: i.name(), expected: "float", found: *t });
                }
            }
        }
        // A mistyped call has no type of its own.
        if self.errors.len() > before {
            return None;
        }
        types.first().copied().flatten()
    }

    /// A variable use: it must exist and be in scope.
    fn use_var(&mut self, v: VarId) -> Option<DType> {
        let Some(var) = self.f.vars.try_get(v) else {
            self.dangling("variable", v, self.f.vars.len());
            return None;
        };
        if self.var_in_scope[v.index()] == 0 {
            self.err(K::VarOutOfScope { var: var.name.clone() });
        }
        Some(var.dtype)
    }

    /// A buffer use: it must exist and be usable here.
    fn use_buffer(&mut self, b: BufferId) -> Option<&'f Buffer> {
        let Some(buf) = self.f.buffers.try_get(b) else {
            self.dangling("buffer", b, self.f.buffers.len());
            return None;
        };
        if self.buffer_in_scope[b.index()] == 0 {
            self.err(K::BufferOutOfScope { buffer: buf.name.clone() });
        }
        Some(buf)
    }

    /// A load, store or atomic add: one integer index per dimension.
    pub(super) fn access(&mut self, b: BufferId, idx: &'f [Expr]) -> Option<&'f Buffer> {
        let buf = self.use_buffer(b);
        for (dim, e) in idx.iter().enumerate() {
            if let Some(t) = self.expr(e) {
                if !t.is_int() {
                    self.err(K::IndexNotInt { buffer: self.buffer_name(b), dim, found: t });
                }
            }
        }
        if let Some(buf) = buf {
            if idx.len() != buf.ndim() {
                self.err(K::IndexCount { buffer: buf.name.clone(), expected: buf.ndim(), found: idx.len() });
            } else if self.f.stage == crate::types::Stage::I {
                self.assembled_access(b, idx);
                self.non_unique_access(b, idx);
            }
        }
        buf
    }

    /// A region of a block: one integer point or range per dimension.
    pub(super) fn region(&mut self, r: &'f Region) {
        let buf = self.use_buffer(r.buffer);
        for (dim, range) in r.ranges.iter().enumerate() {
            for e in std::iter::once(&range.begin).chain(range.end.as_ref()) {
                if let Some(t) = self.expr(e) {
                    if !t.is_int() {
                        self.err(K::IndexNotInt { buffer: self.buffer_name(r.buffer), dim, found: t });
                    }
                }
            }
        }
        if let Some(buf) = buf {
            if r.ranges.len() != buf.ndim() {
                self.err(K::IndexCount { buffer: buf.name.clone(), expected: buf.ndim(), found: r.ranges.len() });
            }
        }
    }
}
