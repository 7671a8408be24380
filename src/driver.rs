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
        source: sparsec_schedule::TraceError,
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

/// Where rows vary, the GPU default SpMM is run over row segments
/// (`schedule::auto::gpu_row_segments`, docs/gpu-estimate.md "Row segments"): for a
/// csrmm-style `func` (buffer `A` over axes `I`, `J`, `J` sparse-variable) whose row pointer
/// and column indices `args` already holds, returns the function decomposed with
/// `passes::row_segments_rule`, with the segments bound into `args`, and the segment length.
/// `None` (and `args` untouched) where the rows are regular or the program is not of that
/// shape.
pub fn gpu_row_segments(func: &Func, args: &mut sparsec_ir::data::Args) -> Option<(Func, usize)> {
    let csr = csr_pattern(func, "A", args)?;
    let len = sparsec_schedule::auto::gpu_row_segments(csr.indptr().windows(2).map(|w| (w[1] - w[0]).max(0) as usize))?;
    let rule = sparsec_passes::row_segments_rule().ok()?;
    let g = sparsec_passes::decompose_format(func, &[rule]).ok()?;
    let segs = sparsec_formats::compose::RowSegments::from_csr(&csr, len).ok()?;
    sparsec_formats::bind_row_segments(args, &csr, &segs).ok()?;
    Some((g, len))
}

/// The pattern bound in `args` to the CSR buffer named `buffer` (see [`bound_pattern`]).
pub fn csr_pattern(func: &Func, buffer: &str, args: &sparsec_ir::data::Args) -> Option<sparsec_formats::Csr<i64, f32>> {
    bound_pattern(func, func.buffer_by_name(buffer)?, args)
}

/// The pattern bound in `args` to the CSR buffer `a` (axes `I`, `J`, `J` variable), as a
/// matrix with zero values and `J`'s length as its column count; `None` for another shape or
/// a pattern not bound. The decompositions bind their pieces from it.
fn bound_pattern(func: &Func, a: sparsec_ir::BufferId, args: &sparsec_ir::data::Args) -> Option<sparsec_formats::Csr<i64, f32>> {
    use sparsec_ir::data::Array;
    let sparsec_ir::Layout::Sparse(axes) = &func.buffers[a].layout else { return None };
    let [_, j] = axes.as_slice() else { return None };
    let axis = &func.axes[*j];
    let ints = |p: Option<sparsec_ir::ParamId>| -> Option<Vec<i64>> {
        match args.arrays.get(&func.params[p?].name)? {
            Array::I32(v) => Some(v.iter().map(|&x| x as i64).collect()),
            Array::I64(v) => Some(v.clone()),
            _ => None,
        }
    };
    let (ptr, cols) = (ints(axis.indptr)?, ints(axis.indices)?);
    // The program's column count (J's length), which the decompositions' guards compare with.
    let n = usize::try_from(eval_size(func, &axis.length, args)?).ok()?;
    let nnz = cols.len();
    sparsec_formats::Csr::try_new(ptr.len().saturating_sub(1), n, ptr, cols, vec![0.0; nnz]).ok()
}

/// Binds the pieces of a hyb decomposition (`passes::hyb_rules`: buffers `<X>_hyb_<p>_<b>`,
/// bucket `b` of column part `p`, `2^b` entries wide) from the CSR pattern bound to `X`, as
/// `formats::compose::Hyb` cuts it; the program's preprocess then copies the values. Returns
/// whether the function has such pieces. A decomposed program thus runs from `--matrix X=FILE`
/// alone, like the program it came from.
pub fn bind_hyb_pieces(func: &Func, args: &mut sparsec_ir::data::Args) -> Result<bool, RunError> {
    // (original buffer, part, bucket) of every piece.
    let mut pieces: Vec<(String, usize, usize, sparsec_ir::BufferId)> = Vec::new();
    for (h, b) in func.buffers.iter().filter(|(_, b)| b.dtype.is_float()) {
        let mut it = b.name.rsplitn(3, '_');
        let (Some(bucket), Some(part), Some(rest)) = (it.next(), it.next(), it.next()) else { continue };
        let (Ok(bucket), Ok(part), Some(orig)) = (bucket.parse::<usize>(), part.parse::<usize>(), rest.strip_suffix("_hyb")) else { continue };
        pieces.push((orig.to_string(), part, bucket, h));
    }
    let Some(orig) = pieces.first().map(|p| p.0.clone()) else { return Ok(false) };
    let fail = |m: String| RunError::Decomposed(format!("hyb pieces of `{orig}`: {m}"));
    let a = func.buffer_by_name(&orig).ok_or_else(|| fail(format!("no buffer `{orig}`")))?;
    let (parts, buckets) = (pieces.iter().map(|p| p.1).max().unwrap_or(0) + 1, pieces.iter().map(|p| p.2).max().unwrap_or(0) + 1);
    if buckets > 25 || pieces.len() != parts * buckets || pieces.iter().any(|p| p.0 != orig) {
        return Err(fail(format!("expected {parts} part(s) of {buckets} bucket(s) each, found {} piece(s)", pieces.len())));
    }
    for (_, _, b, h) in &pieces {
        let width = match &func.buffers[*h].layout {
            sparsec_ir::Layout::Sparse(axes) => axes.last().and_then(|&x| func.axes[x].fixed_row_extent()).and_then(|e| e.as_int()),
            _ => None,
        };
        if width != Some(1 << b) {
            return Err(fail(format!("bucket `{}` is not {} entries wide", func.buffers[*h].name, 1 << b)));
        }
    }
    let csr = bound_pattern(func, a, args).ok_or_else(|| fail(format!("bind a CSR matrix to `{orig}` (--matrix {orig}=FILE)")))?;
    let hyb = sparsec_formats::compose::Hyb::from_csr(&csr, parts, buckets as u32 - 1).map_err(|e| fail(e.to_string()))?;
    sparsec_formats::bind_hyb(args, &hyb)?;
    Ok(true)
}

