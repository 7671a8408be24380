//! Generated CSR SpMM on the CPU (MLIR JIT, CPU schedule: rows over threads) on every shared
//! matrix, feature widths 32 and 128, threaded and serial.
//! `cargo bench -p sparsec-backend-mlir --bench spmm_cpu`; `scripts/bench-cpu` puts the
//! times beside scipy and MLIR's sparsifier. Each sample is the best single call of its
//! iterations (see `best_call`), the statistic the peers report.

use criterion::{criterion_group, criterion_main, Criterion};
use sparsec_backend_mlir::{CpuKernel, CpuOptions};
use sparsec_ir::data::Args;
use sparsec_ir::Func;
use std::time::{Duration, Instant};

/// csrmm at Stage III with the default CPU schedule.
fn scheduled_csrmm() -> Func {
    sparsec_schedule::auto::cpu_schedule(&sparsec_testkit::workload("csrmm")).expect("csrmm schedules")
}

fn args(m: &sparsec_testkit::Mat, feat: usize) -> Args {
    let b: Vec<f32> = (0..m.cols * feat).map(|i| ((i * 7919) % 1000) as f32 / 1000.0).collect();
    sparsec_testkit::workloads::csrmm_args(m, b, feat, 0.0)
}

/// `n` calls, each timed; reports the fastest as the time of every call. The peers
/// (`scipy_spmm_baseline.py`, `mlir_sparsifier_spmm.sh`) report their best single call too, so
/// preemption on a loaded machine, which inflates a mean over many calls, affects all alike.
fn best_call(n: u64, mut f: impl FnMut()) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..n {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed());
    }
    best * u32::try_from(n).unwrap_or(u32::MAX)
}

fn spmm(c: &mut Criterion) {
    let f = scheduled_csrmm();
    let threaded = CpuKernel::compile(&f, &CpuOptions::default()).expect("compiles");
    let serial = CpuKernel::compile(&f, &CpuOptions { parallel: false, ..CpuOptions::default() }).expect("compiles");
    assert!(threaded.is_threaded());
    let mut group = c.benchmark_group("spmm_cpu");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    for (name, m) in sparsec_testkit::shared_matrices() {
        for feat in [32, 128] {
            let mut a = args(&m, feat);
            group.bench_function(format!("{name}/feat{feat}/threads"), |b| b.iter_custom(|n| best_call(n, || threaded.run(&mut a).unwrap())));
            group.bench_function(format!("{name}/feat{feat}/serial"), |b| b.iter_custom(|n| best_call(n, || serial.run(&mut a).unwrap())));
        }
    }
    group.finish();
}

criterion_group!(benches, spmm);
criterion_main!(benches);
