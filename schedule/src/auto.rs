//! Default schedules: what a backend runs when the user gave no schedule of their own.
//!
//! Both work nest by nest on the outermost loops of a Stage II/III function. A nest's
//! outermost loop is *independent* when each first block under it binds the loop variable
//! only to spatial iterators and at least one of them, so iterations write disjoint
//! places (the block iterator kinds are trusted, as in TensorIR). Other nests stay serial.
//!
//! * [`cpu`]: independent outermost loops become `parallel`; an accumulation of one element
//!   per row or per nonzero is kept in a register over it (SpMV's `y[i]`, SDDMM's `C[i, j]`),
//!   and a feature reduction into it sums in one 512-bit vector of partial sums
//!   ([`cpu_registers`]), and a row of at least [`CPU_VECTOR_ROW`] nonzeros whose work per
//!   nonzero is scalar in one vector of [`CPU_ROW_VECTOR_BYTES`] of partial sums, the
//!   nonzeros' operands read as vectors and gathers under a mask (`specialize`,
//!   [`long_row_partial_sums`]), or where that has no vector form a row of at least
//!   [`CPU_LONG_ROW`] in [`CPU_ROW_SUMS`] scalar partial sums; a row nest runs as chunks of
//!   rows balanced by nonzeros (`partition`, [`CPU_CHUNKS`], [`CPU_GRAIN`]) and prefetches
//!   what its nonzero loops gather where the gathered array is large
//!   ([`CPU_PREFETCH_DISTANCE`]); an innermost loop that
//!   drives only spatial iterators becomes `vectorized` (split by a vector first where a
//!   padded format's guard around its block would keep it scalar: [`guarded_feature_width`]).
//! * [`cpu_sparse`] (Stage I, before [`cpu`]): a sparse iteration that writes rows of its
//!   output along a dense spatial iterator with reductions inside it gets that iterator
//!   moved innermost (`sparse_reorder`), so the reductions walk around a vectorised row.
//! * [`gpu`]: independent outermost loops, fused with the independent loops perfectly
//!   nested in them, are split by the thread count and bound to `blockIdx.x` × `threadIdx.x`;
//!   a row nest in SpMM's shape gets rows on the warps of blocks (4 per block) and features
//!   on the lanes of a warp,
//!   accumulating in a register instead (`lanes`); a row nest whose row walks loops around a
//!   loop over a sparse child (SpGEMM's products) gets the row on a block and the child on
//!   the lanes of a warp (`child_lanes`).
//! * [`gpu_sparse`] (Stage I, before [`gpu`]): a sparse iteration whose every store writes
//!   the element of its own spatial point (`C[i, j]` in sddmm), or that only accumulates
//!   (`Y[..] = Y[..] + e`, no `init`), gets its first pair of spatial iterators that form a
//!   parent chain (rows and their nonzeros, a relation and its rows) fused, so one loop
//!   walks all their positions. An accumulating one is also annotated `atomic`: rows of
//!   different parents may share an output element, and [`gpu_full`] lowers the annotated
//!   accumulations to `atomic_add`. An accumulation whose element the child iterator does
//!   not pick (`C[RowIndices[io], k] += ..`: hyb's buckets, row segments) is annotated
//!   without fusing: [`gpu`] then gives it SpMM's lanes, each parent summed in registers
//!   (`cache_accumulate`) and added once per feature.
//!
//! * [`spread_atomic`] (after [`gpu`]): a serial loop that only adds atomically is bound to
//!   `blockIdx.y` (or `blockIdx.x` in an unbound nest), so its iterations spread over cubes.
//! * [`cpu_full`] and [`gpu_full`] end with `contract`: float multiply-adds become `fma`, as
//!   every optimising C and CUDA compiler does by default.
//!
//! Every step goes through the ordinary primitives, so the trace replays the result. These
//! are the only places that decide where a GPU kernel runs in parallel: backends translate
//! the bindings they are given and run an unbound nest in a single unit.

use crate::error::ScheduleError;
use crate::cache::CacheAt;
use crate::schedule::{BlockRv, Schedule};
use crate::tree;
use sparsec_ir::func::{AttrValue, Block, Func, Stmt, StmtKind, VarId, walk_stmts};
use sparsec_ir::{Expr, IterKind, Stage, ThreadTag};

type Result<T> = std::result::Result<T, ScheduleError>;

/// The CPU default's parameters ([`cpu_tuned`]). `Default` gives the measured choices
/// ([`CPU_VECTOR_ROW`], [`CPU_LONG_ROW`], [`CPU_ROW_SUMS`], [`CPU_PREFETCH_DISTANCE`],
/// [`CPU_PREFETCH_MIN_BYTES`]); the fuzzer also runs `vector_row: 1, long_row: 1,
/// prefetch_min_bytes: 0`, which takes every path on small inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuTuning {
    /// Rows of at least this many nonzeros sum in a vector of partial sums where a nonzero's
    /// work is scalar.
    pub vector_row: i64,
    /// Rows of at least this many nonzeros sum in partial sums where a nonzero's work is scalar.
    pub long_row: i64,
    /// How many partial sums such a row has.
    pub row_sums: i64,
    /// Iterations ahead that a nonzero loop prefetches its gathers.
    pub prefetch_distance: i64,
    /// Least size in bytes of a gathered array from which a call prefetches.
    pub prefetch_min_bytes: i64,
    /// Most chunks a row nest runs as ([`CPU_CHUNKS`]).
    pub chunks: i64,
    /// Least nonzeros of a chunk, scalar work and heavier ([`CPU_GRAIN`]).
    pub grain: [i64; 2],
}

impl Default for CpuTuning {
    fn default() -> Self {
        CpuTuning {
            vector_row: CPU_VECTOR_ROW,
            long_row: CPU_LONG_ROW,
            row_sums: CPU_ROW_SUMS,
            prefetch_distance: CPU_PREFETCH_DISTANCE,
            prefetch_min_bytes: CPU_PREFETCH_MIN_BYTES,
            chunks: CPU_CHUNKS,
            grain: CPU_GRAIN,
        }
    }
}

/// Applies the CPU default to a Stage II/III schedule.
pub fn cpu(sch: &mut Schedule) -> Result<()> {
    cpu_tuned(sch, &CpuTuning::default())
}

/// [`cpu`] with the parameters `t`.
pub fn cpu_tuned(sch: &mut Schedule, t: &CpuTuning) -> Result<()> {
    sch.need_loop_stage("auto::cpu")?;
    for nest in nests(sch.func()) {
        if nest.independent {
            let block = sch.get_block(&nest.block)?;
            let outer = sch.get_loops(block)?[0];
            sch.parallel(outer)?;
            // Loops between the row loop and its block repeat each nonzero's work. The rows'
            // weights are read before `cpu_registers`, whose partial sums add loops over a
            // row's nonzeros but no work per nonzero.
            let between = sch.get_loops(block)?.len() > 1;
            let row = sch.loop_var(outer)?;
            let weights = row_weights(sch.func(), &nest.block, row, between);
            cpu_registers(sch, &nest.block, t)?;
            if let Some((weights, heavy)) = weights {
                let grain = t.grain[usize::from(heavy)];
                // Loops the primitive refuses keep one task per block of rows.
                let mut trial = sch.clone();
                if trial.partition(outer, t.chunks, &weights, grain).is_ok() {
                    *sch = trial;
                }
            }
            prefetch_gathers(sch, &nest.block, t)?;
        }
    }
    for (block, var) in vector_candidates(sch.func()) {
        let b = sch.get_block(&block)?;
        let loops = sch.get_loops(b)?;
        if let Some(&last) = loops.last() {
            if sch.loop_var(last)? == var {
                if let Some(width) = guarded_feature_width(sch.func(), &block) {
                    let mut trial = sch.clone();
                    let split = trial.split(last, &[None, Some(width)]).and_then(|parts| trial.vectorize(parts[1]));
                    if split.is_ok() {
                        *sch = trial;
                        continue;
                    }
                }
                // Loops that other rules refuse stay serial.
                let _ = sch.vectorize(last);
            }
        }
    }
    Ok(())
}

/// The GPU default's parameters for SpMM's shape ([`gpu_tuned`], [`lanes`]). `Default`
/// gives the measured choices ([`COARSEN`], [`NONZERO_UNROLL`], [`ROWS_PER_BLOCK`], every
/// feature walk in one warp).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuTuning {
    /// Consecutive features each lane accumulates per walk of a row (one vector).
    pub coarsen: i64,
    /// Nonzeros per trip of a row walk (`unroll_factor`; 1 keeps it rolled).
    pub unroll: i64,
    /// Rows (warps) per block; 1 is also tried where more are refused.
    pub rows_per_block: i64,
    /// Bind the walks of a row (`coarsen * WARP` features each) to `blockIdx.y`, so several
    /// warps share a wide row as GE-SpMM's grid does, instead of one warp walking it once per
    /// `coarsen * WARP` features.
    pub walks_on_blocks: bool,
}

impl Default for GpuTuning {
    fn default() -> Self {
        GpuTuning { coarsen: COARSEN, unroll: NONZERO_UNROLL, rows_per_block: ROWS_PER_BLOCK, walks_on_blocks: false }
    }
}

/// Applies the GPU default to a Stage II/III schedule: `threads` units per block.
pub fn gpu(sch: &mut Schedule, threads: i64) -> Result<()> {
    gpu_tuned(sch, threads, &GpuTuning::default())
}

