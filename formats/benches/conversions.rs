//! Composable-format conversions on the largest shared matrix (by nonzeros after
//! symmetric expansion; ca-CondMat, 186,936 nonzeros). N:M needs a dense-ish matrix, so
//! it runs on a generated 1024 x 1024 matrix pruned to 2:4 instead.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sparsec_formats::compose::{
    condense, pad_rows_to_multiple, prune_to_nm, to_ell_k, BlockGroupCoo, GroupCoo, Hyb, NmMatrix,
    PaddedBsr,
};
use sparsec_formats::{gen, mtx, shared_matrices, Csr};

fn largest() -> Option<(String, Csr<i32, f32>)> {
    shared_matrices()
        .into_iter()
        .filter_map(|(name, path)| Some((name, mtx::read_mtx_path::<i32, f32>(&path).ok()?)))
        .max_by_key(|(_, a)| a.nnz())
}

fn bench(c: &mut Criterion) {
    let Some((name, a)) = largest() else {
        eprintln!("no shared matrices found; skipping");
        return;
    };
    eprintln!("{name}: {} x {}, nnz {}", a.rows(), a.cols(), a.nnz());
    let mut g = c.benchmark_group(format!("compose/{name}"));
    g.bench_function("hyb(1 part, bucket_log 9)", |b| {
        b.iter(|| Hyb::from_csr(black_box(&a), 1, 9).unwrap())
    });
    g.bench_function("hyb(8 parts, bucket_log 5)", |b| {
        b.iter(|| Hyb::from_csr(black_box(&a), 8, 5).unwrap())
    });
    for bs in [4, 16] {
        g.bench_function(format!("bsr({bs})"), |b| {
            b.iter(|| PaddedBsr::from_csr(black_box(&a), bs).unwrap())
        });
    }
    let k = a.max_row_length();
    g.bench_function(format!("ell(k = max row = {k})"), |b| {
        b.iter(|| to_ell_k(black_box(&a), k).unwrap())
    });
    g.bench_function("pad_rows_to_multiple(32)", |b| {
        b.iter(|| pad_rows_to_multiple(black_box(&a), 32).unwrap())
    });
    g.bench_function("sr-bcrs condense(8, 32)", |b| {
        b.iter(|| condense(black_box(&a), 8, 32).unwrap())
    });
    g.bench_function("group_coo", |b| {
        b.iter(|| GroupCoo::from_csr(black_box(&a)).unwrap())
    });
    g.bench_function("block_group_coo(4)", |b| {
        b.iter(|| BlockGroupCoo::from_csr(black_box(&a), 4).unwrap())
    });
    let hyb = Hyb::from_csr(&a, 1, 9).unwrap();
    g.bench_function("hyb(1, 9) to_csr", |b| b.iter(|| black_box(&hyb).to_csr()));
    g.finish();

    let d: Csr<i32, f32> = gen::uniform_density(1024, 1024, 0.6, 7).unwrap();
    let p = prune_to_nm(&d, 2, 4).unwrap();
    let mut g = c.benchmark_group("compose/dense1024");
    g.bench_function("prune_to_nm(2, 4)", |b| {
        b.iter(|| prune_to_nm(black_box(&d), 2, 4).unwrap())
    });
    g.bench_function("to_nm(2, 4)", |b| {
        b.iter(|| NmMatrix::from_csr(black_box(&p), 2, 4).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
