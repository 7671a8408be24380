//! The vector form of a `vectorized` loop: when `w` consecutive iterations may run as one
//! operation on `w`-lane vectors, and what each lane-wise operation is.
//!
//! A loop `for k in vectorized(w)` (constant `w`) has a vector form ([`plan`]) when its body
//! is guards, stores and blocks of stores (a block's stores may sit under one guard that does
//! not depend on `k`, tested once outside the block) where
//! - every store, and every load that depends on `k`, has a flat index `base + k` (unit
//!   stride), and other loads do not depend on `k` (one value for all lanes);
//! - the stored values are float arithmetic (`+ - * /`, negation, `fma`) of those;
//! - a stored buffer is read only at the element the same lane stores (no lane reads what
//!   another lane writes, so running the lanes together keeps the serial order's result);
//! - a guard that depends on `k` is `base + k < bound` (conjunctions of such guards and
//!   lane-independent ones too). Where `base` and `bound` are multiples of `w`, it holds for
//!   every lane exactly when `base < bound` holds, so the vector form tests that once;
//!   elsewhere it holds on a prefix of the lanes, which the vector form runs under a mask
//!   ([`VStmt::Masked`]): its loads, gathers and stores touch only the active lanes;
//! - a float load whose index depends on `k` through another load (`X[J[base + k]]`,
//!   an indirect index of unit-stride integer loads, lane-independent values, `+ - *` and
//!   integer conversions) is a gather ([`VExpr::Gather`]); a buffer gathered from is never
//!   stored in the loop.
//!
//! "Multiple of `w`" is proven from the expressions ([`multiple_of`]): literals, products
//! with a multiple, sums of multiples, and scalar parameters, which become run-time
//! conditions ([`Plan::assume`]). Backends run the vector form where every assumed
//! parameter is a multiple of `w` and the loop as written elsewhere, so both agree with the
//! interpreter, which runs the loop serially. The same proof tells which vector accesses
//! start at a multiple of `w` elements ([`Access::aligned`]).

use crate::expr::{BinOp, Expr, Intrinsic, UnOp};
use crate::func::{Block, BufferId, For, Func, ParamKind, Stmt, StmtKind, Storage};
use crate::types::{DType, ForKind};
use crate::VarId;
use std::collections::{BTreeSet, HashMap};

/// Lane counts a vector form may have.
pub const WIDTHS: [i64; 4] = [2, 4, 8, 16];

/// The vector form of one `vectorized` loop.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan<'f> {
    /// Lanes (the loop's extent).
    pub width: i64,
    /// Scalar parameters that must be multiples of `width` for the vector form; elsewhere
    /// the loop runs as written.
    pub assume: Vec<VarId>,
    /// The body, evaluated with the loop variable at the loop's first value.
    pub body: Vec<VStmt<'f>>,
}

/// A statement of a vector form.
#[derive(Clone, Debug, PartialEq)]
pub enum VStmt<'f> {
    /// Runs `then` when `cond` (independent of the lane) holds.
    If {
        /// The condition at the first lane, the same for every lane.
        cond: Expr,
        /// Taken branch.
        then: Vec<VStmt<'f>>,
    },
    /// Runs `then` on the lanes `l` where `first + l < bound`, a prefix of the lanes (none
    /// where `first >= bound`, and then nothing in `then` runs, lane-independent reads
    /// included).
    Masked {
        /// The guarded index at the first lane.
        first: Expr,
        /// The bound, the same for every lane.
        bound: Expr,
        /// What the active lanes run.
        then: Vec<VStmt<'f>>,
    },
    /// A store outside blocks.
    Store(VStore),
    /// A block (no `init`): its iterators are bound at the first lane, then its stores run.
    Block {
        /// The block.
        block: &'f Block,
        /// Its stores, in order.
        stores: Vec<VStore>,
    },
}

/// `w` consecutive elements of a buffer: the flat index is that of the first lane.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    /// The buffer.
    pub buffer: BufferId,
    /// The flat index as written; evaluated at the first lane.
    pub index: Expr,
    /// Whether the first lane's index is a multiple of the width (under [`Plan::assume`]).
    pub aligned: bool,
    /// The first lane's index with block iterators replaced by their bindings and the loop
    /// variable by its first value.
    pub first: Expr,
}

/// A vector store.
#[derive(Clone, Debug, PartialEq)]
pub struct VStore {
    /// Where.
    pub at: Access,
    /// What.
    pub value: VExpr,
}

