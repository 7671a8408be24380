//! Lookups: explicit lower-bound loops over `indices` (coordinate lookups) and over `indptr`
//! (recovering the row of a fused position), and reads of position maps.

use super::Lowerer;
use crate::build::{add, bin, int, stmt, store};
use sparsec_ir::expr::{BinOp, Expr};
use sparsec_ir::func::{Buffer, Layout, Stmt, StmtKind, Storage};
use sparsec_ir::{DType, Scope, Span};

/// Code that finds a position, the position, and (for lookups) whether it holds the target.
pub struct Search {
    /// Statements to run first.
    pub stmts: Vec<Stmt>,
    /// The position found (`low[0]`).
    pub pos: Expr,
    /// Whether the coordinate is stored (lookups only).
    pub found: Option<Expr>,
}

impl Lowerer<'_> {
    pub(super) fn local_scalar(&mut self, base: &str, dtype: DType) -> (sparsec_ir::BufferId, Stmt) {
        self.alloc(base, dtype, Expr::i32(1), Scope::Local)
    }

    /// A flat buffer of `len` elements in `scope`, named after `base`, and its allocation.
    pub(super) fn alloc(&mut self, base: &str, dtype: DType, len: Expr, scope: Scope) -> (sparsec_ir::BufferId, Stmt) {
        let b = self.out.buffers.append(Buffer {
            name: self.namer.global(base),
            dtype,
            layout: Layout::Dense(vec![len]),
            storage: Storage::Alloc(scope),
            extra_storage: None,
            default: None,
            modes: None,
            span: Span::NONE,
        });
        (b, stmt(StmtKind::Alloc(b)))
    }

    /// Binds `value` to a fresh `let` unless it is already a variable or literal.
    pub(super) fn bind(&mut self, base: &str, value: Expr, out: &mut Vec<Stmt>) -> Expr {
        if matches!(value, Expr::Var(_) | Expr::Int(..)) {
            return value;
        }
        let d = self.out.expr_dtype(&value);
        let v = self.out.add_var(self.namer.var(base), d);
        out.push(stmt(StmtKind::Let { var: v, value }));
        Expr::Var(v)
    }

    /// First `p` in `0..len` with `!(probe(p) cmp target)`, where `cmp` is `<` (lower bound)
    /// or `<=` (upper bound).
    pub(super) fn bound_search(
        &mut self,
        label: &str,
        len: Expr,
        target: Expr,
        cmp: BinOp,
        probe: &dyn Fn(&sparsec_ir::Func, Expr) -> Expr,
    ) -> Search {
        let dtype = self.out.expr_dtype(&len);
        let (low, a1) = self.local_scalar(&format!("{label}_low"), dtype);
        let (high, a2) = self.local_scalar(&format!("{label}_high"), dtype);
        let at = |b| Expr::Load(b, vec![Expr::i32(0)]);
        self.namer.push();
        let mid = self.out.add_var(self.namer.var(&format!("{label}_mid")), dtype);
        self.namer.pop();
        let f = &self.out;
        let right = bin(f, cmp, probe(f, Expr::Var(mid)), target);
        let mut stmts = vec![a1, a2];
        stmts.extend(crate::build::lower_bound(f, low, high, mid, len, right));
        Search { stmts, pos: at(low), found: None }
    }

    /// Looks up coordinate `target` among `probe(0..len)` through position map `map` of an
    /// axis of `length` coordinates, filled for this row (`Lowerer::map_fill`): the position
    /// is the map's element for `target`, and `found` checks it exactly (an element may hold
    /// another row's position), so one load replaces a search.
    pub(super) fn map_lookup(
        &mut self,
        label: &str,
        map: sparsec_ir::BufferId,
        len: Expr,
        target: Expr,
        length: Expr,
        probe: &dyn Fn(&sparsec_ir::Func, Expr) -> Expr,
    ) -> Search {
        let mut stmts = Vec::new();
        let len = self.bind(&format!("{label}_len"), len, &mut stmts);
        let target = self.bind(&format!("{label}_coord"), target, &mut stmts);
        let f = &self.out;
        let length = crate::build::cast_to(f, length, f.expr_dtype(&target));
        let dtype = f.expr_dtype(&target);
        // A coordinate outside the axis reads the map's extra element, and is not found.
        let slot = Expr::binary(BinOp::Max, Expr::binary(BinOp::Min, target.clone(), length.clone()), int(0, dtype));
        let at = self.bind(&format!("{label}_at"), Expr::Load(map, vec![slot]), &mut stmts);
        let f = &self.out;
        let at = crate::build::cast_to(f, at, f.expr_dtype(&len));
        let inside = Expr::binary(
            BinOp::And,
            bin(f, BinOp::Ge, target.clone(), int(0, dtype)),
            Expr::binary(BinOp::Lt, target.clone(), length),
        );
        let stored = holds(f, &at, len, target, probe);
        Search { stmts, pos: at, found: Some(Expr::binary(BinOp::And, inside, stored)) }
    }

    /// Looks up coordinate `target` among `probe(0..len)`: a binary search when the row is
    /// sorted, a linear scan otherwise. `found` checks the result exactly.
    pub(super) fn lookup(
        &mut self,
        label: &str,
        len: Expr,
        target: Expr,
        sorted: bool,
        probe: &dyn Fn(&sparsec_ir::Func, Expr) -> Expr,
    ) -> Search {
        let mut pre = Vec::new();
        let len = self.bind(&format!("{label}_len"), len, &mut pre);
        let target = self.bind(&format!("{label}_coord"), target, &mut pre);
        let mut s = if sorted {
            self.bound_search(label, len.clone(), target.clone(), BinOp::Lt, probe)
        } else {
            let dtype = self.out.expr_dtype(&len);
            let (low, a1) = self.local_scalar(&format!("{label}_pos"), dtype);
            let at = Expr::Load(low, vec![Expr::i32(0)]);
            let f = &self.out;
            let more = Expr::binary(
                BinOp::And,
                Expr::binary(BinOp::Lt, at.clone(), len.clone()),
                bin(f, BinOp::Ne, probe(f, at.clone()), target.clone()),
            );
            let scan = stmt(StmtKind::While {
                cond: more,
                body: vec![store(low, vec![Expr::i32(0)], add(f, at.clone(), int(1, dtype)))],
            });
            Search { stmts: vec![a1, store(low, vec![Expr::i32(0)], int(0, dtype)), scan], pos: at, found: None }
        };
        s.found = Some(holds(&self.out, &s.pos, len, target, probe));
        pre.append(&mut s.stmts);
        s.stmts = pre;
        s
    }
}

/// Whether position `pos` of a row of `len` coordinates (`probe`) holds `target`: the exact
/// check of a lookup's result (`pos < len` first, so the row is read only inside it).
fn holds(f: &sparsec_ir::Func, pos: &Expr, len: Expr, target: Expr, probe: &dyn Fn(&sparsec_ir::Func, Expr) -> Expr) -> Expr {
    Expr::binary(
        BinOp::And,
        Expr::binary(BinOp::Lt, pos.clone(), len),
        bin(f, BinOp::Eq, probe(f, pos.clone()), target),
    )
}
