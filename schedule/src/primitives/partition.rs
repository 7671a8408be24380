//! `partition` (Stage II/III): runs a parallel loop as chunks of consecutive iterations of
//! about equal weight (rows balanced by their nonzeros).

use super::Primitive;
use crate::error::ScheduleError;
use crate::loops::{bin, for_stmt, loop_at};
use crate::schedule::{stale, LoopRv, Schedule, Target};
use crate::tree::Fresh;
use serde::{Deserialize, Serialize};
use sparsec_ir::expr::{BinOp, Expr};
use sparsec_ir::func::{Attrs, Buffer, For, Layout, Stmt, StmtKind, Storage};
use sparsec_ir::{DType, ForKind, Scope, Span};
use sparsec_passes::build::int;
use sparsec_passes::simplify::simplify_expr;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::partition`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Partition {
    /// The parallel loop.
    pub r#loop: LoopRv,
    /// Most chunks.
    pub parts: i64,
    /// The prefix sums of the iterations' weights (a row pointer).
    pub weights: String,
    /// Least weight of a chunk.
    pub grain: i64,
}

impl Primitive for Partition {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.r#loop.0]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        Ok(vec![s.partition(self.r#loop, self.parts, &self.weights, self.grain)?.id()])
    }
}

impl Schedule {
    /// Runs the `parallel` loop `lp` (`for i in parallel(E, start = s)`) as chunks of
    /// consecutive iterations: iteration `i` weighs `W[i + 1] - W[i]`, where `W` is the
    /// one-dimensional integer buffer `weights` (a row pointer: rows weigh their nonzeros).
    /// A serial loop first finds the chunk boundaries by binary search in `W`, so that each
    /// chunk holds about `total / chunks` weight, where `chunks` is the largest power of two
    /// `c <= parts` with `c * grain <= total`, or 1 (a light loop runs as one chunk, on the
    /// calling thread; a power of two, so that a static schedule gives each of a team of `2^k`
    /// threads as many chunks); then a parallel loop
    /// over the chunks runs each chunk's iterations serially, with the loop's own variable.
    /// Each boundary is clamped between the one before it and `s + E`, the first is `s` and
    /// the last `s + E`, whatever `W` holds: the chunks are disjoint and cover the loop's
    /// iterations exactly, so they stay independent as the loop's were. Returns the chunk
    /// loop.
    pub fn partition(&mut self, lp: LoopRv, parts: i64, weights: &str, grain: i64) -> Result<LoopRv> {
        const P: &str = "partition";
        self.need_loop_stage(P)?;
        for f in [parts, grain] {
            if f < 1 {
                return Err(ScheduleError::NonPositiveFactor { factor: f });
            }
        }
        let mut g = self.func.clone();
        let (path, _) = self.loop_path(&g, lp.0)?;
        let l = loop_at(&g, &path, lp.0)?.clone();
        let name = Self::var_name(&g, l.var);
        if l.kind != ForKind::Parallel {
            return Err(ScheduleError::NotParallel { loop_var: name });
        }
        let (w, wd) = match g.buffers.iter().find(|(_, b)| b.name == weights) {
            Some((id, b)) if b.dtype.is_int() && matches!(&b.layout, Layout::Dense(x) if x.len() == 1) => (id, b.dtype),
            Some((id, b)) if b.dtype.is_int() && matches!(&b.layout, Layout::Sparse(x) if x.len() == 1) => (id, b.dtype),
            Some(_) => return Err(ScheduleError::NotWeights { buffer: weights.to_string() }),
            None => return Err(ScheduleError::UnknownBuffer { name: weights.to_string() }),
        };
        let d = g.vars[l.var].dtype;
        let mut fresh = Fresh::at(&g, &path);
        let mut taken: std::collections::HashSet<String> = sparsec_ir::names::function_names(&g).into_iter().collect();
        let mut buffer = |g: &mut sparsec_ir::Func, base: &str, n: i64, scope: Scope| {
            g.buffers.append(Buffer {
                name: sparsec_ir::names::fresh_in(&mut taken, base),
                dtype: d,
                layout: Layout::Dense(vec![Expr::i32(n)]),
                storage: Storage::Alloc(scope),
                extra_storage: None,
                default: None,
                modes: None,
                span: Span::NONE,
            })
        };
        let bounds = buffer(&mut g, &format!("{name}_bounds"), parts + 1, Scope::Global);
        let (low, high) = (buffer(&mut g, &format!("{name}_low"), 1, Scope::Local), buffer(&mut g, &format!("{name}_high"), 1, Scope::Local));
        let total = g.add_var(fresh.name(&format!("{name}_total")), DType::I64);
        let chunks = g.add_var(fresh.name(&format!("{name}_chunks")), d);
        let c = g.add_var(fresh.name(&format!("{name}_c")), d);
        let mid = g.add_var(fresh.name(&format!("{name}_mid")), d);
        let p = g.add_var(fresh.name(&format!("{name}_p")), d);
        let wide = |e: Expr| if wd == DType::I64 { e } else { Expr::Cast(DType::I64, Box::new(e)) };
        let at_w = |e: Expr| wide(Expr::Load(w, vec![simplify_expr(e)]));
        let (start, extent) = (l.min.clone(), l.extent.clone());
        let end = simplify_expr(bin(BinOp::Add, start.clone(), extent.clone()));
        let one = |b| Expr::Load(b, vec![Expr::i32(0)]);
        let st = |b, i: Expr, v: Expr| Stmt::new(StmtKind::Store { buffer: b, indices: vec![i], value: v });
        let first = at_w(start.clone());
        // total = W[s + E] - W[s]; chunks = the largest power of two c <= parts with
        // c * grain <= total, else 1.
        let total_v = bin(BinOp::Sub, at_w(end.clone()), first.clone());
        let mut chunks_v = int(1, DType::I64);
        let mut c2 = 2i64;
        while c2 <= parts && c2.checked_mul(grain).is_some() {
            let enough = bin(BinOp::Ge, Expr::Var(total), int(c2 * grain, DType::I64));
            chunks_v = Expr::Select(Box::new(enough), Box::new(int(c2, DType::I64)), Box::new(chunks_v));
            c2 *= 2;
        }
        let chunks_v = if d == DType::I64 { chunks_v } else { Expr::Cast(d, Box::new(chunks_v)) };
        // Boundary c + 1: the first r in [0, E] with W[s + r] - W[s] >= (c + 1) * total // chunks.
        let target = bin(
            BinOp::FloorDiv,
            bin(BinOp::Mul, wide(bin(BinOp::Add, Expr::Var(c), int(1, d))), Expr::Var(total)),
            wide(Expr::Var(chunks)),
        );
        let probe = bin(BinOp::Sub, at_w(bin(BinOp::Add, start.clone(), Expr::Var(mid))), first.clone());
        let mut search = vec![Stmt::new(StmtKind::Alloc(low)), Stmt::new(StmtKind::Alloc(high))];
        search.extend(sparsec_passes::build::lower_bound(&g, low, high, mid, extent.clone(), bin(BinOp::Lt, probe, target)));
        // Clamped between the boundary before and the end, whatever `W` holds.
        let clamped = bin(BinOp::Max, Expr::Load(bounds, vec![Expr::Var(c)]), bin(BinOp::Add, start.clone(), one(low)));
        search.push(st(bounds, bin(BinOp::Add, Expr::Var(c), int(1, d)), simplify_expr(bin(BinOp::Min, end.clone(), clamped))));
        let cut = bin(BinOp::Sub, Expr::Var(chunks), int(1, d));
        let at_p = |off: i64| Expr::Load(bounds, vec![simplify_expr(bin(BinOp::Add, Expr::Var(p), int(off, d)))]);
        let inner = For {
            var: l.var,
            min: at_p(0),
            extent: bin(BinOp::Sub, at_p(1), at_p(0)),
            kind: ForKind::Serial,
            body: l.body.clone(),
            attrs: Attrs::new(),
        };
        let chunk_loop = for_stmt(p, int(0, d), Expr::Var(chunks), ForKind::Parallel, vec![Stmt::new(StmtKind::For(inner))], l.attrs.clone());
        let mut before = vec![
            Stmt::new(StmtKind::Alloc(bounds)),
            Stmt::new(StmtKind::Let { var: total, value: simplify_expr(total_v) }),
            Stmt::new(StmtKind::Let { var: chunks, value: simplify_expr(chunks_v) }),
            st(bounds, Expr::i32(0), start.clone()),
            for_stmt(c, int(0, d), simplify_expr(cut), ForKind::Serial, search, Attrs::new()),
            st(bounds, Expr::Var(chunks), end),
        ];
        let idx = path.last().map(|x| x.1).ok_or_else(|| stale(lp.0, "loop"))?;
        let list = crate::reduction::list_mut(&mut g.body, &path).ok_or_else(|| stale(lp.0, "loop"))?;
        let span = list[idx].span;
        let mut chunk_loop = chunk_loop;
        chunk_loop.span = span;
        list[idx] = chunk_loop;
        for (k, s) in before.drain(..).enumerate() {
            list.insert(idx + k, s);
        }
        self.commit(P, g)?;
        let out = self.new_rv(Target::Loop(p));
        // The original loop keeps its variable and its reference.
        self.record(Partition { r#loop: lp, parts, weights: weights.to_string(), grain }, vec![out]);
        Ok(LoopRv(out))
    }
}

