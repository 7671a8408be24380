//! sparsec's CPU kernels beside their peers, measured in one run: CSR SpMM (feat 32 and 128),
//! SpMV and SDDMM (feat 32 and 128) with the default CPU schedule on the MLIR JIT, one thread
//! and two, against oneMKL (sparse_dot_mkl's call, and the inspector-executor API with the
//! handle built once; one and two threads), scipy, and numpy's gather + sum for SDDMM.
//!
//! The peers run in a Python process (`scripts/cpu_peers.py`) that this bench drives line by
//! line, so every round measures sparsec and then its peers on the same matrix before the
//! next: noise on this shared machine hits both alike. Each figure is the fastest call of a
//! short burst, and the fastest over `SPARSEC_BENCH_ROUNDS` rounds (default 5).
//!
//! `cargo bench -p sparsec-backend-mlir --bench cpu [-- FILTER]` (`scripts/bench-cpu`); FILTER
//! keeps matrices whose name contains it, `SPARSEC_BENCH_KERNELS=spmm,spmv,sddmm` the kernels. The table goes to stdout and, as JSON, to
//! `$CARGO_TARGET_DIR/bench-cpu.json`. Ratios are sparsec time / peer time (below 1: sparsec
//! is faster).

use sparsec_backend_mlir::{CpuKernel, CpuOptions};
use sparsec_ir::data::Args;
use sparsec_ir::Func;
use sparsec_testkit::Mat;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// Seconds each measurement keeps calling (the fastest call counts).
fn budget() -> Duration {
    let s = std::env::var("SPARSEC_BENCH_BUDGET").ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.15);
    Duration::from_secs_f64(s)
}

/// The fastest call of `f` within the budget (at least 3 calls, after one warm-up call).
fn best(mut f: impl FnMut()) -> f64 {
    f();
    let end = Instant::now() + budget();
    let (mut n, mut fastest) = (0, f64::INFINITY);
    while n < 3 || Instant::now() < end {
        let t = Instant::now();
        f();
        fastest = fastest.min(t.elapsed().as_secs_f64());
        n += 1;
    }
    fastest
}

/// The Python process that times the peers.
struct Peers {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Peers {
    fn start() -> Peers {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/cpu_peers.py");
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
        let mut child = Command::new(python)
            .arg(script)
            .env("SPARSEC_PEER_BUDGET", budget().as_secs_f64().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs scripts/cpu_peers.py (pip install numpy scipy mkl sparse-dot-mkl)");
        let input = child.stdin.take().expect("stdin");
        let output = BufReader::new(child.stdout.take().expect("stdout"));
        Peers { child, input, output }
    }

    /// Sends one command and returns its answer's fields.
    fn ask(&mut self, cmd: &str) -> BTreeMap<String, String> {
        writeln!(self.input, "{cmd}").expect("peer process alive");
        let mut line = String::new();
        self.output.read_line(&mut line).expect("peer answers");
        let fields = parse_flat_json(&line);
        if let Some(e) = fields.get("error") {
            panic!("peer command `{cmd}` failed: {e}");
        }
        fields
    }

    fn times(&mut self, cmd: &str) -> BTreeMap<String, f64> {
        self.ask(cmd).into_iter().filter_map(|(k, v)| Some((k, v.parse::<f64>().ok()?))).collect()
    }
}

impl Drop for Peers {
    fn drop(&mut self) {
        let _ = writeln!(self.input, "quit");
        let _ = self.child.wait();
    }
}

/// The fields of a flat JSON object of strings and numbers (what `cpu_peers.py` prints).
fn parse_flat_json(line: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let body = line.trim().trim_start_matches('{').trim_end_matches('}');
    let mut rest = body;
    while let Some(k0) = rest.find('"') {
        let after = &rest[k0 + 1..];
        let Some(k1) = after.find('"') else { break };
        let key = after[..k1].to_string();
        let v = after[k1 + 1..].trim_start().trim_start_matches(':').trim_start();
        let (value, tail) = if let Some(s) = v.strip_prefix('"') {
            let end = s.find('"').unwrap_or(s.len());
            (s[..end].to_string(), &s[(end + 1).min(s.len())..])
        } else {
            let end = v.find(',').unwrap_or(v.len());
            (v[..end].trim().to_string(), &v[end..])
        };
        out.insert(key, value);
        rest = tail.trim_start_matches(',');
    }
    out
}

/// A compiled kernel, one thread and threaded.
struct Kernel {
    serial: CpuKernel,
    threaded: CpuKernel,
}

impl Kernel {
    fn new(f: &Func) -> Kernel {
        let f = sparsec_schedule::auto::cpu_schedule(f).expect("the default CPU schedule applies");
        let threaded = CpuKernel::compile(&f, &CpuOptions::default()).expect("compiles");
        let serial = CpuKernel::compile(&f, &CpuOptions { parallel: false, ..CpuOptions::default() }).expect("compiles");
        Kernel { serial, threaded }
    }
}

fn spmv_func() -> Func {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/spmv.sptir");
    let text = std::fs::read_to_string(path).expect("examples/spmv.sptir");
    sparsec::ir::text::parse_func("spmv.sptir", &text).expect("spmv parses")
}

fn f32s(n: usize, seed: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7919 + seed) % 1000) as f32 / 1000.0).collect()
}

