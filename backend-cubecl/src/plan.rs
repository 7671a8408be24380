//! From a Stage-III function to kernel plans: which top-level statements form which kernel,
//! how each kernel is launched, and which buffers and scalars it takes.
//!
//! * Each top-level statement that does work becomes one kernel; kernels launch in order.
//!   Top-level `let`s are repeated at the start of every later kernel.
//! * A kernel whose nest holds thread-bound loops is launched with, per thread tag, the largest
//!   extent of the loops bound to it (extents must depend on scalar parameters only).
//! * A kernel without thread bindings whose outermost loop is spatial (its variable only
//!   feeds spatial block iterators) runs one unit per iteration of that loop; otherwise the
//!   whole nest runs in one unit.
//! * A kernel without thread bindings that only accumulates (every store is
//!   `B[i] = B[i] + e`, and nothing it writes is read otherwise), and whose perfectly nested
//!   spatial loops reach a sparse loop (a trip count that reads buffers), runs one unit per
//!   iteration point of those loops, and its accumulations become atomic: the order of the
//!   additions is then free. The sparse loop is bounded by the extent of the spatial block
//!   iterator it binds (say `m` for the rows of one relation of RGCN).

use sparsec_ir::{
    BufferId, DType, Expr, ForKind, Func, IterKind, Layout, ParamId, ParamKind, Scope, Stmt, StmtKind, Storage,
    ThreadTag, VarId,
};
use std::collections::BTreeSet;

/// Why a function cannot be planned into kernels.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The function is not at Stage III.
    #[error("the CubeCL backend takes a Stage-III function, found Stage {0}")]
    NotStageIII(sparsec_ir::Stage),
    /// A construct the backend cannot express.
    #[error("{0}")]
    Unsupported(String),
}

/// Where a kernel buffer argument's storage comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ArgSource {
    /// A handle parameter.
    Param(ParamId),
    /// A function-level global allocation (device storage made by the launcher).
    Global(BufferId),
}

/// One buffer argument of a kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelBuf {
    /// Storage.
    pub source: ArgSource,
    /// Name used in emitted code.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Whether the kernel adds to it atomically (then every access is atomic).
    pub atomic: bool,
}

/// How a kernel is launched.
#[derive(Clone, Debug, PartialEq)]
pub enum LaunchPlan {
    /// Thread-bound loops: per tag (blockIdx.x/y/z, threadIdx.x/y/z), the extents of the loops
    /// bound to it; the launch uses the largest.
    Threads {
        /// Extents per tag, in [`ThreadTag::ALL`] order.
        extents: [Vec<Expr>; 6],
    },
    /// One unit per iteration point of a chain of perfectly nested loops, outermost first;
    /// `ABSOLUTE_POS` is split into one coordinate per loop (the last varies fastest) and
    /// each loop runs `min + coordinate` when the coordinate is below its extent.
    PerIteration {
        /// The loops, outermost first.
        loops: Vec<PointLoop>,
    },
    /// A single unit runs everything.
    Single,
}

/// One loop of a [`LaunchPlan::PerIteration`] launch.
#[derive(Clone, Debug, PartialEq)]
pub struct PointLoop {
    /// The loop variable.
    pub var: VarId,
    /// An upper bound on the loop's trip count that depends on scalar parameters only.
    pub bound: Expr,
}

/// Units per cube used for [`LaunchPlan::PerIteration`].
pub const DEFAULT_CUBE_DIM: u32 = 64;