/// A decomposition rule as its pieces are named (`<X>_<rule>`), with its sizes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum RulePiece {
    /// `passes::bsr_rule(b)`.
    Bsr(usize),
    /// `passes::ell_rule(k)`.
    Ell(usize),
    /// `passes::group_coo_rule(g)`.
    GroupCoo(usize),
    /// `passes::block_group_coo_rule(b, g)`.
    BlockGroupCoo(usize, usize),
    /// `passes::sr_bcrs_rule(t, g)`.
    SrBcrs(usize, usize),
    /// `passes::nm_2_4_rule()`.
    Nm24,
    /// `passes::rcm_rule()`.
    Rcm,
}

impl RulePiece {
    /// The rule whose name is `rule` (`bsr_4`, `sr_bcrs_4_8`, ...).
    fn parse(rule: &str) -> Option<RulePiece> {
        let nums = |rest: &str| rest.split('_').map(|x| x.parse::<usize>().ok()).collect::<Option<Vec<usize>>>();
        let one = |p: &str| rule.strip_prefix(p).and_then(nums).filter(|v| v.len() == 1).map(|v| v[0]);
        let two = |p: &str| rule.strip_prefix(p).and_then(nums).filter(|v| v.len() == 2).map(|v| (v[0], v[1]));
        match rule {
            "nm_2_4" => return Some(RulePiece::Nm24),
            "rcm" => return Some(RulePiece::Rcm),
            _ => {}
        }
        two("block_group_coo_")
            .map(|(b, g)| RulePiece::BlockGroupCoo(b, g))
            .or_else(|| two("sr_bcrs_").map(|(t, g)| RulePiece::SrBcrs(t, g)))
            .or_else(|| one("group_coo_").map(RulePiece::GroupCoo))
            .or_else(|| one("bsr_").map(RulePiece::Bsr))
            .or_else(|| one("ell_").map(RulePiece::Ell))
    }
}

/// Binds the pieces of a decomposition by one rule from the CSR pattern bound to the buffer
/// `X` it rewrote, as the rule's run-time half lays them out; the program's preprocess then
/// copies the values. Pieces are found by name, `<X>_<rule>`: BSR (`passes::bsr_rule(b)`,
/// blocks of `b × b`, `Csr::to_bsr`), ELL (`ell_rule(k)`: `k` slots a row), GroupCOO
/// (`group_coo_rule(g)`), BlockGroupCOO (`block_group_coo_rule(b, g)`), SR-BCRS
/// (`sr_bcrs_rule(t, g)`, `compose::condense`), reordered rows (`rcm_rule()`,
/// `compose::ReorderedRows::rcm`) and 2:4 (`nm_2_4_rule()`; the matrix must
/// hold at most 2 entries in every 4 columns of a row). Padding slots hold the coordinate one
/// past the matrix, which the rules' guards skip. Returns whether the function has such pieces.
pub fn bind_rule_pieces(func: &Func, args: &mut sparsec_ir::data::Args) -> Result<bool, RunError> {
    use sparsec_formats::compose;
    let mut any = false;
    let params = |b: &&sparsec_ir::Buffer| b.dtype.is_float() && matches!(b.storage, sparsec_ir::Storage::Param(_));
    for (_, piece) in func.buffers.iter().filter(|(_, b)| params(b)) {
        // The buffer rewritten: the longest other buffer name that prefixes the piece's.
        let Some((orig, rule, kind)) = func
            .buffers
            .iter()
            .filter(|(_, o)| o.name != piece.name && params(o))
            .filter_map(|(_, o)| {
                let rule = piece.name.strip_prefix(&format!("{}_", o.name))?;
                Some((o.name.as_str(), rule, RulePiece::parse(rule)?))
            })
            .max_by_key(|(o, _, _)| o.len())
        else {
            continue;
        };
        let fail = |m: String| RunError::Decomposed(format!("{rule} piece `{}` of `{orig}`: {m}", piece.name));
        let a = func.buffer_by_name(orig).ok_or_else(|| fail(format!("no buffer `{orig}`")))?;
        let csr = bound_pattern(func, a, args).ok_or_else(|| fail(format!("bind a CSR matrix to `{orig}` (--matrix {orig}=FILE)")))?;
        let err = |e: &dyn std::fmt::Display| fail(e.to_string());
        match kind {
            RulePiece::Bsr(b) | RulePiece::Ell(b) => {
                let mut binder = sparsec_formats::Binder::with_args(func, std::mem::take(args));
                let bound = if let RulePiece::Bsr(_) = kind {
                    csr.to_bsr(b).map_err(|e| err(&e)).and_then(|m| binder.bsr(&piece.name, &m).map(|_| ()).map_err(|e| err(&e)))
                } else {
                    ell_padded_past_the_end(&csr, b).map_err(fail).and_then(|m| binder.ell(&piece.name, &m).map(|_| ()).map_err(|e| err(&e)))
                };
                *args = binder.finish();
                bound?;
            }
            RulePiece::GroupCoo(g) => {
                let m = compose::GroupCoo::with_group_size(&csr, g).map_err(|e| err(&e))?;
                sparsec_formats::bind_group_coo(args, rule, &m)?;
            }
            RulePiece::BlockGroupCoo(b, g) => {
                let m = compose::BlockGroupCoo::with_group_size(&csr, b, g).map_err(|e| err(&e))?;
                sparsec_formats::bind_block_group_coo(args, rule, &m)?;
            }
            RulePiece::SrBcrs(t, g) => {
                let m = compose::condense(&csr, t, g).map_err(|e| err(&e))?;
                sparsec_formats::bind_sr_bcrs(args, rule, &m)?;
            }
            RulePiece::Rcm => {
                let r = compose::ReorderedRows::rcm(&csr).map_err(|e| err(&e))?;
                sparsec_formats::bind_rcm(args, rule, &r)?;
            }
            RulePiece::Nm24 => {
                // N:M compression keeps nonzero values only: give every stored entry one, so
                // that the pattern decides (the bound pattern's values are zeros).
                let ones = sparsec_formats::Csr::try_new(csr.rows(), csr.cols(), csr.indptr().to_vec(), csr.indices().to_vec(), vec![1.0f32; csr.nnz()]).map_err(|e| err(&e))?;
                let m = compose::NmMatrix::from_csr_2_4(&ones).map_err(|e| fail(format!("{e} (a 2:4 program takes a matrix with at most 2 entries in every 4 columns of a row)")))?;
                sparsec_formats::bind_nm_2_4(args, rule, &m)?;
            }
        }
        any = true;
    }
    Ok(any)
}