/// One measured configuration.
#[derive(Clone)]
struct Row {
    kernel: &'static str,
    matrix: String,
    nnz: usize,
    feat: usize,
    /// Fastest time in seconds of each contender over the rounds (`sparsec1`, `sparsec2`,
    /// `mkl1`, `mkl_ie2`, `scipy`, `numpy`, ...).
    t: BTreeMap<String, f64>,
}

impl Row {
    fn keep(&mut self, name: &str, secs: f64) {
        let e = self.t.entry(name.to_string()).or_insert(f64::INFINITY);
        *e = e.min(secs);
    }
    fn ratio(&self, a: &str, b: &str) -> f64 {
        match (self.t.get(a), self.t.get(b)) {
            (Some(x), Some(y)) => x / y,
            _ => f64::NAN,
        }
    }
}

fn geomean(xs: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = xs.filter(|x| x.is_finite() && *x > 0.0).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp()
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-')).unwrap_or_default();
    let rounds: usize = std::env::var("SPARSEC_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let mut peers = Peers::start();
    let info = peers.ask("info");
    println!("oneMKL: {}", info.get("mkl").map(|s| s.trim()).unwrap_or("?"));
    println!("oneMKL code path (MKL_VERBOSE=1): {}", info.get("mkl_path").map(|s| s.trim()).unwrap_or("?"));
    println!("(on an AMD CPU oneMKL runs its generic code path, not its AVX-512 kernels)");

    let spmm = Kernel::new(&sparsec_testkit::workload("csrmm"));
    let sddmm = Kernel::new(&sparsec_testkit::workload("sddmm"));
    let spmv = Kernel::new(&spmv_func());

    let paths: BTreeMap<String, std::path::PathBuf> = sparsec::formats::shared_matrices().into_iter().collect();
    let mats: Vec<(String, Mat)> = sparsec_testkit::shared_matrices().into_iter().filter(|(n, _)| n.contains(&filter)).collect();
    let mut rows: Vec<Row> = Vec::new();
    let mut args: Vec<Args> = Vec::new();
    for (name, m) in &mats {
        let loaded = peers.ask(&format!("load {name} {}", paths[name].display()));
        if loaded.get("nnz").and_then(|v| v.parse::<usize>().ok()) != Some(m.nnz()) {
            panic!("{name}: the peers read {:?} nonzeros, sparsec {}", loaded.get("nnz"), m.nnz());
        }
        let kernels = std::env::var("SPARSEC_BENCH_KERNELS").unwrap_or_default();
        for (kernel, feat) in [("spmm", 32), ("spmm", 128), ("spmv", 1), ("sddmm", 32), ("sddmm", 128)] {
            if !kernels.is_empty() && !kernels.split(',').any(|k| k == kernel) {
                continue;
            }
            rows.push(Row { kernel, matrix: name.clone(), nnz: m.nnz(), feat, t: BTreeMap::new() });
            args.push(match kernel {
                "spmm" => sparsec_testkit::workloads::csrmm_args(m, f32s(m.cols * feat, 0), feat, 0.0),
                "spmv" => sparsec_testkit::workloads::spmv_args(m, f32s(m.cols, 1), 0.0),
                _ => sparsec_testkit::workloads::sddmm_case_of_width(m, &mut sparsec_testkit::Rng::new(3), feat).args,
            });
        }
    }
    for round in 0..rounds {
        eprintln!("round {}/{rounds}", round + 1);
        for (row, a) in rows.iter_mut().zip(args.iter_mut()) {
            let k = match row.kernel {
                "spmm" => &spmm,
                "spmv" => &spmv,
                _ => &sddmm,
            };
            let s1 = best(|| k.serial.run(a).expect("runs"));
            let s2 = best(|| k.threaded.run(a).expect("runs"));
            row.keep("sparsec1", s1);
            row.keep("sparsec2", s2);
            let peer: Vec<(String, f64)> = match row.kernel {
                "sddmm" => peers.times(&format!("sddmm {} {}", row.matrix, row.feat)).into_iter().collect(),
                kernel => {
                    let cmd = |t: usize| match kernel {
                        "spmm" => format!("spmm {} {} {t}", row.matrix, row.feat),
                        _ => format!("spmv {} {t}", row.matrix),
                    };
                    let mut v = Vec::new();
                    for t in [1, 2] {
                        for (name, secs) in peers.times(&cmd(t)) {
                            // scipy has one thread whatever MKL is told.
                            let key = if name == "scipy" { name } else { format!("{name}{t}") };
                            v.push((key, secs));
                        }
                    }
                    v
                }
            };
            for (name, secs) in peer {
                row.keep(&name, secs);
            }
        }
    }
    report(&rows);
}

fn report(rows: &[Row]) {
    let ms = |r: &Row, k: &str| r.t.get(k).map(|s| format!("{:9.4}", s * 1e3)).unwrap_or_else(|| format!("{:>9}", "-"));
    for (kernel, cols, ratios) in [
        (
            "spmm",
            &["sparsec1", "sparsec2", "mkl1", "mkl2", "mkl_ie1", "mkl_ie2", "scipy"][..],
            &[("sparsec1", "mkl1"), ("sparsec2", "mkl2"), ("sparsec1", "mkl_ie1"), ("sparsec2", "mkl_ie2"), ("sparsec1", "scipy"), ("sparsec2", "sparsec1")][..],
        ),
        (
            "spmv",
            &["sparsec1", "sparsec2", "mkl1", "mkl2", "mkl_ie1", "mkl_ie2", "scipy"][..],
            &[("sparsec1", "mkl_ie1"), ("sparsec2", "mkl_ie2"), ("sparsec1", "mkl1"), ("sparsec2", "sparsec1")][..],
        ),
        ("sddmm", &["sparsec1", "sparsec2", "numpy"][..], &[("sparsec1", "numpy"), ("sparsec2", "numpy"), ("sparsec2", "sparsec1")][..]),
    ] {
        let sel: Vec<&Row> = rows.iter().filter(|r| r.kernel == kernel).collect();
        if sel.is_empty() {
            continue;
        }
        println!("\n{kernel}: times in ms (fastest call), ratios = first / second");
        let mut head = format!("{:16} {:>8} {:>4}", "matrix", "nnz", "feat");
        for c in cols {
            head += &format!(" {c:>9}");
        }
        for (a, b) in ratios {
            head += &format!(" {:>17}", format!("{a}/{b}"));
        }
        println!("{head}");
        for r in &sel {
            let mut line = format!("{:16} {:>8} {:>4}", r.matrix, r.nnz, r.feat);
            for c in cols {
                line += &format!(" {}", ms(r, c));
            }
            for (a, b) in ratios {
                line += &format!(" {:>17.3}", r.ratio(a, b));
            }
            println!("{line}");
        }
        let mut feats: Vec<usize> = sel.iter().map(|r| r.feat).collect();
        feats.sort_unstable();
        feats.dedup();
        for feat in feats {
            let mut line = format!("{:16} {:>8} {:>4}", "geomean", "", feat);
            line += &" ".repeat(10 * cols.len());
            for (a, b) in ratios {
                line += &format!(" {:>17.3}", geomean(sel.iter().filter(|r| r.feat == feat).map(|r| r.ratio(a, b))));
            }
            println!("{line}");
        }
    }
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../target").into());
    let mut json = String::from("[\n");
    for (i, r) in rows.iter().enumerate() {
        let times: Vec<String> = r.t.iter().map(|(k, v)| format!("\"{k}\": {v:e}")).collect();
        json += &format!(
            "  {{\"kernel\": \"{}\", \"matrix\": \"{}\", \"nnz\": {}, \"feat\": {}, \"seconds\": {{{}}}}}{}\n",
            r.kernel,
            r.matrix,
            r.nnz,
            r.feat,
            times.join(", "),
            if i + 1 < rows.len() { "," } else { "" }
        );
    }
    json += "]\n";
    let path = std::path::Path::new(&target).join("bench-cpu.json");
    if std::fs::write(&path, json).is_ok() {
        println!("\nJSON: {}", path.display());
    }
}