/// One kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelPlan {
    /// Kernel name (`<func>_k<i>`).
    pub name: String,
    /// Top-level `let`s and allocations that precede the kernel's statement.
    pub prelude: Vec<Stmt>,
    /// The statement the kernel runs.
    pub stmt: Stmt,
    /// Launch shape.
    pub launch: LaunchPlan,
    /// Buffer arguments, in order.
    pub bufs: Vec<KernelBuf>,
    /// Scalar parameters passed to the kernel, in parameter order.
    pub scalars: Vec<(ParamId, VarId)>,
    /// Whether the kernel uses shared memory (then it synchronises around shared accesses).
    pub uses_shared: bool,
    /// A serial loop of a thread-bound kernel whose iterations only add atomically: they are
    /// spread over `blockIdx.y` ([`SPREAD_CUBES`] at most, each cube striding by the count).
    pub spread: Option<VarId>,
}

/// Most cubes along `blockIdx.y` for a spread loop.
pub const SPREAD_CUBES: i64 = 65_535;

/// The kernels of one function, with what the launcher must provide.
#[derive(Clone, Debug)]
pub struct ProgramPlan {
    /// The Stage-III function.
    pub func: Func,
    /// Kernels in launch order.
    pub kernels: Vec<KernelPlan>,
    /// Element type of each handle parameter bound by a buffer (`None` when unbound).
    pub param_dtypes: Vec<Option<DType>>,
    /// Function-level global allocations that kernels use.
    pub globals: Vec<BufferId>,
}

fn unsupported<T>(msg: impl Into<String>) -> Result<T, PlanError> {
    Err(PlanError::Unsupported(msg.into()))
}

/// Whether an expression depends only on literals and scalar parameters.
pub fn host_evaluable(func: &Func, e: &Expr) -> bool {
    let scalars: Vec<VarId> = func.params.iter().filter_map(|p| match p.kind {
        ParamKind::Scalar(v) => Some(v),
        ParamKind::Handle => None,
    }).collect();
    let mut ok = true;
    e.walk(&mut |x| match x {
        Expr::Var(v) => ok &= scalars.contains(v),
        Expr::Load(..) | Expr::AtomicAdd(..) => ok = false,
        _ => {}
    });
    ok
}

/// Plans the kernels of a Stage-III function.
pub fn plan(func: &Func) -> Result<ProgramPlan, PlanError> {
    if func.stage != sparsec_ir::Stage::III {
        return Err(PlanError::NotStageIII(func.stage));
    }
    let mut param_dtypes: Vec<Option<DType>> = vec![None; func.params.len()];
    for (_, b) in func.buffers.iter() {
        if b.dtype == DType::Bool {
            return unsupported(format!("buffer `{}` holds bool, which GPU buffers cannot hold; use i32", b.name));
        }
        match b.storage {
            Storage::Param(p) => match param_dtypes.get(p).copied().flatten() {
                Some(d) if d != b.dtype => {
                    return unsupported(format!(
                        "parameter `{}` is bound by buffers of two dtypes ({d} and {})",
                        func.params[p].name, b.dtype
                    ));
                }
                _ => {
                    if let Some(slot) = param_dtypes.get_mut(p) {
                        *slot = Some(b.dtype);
                    }
                }
            },
            Storage::Alloc(_) => {
                if !matches!(b.layout, Layout::Dense(_)) {
                    return unsupported(format!("allocated buffer `{}` is not flat", b.name));
                }
            }
        }
    }
    let stmt_allocs: BTreeSet<BufferId> = func.stmt_allocated_buffers().into_iter().collect();
    let mut globals = Vec::new();
    for (b, buf) in func.buffers.iter() {
        if let Storage::Alloc(scope) = buf.storage {
            if !stmt_allocs.contains(&b) {
                match scope {
                    Scope::Global => globals.push(b),
                    _ => {
                        return unsupported(format!(
                            "function-level {} buffer `{}`: allocate it with a statement inside the kernel",
                            scope.name(),
                            buf.name
                        ))
                    }
                }
            }
        }
    }
    let mut kernels = Vec::new();
    let mut prelude: Vec<Stmt> = Vec::new();
    for s in &func.body {
        match &s.kind {
            StmtKind::Let { .. } => prelude.push(s.clone()),
            StmtKind::Alloc(b) => {
                let buf = &func.buffers[*b];
                if buf.storage == Storage::Alloc(Scope::Global) {
                    // Runs once: the same as a function-level allocation.
                    globals.push(*b);
                } else {
                    prelude.push(s.clone());
                }
            }
            StmtKind::SpIter(_) => return unsupported("sparse iterations must be lowered before the CubeCL backend"),
            _ => {
                let name = format!("{}_k{}", sanitize(&func.name), kernels.len());
                kernels.push(plan_kernel(func, name, prelude.clone(), s.clone(), &globals)?);
            }
        }
    }
    Ok(ProgramPlan { func: func.clone(), kernels, param_dtypes, globals })
}

