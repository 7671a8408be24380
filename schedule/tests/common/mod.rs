//! Helpers shared by the schedule tests: workloads, matrices, argument builders, and
//! assertions about failed primitives and differential runs.
#![allow(dead_code)]

use sparsec_formats::Csr;
use sparsec_ir::data::{Args, Array};
use sparsec_ir::Func;
use sparsec_schedule::{Schedule, ScheduleError};

/// Parses `tests/workloads/<name>.sptir` of the workspace (Stage I).
pub fn workload(name: &str) -> Func {
    let path = format!("{}/../tests/workloads/{name}.sptir", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    sparsec_ir::text::parse_func(&path, &text).unwrap_or_else(|e| panic!("{e}"))
}

/// The workload lowered to Stage II.
pub fn stage2(name: &str) -> Func {
    sparsec_passes::lower_sparse_iter(&workload(name)).unwrap()
}

/// A schedule of the workload at Stage I.
pub fn sched1(name: &str) -> Schedule {
    Schedule::new(workload(name)).unwrap()
}

/// A schedule of the workload at Stage II.
pub fn sched2(name: &str) -> Schedule {
    Schedule::new(stage2(name)).unwrap()
}

/// Runs a primitive that must fail; checks that neither the IR nor the trace changed.
pub fn fails<T: std::fmt::Debug>(
    sch: &mut Schedule,
    f: impl FnOnce(&mut Schedule) -> Result<T, ScheduleError>,
) -> ScheduleError {
    let before = sch.text();
    let trace = sch.trace().clone();
    let err = f(sch).expect_err("the primitive should fail");
    assert_eq!(sch.text(), before, "a failed primitive changed the IR ({err})");
    assert_eq!(*sch.trace(), trace, "a failed primitive changed the trace ({err})");
    // Every error displays a message.
    assert!(!err.to_string().is_empty());
    err
}

/// Lowers any stage to Stage III.
pub fn to_stage3(f: &Func) -> Func {
    let mut f = f.clone();
    if f.stage == sparsec_ir::Stage::I {
        f = sparsec_passes::lower_sparse_iter(&f).unwrap();
    }
    if f.stage == sparsec_ir::Stage::II {
        f = sparsec_passes::lower_sparse_buffer(&f).unwrap();
    }
    sparsec_ir::verify::verify_func(&f).unwrap();
    f
}

// ---- matrices --------------------------------------------------------------------------------

/// A CSR matrix with `usize` indices and `f32` values.
#[derive(Clone, Debug)]
pub struct Mat {
    pub rows: usize,
    pub cols: usize,
    pub indptr: Vec<usize>,
    pub indices: Vec<usize>,
    pub vals: Vec<f32>,
}

impl Mat {
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }

    pub fn row(&self, i: usize) -> &[usize] {
        &self.indices[self.indptr[i]..self.indptr[i + 1]]
    }

    pub fn to_dense(&self) -> Vec<f32> {
        let mut d = vec![0f32; self.rows * self.cols];
        for i in 0..self.rows {
            for p in self.indptr[i]..self.indptr[i + 1] {
                d[i * self.cols + self.indices[p]] = self.vals[p];
            }
        }
        d
    }
}

fn from_formats(csr: &Csr<i64, f64>) -> Mat {
    Mat {
        rows: csr.rows(),
        cols: csr.cols(),
        indptr: csr.indptr().iter().map(|&x| x as usize).collect(),
        indices: csr.indices().iter().map(|&x| x as usize).collect(),
        vals: csr.values().iter().map(|&v| v as f32).collect(),
    }
}

/// Generated matrices, including empty rows and 1 × 1.
pub fn generated() -> Vec<(String, Mat)> {
    use sparsec_formats::gen;
    let all: Vec<(&str, Csr<i64, f64>)> = vec![
        ("uniform-50x40", gen::uniform(50, 40, 300, 1).unwrap()),
        ("banded-37", gen::banded(37, 3, 3).unwrap()),
        ("empty-rows-40x30", gen::with_empty_rows(40, 30, 5).unwrap()),
        ("one-full-row-30x64", gen::single_full_row(30, 64, 7, 6).unwrap()),
        ("1x1", gen::one_by_one(2.5)),
    ];
    all.into_iter().map(|(n, m)| (n.to_string(), from_formats(&m))).collect()
}

