//! `insert_checks` (Stage III): bounds and divisor checks in the generated code, for
//! programs whose own index arithmetic the argument checks cannot prove in range
//! (`sparsec run --checked`).
//!
//! Every statement whose expressions load from a buffer at an index not known to be in
//! range, or divide integers by a divisor not known to be non-zero, runs only when all of
//! them are in range; otherwise it records a fault and is skipped. Checks nest inner loads
//! first, so a check never reads out of bounds itself. The fault goes to a new handle
//! parameter ([`FAULT_PARAM`], three `i64`s: site + 1, the offending index or 0 for a
//! division, the length); after the run a non-zero first element means the run failed, and
//! [`Site`] says where. A `let` or a `while` condition that needs checks goes through a
//! one-element local buffer so that its value can be computed under a guard. Every `while`
//! also counts its iterations and stops with a fault at [`sparsec_ir::MAX_WHILE_ITERATIONS`].

use crate::build::{self, Namer};
use crate::PassError;
use sparsec_ir::expr::{BinOp, Expr, UnOp};
use sparsec_ir::func::{Buffer, BufferId, Func, Layout, Param, ParamKind, Stmt, StmtKind, Storage};
use sparsec_ir::{DType, Scope, Span, Stage};

/// The parameter that receives the first fault of a checked run.
pub const FAULT_PARAM: &str = "sparsec_fault";

/// What a check guards.
#[derive(Clone, Debug, PartialEq)]
pub enum SiteKind {
    /// An access to the named buffer.
    Access(String),
    /// An integer division.
    Division,
    /// The iteration count of a `while` loop.
    WhileLimit,
}

/// One checked operation: what it is and the statement it belongs to.
#[derive(Clone, Debug, PartialEq)]
pub struct Site {
    /// What is checked.
    pub kind: SiteKind,
    /// The statement (its Stage-I span where lowering kept it).
    pub span: Span,
}

/// What a checked run reported, decoded from the fault array.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Fault {
    /// An index outside its buffer.
    #[error("index {index} is outside buffer `{buffer}` of {len} elements")]
    OutOfBounds {
        /// The buffer.
        buffer: String,
        /// The index.
        index: i64,
        /// Its length.
        len: i64,
        /// The statement.
        span: Span,
    },
    /// An integer division by zero.
    #[error("integer division by zero")]
    DivisionByZero {
        /// The statement.
        span: Span,
    },
    /// A `while` whose condition still held after [`sparsec_ir::MAX_WHILE_ITERATIONS`].
    #[error("the `while` loop ran {limit} iterations and its condition still holds (a runaway loop)")]
    WhileLimit {
        /// The limit.
        limit: i64,
        /// The loop.
        span: Span,
    },
}

impl Fault {
    /// Decodes the fault array `[site + 1, index, len]`; `None` when nothing faulted.
    pub fn decode(sites: &[Site], fault: &[i64]) -> Option<Fault> {
        let site = sites.get(usize::try_from(*fault.first()?).ok()?.checked_sub(1)?)?;
        let (index, len) = (fault.get(1).copied().unwrap_or(0), fault.get(2).copied().unwrap_or(0));
        Some(match &site.kind {
            SiteKind::Access(buffer) => Fault::OutOfBounds { buffer: buffer.clone(), index, len, span: site.span },
            SiteKind::Division => Fault::DivisionByZero { span: site.span },
            SiteKind::WhileLimit => Fault::WhileLimit { limit: index, span: site.span },
        })
    }

    /// The statement that faulted.
    pub fn span(&self) -> Span {
        match self {
            Fault::OutOfBounds { span, .. } | Fault::DivisionByZero { span } | Fault::WhileLimit { span, .. } => *span,
        }
    }
}

/// Adds the checks to a Stage-III function. Returns the checked function and its sites (the
/// fault array's first element indexes them, from 1).
pub fn insert_checks(f: &Func) -> Result<(Func, Vec<Site>), PassError> {
    insert_checks_with(f, sparsec_ir::MAX_WHILE_ITERATIONS)
}

