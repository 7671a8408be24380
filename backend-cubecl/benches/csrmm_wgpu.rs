//! csrmm on cubecl-wgpu (lavapipe without a GPU): upload, the kernels and read-back of one
//! `CompiledProgram::run`, unscheduled and with the default GPU schedule, on a shared matrix
//! (or a generated one when `$SPARSEC_DATA` is empty). `cargo bench -p sparsec-backend-cubecl`.

use criterion::{criterion_group, criterion_main, Criterion};
use sparsec_backend_cubecl::{compile, compile_with_structure, wgpu_client};
use sparsec_testkit as tk;

fn csrmm(c: &mut Criterion) {
    let f = tk::workload("csrmm");
    let (mname, m) = tk::shared_matrices()
        .into_iter()
        .find(|(n, _)| n == "cora")
        .unwrap_or_else(|| tk::generated_matrices().swap_remove(1));
    let case = tk::workloads::case("csrmm", &m, &mut tk::Rng::new(1)).unwrap();
    let client = wgpu_client();
    let plain = compile(&f).unwrap();
    let scheduled = sparsec_schedule::auto::gpu_schedule(&f, 64).unwrap();
    let scheduled = compile_with_structure(&scheduled, &f).unwrap();
    // Warm the kernel cache.
    plain.run(&client, &case.args).unwrap();
    scheduled.run(&client, &case.args).unwrap();
    let mut group = c.benchmark_group(format!("csrmm_wgpu_{mname}"));
    group.sample_size(10);
    group.bench_function("unscheduled", |b| b.iter(|| plain.run(&client, &case.args).unwrap()));
    group.bench_function("gpu_schedule_64", |b| b.iter(|| scheduled.run(&client, &case.args).unwrap()));
    group.finish();
}

criterion_group!(benches, csrmm);
criterion_main!(benches);
