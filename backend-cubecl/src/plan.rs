//! From a Stage-III function to kernel plans: which top-level statements form which kernel,
//! how each kernel is launched, and which buffers and scalars it takes.
//!
//! * Each top-level statement that does work becomes one kernel; kernels launch in order.
//!   Top-level `let`s are repeated at the start of every later kernel.
//! * A kernel whose nest holds thread-bound loops is launched with, per thread tag, the largest
//!   extent of the loops bound to it (extents must depend on scalar parameters only); a
//!   kernel without thread bindings runs in a single unit. Where a nest runs in parallel is
//!   decided by its schedule (`sparsec_schedule::auto` by default), never here.

use sparsec_ir::{
    BufferId, DType, Expr, ForKind, Func, Layout, ParamId, ParamKind, Scope, Stmt, StmtKind, Storage,
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
    #[error("unsupported by the CubeCL backend: {0}")]
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
    /// A single unit runs everything.
    Single,
}

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
}

/// Most cubes along `blockIdx.y` or `blockIdx.z`: a loop bound to either with a larger
/// extent runs on this many cubes, each striding by the count.
pub const MAX_CUBES_YZ: i64 = 65_535;

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

/// Whether an expression depends only on literals and scalar parameters
/// ([`Func::scalar_only`]).
pub fn host_evaluable(func: &Func, e: &Expr) -> bool {
    func.scalar_only(e)
}

/// Plans the kernels of a Stage-III function (after [`state_across_kernels`]).
pub fn plan(func: &Func) -> Result<ProgramPlan, PlanError> {
    if func.stage != sparsec_ir::Stage::III {
        return Err(PlanError::NotStageIII(func.stage));
    }
    let func = &state_across_kernels(func)?;
    let mut param_dtypes: Vec<Option<DType>> = vec![None; func.params.len()];
    for (_, b) in func.buffers.iter() {
        // An allocated bool buffer is kept as i32 (`lower::stored`); a parameter cannot be.
        if b.dtype == DType::Bool && matches!(b.storage, Storage::Param(_)) {
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

/// `func` with the values that top-level statements pass to later ones kept in global
/// buffers, since each top-level statement is a kernel of its own and a `let` is repeated at
/// the start of every later kernel: a top-level `let` that reads a buffer becomes a store to
/// a one-element global buffer where it stood (a later kernel would read the buffer after
/// the kernels between had changed it), read where the variable was; a top-level `local`
/// buffer that one statement writes and another reads becomes global (every kernel would
/// otherwise start from a fresh one; `insert_checks` keeps a checked `let`'s value in one).
/// Such a buffer stored by a statement holding thread-bound loops is refused: its units would
/// share it.
pub fn state_across_kernels(func: &Func) -> Result<Func, PlanError> {
    let mut f = func.clone();
    let body = std::mem::take(&mut f.body);
    let mut subst = std::collections::HashMap::new();
    for mut s in body {
        if !subst.is_empty() {
            let mut one = [s];
            sparsec_ir::map_exprs_deep(&mut one, &mut |e| e.substitute(&subst));
            let [x] = one;
            s = x;
        }
        match s.kind {
            StmtKind::Let { var, value } if !f.scalar_only(&value) => {
                let mut taken = sparsec_ir::names::function_names(&f);
                let name = sparsec_ir::names::fresh_in(&mut taken, &format!("{}_value", f.vars[var].name));
                let b = f.buffers.append(sparsec_ir::Buffer {
                    name,
                    dtype: f.vars[var].dtype,
                    layout: Layout::Dense(vec![Expr::i32(1)]),
                    storage: Storage::Alloc(Scope::Global),
                    extra_storage: None,
                    default: None,
                    modes: None,
                    span: s.span,
                });
                subst.insert(var, Expr::Load(b, vec![Expr::i32(0)]));
                f.body.push(Stmt { kind: StmtKind::Store { buffer: b, indices: vec![Expr::i32(0)], value }, span: s.span });
            }
            kind => f.body.push(Stmt { kind, span: s.span }),
        }
    }
    // Top-level local buffers touched by more than one top-level statement.
    let mut shared = Vec::new();
    for (k, s) in f.body.iter().enumerate() {
        let StmtKind::Alloc(b) = s.kind else { continue };
        if f.buffers[b].storage != Storage::Alloc(Scope::Local) {
            continue;
        }
        let touching = f.body[k + 1..].iter().filter(|t| touches(std::slice::from_ref(*t), b)).count();
        if touching > 1 {
            shared.push(b);
        }
    }
    for b in shared {
        let threaded_store =
            f.body.iter().any(|s| sparsec_ir::has_bound_loop(s) && sparsec_ir::written_buffers(std::slice::from_ref(s)).contains(&b));
        if threaded_store {
            return unsupported(format!(
                "top-level local buffer `{}` passes a value between kernels and is stored under thread-bound loops",
                f.buffers[b].name
            ));
        }
        f.buffers[b].storage = Storage::Alloc(Scope::Global);
    }
    Ok(f)
}

/// Whether `stmts` load, store or allocate buffer `b`.
fn touches(stmts: &[Stmt], b: BufferId) -> bool {
    let mut hit = false;
    sparsec_ir::walk_stmts(stmts, &mut |s| {
        hit |= matches!(&s.kind, StmtKind::Store { buffer, .. } if *buffer == b);
        for e in s.kind.exprs() {
            e.walk(&mut |x| hit |= matches!(x, Expr::Load(y, _) | Expr::AtomicAdd(y, _, _) if *y == b));
        }
    });
    hit
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
    if let Some(r) = sparsec_ir::repeated_update(func, &stmt) {
        return unsupported(format!("kernel `{name}` is not supported: {r}"));
    }
    if let Some(r) = sparsec_ir::scope_across_units(func, &stmt) {
        return unsupported(format!("kernel `{name}` is not supported: {r}"));
    }
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
    let launch = if bound { LaunchPlan::Threads { extents } } else { LaunchPlan::Single };
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
                    "global buffer `{}` allocated inside a kernel is not supported; allocate it at function level",
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
    Ok(KernelPlan { name, prelude, stmt, launch, bufs, scalars, uses_shared })
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
