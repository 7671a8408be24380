//! csrmm and rgcn_hetero_forward on cubecl-wgpu (lavapipe without a GPU): upload, the kernels
//! and read-back of one `CompiledProgram::run` on cora. csrmm unscheduled and with the default
//! GPU schedule; rgcn also with one unit per output feature (its only race-free loop, the
//! launch both took before accumulating nests got one unit per sparse point), as the peer.
//! sddmm unscheduled (one unit per row) and with the default GPU schedule (one unit per
//! nonzero). `cargo bench -p sparsec-backend-cubecl`.

use criterion::{criterion_group, criterion_main, Criterion};
use sparsec_backend_cubecl::{compile, wgpu_client};
use sparsec_testkit as tk;

fn cora() -> (String, tk::Mat) {
    tk::shared_matrices().into_iter().find(|(n, _)| n == "cora").expect("cora in $SPARSEC_DATA")
}

fn csrmm(c: &mut Criterion) {
    plain_and_default("csrmm", c);
}

fn sddmm(c: &mut Criterion) {
    plain_and_default("sddmm", c);
}

/// Workload `name` on cora, unscheduled and with the default GPU schedule (64 units per cube).
fn plain_and_default(name: &str, c: &mut Criterion) {
    let f = tk::workload(name);
    let (mname, m) = cora();
    let case = tk::workloads::case(name, &m, &mut tk::Rng::new(1)).unwrap();
    let client = wgpu_client();
    let plain = compile(&f).unwrap();
    let scheduled = sparsec_schedule::auto::gpu_schedule(&f, 64).unwrap();
    let scheduled = compile(&scheduled).unwrap();
    // Warm the kernel cache.
    plain.run(&client, &case.args).unwrap();
    scheduled.run(&client, &case.args).unwrap();
    let mut group = c.benchmark_group(format!("{name}_wgpu_{mname}"));
    group.sample_size(10);
    group.bench_function("unscheduled", |b| b.iter(|| plain.run(&client, &case.args).unwrap()));
    group.bench_function("gpu_schedule_64", |b| b.iter(|| scheduled.run(&client, &case.args).unwrap()));
    group.finish();
}

fn rgcn_hetero(c: &mut Criterion) {
    let f = tk::workload("rgcn_hetero_forward");
    let (mname, m) = cora();
    let case = tk::workloads::case("rgcn_hetero_forward", &m, &mut tk::Rng::new(1)).unwrap();
    let client = wgpu_client();
    let plain = compile(&f).unwrap();
    let scheduled = sparsec_schedule::auto::gpu_schedule(&f, 64).unwrap();
    let scheduled = compile(&scheduled).unwrap();
    let mut sch = sparsec_schedule::Schedule::new(f.clone()).unwrap();
    sch.lower_sparse_iter().unwrap();
    let fo = tk::schedules::loops(&mut sch, "rgcn-hetero-forward0")[0];
    sch.bind(fo, sparsec_ir::ThreadTag::BlockIdxX).unwrap();
    let per_feature = compile(sch.func()).unwrap();
    for p in [&plain, &scheduled, &per_feature] {
        p.run(&client, &case.args).unwrap();
    }
    let mut group = c.benchmark_group(format!("rgcn_hetero_wgpu_{mname}"));
    group.sample_size(10);
    group.bench_function("unit_per_feature", |b| b.iter(|| per_feature.run(&client, &case.args).unwrap()));
    group.bench_function("unscheduled", |b| b.iter(|| plain.run(&client, &case.args).unwrap()));
    group.bench_function("gpu_schedule_64", |b| b.iter(|| scheduled.run(&client, &case.args).unwrap()));
    group.finish();
}

criterion_group!(benches, csrmm, sddmm, rgcn_hetero);
criterion_main!(benches);
