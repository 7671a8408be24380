//! The threads of threaded kernels: engines compiled, run and dropped in a loop, and
//! processes that exit right after a threaded run (defect 3: with MLIR's async runtime, a
//! worker still finishing a task in the JIT code of a dropped engine crashed the process;
//! an OpenMP parallel region returns only after its join barrier).

use super::common::cpu_scheduled;
use sparsec_backend_mlir::{CpuKernel, CpuOptions};
use sparsec_ir::data::Args;
use sparsec_testkit as kit;

/// Set in the child processes of [`processes_exit_cleanly_after_threaded_runs`].
const CHILD: &str = "SPARSEC_MLIR_RUNTIME_CHILD";

/// csrmm with the CPU schedule (threaded) on a banded matrix of 8192 rows: enough nonzeros
/// for several chunks of rows.
fn threaded_csrmm() -> (sparsec_ir::Func, Args) {
    let f = cpu_scheduled("csrmm");
    let rows = 8192;
    let mut m = kit::Mat { rows, cols: rows, indptr: vec![0], indices: Vec::new(), vals: Vec::new() };
    for i in 0..rows {
        for j in i.saturating_sub(1)..(i + 2).min(rows) {
            m.indices.push(j);
            m.vals.push((i + j) as f32 * 0.5);
        }
        m.indptr.push(m.indices.len());
    }
    let c = kit::workloads::case("csrmm", &m, &mut kit::Rng::new(5)).unwrap();
    (f, c.args)
}

/// Busy threads (two per core) until the guard drops: workers get preempted, also in the
/// last instructions of their tasks.
struct Load(std::sync::Arc<std::sync::atomic::AtomicBool>, Vec<std::thread::JoinHandle<()>>);

fn load() -> Load {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let n = 2 * std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = (0..n)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    Load(stop, threads)
}

impl Drop for Load {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.1.drain(..) {
            let _ = t.join();
        }
    }
}

/// Compiles, runs and drops the threaded kernel, then gives the workers time to run in the
/// freed code if they were still in it; returns the output `c`.
fn run_once(f: &sparsec_ir::Func, args: &Args) -> Vec<f32> {
    let k = CpuKernel::compile(f, &CpuOptions { opt_level: 0, ..CpuOptions::default() }).unwrap();
    assert!(k.is_threaded());
    let mut out = args.clone();
    k.run(&mut out).unwrap();
    drop(k);
    std::thread::sleep(std::time::Duration::from_millis(1));
    kit::output_f32(&out, "c")
}

#[test]
fn threaded_kernels_compiled_run_and_dropped_in_a_loop() {
    let (f, args) = threaded_csrmm();
    let first = run_once(&f, &args);
    let _load = load();
    for _ in 0..100 {
        assert_eq!(run_once(&f, &args), first);
    }
}

/// A kernel whose OpenMP threads sleep right after each call (blocktime 0, what Burn's Flex
/// backend uses) gives the bits of the default one, run after run, under load.
#[test]
fn threaded_kernels_that_sleep_at_once_give_the_same_bits() {
    let (f, args) = threaded_csrmm();
    let want = run_once(&f, &args);
    let k = CpuKernel::compile(&f, &CpuOptions { openmp_blocktime_ms: Some(0), ..CpuOptions::default() }).unwrap();
    assert!(k.is_threaded());
    let _load = load();
    for _ in 0..20 {
        let mut out = args.clone();
        k.run(&mut out).unwrap();
        assert_eq!(kit::output_f32(&out, "c"), want);
    }
}

/// The body of each child process: a kernel dropped, another alive at exit.
#[test]
fn threaded_run_then_exit() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let (f, args) = threaded_csrmm();
    let _load = load();
    run_once(&f, &args);
    let k = CpuKernel::compile(&f, &CpuOptions::default()).unwrap();
    let mut out = args.clone();
    k.run(&mut out).unwrap();
    run_once(&f, &args);
}

#[test]
fn processes_exit_cleanly_after_threaded_runs() {
    let exe = std::env::current_exe().unwrap();
    for i in 0..10 {
        let out = std::process::Command::new(&exe)
            .args(["mlir::runtime::threaded_run_then_exit", "--exact", "--test-threads=1", "-q"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "child {i}: {:?}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
