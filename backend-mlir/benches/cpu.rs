//! sparsec's CPU kernels beside their peers, measured in one run: CSR SpMM (feat 32 and 128),
//! SpMV and SDDMM (feat 32 and 128) with the default CPU schedule on the MLIR JIT, one thread
//! and two, against oneMKL (sparse_dot_mkl's call, and the inspector-executor API with the
//! handle built once; one and two threads), scipy, numpy's gather + sum for SDDMM, and MLIR's
//! own sparsifier for SpMM and SpMV (`SparsifierKernel`, JIT-compiled here, one thread).
//!
//! The peers run in a Python process (`scripts/cpu_peers.py`) that this bench drives line by
//! line, so every round measures sparsec and then its peers on the same matrix before the
//! next: noise on this shared machine hits both alike. Each figure is the fastest call of a
//! short burst, and the fastest over `SPARSEC_BENCH_ROUNDS` rounds (default 5).
//!
//! `cargo bench -p sparsec-backend-mlir --bench cpu [-- FILTER]` (`scripts/bench-cpu`); FILTER
//! keeps matrices whose name contains it, `SPARSEC_BENCH_KERNELS=spmm,spmv,sddmm` the kernels
//! (`large` adds SpMM at feat 32 on a generated R-MAT graph of ~10^7 nonzeros, which the
//! peers read from `.npy` files). The table goes to stdout and, as JSON, to
//! `$CARGO_TARGET_DIR/bench-cpu.json`. Ratios are sparsec time / peer time (below 1: sparsec
//! is faster).

use sparsec_backend_mlir::{CpuKernel, CpuOptions, SparsifierKernel, SparsifierOp};
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

    /// Sends one command and returns its answer (a JSON object).
    fn ask(&mut self, cmd: &str) -> serde_json::Map<String, serde_json::Value> {
        writeln!(self.input, "{cmd}").expect("peer process alive");
        let mut line = String::new();
        self.output.read_line(&mut line).expect("peer answers");
        let fields: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("peer answer to `{cmd}` is not a JSON object ({e}): {line}"));
        if let Some(e) = fields.get("error") {
            panic!("peer command `{cmd}` failed: {e}");
        }
        fields
    }

    fn times(&mut self, cmd: &str) -> BTreeMap<String, f64> {
        self.ask(cmd).into_iter().filter_map(|(k, v)| Some((k, v.as_f64()?))).collect()
    }
}