/// ELL with `k` slots per row whose padding slots hold column `n` (the matrix's column
/// count), so the ELL is `max(n + 1, k)` columns wide; refuses rows longer than `k`.
fn ell_padded_past_the_end(m: &sparsec_formats::Csr<i64, f32>, k: usize) -> Result<sparsec_formats::Ell<i64, f32>, String> {
    let (rows, n) = (m.rows(), m.cols());
    let mut indices = Vec::with_capacity(rows.saturating_mul(k));
    let mut lengths = Vec::with_capacity(rows);
    for w in m.indptr().windows(2) {
        let row = &m.indices()[w[0] as usize..w[1] as usize];
        if row.len() > k {
            return Err(format!("row {} has {} entries, more than the {k} slots of a row", lengths.len(), row.len()));
        }
        indices.extend_from_slice(row);
        indices.extend(std::iter::repeat_n(n as i64, k - row.len()));
        lengths.push(row.len() as i64);
    }
    let values = vec![0.0; indices.len()];
    sparsec_formats::Ell::try_new(rows, (n + 1).max(k), 1, k, indices, values, lengths).map_err(|e| e.to_string())
}

/// Arguments refused before compiled code runs ([`check_compiled_args`]), rendered with
/// `file:line:col` where they concern a statement.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ArgsRefused(pub String);

/// Checks `args` against the Stage-I function `func` of `loaded` before a code generator
/// runs any lowering of it: the sparse structure, and (unless the generated code is
/// `checked`, see [`crate::backend::run`]) every index and divisor proven in range
/// ([`sparsec_ir::args`]). The interpreter checks as it goes and needs none of this.
pub fn check_compiled_args(
    loaded: &Loaded,
    func: &Func,
    args: &sparsec_ir::data::Args,
    checked: bool,
) -> Result<(), ArgsRefused> {
    use sparsec_ir::args::{check_accesses, check_structure, ArgsError};
    let result = check_structure(func, args).and_then(|()| if checked { Ok(()) } else { check_accesses(func, args) });
    result.map_err(|e| match e {
        ArgsError::Access { span, message } => ArgsRefused(SourceFile::new(&loaded.name, &loaded.text).render(
            span,
            &format!("{message}; compiled code checks no index unless run with --checked (or use --backend interp)"),
        )),
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
    Ok(sparsec_passes::PassManager::lowering(func.stage, stage).run(func)?)
}

/// Every stage from the function's own down to Stage III, in order.
pub fn lower_all(func: &Func) -> Result<Vec<Func>, DriverError> {
    lower_with(func, &Plan::Plain)
}

/// Reads a schedule trace (JSON, as written by `Trace::to_json`).
pub fn read_trace(path: &Path) -> Result<sparsec_schedule::Trace, DriverError> {
    let text = std::fs::read_to_string(path).map_err(|source| DriverError::Read { path: path.to_path_buf(), source })?;
    sparsec_schedule::Trace::from_json(&text).map_err(|source| DriverError::Trace { path: path.to_path_buf(), source })
}

/// A default schedule from `sparsec_schedule::auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoSchedule {
    /// Parallel outer loops, vectorized inner spatial loops.
    Cpu,
    /// [`AutoSchedule::Cpu`] with other parameters (`sparsec tune`).
    CpuTuned(sparsec_schedule::auto::CpuTuning),
    /// Outer loops (fused with the independent loops perfectly nested in them) split over
    /// `threads` units per block and bound to blockIdx.x × threadIdx.x; see
    /// `sparsec_schedule::auto::gpu_full`.
    Gpu {
        /// Units per block.
        threads: i64,
    },
    /// [`AutoSchedule::Gpu`] with other parameters (`sparsec tune` on a GPU backend).
    GpuTuned {
        /// Units per block.
        threads: i64,
        /// The parameters of SpMM's shape.
        tuning: sparsec_schedule::auto::GpuTuning,
    },
}

impl AutoSchedule {
    /// The units per block of a GPU default; `None` for the CPU's.
    pub fn gpu_threads(self) -> Option<i64> {
        match self {
            AutoSchedule::Gpu { threads } | AutoSchedule::GpuTuned { threads, .. } => Some(threads),
            AutoSchedule::Cpu | AutoSchedule::CpuTuned(_) => None,
        }
    }
}

/// Units per block of the default GPU schedule (`--auto gpu`).
pub const GPU_THREADS: i64 = 128;

/// How a function is scheduled on its way down to Stage III.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// The standard passes, no schedule.
    Plain,
    /// A schedule trace, replayed on the function; stages it does not reach are lowered by
    /// the standard passes.
    Trace(sparsec_schedule::Trace),
    /// A default schedule.
    Auto(AutoSchedule),
}