/// A Rust identifier made of the name's alphanumerics.
pub fn sanitize(name: &str) -> String {
    let mut s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

fn tag_index(t: ThreadTag) -> usize {
    ThreadTag::ALL.iter().position(|x| *x == t).unwrap_or(0)
}

fn plan_kernel(func: &Func, name: String, prelude: Vec<Stmt>, stmt: Stmt, globals: &[BufferId]) -> Result<KernelPlan, PlanError> {
    // Thread-bound loops.
    let mut extents: [Vec<Expr>; 6] = Default::default();
    let mut bound = false;
    let all = [prelude.clone(), vec![stmt.clone()]].concat();
    sparsec_ir::walk_stmts(&all, &mut |s| {
        if let StmtKind::For(f) = &s.kind {
            if let ForKind::Thread(t) = f.kind {
                bound = true;
                extents[tag_index(t)].push(f.extent.clone());
            }
        }
    });
    for (t, list) in ThreadTag::ALL.iter().zip(&extents) {
        for e in list {
            if !host_evaluable(func, e) {
                return unsupported(format!(
                    "the extent of a loop bound to {} must depend on scalar parameters only",
                    t.name()
                ));
            }
        }
    }
    check_nesting(&all, &mut Vec::new())?;
    let mut stmt = stmt;
    let mut spread = None;
    let launch = if bound {
        // Serial work under thread-bound loops that only adds atomically is spread over
        // `blockIdx.y` when that tag is free: one unit walking it alone may hit a driver's
        // loop limit (lavapipe) and runs it slowly anyway.
        let mut extents = extents;
        if extents[1].is_empty() && extents[2].is_empty() && !uses_shared_alloc(func, &all) {
            // Everything outside the loop runs again in every cube along y: it must write
            // no global memory.
            let spreadable = spreadable_loop(func, &stmt).filter(|f| global_writes(func, &all) == global_writes(func, &f.body));
            if let Some(f) = spreadable {
                let cap = Expr::Int(SPREAD_CUBES, func.expr_dtype(&f.extent));
                extents[1].push(Expr::Binary(sparsec_ir::BinOp::Min, Box::new(f.extent.clone()), Box::new(cap)));
                spread = Some(f.var);
            }
        }
        LaunchPlan::Threads { extents }
    } else {
        let (chain, sparse) = point_chain(func, &stmt);
        // Only worth atomics when the outer loop alone would leave a sparse loop to walk
        // serially in each unit.
        if chain.len() > 1 && sparse && sparsec_passes::accumulates_only(func, std::slice::from_ref(&stmt)) {
            make_atomic(&mut stmt);
            LaunchPlan::PerIteration { loops: chain }
        } else {
            match &stmt.kind {
                StmtKind::For(f)
                    if host_evaluable(func, &f.extent) && host_evaluable(func, &f.min) && spatial_loop(&f.body, f.var) =>
                {
                    LaunchPlan::PerIteration { loops: vec![PointLoop { var: f.var, bound: f.extent.clone() }] }
                }
                _ => LaunchPlan::Single,
            }
        }
    };
    let all = [prelude.clone(), vec![stmt.clone()]].concat();
    // Buffers and scalars used.
    let mut used: BTreeSet<BufferId> = BTreeSet::new();
    let mut atomic: BTreeSet<BufferId> = BTreeSet::new();
    let mut uses_shared = false;
    sparsec_ir::walk_stmts(&all, &mut |s| {
        if let StmtKind::Store { buffer, .. } = &s.kind {
            used.insert(*buffer);
        }
        if let StmtKind::Alloc(b) = &s.kind {
            uses_shared |= func.buffers[*b].storage == Storage::Alloc(Scope::Shared);
        }
        for e in s.kind.exprs() {
            e.walk(&mut |x| match x {
                Expr::Load(b, _) => {
                    used.insert(*b);
                }
                Expr::AtomicAdd(b, _, _) => {
                    used.insert(*b);
                    atomic.insert(*b);
                }
                _ => {}
            });
        }
    });
    let mut bufs: Vec<KernelBuf> = Vec::new();
    for b in &used {
        let buf = &func.buffers[*b];
        let source = match buf.storage {
            Storage::Param(p) => ArgSource::Param(p),
            Storage::Alloc(Scope::Global) if globals.contains(b) => ArgSource::Global(*b),
            Storage::Alloc(Scope::Global) => {
                return unsupported(format!(
                    "global buffer `{}` is allocated inside a kernel; allocate it at function level",
                    buf.name
                ))
            }
            Storage::Alloc(_) => continue,
        };
        let is_atomic = atomic.iter().any(|a| func.buffers[*a].storage == buf.storage);
        match bufs.iter_mut().find(|k| k.source == source) {
            Some(k) => k.atomic |= is_atomic,
            None => bufs.push(KernelBuf {
                source,
                name: match source {
                    ArgSource::Param(p) => sanitize(&func.params[p].name),
                    ArgSource::Global(_) => sanitize(&buf.name),
                },
                dtype: buf.dtype,
                atomic: is_atomic,
            }),
        }
    }
    bufs.sort_by_key(|k| k.source);
    // Every scalar parameter is passed: extents and guards may read any of them.
    let scalars = func
        .params
        .iter()
        .enumerate()
        .filter_map(|(p, param)| match param.kind {
            ParamKind::Scalar(v) => Some((p, v)),
            ParamKind::Handle => None,
        })
        .collect();
    Ok(KernelPlan { name, prelude, stmt, launch, bufs, scalars, uses_shared, spread })
}

/// How many statements and expressions write global memory.
fn global_writes(func: &Func, stmts: &[Stmt]) -> usize {
    let global = |b: &BufferId| !matches!(func.buffers[*b].storage, Storage::Alloc(Scope::Local | Scope::Shared));
    let mut n = 0;
    sparsec_ir::walk_stmts(stmts, &mut |s| {
        if let StmtKind::Store { buffer, .. } = &s.kind {
            n += global(buffer) as usize;
        }
        for e in s.kind.exprs() {
            e.walk(&mut |x| {
                if let Expr::AtomicAdd(b, ..) = x {
                    n += global(b) as usize;
                }
            });
        }
    });
    n
}

fn uses_shared_alloc(func: &Func, stmts: &[Stmt]) -> bool {
    let mut hit = false;
    sparsec_ir::walk_stmts(stmts, &mut |s| {
        if let StmtKind::Alloc(b) = &s.kind {
            hit |= func.buffers[*b].storage != Storage::Alloc(Scope::Local);
        }
    });
    hit
}

/// The outermost serial loop under `stmt` (outside thread-bound loops' bodies' own thread
/// loops) with scalar bounds whose iterations are independent up to the order of atomic
/// additions: its body writes global memory only through `atomic_add`, never reads what it
/// adds to, stores only into local buffers it allocates itself, and holds no thread-bound loop.
fn spreadable_loop<'a>(func: &Func, stmt: &'a Stmt) -> Option<&'a sparsec_ir::For> {
    if let StmtKind::For(f) = &stmt.kind {
        if matches!(f.kind, ForKind::Serial | ForKind::Parallel)
            && host_evaluable(func, &f.min)
            && host_evaluable(func, &f.extent)
            && atomic_only(func, &f.body)
        {
            return Some(f);
        }
    }
    stmt.kind.child_lists().into_iter().flatten().find_map(|s| spreadable_loop(func, s))
}