/// [`insert_checks`] with `while` loops stopped after `max_while` iterations (tests use
/// small limits).
pub fn insert_checks_with(f: &Func, max_while: i64) -> Result<(Func, Vec<Site>), PassError> {
    if f.stage != Stage::III {
        return Err(PassError::WrongStage { pass: "insert_checks", expected: Stage::III, found: f.stage });
    }
    let mut out = f.clone();
    let mut namer = Namer::for_func(f);
    let pname = namer.global(FAULT_PARAM);
    let bname = namer.global("FAULT");
    out.params.push(Param { name: pname, kind: ParamKind::Handle, span: Span::NONE });
    let fault = out.buffers.append(Buffer {
        name: bname,
        dtype: DType::I64,
        layout: Layout::Dense(vec![Expr::Int(3, DType::I32)]),
        storage: Storage::Param(out.params.len() - 1),
        extra_storage: None,
        default: None,
        modes: None,
        span: Span::NONE,
    });
    // Any point may record a fault: the record is exempt from the kind rules.
    let record = out.buffers[fault].name.clone();
    out.attrs.insert(sparsec_ir::verify::FAULT_RECORD_ATTR.to_string(), sparsec_ir::AttrValue::Str(record));
    let mut c = Checker { f: out.clone(), fault, sites: Vec::new(), namer, max_while };
    let body = std::mem::take(&mut out.body);
    out.body = c.list(body)?;
    // Locals made for `let`s and `while` conditions.
    out.buffers = c.f.buffers;
    out.vars = c.f.vars;
    sparsec_ir::verify::verify_func(&out)
        .map_err(|errors| PassError::InvalidOutput { pass: "insert_checks", errors })?;
    Ok((out, c.sites))
}

/// One pending check: the condition that must hold, and what to record when it does not.
struct Check {
    ok: Expr,
    site: usize,
    index: Expr,
    len: Expr,
}

struct Checker {
    /// The function being built (for dtypes and new locals).
    f: Func,
    fault: BufferId,
    sites: Vec<Site>,
    namer: Namer,
    /// Iterations after which a `while` is a runaway.
    max_while: i64,
}

impl Checker {
    fn list(&mut self, list: Vec<Stmt>) -> Result<Vec<Stmt>, PassError> {
        let mut out = Vec::new();
        for s in list {
            out.extend(self.stmt(s)?);
        }
        Ok(out)
    }