/// [`gpu`] with the parameters `t`.
pub fn gpu_tuned(sch: &mut Schedule, threads: i64, t: &GpuTuning) -> Result<()> {
    sch.need_loop_stage("auto::gpu")?;
    for factor in [threads, t.coarsen, t.unroll, t.rows_per_block] {
        if factor < 1 {
            return Err(ScheduleError::NonPositiveFactor { factor });
        }
    }
    for nest in nests(sch.func()) {
        spatial_outward(sch, &nest.block)?;
    }
    for nest in nests(sch.func()) {
        if nest.independent || nest.atomic {
            // Rows over blocks and features over the lanes of a warp where the nest allows.
            // Several rows per block where every unit then works on its own row alone;
            // otherwise one row per block.
            let mut done = false;
            for rows in [t.rows_per_block, 1] {
                let mut trial = sch.clone();
                if lanes(&mut trial, &nest, rows, t).unwrap_or(false) {
                    *sch = trial;
                    done = true;
                    break;
                }
            }
            if done || !nest.independent {
                continue;
            }
            let mut trial = sch.clone();
            if child_lanes(&mut trial, &nest).unwrap_or(false) {
                *sch = trial;
                continue;
            }
            let block: BlockRv = sch.get_block(&nest.block)?;
            let loops = sch.get_loops(block)?;
            let outer = if nest.depth > 1 { sch.fuse(&loops[..nest.depth])? } else { loops[0] };
            let parts = sch.split(outer, &[None, Some(threads)])?;
            sch.bind(parts[0], ThreadTag::BlockIdxX)?;
            sch.bind(parts[1], ThreadTag::ThreadIdxX)?;
            registers(sch, &nest.block)?;
        }
    }
    Ok(())
}

/// Moves the spatial loops of a perfect nest above its reduction loops (bsrmm's `i, bi, bj,
/// f` becomes `i, bi, f, bj`), so the fused parallel part covers every output element and
/// each unit keeps its reduction serial, in the same order. Where `reorder` refuses (an
/// extent that depends on a loop moved below it), the nest stays as it was.
fn spatial_outward(sch: &mut Schedule, block: &str) -> Result<()> {
    // The perfect chain from the outermost loop, and which of its loops drive only spatial
    // iterators of the nest's first blocks (read from the IR: the trace records nothing
    // unless a reorder is made).
    let f = sch.func();
    let top = f.body.iter().find_map(|s| match &s.kind {
        StmtKind::For(l) if first_blocks(&l.body).first().is_some_and(|x| x.name == block) => Some(l),
        _ => None,
    });
    let Some(mut cur) = top else { return Ok(()) };
    let mut spatial = Vec::new();
    loop {
        let firsts = first_blocks(&cur.body);
        spatial.push(cur.kind == sparsec_ir::ForKind::Serial && !firsts.is_empty() && firsts.iter().all(|x| drives_only_spatial(x, cur.var)));
        match cur.body.as_slice() {
            [Stmt { kind: StmtKind::For(inner), .. }] => cur = inner,
            _ => break,
        }
    }
    let Some(r) = spatial.iter().position(|s| !s) else { return Ok(()) };
    if !spatial[r..].iter().any(|s| *s) {
        return Ok(());
    }
    let before = sch.clone();
    let b = sch.get_block(block)?;
    let loops = sch.get_loops(b)?;
    if loops.len() < spatial.len() {
        *sch = before;
        return Ok(());
    }
    let chain = &loops[..spatial.len()];
    let order: Vec<_> = chain.iter().zip(&spatial).filter(|(_, s)| **s).chain(chain.iter().zip(&spatial).filter(|(_, s)| !**s)).map(|(l, _)| *l).collect();
    if sch.reorder(&order).is_err() {
        *sch = before;
    }
    Ok(())
}

/// Keeps in a register what a unit of a bound nest accumulates: each reduction block inside
/// the nest's first block `outer` (under a serial loop) that only accumulates gets its output
/// cached in a one-element `local` buffer over `outer`'s body (sddmm's `C[i, j]` over `k`).
/// A cache that would not be one element, or that the primitive refuses, is not made.
fn registers(sch: &mut Schedule, outer: &str) -> Result<()> {
    for (name, written) in accumulations(sch.func(), outer) {
        let mut cached = false;
        for buf in &written {
            cached |= register_at(sch, &name, buf, |s| Ok(s.get_block(outer)?.into()));
        }
        if cached && written.len() == 1 {
            partial_sums_where_they_lower(sch, &name, COARSEN);
        }
    }
    Ok(())
}

/// The lanes of one CPU vector ([`CPU_VECTOR_BYTES`]) of the feature loop around block
/// `name`, where that loop's extent is not a literal and the block's body is one guard that
/// the feature does not decide around its stores (a padded format's bound: hyb's buckets,
/// BSR's edge blocks). Such a loop has no vector form as it is (`ir::vector` takes literal
/// widths) and the backend's register tiles take no guard, so it would run one feature at a
/// time; split by a vector, the guard is tested once per vector. `None` for other blocks.
fn guarded_feature_width(f: &Func, name: &str) -> Option<i64> {
    let mut found = None;
    walk_stmts(&f.body, &mut |s| {
        if let StmtKind::For(l) = &s.kind {
            if let Some(b) = feature_block(l).filter(|b| b.name == name) {
                let guarded = matches!(b.body.as_slice(), [Stmt { kind: StmtKind::If { cond, else_body, .. }, .. }]
                    if else_body.is_empty() && !cond.uses_var(l.var) && !b.iters.iter().any(|it| it.binding.uses_var(l.var) && cond.uses_var(it.var)));
                if guarded && l.extent.as_int().is_none() {
                    let bytes = b.writes.iter().filter_map(|r| f.buffers.try_get(r.buffer)).map(|x| x.dtype.size_bytes() as i64).max();
                    found = bytes.filter(|&n| n > 0).map(|n| CPU_VECTOR_BYTES / n);
                }
            }
        }
    });
    found.filter(|w| sparsec_ir::vector::WIDTHS.contains(w))
}

/// Caches `buf` of block `name` in one `local` element over the loop or block that `at`
/// looks up; whether it did (otherwise the schedule stays as it was).
fn register_at(sch: &mut Schedule, name: &str, buf: &str, at: impl FnOnce(&mut Schedule) -> Result<CacheAt>) -> bool {
    register_cache(sch, 1, |s| {
        let b = s.get_block(name)?;
        let at = at(s)?;
        s.cache_write(b, buf, sparsec_ir::Scope::Local, at)
    })
    .is_some()
}

/// [`vector_partial_sums`] of `width` lanes, kept only where the schedule still lowers.
fn partial_sums_where_they_lower(sch: &mut Schedule, name: &str, width: i64) {
    let mut trial = sch.clone();
    if vector_partial_sums(&mut trial, name, width).is_ok() && lowers(trial.func()) {
        *sch = trial;
    }
}

/// The CPU's [`registers`]: each accumulation inside the nest's first block `outer` gets its
/// output cached in one `local` element (a register once LLVM promotes it) over the
/// outermost place where the cache is one element: `outer` itself (SpMV's `Y[i]` over the
/// row) or the innermost loop above its reduction loops (SDDMM's `C[i, j]` over the
/// nonzero `j`). A feature reduction then sums in [`CPU_VECTOR_BYTES`] worth of partial
/// sums ([`vector_partial_sums`]). Accumulations that are not one element per place (SpMM's
/// rows of `C`, which the backend tiles in registers itself) stay as they are.
fn cpu_registers(sch: &mut Schedule, outer: &str, t: &CpuTuning) -> Result<()> {
    for (name, written) in accumulations(sch.func(), outer) {
        let [buf] = written.as_slice() else { continue };
        let cached = register_at(sch, &name, buf, |s| Ok(s.get_block(outer)?.into())) || cpu_register_at_loop(sch, &name, buf)?;
        let dtype = sch.func().buffers.iter().find(|(_, x)| x.name == *buf).map(|(_, x)| x.dtype);
        let Some(bytes) = dtype.map(|d| d.size_bytes() as i64).filter(|b| *b > 0) else { continue };
        if cached {
            partial_sums_where_they_lower(sch, &name, CPU_VECTOR_BYTES / bytes);
            // Rows in a vector of partial sums where it has a vector form, else in scalar ones.
            let before = stage3(sch.func()).map_or(usize::MAX, |g| unvectorized(&g));
            let vector = (t.vector_row, CPU_ROW_VECTOR_BYTES / bytes, true);
            for (least, sums, vector) in [vector, (t.long_row, t.row_sums, false)] {
                let mut trial = sch.clone();
                let kept = long_row_partial_sums(&mut trial, &name, least, sums, vector).is_ok()
                    && stage3(trial.func()).is_some_and(|g| !vector || unvectorized(&g) <= before);
                if kept {
                    *sch = trial;
                    break;
                }
            }
        }
    }
    Ok(())
}

/// Caches `buf` of block `name` in one `local` element over the innermost loop above its
/// reduction loops; whether it did.
fn cpu_register_at_loop(sch: &mut Schedule, name: &str, buf: &str) -> Result<bool> {
    let b = sch.get_block(name)?;
    let loops = sch.get_loops(b)?;
    let iters = match Schedule::block_paths(sch.func(), name).first().and_then(|p| tree::get(&sch.func().body, p)) {
        Some(Stmt { kind: StmtKind::Block(x), .. }) => x.iters.clone(),
        _ => return Ok(false),
    };
    let mut reduces = Vec::with_capacity(loops.len());
    for &l in &loops {
        let v = sch.loop_var(l)?;
        reduces.push(iters.iter().any(|it| it.kind == IterKind::Reduce && it.binding.uses_var(v)));
    }
    // The loop just above the innermost run of reduction loops.
    let Some(last_spatial) = reduces.iter().rposition(|r| !r) else { return Ok(false) };
    if !reduces[last_spatial + 1..].iter().all(|r| *r) || last_spatial + 1 == loops.len() {
        return Ok(false);
    }
    let at = loops[last_spatial];
    Ok(register_at(sch, name, buf, |_| Ok(at.into())))
}