impl Plan {
    /// The trace that carries out the plan on `func`: the default schedules are written by
    /// the ordinary primitives, so they are traces too.
    pub fn trace(&self, func: &Func) -> Result<sparsec_schedule::Trace, DriverError> {
        use sparsec_schedule::{auto, Schedule};
        Ok(match self {
            Plan::Plain => sparsec_schedule::Trace::default(),
            Plan::Trace(t) => t.clone(),
            Plan::Auto(a) => {
                let mut sch = Schedule::new(func.clone())?;
                match a {
                    AutoSchedule::Cpu => auto::cpu_full(&mut sch)?,
                    AutoSchedule::CpuTuned(t) => auto::cpu_full_tuned(&mut sch, t)?,
                    AutoSchedule::Gpu { threads } => auto::gpu_full(&mut sch, *threads)?,
                    AutoSchedule::GpuTuned { threads, tuning } => auto::gpu_full_tuned(&mut sch, *threads, tuning)?,
                }
                sch.trace().clone()
            }
        })
    }
}

/// Lowers `func` by `plan` and returns the IR at each stage, from the function's own down to
/// Stage III (the scheduled form where the schedule acts): the one pipeline of the CLI
/// (`lower`, `run` and every `--emit`).
pub fn lower_with(func: &Func, plan: &Plan) -> Result<Vec<Func>, DriverError> {
    lower_observed(func, plan, &mut |_, _| {})
}

/// [`lower_with`], calling `after(name, func)` after every schedule step that transforms
/// (not the getters) and every pass, with its name and the function it produced
/// (`sparsec lower --print-after`).
pub fn lower_observed(func: &Func, plan: &Plan, after: &mut dyn FnMut(&str, &Func)) -> Result<Vec<Func>, DriverError> {
    let trace = plan.trace(func)?;
    let lowers_next = |k: usize| trace.insts.get(k).is_some_and(|i| i.step.is_lowering());
    let mut out: Vec<Func> = Vec::new();
    if lowers_next(0) {
        out.push(func.clone());
    }
    let mut k = 0;
    let scheduled = trace.replay_with(func, |step, sch| {
        if !step.is_query() {
            after(step.name(), sch.func());
        }
        k += 1;
        if lowers_next(k) {
            out.push(sch.func().clone());
        }
    })?;
    let last = scheduled.into_func();
    let pm = sparsec_passes::PassManager::lowering(last.stage, Stage::III);
    let rest = pm.run_all(&last)?;
    for (name, g) in pm.names().into_iter().zip(&rest) {
        after(name, g);
    }
    out.push(last);
    out.extend(rest);
    Ok(out)
}

/// How `sparsec run` binds data to a function.
///
/// Every size taken from the outside is checked before anything in proportion to it is
/// allocated: a matrix is read with its buffer's index type (`i32` axes refuse rows or
/// columns beyond `i32::MAX`), and no array is made (a matrix's row pointers, an input drawn
/// from the seed, a zeroed output) with more than [`MAX_ELEMENTS`] elements or more bytes
/// than the memory available (`MemAvailable` in `/proc/meminfo`, where there is one). A
/// `.npy` input bound to a dense buffer must have the buffer's shape exactly: a flat file for
/// a multi-dimensional buffer is refused, as is a transposed one. A dimension whose size is a
/// scalar parameter that no flag sets gives the scalar its value from the file's shape.
#[derive(Clone, Debug, Default)]
pub struct RunSpec {
    /// `buffer → Matrix Market (`.mtx`) or FROSTT (`.tns`) file`: binds the values, `indptr`,
    /// `indices` and shape scalars, laid out as the buffer's axes say.
    pub matrices: Vec<(String, PathBuf)>,
    /// `parameter or buffer → .npy file` for dense inputs.
    pub inputs: Vec<(String, PathBuf)>,
    /// Scalars given by name, as written; parsed by the parameter's dtype.
    pub scalars: Vec<(String, String)>,
    /// Value for every unbound scalar whose name contains `feat`.
    pub feat: Option<i64>,
    /// Block size used when a matrix is bound to a 4-axis (BSR) buffer.
    pub block: usize,
    /// Seed for inputs that no file gives.
    pub seed: u64,
}