    fn stmt(&mut self, mut s: Stmt) -> Result<Vec<Stmt>, PassError> {
        // Children first; their checks stay inside them.
        for child in s.kind.child_lists_mut() {
            let taken = std::mem::take(child);
            *child = self.list(taken)?;
        }
        let span = s.span;
        match s.kind {
            StmtKind::Let { var, value } => {
                let checks = self.checks(std::slice::from_ref(&value), &[], span);
                if checks.is_empty() {
                    return Ok(vec![Stmt { kind: StmtKind::Let { var, value }, span }]);
                }
                // let v = e  →  alloc t[1]; guarded t[0] = e; let v = t[0]
                let d = self.f.vars[var].dtype;
                let (alloc, t) = self.local(d, "let");
                let set = Stmt { kind: StmtKind::Store { buffer: t, indices: vec![zero_i32()], value }, span };
                let read = Expr::Load(t, vec![zero_i32()]);
                Ok(vec![alloc, self.guard(checks, set), Stmt { kind: StmtKind::Let { var, value: read }, span }])
            }
            StmtKind::While { cond, body } => {
                // while c { b }  →  alloc t[1], n[1]; n[0] = 0; guarded t[0] = c;
                //   while t[0] { if n[0] == LIMIT { fault; t[0] = false } else { n[0] += 1; b; guarded t[0] = c } }
                let (alloc_t, t) = self.local(DType::Bool, "cond");
                let (alloc_n, n) = self.local(DType::I64, "count");
                let set = |this: &mut Self| {
                    let s = Stmt {
                        kind: StmtKind::Store { buffer: t, indices: vec![zero_i32()], value: cond.clone() },
                        span,
                    };
                    let checks = this.checks(std::slice::from_ref(&cond), &[], span);
                    // A fault leaves the condition false, so the loop ends.
                    let stop = build::store(t, vec![zero_i32()], Expr::Bool(false));
                    if checks.is_empty() { s } else { this.guard_else(checks, s, vec![stop]) }
                };
                let first = set(self);
                let count = Expr::Load(n, vec![zero_i32()]);
                let limit = Expr::Int(self.max_while, DType::I64);
                self.sites.push(Site { kind: SiteKind::WhileLimit, span });
                let site = self.sites.len() as i64;
                let runaway = vec![
                    self.set_fault(0, Expr::Int(site, DType::I64)),
                    self.set_fault(1, limit.clone()),
                    self.set_fault(2, Expr::Int(0, DType::I64)),
                    build::store(t, vec![zero_i32()], Expr::Bool(false)),
                ];
                let mut step = vec![build::store(n, vec![zero_i32()], Expr::binary(BinOp::Add, count.clone(), Expr::Int(1, DType::I64)))];
                step.extend(body);
                step.push(set(self));
                let check = build::stmt(StmtKind::If { cond: Expr::binary(BinOp::Eq, count, limit), then_body: runaway, else_body: step });
                let w = Stmt { kind: StmtKind::While { cond: Expr::Load(t, vec![zero_i32()]), body: vec![check] }, span };
                let zero = build::store(n, vec![zero_i32()], Expr::Int(0, DType::I64));
                Ok(vec![alloc_t, alloc_n, zero, first, w])
            }
            kind => {
                let store_target = match &kind {
                    StmtKind::Store { buffer, indices, .. } => Some((*buffer, indices.clone())),
                    _ => None,
                };
                // A block's regions describe; only its iterator bindings and extents run.
                let exprs: Vec<Expr> = match &kind {
                    StmtKind::Block(b) => {
                        b.iters.iter().flat_map(|it| [it.extent.clone(), it.binding.clone()]).collect()
                    }
                    k => k.exprs().into_iter().cloned().collect(),
                };
                let target: Vec<(BufferId, Vec<Expr>)> = store_target.into_iter().collect();
                let checks = self.checks(&exprs, &target, span);
                let s = Stmt { kind, span };
                Ok(if checks.is_empty() { vec![s] } else { vec![self.guard(checks, s)] })
            }
        }
    }

    /// A one-element local buffer of dtype `d`.
    fn local(&mut self, d: DType, base: &str) -> (Stmt, BufferId) {
        let name = self.namer.global(&format!("checked_{base}"));
        let b = self.f.buffers.append(Buffer {
            name,
            dtype: d,
            layout: Layout::Dense(vec![Expr::Int(1, DType::I32)]),
            storage: Storage::Alloc(Scope::Local),
            extra_storage: None,
            default: None,
            modes: None,
            span: Span::NONE,
        });
        (build::stmt(StmtKind::Alloc(b)), b)
    }

    /// The checks `exprs` (and a store to `target`) need, innermost first.
    fn checks(&mut self, exprs: &[Expr], target: &[(BufferId, Vec<Expr>)], span: Span) -> Vec<Check> {
        let mut out = Vec::new();
        for e in exprs {
            self.expr_checks(e, span, &mut Vec::new(), &mut out);
        }
        for (b, idx) in target {
            self.access(*b, idx, span, &mut out);
        }
        out
    }

    /// Post-order: operands before the operation that uses them. `when` holds the conditions
    /// under which `e` is evaluated at all: the right operand of `&&` (`||`) runs only where
    /// the left one is true (false), so its checks hold only there.
    fn expr_checks(&mut self, e: &Expr, span: Span, when: &mut Vec<Expr>, out: &mut Vec<Check>) {
        match e {
            Expr::Binary(op @ (BinOp::And | BinOp::Or), a, b) => {
                self.expr_checks(a, span, when, out);
                let taken = if *op == BinOp::And { (**a).clone() } else { Expr::Unary(UnOp::Not, a.clone()) };
                when.push(taken);
                self.expr_checks(b, span, when, out);
                when.pop();
                return;
            }
            // Both arms of a select are evaluated (as in the interpreter), so both are checked.
            _ => {
                for c in e.children() {
                    self.expr_checks(c, span, when, out);
                }
            }
        }
        let before = out.len();
        self.own_checks(e, span, out);
        // `!w || ok` for each enclosing condition, innermost first.
        for c in &mut out[before..] {
            for w in when.iter().rev() {
                let skip = Expr::Unary(UnOp::Not, Box::new(w.clone()));
                c.ok = Expr::binary(BinOp::Or, skip, c.ok.clone());
            }
        }
    }