/// Most chunks a CPU row nest runs as ([`cpu`], `partition`): the chunks are balanced by
/// nonzeros, and the OpenMP runtime hands each of its threads a contiguous run of them, so
/// 32 chunks serve teams of up to 32 threads.
pub const CPU_CHUNKS: i64 = 32;

/// Least nonzeros of a chunk of rows on the CPU ([`row_weights`]) where each nonzero does
/// scalar work (SpMV) and where it drives an inner loop (SpMM's features, SDDMM's): about
/// 2 µs of work, which pays for waking the OpenMP team (under 1 µs a region on the 2-core
/// development machine, `scripts/bench-cpu`'s probe) and for a chunk's own start. A nest
/// lighter than two grains runs as one chunk, on the calling thread.
pub const CPU_GRAIN: [i64; 2] = [4096, 512];

/// The row pointer whose prefix sums weigh the rows of the nest whose first block is
/// `outer` (a loop inside it runs `W[v + 1] - W[v]` times for the row `v`), and which grain
/// ([`CPU_GRAIN`]) applies: `false` (the scalar one) when every loop in the block is such a
/// row loop with no loop inside (SpMV) and no loop lies `between` the row loop and the block,
/// `true` when a nonzero drives more work (features, blocks).
fn row_weights(f: &Func, outer: &str, row: VarId, between: bool) -> Option<(String, bool)> {
    let (mut weights, mut heavy) = (None, between);
    walk_stmts(&f.body, &mut |s| {
        let StmtKind::Block(b) = &s.kind else { return };
        if b.name != outer {
            return;
        }
        // `W[v + 1] - W[v]` with `v` the row itself (the loop variable or the iterator bound
        // to it), so that the rows' weights are `W[0..=extent]`, which the nest reads.
        let is_row = |x: &Expr| match x {
            Expr::Var(v) => *v == row || b.iters.iter().any(|it| it.var == *v && it.binding == Expr::Var(row)),
            _ => false,
        };
        let row_loop = |l: &sparsec_ir::For| -> Option<sparsec_ir::BufferId> {
            let Expr::Binary(sparsec_ir::BinOp::Sub, hi, lo) = &l.extent else { return None };
            let (Expr::Load(w1, i1), Expr::Load(w2, i2)) = (&**hi, &**lo) else { return None };
            let next = matches!(i1.as_slice(), [Expr::Binary(sparsec_ir::BinOp::Add, x, one)]
                if matches!(**one, Expr::Int(1, _)) && i2.as_slice() == [(**x).clone()] && is_row(x));
            (w1 == w2 && next).then_some(*w1)
        };
        walk_stmts(&b.body, &mut |s| {
            let StmtKind::For(l) = &s.kind else { return };
            match row_loop(l) {
                Some(w) => {
                    weights = weights.or(Some(w));
                    walk_stmts(&l.body, &mut |x| heavy |= matches!(x.kind, StmtKind::For(_)));
                }
                None => heavy = true,
            }
        });
    });
    let name = f.buffers.try_get(weights?)?.name.clone();
    Some((name, heavy))
}

/// Nonzeros ahead that a CPU row walk prefetches what its gathers read
/// (`sparsec_ir::prefetch`): SpMM's rows of B, SpMV's elements of x. On the 2-core
/// development machine, SpMM on a 2^20-row R-MAT graph (9.7 M nonzeros, B of 128 MB, one
/// thread) took 41 ms with 64 against 53 ms without at 32 features, 38 ms with 128; at 128
/// features 151 ms with 64 against 181 ms without or with 128; 16 lost 30%.
pub const CPU_PREFETCH_DISTANCE: i64 = 64;

/// Least size in bytes of a gathered array from which a CPU row walk prefetches: half the
/// development machine's 32 MiB L3. Below it the extra instructions cost (up to 25% with a
/// B of 2–4 MiB), at 8 MiB they break even and at 32 MiB gained 16%.
pub const CPU_PREFETCH_MIN_BYTES: i64 = 16 << 20;

/// Annotates the innermost serial loops of the nest whose first block is `name` that
/// gather through an index they pick (`sparsec_ir::prefetch`: SpMM's and SpMV's nonzero
/// loops) to prefetch [`CPU_PREFETCH_DISTANCE`] iterations ahead from
/// [`CPU_PREFETCH_MIN_BYTES`].
fn prefetch_gathers(sch: &mut Schedule, name: &str, t: &CpuTuning) -> Result<()> {
    use sparsec_ir::prefetch::{has_gather, PREFETCH_DISTANCE_ATTR, PREFETCH_MIN_BYTES_ATTR};
    let rv = sch.get_block(name)?;
    let outer = sch.block_path(sch.func(), rv.id())?;
    let Some(Stmt { kind: StmtKind::Block(first), .. }) = tree::get(&sch.func().body, &outer) else { return Ok(()) };
    let mut names = vec![first.name.clone()];
    walk_stmts(&first.body, &mut |s| {
        if let StmtKind::Block(b) = &s.kind {
            names.push(b.name.clone());
        }
    });
    // Every serial loop around a block of the nest that gathers, by path.
    let mut found: Vec<(crate::schedule::LoopRv, tree::Path)> = Vec::new();
    for n in names {
        let block = sch.get_block(&n)?;
        for l in sch.get_loops(block)? {
            let (path, var) = sch.loop_path(sch.func(), l.id())?;
            let Some(Stmt { kind: StmtKind::For(f), .. }) = tree::get(&sch.func().body, &path) else { continue };
            if f.kind == sparsec_ir::ForKind::Serial && has_gather(&f.body, var) && !found.iter().any(|(_, p)| *p == path) {
                found.push((l, path));
            }
        }
    }
    let inner: Vec<_> = found.iter().filter(|(_, p)| !found.iter().any(|(_, q)| q.len() > p.len() && q.starts_with(p))).cloned().collect();
    for (l, _) in inner {
        sch.annotate(l, PREFETCH_DISTANCE_ATTR, AttrValue::Int(t.prefetch_distance))?;
        sch.annotate(l, PREFETCH_MIN_BYTES_ATTR, AttrValue::Int(t.prefetch_min_bytes))?;
    }
    Ok(())
}

/// Bytes of the partial sums of one feature reduction on the CPU ([`cpu_registers`]): one
/// AVX-512 register (16 `f32` lanes; two AVX2 registers where AVX-512 is missing).
pub const CPU_VECTOR_BYTES: i64 = 64;

/// The blocks inside block `outer` (under a serial loop) that reduce and only accumulate
/// (no `init`), with the names of the buffers each writes.
fn accumulations(f: &Func, outer: &str) -> Vec<(String, Vec<String>)> {
    let mut found: Vec<(String, Vec<String>)> = Vec::new();
    walk_stmts(&f.body, &mut |s| {
        let StmtKind::Block(o) = &s.kind else { return };
        if o.name != outer {
            return;
        }
        walk_stmts(&o.body, &mut |s| {
            let StmtKind::For(l) = &s.kind else { return };
            if l.kind != sparsec_ir::ForKind::Serial {
                return;
            }
            for b in first_blocks(&l.body) {
                let reduces = b.iters.iter().any(|it| it.kind == IterKind::Reduce);
                if reduces && b.init.is_none() && sparsec_passes::accumulates_only(f, &b.body) {
                    let written = b.writes.iter().filter_map(|r| f.buffers.try_get(r.buffer)).map(|x| x.name.clone()).collect();
                    if !found.iter().any(|(n, _)| *n == b.name) {
                        found.push((b.name.clone(), written));
                    }
                }
            }
        });
    });
    found
}

/// Whether `f` (Stage II or III) lowers to a verified Stage III.
fn lowers(f: &Func) -> bool {
    stage3(f).is_some()
}

/// `f` (Stage II or III) as a verified Stage III function, if it lowers to one.
fn stage3(f: &Func) -> Option<std::borrow::Cow<'_, Func>> {
    let g = match f.stage {
        Stage::II => std::borrow::Cow::Owned(sparsec_passes::lower_sparse_buffer(f).ok()?),
        _ => std::borrow::Cow::Borrowed(f),
    };
    sparsec_ir::verify::verify_func(&g).is_ok().then_some(g)
}

/// Sums a register-cached reduction over features (sddmm's `C[i, j]` over `k`) in
/// `width` partial sums, one per consecutive feature: the feature loop is split by
/// `width`, `rfactor` gives the partial sums (in `local` scope: registers), their update
/// and zeroing loops are vectorized, and the final sum of the `width` is unrolled. Each
/// unit then reads `width` consecutive features of each operand at once. Only for a
/// feature loop: its extent is not a literal and reads no buffer (a row's nonzeros do).
fn vector_partial_sums(sch: &mut Schedule, name: &str, width: i64) -> Result<()> {
    let refuse = || ScheduleError::NotAPerfectNest { primitive: "auto", block: name.into() };
    let b = sch.get_block(name)?;
    let k = *sch.get_loops(b)?.last().ok_or_else(refuse)?;
    let (path, _) = sch.loop_path(sch.func(), k.0)?;
    let extent = &crate::loops::loop_at(sch.func(), &path, k.0)?.extent;
    if extent.as_int().is_some() || reads_buffer(extent) {
        return Err(refuse());
    }
    partial_sums(sch, name, width, true)
}