/// The shared matrices `cora` and `dwt_992`; the test fails when the data folder has them
/// not (they are part of the project's shared data).
pub fn shared() -> Vec<(String, Mat)> {
    let wanted = ["cora", "dwt_992"];
    let found: Vec<(String, Mat)> = sparsec_formats::shared_matrices()
        .into_iter()
        .filter(|(n, _)| wanted.contains(&n.as_str()))
        .map(|(n, p)| {
            let csr: Csr<i64, f64> = sparsec_formats::mtx::read_mtx_path(&p).unwrap_or_else(|e| panic!("{e}"));
            (n, from_formats(&csr))
        })
        .collect();
    assert_eq!(found.len(), wanted.len(), "shared matrices cora and dwt_992 not found in {:?}", sparsec_formats::data_dir());
    found
}

/// Generated then shared matrices.
pub fn matrices() -> Vec<(String, Mat)> {
    let mut v = generated();
    v.extend(shared());
    v
}

// ---- arguments -------------------------------------------------------------------------------

/// splitmix64, uniform values in [-1, 1).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0).collect()
    }
}

fn f32s(v: &[f32]) -> Array {
    Array::F32(v.to_vec())
}

fn i32s(v: &[usize]) -> Array {
    Array::I32(v.iter().map(|&x| x as i32).collect())
}

/// Output arrays start with a sentinel so that a missing write shows up.
fn sentinel(n: usize) -> Array {
    Array::F32(vec![7.0; n])
}

/// Arguments of `csrmm` (feature size `feat`).
pub fn csrmm_args(m: &Mat, rng: &mut Rng, feat: usize) -> Args {
    let mut args = Args::new();
    args.array("a", f32s(&m.vals))
        .array("b", f32s(&rng.vec(m.cols * feat)))
        .array("c", sentinel(m.rows * feat))
        .array("indptr", i32s(&m.indptr))
        .array("indices", i32s(&m.indices));
    args.int("m", m.rows as i64).int("n", m.cols as i64).int("feat_size", feat as i64).int("nnz", m.nnz() as i64);
    args
}

/// Arguments of `sddmm` (feature size `feat`).
pub fn sddmm_args(m: &Mat, rng: &mut Rng, feat: usize) -> Args {
    let mut args = Args::new();
    args.array("a", f32s(&rng.vec(m.rows * feat)))
        .array("b", f32s(&rng.vec(m.cols * feat)))
        .array("c", sentinel(m.nnz()))
        .array("indptr", i32s(&m.indptr))
        .array("indices", i32s(&m.indices));
    args.int("m", m.rows as i64).int("n", m.cols as i64).int("feat_size", feat as i64).int("nnz", m.nnz() as i64);
    args
}

/// BSR of `m` with zero padding of partial blocks: (nb, mb, indptr, indices, values).
fn block_matrix(m: &Mat, blk: usize) -> (usize, usize, Vec<usize>, Vec<usize>, Vec<f32>) {
    let nb = m.rows.div_ceil(blk);
    let mb = m.cols.div_ceil(blk);
    let mut indptr = vec![0usize];
    let mut indices = Vec::new();
    let mut values = Vec::new();
    let dense = m.to_dense();
    for bi in 0..nb {
        let mut cols: Vec<usize> =
            (bi * blk..((bi + 1) * blk).min(m.rows)).flat_map(|i| m.row(i).iter().map(|&j| j / blk)).collect();
        cols.sort_unstable();
        cols.dedup();
        for &bj in &cols {
            indices.push(bj);
            for r in 0..blk {
                for c in 0..blk {
                    let (i, j) = (bi * blk + r, bj * blk + c);
                    values.push(if i < m.rows && j < m.cols { dense[i * m.cols + j] } else { 0.0 });
                }
            }
        }
        indptr.push(indices.len());
    }
    (nb, mb, indptr, indices, values)
}

