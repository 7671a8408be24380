//! `sparsec bench`: compile once per case, then time runs in interleaved rounds beside peer
//! libraries on the same operands, with where each run's time went; a sweep over matrices,
//! feature widths and schedules prints a table, writes CSV or JSON and draws a chart.

use crate::backends::Auto;
use crate::peers::{self, Operands, Operation, Peer, Peers};
use crate::run::{self, backend_name, RunArgs};
use sparsec::backend::RunTimes;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Arguments of `sparsec bench`: those of `run` (several `--matrix` for one buffer and
/// several `--feat` make a sweep), and how to measure.
#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Timed runs of each case per round.
    #[arg(long, default_value_t = 10)]
    repeat: usize,
    /// Untimed runs of each case first.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Rounds: each times every case and every peer in turn, so that a noisy machine slows
    /// them alike.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Also runs every case under this schedule: a trace file, `auto-cpu`, `auto-gpu` or
    /// `plain` (repeatable; the schedule of `--schedule`/`--auto` comes first).
    #[arg(long = "sweep-schedule", value_name = "TRACE|auto-cpu|auto-gpu|plain")]
    sweep_schedule: Vec<String>,
    /// Times a peer library on the same operands in the same rounds (repeatable): `scipy`,
    /// `mkl`, `mkl-ie`, `sparsifier` (SpMM, SpMV over CSR), `numpy` (SDDMM). Its result and
    /// the program's are both checked against an f64 reference first. The Python peers need
    /// python3 with numpy and scipy; `sparsifier` is MLIR's, compiled in this process.
    #[arg(long, value_enum)]
    compare: Vec<Peer>,
    /// Prints one JSON object per case instead of the table.
    #[arg(long)]
    json: bool,
    /// Writes the table as CSV to this file.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Draws the fastest kernel of every case and the fastest call of every peer as a bar
    /// chart (SVG) to this file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

/// A schedule a case runs under.
#[derive(Clone, Debug)]
struct Schedule {
    label: String,
    trace: Option<PathBuf>,
    auto: Option<Auto>,
}

/// What was measured of one case.
pub(crate) struct Measured {
    /// The matrices' file names and the feature width.
    pub data: String,
    pub schedule: String,
    /// Set-up steps, in milliseconds.
    steps: Vec<(&'static str, f64)>,
    /// Every timed run, whole, in milliseconds, sorted.
    pub runs: Vec<f64>,
    /// The kernels of every timed run, in milliseconds, sorted.
    pub kernels: Vec<f64>,
    /// Each run's breakdown.
    times: Vec<RunTimes>,
    /// Each peer's best call per round, in milliseconds.
    pub peers: Vec<(Peer, Vec<f64>)>,
}

impl Measured {
    /// The fastest run's kernels: what a peer's call is compared with.
    pub fn kernel(&self) -> f64 {
        self.kernels[0]
    }
    fn min(&self) -> f64 {
        self.runs[0]
    }
    fn median(&self) -> f64 {
        median(&self.runs)
    }
    fn max(&self) -> f64 {
        self.runs[self.runs.len() - 1]
    }
    /// The median of one part of the runs, in milliseconds.
    fn part(&self, f: impl Fn(&RunTimes) -> std::time::Duration) -> f64 {
        let mut v: Vec<f64> = self.times.iter().map(|t| f(t).as_secs_f64() * 1e3).collect();
        v.sort_by(f64::total_cmp);
        median(&v)
    }
    /// The label of the case in tables and charts.
    pub fn label(&self, with_schedule: bool) -> String {
        if with_schedule {
            format!("{} {}", self.data, self.schedule)
        } else {
            self.data.clone()
        }
    }
}

/// The fastest of a peer's rounds.
pub(crate) fn best(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

fn schedules(b: &BenchArgs) -> Result<Vec<Schedule>, String> {
    let base = match (&b.run.schedule, b.run.auto) {
        (Some(t), _) => Schedule { label: stem(t), trace: Some(t.clone()), auto: None },
        (None, Some(a)) => Schedule { label: format!("auto-{}", auto_name(a)), trace: None, auto: Some(a) },
        (None, None) => Schedule { label: "plain".into(), trace: None, auto: None },
    };
    let mut out = vec![base];
    for s in &b.sweep_schedule {
        out.push(match s.as_str() {
            "plain" => Schedule { label: "plain".into(), trace: None, auto: None },
            "auto-cpu" => Schedule { label: s.clone(), trace: None, auto: Some(Auto::Cpu) },
            "auto-gpu" => Schedule { label: s.clone(), trace: None, auto: Some(Auto::Gpu) },
            path if Path::new(path).is_file() => Schedule { label: stem(Path::new(path)), trace: Some(path.into()), auto: None },
            other => return Err(format!("--sweep-schedule `{other}`: neither auto-cpu, auto-gpu, plain nor a trace file")),
        });
    }
    Ok(out)
}

fn auto_name(a: Auto) -> &'static str {
    match a {
        Auto::Cpu => "cpu",
        Auto::Gpu => "gpu",
    }
}

fn stem(p: &Path) -> String {
    p.file_stem().map_or_else(|| p.display().to_string(), |s| s.to_string_lossy().into_owned())
}

/// The data of a case, for labels: the matrices' file names and the feature width.
fn data_label(c: &RunArgs) -> String {
    let mut parts: Vec<String> = c.matrices.iter().map(|(_, p)| stem(p)).collect();
    parts.extend(c.feat.iter().map(|f| format!("feat {f}")));
    if parts.is_empty() {
        "generated".into()
    } else {
        parts.join(" ")
    }
}

/// Threads a peer library runs with: as many as the CPU kernels' OpenMP runtime takes.
fn peer_threads() -> usize {
    std::env::var("OMP_NUM_THREADS")
        .ok()
        .and_then(|v| v.split(',').next()?.trim().parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// `sparsec bench` (module documentation).
pub fn bench(mut b: BenchArgs, out_text: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    if b.repeat == 0 || b.rounds == 0 {
        return Err("bench: --repeat and --rounds must be at least 1".into());
    }
    if b.run.output.is_some() {
        return Err("bench writes no outputs: use `sparsec run --output` for them".into());
    }
    b.run.command = "bench";
    let scheds = schedules(&b)?;
    // Every case set up and compiled before anything is timed.
    let mut setups = Vec::new();
    let mut labels = Vec::new();
    for data in b.run.cases() {
        for s in &scheds {
            let mut case = data.clone();
            (case.schedule, case.auto) = (s.trace.clone(), s.auto);
            setups.push(run::setup(&case)?);
            labels.push((data_label(&data), s.label.clone()));
        }
    }
    let runner = crate::backends::runner(b.run.backend)?;
    let mut prepared = Vec::new();
    for s in &setups {
        prepared.push(sparsec::backend::prepare(runner.as_ref(), &s.loaded, &s.func, &s.lowered, &s.plan, &s.args, b.run.checked)?);
    }
    // The peers, on each case's operands, once the program's output is known to be the
    // operation's.
    let mut process = None;
    let mut ops: Vec<(Operation, Operands)> = Vec::new();
    let mut mkl = None;
    if !b.compare.is_empty() {
        let op = peers::recognize(&setups[0].stage1).map_err(|e| format!("--compare: {e}"))?;
        if let Some(p) = b.compare.iter().find(|p| !p.computes(op.kind)) {
            return Err(format!("--compare {}: it does not compute {} (the program's operation)", p.name(), op.kind.name()).into());
        }
        let mut proc = Peers::start(&b.compare)?;
        if b.compare.iter().any(|p| p.is_mkl()) {
            mkl = Some(proc.mkl_info().map_err(|e| format!("--compare mkl: {e}"))?);
        }
        for (i, (s, p)) in setups.iter().zip(&prepared).enumerate() {
            let operands = op.operands(&s.stage1, &s.args)?;
            let out = p.run()?;
            let name = &s.stage1.buffers[op.out].name;
            let got = peers::output(&s.stage1, &op, &out);
            op.check(&operands, &got, &format!("`{}` (its output `{name}`)", s.stage1.name)).map_err(|e| format!("--compare: {e}"))?;
            proc.load(i, &b.compare, &op, &operands)?;
            ops.push((op.clone(), operands));
        }
        process = Some(proc);
    }
    let threads = peer_threads();
    let bar = progress("bench", b.rounds * setups.len());
    let mut measured: Vec<Measured> = labels
        .iter()
        .zip(&setups)
        .zip(&prepared)
        .map(|(((data, sched), s), p)| {
            let mut steps: Vec<(&str, f64)> = s.times.iter().map(|(k, t)| (*k, t.as_secs_f64() * 1e3)).collect();
            steps.push(("check arguments", p.check_time.as_secs_f64() * 1e3));
            steps.push(("compile", p.compile_time.as_secs_f64() * 1e3));
            Measured { data: data.clone(), schedule: sched.clone(), steps, runs: Vec::new(), kernels: Vec::new(), times: Vec::new(), peers: b.compare.iter().map(|&p| (p, Vec::new())).collect() }
        })
        .collect();
    for p in &prepared {
        for _ in 0..b.warmup {
            p.run()?;
        }
    }
    for _round in 0..b.rounds {
        for (i, p) in prepared.iter().enumerate() {
            let m = &mut measured[i];
            bar.set_message(m.label(scheds.len() > 1));
            for _ in 0..b.repeat {
                let start = Instant::now();
                let (_, t) = p.run_timed()?;
                m.runs.push(start.elapsed().as_secs_f64() * 1e3);
                m.kernels.push(t.kernel.as_secs_f64() * 1e3);
                m.times.push(t);
            }
            if let (Some(proc), Some((op, operands))) = (process.as_mut(), ops.get(i)) {
                for (peer, best) in &mut m.peers {
                    let (seconds, result) = proc.time(*peer, i, op, threads)?;
                    op.check(operands, &result, &peer.name()).map_err(|e| format!("--compare: {e}"))?;
                    best.push(seconds * 1e3);
                }
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    for m in &mut measured {
        m.runs.sort_by(f64::total_cmp);
        m.kernels.sort_by(f64::total_cmp);
    }
    let s0 = &setups[0];
    let backend = backend_name(b.run.backend);
    let title = format!("{} on {backend} (Stage {})", s0.stage1.name, s0.lowered.stage);
    if b.json {
        for m in &measured {
            writeln!(out_text, "{}", json(m, &s0.stage1.name, &backend, &s0.lowered.stage.to_string()))?;
        }
    } else {
        table(&b, &title, &measured, scheds.len() > 1, threads, mkl.as_deref(), out_text)?;
    }
    if let Some(path) = &b.csv {
        std::fs::write(path, csv(&measured, &s0.stage1.name, &backend)).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(path) = &b.plot {
        crate::plot::bars(path, &title, &measured)?;
    }
    Ok(())
}

/// A progress bar on standard error, drawn only where a person sees it (`bench`, `tune`).
pub(crate) fn progress(what: &str, len: usize) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len as u64);
    let style = indicatif::ProgressStyle::with_template(&format!("{what} {{bar:30}} {{pos}}/{{len}} {{msg}}"));
    bar.set_style(style.unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()));
    bar
}

fn table(b: &BenchArgs, title: &str, measured: &[Measured], sched: bool, threads: usize, mkl: Option<&str>, out: &mut String) -> std::fmt::Result {
    writeln!(out, "bench {title}: {} rounds of {} runs after {} warm-up", b.rounds, b.repeat, b.warmup)?;
    for m in measured {
        if measured.len() > 1 {
            writeln!(out, "{}", m.label(sched))?;
        }
        for (k, v) in &m.steps {
            writeln!(out, "  {k:<18} {v:>10.3} ms")?;
        }
        writeln!(out, "  {:<18} min {:.4} ms  median {:.4} ms  max {:.4} ms", "run", m.min(), m.median(), m.max())?;
        writeln!(out, "  {:<18} min {:.4} ms  median {:.4} ms  max {:.4} ms", "kernel", m.kernel(), median(&m.kernels), m.kernels[m.kernels.len() - 1])?;
        writeln!(
            out,
            "  {:<18} upload {:.4}  kernel {:.4}  read-back {:.4}  symbolic {:.4} (medians, ms)",
            "a run",
            m.part(|t| t.upload),
            m.part(|t| t.kernel),
            m.part(|t| t.download),
            m.part(|t| t.symbolic)
        )?;
        for (p, v) in &m.peers {
            let peer = best(v);
            writeln!(out, "  {:<18} min {peer:.4} ms  kernel / {} = {:.3}", p.name(), p.name(), m.kernel() / peer)?;
        }
    }
    if !b.compare.is_empty() {
        writeln!(out, "peers: the fastest call in each round (best of 0.15 s), compared with the fastest kernel; their results equal an f64 reference, as sparsec's do")?;
        if b.compare.iter().any(|p| p.is_mkl()) {
            writeln!(out, "oneMKL with {threads} thread(s): {}", mkl.unwrap_or("?"))?;
        }
        if b.compare.contains(&Peer::Sparsifier) {
            writeln!(out, "sparsifier: MLIR's `sparsifier` pipeline on linalg over a CSR encoding, JIT-compiled here, one thread (C zeroed in each call)")?;
        }
    }
    if measured.len() > 1 {
        write!(out, "{:<36} {:>10} {:>10} {:>10}", "case", "run min", "run median", "kernel min")?;
        for p in &b.compare {
            write!(out, " {:>10} {:>7}", format!("{} ms", p.name()), "ratio")?;
        }
        writeln!(out)?;
        for m in measured {
            write!(out, "{:<36} {:>10.4} {:>10.4} {:>10.4}", m.label(sched), m.min(), m.median(), m.kernel())?;
            for (_, v) in &m.peers {
                write!(out, " {:>10.4} {:>7.3}", best(v), m.kernel() / best(v))?;
            }
            writeln!(out)?;
        }
    }
    Ok(())
}

fn json(m: &Measured, func: &str, backend: &str, stage: &str) -> serde_json::Value {
    let mut obj = serde_json::Map::new();
    obj.insert("function".into(), func.into());
    obj.insert("backend".into(), backend.into());
    obj.insert("stage".into(), stage.into());
    obj.insert("data".into(), m.data.clone().into());
    obj.insert("schedule".into(), m.schedule.clone().into());
    let steps: serde_json::Map<String, serde_json::Value> = m.steps.iter().map(|(k, v)| (k.to_string(), (*v).into())).collect();
    obj.insert("steps_ms".into(), steps.into());
    obj.insert("runs_ms".into(), m.runs.clone().into());
    obj.insert("min_ms".into(), m.min().into());
    obj.insert("median_ms".into(), m.median().into());
    obj.insert("max_ms".into(), m.max().into());
    obj.insert("kernel_min_ms".into(), m.kernel().into());
    obj.insert("kernel_median_ms".into(), median(&m.kernels).into());
    let mut parts = serde_json::Map::new();
    parts.insert("upload".into(), m.part(|t| t.upload).into());
    parts.insert("kernel".into(), m.part(|t| t.kernel).into());
    parts.insert("read_back".into(), m.part(|t| t.download).into());
    parts.insert("symbolic".into(), m.part(|t| t.symbolic).into());
    obj.insert("run_parts_median_ms".into(), parts.into());
    let peers: serde_json::Map<String, serde_json::Value> = m.peers.iter().map(|(p, v)| (p.name(), best(v).into())).collect();
    obj.insert("peers_min_ms".into(), peers.into());
    serde_json::Value::Object(obj)
}

fn csv(measured: &[Measured], func: &str, backend: &str) -> String {
    let mut s = String::from("function,backend,data,schedule,min_ms,median_ms,max_ms,kernel_min_ms,upload_ms,kernel_ms,read_back_ms,symbolic_ms");
    if let Some(m) = measured.first() {
        for (p, _) in &m.peers {
            let _ = write!(s, ",{0}_ms,ratio_{0}", p.name());
        }
    }
    s.push('\n');
    for m in measured {
        let _ = write!(
            s,
            "{func},{backend},{},{},{},{},{},{},{},{},{},{}",
            m.data,
            m.schedule,
            m.min(),
            m.median(),
            m.max(),
            m.kernel(),
            m.part(|t| t.upload),
            m.part(|t| t.kernel),
            m.part(|t| t.download),
            m.part(|t| t.symbolic)
        );
        for (_, v) in &m.peers {
            let _ = write!(s, ",{},{}", best(v), m.kernel() / best(v));
        }
        s.push('\n');
    }
    s
}