/// Sums the accumulation of block `name` over its innermost loop in `width` partial sums:
/// the loop is split by `width`, `rfactor` gives the sums (in `local` scope), their update
/// and zeroing loops are vectorized (`vector`) or unrolled, and the final sum of the `width`
/// is unrolled.
fn partial_sums(sch: &mut Schedule, name: &str, width: i64, vector: bool) -> Result<()> {
    let refuse = || ScheduleError::NotAPerfectNest { primitive: "auto", block: name.into() };
    let b = sch.get_block(name)?;
    let k = *sch.get_loops(b)?.last().ok_or_else(refuse)?;
    let parts = sch.split(k, &[None, Some(width)])?;
    let rf = sch.rfactor(parts[1], 0)?;
    let sums = sch.func().buffers.iter().last().map(|(_, x)| x.name.clone()).ok_or_else(refuse)?;
    sch.set_scope(&sums, sparsec_ir::Scope::Local)?;
    let loops = sch.get_loops(rf)?;
    let &[.., outer, lanes] = loops.as_slice() else { return Err(refuse()) };
    let init = sch.decompose_reduction(rf, outer)?;
    let zeroing = *sch.get_loops(init)?.last().ok_or_else(refuse)?;
    for l in [lanes, zeroing] {
        if vector {
            sch.vectorize(l)?;
        } else {
            sch.unroll(l)?;
        }
    }
    let b = sch.get_block(name)?;
    let total = *sch.get_loops(b)?.last().ok_or_else(refuse)?;
    sch.unroll(total)
}

/// Rows of at least this many nonzeros are summed in a vector of partial sums where a
/// nonzero's work is scalar (SpMV, [`long_row_partial_sums`]): one vector of
/// [`CPU_ROW_VECTOR_BYTES`] per row, its lanes' operands read as vectors and gathers, the
/// last lanes under a mask. On the development machine (AMD EPYC, AVX2, one thread,
/// `scripts/bench-cpu`) rows from 8 took 0.86× the time of scalar sums on bcsstk13, 0.84× on
/// dnn-n1024-l1, 0.5–0.9× on ca-CondMat (noisy), 0.9–0.95× on cora, citeseer and cryg2500, but
/// 1.2× on dwt_992, whose rows of 8–24 alternate between the copies; from 16 no better, from
/// 4 1.7× on cryg2500 (rows of 4–5) and from 1 2× on citeseer.
pub const CPU_VECTOR_ROW: i64 = 8;

/// Bytes of a row's vector of partial sums ([`CPU_VECTOR_ROW`]): 8 `f32` lanes, one AVX2
/// register (16 lanes lost to 8 on rows of 3–5 nonzeros with AVX-512).
pub const CPU_ROW_VECTOR_BYTES: i64 = 32;

/// Rows of at least this many nonzeros are summed in [`CPU_ROW_SUMS`] partial sums where a
/// nonzero's work is scalar and the vector sums have no vector form
/// ([`long_row_partial_sums`]). On the development machine (one thread) rows averaging 42
/// nonzeros (bcsstk13) took 0.84× the time of one sum, and rows of 32 (dnn-n1024-l1) 1.13×
/// when the copy ran from 16: there the one chain of
/// multiply-adds is not what limits.
pub const CPU_LONG_ROW: i64 = 40;

/// Partial sums of a long row's scalar accumulation ([`CPU_LONG_ROW`]): independent chains
/// of fused multiply-adds, so the row is not one chain of their latency.
pub const CPU_ROW_SUMS: i64 = 4;

/// Where the innermost loop of block `name` walks a row's nonzeros (its extent reads a
/// buffer) with nothing but the block inside: a copy of the loop for rows of at least
/// `least` nonzeros (`specialize`) sums in `sums` partial sums, vectorized or unrolled
/// ([`partial_sums`]); shorter rows keep one sum in order, which costs them less, in a
/// rolled loop (`unroll_factor = 1`).
fn long_row_partial_sums(sch: &mut Schedule, name: &str, least: i64, sums: i64, vector: bool) -> Result<()> {
    let refuse = || ScheduleError::NotAPerfectNest { primitive: "auto", block: name.into() };
    let b = sch.get_block(name)?;
    let j = *sch.get_loops(b)?.last().ok_or_else(refuse)?;
    let (path, _) = sch.loop_path(sch.func(), j.0)?;
    let l = crate::loops::loop_at(sch.func(), &path, j.0)?;
    let only_block = matches!(l.body.as_slice(), [Stmt { kind: StmtKind::Block(b), .. }] if b.name == name && first_blocks(&b.body).is_empty());
    if !reads_buffer(&l.extent) || !only_block {
        return Err(refuse());
    }
    let [long, short] = sch.specialize(j, least)?;
    // The short rows' walk stays rolled: LLVM's unrolled copy and its remainder cost more
    // set-up per row than a row of under `least` nonzeros saves.
    sch.annotate(short, sparsec_ir::UNROLL_FACTOR_ATTR, AttrValue::Int(1))?;
    let (path, _) = sch.loop_path(sch.func(), long.0)?;
    let copy = match tree::get(&sch.func().body, &path) {
        Some(Stmt { kind: StmtKind::For(l), .. }) => first_blocks(&l.body).first().map(|b| b.name.clone()),
        _ => None,
    };
    partial_sums(sch, &copy.ok_or_else(refuse)?, sums, vector)
}

/// How many `vectorized` loops of the Stage III function `g` have no vector form
/// (`sparsec_ir::vector::plan`) and run one lane after another.
fn unvectorized(g: &Func) -> usize {
    let mut n = 0;
    walk_stmts(&g.body, &mut |s| {
        if let StmtKind::For(l) = &s.kind {
            n += usize::from(l.kind == sparsec_ir::ForKind::Vectorized && sparsec_ir::vector::plan(g, l).is_none());
        }
    });
    n
}

/// Applies `cache` (a `cache_read` or `cache_write` to local scope) and keeps it only when it
/// succeeds with a cache of `elements` elements (registers); otherwise the schedule stays as
/// it was. Returns the block the primitive returned.
fn register_cache(sch: &mut Schedule, elements: i64, cache: impl FnOnce(&mut Schedule) -> Result<BlockRv>) -> Option<BlockRv> {
    let before = sch.clone();
    let regs = sparsec_ir::Layout::Dense(vec![Expr::i32(elements)]);
    match cache(sch) {
        Ok(b) if sch.func().buffers.iter().last().is_some_and(|(_, c)| c.layout == regs) => Some(b),
        _ => {
            *sch = before;
            None
        }
    }
}

/// Coefficient of variation of row length from which row segments pay on a GPU
/// ([`gpu_row_segments`]).
pub const SEGMENT_CV: f64 = 0.5;

/// Entries per row segment where segments pay ([`gpu_row_segments`]).
pub const SEGMENT_LEN: usize = 32;

/// The segment length to cut a matrix's rows into for GPU SpMM (`passes::row_segments_rule`,
/// `examples/csrmm_segments.sptir`), or `None` for one warp per row (`--auto gpu` on the
/// CSR program), from its row lengths: segments of [`SEGMENT_LEN`] where the coefficient of
/// variation (standard deviation / mean) is at least [`SEGMENT_CV`]. Measured on an H100
/// (docs/gpu-estimate.md, "Row segments"): on the shared matrices whose rows vary (variation
/// 0.54 to 1.34, and 9.5 on an R-MAT graph) segments took 0.45× the time of one warp per
/// row; on the regular ones (at most 0.14) 1.49×.
pub fn gpu_row_segments(row_lengths: impl IntoIterator<Item = usize>) -> Option<usize> {
    let (mut n, mut sum, mut sq) = (0f64, 0f64, 0f64);
    for len in row_lengths {
        let x = len as f64;
        n += 1.0;
        sum += x;
        sq += x * x;
    }
    if n == 0.0 || sum == 0.0 {
        return None;
    }
    let mean = sum / n;
    let cv = (sq / n - mean * mean).max(0.0).sqrt() / mean;
    (cv >= SEGMENT_CV).then_some(SEGMENT_LEN)
}

/// Units of a warp: the lanes that share a row in [`lanes`].
pub const WARP: i64 = 32;

/// Features each lane accumulates per walk of a row's nonzeros in [`lanes`] (registers):
/// one walk covers `COARSEN * WARP` features, as GE-SpMM's coarsening does.
pub const COARSEN: i64 = 4;

/// Nonzeros per trip of a warp's walk of a row in [`lanes`] (the `unroll_factor` of the
/// nonzero loop), so that the loads of B, which the walk waits for, overlap. On an H100
/// (session 32, docs/gpu-estimate.md) 4 took 0.930× the rolled loop's time (geomean of 16
/// cases), 2 gained nothing and 8 lost 10% on 5-entry rows; the GE-SpMM peer rolled took 1.59×.
pub const NONZERO_UNROLL: i64 = 4;

/// Rows (warps) per block in SpMM's shape (`lanes`): 4 warps per block let an H100 SM hold
/// 64 warps within its 32-block limit. Measured on an H100 (`scripts/gpu-check`): see
/// docs/gpu-estimate.md.
pub const ROWS_PER_BLOCK: i64 = 4;

