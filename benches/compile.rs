//! Compile time: parse a workload's `.sptir` text and lower it to Stage III (verifying after
//! every pass, as `sparsec lower` does). `cargo bench --bench compile`.

use criterion::{criterion_group, criterion_main, Criterion};
use sparsec::ir::{text, Stage};
use sparsec::passes::PassManager;

fn compile(c: &mut Criterion) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/workloads");
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let pm = PassManager::lowering_to(Stage::III);
    let mut group = c.benchmark_group("parse_to_stage3");
    for path in files {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let src = std::fs::read_to_string(&path).unwrap();
        group.bench_function(&name, |b| {
            b.iter(|| {
                let f = text::parse_func(&name, std::hint::black_box(&src)).unwrap();
                pm.run(&f).unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, compile);
criterion_main!(benches);