impl Drop for Peers {
    fn drop(&mut self) {
        let _ = writeln!(self.input, "quit");
        let _ = self.child.wait();
    }
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

/// Large arrays on cache lines and huge pages (`sparsec::alloc`): a dense operand's rows
/// then never straddle lines.
#[global_allocator]
static ALLOC: sparsec::alloc::CacheAligned = sparsec::alloc::CacheAligned;

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-')).unwrap_or_default();
    let rounds: usize = std::env::var("SPARSEC_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let mut peers = Peers::start();
    let info = peers.ask("info");
    let text = |k: &str| info.get(k).and_then(|v| v.as_str()).map(|s| s.trim().to_string()).unwrap_or_else(|| "?".into());
    println!("oneMKL: {}", text("mkl"));
    println!("oneMKL code path (MKL_VERBOSE=1): {}", text("mkl_path"));
    println!("(on an AMD CPU oneMKL runs its generic code path, not its AVX-512 kernels)");

    dispatch_cost();
    let spmm = Kernel::new(&sparsec_testkit::workload("csrmm"));
    let sddmm = Kernel::new(&sparsec_testkit::workload("sddmm"));
    let spmv = Kernel::new(&spmv_func());

    let kernels = std::env::var("SPARSEC_BENCH_KERNELS").unwrap_or_default();
    let wanted = |kernel: &str| if kernels.is_empty() { kernel != "large" } else { kernels.split(',').any(|k| k == kernel) };
    let paths: BTreeMap<String, std::path::PathBuf> = sparsec::formats::shared_matrices().into_iter().collect();
    let mut mats: Vec<(String, Mat)> = sparsec_testkit::shared_matrices().into_iter().filter(|(n, _)| n.contains(&filter)).collect();
    if !wanted("spmm") && !wanted("spmv") && !wanted("sddmm") {
        mats.clear();
    }
    let mut rows: Vec<Row> = Vec::new();
    let mut args: Vec<Args> = Vec::new();
    // MLIR's sparsifier on the same matrix and dense operand (SpMM, SpMV), in this process.
    let mut sparsifiers: Vec<Option<Sparsifier>> = Vec::new();
    if wanted("large") {
        let (name, m) = large_graph();
        let loaded = peers.ask(&format!("loadcsr {name} {}", write_csr(&name, &m).display()));
        assert_eq!(loaded.get("nnz").and_then(|v| v.as_u64()), Some(m.nnz() as u64), "{name}: the peers read another matrix");
        rows.push(Row { kernel: "large", matrix: name, nnz: m.nnz(), feat: 32, t: BTreeMap::new() });
        args.push(sparsec_testkit::workloads::csrmm_args(&m, f32s(m.cols * 32, 0), 32, 0.0));
        sparsifiers.push(Some(Sparsifier::new(&m, SparsifierOp::Spmm { feat: 32 }, f32s(m.cols * 32, 0))));
    }
    for (name, m) in &mats {
        let loaded = peers.ask(&format!("load {name} {}", paths[name].display()));
        if loaded.get("nnz").and_then(|v| v.as_u64()) != Some(m.nnz() as u64) {
            panic!("{name}: the peers read {:?} nonzeros, sparsec {}", loaded.get("nnz"), m.nnz());
        }
        for (kernel, feat) in [("spmm", 32), ("spmm", 128), ("spmv", 1), ("sddmm", 32), ("sddmm", 128)] {
            if !wanted(kernel) {
                continue;
            }
            rows.push(Row { kernel, matrix: name.clone(), nnz: m.nnz(), feat, t: BTreeMap::new() });
            args.push(match kernel {
                "spmm" => sparsec_testkit::workloads::csrmm_args(m, f32s(m.cols * feat, 0), feat, 0.0),
                "spmv" => sparsec_testkit::workloads::spmv_args(m, f32s(m.cols, 1), 0.0),
                _ => sparsec_testkit::workloads::sddmm_case_of_width(m, &mut sparsec_testkit::Rng::new(3), feat).args,
            });
            sparsifiers.push(match kernel {
                "spmm" => Some(Sparsifier::new(m, SparsifierOp::Spmm { feat }, f32s(m.cols * feat, 0))),
                "spmv" => Some(Sparsifier::new(m, SparsifierOp::Spmv, f32s(m.cols, 1))),
                _ => None,
            });
        }
    }
    let bar = indicatif::ProgressBar::new((rounds * rows.len()) as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template("bench-cpu {bar:30} {pos}/{len} round {msg} {elapsed}") {
        bar.set_style(style);
    }
    for round in 0..rounds {
        for ((row, a), sp) in rows.iter_mut().zip(args.iter_mut()).zip(sparsifiers.iter_mut()) {
            bar.set_message(format!("{}/{rounds}: {} {} feat {}", round + 1, row.kernel, row.matrix, row.feat));
            bar.inc(1);
            let k = match row.kernel {
                "spmm" | "large" => &spmm,
                "spmv" => &spmv,
                _ => &sddmm,
            };
            let s1 = best(|| k.serial.run(a).expect("runs"));
            let s2 = best(|| k.threaded.run(a).expect("runs"));
            row.keep("sparsec1", s1);
            row.keep("sparsec2", s2);
            if let Some(sp) = sp {
                row.keep("sparsifier", best(|| sp.kernel.run(&sp.dense, &mut sp.out).expect("the sparsifier runs")));
            }
            let peer: Vec<(String, f64)> = match row.kernel {
                "sddmm" => peers.times(&format!("sddmm {} {}", row.matrix, row.feat)).into_iter().collect(),
                kernel => {
                    let cmd = |t: usize| match kernel {
                        "spmm" | "large" => format!("spmm {} {} {t}", row.matrix, row.feat),
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
    bar.finish_and_clear();
    report(&rows);
}

/// MLIR's sparsifier compiled for one matrix, with its dense operand and output.
struct Sparsifier {
    kernel: SparsifierKernel,
    dense: Vec<f32>,
    out: Vec<f32>,
}

impl Sparsifier {
    fn new(m: &Mat, op: SparsifierOp, dense: Vec<f32>) -> Sparsifier {
        let feat = op.width();
        let (ptr, idx) = (m.indptr.iter().map(|&x| x as i64).collect(), m.indices.iter().map(|&x| x as i64).collect());
        let kernel = SparsifierKernel::compile(op, m.rows, m.cols, ptr, idx, m.vals.clone()).expect("the sparsifier compiles");
        Sparsifier { kernel, dense, out: vec![0.0; m.rows * feat] }
    }
}

/// What waking the thread team costs: the fastest threaded call of a parallel loop of two
/// iterations that each store one element, less the fastest serial call of it.
fn dispatch_cost() {
    let text = "func touch(y: handle, n: i32) stage III {
  buffer Y = match_buffer(y, [n], f32)
  for i in parallel(n) {
    block b(vi: spatial(n) = i) {
      writes(Y[vi])
      Y[vi] = 1.0
    }
  }
}";
    let f = sparsec::ir::text::parse_func("touch.sptir", text).expect("the dispatch probe parses");
    let threaded = CpuKernel::compile(&f, &CpuOptions::default()).expect("compiles");
    let serial = CpuKernel::compile(&f, &CpuOptions { parallel: false, ..CpuOptions::default() }).expect("compiles");
    let mut args = Args::new();
    args.array("y", sparsec_ir::data::Array::F32(vec![0.0; 2])).int("n", 2);
    let (mut t, mut s) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..5 {
        t = t.min(best(|| threaded.run(&mut args).expect("runs")));
        s = s.min(best(|| serial.run(&mut args).expect("runs")));
    }
    println!("thread team (OpenMP): a parallel loop of 2 iterations takes {:.2} µs threaded, {:.2} µs serial: {:.2} µs a region", t * 1e6, s * 1e6, (t - s) * 1e6);
}

/// The large graph of `SPARSEC_BENCH_KERNELS=large`: an R-MAT power-law matrix of 2^20 rows
/// and columns from 10^7 samples (a few repeat), whose dense operand at feat 32 (128 MB) is
/// four times the L3 cache.
fn large_graph() -> (String, Mat) {
    let csr = sparsec::formats::gen::rmat::<i32, f32>(20, 10_000_000, [0.57, 0.19, 0.19, 0.05], 11).expect("R-MAT parameters are valid");
    let m = Mat {
        rows: csr.rows(),
        cols: csr.cols(),
        indptr: csr.indptr().iter().map(|&x| x as usize).collect(),
        indices: csr.indices().iter().map(|&x| x as usize).collect(),
        vals: csr.values().to_vec(),
    };
    ("rmat-20-1e7".to_string(), m)
}

/// Writes `m` as `indptr.npy`, `indices.npy`, `data.npy` and `shape.npy` into a folder of
/// the target directory for the peers to read, and returns the folder.
fn write_csr(name: &str, m: &Mat) -> std::path::PathBuf {
    let dir = std::path::Path::new(&target_dir()).join("bench-cpu").join(name);
    std::fs::create_dir_all(&dir).expect("bench folder");
    let i32s = |v: &[usize]| sparsec_ir::data::Array::I32(v.iter().map(|&x| x as i32).collect());
    let put = |file: &str, a: sparsec_ir::data::Array| {
        let n = a.len() as u64;
        sparsec::npy::write(&dir.join(file), &a, &[n]).expect("writes the matrix for the peers")
    };
    put("indptr.npy", i32s(&m.indptr));
    put("indices.npy", i32s(&m.indices));
    put("data.npy", sparsec_ir::data::Array::F32(m.vals.clone()));
    put("shape.npy", i32s(&[m.rows, m.cols]));
    dir
}

fn target_dir() -> String {
    std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../target").into())
}

fn report(rows: &[Row]) {
    let ms = |r: &Row, k: &str| r.t.get(k).map(|s| format!("{:9.4}", s * 1e3)).unwrap_or_else(|| format!("{:>9}", "-"));
    for (kernel, cols, ratios) in [
        (
            "spmm",
            &["sparsec1", "sparsec2", "mkl1", "mkl2", "mkl_ie1", "mkl_ie2", "scipy", "sparsifier"][..],
            &[("sparsec1", "mkl1"), ("sparsec2", "mkl2"), ("sparsec1", "mkl_ie1"), ("sparsec2", "mkl_ie2"), ("sparsec1", "scipy"), ("sparsec1", "sparsifier"), ("sparsec2", "sparsec1")][..],
        ),
        (
            "large",
            &["sparsec1", "sparsec2", "mkl1", "mkl2", "mkl_ie1", "mkl_ie2", "scipy", "sparsifier"][..],
            &[("sparsec1", "mkl_ie1"), ("sparsec2", "mkl_ie2"), ("sparsec1", "scipy"), ("sparsec1", "sparsifier"), ("sparsec2", "sparsec1")][..],
        ),
        (
            "spmv",
            &["sparsec1", "sparsec2", "mkl1", "mkl2", "mkl_ie1", "mkl_ie2", "scipy", "sparsifier"][..],
            &[("sparsec1", "mkl_ie1"), ("sparsec2", "mkl_ie2"), ("sparsec1", "mkl1"), ("sparsec1", "sparsifier"), ("sparsec2", "sparsec1")][..],
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
    let target = target_dir();
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