/// GE-SpMM's shape for a row nest (`nest.depth == 1`) whose row loop holds one block, every
/// block inside which sits in a feature loop (a serial loop driving only spatial iterators,
/// [`vector_candidates`]) of one common extent: the row loop is split by [`ROWS_PER_BLOCK`]
/// over `blockIdx.x` × `threadIdx.y`, each
/// feature loop is split by [`WARP`] with the inner part on `threadIdx.x` (the same mapping
/// for every block, so no barrier is needed) and moved outside the loops between it and the
/// row (the nonzeros). A block that only accumulates is coarsened: its feature loop is split
/// into walks, [`COARSEN`] features per lane and the lanes, and the `COARSEN` loop goes inside
/// the nonzero loop, so one walk reads each nonzero once for `COARSEN * WARP` features, which
/// stay in registers (a strided `cache_write` to local scope at the lane loop; the loop and
/// the copies unrolled); a block before it that only stores into what it accumulates (its
/// `init`) joins its lanes ([`join_lanes`]) and fills the registers. `Ok(false)` when the nest has another
/// shape, `Err` when a primitive refuses; the caller then keeps the schedule as it was.
fn lanes(sch: &mut Schedule, nest: &Nest, rows_per_block: i64, t: &GpuTuning) -> Result<bool> {
    if nest.depth != 1 {
        return Ok(false);
    }
    let f = sch.func();
    let row = f.body.iter().find_map(|s| match &s.kind {
        StmtKind::For(l) if first_blocks(&l.body).first().is_some_and(|b| b.name == nest.block) => Some(l),
        _ => None,
    });
    let Some(row) = row else { return Ok(false) };
    let [Stmt { kind: StmtKind::Block(outer), .. }] = row.body.as_slice() else { return Ok(false) };
    let inner = first_blocks(&outer.body);
    let mut features: Vec<(String, VarId, Expr, bool)> = Vec::new();
    let mut reduces = false;
    walk_stmts(&outer.body, &mut |s| {
        if let StmtKind::For(l) = &s.kind {
            if let Some(b) = feature_block(l) {
                let accumulates = sparsec_passes::accumulates_only(f, &b.body) && b.init.is_none();
                reduces |= b.iters.iter().any(|it| it.kind == IterKind::Reduce);
                features.push((b.name.clone(), l.var, l.extent.clone(), accumulates));
            }
        }
    });
    let same_extent = features.windows(2).all(|w| w[0].2 == w[1].2);
    // A row reduction over features (SpMM's shape); other nests keep the default.
    if !reduces || features.len() != inner.len() || !same_extent {
        return Ok(false);
    }
    let written: Vec<Vec<String>> = inner
        .iter()
        .map(|b| b.writes.iter().filter_map(|r| f.buffers.try_get(r.buffer)).map(|x| x.name.clone()).collect())
        .collect();
    let order: Vec<String> = inner.iter().map(|b| b.name.clone()).collect();
    // A block that only stores what an accumulating block later adds to (its `init`): it
    // joins the accumulation's lanes, so the register cache starts from it (no copy in).
    let inits: Vec<(String, String)> = features
        .iter()
        .enumerate()
        .filter(|(_, x)| !x.3)
        .filter_map(|(k, x)| {
            let mine = &written[order.iter().position(|n| *n == x.0)?];
            let acc = features[k + 1..].iter().find(|y| y.3 && written[order.iter().position(|n| *n == y.0).unwrap_or(0)] == *mine)?;
            (!mine.is_empty()).then(|| (x.0.clone(), acc.0.clone()))
        })
        .collect();
    let mut joined: Vec<String> = Vec::new();
    // Accumulations first, so an init is still untouched when one tries to join it.
    features.sort_by_key(|x| inits.iter().any(|(i, _)| *i == x.0));
    let b = sch.get_block(&nest.block)?;
    let row_loop = sch.get_loops(b)?[0];
    // `rows_per_block` rows per block, one warp each: blocks of one warp would cap an SM at
    // 32 resident warps (its block limit), half what it holds. The split's guard makes
    // control flow differ between the warps of a block, so it is kept only where no block
    // of the nest stores what another unit reads (every init joins its accumulation's lanes).
    let bind_rows = |sch: &mut Schedule, row_loop| -> Result<()> {
        if rows_per_block > 1 {
            let rows = sch.split(row_loop, &[None, Some(rows_per_block)])?;
            sch.bind(rows[0], ThreadTag::BlockIdxX)?;
            sch.bind(rows[1], ThreadTag::ThreadIdxY)
        } else {
            sch.bind(row_loop, ThreadTag::BlockIdxX)
        }
    };
    // An atomic nest's rows are bound last, once its writes are atomic (`bind` lets only
    // commuting writes drive a reduction iterator).
    if !nest.atomic {
        bind_rows(sch, row_loop)?;
    }
    let alone: Vec<String> = features.iter().filter(|x| !x.3).map(|x| x.0.clone()).collect();
    for (name, var, _, accumulates) in features {
        if joined.contains(&name) {
            continue;
        }
        let b = sch.get_block(&name)?;
        let loops = sch.get_loops(b)?;
        let mut at = None;
        for (p, &lp) in loops.iter().enumerate() {
            if sch.loop_var(lp)? == var {
                at = Some(p);
            }
        }
        let Some(p) = at else { return Ok(false) };
        let coarse = accumulates && p > 0;
        let mut walks = None;
        let (lane, per_lane) = if coarse {
            // Feature `(k_0 * WARP + lane) * COARSEN + k_1`: each lane's features are
            // consecutive, one vector.
            let parts = sch.split(loops[p], &[None, Some(WARP), Some(t.coarsen)])?;
            let mut chain = vec![parts[0], parts[1]];
            chain.extend_from_slice(&loops[..p]);
            chain.push(parts[2]);
            sch.reorder(&chain)?;
            walks = Some(parts[0]);
            (parts[1], Some(parts[2]))
        } else {
            let parts = sch.split(loops[p], &[None, Some(WARP)])?;
            if p > 0 {
                let mut chain = parts.clone();
                chain.extend_from_slice(&loops[..p]);
                sch.reorder(&chain)?;
            }
            (parts[1], None)
        };
        sch.bind(lane, ThreadTag::ThreadIdxX)?;
        if let Some(per_lane) = per_lane {
            let init = inits.iter().find(|(_, acc)| *acc == name).map(|(i, _)| i.clone());
            if let Some(init) = init {
                let mut trial = sch.clone();
                if join_lanes(&mut trial, &init, lane, t.coarsen).is_ok() {
                    *sch = trial;
                    joined.push(init);
                }
            }
            // Once every block writing the row sits under the walk (its init joined), the
            // walks may go to `blockIdx.y` (before the register cache, whose copies drive no
            // iterator by them); where `bind` refuses they stay serial.
            if let Some(w) = walks.filter(|_| t.walks_on_blocks && !nest.atomic) {
                let mut trial = sch.clone();
                if trial.bind(w, ThreadTag::BlockIdxY).is_ok() {
                    *sch = trial;
                }
            }
            let k = order.iter().position(|n| *n == name).unwrap_or(0);
            for buf in &written[k] {
                // Only a cache of `COARSEN` elements indexed by the unrolled loop (registers);
                // otherwise, or where the primitive refuses, the accumulation stays in memory.
                // In an atomic nest other warps add to the same row: the registers start at
                // zero and are added back (atomically, once `lower_atomic` runs).
                let cached = register_cache(sch, t.coarsen, |s| {
                    if nest.atomic {
                        s.cache_accumulate(b, buf, sparsec_ir::Scope::Local, lane)
                    } else {
                        s.cache_write(b, buf, sparsec_ir::Scope::Local, lane)
                    }
                });
                if let Some(back) = cached {
                    unroll_copies(sch, back, per_lane)?;
                }
            }
            // What the block reads once per nonzero (its value, its column) is read into a
            // register before the per-lane loop; `NONZERO_UNROLL` nonzeros per trip of a
            // whole row keep that many loads of B in flight (an atomic nest's segments are
            // short: unrolled, they took 5% longer on the H100).
            if let Some(&nonzero) = loops[..p].last() {
                if !nest.atomic && t.unroll > 1 {
                    sch.annotate(nonzero, sparsec_ir::UNROLL_FACTOR_ATTR, sparsec_ir::AttrValue::Int(t.unroll))?;
                }
                read_once(sch, &name, nonzero.into());
            }
        }
    }
    if nest.atomic {
        sch.lower_atomic()?;
        let b = sch.get_block(&nest.block)?;
        let row_loop = sch.get_loops(b)?[0];
        bind_rows(sch, row_loop)?;
    }
    Ok(rows_per_block == 1 || alone.iter().all(|n| joined.contains(n)))
}