fn atomic_only(func: &Func, body: &[Stmt]) -> bool {
    let mut own: BTreeSet<BufferId> = BTreeSet::new();
    let mut added: BTreeSet<BufferId> = BTreeSet::new();
    let mut loaded: BTreeSet<BufferId> = BTreeSet::new();
    let mut ok = true;
    sparsec_ir::walk_stmts(body, &mut |s| {
        match &s.kind {
            StmtKind::Alloc(b) => {
                own.insert(*b);
            }
            StmtKind::For(f) if matches!(f.kind, ForKind::Thread(_)) => ok = false,
            _ => {}
        }
        for e in s.kind.exprs() {
            e.walk(&mut |x| match x {
                Expr::Load(b, _) => {
                    loaded.insert(*b);
                }
                Expr::AtomicAdd(b, _, _) => {
                    added.insert(*b);
                }
                _ => {}
            });
        }
    });
    sparsec_ir::walk_stmts(body, &mut |s| {
        if let StmtKind::Store { buffer, .. } = &s.kind {
            ok &= own.contains(buffer) && func.buffers[*buffer].storage == Storage::Alloc(Scope::Local);
        }
    });
    let storage = |b: &BufferId| func.buffers[*b].storage;
    ok && !added.is_empty() && !added.iter().any(|a| loaded.iter().any(|l| storage(l) == storage(a)))
}

