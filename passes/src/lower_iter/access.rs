//! Accesses: Stage-I coordinates become Stage-II positions, and guards.
//!
//! For each dimension of a sparse buffer: the iterator over that very axis (in the same row)
//! gives its position directly; a dense axis takes the coordinate as position; a sparse axis
//! looks the coordinate up in its row with a binary search; a dense-variable axis takes the
//! coordinate when it lies in its row (`0..len`). A read of a coordinate that is not stored
//! yields the buffer's default; a store to one is guarded away.

use super::Lowerer;
use crate::build::{add, bin, int, stmt, store, sub, zero};
use crate::PassError;
use sparsec_ir::expr::{BinOp, Expr};
use sparsec_ir::func::{AxisId, BufferId, Layout, Stmt, StmtKind};
use sparsec_ir::AxisKind;


impl Lowerer<'_> {
    /// Number of stored positions in the row of axis `a` picked by `row` (the positions of its
    /// ancestors, or the coordinate of an attach target).
    pub(super) fn row_len(&mut self, a: AxisId, row: &[Expr]) -> Expr {
        let axis = self.out.axes[a].clone();
        match axis.kind {
            AxisKind::DenseFixed => axis.length,
            AxisKind::SparseFixed => axis.nnz.unwrap_or(Expr::i32(0)),
            AxisKind::DenseVariable | AxisKind::SparseVariable => {
                let ip = self.indptr_buffer(a);
                let mut next = row.to_vec();
                let last = next.pop().unwrap_or(Expr::i32(0));
                next.push(add(&self.out, last, int(1, axis.idtype)));
                sub(&self.out, Expr::Load(ip, next), Expr::Load(ip, row.to_vec()))
            }
        }
    }

    /// Number of ancestors of `a`.
    fn depth(&self, a: AxisId) -> usize {
        let mut d = 0;
        let mut cur = self.out.axes[a].parent;
        while let Some(p) = cur {
            d += 1;
            cur = self.out.axes[p].parent;
        }
        d
    }

    /// Translates the indices of an access. Returns the positions and, when coordinates had to
    /// be looked up, the condition under which all of them are stored.
    pub(super) fn access(
        &mut self,
        b: BufferId,
        idx: &[Expr],
        pre: &mut Vec<Stmt>,
    ) -> Result<(Vec<Expr>, Option<Expr>), PassError> {
        let Layout::Sparse(axes) = self.out.buffers[b].layout.clone() else {
            let pos = idx.iter().map(|e| self.expr(e, pre)).collect::<Result<_, _>>()?;
            return Ok((pos, None));
        };
        let mut pos: Vec<Expr> = Vec::with_capacity(axes.len());
        let mut found: Option<Expr> = None;
        for (d, (&a, e)) in axes.iter().zip(idx).enumerate() {
            // A co-iteration's cursor over this axis: its position where it stands at the
            // coordinate, absent otherwise.
            let mut cursor = None;
            if let Expr::Var(v) = e {
                if let Some(it) = self.iter_of(*v) {
                    let in_row = match it.row_src {
                        None => true,
                        Some(src) => d > 0 && idx[d - 1] == Expr::Var(src),
                    };
                    if it.axis == a && in_row && it.merged.is_empty() {
                        pos.push(it.pos.clone());
                        continue;
                    }
                    if in_row {
                        cursor = it.merged.iter().find(|m| m.0 == a).map(|m| (m.1.clone(), m.2.clone()));
                    }
                }
            }
            let axis = self.out.axes[a].clone();
            if let Some((p, present)) = cursor {
                pos.push(p);
                if present == Expr::Bool(true) {
                    continue;
                }
                found = Some(match found {
                    None => present,
                    Some(prev) => Expr::binary(BinOp::And, prev, present),
                });
                continue;
            }
            let coord = self.expr(e, pre)?;
            if axis.kind == AxisKind::DenseFixed {
                pos.push(coord);
                continue;
            }
            let depth = self.depth(a);
            let row: Vec<Expr> = pos[d - depth..d].to_vec();
            // After a lookup that may fail, this level's row may not exist: its reads run
            // only where every earlier coordinate was found, and record the result in a flag.
            let guard = found.clone().filter(|_| depth > 0);
            let mut body = Vec::new();
            let cond = if axis.kind == AxisKind::DenseVariable {
                // Row coordinates are `0..len`; the coordinate is the position.
                let coord = self.bind(&format!("{}_coord", axis.name), coord, pre);
                let len = self.row_len(a, &row);
                let len = self.bind(&format!("{}_len", axis.name), len, &mut body);
                let dtype = self.out.expr_dtype(&coord);
                let f = &self.out;
                let lo = bin(f, BinOp::Ge, coord.clone(), int(0, dtype));
                pos.push(coord.clone());
                Expr::binary(BinOp::And, lo, bin(f, BinOp::Lt, coord, len))
            } else {
                // Within a store, a coordinate looked up twice (the read and the write of
                // `C[i, k] = C[i, k] + ..`) is searched once.
                let key = (a, row.clone(), coord.clone());
                let cached = self.lookups.as_ref().filter(|_| guard.is_none()).and_then(|c| c.iter().find(|(k, _)| *k == key)).map(|(_, v)| v.clone());
                if let Some((p, cond)) = cached {
                    pos.push(p);
                    cond
                } else {
                    let len = self.row_len(a, &row);
                    let indices = self.indices_buffer(a);
                    let map = self.maps.iter().rev().find(|m| m.axis == a && m.row == row).map(|m| m.buffer);
                    let probe = move |_: &sparsec_ir::Func, p: Expr| {
                        let mut i = row.clone();
                        i.push(p);
                        Expr::Load(indices, i)
                    };
                    let s = match map {
                        Some(map) => self.map_lookup(&axis.name, map, len, coord, axis.length.clone(), &probe),
                        None => self.lookup(&axis.name, len, coord, axis.sorted, &probe),
                    };
                    body.extend(s.stmts);
                    pos.push(s.pos.clone());
                    let cond = s.found.expect("lookups report found");
                    if let (Some(c), None) = (self.lookups.as_mut(), &guard) {
                        c.push((key, (s.pos, cond.clone())));
                    }
                    cond
                }
            };
            found = Some(match (found, guard) {
                (None, _) => {
                    pre.extend(body);
                    cond
                }
                (Some(prev), None) => {
                    pre.extend(body);
                    Expr::binary(BinOp::And, prev, cond)
                }
                (Some(_), Some(guard)) => {
                    // The search's local buffers live outside the guard: its position is read there.
                    let (allocs, rest): (Vec<Stmt>, Vec<Stmt>) = body.into_iter().partition(|s| matches!(s.kind, StmtKind::Alloc(_)));
                    pre.extend(allocs);
                    let (flag, alloc) = self.local_scalar(&format!("{}_found", axis.name), sparsec_ir::DType::I32);
                    let at = vec![Expr::i32(0)];
                    pre.push(alloc);
                    pre.push(store(flag, at.clone(), Expr::i32(0)));
                    let mut then_body = rest;
                    let one = Expr::Select(Box::new(cond), Box::new(Expr::i32(1)), Box::new(Expr::i32(0)));
                    then_body.push(store(flag, at.clone(), one));
                    pre.push(stmt(StmtKind::If { cond: guard, then_body, else_body: vec![] }));
                    Expr::binary(BinOp::Eq, Expr::Load(flag, at), Expr::i32(1))
                }
            });
        }
        Ok((pos, found))
    }

    /// Translates an expression: iterators become coordinates, loads go to position space.
    pub(super) fn expr(&mut self, e: &Expr, pre: &mut Vec<Stmt>) -> Result<Expr, PassError> {
        Ok(match e {
            Expr::Int(..) | Expr::Float(..) | Expr::Bool(_) => e.clone(),
            Expr::Var(v) => {
                if let Some(it) = self.iter_of(*v) {
                    it.coord.clone()
                } else if let Some(nv) = self.var_map.get(v) {
                    Expr::Var(*nv)
                } else {
                    let name = self.src.vars.try_get(*v).map_or("?", |x| x.name.as_str());
                    return Err(PassError::Internal(format!("variable `{name}` has no value at Stage II")));
                }
            }
            Expr::Binary(op, a, b) => Expr::binary(*op, self.expr(a, pre)?, self.expr(b, pre)?),
            Expr::Unary(op, a) => Expr::Unary(*op, Box::new(self.expr(a, pre)?)),
            Expr::Cast(d, a) => Expr::Cast(*d, Box::new(self.expr(a, pre)?)),
            Expr::Select(c, a, b) => Expr::Select(
                Box::new(self.expr(c, pre)?),
                Box::new(self.expr(a, pre)?),
                Box::new(self.expr(b, pre)?),
            ),
            Expr::Call(i, args) => {
                Expr::Call(*i, args.iter().map(|a| self.expr(a, pre)).collect::<Result<_, _>>()?)
            }
            Expr::Load(b, idx) => {
                let (pos, found) = self.access(*b, idx, pre)?;
                match found {
                    None => Expr::Load(*b, pos),
                    Some(cond) => {
                        let buf = self.out.buffers[*b].clone();
                        let default = buf.default.clone().unwrap_or_else(|| zero(buf.dtype));
                        let (val, alloc) = self.local_scalar(&format!("{}_val", buf.name), buf.dtype);
                        let at = vec![Expr::i32(0)];
                        pre.push(alloc);
                        pre.push(store(val, at.clone(), default));
                        pre.push(stmt(StmtKind::If {
                            cond,
                            then_body: vec![store(val, at.clone(), Expr::Load(*b, pos))],
                            else_body: vec![],
                        }));
                        Expr::Load(val, at)
                    }
                }
            }
            Expr::AtomicAdd(b, idx, v) => {
                let v = self.expr(v, pre)?;
                let (pos, found) = self.access(*b, idx, pre)?;
                if found.is_some() {
                    return Err(PassError::Unsupported {
                        pass: "lower_sparse_iter",
                        what: "atomic_add at a looked-up coordinate".into(),
                    });
                }
                Expr::AtomicAdd(*b, pos, Box::new(v))
            }
        })
    }
}
