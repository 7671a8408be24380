//! `sparsec run`: bind data, run on a backend (the interpreter at any stage, the code
//! generators at Stage III), write outputs, print checksums.

use crate::backends::{self, Auto, Backend};
use crate::StageArg;
use clap::ValueEnum;
use sparsec::driver::{self, RunSpec};
use sparsec::ir::data::Array;
use sparsec::ir::{Layout, Stage};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `sparsec run`.
#[derive(clap::Args, Clone)]
pub struct RunArgs {
    /// The .sptir file.
    pub(crate) file: PathBuf,
    /// Function to run (default: the only one).
    #[arg(long)]
    func: Option<String>,
    /// Binds a Matrix Market file to a sparse buffer: `A=path.mtx` (repeatable), laid out as
    /// the buffer's axes say (CSR, DCSR, CSC with `modes = [1, 0]`, ELL, BSR, ...). `bench`
    /// takes several for one buffer and sweeps over them.
    #[arg(long = "matrix", value_name = "BUFFER=PATH", value_parser = parse_pair::<PathBuf>)]
    pub(crate) matrices: Vec<(String, PathBuf)>,
    /// Binds a FROSTT tensor (`.tns`: `i j k value` lines, 1-based) to a sparse buffer with
    /// one axis per mode (CSF, a sparse vector, ...): `A=path.tns` (repeatable).
    #[arg(long = "tensor", value_name = "BUFFER=PATH", value_parser = parse_pair::<PathBuf>)]
    tensors: Vec<(String, PathBuf)>,
    /// Reads a dense input from a .npy file: `B=path.npy` (repeatable).
    #[arg(long = "input", value_name = "NAME=PATH", value_parser = parse_pair::<PathBuf>)]
    inputs: Vec<(String, PathBuf)>,
    /// Sets a scalar parameter: `feat_size=32`, `alpha=0.5` (repeatable; parsed by the
    /// parameter's dtype).
    #[arg(long = "scalar", value_name = "NAME=VALUE", value_parser = parse_pair::<String>)]
    scalars: Vec<(String, String)>,
    /// Feature size: sets every unbound scalar whose name contains `feat` (`bench` takes
    /// several and sweeps over them).
    #[arg(long)]
    pub(crate) feat: Vec<i64>,
    /// Block size for matrices bound to BSR buffers.
    #[arg(long, default_value_t = 4)]
    block: usize,
    /// Seed for the inputs that no file gives.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Folder for the outputs, one `<buffer>.npy` each.
    #[arg(long)]
    pub(crate) output: Option<PathBuf>,
    /// Lower to this stage before running (default: 1 for the interpreter, 3 otherwise; the
    /// code generators take Stage III only).
    #[arg(long)]
    stage: Option<StageArg>,
    /// A schedule trace (JSON) to apply before running at `--stage`.
    #[arg(long)]
    pub(crate) schedule: Option<PathBuf>,
    /// Applies the default CPU or GPU schedule when no `--schedule` is given (the GPU
    /// backends get `gpu` unless another is named).
    #[arg(long, value_enum)]
    pub(crate) auto: Option<Auto>,
    /// Where to run.
    #[arg(long, value_enum, default_value = "interp")]
    pub(crate) backend: Backend,
    /// Checks every index and integer divisor in the generated code, for programs whose own
    /// index arithmetic cannot be proven in range before the run (slower).
    #[arg(long)]
    pub(crate) checked: bool,
    /// The subcommand, for messages (`run`, `bench` or `tune`).
    #[arg(skip = "run")]
    pub(crate) command: &'static str,
}

/// Parses `NAME=VALUE` (`--matrix`, `--input`, `--scalar`; `gpu-report --matrix` too).
pub(crate) fn parse_pair<T: std::str::FromStr>(s: &str) -> Result<(String, T), String>
where
    T::Err: std::fmt::Display,
{
    let (k, v) = s.split_once('=').ok_or_else(|| format!("expected NAME=VALUE, found `{s}`"))?;
    let v = v.parse::<T>().map_err(|e| format!("`{v}`: {e}"))?;
    Ok((k.to_string(), v))
}

