//! The `sparsec` command line: check, format, lower and run `.sptir` programs.

use clap::{Parser, Subcommand, ValueEnum};
use sparsec::driver::{self, DriverError};
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
    /// Print a .sptir file in canonical form.
    Fmt {
        /// The .sptir file.
        file: PathBuf,
    },
    /// Lower a program and print the IR at each stage.
    Lower {
        /// The .sptir file.
        file: PathBuf,
        /// Which stage to print: 1, 2, 3 or all.
        #[arg(long, default_value = "all")]
        stage: StageArg,
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
    },
    /// List the passes: name, stages, what each does.
    Passes,
    /// Report on the GPU kernels of a program without a GPU: assembles the PTX of the MLIR
    /// path with NVIDIA's ptxas and prints, per kernel, registers, spills, stack and shared
    /// memory, and for each innermost loop what one iteration does.
    GpuReport {
        /// The .sptir file.
        file: PathBuf,
        #[command(flatten)]
        target: Target,
        /// GPU architecture.
        #[arg(long, default_value = "sm_90")]
        chip: String,
    },
    /// Run a function on concrete data: the reference interpreter at any stage, or generated
    /// code (mlir-cpu, cubecl-wgpu, cubecl-cuda) at Stage III.
    Run(run::RunArgs),
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

mod backends;
mod run;

/// The `gpu-report` of one function's PTX.
fn gpu_report(name: &str, ptx: &str, chip: &str) -> Result<String, Box<dyn std::error::Error>> {
    let reports = sparsec_nvidia::ptxas(name, ptx, chip)?;
    let mut out = String::new();
    for (kernel, text) in sparsec_nvidia::entries(ptx) {
        let r = reports.iter().find(|r| r.name == kernel);
        let (regs, spills, stack, shared) = r.map_or((0, 0, 0, 0), |r| (r.registers, r.spills, r.stack, r.shared));
        writeln!(out, "kernel {kernel} ({chip}): {regs} registers, {spills} B spilled, {stack} B stack, {shared} B shared")?;
        let mut loops: Vec<(String, Vec<String>)> =
            sparsec_nvidia::innermost_loops(text).into_iter().enumerate().map(|(k, l)| (format!("innermost loop {}", k + 1), l)).collect();
        if loops.is_empty() {
            // A kernel without loops: what one unit does.
            let body = text.lines().map(str::trim).filter(|l| l.ends_with(';') && !l.starts_with('.') && !l.starts_with("//"));
            loops.push(("no loop; the whole kernel".to_string(), body.map(str::to_string).collect()));
        }
        for (what, l) in &loops {
            let s = sparsec_nvidia::LoopStats::of(l);
            writeln!(
                out,
                "  {what}: {} instructions; global loads {} ({} non-coherent), stores {}, atomics {}; shared accesses {}; fma {}, unfused float multiplies {}; vector width {}",
                s.instructions,
                s.global_loads,
                s.nc_loads,
                s.global_stores,
                s.atomics,
                s.shared_accesses,
                s.fmas,
                s.float_muls,
                s.vector_width
            )?;
        }
    }
    Ok(out)
}

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
            out.push_str(&text::print_module(&loaded.module));
        }
        Cmd::Passes => {
            for p in sparsec::passes::PASSES {
                let input: Vec<&str> = p.input.iter().map(|s| s.name()).collect();
                let output = p.output.map_or("same", |s| s.name());
                writeln!(out, "{:<20} {:>9} -> {:<5} {}", p.name, input.join("/"), output, p.about)?;
            }
            writeln!(out, "{:<20} {:>9} -> {:<5} {}", "decompose_format", "I", "same", "moves buffers to new formats by rewrite rules (Rust API; see docs/language.md)")?;
        }
        Cmd::GpuReport { file, target, chip } => {
            let loaded = driver::load(&file)?;
            let (funcs, plan) = target.resolve(&loaded, Some(backends::Auto::Gpu))?;
            for f in funcs {
                let lowered = backends::stage_iii(f, &plan)?;
                let ptx = backends::emit(&lowered, Emit::Ptx, &chip)?;
                out.push_str(&gpu_report(&f.name, &ptx, &chip)?);
            }
        }
        Cmd::Lower { file, emit, target, chip, .. } if emit != Emit::Sptir => {
            let loaded = driver::load(&file)?;
            // GPU code is scheduled: by the trace, else `--auto`, else the GPU default.
            let (funcs, plan) = target.resolve(&loaded, Some(backends::Auto::Gpu))?;
            for f in funcs {
                let lowered = backends::stage_iii(f, &plan)?;
                out.push_str(&backends::emit(&lowered, emit, &chip)?);
            }
        }
        Cmd::Lower { file, stage, target, print_after, .. } => {
            let loaded = driver::load(&file)?;
            let (funcs, plan) = target.resolve(&loaded, None)?;
            for f in funcs {
                if !print_after.is_empty() {
                    let mut ran = Vec::new();
                    let mut dumps = String::new();
                    driver::lower_observed(f, &plan, &mut |name, g| {
                        if print_after.iter().any(|p| p == "all" || p == name) {
                            dumps.push_str(&format!("# ===== after {name} (step {}): {} =====\n", ran.len() + 1, g.name));
                            dumps.push_str(&text::print_func(g));
                        }
                        ran.push(name.to_string());
                    })?;
                    if let Some(p) = print_after.iter().find(|p| *p != "all" && !ran.contains(p)) {
                        ran.dedup();
                        return Err(format!("--print-after {p}: no pass or step of that name ran (ran: {})", ran.join(", ")).into());
                    }
                    out.push_str(&dumps);
                    continue;
                }
                let lowered = driver::lower_with(f, &plan)?;
                let wanted = stage.stages();
                for g in lowered.iter().filter(|g| wanted.contains(&g.stage)) {
                    if stage == StageArg::All {
                        writeln!(out, "# ===== Stage {}: {} =====", g.stage, g.name)?;
                    }
                    out.push_str(&text::print_func(g));
                }
                if let Some(missing) = wanted.iter().find(|s| !lowered.iter().any(|g| g.stage == **s)) {
                    return Err(DriverError::CannotRaise { func: f.name.clone(), at: f.stage, want: *missing }.into());
                }
            }
        }
        Cmd::Run(args) => run::run(args, out)?,
    }
    Ok(())
}