    /// The checks of `e`'s own operation.
    fn own_checks(&mut self, e: &Expr, span: Span, out: &mut Vec<Check>) {
        match e {
            Expr::Load(b, idx) | Expr::AtomicAdd(b, idx, _) => self.access(*b, idx, span, out),
            Expr::Binary(BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod, _, d) if self.f.expr_dtype(d).is_int() => {
                if matches!(**d, Expr::Int(x, _) if x != 0) {
                    return;
                }
                let dt = self.f.expr_dtype(d);
                self.sites.push(Site { kind: SiteKind::Division, span });
                out.push(Check {
                    ok: Expr::binary(BinOp::Ne, (**d).clone(), Expr::Int(0, dt)),
                    site: self.sites.len(),
                    index: Expr::Int(0, DType::I64),
                    len: Expr::Int(0, DType::I64),
                });
            }
            _ => {}
        }
    }

    fn access(&mut self, b: BufferId, idx: &[Expr], span: Span, out: &mut Vec<Check>) {
        if b == self.fault {
            return;
        }
        let Some(buf) = self.f.buffers.try_get(b) else { return };
        let (Layout::Dense(shape), [i]) = (&buf.layout, idx) else { return };
        let Some(mut len) = shape.iter().cloned().reduce(|a, b| Expr::binary(BinOp::Mul, a, b)) else { return };
        if let Some(extra) = &buf.extra_storage {
            len = Expr::binary(BinOp::Add, len, extra.clone());
        }
        // Literal indices into literal lengths need no check.
        if let (Expr::Int(x, _), Expr::Int(n, _)) = (i, &len) {
            if *x >= 0 && x < n {
                return;
            }
        }
        let d = self.f.expr_dtype(i);
        let len = build::cast_to(&self.f, len, d);
        let ok = Expr::binary(
            BinOp::And,
            Expr::binary(BinOp::Ge, i.clone(), Expr::Int(0, d)),
            Expr::binary(BinOp::Lt, i.clone(), len.clone()),
        );
        self.sites.push(Site { kind: SiteKind::Access(buf.name.clone()), span });
        out.push(Check { ok, site: self.sites.len(), index: i.clone(), len });
    }

    /// `s` under every check, innermost check outermost: each condition reads only what the
    /// checks around it have proven.
    fn guard(&mut self, checks: Vec<Check>, s: Stmt) -> Stmt {
        self.guard_else(checks, s, vec![])
    }

    /// [`Self::guard`], running `on_fault` too where a check fails.
    fn guard_else(&mut self, checks: Vec<Check>, s: Stmt, on_fault: Vec<Stmt>) -> Stmt {
        let mut inner = s;
        for c in checks.into_iter().rev() {
            let mut report = vec![
                self.set_fault(0, Expr::Int(c.site as i64, DType::I64)),
                self.set_fault(1, cast_i64(&self.f, c.index)),
                self.set_fault(2, cast_i64(&self.f, c.len)),
            ];
            report.extend(on_fault.iter().cloned());
            inner = build::stmt(StmtKind::If { cond: c.ok, then_body: vec![inner], else_body: report });
        }
        inner
    }

    fn set_fault(&self, k: i64, v: Expr) -> Stmt {
        build::store(self.fault, vec![Expr::Int(k, DType::I32)], v)
    }
}

fn zero_i32() -> Expr {
    Expr::Int(0, DType::I32)
}

fn cast_i64(f: &Func, e: Expr) -> Expr {
    build::cast_to(f, e, DType::I64)
}
