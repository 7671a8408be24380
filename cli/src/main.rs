//! The `sparsec` command line: check, format, lower and run `.sptir` programs.

use clap::{Parser, Subcommand, ValueEnum};
use sparsec::driver::{self, DriverError};
use sparsec::estimate::{self, Collector, Traffic, H100};
use std::collections::BTreeMap;
use sparsec::ir::{text, Stage};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "sparsec", version, about = "A compiler for sparse tensor programs in the style of SparseTIR")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Parse and verify a .sptir file.
    Check {
        /// The .sptir file.
        file: PathBuf,
    },
    /// Print a .sptir file in canonical form, its comments kept.
    Fmt {
        /// The .sptir file.
        file: PathBuf,
    },
    /// Lower a program and print the IR at each stage.
    Lower {
        /// The .sptir file.
        file: PathBuf,
        /// Which stages to print: 1, 2, 3 or all (repeatable: `--stage 2 --stage 3`).
        #[arg(long, default_value = "all")]
        stage: Vec<StageArg>,
        /// Output form.
        #[arg(long, value_enum, default_value = "sptir")]
        emit: Emit,
        #[command(flatten)]
        target: Target,
        /// GPU architecture for `--emit ptx`.
        #[arg(long, default_value = "sm_80")]
        chip: String,
        /// Prints the IR after every pass or schedule step of this name (`all`: after each),
        /// instead of the stages; repeatable. `sparsec passes` lists the passes.
        #[arg(long, value_name = "NAME")]
        print_after: Vec<String>,
        /// Prints the first stage (or dump) whole and each later one as a unified diff from
        /// the one before it.
        #[arg(long)]
        diff: bool,
    },
    /// Write the Stage-I program of an expression in TACO's index notation, e.g.
    /// `sparsec einsum "C(i,k) = A(i,j) * B(j,k)" --format A=csr`: an index missing on the
    /// left is summed over; tensors are dense unless `--format` says `csr` or `csf`. The
    /// program prints to stdout (or `--output FILE`), ready for `check`, `lower` and `run`.
    Einsum {
        /// The expression: `OUT(indices) = ...` over `+ - *`, tensor accesses and numbers.
        expr: String,
        /// `TENSOR=dense|csr|csf`; repeatable.
        #[arg(long, value_name = "TENSOR=FORMAT", value_parser = run::parse_pair::<String>)]
        format: Vec<(String, String)>,
        /// Name of the function.
        #[arg(long, default_value = "einsum")]
        name: String,
        /// Write the program to this file instead of stdout.
        #[arg(long)]
        output: Option<PathBuf>,
    },
    /// List the passes: name, stages, what each does.
    Passes,
    /// Report on the GPU kernels of a program without a GPU: assembles the PTX of the MLIR
    /// path with NVIDIA's ptxas and prints, per kernel, registers, spills, stack and shared
    /// memory, and for each innermost loop what one iteration does.
    ///
    /// With `--matrix`, also runs each Stage-III function in the interpreter on that matrix,
    /// records its accesses to global memory, and prints per kernel an *estimate* of its time
    /// on an H100 (docs/gpu-estimate.md); `--peer gespmm` reports a GE-SpMM-shaped CUDA kernel
    /// on the same data beside it.
    GpuReport {
        /// The .sptir file.
        file: PathBuf,
        #[command(flatten)]
        target: Target,
        /// GPU architecture.
        #[arg(long, default_value = "sm_90")]
        chip: String,
        /// Binds a Matrix Market file to a sparse buffer, as `run --matrix` does (`A=path.mtx`;
        /// a bare path binds buffer `A`), and estimates each kernel's time on it.
        #[arg(long, value_name = "[BUFFER=]PATH", value_parser = parse_matrix)]
        matrix: Option<(String, PathBuf)>,
        /// Feature size with `--matrix`: sets every unbound scalar whose name contains `feat`.
        #[arg(long, requires = "matrix")]
        feat: Option<i64>,
        /// Also reports and estimates a hand-written peer kernel on the same data: `gespmm`
        /// (GE-SpMM's shape; CSR SpMM programs only).
        #[arg(long, value_enum, requires = "matrix")]
        peer: Option<Peer>,
    },
    /// Run a function on concrete data: the reference interpreter at any stage, or generated
    /// code (mlir-cpu, cubecl-wgpu, cubecl-cuda) at Stage III.
    Run(run::RunArgs),
    /// Time a function: set up and compile once, then run it `--repeat` times (after
    /// `--warmup` untimed runs) and print the time of each step (parse, bind, lower, check,
    /// compile) and the runs' minimum, median and maximum. Takes `run`'s options.
    Bench(bench::BenchArgs),
    /// Search the default schedule's parameters and format decompositions for a program on
    /// its data: the CPU schedule's (row-length copies, chunks, grains, prefetching) on
    /// mlir-cpu, the GPU schedule's (features per lane, nonzeros per trip, rows per block,
    /// walks over blocks) on cubecl-wgpu or cubecl-cuda, or ranked by `gpu-report`'s
    /// estimate of an H100 (`--backend gpu-report`); formats storing more than `--max-slots`
    /// value slots per nonzero are pruned first. Measure (or estimate) each distinct candidate
    /// within `--budget` seconds, print the table and write the fastest as a trace
    /// (`--write`) that `--schedule` replays. Takes `run`'s options.
    Tune(tune::TuneArgs),
}