/// Rows on blocks and the entries of a sparse child on the lanes of a warp, for a row nest
/// whose row walks serial loops around a loop over a sparse child that writes one element
/// per entry, where [`lanes`] found no features (SpGEMM's products: row `i` on a block, for
/// each of A's nonzeros `j` in turn B's row `j` split by [`WARP`] over `threadIdx.x`, so a
/// unit never walks a whole row's products). The loops around the lanes must have the same
/// bounds in every unit (they read no buffer the function writes): the backends fence each
/// run of the lanes where the runs exchange data, and a barrier needs uniform control flow.
/// `Ok(false)` when the nest has another shape.
fn child_lanes(sch: &mut Schedule, nest: &Nest) -> Result<bool> {
    if nest.depth != 1 {
        return Ok(false);
    }
    let f = sch.func();
    let Some(row_path) = tree::find_all(&f.body, &|s| match &s.kind {
        StmtKind::For(l) => first_blocks(&l.body).first().is_some_and(|b| b.name == nest.block),
        _ => false,
    })
    .into_iter()
    .next() else {
        return Ok(false);
    };
    let Some(row) = tree::get(&f.body, &row_path) else { return Ok(false) };
    let uniformity = sparsec_ir::sync::Uniformity::new(f);
    // Innermost loops over a sparse child (bounds read a buffer) that drive only spatial
    // iterators, under at least one loop of the row, every loop and branch above them uniform.
    let inner = tree::find_all(std::slice::from_ref(row), &|s| match &s.kind {
        StmtKind::For(l) => {
            l.kind == sparsec_ir::ForKind::Serial
                && reads_buffer(&l.extent)
                && !contains_loop(&l.body)
                && first_blocks(&l.body).first().is_some_and(|b| drives_only_spatial(b, l.var))
        }
        _ => false,
    });
    let [path] = inner.as_slice() else { return Ok(false) };
    let above = tree::ancestors(std::slice::from_ref(row), path);
    let loops_above = above.iter().filter(|s| matches!(s.kind, StmtKind::For(_))).count();
    let uniform = above.iter().all(|s| match &s.kind {
        StmtKind::For(l) => uniformity.expr(f, &l.min) && uniformity.expr(f, &l.extent),
        StmtKind::If { cond, .. } => uniformity.expr(f, cond),
        StmtKind::While { .. } => false,
        _ => true,
    });
    let Some(Stmt { kind: StmtKind::For(lane_loop), .. }) = tree::get(std::slice::from_ref(row), path) else { return Ok(false) };
    let Some(block) = first_blocks(&lane_loop.body).first().map(|b| b.name.clone()) else { return Ok(false) };
    let var = lane_loop.var;
    if loops_above < 2 || !uniform {
        return Ok(false);
    }
    let b = sch.get_block(&nest.block)?;
    let row_loop = sch.get_loops(b)?[0];
    sch.bind(row_loop, ThreadTag::BlockIdxX)?;
    let b = sch.get_block(&block)?;
    for lp in sch.get_loops(b)? {
        if sch.loop_var(lp)? == var {
            let parts = sch.split(lp, &[None, Some(WARP)])?;
            sch.bind(parts[1], ThreadTag::ThreadIdxX)?;
            return Ok(true);
        }
    }
    Ok(false)
}

/// Splits the feature loop of `init` as the accumulation's (`COARSEN` per lane, `WARP`
/// lanes) and moves it under the accumulation's lane loop `lane`: each lane then stores the
/// elements it accumulates just before its walk of the nonzeros.
fn join_lanes(sch: &mut Schedule, init: &str, lane: crate::schedule::LoopRv, coarsen: i64) -> Result<()> {
    let b = sch.get_block(init)?;
    let loops = sch.get_loops(b)?;
    let k = *loops.last().ok_or_else(|| ScheduleError::NotAPerfectNest { primitive: "auto::gpu", block: init.into() })?;
    sch.split(k, &[None, Some(WARP), Some(coarsen)])?;
    sch.compute_at(b, lane)
}

/// Vectorizes (or, where the primitive refuses, unrolls) the loop `per_lane` and the loops of
/// the copies into and out of the register cache whose write-back block is `back` (and of an
/// `init` storing into it): a lane's `COARSEN` consecutive features are one vector, and every
/// cache index a constant (a register).
fn unroll_copies(sch: &mut Schedule, back: BlockRv, per_lane: crate::schedule::LoopRv) -> Result<()> {
    vector_or_unroll(sch, per_lane)?;
    let cache = sch.func().buffers.iter().last().map(|(h, _)| h);
    let mut copies = Vec::new();
    walk_stmts(&sch.func().body, &mut |s| {
        if let StmtKind::Block(b) = &s.kind {
            if b.writes.iter().any(|r| Some(r.buffer) == cache) && b.body.len() == 1 && b.iters.len() == 1 {
                copies.push(b.name.clone());
            }
        }
    });
    let mut blocks = vec![back];
    for name in copies {
        blocks.push(sch.get_block(&name)?);
    }
    for b in blocks {
        if let Some(&l) = sch.get_loops(b)?.last() {
            vector_or_unroll(sch, l)?;
        }
    }
    Ok(())
}

/// `vectorize`, or `unroll` where that is refused.
fn vector_or_unroll(sch: &mut Schedule, l: crate::schedule::LoopRv) -> Result<()> {
    let before = sch.clone();
    if sch.vectorize(l).is_err() {
        *sch = before;
        sch.unroll(l)?;
    }
    Ok(())
}

/// Stage-I part of the GPU default (see the module documentation). Returns whether some
/// iteration was annotated `atomic`.
pub fn gpu_sparse(sch: &mut Schedule) -> Result<bool> {
    sch.need_stage_i("auto::gpu_sparse")?;
    let mut annotated = false;
    // (name, iterator kinds, whether fused points may share an output element, for each
    // iterator whether some store's indices use it)
    let candidates: Vec<(String, Vec<IterKind>, bool, Vec<bool>)> = sch
        .func()
        .body
        .iter()
        .filter_map(|s| match &s.kind {
            StmtKind::SpIter(it) => {
                let kinds = it.iter_kinds()?;
                let indexed = it.vars.iter().map(|v| stores_index_by(&it.body, *v)).collect();
                if it.init.is_none() && sparsec_passes::accumulates_only(sch.func(), &it.body) {
                    Some((it.name.clone(), kinds, true, indexed))
                } else if writes_own_point(it, &kinds) {
                    Some((it.name.clone(), kinds, false, indexed))
                } else {
                    None
                }
            }
            _ => None,
        })
        .collect();
    for (name, kinds, shared, indexed) in candidates {
        let sp = sch.get_sparse_iteration(&name)?;
        let iters = sch.get_sp_iters(sp)?;
        for k in 1..kinds.len().min(iters.len()) {
            // A sum over the children of each parent into an element the child does not pick
            // (`C[RowIndices[io], k] += A[io, jo] * ..`: hyb's buckets, row segments) keeps its
            // parents apart, with a feature iterator after them: each unit sums its parent's
            // children in registers and adds once (`auto::gpu`'s atomic nests), rather than
            // one atomic per child.
            if shared && k == 1 && kinds.len() > 2 && indexed[0] && !indexed[1] && sch.clone().sparse_fuse(sp, &[iters[0], iters[1]]).is_ok() {
                sch.annotate(sp, sparsec_passes::ATOMIC_ATTR, AttrValue::Bool(true))?;
                annotated = true;
                break;
            }
            // Atomic accumulation makes any pair safe; otherwise both must be spatial.
            if shared || (kinds[k - 1] == IterKind::Spatial && kinds[k] == IterKind::Spatial) {
                // Pairs the primitive refuses (not a parent chain from a root) are skipped.
                if sch.sparse_fuse(sp, &[iters[k - 1], iters[k]]).is_ok() {
                    if shared {
                        sch.annotate(sp, sparsec_passes::ATOMIC_ATTR, AttrValue::Bool(true))?;
                        annotated = true;
                    }
                    break;
                }
            }
        }
    }
    Ok(annotated)
}

/// Whether some store in `body` indexes its buffer with `v`.
fn stores_index_by(body: &[Stmt], v: VarId) -> bool {
    let mut hit = false;
    walk_stmts(body, &mut |s| {
        if let StmtKind::Store { indices, .. } = &s.kind {
            hit |= indices.iter().any(|e| e.uses_var(v));
        }
    });
    hit
}

/// Whether every store of a sparse iteration (init included, nested iterations excluded)
/// writes the element named by exactly its spatial iterators, in order: distinct spatial
/// points then write distinct elements, fused or not.
fn writes_own_point(it: &sparsec_ir::func::SpIter, kinds: &[IterKind]) -> bool {
    let point: Vec<Expr> =
        it.vars.iter().zip(kinds).filter(|(_, k)| **k == IterKind::Spatial).map(|(v, _)| Expr::Var(*v)).collect();
    let mut stores = 0usize;
    let mut ok = true;
    let mut body: Vec<&Stmt> = it.init.iter().flatten().chain(&it.body).collect();
    while let Some(s) = body.pop() {
        match &s.kind {
            StmtKind::Store { indices, .. } => {
                stores += 1;
                ok &= *indices == point;
            }
            StmtKind::SpIter(_) | StmtKind::Alloc(_) => ok = false,
            k => body.extend(k.child_lists().into_iter().flatten()),
        }
    }
    ok && stores > 0
}

/// The whole GPU default on a schedule at any stage: [`gpu_sparse`] and `lower_sparse_iter`
/// at Stage I, then [`gpu`], then `lower_atomic` when an iteration was annotated, then
/// [`spread_atomic`] and `contract`. Leaves the
/// function at Stage II (or III when it started there).
pub fn gpu_full(sch: &mut Schedule, threads: i64) -> Result<()> {
    gpu_full_tuned(sch, threads, &GpuTuning::default())
}

/// [`gpu_full`] with the parameters `t`.
pub fn gpu_full_tuned(sch: &mut Schedule, threads: i64, t: &GpuTuning) -> Result<()> {
    let mut atomic = false;
    if sch.func().stage == Stage::I {
        atomic = gpu_sparse(sch)?;
        sch.lower_sparse_iter()?;
    }
    gpu_tuned(sch, threads, t)?;
    if atomic {
        sch.lower_atomic()?;
    }
    spread_atomic(sch)?;
    sch.contract()
}

