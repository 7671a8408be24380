//! Loading, checking, lowering and running `.sptir` programs: what the CLI does, as a library.

use sparsec_ir::span::SourceFile;
use sparsec_ir::{text, verify, Func, Module, Stage};
use std::path::{Path, PathBuf};

/// What can go wrong in the driver. Parse and verifier errors are already rendered with
/// `file:line:col`.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// The text does not parse.
    #[error("{0}")]
    Parse(#[from] text::ParseError),
    /// The IR breaks a verifier rule (every error, rendered).
    #[error("{0}")]
    Verify(String),
    /// The module has several functions and none was chosen, or the chosen one is missing.
    #[error("{0}")]
    NoSuchFunction(String),
    /// A pass failed.
    #[error("{0}")]
    Pass(#[from] sparsec_passes::PassError),
    /// A schedule primitive failed while replaying a trace.
    #[error("schedule: {0}")]
    Schedule(#[from] sparsec_schedule::ScheduleError),
    /// A trace file is not valid JSON of a trace.
    #[error("{path}: not a schedule trace: {source}")]
    Trace {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: serde_json::Error,
    },
    /// Lowering only goes down: the function is already past the stage asked for.
    #[error("`{func}` is at Stage {at}; it cannot be raised to Stage {want}")]
    CannotRaise {
        /// The function.
        func: String,
        /// Its stage.
        at: Stage,
        /// The stage asked for.
        want: Stage,
    },
}

/// Arguments refused before compiled code runs ([`check_compiled_args`]), rendered with
/// `file:line:col` where they concern a statement.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ArgsRefused(pub String);

/// Checks `args` against the Stage-I function `func` of `loaded` before a code generator
/// runs any lowering of it: the sparse structure, and every index and divisor proven in
/// range ([`sparsec_ir::args`]). The interpreter checks as it goes and needs none of this.
pub fn check_compiled_args(loaded: &Loaded, func: &Func, args: &sparsec_ir::data::Args) -> Result<(), ArgsRefused> {
    use sparsec_ir::args::{check_accesses, check_structure, ArgsError};
    let result = check_structure(func, args).and_then(|()| check_accesses(func, args));
    result.map_err(|e| match e {
        ArgsError::Access { span, message } => ArgsRefused(
            SourceFile::new(&loaded.name, &loaded.text)
                .render(span, &format!("{message}; compiled code does not check indices (run it with --backend interp)")),
        ),
        other => ArgsRefused(format!("{}: {other}", loaded.name)),
    })
}

/// A parsed and verified source file.
pub struct Loaded {
    /// Path shown in diagnostics.
    pub name: String,
    /// The source text.
    pub text: String,
    /// The module.
    pub module: Module,
}

impl Loaded {
    /// The function called `name`, or the only function when `name` is `None`.
    pub fn func(&self, name: Option<&str>) -> Result<&Func, DriverError> {
        match name {
            Some(n) => self.module.func(n).ok_or_else(|| {
                let known: Vec<&str> = self.module.funcs.iter().map(|f| f.name.as_str()).collect();
                DriverError::NoSuchFunction(format!("{}: no function `{n}` (functions: {})", self.name, known.join(", ")))
            }),
            None if self.module.funcs.len() == 1 => Ok(&self.module.funcs[0]),
            None => {
                let known: Vec<&str> = self.module.funcs.iter().map(|f| f.name.as_str()).collect();
                Err(DriverError::NoSuchFunction(format!(
                    "{}: {} functions ({}); choose one with --func",
                    self.name,
                    known.len(),
                    known.join(", ")
                )))
            }
        }
    }
}

/// Parses and verifies a `.sptir` text.
pub fn load_text(name: &str, text: String) -> Result<Loaded, DriverError> {
    let module = text::parse(name, &text)?;
    if let Err(errors) = verify::verify_module(&module) {
        return Err(DriverError::Verify(verify::render_errors(&errors, &SourceFile::new(name, &text))));
    }
    Ok(Loaded { name: name.to_string(), text, module })
}

/// Reads, parses and verifies a `.sptir` file.
pub fn load(path: &Path) -> Result<Loaded, DriverError> {
    let text = std::fs::read_to_string(path).map_err(|source| DriverError::Read { path: path.to_path_buf(), source })?;
    load_text(&path.display().to_string(), text)
}

/// Lowers a function to `stage`, verifying after every pass.
pub fn lower(func: &Func, stage: Stage) -> Result<Func, DriverError> {
    if stage < func.stage {
        return Err(DriverError::CannotRaise { func: func.name.clone(), at: func.stage, want: stage });
    }
    let mut pm = sparsec_passes::PassManager::new();
    if func.stage == Stage::I && stage >= Stage::II {
        pm.add("lower_sparse_iter", sparsec_passes::lower_sparse_iter);
    }
    if func.stage <= Stage::II && stage == Stage::III {
        pm.add("lower_sparse_buffer", sparsec_passes::lower_sparse_buffer);
    }
    Ok(pm.run(func)?)
}

/// Every stage from the function's own down to Stage III, in order.
pub fn lower_all(func: &Func) -> Result<Vec<Func>, DriverError> {
    let mut out = vec![func.clone()];
    let mut pm = sparsec_passes::PassManager::new();
    if func.stage == Stage::I {
        pm.add("lower_sparse_iter", sparsec_passes::lower_sparse_iter);
    }
    if func.stage <= Stage::II {
        pm.add("lower_sparse_buffer", sparsec_passes::lower_sparse_buffer);
    }
    out.extend(pm.run_all(func)?);
    Ok(out)
}

/// Reads a schedule trace (JSON, as written by `Trace::to_json`).
pub fn read_trace(path: &Path) -> Result<sparsec_schedule::Trace, DriverError> {
    let text = std::fs::read_to_string(path).map_err(|source| DriverError::Read { path: path.to_path_buf(), source })?;
    sparsec_schedule::Trace::from_json(&text).map_err(|source| DriverError::Trace { path: path.to_path_buf(), source })
}

/// Applies a schedule trace to a function and returns the IR after scheduling at each stage,
/// from the function's own down to Stage III. Stages the trace does not reach are lowered by
/// the plain passes.
pub fn lower_scheduled(func: &Func, trace: &sparsec_schedule::Trace) -> Result<Vec<Func>, DriverError> {
    let is_lowering = |name: &str| name == "lower_sparse_iter" || name == "lower_sparse_buffer";
    let mut ends: Vec<usize> =
        trace.insts.iter().enumerate().filter(|(_, i)| is_lowering(&i.name)).map(|(k, _)| k).collect();
    ends.push(trace.insts.len());
    let mut out: Vec<Func> = Vec::new();
    for end in ends {
        let prefix = sparsec_schedule::Trace { insts: trace.insts[..end].to_vec() };
        out.push(prefix.replay(func)?.into_func());
    }
    let mut rest = lower_all(out.last().expect("at least one stage"))?;
    rest.remove(0);
    out.extend(rest);
    Ok(out)
}

/// A default schedule from `sparsec_schedule::auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoSchedule {
    /// Parallel outer loops, vectorized inner spatial loops.
    Cpu,
    /// Outer loops (fused with the independent loops perfectly nested in them) split over
    /// `threads` units per block and bound to blockIdx.x × threadIdx.x; see
    /// `sparsec_schedule::auto::gpu_full`.
    Gpu {
        /// Units per block.
        threads: i64,
    },
}

/// Applies a default schedule and returns the IR at each stage, from the function's own down
/// to Stage III (the schedule acts at Stage II; the GPU one also at Stage I).
pub fn lower_auto(func: &Func, auto: AutoSchedule) -> Result<Vec<Func>, DriverError> {
    use sparsec_schedule::{auto, Schedule};
    let mut out = vec![func.clone()];
    let mut sch = Schedule::new(func.clone())?;
    match auto {
        AutoSchedule::Cpu => auto::cpu_full(&mut sch)?,
        AutoSchedule::Gpu { threads } => auto::gpu_full(&mut sch, threads)?,
    }
    if sch.func().stage == Stage::II {
        out.push(sch.func().clone());
        sch.lower_sparse_buffer()?;
    }
    let last = sch.into_func();
    if out.len() == 1 && func.stage == Stage::III {
        out[0] = last;
    } else {
        out.push(last);
    }
    Ok(out)
}

/// How `sparsec run` binds data to a function.
#[derive(Clone, Debug, Default)]
pub struct RunSpec {
    /// `buffer → Matrix Market file`: binds the values, `indptr`, `indices` and shape scalars.
    pub matrices: Vec<(String, PathBuf)>,
    /// `parameter or buffer → .npy file` for dense inputs.
    pub inputs: Vec<(String, PathBuf)>,
    /// Scalars given by name.
    pub scalars: Vec<(String, i64)>,
    /// Value for every unbound scalar whose name contains `feat`.
    pub feat: Option<i64>,
    /// Block size used when a matrix is bound to a 4-axis (BSR) buffer.
    pub block: usize,
    /// Seed for inputs that no file gives.
    pub seed: u64,
}

/// What can go wrong while binding data for a run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A driver error.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// The Matrix Market file is malformed.
    #[error("{0}")]
    Mtx(#[from] sparsec_formats::mtx::MtxError),
    /// The matrix does not fit the buffer it is bound to.
    #[error("{0}")]
    Bind(#[from] sparsec_formats::BindError),
    /// The matrix could not be converted to the buffer's format.
    #[error("{0}")]
    Convert(#[from] sparsec_formats::ConvertError),
    /// A `.npy` input failed.
    #[error("{0}")]
    Npy(#[from] crate::npy::NpyError),
    /// The interpreter failed.
    #[error("{0}")]
    Interp(#[from] sparsec_interp::InterpError),
    /// A name given on the command line does not exist.
    #[error("`{func}` has no parameter or buffer `{name}`")]
    UnknownName {
        /// The function.
        func: String,
        /// The name.
        name: String,
    },
    /// A scalar parameter has no value.
    #[error("scalar `{0}` is not bound: pass --scalar {0}=VALUE")]
    UnboundScalar(String),
    /// An integer input array has no file and cannot be made up.
    #[error("integer input `{0}` needs a file: pass --input {0}=path.npy")]
    IntegerInput(String),
}

/// The handle parameter behind a parameter or buffer name.
fn param_of(func: &Func, name: &str) -> Option<sparsec_ir::ParamId> {
    func.param_index(name).or_else(|| {
        let b = func.buffer_by_name(name)?;
        match func.buffers[b].storage {
            sparsec_ir::Storage::Param(p) => Some(p),
            sparsec_ir::Storage::Alloc(_) => None,
        }
    })
}

/// The buffers a function stores to.
pub fn written_buffers(func: &Func) -> Vec<sparsec_ir::BufferId> {
    let mut out = Vec::new();
    sparsec_ir::walk_stmts(&func.body, &mut |s| {
        if let sparsec_ir::StmtKind::Store { buffer, .. } = &s.kind {
            out.push(*buffer);
        }
        for e in s.kind.exprs() {
            e.walk(&mut |x| {
                if let sparsec_ir::Expr::AtomicAdd(b, _, _) = x {
                    out.push(*b);
                }
            });
        }
    });
    out.sort();
    out.dedup();
    out
}

/// Builds the arguments of a Stage-I function from matrices, `.npy` files, scalars and the seed.
pub fn bind_run(func: &Func, spec: &RunSpec) -> Result<sparsec_ir::data::Args, RunError> {
    use sparsec_formats::{mtx, Binder, Csr};
    use sparsec_ir::data::{Array, Scalar};
    use sparsec_ir::{AxisKind, Layout, ParamKind};
    let unknown = |name: &str| RunError::UnknownName { func: func.name.clone(), name: name.to_string() };
    let mut binder = Binder::new(func);
    for (buf, path) in &spec.matrices {
        let b = func.buffer_by_name(buf).ok_or_else(|| unknown(buf))?;
        let m: Csr<i64, f64> = mtx::read_mtx_path(path)?;
        let axes = match &func.buffers[b].layout {
            Layout::Sparse(a) => a.clone(),
            Layout::Dense(_) => vec![],
        };
        let sparse_fixed = axes.get(1).is_some_and(|&a| func.axes[a].kind == AxisKind::SparseFixed);
        match (axes.len(), sparse_fixed) {
            (4, false) => binder.bsr(buf, &m.to_bsr(spec.block)?)?,
            (_, true) => {
                let k = m.row_lengths().into_iter().max().unwrap_or(0).max(1);
                binder.ell(buf, &m.to_ell(k)?)?
            }
            (2, false) if func.axes[axes[1]].kind == AxisKind::DenseVariable => {
                binder.dense_variable(buf, m.indptr(), m.values())?
            }
            _ => binder.csr(buf, &m)?,
        };
    }
    let mut args = binder.finish();
    for (name, path) in &spec.inputs {
        let p = param_of(func, name).ok_or_else(|| unknown(name))?;
        args.array(func.params[p].name.clone(), crate::npy::read(path)?);
    }
    for (name, v) in &spec.scalars {
        func.param_index(name).ok_or_else(|| unknown(name))?;
        args.int(name.clone(), *v);
    }
    for p in &func.params {
        if let ParamKind::Scalar(_) = p.kind {
            if !args.scalars.contains_key(&p.name) {
                match spec.feat {
                    Some(f) if p.name.contains("feat") => {
                        args.scalars.insert(p.name.clone(), Scalar::Int(f));
                    }
                    _ => return Err(RunError::UnboundScalar(p.name.clone())),
                }
            }
        }
    }
    // Remaining handles: outputs start at zero, inputs are drawn from the seed.
    let written = written_buffers(func);
    let mut rng = spec.seed ^ 0x9e37_79b9_7f4a_7c15;
    for (h, b) in func.buffers.iter() {
        let sparsec_ir::Storage::Param(p) = b.storage else { continue };
        let name = func.params[p].name.clone();
        if args.arrays.contains_key(&name) {
            continue;
        }
        let len = sparsec_interp::buffer_len(func, h, &args)?;
        let array = if written.contains(&h) {
            Array::zeros(b.dtype, len)
        } else if b.dtype.is_float() {
            let v: Vec<f32> = (0..len).map(|_| uniform(&mut rng)).collect();
            match b.dtype {
                sparsec_ir::DType::F64 => Array::F64(v.into_iter().map(f64::from).collect()),
                sparsec_ir::DType::F16 => Array::F16(v.into_iter().map(|x| half::f16::from_f32(x).to_f32()).collect()),
                sparsec_ir::DType::BF16 => Array::BF16(v.into_iter().map(|x| half::bf16::from_f32(x).to_f32()).collect()),
                _ => Array::F32(v),
            }
        } else {
            return Err(RunError::IntegerInput(name));
        };
        args.array(name, array);
    }
    Ok(args)
}

/// Uniform in [-1, 1) from a splitmix64 state.
fn uniform(state: &mut u64) -> f32 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

/// Binds the structure of a hyb matrix to a function decomposed with
/// `passes::hyb_rules(parts, widths)` (parameters `a_hyb_<p>_<b>`, `row_indices_hyb_<p>_<b>`,
/// `indices_hyb_<p>_<b>`, `rows_hyb_<p>_<b>`, `n_hyb_<p>_<b>`). The bucket values start at
/// zero: the decomposed program's preprocess fills them from the original matrix. Padding
/// slots get column `n`, which the decomposed program guards away.
pub fn bind_hyb<I: sparsec_formats::scalar::Index, V: sparsec_formats::scalar::Value>(
    args: &mut sparsec_ir::data::Args,
    hyb: &sparsec_formats::compose::Hyb<I, V>,
) {
    use sparsec_ir::data::Array;
    let n = hyb.shape().1;
    for (p, part) in hyb.parts().iter().enumerate() {
        for (b, bucket) in part.iter().enumerate() {
            let (s, w) = (format!("hyb_{p}_{b}"), bucket.width());
            let mut cols: Vec<i32> = bucket.col_indices().iter().map(|c| c.to_i64() as i32).collect();
            for (r, &c) in bucket.counts().iter().enumerate() {
                for slot in &mut cols[r * w + c.to_i64() as usize..(r + 1) * w] {
                    *slot = n as i32;
                }
            }
            let rows: Vec<i32> = bucket.row_indices().iter().map(|r| r.to_i64() as i32).collect();
            args.array(format!("a_{s}"), Array::F32(vec![0.0; bucket.len() * w]))
                .array(format!("row_indices_{s}"), Array::I32(rows))
                .array(format!("indices_{s}"), Array::I32(cols));
            args.int(format!("rows_{s}"), bucket.len() as i64).int(format!("n_{s}"), (n + 1).max(w) as i64);
        }
    }
}
