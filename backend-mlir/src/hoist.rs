//! Loop-invariant loads, found on the IR where aliasing is known: distinct parameters are
//! distinct arrays, so a load from storage that the loop never writes, at an index that does
//! not change in the loop, can be read once before the loop. LLVM cannot see this through
//! memref descriptors, and without it keeps reloading row pointers and values in inner loops
//! (and does not vectorise them).
//!
//! Only loads that every iteration executes are hoisted (not under `if`, `while`, nested
//! loops, `init`s or the right side of a short-circuit `&&`/`||`); the translator emits them
//! under a trip-count check, so a load runs only when the original would have.

use sparsec_ir::{BinOp, BufferId, Expr, For, Func, Stmt, StmtKind, Storage, VarId};
use std::collections::{HashMap, HashSet};

/// Where a buffer's elements live: its parameter, or the buffer itself for allocations.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Home {
    Param(usize),
    Own(usize),
}

fn home(func: &Func, b: BufferId) -> Home {
    match func.buffers.try_get(b).map(|x| x.storage) {
        Some(Storage::Param(p)) => Home::Param(p),
        _ => Home::Own(b.index()),
    }
}

/// A hoistable load: the expression as written in the loop (the cache key) and the same
/// load with loop-local names replaced by their definitions (what is emitted before the loop).
pub(crate) struct Hoisted {
    pub key: Expr,
    pub outside: Expr,
}

struct Scan<'f> {
    func: &'f Func,
    written: HashSet<Home>,
    variant: HashSet<VarId>,
    subst: HashMap<VarId, Expr>,
    out: Vec<Hoisted>,
}

/// The loads of `f`'s body that can be read once before the loop.
pub(crate) fn invariant_loads(func: &Func, f: &For) -> Vec<Hoisted> {
    let mut written = HashSet::new();
    sparsec_ir::walk_stmts(&f.body, &mut |s| {
        match &s.kind {
            StmtKind::Store { buffer, .. } => {
                written.insert(home(func, *buffer));
            }
            StmtKind::Alloc(b) => {
                written.insert(home(func, *b));
            }
            _ => {}
        }
        for e in s.kind.exprs() {
            e.walk(&mut |x| {
                if let Expr::AtomicAdd(b, _, _) = x {
                    written.insert(home(func, *b));
                }
            });
        }
    });
    let mut scan = Scan { func, written, variant: HashSet::from([f.var]), subst: HashMap::new(), out: Vec::new() };
    scan.list(&f.body);
    scan.out
}

impl Scan<'_> {
    fn invariant(&self, e: &Expr) -> bool {
        let mut ok = true;
        e.walk(&mut |x| match x {
            Expr::Var(v) => ok &= !self.variant.contains(v),
            Expr::Load(b, _) => ok &= !self.written.contains(&home(self.func, *b)),
            Expr::AtomicAdd(..) => ok = false,
            _ => {}
        });
        ok
    }

    fn outside(&self, e: &Expr) -> Expr {
        e.clone().map(&mut |x| match x {
            Expr::Var(v) => self.subst.get(&v).cloned().unwrap_or(Expr::Var(v)),
            x => x,
        })
    }

    fn bind(&mut self, v: VarId, value: &Expr) {
        if self.invariant(value) {
            let o = self.outside(value);
            self.subst.insert(v, o);
        } else {
            self.variant.insert(v);
        }
    }

    fn expr(&mut self, e: &Expr) {
        match e {
            Expr::Load(..) if self.invariant(e) => {
                if !self.out.iter().any(|h| &h.key == e) {
                    let outside = self.outside(e);
                    self.out.push(Hoisted { key: e.clone(), outside });
                }
            }
            // The right side of a short-circuit runs conditionally.
            Expr::Binary(BinOp::And | BinOp::Or, a, _) => self.expr(a),
            e => {
                for c in e.children() {
                    self.expr(c);
                }
            }
        }
    }

    fn list(&mut self, list: &[Stmt]) {
        for s in list {
            match &s.kind {
                StmtKind::Store { indices, value, .. } => {
                    for i in indices {
                        self.expr(i);
                    }
                    self.expr(value);
                }
                StmtKind::Let { var, value } => {
                    self.expr(value);
                    self.bind(*var, value);
                }
                StmtKind::Evaluate(e) => self.expr(e),
                StmtKind::Block(b) => {
                    for it in &b.iters {
                        self.expr(&it.binding);
                        self.bind(it.var, &it.binding);
                    }
                    self.list(&b.body);
                }
                // Conditional or repeated code, and allocations: not scanned.
                StmtKind::For(_) | StmtKind::If { .. } | StmtKind::While { .. } | StmtKind::Alloc(_) | StmtKind::SpIter(_) => {}
            }
        }
    }
}