/// Rejects a loop bound to a tag nested in another loop bound to the same tag.
fn check_nesting(stmts: &[Stmt], active: &mut Vec<ThreadTag>) -> Result<(), PlanError> {
    for s in stmts {
        let pushed = match &s.kind {
            StmtKind::For(f) => match f.kind {
                ForKind::Thread(t) => {
                    if active.contains(&t) {
                        return unsupported(format!("a loop bound to {} is nested in another one", t.name()));
                    }
                    active.push(t);
                    true
                }
                _ => false,
            },
            _ => false,
        };
        for c in s.kind.child_lists() {
            check_nesting(c, active)?;
        }
        if pushed {
            active.pop();
        }
    }
    Ok(())
}

/// Whether loop variable `v` is used, and used only, as the binding of spatial block
/// iterators (so distinct iterations are independent).
fn spatial_loop(body: &[Stmt], v: VarId) -> bool {
    loop_drives(body, v, true)
}

/// Whether loop variable `v` is used, and used only, as the binding of block iterators
/// (spatial ones only if `spatial`).
fn loop_drives(body: &[Stmt], v: VarId, spatial: bool) -> bool {
    let mut spatial_uses = 0usize;
    let mut other_uses = 0usize;
    sparsec_ir::walk_stmts(body, &mut |s| {
        if let StmtKind::Block(b) = &s.kind {
            for it in &b.iters {
                if it.binding.uses_var(v) {
                    if it.kind == IterKind::Spatial || !spatial {
                        spatial_uses += 1;
                    } else {
                        other_uses += 1;
                    }
                }
                if it.extent.uses_var(v) {
                    other_uses += 1;
                }
            }
        } else {
            for e in s.kind.exprs() {
                if e.uses_var(v) {
                    other_uses += 1;
                }
            }
        }
    });
    spatial_uses > 0 && other_uses == 0
}