/// Which functions of a file, and how they are scheduled (`lower`, `gpu-report`).
#[derive(clap::Args)]
struct Target {
    /// Function to take (default: every function; the only one with `--schedule`).
    #[arg(long)]
    func: Option<String>,
    /// A schedule trace (JSON) to apply before and while lowering.
    #[arg(long)]
    schedule: Option<PathBuf>,
    /// Applies the default CPU or GPU schedule when no `--schedule` is given (GPU code
    /// gets `gpu` unless another is named).
    #[arg(long, value_enum)]
    auto: Option<backends::Auto>,
}

impl Target {
    /// The functions of `loaded` it names and the plan that lowers them (`auto` when neither
    /// a trace nor `--auto` is given).
    fn resolve<'m>(&self, loaded: &'m driver::Loaded, auto: Option<backends::Auto>) -> Result<(Vec<&'m sparsec::ir::Func>, driver::Plan), DriverError> {
        let trace = self.schedule.as_deref().map(driver::read_trace).transpose()?;
        let funcs = match (&self.func, &trace) {
            (Some(_), _) | (None, Some(_)) => vec![loaded.func(self.func.as_deref())?],
            (None, None) => loaded.module.funcs.iter().collect(),
        };
        Ok((funcs, backends::plan(trace, self.auto.or(auto))))
    }
}

/// `gpu-report --peer` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Peer {
    /// `nvidia/peer/gespmm.cu`: one warp per row, nonzeros staged in shared memory, two
    /// feature columns per lane (GE-SpMM, SC'20).
    Gespmm,
}

/// `gpu-report --matrix`: `BUFFER=PATH`, or a path for buffer `A`.
fn parse_matrix(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some(_) => run::parse_pair::<PathBuf>(s),
        None => Ok(("A".to_string(), PathBuf::from(s))),
    }
}

/// `--stage` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum StageArg {
    #[value(name = "1")]
    One,
    #[value(name = "2")]
    Two,
    #[value(name = "3")]
    Three,
    #[value(name = "all")]
    All,
}

impl StageArg {
    fn stages(self) -> Vec<Stage> {
        match self {
            StageArg::One => vec![Stage::I],
            StageArg::Two => vec![Stage::II],
            StageArg::Three => vec![Stage::III],
            StageArg::All => vec![Stage::I, Stage::II, Stage::III],
        }
    }
}

/// `--emit` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Emit {
    /// The .sptir text of the IR.
    Sptir,
    /// The MLIR GPU module (gpu, scf, memref, arith, math dialects) of the Stage-III function.
    Mlir,
    /// PTX for `--chip`, through MLIR's NVVM pipeline.
    Ptx,
    /// A `#[cube]` Rust rendering of the CubeCL kernels.
    Cubecl,
    /// The WGSL source CubeCL compiles the kernels to.
    Wgsl,
    /// The CUDA C++ source CubeCL compiles the kernels to.
    Cuda,
}

/// Prints `dumps` (header, text) to `out`, with `# ===== header =====` lines when `headers`;
/// with `diff`, every dump after the first as a unified diff from the one before.
fn print_dumps(dumps: &[(String, String)], headers: bool, diff: bool, out: &mut String) {
    for (k, (header, text)) in dumps.iter().enumerate() {
        if headers {
            out.push_str(&format!("# ===== {header} =====\n"));
        }
        match k.checked_sub(1).filter(|_| diff) {
            None => out.push_str(text),
            Some(prev) => {
                let (before, after) = (&dumps[prev], header);
                let d = similar::TextDiff::from_lines(before.1.as_str(), text.as_str());
                let body = d.unified_diff().context_radius(2).header(&before.0, after).to_string();
                out.push_str(if body.is_empty() { "# (unchanged)\n" } else { &body });
            }
        }
    }
}