/// The most elements `bind_run` puts in one array it makes (an i32 index must reach each).
pub const MAX_ELEMENTS: usize = i32::MAX as usize;

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
    /// A matrix or tensor file does not fit the buffer it is bound to.
    #[error("{}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        source: sparsec_formats::BindError,
    },
    /// A `.tns` file is malformed.
    #[error("{}: {source}", path.display())]
    Tensor {
        /// The file.
        path: PathBuf,
        /// Why.
        source: sparsec_formats::TensorError,
    },
    /// A file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The matrix could not be converted to the buffer's format.
    #[error("{0}")]
    Convert(#[from] sparsec_formats::ConvertError),
    /// A `.npy` input failed.
    #[error("{0}")]
    Npy(#[from] crate::npy::NpyError),
    /// A buffer's size cannot be computed from the arguments (`ir::args::buffer_len`).
    #[error("{0}")]
    Args(#[from] sparsec_ir::args::ArgsError),
    /// A name given on the command line does not exist.
    #[error("`{func}` has no parameter or buffer `{name}`{hint}")]
    UnknownName {
        /// The function.
        func: String,
        /// The name.
        name: String,
        /// A "did you mean" hint, or empty.
        hint: String,
    },
    /// A scalar parameter has no value.
    #[error("scalar `{0}` is not bound: pass --scalar {0}=VALUE (or an --input file whose shape gives it)")]
    UnboundScalar(String),
    /// The pieces of a decomposed program cannot be built from the matrix bound to it.
    #[error("{0}")]
    Decomposed(String),
    /// A scalar value that its parameter's dtype cannot hold.
    #[error("{flag}: scalar `{name}` expects {expected}, found `{value}`")]
    BadScalar {
        /// The flag that gave it (`--scalar NAME=VALUE`, `--feat VALUE`).
        flag: String,
        /// The parameter.
        name: String,
        /// What it takes, e.g. `an integer (i32)`.
        expected: String,
        /// The value given.
        value: String,
    },
    /// An integer input array has no file and cannot be made up.
    #[error("integer input `{0}` needs a file: pass --input {0}=path.npy")]
    IntegerInput(String),
    /// A `.npy` file whose shape is not the dense buffer's.
    #[error("{path}: shape {shape} does not match buffer `{buffer}` [{axes}] = {dims}")]
    Shape {
        /// The file.
        path: PathBuf,
        /// The file's shape.
        shape: String,
        /// The buffer.
        buffer: String,
        /// The buffer's axes, comma-separated.
        axes: String,
        /// Their sizes.
        dims: String,
    },
    /// An array to be made for the run is too large.
    #[error("{what} needs {need}, more than {limit}{flags}")]
    TooLarge {
        /// The array and its shape.
        what: String,
        /// Elements or bytes needed.
        need: String,
        /// The limit passed.
        limit: String,
        /// The flags that set its sizes, `` or `` (--feat 7)``.
        flags: String,
    },
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
    let mut out = sparsec_ir::written_buffers(&func.body);
    out.sort();
    out
}

/// Bytes of memory available for new allocations, where the system says.
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// Running total of the bytes a run's arrays take, against the memory available.
struct Budget {
    used: u128,
    available: Option<u64>,
}

impl Budget {
    /// Counts `elements` of `size` bytes for `what`, refusing beyond [`MAX_ELEMENTS`] or the
    /// memory available.
    fn take(&mut self, what: impl Fn() -> String, elements: u128, size: usize, flags: &str) -> Result<(), RunError> {
        let too_large = |need: String, limit: String| RunError::TooLarge { what: what(), need, limit, flags: flags.to_string() };
        if elements > MAX_ELEMENTS as u128 {
            return Err(too_large(format!("{elements} elements"), format!("the limit of {MAX_ELEMENTS} elements per array")));
        }
        self.used += elements * size as u128;
        match self.available {
            Some(avail) if self.used > u128::from(avail) => Err(too_large(
                format!("{} bytes with the arrays before it", self.used),
                format!("the {avail} bytes of memory available"),
            )),
            _ => Ok(()),
        }
    }

    /// How many elements of `size` bytes still fit, at most [`MAX_ELEMENTS`].
    fn elements_left(&self, size: usize) -> usize {
        let left = self.available.map_or(u128::MAX, |a| u128::from(a).saturating_sub(self.used) / size.max(1) as u128);
        left.min(MAX_ELEMENTS as u128) as usize
    }
}

/// The index type a matrix is read with for a buffer: `i64` if any of its axes is.
fn wide_index(func: &Func, b: sparsec_ir::BufferId) -> bool {
    match &func.buffers[b].layout {
        sparsec_ir::Layout::Sparse(axes) => axes.iter().any(|&a| func.axes[a].idtype == sparsec_ir::DType::I64),
        sparsec_ir::Layout::Dense(_) => true,
    }
}

/// Reads a Matrix Market file (entries as in the file, duplicates not yet summed).
fn read_matrix<I: sparsec_formats::scalar::Index>(path: &Path) -> Result<sparsec_formats::Coo<I, f64>, RunError> {
    use sparsec_formats::mtx::{parse_mtx, MtxError};
    let wrap = |e: MtxError| MtxError::File { path: path.to_path_buf(), source: Box::new(e) };
    let bytes = std::fs::read(path).map_err(|e| wrap(e.into()))?;
    Ok(parse_mtx::<I, f64>(&bytes).map_err(wrap)?.1)
}

/// Whether a file is a FROSTT tensor (`.tns`) rather than a Matrix Market matrix.
fn is_tns(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("tns"))
}

/// Binds one matrix or tensor file to a sparse buffer, reading it with index type `I`: the
/// buffer's own axes say how it is stored (`Binder::tensor`), except for the layouts that
/// need more than coordinates: blocks of `spec.block` (4 axes, BSR or blocked ELL) and
/// `dense_variable` segments.
fn bind_matrix<I: sparsec_formats::scalar::Index>(
    func: &Func,
    binder: &mut sparsec_formats::Binder,
    buf: &str,
    b: sparsec_ir::BufferId,
    path: &Path,
    spec: &RunSpec,
    budget: &mut Budget,
) -> Result<(), RunError> {
    use sparsec_ir::AxisKind;
    let in_file = |source| RunError::File { path: path.to_path_buf(), source };
    let axes = func.buffers[b].axes();
    let kind = |k: usize| axes.get(k).map(|&a| func.axes[a].kind);
    // Sorting the entries takes about 4 words each; every level position a few more.
    let limit = budget.elements_left(24);
    if is_tns(path) {
        let bytes = std::fs::read(path).map_err(|e| RunError::Io { path: path.to_path_buf(), source: e })?;
        let t = sparsec_formats::tensor::parse_tns::<I, f64>(&bytes)
            .map_err(|e| RunError::Tensor { path: path.to_path_buf(), source: e })?;
        binder.tensor(buf, &t, limit).map_err(in_file)?;
        return Ok(());
    }
    let coo = read_matrix::<I>(path)?;
    match (axes.len(), kind(1)) {
        (4, _) | (2, Some(AxisKind::DenseVariable)) => {
            // `to_csr` counts rows in `usize`s, then fills `I` row pointers.
            let what = || format!("{}: rows = {}: the row pointer array", path.display(), coo.rows());
            budget.take(what, coo.rows() as u128 + 1, 8 + std::mem::size_of::<I>(), "")?;
            let m = coo.to_csr();
            match kind(1) {
                Some(AxisKind::SparseFixed) => {
                    let k = m.row_lengths().into_iter().max().unwrap_or(0).max(1);
                    binder.ell(buf, &m.to_ell(k)?).map_err(in_file)?
                }
                Some(AxisKind::DenseVariable) => binder.dense_variable(buf, m.indptr(), m.values()).map_err(in_file)?,
                _ => binder.bsr(buf, &m.to_bsr(spec.block)?).map_err(in_file)?,
            };
        }
        _ => {
            binder.tensor(buf, &sparsec_formats::Tensor::from(&coo), limit).map_err(in_file)?;
        }
    }
    Ok(())
}

/// Parses a scalar given on the command line by its parameter's dtype.
fn parse_scalar(flag: String, name: &str, value: &str, dtype: sparsec_ir::DType) -> Result<sparsec_ir::data::Scalar, RunError> {
    use sparsec_ir::data::Scalar;
    use sparsec_ir::DType;
    let bad = |expected: String| RunError::BadScalar { flag: flag.clone(), name: name.to_string(), expected, value: value.to_string() };
    match dtype {
        DType::Bool => value.parse().map(Scalar::Bool).map_err(|_| bad("`true` or `false`".into())),
        d if d.is_float() => value.parse().map(Scalar::Float).map_err(|_| bad(format!("a number ({})", d.name()))),
        d => {
            let v: i64 = value.parse().map_err(|_| bad(format!("an integer ({})", d.name())))?;
            if d == DType::I32 && i32::try_from(v).is_err() {
                return Err(bad(format!("an integer that fits {} ({}..={})", d.name(), i32::MIN, i32::MAX)));
            }
            Ok(Scalar::Int(v))
        }
    }
}

/// The value of a size expression from the bound integer scalars, if it has one.
fn eval_size(func: &Func, e: &sparsec_ir::Expr, args: &sparsec_ir::data::Args) -> Option<i64> {
    use sparsec_ir::{BinOp, Expr};
    match e {
        Expr::Int(v, _) => Some(*v),
        Expr::Var(v) => match args.scalars.get(&func.vars[*v].name)? {
            sparsec_ir::data::Scalar::Int(x) => Some(*x),
            _ => None,
        },
        Expr::Cast(_, x) => eval_size(func, x, args),
        Expr::Binary(op, a, b) => {
            let (a, b) = (eval_size(func, a, args)?, eval_size(func, b, args)?);
            match op {
                BinOp::Add => a.checked_add(b),
                BinOp::Sub => a.checked_sub(b),
                BinOp::Mul => a.checked_mul(b),
                BinOp::FloorDiv if b != 0 => Some(a.div_euclid(b) - i64::from(b < 0 && a.rem_euclid(b) != 0)),
                BinOp::Min => Some(a.min(b)),
                BinOp::Max => Some(a.max(b)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The size expression of each dimension of buffer `b` where it is dense (`None` for a
/// dimension over a sparse or variable axis).
fn dim_sizes(func: &Func, b: sparsec_ir::BufferId) -> Vec<Option<&sparsec_ir::Expr>> {
    match &func.buffers[b].layout {
        sparsec_ir::Layout::Sparse(axes) => {
            axes.iter().map(|&a| (func.axes[a].kind == sparsec_ir::AxisKind::DenseFixed).then_some(&func.axes[a].length)).collect()
        }
        sparsec_ir::Layout::Dense(shape) => shape.iter().map(Some).collect(),
    }
}

/// A dense buffer's axis names and sizes; `None` for sparse buffers or sizes not known yet.
fn dense_dims(func: &Func, b: sparsec_ir::BufferId, args: &sparsec_ir::data::Args) -> Option<(Vec<String>, Vec<i64>)> {
    let dims = dim_sizes(func, b).into_iter().map(|e| eval_size(func, e?, args)).collect::<Option<_>>()?;
    let names = match &func.buffers[b].layout {
        sparsec_ir::Layout::Sparse(axes) => axes.iter().map(|&a| func.axes[a].name.clone()).collect(),
        sparsec_ir::Layout::Dense(shape) => shape.iter().map(|e| sparsec_ir::text::print_expr(func, e)).collect(),
    };
    Some((names, dims))
}

/// Formats sizes as a tuple: `(2708, 32)`.
fn tuple(dims: &[i64]) -> String {
    match dims {
        [d] => format!("({d},)"),
        _ => format!("({})", dims.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")),
    }
}

/// Builds the arguments of a Stage-I function from matrices, `.npy` files, scalars and the seed.
pub fn bind_run(func: &Func, spec: &RunSpec) -> Result<sparsec_ir::data::Args, RunError> {
    use sparsec_formats::Binder;
    use sparsec_ir::data::Array;
    use sparsec_ir::ParamKind;
    let unknown = |name: &str| {
        let known = func.params.iter().map(|p| p.name.as_str()).chain(func.buffers.iter().map(|(_, b)| b.name.as_str()));
        let hint = sparsec_ir::names::closest(name, known).map_or_else(String::new, |c| format!(" (did you mean `{c}`?)"));
        RunError::UnknownName { func: func.name.clone(), name: name.to_string(), hint }
    };
    let mut budget = Budget { used: 0, available: available_memory() };
    let mut binder = Binder::new(func);
    for (buf, path) in &spec.matrices {
        let b = func.buffer_by_name(buf).ok_or_else(|| unknown(buf))?;
        if wide_index(func, b) {
            bind_matrix::<i64>(func, &mut binder, buf, b, path, spec, &mut budget)?;
        } else {
            bind_matrix::<i32>(func, &mut binder, buf, b, path, spec, &mut budget)?;
        }
    }
    let mut args = binder.finish();
    bind_hyb_pieces(func, &mut args)?;
    bind_rule_pieces(func, &mut args)?;
    // Scalars, and the flag that set each (for messages about the sizes they give).
    let mut flags: Vec<(String, String)> = Vec::new();
    let scalar_dtype = |p: sparsec_ir::ParamId| match func.params[p].kind {
        ParamKind::Scalar(v) => Some(func.vars[v].dtype),
        ParamKind::Handle => None,
    };
    for (name, v) in &spec.scalars {
        let p = func.param_index(name).ok_or_else(|| unknown(name))?;
        let flag = format!("--scalar {name}={v}");
        let dtype = scalar_dtype(p).ok_or_else(|| unknown(name))?;
        args.scalars.insert(name.clone(), parse_scalar(flag.clone(), name, v, dtype)?);
        flags.push((name.clone(), flag));
    }
    if let Some(f) = spec.feat {
        for (p, param) in func.params.iter().enumerate() {
            let Some(dtype) = scalar_dtype(p) else { continue };
            if !args.scalars.contains_key(&param.name) && param.name.contains("feat") {
                let flag = format!("--feat {f}");
                args.scalars.insert(param.name.clone(), parse_scalar(flag.clone(), &param.name, &f.to_string(), dtype)?);
                flags.push((param.name.clone(), flag));
            }
        }
    }
    // Files for dense inputs: read once; a dimension whose size is a scalar no flag set gives
    // that scalar its value (B.npy of shape (n, 32) sets `feat_size` = 32).
    let mut files = Vec::new();
    for (name, path) in &spec.inputs {
        let p = param_of(func, name).ok_or_else(|| unknown(name))?;
        let (array, shape) = crate::npy::read_shaped(path)?;
        let views: Vec<_> = match func.buffer_by_name(name) {
            Some(b) => vec![b],
            None => func.buffers.iter().filter(|(_, b)| b.storage == sparsec_ir::Storage::Param(p)).map(|(h, _)| h).collect(),
        };
        for &b in &views {
            let sizes = dim_sizes(func, b);
            if sizes.len() != shape.len() {
                continue;
            }
            for (size, &n) in sizes.into_iter().zip(&shape) {
                let Some(sparsec_ir::Expr::Var(v)) = size else { continue };
                let Some(q) = func.params.iter().position(|x| x.kind == ParamKind::Scalar(*v)) else { continue };
                let param = &func.params[q].name;
                if !args.scalars.contains_key(param) {
                    let flag = format!("{} (shape {})", path.display(), crate::npy::shape_string(&shape));
                    let dtype = scalar_dtype(q).unwrap_or(sparsec_ir::DType::I64);
                    args.scalars.insert(param.clone(), parse_scalar(flag.clone(), param, &n.to_string(), dtype)?);
                    flags.push((param.clone(), flag));
                }
            }
        }
        files.push((p, path, array, shape, views));
    }
    // The `nnz` of an assembled axis is the run's to compute.
    let assembled = sparsec_ir::args::assembled_nnz(func);
    let computed = |p: sparsec_ir::ParamId| matches!(func.params[p].kind, ParamKind::Scalar(v) if assembled.contains(&v));
    for (p, param) in func.params.iter().enumerate() {
        if scalar_dtype(p).is_some() && !args.scalars.contains_key(&param.name) && !computed(p) {
            return Err(RunError::UnboundScalar(param.name.clone()));
        }
    }
    // Each file must have its buffer's shape.
    for (p, path, array, shape, views) in files {
        let dense: Vec<_> = views.iter().filter_map(|&b| Some((b, dense_dims(func, b, &args)?))).collect();
        let fits = |(_, (_, dims)): &(_, (_, Vec<i64>))| {
            dims.len() == shape.len() && dims.iter().zip(&shape).all(|(&d, &s)| u64::try_from(d) == Ok(s))
        };
        if let Some((b, (axes, dims))) = dense.first().filter(|_| !dense.iter().any(fits)) {
            return Err(RunError::Shape {
                path: path.clone(),
                shape: crate::npy::shape_string(&shape),
                buffer: func.buffers[*b].name.clone(),
                axes: axes.join(", "),
                dims: tuple(dims),
            });
        }
        args.array(func.params[p].name.clone(), array);
    }
    // Remaining handles: outputs start at zero, inputs are drawn from the seed.
    let written = written_buffers(func);
    let mut rng = sparsec_formats::gen::SplitMix64::new(spec.seed ^ 0x9e37_79b9_7f4a_7c15);
    for (h, b) in func.buffers.iter() {
        let sparsec_ir::Storage::Param(p) = b.storage else { continue };
        let name = func.params[p].name.clone();
        // Buffers over a sparse output's pattern are sized once the run has counted it.
        if args.arrays.contains_key(&name) || sparsec_ir::args::over_assembled(func, h) {
            continue;
        }
        if !written.contains(&h) && !b.dtype.is_float() {
            return Err(RunError::IntegerInput(name));
        }
        let len = sparsec_ir::args::buffer_len(func, h, &args)?;
        let what = || match dense_dims(func, h, &args) {
            Some((axes, dims)) => format!("buffer `{}` [{}] = {}", b.name, axes.join(", "), tuple(&dims)),
            None => format!("buffer `{}`", b.name),
        };
        let used = used_flags(func, h, &flags);
        budget.take(what, len as u128, b.dtype.size_bytes().max(4), &used)?;
        let array = if written.contains(&h) {
            Array::zeros(b.dtype, len)
        } else {
            let v: Vec<f32> = (0..len).map(|_| uniform(&mut rng)).collect();
            match b.dtype {
                sparsec_ir::DType::F64 => Array::F64(v.into_iter().map(f64::from).collect()),
                sparsec_ir::DType::F16 => Array::F16(v.into_iter().map(|x| half::f16::from_f32(x).to_f32()).collect()),
                sparsec_ir::DType::BF16 => Array::BF16(v.into_iter().map(|x| half::bf16::from_f32(x).to_f32()).collect()),
                _ => Array::F32(v),
            }
        };
        args.array(name, array);
    }
    Ok(args)
}

/// ` (--feat 7, --scalar m=5)`: the flags that set scalars a buffer's axis sizes use.
fn used_flags(func: &Func, b: sparsec_ir::BufferId, flags: &[(String, String)]) -> String {
    let mut exprs: Vec<&sparsec_ir::Expr> = Vec::new();
    match &func.buffers[b].layout {
        sparsec_ir::Layout::Sparse(axes) => {
            for &a in axes {
                exprs.push(&func.axes[a].length);
                exprs.extend(func.axes[a].nnz.as_ref());
            }
        }
        sparsec_ir::Layout::Dense(shape) => exprs.extend(shape),
    }
    let mut names = Vec::new();
    for e in exprs {
        e.walk(&mut |x| {
            if let sparsec_ir::Expr::Var(v) = x {
                names.push(func.vars[*v].name.clone());
            }
        });
    }
    let used: Vec<&str> = flags.iter().filter(|(n, _)| names.contains(n)).map(|(_, f)| f.as_str()).collect();
    if used.is_empty() {
        String::new()
    } else {
        format!(" ({})", used.join(", "))
    }
}

/// Uniform in [-1, 1), 24 random bits.
fn uniform(rng: &mut sparsec_formats::gen::SplitMix64) -> f32 {
    ((rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}