/// The perfectly nested loops from the top of `stmt`: each loop's body is one loop, or blocks
/// without `init` whose bodies are one statement around one loop. A loop joins when it only
/// drives block iterators and its trip count is bounded by scalars: its extent, or (spatial
/// iterators only) the extent of the block iterator its variable is bound to (then the loop
/// is sparse, the second result).
fn point_chain(func: &Func, stmt: &Stmt) -> (Vec<PointLoop>, bool) {
    let mut out = Vec::new();
    let mut sparse = false;
    let mut cur = stmt;
    while let StmtKind::For(f) = &cur.kind {
        // Accumulations are atomic here, so a dense loop over reduction iterators (RGCN's
        // relations) joins too; a sparse one joins only when spatial, since its bound (the
        // axis extent) may far exceed its trip count (a row's nonzeros).
        if !matches!(f.kind, ForKind::Serial | ForKind::Parallel) || !loop_drives(&f.body, f.var, false) {
            break;
        }
        let bound = if host_evaluable(func, &f.extent) {
            f.extent.clone()
        } else if !spatial_loop(&f.body, f.var) {
            break;
        } else {
            // `v = i` with `v < E` bounds the trip count by `E` when the loop starts at 0.
            match iterator_bound(func, &f.body, f.var).filter(|_| f.min.as_int() == Some(0)) {
                Some(b) => {
                    sparse = true;
                    b
                }
                None => break,
            }
        };
        out.push(PointLoop { var: f.var, bound });
        let mut next = match f.body.as_slice() {
            [one] => one,
            _ => break,
        };
        while let StmtKind::Block(b) = &next.kind {
            match (b.init.as_ref(), b.body.as_slice()) {
                (None, [one]) => next = one,
                _ => return (out, sparse),
            }
        }
        cur = next;
    }
    (out, sparse)
}

/// The scalar extent of an iterator of a block directly under a loop (through
/// single-statement blocks) that is bound to exactly `v`.
fn iterator_bound(func: &Func, body: &[Stmt], v: VarId) -> Option<Expr> {
    let [one] = body else { return None };
    let StmtKind::Block(b) = &one.kind else { return None };
    b.iters
        .iter()
        .find(|it| it.binding == Expr::Var(v) && host_evaluable(func, &it.extent))
        .map(|it| it.extent.clone())
}

/// Rewrites every accumulating store under `stmt` into `atomic_add`.
fn make_atomic(stmt: &mut Stmt) {
    if let StmtKind::Store { buffer, indices, value } = &stmt.kind {
        if let Some(e) = sparsec_passes::accumulation(*buffer, indices, value) {
            stmt.kind = StmtKind::Evaluate(Expr::AtomicAdd(*buffer, indices.clone(), Box::new(e)));
        }
        return;
    }
    for list in stmt.kind.child_lists_mut() {
        list.iter_mut().for_each(make_atomic);
    }
}

/// Evaluates an integer expression over scalar parameter values (`None` when it reads
/// anything else or divides by zero).
pub fn host_eval(e: &Expr, scalars: &std::collections::HashMap<VarId, i64>) -> Option<i64> {
    Some(match e {
        Expr::Int(v, _) => *v,
        Expr::Var(v) => *scalars.get(v)?,
        Expr::Cast(_, a) => host_eval(a, scalars)?,
        Expr::Unary(sparsec_ir::UnOp::Neg, a) => host_eval(a, scalars)?.checked_neg()?,
        Expr::Binary(op, a, b) => {
            let (a, b) = (host_eval(a, scalars)?, host_eval(b, scalars)?);
            use sparsec_ir::BinOp::*;
            match op {
                Add => a.checked_add(b)?,
                Sub => a.checked_sub(b)?,
                Mul => a.checked_mul(b)?,
                Div => a.checked_div(b)?,
                FloorDiv => {
                    let q = a.checked_div(b)?;
                    if (a % b != 0) && ((a < 0) != (b < 0)) { q - 1 } else { q }
                }
                FloorMod => {
                    let r = a.checked_rem(b)?;
                    if r != 0 && ((r < 0) != (b < 0)) { r + b } else { r }
                }
                Min => a.min(b),
                Max => a.max(b),
                _ => return None,
            }
        }
        _ => return None,
    })
}