/// A lane-wise expression.
#[derive(Clone, Debug, PartialEq)]
pub enum VExpr {
    /// A value independent of the lane, broadcast.
    Splat(Expr),
    /// Consecutive elements.
    Load(Access),
    /// The elements of a float buffer at lane-wise flat indices (`index`, an integer
    /// lane-wise expression).
    Gather {
        /// The buffer.
        buffer: BufferId,
        /// The flat index of each lane.
        index: Box<VExpr>,
    },
    /// `a op b` on floats (`+ - * /`), or on the integers of a gather's index (`+ - *`).
    Binary(BinOp, Box<VExpr>, Box<VExpr>),
    /// An integer index converted to another integer type.
    Cast(DType, Box<VExpr>),
    /// `-a` on floats.
    Neg(Box<VExpr>),
    /// `fma(a, b, c)`.
    Fma(Box<VExpr>, Box<VExpr>, Box<VExpr>),
}

/// The vector form of `f`, if it is a `vectorized` loop that has one (module documentation).
pub fn plan<'f>(func: &'f Func, f: &'f For) -> Option<Plan<'f>> {
    let width = f.extent.as_int()?;
    if f.kind != ForKind::Vectorized || !WIDTHS.contains(&width) {
        return None;
    }
    let mut p = Planner {
        func,
        k: f.var,
        min: f.min.clone(),
        width,
        bind: HashMap::new(),
        assume: BTreeSet::new(),
        stored: Vec::new(),
        loads: Vec::new(),
    };
    let body = p.stmts(&f.body)?;
    // A stored buffer (or one sharing its handle) is read only at the same lane's element.
    let group = |b: BufferId| match func.buffers.try_get(b).map(|x| &x.storage) {
        Some(Storage::Param(h)) => Err(*h),
        _ => Ok(b),
    };
    for (i, (b, idx)) in p.stored.iter().enumerate() {
        if p.stored[..i].iter().any(|(c, _)| group(*c) == group(*b)) {
            return None;
        }
        if p.loads.iter().any(|(c, j)| group(*c) == group(*b) && j != idx) {
            return None;
        }
    }
    Some(Plan { width, assume: p.assume.into_iter().collect(), body })
}

/// What the vector forms of loop `f` and of the `vectorized` loops inside it assume: each
/// parameter with the width it must be a multiple of.
pub fn assumptions(func: &Func, f: &For) -> BTreeSet<(VarId, i64)> {
    let mut out = BTreeSet::new();
    let mut add = |l: &For| {
        if let Some(p) = plan(func, l) {
            out.extend(p.assume.iter().map(|&v| (v, p.width)));
        }
    };
    add(f);
    crate::walk_stmts(&f.body, &mut |s| {
        if let StmtKind::For(l) = &s.kind {
            add(l);
        }
    });
    out
}

/// The scalar parameters that make `e` a multiple of `w` when each is one; `None` when that
/// is not proven (see the module documentation).
pub fn multiple_of(func: &Func, e: &Expr, w: i64) -> Option<BTreeSet<VarId>> {
    let none = BTreeSet::new;
    match e {
        Expr::Int(c, _) => (c % w == 0).then(none),
        Expr::Var(v) => is_scalar_param(func, *v).then(|| BTreeSet::from([*v])),
        Expr::Binary(BinOp::Add | BinOp::Sub, a, b) => {
            let mut s = multiple_of(func, a, w)?;
            s.extend(multiple_of(func, b, w)?);
            Some(s)
        }
        Expr::Binary(BinOp::Mul, a, b) => {
            let (x, y) = (multiple_of(func, a, w), multiple_of(func, b, w));
            match (x, y) {
                // A literal multiple needs nothing; otherwise the right factor (flat
                // indices are `row * stride`, and the stride is what other terms share).
                (Some(x), Some(y)) => Some(if x.is_empty() { x } else { y }),
                (x, y) => x.or(y),
            }
        }
        // Widths are powers of two: a multiple stays one through any integer conversion.
        Expr::Cast(d, a) if d.is_int() && func.expr_dtype(a).is_int() => multiple_of(func, a, w),
        _ => None,
    }
}

fn is_scalar_param(func: &Func, v: VarId) -> bool {
    func.params.iter().any(|p| p.kind == ParamKind::Scalar(v))
}

struct Planner<'a> {
    func: &'a Func,
    /// The loop variable.
    k: VarId,
    /// Its first value.
    min: Expr,
    width: i64,
    /// Block iterators in scope and their bindings.
    bind: HashMap<VarId, Expr>,
    assume: BTreeSet<VarId>,
    /// Stores: buffer and index (bindings substituted).
    stored: Vec<(BufferId, Expr)>,
    /// Every load anywhere: buffer and index (bindings substituted).
    loads: Vec<(BufferId, Expr)>,
}