/// Arguments of `bsrmm` (block size 4, feature size 2).
pub fn bsrmm_args(m: &Mat, rng: &mut Rng) -> Args {
    let (blk, feat) = (4, 2);
    let (nb, mb, indptr, indices, values) = block_matrix(m, blk);
    let mut args = Args::new();
    args.array("a", f32s(&values))
        .array("b", f32s(&rng.vec(mb * blk * feat)))
        .array("c", sentinel(nb * blk * feat))
        .array("indptr", i32s(&indptr))
        .array("indices", i32s(&indices));
    args.int("nb", nb as i64).int("mb", mb as i64).int("nnzb", indices.len() as i64);
    args.int("blk", blk as i64).int("feat_size", feat as i64);
    args
}

/// Arguments of `ellmm` (block size 2, feature size 3): block rows padded to `col` blocks.
pub fn ellmm_args(m: &Mat, rng: &mut Rng) -> Args {
    let (blk, feat) = (2, 3);
    let (nb, mb, indptr, indices, values) = block_matrix(m, blk);
    let col = (0..nb).map(|i| indptr[i + 1] - indptr[i]).max().unwrap_or(0).max(1);
    let mut ell_idx = Vec::new();
    let mut ell_val = Vec::new();
    for i in 0..nb {
        let row = indptr[i]..indptr[i + 1];
        for p in row.clone() {
            ell_idx.push(indices[p]);
            ell_val.extend_from_slice(&values[p * blk * blk..(p + 1) * blk * blk]);
        }
        for _ in row.len()..col {
            ell_idx.push(if row.is_empty() { 0 } else { indices[row.end - 1] });
            ell_val.extend(std::iter::repeat_n(0.0, blk * blk));
        }
    }
    let mut args = Args::new();
    args.array("a", f32s(&ell_val))
        .array("b", f32s(&rng.vec(mb * blk * feat)))
        .array("c", sentinel(nb * blk * feat))
        .array("indices", i32s(&ell_idx));
    args.int("nb", nb as i64).int("mb", mb as i64).int("feat_size", feat as i64);
    args.int("col", col as i64).int("blk", blk as i64);
    args
}

/// Arguments of a workload on a matrix.
pub fn args_for(workload: &str, m: &Mat, seed: u64) -> Args {
    let mut rng = Rng::new(seed);
    match workload {
        "csrmm" => csrmm_args(m, &mut rng, 5),
        "sddmm" | "fused_sddmm" => sddmm_args(m, &mut rng, 6),
        "bsrmm" => bsrmm_args(m, &mut rng),
        "ellmm" => ellmm_args(m, &mut rng),
        other => panic!("no argument builder for {other}"),
    }
}

/// The array `c` after running `f`.
pub fn run_c(f: &Func, args: &Args) -> Vec<f32> {
    let out = sparsec_interp::run(f, args).unwrap_or_else(|e| panic!("{}: {e}", f.name));
    match out.arrays.get("c") {
        Some(Array::F32(v)) => v.clone(),
        other => panic!("output c is {other:?}"),
    }
}

/// How two runs must agree.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Agree {
    /// Bit for bit: the schedule keeps the order of every reduction.
    Exactly,
    /// Up to reassociation of a reduction (relative tolerance).
    Within(f32),
}

/// Runs `base` and `scheduled` (any stage, both lowered to Stage III; `scheduled` also at
/// its own stage) on every matrix and compares `c`.
pub fn differential(workload: &str, base: &Func, scheduled: &Func, agree: Agree) {
    let base3 = to_stage3(base);
    let sched3 = to_stage3(scheduled);
    for (k, (name, m)) in matrices().iter().enumerate() {
        let args = args_for(workload, m, 17 + k as u64);
        let want = run_c(&base3, &args);
        assert!(want.iter().all(|v| *v != 7.0) || want.is_empty(), "{workload}/{name}: baseline left the sentinel");
        let mut runs = vec![("stage III", run_c(&sched3, &args))];
        if k < 2 {
            runs.push(("own stage", run_c(scheduled, &args)));
        }
        for (stage, got) in runs {
            assert_eq!(got.len(), want.len());
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let ok = match agree {
                    Agree::Exactly => g.to_bits() == w.to_bits(),
                    Agree::Within(rtol) => (g - w).abs() <= rtol * (1.0 + w.abs()),
                };
                assert!(ok, "{workload}/{name} ({stage}): c[{i}] = {g}, want {w}");
            }
        }
    }
}