/// Spreads serial loops whose iterations only add atomically over cubes (Stage II/III):
/// in each top-level nest that binds no `blockIdx.y`/`z` and allocates no shared memory, the
/// outermost serial loop with scalar bounds whose body writes global memory only through
/// `atomic_add` (reading none of what it adds to, storing only into its own local buffers,
/// binding no thread) is bound to `blockIdx.y`, or to `blockIdx.x` when the nest binds
/// none, provided nothing outside it in the nest writes global memory (every cube runs that
/// part again). One unit then never walks the whole loop: GPU drivers cap a unit's loop
/// iterations (lavapipe: 65,535), and a serial walk is slow anyway. In a nest that binds no
/// thread, the loop's one feature loop (if it allocates nothing) is then split by [`WARP`]
/// over `threadIdx.x`, so a cube is a warp rather than a single unit, and what the loop's
/// block reads once per iteration goes to registers first ([`read_once`]).
pub fn spread_atomic(sch: &mut Schedule) -> Result<()> {
    sch.need_loop_stage("auto::spread_atomic")?;
    let f = sch.func();
    // (the loop's first block, its variable, the tag, a feature loop inside it to put on lanes)
    let mut targets: Vec<(String, VarId, ThreadTag, Option<String>)> = Vec::new();
    for top in &f.body {
        if !matches!(top.kind, StmtKind::For(_)) {
            continue;
        }
        let mut tags = Vec::new();
        let mut shared = false;
        walk_stmts(std::slice::from_ref(top), &mut |s| match &s.kind {
            StmtKind::For(l) => {
                if let sparsec_ir::ForKind::Thread(t) = l.kind {
                    tags.push(t);
                }
            }
            StmtKind::Alloc(b) => shared |= f.buffers[*b].storage != sparsec_ir::Storage::Alloc(sparsec_ir::Scope::Local),
            _ => {}
        });
        if shared || tags.iter().any(|t| matches!(t, ThreadTag::BlockIdxY | ThreadTag::BlockIdxZ)) {
            continue;
        }
        // The primitive refuses a loop beside which the kernel writes global memory.
        let Some(l) = spreadable_loop(f, top) else { continue };
        let Some(block) = first_blocks(&l.body).first().map(|b| b.name.clone()) else { continue };
        let tag = if tags.contains(&ThreadTag::BlockIdxX) { ThreadTag::BlockIdxY } else { ThreadTag::BlockIdxX };
        let threads = tags.iter().any(|t| matches!(t, ThreadTag::ThreadIdxX | ThreadTag::ThreadIdxY | ThreadTag::ThreadIdxZ));
        targets.push((block, l.var, tag, if threads { None } else { lane_loop(&l.body) }));
    }
    for (block, var, tag, lanes) in targets {
        let b = sch.get_block(&block)?;
        for lp in sch.get_loops(b)? {
            if sch.loop_var(lp)? == var {
                // A loop the primitive refuses stays serial.
                if sch.bind(lp, tag).is_ok() {
                    if let Some(inner) = lanes {
                        // Where the primitives refuse, one unit per cube walks the features.
                        let mut trial = sch.clone();
                        if on_warp_lanes(&mut trial, &inner, &block).unwrap_or(false) {
                            *sch = trial;
                        }
                    }
                }
                break;
            }
        }
    }
    Ok(())
}

/// Reads into one-element `local` caches (registers), at the start of the body of `at` (a loop
/// or block), what block `name` reads at a single element there (a nonzero's value and
/// column); buffers the block reads elsewhere, or that the primitive refuses, are left.
fn read_once(sch: &mut Schedule, name: &str, at: crate::cache::CacheAt) {
    let reads: Vec<String> = {
        let f = sch.func();
        let mut names = Vec::new();
        walk_stmts(&f.body, &mut |s| {
            if let StmtKind::Block(blk) = &s.kind {
                if blk.name == name {
                    for r in &blk.reads {
                        let n = f.buffers[r.buffer].name.clone();
                        if f.buffers[r.buffer].storage != sparsec_ir::Storage::Alloc(sparsec_ir::Scope::Local) && !names.contains(&n) {
                            names.push(n);
                        }
                    }
                }
            }
        });
        names
    };
    for buf in reads {
        register_cache(sch, 1, |s| {
            let b = s.get_block(name)?;
            s.cache_read(b, &buf, sparsec_ir::Scope::Local, at)
        });
    }
}

/// Puts the feature loop of block `inner` on the lanes of a warp (split by [`WARP`], the inner
/// part on `threadIdx.x`; hyb's bucket kernels) and reads what it reads once per iteration of
/// its outer block `outer` into registers first. `Ok(false)`: no loop to split.
fn on_warp_lanes(sch: &mut Schedule, inner: &str, outer: &str) -> Result<bool> {
    let ib = sch.get_block(inner)?;
    let Some(&k) = sch.get_loops(ib)?.last() else { return Ok(false) };
    let parts = sch.split(k, &[None, Some(WARP)])?;
    sch.bind(parts[1], ThreadTag::ThreadIdxX)?;
    // The nonzero's value, row and column, once per cube.
    let ob = sch.get_block(outer)?;
    read_once(sch, inner, ob.into());
    Ok(true)
}

/// The block of the one loop in `body` when it is a feature loop ([`feature_block`]) and
/// `body` allocates nothing (a unit's local buffers would be split across lanes).
fn lane_loop(body: &[Stmt]) -> Option<String> {
    let mut loops: Vec<Option<String>> = Vec::new();
    let mut allocs = false;
    walk_stmts(body, &mut |s| match &s.kind {
        StmtKind::For(l) => loops.push(feature_block(l).map(|b| b.name.clone())),
        StmtKind::Alloc(_) => allocs = true,
        _ => {}
    });
    match loops.as_slice() {
        [Some(name)] if !allocs => Some(name.clone()),
        _ => None,
    }
}

/// The outermost serial loop in `stmt` with scalar bounds whose iterations only add
/// atomically (see [`spread_atomic`]).
fn spreadable_loop<'a>(f: &Func, stmt: &'a Stmt) -> Option<&'a sparsec_ir::For> {
    if let StmtKind::For(l) = &stmt.kind {
        if l.kind == sparsec_ir::ForKind::Serial && f.scalar_only(&l.min) && f.scalar_only(&l.extent) && atomic_only(f, &l.body) {
            return Some(l);
        }
    }
    stmt.kind.child_lists().into_iter().flatten().find_map(|s| spreadable_loop(f, s))
}

/// Whether `body` writes global memory only through `atomic_add` (at least one), reads none
/// of what it adds to, stores only into local buffers it allocates, and binds no thread.
fn atomic_only(f: &Func, body: &[Stmt]) -> bool {
    let mut ok = crate::loops::only_atomic_writes(f, body);
    walk_stmts(body, &mut |s| match &s.kind {
        StmtKind::For(l) => ok &= !matches!(l.kind, sparsec_ir::ForKind::Thread(_)),
        StmtKind::Store { buffer, .. } => {
            ok &= f.buffers[*buffer].storage == sparsec_ir::Storage::Alloc(sparsec_ir::Scope::Local)
        }
        _ => {}
    });
    ok
}

/// Stage I, before [`cpu`]: a sparse iteration whose every store writes a row of its
/// output along one dense spatial iterator `f` (`C[i, bi, f]`: the last index of each store
/// is `f`'s variable, over a `dense_fixed` axis), whose every read along `f` is a row too
/// (`B[j, bj, f]`), with a reduction iterator after `f`, gets `f` moved innermost
/// (`sparse_reorder`, when the primitive allows it). The reductions then walk around a
/// contiguous row of the output, which [`cpu`] vectorises, instead of each output element
/// walking them (BSR SpMM written `[I, BI, BJ, F, J]`: 12–20× on the shared matrices).
/// Iterations with fused, attached or merged axes, nested iterations or a store that does
/// not end in `f` are left as written.
pub fn cpu_sparse(sch: &mut Schedule) -> Result<()> {
    sch.need_stage_i("auto::cpu_sparse")?;
    let f = sch.func();
    let mut moves: Vec<(String, usize)> = Vec::new();
    for s in &f.body {
        let StmtKind::SpIter(it) = &s.kind else { continue };
        let Some(kinds) = it.iter_kinds() else { continue };
        let axes: Option<Vec<sparsec_ir::AxisId>> = it
            .axes
            .iter()
            .map(|a| match a {
                sparsec_ir::func::SpIterAxis::Axis(x) => Some(*x),
                _ => None,
            })
            .collect();
        let Some(axes) = axes else { continue };
        // The one variable every store's last index is.
        let mut last: Option<VarId> = None;
        let mut rows_only = true;
        let mut stores = 0;
        let bodies: Vec<Stmt> = it.init.iter().flatten().chain(&it.body).cloned().collect();
        walk_stmts(&bodies, &mut |st| match &st.kind {
            StmtKind::Store { indices, .. } => {
                stores += 1;
                match indices.last() {
                    Some(Expr::Var(v)) if last.is_none_or(|l| l == *v) => last = Some(*v),
                    _ => rows_only = false,
                }
            }
            StmtKind::SpIter(_) => rows_only = false,
            _ => {}
        });
        let Some(v) = last.filter(|_| rows_only && stores > 0) else { continue };
        let Some(k) = it.vars.iter().position(|x| *x == v) else { continue };
        let dense = f.axes[axes[k]].kind == sparsec_ir::AxisKind::DenseFixed;
        // Every read along `f` must also be a row (`B[j, bj, f]`): moving `f` innermost over
        // a strided operand (rgcn's `W[e, fo, fi]`) would turn its contiguous walks into
        // gathers.
        let mut contiguous = true;
        walk_stmts(&it.body, &mut |st| {
            for e in st.kind.exprs() {
                e.walk(&mut |x| {
                    if let Expr::Load(_, idx) = x {
                        let (head, tail) = idx.split_at(idx.len().saturating_sub(1));
                        contiguous &= !head.iter().any(|i| i.uses_var(v))
                            && tail.iter().all(|i| !i.uses_var(v) || *i == Expr::Var(v));
                    }
                });
            }
        });
        if dense && contiguous && kinds[k] == IterKind::Spatial && kinds[k + 1..].contains(&IterKind::Reduce) {
            moves.push((it.name.clone(), k));
        }
    }
    // A product's coordinates (SpGEMM's `C[i, k]`) are looked up once per product: a
    // position map, filled once per row, answers each in one load instead of a search
    // (ca-CondMat A·A: numeric kernel 174 → 21 ms on one thread), which beats the search
    // on both threads of the development machine.
    let mut maps: Vec<(String, String)> = Vec::new();
    for s in &f.body {
        let StmtKind::SpIter(it) = &s.kind else { continue };
        for (_, axis) in f.axes.iter() {
            if axis.pattern.as_ref().is_some_and(|p| p.op == sparsec_ir::PatternOp::Product) {
                maps.push((it.name.clone(), axis.name.clone()));
            }
        }
    }
    for (name, axis) in maps {
        let sp = sch.get_sparse_iteration(&name)?;
        // Iterations that do not look the axis up, or whose rows no loop fixes, keep searching.
        let mut trial = sch.clone();
        if trial.workspace(sp, &axis).is_ok() {
            *sch = trial;
        }
    }
    for (name, k) in moves {
        let sp = sch.get_sparse_iteration(&name)?;
        let iters = sch.get_sp_iters(sp)?;
        let mut order: Vec<_> = iters.iter().enumerate().filter(|(i, _)| *i != k).map(|(_, r)| *r).collect();
        order.push(iters[k]);
        // An order the primitive refuses (an axis before its parent) keeps the one written.
        let mut trial = sch.clone();
        if trial.sparse_reorder(sp, &order).is_ok() {
            *sch = trial;
        }
    }
    Ok(())
}