/// What `run` and `bench` set up before anything runs: the program lowered to the stage run,
/// its arguments, and how long each step took.
pub(crate) struct Setup {
    pub loaded: driver::Loaded,
    /// The function as written.
    pub stage1: sparsec::ir::Func,
    /// The function lowered (a decomposition of it, where the GPU default cuts rows).
    pub func: sparsec::ir::Func,
    pub lowered: sparsec::ir::Func,
    /// How it was lowered (its symbolic phase, if any, is lowered alike).
    pub plan: driver::Plan,
    pub args: sparsec::ir::data::Args,
    /// Segment length where the GPU default cut the rows.
    pub segmented: Option<usize>,
    /// (step, time): parse and verify, bind inputs, schedule and lower.
    pub times: Vec<(&'static str, std::time::Duration)>,
}

/// The program as written and its bound arguments (`tune` schedules them itself).
pub(crate) struct Data {
    pub loaded: driver::Loaded,
    pub stage1: sparsec::ir::Func,
    pub args: sparsec::ir::data::Args,
}

impl RunArgs {
    /// One set of arguments for each combination of the matrices given for each buffer and
    /// the `--feat` values, in the order given (what `bench` sweeps over).
    pub(crate) fn cases(&self) -> Vec<RunArgs> {
        let mut buffers: Vec<(&str, Vec<&PathBuf>)> = Vec::new();
        for (b, path) in &self.matrices {
            match buffers.iter_mut().find(|(x, _)| *x == b) {
                Some((_, paths)) => paths.push(path),
                None => buffers.push((b, vec![path])),
            }
        }
        let mut out = vec![RunArgs { matrices: Vec::new(), feat: Vec::new(), ..self.clone() }];
        for (b, paths) in buffers {
            out = out.iter().flat_map(|c| paths.iter().map(move |p| {
                let mut c = c.clone();
                c.matrices.push((b.to_string(), (*p).clone()));
                c
            })).collect();
        }
        if !self.feat.is_empty() {
            out = out.iter().flat_map(|c| self.feat.iter().map(move |&f| RunArgs { feat: vec![f], ..c.clone() })).collect();
        }
        out
    }

