//! Generated CSR SpMM on the CPU (MLIR JIT, CPU schedule: rows over threads) on every shared
//! matrix, feature widths 32 and 128, threaded and serial.
//! `cargo bench -p sparsec-backend-mlir --bench spmm_cpu`; `scripts/bench-cpu` puts the
//! times beside scipy and MLIR's sparsifier.

use criterion::{criterion_group, criterion_main, Criterion};
use sparsec_backend_mlir::{CpuKernel, CpuOptions};
use sparsec_ir::data::{Args, Array};
use sparsec_ir::Func;
use std::time::Duration;

/// csrmm at Stage III with the default CPU schedule.
fn scheduled_csrmm() -> Func {
    sparsec_schedule::auto::cpu_schedule(&sparsec_testkit::workload("csrmm")).expect("csrmm schedules")
}

fn args(m: &sparsec_testkit::Mat, feat: usize) -> Args {
    let mut a = Args::new();
    let b: Vec<f32> = (0..m.cols * feat).map(|i| ((i * 7919) % 1000) as f32 / 1000.0).collect();
    a.array("a", Array::F32(m.vals.clone()))
        .array("b", Array::F32(b))
        .array("c", Array::F32(vec![0.0; m.rows * feat]))
        .array("indptr", Array::I32(m.indptr.iter().map(|&x| x as i32).collect()))
        .array("indices", Array::I32(m.indices.iter().map(|&x| x as i32).collect()))
        .int("m", m.rows as i64)
        .int("n", m.cols as i64)
        .int("feat_size", feat as i64)
        .int("nnz", m.nnz() as i64);
    a
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
            group.bench_function(format!("{name}/feat{feat}/threads"), |b| b.iter(|| threaded.run(&mut a).unwrap()));
            group.bench_function(format!("{name}/feat{feat}/serial"), |b| b.iter(|| serial.run(&mut a).unwrap()));
        }
    }
    group.finish();
}

criterion_group!(benches, spmm);
criterion_main!(benches);
