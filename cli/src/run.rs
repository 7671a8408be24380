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
#[derive(clap::Args)]
pub struct RunArgs {
    /// The .sptir file.
    file: PathBuf,
    /// Function to run (default: the only one).
    #[arg(long)]
    func: Option<String>,
    /// Binds a Matrix Market file to a sparse buffer: `A=path.mtx` (repeatable).
    #[arg(long = "matrix", value_name = "BUFFER=PATH", value_parser = parse_pair::<PathBuf>)]
    matrices: Vec<(String, PathBuf)>,
    /// Reads a dense input from a .npy file: `B=path.npy` (repeatable).
    #[arg(long = "input", value_name = "NAME=PATH", value_parser = parse_pair::<PathBuf>)]
    inputs: Vec<(String, PathBuf)>,
    /// Sets a scalar parameter: `feat_size=32`, `alpha=0.5` (repeatable; parsed by the
    /// parameter's dtype).
    #[arg(long = "scalar", value_name = "NAME=VALUE", value_parser = parse_pair::<String>)]
    scalars: Vec<(String, String)>,
    /// Feature size: sets every unbound scalar whose name contains `feat`.
    #[arg(long)]
    feat: Option<i64>,
    /// Block size for matrices bound to BSR buffers.
    #[arg(long, default_value_t = 4)]
    block: usize,
    /// Seed for the inputs that no file gives.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Folder for the outputs, one `<buffer>.npy` each.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Lower to this stage before running (default: 1 for the interpreter, 3 otherwise; the
    /// code generators take Stage III only).
    #[arg(long)]
    stage: Option<StageArg>,
    /// A schedule trace (JSON) to apply before running at `--stage`.
    #[arg(long)]
    schedule: Option<PathBuf>,
    /// Applies the default CPU or GPU schedule when no `--schedule` is given (the GPU
    /// backends get `gpu` unless another is named).
    #[arg(long, value_enum)]
    auto: Option<Auto>,
    /// Where to run.
    #[arg(long, value_enum, default_value = "interp")]
    backend: Backend,
    /// Checks every index and integer divisor in the generated code, for programs whose own
    /// index arithmetic cannot be proven in range before the run (slower).
    #[arg(long)]
    checked: bool,
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

/// Runs the command, appending what it prints to `out`.
pub fn run(a: RunArgs, out_text: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let loaded = driver::load(&a.file)?;
    let func = loaded.func(a.func.as_deref())?;
    let default =
        if a.backend == Backend::Interp && a.auto.is_none() && !a.checked { StageArg::One } else { StageArg::Three };
    let stage = match a.stage.unwrap_or(default) {
        StageArg::All => return Err("run takes one stage (--stage 1, 2 or 3), not `all`".into()),
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
    let spec = RunSpec { inputs: a.inputs, scalars: a.scalars, block: a.block, seed: a.seed, ..matrix_spec(a.matrices, a.feat) };
    let mut args = driver::bind_run(func, &spec)?;
    // GPU backends run the default GPU schedule unless told otherwise: an unbound nest
    // would run in a single unit.
    let gpu = matches!(a.backend, Backend::CubeclWgpu | Backend::CubeclCuda);
    let auto = a.auto.or(gpu.then_some(Auto::Gpu));
    let trace = a.schedule.as_deref().map(driver::read_trace).transpose()?;
    // On a GPU backend the default SpMM runs over row segments where the rows vary.
    let segmented = match (gpu, auto, &trace) {
        (true, Some(Auto::Gpu), None) => driver::gpu_row_segments(func, &mut args),
        _ => None,
    };
    let stage1 = func;
    let func = segmented.as_ref().map_or(func, |(g, _)| g);
    let stages = match backends::plan(trace, auto) {
        // Only as far as the stage run: a Stage-I run needs no lowering.
        driver::Plan::Plain => vec![driver::lower(func, stage)?],
        plan => driver::lower_with(func, &plan)?,
    };
    let lowered = stages.into_iter().rev().find(|g| g.stage == stage).ok_or_else(|| {
        driver::DriverError::CannotRaise { func: func.name.clone(), at: func.stage, want: stage }
    })?;
    let runner = backends::runner(a.backend)?;
    let start = Instant::now();
    let out = sparsec::backend::run(runner.as_ref(), &loaded, func, &lowered, &args, a.checked)?;
    let elapsed = start.elapsed();
    if let Some(dir) = &a.output {
        std::fs::create_dir_all(dir)?;
    }
    // The program's own outputs (not what a decomposition's preprocess writes).
    for b in driver::written_buffers(stage1) {
        let buf = &stage1.buffers[b];
        let sparsec::ir::Storage::Param(p) = buf.storage else { continue };
        let Some(array) = out.arrays.get(&stage1.params[p].name) else { continue };
        let (sum, norm) = checksum(array);
        writeln!(out_text, "{:<12} {:>10} elements  sum {:+.6e}  l2 {:.6e}", buf.name, array.len(), sum, norm)?;
        if let Some(dir) = &a.output {
            let shape = dense_shape(stage1, b, &out).unwrap_or_else(|| vec![array.len() as u64]);
            sparsec::npy::write(&dir.join(format!("{}.npy", buf.name)), array, &shape)?;
        }
    }
    let backend = backend_name(a.backend);
    writeln!(out_text, "stage {} on {backend}: {:.3} ms", lowered.stage, elapsed.as_secs_f64() * 1e3)?;
    if let Some((_, len)) = &segmented {
        writeln!(out_text, "--auto gpu: the rows of A vary, so they ran as segments of at most {len} entries (docs/gpu-estimate.md)")?;
    }
    Ok(())
}

/// What `run` binds for `--matrix` and `--feat` alone, every other input from the default
/// seed; `gpu-report --matrix` binds its data with it.
pub(crate) fn matrix_spec(matrices: Vec<(String, PathBuf)>, feat: Option<i64>) -> RunSpec {
    RunSpec { matrices, inputs: Vec::new(), scalars: Vec::new(), feat, block: 4, seed: 0 }
}

/// The `--backend` spelling of `b`.
fn backend_name(b: Backend) -> String {
    b.to_possible_value().map_or_else(String::new, |v| v.get_name().to_string())
}

fn checksum(a: &Array) -> (f64, f64) {
    let v = a.to_f64_vec();
    (v.iter().sum(), v.iter().map(|x| x * x).sum::<f64>().sqrt())
}

/// The shape of a buffer over dense-fixed axes only, from the scalar arguments.
fn dense_shape(func: &sparsec::ir::Func, b: sparsec::ir::BufferId, out: &sparsec::ir::data::Args) -> Option<Vec<u64>> {
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