    /// Refuses a sweep: `run` and `tune` take one matrix per buffer and one `--feat`.
    fn one_case(&self) -> Result<(), String> {
        if self.cases().len() > 1 {
            return Err(format!("{} takes one matrix per buffer and one --feat; `sparsec bench` sweeps over several", self.command));
        }
        Ok(())
    }
}

/// Loads the program, with the time it took.
fn load(a: &RunArgs) -> Result<(driver::Loaded, sparsec::ir::Func, std::time::Duration), Box<dyn std::error::Error>> {
    let start = Instant::now();
    let loaded = driver::load(&a.file)?;
    let stage1 = loaded.func(a.func.as_deref())?.clone();
    Ok((loaded, stage1, start.elapsed()))
}

/// Binds the program's inputs from the flags, with the time it took.
fn bind(a: &RunArgs, stage1: &sparsec::ir::Func) -> Result<(sparsec::ir::data::Args, std::time::Duration), Box<dyn std::error::Error>> {
    let start = Instant::now();
    let spec = RunSpec {
        inputs: a.inputs.clone(),
        scalars: a.scalars.clone(),
        block: a.block,
        seed: a.seed,
        ..matrix_spec(a.matrices.iter().chain(&a.tensors).cloned().collect(), a.feat.first().copied())
    };
    Ok((driver::bind_run(stage1, &spec)?, start.elapsed()))
}

/// The program as written and its bound arguments, for `tune` (which takes no schedule,
/// stage or outputs of its own).
pub(crate) fn setup_data(a: &RunArgs) -> Result<Data, Box<dyn std::error::Error>> {
    if a.schedule.is_some() || a.auto.is_some() || a.stage.is_some() || a.output.is_some() {
        return Err(format!("{} chooses the schedule and writes no outputs: drop --schedule, --auto, --stage and --output", a.command).into());
    }
    a.one_case()?;
    let (loaded, stage1, _) = load(a)?;
    let (args, _) = bind(a, &stage1)?;
    Ok(Data { loaded, stage1, args })
}

pub(crate) fn setup(a: &RunArgs) -> Result<Setup, Box<dyn std::error::Error>> {
    a.one_case()?;
    let (loaded, stage1, parsed) = load(a)?;
    let mut times = vec![("parse + verify", parsed)];
    let default =
        if a.backend == Backend::Interp && a.auto.is_none() && !a.checked { StageArg::One } else { StageArg::Three };
    let stage = match a.stage.unwrap_or(default) {
        StageArg::All => return Err(format!("{} takes one stage (--stage 1, 2 or 3), not `all`", a.command).into()),
        StageArg::One => Stage::I,
        StageArg::Two => Stage::II,
        StageArg::Three => Stage::III,
    };
    if a.backend != Backend::Interp && stage != Stage::III {
        return Err(format!("the {} backend runs Stage III only", backend_name(a.backend)).into());
    }
    if a.checked && stage != Stage::III {
        return Err("--checked checks the generated code: it needs Stage III".into());
    }
    let (mut args, bound) = bind(a, &stage1)?;
    times.push(("bind inputs", bound));
    let start = Instant::now();
    // GPU backends run the default GPU schedule unless told otherwise: an unbound nest
    // would run in a single unit.
    let gpu = matches!(a.backend, Backend::CubeclWgpu | Backend::CubeclCuda | Backend::GpuReport);
    let auto = a.auto.or(gpu.then_some(Auto::Gpu));
    let trace = a.schedule.as_deref().map(driver::read_trace).transpose()?;
    // On a GPU backend the default SpMM runs over row segments where the rows vary.
    let segmented = match (gpu, auto, &trace) {
        (true, Some(Auto::Gpu), None) => driver::gpu_row_segments(&stage1, &mut args),
        _ => None,
    };
    let (func, segmented) = match segmented {
        Some((g, len)) => (g, Some(len)),
        None => (stage1.clone(), None),
    };
    let plan = backends::plan(trace, auto);
    let stages = match &plan {
        // Only as far as the stage run: a Stage-I run needs no lowering.
        driver::Plan::Plain => vec![driver::lower(&func, stage)?],
        plan => driver::lower_with(&func, plan)?,
    };
    let lowered = stages.into_iter().rev().find(|g| g.stage == stage).ok_or_else(|| {
        driver::DriverError::CannotRaise { func: func.name.clone(), at: func.stage, want: stage }
    })?;
    times.push(("schedule + lower", start.elapsed()));
    Ok(Setup { loaded, stage1, func, lowered, plan, args, segmented, times })
}

/// Runs the command, appending what it prints to `out`.
pub fn run(a: RunArgs, out_text: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let s = setup(&a)?;
    let runner = backends::runner(a.backend)?;
    let start = Instant::now();
    let out = sparsec::backend::run(runner.as_ref(), &s.loaded, &s.func, &s.lowered, &s.plan, &s.args, a.checked)?;
    let elapsed = start.elapsed();
    if let Some(dir) = &a.output {
        std::fs::create_dir_all(dir)?;
    }
    // The program's own outputs (not what a decomposition's preprocess writes).
    let stage1 = &s.stage1;
    let outputs = driver::written_buffers(&sparsec::passes::remove_preprocess(stage1));
    for b in outputs {
        let buf = &stage1.buffers[b];
        let sparsec::ir::Storage::Param(p) = buf.storage else { continue };
        let Some(array) = out.arrays.get(&stage1.params[p].name) else { continue };
        let (sum, norm) = checksum(array);
        writeln!(out_text, "{:<12} {:>10} elements  sum {:+.6e}  l2 {:.6e}", buf.name, array.len(), sum, norm)?;
        let sparse = sparsec::assembly::matrix(stage1, b, &out)?;
        if let Some(m) = &sparse {
            writeln!(out_text, "{:<12} {} x {} sparse, {} entries", "", m.rows(), m.cols(), m.nnz())?;
        }
        if let Some(dir) = &a.output {
            let shape = dense_shape(stage1, b, &out).unwrap_or_else(|| vec![array.len() as u64]);
            sparsec::npy::write(&dir.join(format!("{}.npy", buf.name)), array, &shape)?;
            // A sparse output: its pattern's arrays and the matrix.
            if let Some(m) = &sparse {
                sparsec::formats::mtx::write_mtx_path(dir.join(format!("{}.mtx", buf.name)), m)?;
                for p in assembled_arrays(stage1, b) {
                    let name = &stage1.params[p].name;
                    if let Some(x) = out.arrays.get(name) {
                        sparsec::npy::write(&dir.join(format!("{name}.npy")), x, &[x.len() as u64])?;
                    }
                }
            }
        }
    }
    let backend = backend_name(a.backend);
    writeln!(out_text, "stage {} on {backend}: {:.3} ms", s.lowered.stage, elapsed.as_secs_f64() * 1e3)?;
    if let Some(len) = s.segmented {
        writeln!(out_text, "--auto gpu: the rows of A vary, so they ran as segments of at most {len} entries (docs/gpu-estimate.md)")?;
    }
    Ok(())
}

/// The row pointers and coordinates of the assembled axes of buffer `b`.
fn assembled_arrays(f: &sparsec::ir::Func, b: sparsec::ir::BufferId) -> Vec<usize> {
    let Layout::Sparse(axes) = &f.buffers[b].layout else { return vec![] };
    axes.iter().filter(|&&a| f.axes[a].pattern.is_some()).flat_map(|&a| [f.axes[a].indptr, f.axes[a].indices]).flatten().collect()
}

/// What `run` binds for `--matrix` and `--feat` alone, every other input from the default
/// seed; `gpu-report --matrix` binds its data with it.
pub(crate) fn matrix_spec(matrices: Vec<(String, PathBuf)>, feat: Option<i64>) -> RunSpec {
    RunSpec { matrices, inputs: Vec::new(), scalars: Vec::new(), feat, block: 4, seed: 0 }
}

/// The `--backend` spelling of `b`.
pub(crate) fn backend_name(b: Backend) -> String {
    b.to_possible_value().map_or_else(String::new, |v| v.get_name().to_string())
}

fn checksum(a: &Array) -> (f64, f64) {
    let v = a.to_f64_vec();
    (v.iter().sum(), v.iter().map(|x| x * x).sum::<f64>().sqrt())
}

/// The shape of a buffer over dense-fixed axes only, from the scalar arguments.
pub(crate) fn dense_shape(func: &sparsec::ir::Func, b: sparsec::ir::BufferId, out: &sparsec::ir::data::Args) -> Option<Vec<u64>> {
    let Layout::Sparse(axes) = &func.buffers[b].layout else { return None };
    axes.iter()
        .map(|&a| {
            let axis = &func.axes[a];
            if axis.kind != sparsec::ir::AxisKind::DenseFixed {
                return None;
            }
            match &axis.length {
                sparsec::ir::Expr::Int(v, _) => u64::try_from(*v).ok(),
                sparsec::ir::Expr::Var(v) => match out.scalars.get(&func.vars[*v].name)? {
                    sparsec::ir::data::Scalar::Int(x) => u64::try_from(*x).ok(),
                    _ => None,
                },
                _ => None,
            }
        })
        .collect()
}