impl<'f> Planner<'_> {
    fn stmts(&mut self, list: &'f [Stmt]) -> Option<Vec<VStmt<'f>>> {
        list.iter().map(|s| self.stmt(s)).collect()
    }

    fn stmt(&mut self, s: &'f Stmt) -> Option<VStmt<'f>> {
        match &s.kind {
            StmtKind::If { cond, then_body, else_body } if else_body.is_empty() => {
                let (uniform, masks) = self.guard(cond)?;
                let mut then = self.stmts(then_body)?;
                for (first, bound) in masks.into_iter().rev() {
                    then = vec![VStmt::Masked { first, bound, then }];
                }
                Some(match uniform {
                    Some(cond) => VStmt::If { cond, then },
                    None => then.pop().filter(|_| then.is_empty())?,
                })
            }
            StmtKind::Store { .. } => self.store(s).map(VStmt::Store),
            StmtKind::Block(b) if b.init.is_none() && b.attrs.is_empty() => {
                let saved = self.bind.clone();
                for it in &b.iters {
                    self.note_loads(&it.binding);
                    self.bind.insert(it.var, it.binding.clone());
                }
                // A body that is one guard the same for every lane around stores (hyb's
                // bucket bound): the guard is tested once, outside the block, in terms of
                // the loops' variables.
                let (guard, body) = match b.body.as_slice() {
                    [Stmt { kind: StmtKind::If { cond, then_body, else_body }, .. }] if else_body.is_empty() && !has_atomic(cond) && !self.depends(cond) => {
                        self.note_loads(cond);
                        (Some(self.subst(cond)), then_body.as_slice())
                    }
                    _ => (None, b.body.as_slice()),
                };
                let stores = body.iter().map(|s| self.store(s)).collect::<Option<Vec<_>>>();
                self.bind = saved;
                let block = VStmt::Block { block: b, stores: stores? };
                Some(match guard {
                    Some(cond) => VStmt::If { cond, then: vec![block] },
                    None => block,
                })
            }
            _ => None,
        }
    }

    fn store(&mut self, s: &Stmt) -> Option<VStore> {
        let StmtKind::Store { buffer, indices, value } = &s.kind else { return None };
        let dt = self.func.buffers.try_get(*buffer)?.dtype;
        if !matches!(dt, DType::F32 | DType::F64) || self.func.expr_dtype(value) != dt {
            return None;
        }
        let at = self.access(*buffer, indices)?;
        let value = self.vexpr(value)?;
        self.stored.push((*buffer, self.subst(&at.index)));
        Some(VStore { at, value })
    }

    /// `e` with the block iterators replaced by their bindings.
    fn subst(&self, e: &Expr) -> Expr {
        e.clone().substitute(&self.bind)
    }

    fn depends(&self, e: &Expr) -> bool {
        self.subst(e).uses_var(self.k)
    }

    /// Records every load in `e`.
    fn note_loads(&mut self, e: &Expr) {
        let mut found = Vec::new();
        e.walk(&mut |x| {
            if let Expr::Load(b, idx) = x {
                found.push((*b, idx.clone()));
            }
        });
        for (b, idx) in found {
            let idx = match idx.as_slice() {
                [i] => self.subst(i),
                // Several indices: never equal to a vector store's one.
                _ => Expr::Bool(false),
            };
            self.loads.push((b, idx));
        }
    }

    /// The first lane's value of `e` (bindings substituted), and whether `e` is `base + k`.
    fn unit_stride(&self, e: &Expr) -> Option<Expr> {
        let e = self.subst(e);
        self.func.steps_by_one(&e, self.k).then(|| e.substitute(&HashMap::from([(self.k, self.min.clone())])))
    }

    fn access(&mut self, buffer: BufferId, indices: &[Expr]) -> Option<Access> {
        let [index] = indices else { return None };
        if has_atomic(index) {
            return None;
        }
        self.note_loads(index);
        let first = self.unit_stride(index)?;
        let aligned = match multiple_of(self.func, &first, self.width) {
            Some(s) => {
                self.assume.extend(s);
                true
            }
            None => false,
        };
        Some(Access { buffer, index: index.clone(), aligned, first })
    }

    /// A guard as a condition for all lanes or none (conjoined; `None` when there is none)
    /// and the masks `(first, bound)` of the lanes where it holds (see [`VStmt::Masked`]).
    #[allow(clippy::type_complexity)]
    fn guard(&mut self, cond: &Expr) -> Option<(Option<Expr>, Vec<(Expr, Expr)>)> {
        if has_atomic(cond) {
            return None;
        }
        self.note_loads(cond);
        if !self.depends(cond) {
            return Some((Some(cond.clone()), Vec::new()));
        }
        match cond {
            Expr::Binary(BinOp::And, a, b) => {
                let (ua, mut ma) = self.guard(a)?;
                let (ub, mb) = self.guard(b)?;
                ma.extend(mb);
                let uniform = match (ua, ub) {
                    (Some(x), Some(y)) => Some(Expr::binary(BinOp::And, x, y)),
                    (x, y) => x.or(y),
                };
                Some((uniform, ma))
            }
            Expr::Binary(BinOp::Lt, lhs, bound) if !self.depends(bound) => {
                let first = self.unit_stride(lhs)?;
                let multiples = multiple_of(self.func, &first, self.width)
                    .zip(multiple_of(self.func, bound, self.width))
                    .map(|(mut a, b)| {
                        a.extend(b);
                        a
                    });
                match multiples {
                    Some(need) => {
                        self.assume.extend(need);
                        Some((Some(Expr::binary(BinOp::Lt, first, (**bound).clone())), Vec::new()))
                    }
                    None => Some((None, vec![(first, (**bound).clone())])),
                }
            }
            _ => None,
        }
    }

    fn vexpr(&mut self, e: &Expr) -> Option<VExpr> {
        if has_atomic(e) {
            return None;
        }
        if !self.depends(e) {
            self.note_loads(e);
            return Some(VExpr::Splat(e.clone()));
        }
        if !self.func.expr_dtype(e).is_float() {
            return None;
        }
        let mut sub = |x: &Expr| self.vexpr(x).map(Box::new);
        Some(match e {
            Expr::Load(b, idx) => match self.access(*b, idx) {
                Some(at) => {
                    self.loads.push((*b, self.subst(&at.index)));
                    VExpr::Load(at)
                }
                None => {
                    let [i] = idx.as_slice() else { return None };
                    let index = self.vindex(i)?;
                    // Any lane may read any element: no store of the loop may write it.
                    self.loads.push((*b, Expr::Bool(false)));
                    VExpr::Gather { buffer: *b, index: Box::new(index) }
                }
            },
            Expr::Binary(op @ (BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div), a, b) => {
                let a = sub(a)?;
                VExpr::Binary(*op, a, sub(b)?)
            }
            Expr::Unary(UnOp::Neg, a) => VExpr::Neg(sub(a)?),
            Expr::Call(Intrinsic::Fma, args) => match args.as_slice() {
                [a, b, c] => {
                    let (a, b) = (sub(a)?, sub(b)?);
                    VExpr::Fma(a, b, sub(c)?)
                }
                _ => return None,
            },
            _ => return None,
        })
    }
}

impl Planner<'_> {
    /// A gather's lane-wise integer index: unit-stride integer loads, lane-independent
    /// values, `+ - *` and integer conversions, with at least one load that depends on `k`.
    fn vindex(&mut self, e: &Expr) -> Option<VExpr> {
        if has_atomic(e) || !self.func.expr_dtype(e).is_int() {
            return None;
        }
        self.note_loads(e);
        let v = self.vint(e)?;
        fn indirect(v: &VExpr) -> bool {
            match v {
                VExpr::Load(_) => true,
                VExpr::Binary(_, a, b) => indirect(a) || indirect(b),
                VExpr::Cast(_, a) => indirect(a),
                _ => false,
            }
        }
        indirect(&v).then_some(v)
    }

    fn vint(&mut self, e: &Expr) -> Option<VExpr> {
        if !self.depends(e) {
            return Some(VExpr::Splat(e.clone()));
        }
        if !self.func.expr_dtype(e).is_int() {
            return None;
        }
        Some(match e {
            Expr::Load(b, idx) => {
                let [i] = idx.as_slice() else { return None };
                let first = self.unit_stride(i)?;
                let aligned = multiple_of(self.func, &first, self.width).is_some_and(|s| s.is_empty());
                VExpr::Load(Access { buffer: *b, index: i.clone(), aligned, first })
            }
            Expr::Binary(op @ (BinOp::Add | BinOp::Sub | BinOp::Mul), a, b) => {
                let a = self.vint(a)?;
                VExpr::Binary(*op, Box::new(a), Box::new(self.vint(b)?))
            }
            Expr::Cast(d, a) if d.is_int() && self.func.expr_dtype(a).is_int() => {
                VExpr::Cast(*d, Box::new(self.vint(a)?))
            }
            _ => return None,
        })
    }
}

/// Whether `e` contains an atomic (never part of a vector form).
fn has_atomic(e: &Expr) -> bool {
    let mut found = false;
    e.walk(&mut |x| found |= matches!(x, Expr::AtomicAdd(..)));
    found
}