/// The whole CPU default on a schedule at any stage: [`cpu_sparse`] and `lower_sparse_iter`
/// at Stage I, then [`cpu`], then `contract`. Leaves the function at Stage II (or III when it
/// started there).
pub fn cpu_full(sch: &mut Schedule) -> Result<()> {
    cpu_full_tuned(sch, &CpuTuning::default())
}

/// [`cpu_full`] with the parameters `t`.
pub fn cpu_full_tuned(sch: &mut Schedule, t: &CpuTuning) -> Result<()> {
    if sch.func().stage == Stage::I {
        cpu_sparse(sch)?;
        sch.lower_sparse_iter()?;
    }
    cpu_tuned(sch, t)?;
    sch.contract()
}

/// `func` (any stage) with the CPU default, lowered to Stage III.
pub fn cpu_schedule(func: &Func) -> Result<Func> {
    cpu_schedule_tuned(func, &CpuTuning::default())
}

/// [`cpu_schedule`] with the parameters `t`.
pub fn cpu_schedule_tuned(func: &Func, t: &CpuTuning) -> Result<Func> {
    scheduled(func, |sch| cpu_full_tuned(sch, t))
}

/// `func` (any stage) with the GPU default of `threads` units per block, lowered to Stage III.
pub fn gpu_schedule(func: &Func, threads: i64) -> Result<Func> {
    gpu_schedule_tuned(func, threads, &GpuTuning::default())
}

/// [`gpu_schedule`] with the parameters `t`.
pub fn gpu_schedule_tuned(func: &Func, threads: i64, t: &GpuTuning) -> Result<Func> {
    scheduled(func, |s| gpu_full_tuned(s, threads, t))
}

/// Applies `apply` (which lowers to Stage II when needed) and lowers to Stage III.
fn scheduled(func: &Func, apply: impl FnOnce(&mut Schedule) -> Result<()>) -> Result<Func> {
    let mut sch = Schedule::new(func.clone())?;
    apply(&mut sch)?;
    if sch.func().stage == Stage::II {
        sch.lower_sparse_buffer()?;
    }
    Ok(sch.into_func())
}

/// An outermost loop: the first block found under it, whether its iterations are
/// independent, and how many loops from it down form a perfect chain of independent loops
/// with extents free of loads (1 when only the outermost qualifies).
struct Nest {
    block: String,
    independent: bool,
    /// The nest's first block is annotated `atomic` and only accumulates: its outer loop may
    /// run in parallel too (hyb's buckets, row segments), adding into shared rows atomically.
    atomic: bool,
    depth: usize,
}

/// The serial outermost loops of `f` (not under any loop or block) that contain a block.
fn nests(f: &Func) -> Vec<Nest> {
    let mut out = Vec::new();
    let outer = tree::find_all(&f.body, &|s| matches!(s.kind, StmtKind::For(_)));
    for path in outer {
        let Some(stmt) = tree::get(&f.body, &path) else { continue };
        let StmtKind::For(l) = &stmt.kind else { continue };
        let enclosed = tree::ancestors(&f.body, &path)
            .iter()
            .any(|s| matches!(s.kind, StmtKind::For(_) | StmtKind::Block(_)));
        if enclosed || l.kind != sparsec_ir::ForKind::Serial {
            continue;
        }
        let firsts = first_blocks(&l.body);
        let Some(first) = firsts.first() else { continue };
        // Blocks' iterator kinds are trusted; a store beside them (a position map's fill) is not.
        let independent = firsts.iter().all(|b| drives_only_spatial(b, l.var)) && !stores_beside_blocks(&l.body);
        let atomic = firsts.len() == 1
            && first.attrs.get(sparsec_passes::ATOMIC_ATTR) == Some(&AttrValue::Bool(true))
            && first.init.is_none()
            && sparsec_passes::accumulates_only(f, &first.body);
        out.push(Nest { block: first.name.clone(), independent, atomic, depth: chain_depth(l) });
    }
    out
}

/// 1 + the number of loops directly nested under `l`, one in the other, that are
/// independent and whose extents read no buffer.
fn chain_depth(l: &sparsec_ir::For) -> usize {
    let mut depth = 1;
    let mut cur = l;
    while let [Stmt { kind: StmtKind::For(inner), .. }] = cur.body.as_slice() {
        let firsts = first_blocks(&inner.body);
        let ok = inner.kind == sparsec_ir::ForKind::Serial
            && !firsts.is_empty()
            && firsts.iter().all(|b| drives_only_spatial(b, inner.var))
            && !reads_buffer(&inner.extent)
            && !reads_buffer(&inner.min);
        if !ok {
            break;
        }
        depth += 1;
        cur = inner;
    }
    depth
}

/// Whether `body` stores, outside every block, to a buffer it does not allocate itself.
fn stores_beside_blocks(body: &[Stmt]) -> bool {
    fn rec(stmts: &[Stmt], own: &mut Vec<sparsec_ir::BufferId>) -> bool {
        let mut hit = false;
        for s in stmts {
            match &s.kind {
                StmtKind::Block(_) => {}
                StmtKind::Alloc(b) => own.push(*b),
                StmtKind::Store { buffer, .. } => hit |= !own.contains(buffer),
                k => {
                    for child in k.child_lists() {
                        hit |= rec(child, own);
                    }
                }
            }
        }
        hit
    }
    rec(body, &mut Vec::new())
}

/// Whether `e` loads from a buffer.
fn reads_buffer(e: &Expr) -> bool {
    let mut hit = false;
    e.walk(&mut |x| hit |= matches!(x, Expr::Load(..) | Expr::AtomicAdd(..)));
    hit
}

/// Whether `v` feeds some spatial iterator of `b` and no reduction iterator.
fn drives_only_spatial(b: &Block, v: VarId) -> bool {
    let uses: Vec<IterKind> = b.iters.iter().filter(|it| it.binding.uses_var(v)).map(|it| it.kind).collect();
    !uses.is_empty() && uses.iter().all(|k| *k == IterKind::Spatial)
}

/// The blocks in `body` with no block between them and `body`.
fn first_blocks(body: &[Stmt]) -> Vec<&Block> {
    fn rec<'a>(stmts: &'a [Stmt], out: &mut Vec<&'a Block>) {
        for s in stmts {
            match &s.kind {
                StmtKind::Block(b) => out.push(b),
                k => {
                    for child in k.child_lists() {
                        rec(child, out);
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    rec(body, &mut out);
    out
}

/// (block, loop variable) for every serial loop whose whole body is one block that the
/// loop drives only through spatial iterators.
fn vector_candidates(f: &Func) -> Vec<(String, VarId)> {
    let mut out = Vec::new();
    walk_stmts(&f.body, &mut |s| {
        if let StmtKind::For(l) = &s.kind {
            if let Some(b) = feature_block(l) {
                out.push((b.name.clone(), l.var));
            }
        }
    });
    out
}

/// The block of `l` when `l` is a serial loop whose whole body is one loop-free block that it
/// drives only through spatial iterators (a feature loop).
fn feature_block(l: &sparsec_ir::For) -> Option<&Block> {
    let [Stmt { kind: StmtKind::Block(b), .. }] = l.body.as_slice() else { return None };
    let no_loops = !contains_loop(&b.body) && b.init.as_deref().is_none_or(|i| !contains_loop(i));
    (l.kind == sparsec_ir::ForKind::Serial && no_loops && drives_only_spatial(b, l.var)).then_some(b)
}

/// Whether `body` holds a loop at any depth.
fn contains_loop(body: &[Stmt]) -> bool {
    let mut found = false;
    walk_stmts(body, &mut |s| found |= matches!(s.kind, StmtKind::For(_)));
    found
}