mod backends;
mod bench;
mod peers;
mod plot;
mod report;
mod run;
mod tune;

/// What `gpu-report --matrix` runs on: the matrix, the feature size, the peer.
struct Data<'a> {
    matrix: &'a (String, PathBuf),
    feat: Option<i64>,
    peer: Option<Peer>,
}

/// `gpu-report --matrix`: the report of one function with the estimate of each kernel, and
/// with `peer`, the peer's report and the comparison.
fn gpu_report_estimated(
    f: &sparsec::ir::Func,
    lowered: &sparsec::ir::Func,
    ptx: &str,
    chip: &str,
    data: &Data<'_>,
    out: &mut String,
) -> Result<(), Box<dyn std::error::Error>> {
    let Data { matrix, feat, peer } = *data;
    let start = std::time::Instant::now();
    let args = driver::bind_run(f, &run::matrix_spec(vec![matrix.clone()], feat))?;
    let (text, estimates, result) = report::estimated(&f.name, lowered, &args, ptx, chip)?;
    out.push_str(&text);
    let ours: f64 = estimates.iter().map(|e| e.time).sum();
    writeln!(
        out,
        "{}: estimate {:.2} us on {} over {} kernel(s) (interpreter trace and model: {:.1} s)",
        f.name,
        ours * 1e6,
        H100.name,
        estimates.len(),
        start.elapsed().as_secs_f64()
    )?;
    let Some(Peer::Gespmm) = peer else { return Ok(()) };
    let start = std::time::Instant::now();
    let refuse = |why: String| format!("--peer gespmm models CSR SpMM (C = A·B, as tests/workloads/csrmm.sptir): {why}");
    let op = peers::recognize(f).map_err(refuse)?;
    if op.kind != peers::OpKind::Spmm || f.buffers[op.sparse].name != matrix.0 {
        return Err(refuse(format!("`{}` computes {} over `{}`, not SpMM over `{}`", f.name, op.kind.name(), f.buffers[op.sparse].name, matrix.0)).into());
    }
    let ops = op.operands(f, &args).map_err(refuse)?;
    let got = peers::output(f, &op, &result);
    op.check(&ops, &got, &format!("`{}`", f.name)).map_err(refuse)?;
    let ptx = sparsec_nvidia::nvrtc("gespmm", include_str!("../../nvidia/peer/gespmm.cu"), chip)?;
    let mut collector = Collector::new();
    estimate::gespmm_trace(&ops.indptr, &ops.indices, ops.dense[0].1[1] as usize, &mut |a| collector.record(a));
    let traffic: BTreeMap<String, Traffic> =
        collector.finish().into_values().map(|t| ("gespmm_csr_f32".to_string(), t)).collect();
    writeln!(out, "peer gespmm (nvidia/peer/gespmm.cu: GE-SpMM's shape, compiled by NVRTC; its accesses transcribed from its source):")?;
    let (text, estimates) = report::gpu_report("gespmm", &ptx, chip, &traffic)?;
    out.push_str(&text);
    let theirs: f64 = estimates.iter().map(|e| e.time).sum();
    writeln!(out, "gespmm: estimate {:.2} us on {} (trace and model: {:.1} s)", theirs * 1e6, H100.name, start.elapsed().as_secs_f64())?;
    writeln!(
        out,
        "estimate comparison on {}: {} {:.2} us / peer gespmm {:.2} us = {:.2}",
        H100.name,
        f.name,
        ours * 1e6,
        theirs * 1e6,
        ours / theirs
    )?;
    Ok(())
}



/// Large arrays on cache lines and huge pages (`sparsec::alloc`): a dense operand's rows
/// then never straddle lines.
#[global_allocator]
static ALLOC: sparsec::alloc::CacheAligned = sparsec::alloc::CacheAligned;

fn main() -> ExitCode {
    // Mesa's Vulkan loader prints `error: XDG_RUNTIME_DIR is invalid or not set` on every
    // wgpu run without one; set it before any thread starts.
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    let cli = Cli::parse();
    let mut out = String::new();
    let result = dispatch(cli, &mut out);
    // A closed pipe (`sparsec lower f | head`) is not an error.
    let written = std::io::stdout().lock().write_all(out.as_bytes());
    if let Err(e) = written {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(cli: Cli, out: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    match cli.cmd {
        Cmd::Check { file } => {
            let loaded = driver::load(&file)?;
            writeln!(out, "{}: ok ({} function(s))", loaded.name, loaded.module.funcs.len())?;
        }
        Cmd::Fmt { file } => {
            let loaded = driver::load(&file)?;
            out.push_str(&text::print_module_with_comments(&loaded.module, &loaded.text));
        }
        Cmd::Einsum { expr, format, name, output } => {
            let mut formats = Vec::new();
            for (tensor, f) in format {
                formats.push((tensor, f.parse::<sparsec::einsum::Format>()?));
            }
            let text = sparsec::einsum::program(&name, &expr, &formats)?;
            match output {
                Some(path) => {
                    std::fs::write(&path, &text).map_err(|e| format!("{}: {e}", path.display()))?;
                    writeln!(out, "wrote {}", path.display())?;
                }
                None => out.push_str(&text),
            }
        }
        Cmd::Passes => {
            for p in sparsec::passes::PASSES {
                let input: Vec<&str> = p.input.iter().map(|s| s.name()).collect();
                let output = p.output.map_or("same", |s| s.name());
                writeln!(out, "{:<20} {:>9} -> {:<5} {}", p.name, input.join("/"), output, p.about)?;
            }
            writeln!(out, "{:<20} {:>9} -> {:<5} {}", "decompose_format", "I", "same", "moves buffers to new formats by rewrite rules (Rust API; see docs/language.md)")?;
        }
        Cmd::GpuReport { file, target, chip, matrix, feat, peer } => {
            let loaded = driver::load(&file)?;
            let (funcs, plan) = target.resolve(&loaded, Some(backends::Auto::Gpu))?;
            for f in funcs {
                let lowered = backends::stage_iii(f, &plan)?;
                let ptx = backends::emit(&lowered, Emit::Ptx, &chip, None)?;
                match &matrix {
                    Some(m) => gpu_report_estimated(f, &lowered, &ptx, &chip, &Data { matrix: m, feat, peer }, out)?,
                    None => out.push_str(&report::gpu_report(&f.name, &ptx, &chip, &BTreeMap::new())?.0),
                }
            }
        }
        Cmd::Lower { file, emit, target, chip, .. } if emit != Emit::Sptir => {
            let loaded = driver::load(&file)?;
            // GPU code is scheduled: by the trace, else `--auto`, else the GPU default.
            let (funcs, plan) = target.resolve(&loaded, Some(backends::Auto::Gpu))?;
            for f in funcs {
                let lowered = backends::stage_iii(f, &plan)?;
                out.push_str(&backends::emit(&lowered, emit, &chip, Some(&loaded))?);
            }
        }
        Cmd::Lower { file, stage, target, print_after, diff, .. } => {
            let loaded = driver::load(&file)?;
            let (funcs, plan) = target.resolve(&loaded, None)?;
            for f in funcs {
                // (header, text) of each dump, printed whole or as diffs.
                let mut dumps: Vec<(String, String)> = Vec::new();
                if !print_after.is_empty() {
                    let mut ran = Vec::new();
                    driver::lower_observed(f, &plan, &mut |name, g| {
                        if print_after.iter().any(|p| p == "all" || p == name) {
                            dumps.push((format!("after {name} (step {}): {}", ran.len() + 1, g.name), text::print_func(g)));
                        }
                        ran.push(name.to_string());
                    })?;
                    if let Some(p) = print_after.iter().find(|p| *p != "all" && !ran.contains(p)) {
                        ran.dedup();
                        return Err(format!("--print-after {p}: no pass or step of that name ran (ran: {})", ran.join(", ")).into());
                    }
                    print_dumps(&dumps, true, diff, out);
                    continue;
                }
                let lowered = driver::lower_with(f, &plan)?;
                let mut wanted: Vec<Stage> = stage.iter().flat_map(|s| s.stages()).collect();
                wanted.sort();
                wanted.dedup();
                for g in lowered.iter().filter(|g| wanted.contains(&g.stage)) {
                    dumps.push((format!("Stage {}: {}", g.stage, g.name), text::print_func(g)));
                }
                print_dumps(&dumps, wanted.len() > 1, diff, out);
                if let Some(missing) = wanted.iter().find(|s| !lowered.iter().any(|g| g.stage == **s)) {
                    return Err(DriverError::CannotRaise { func: f.name.clone(), at: f.stage, want: *missing }.into());
                }
            }
        }
        Cmd::Run(args) => run::run(args, out)?,
        Cmd::Bench(args) => bench::bench(args, out)?,
        Cmd::Tune(args) => tune::tune(args, out)?,
    }
    Ok(())
}
