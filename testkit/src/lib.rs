//! Test support shared by every crate's end-to-end tests: a plain CSR matrix, a seeded RNG,
//! the workloads with their oracles, hand-written GPU schedules, and float comparison.

/// The corpus workloads with inputs and oracles.
pub mod workloads;
/// Hand-written GPU schedules of the corpus.
pub mod schedules;
/// The differential program fuzzer (issue #13).
pub mod fuzz;
/// The level-format programs of `examples/formats` on matrix and tensor files.
pub mod formats;
pub mod nvidia;

use sparsec::ir::data::{Args, Array};
use sparsec::ir::Func;

/// The text of `tests/workloads/<name>.sptir` (for variants of a workload).
pub fn workload_text(name: &str) -> String {
    let path = format!("{}/../tests/workloads/{name}.sptir", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Parses and verifies `tests/workloads/<name>.sptir`.
pub fn workload(name: &str) -> Func {
    let text = workload_text(name);
    let f = sparsec::ir::text::parse_func(&format!("{name}.sptir"), &text).unwrap_or_else(|e| panic!("{e}"));
    if let Err(errs) = sparsec::ir::verify::verify_func(&f) {
        panic!("{name} does not verify: {errs:?}");
    }
    f
}

/// An output array of a run, as f32.
pub fn output_f32(out: &Args, param: &str) -> Vec<f32> {
    match out.arrays.get(param) {
        Some(Array::F32(v)) => v.clone(),
        Some(Array::I32(v)) => v.iter().map(|&x| x as f32).collect(),
        other => panic!("output {param} is {other:?}"),
    }
}

/// Calls `f` with the run of workload `name` on every matrix it applies to (at least three).
pub fn for_each_case(name: &str, f: impl FnMut(&str, &workloads::Case)) {
    for_each_case_upto(name, usize::MAX, f)
}

/// [`for_each_case`] on the matrices with at most `max_nnz` nonzeros.
pub fn for_each_case_upto(name: &str, max_nnz: usize, mut f: impl FnMut(&str, &workloads::Case)) {
    let mut ran = 0;
    for (mname, m) in all_matrices().into_iter().filter(|(_, m)| m.nnz() <= max_nnz) {
        let mut rng = Rng::new(0x5eed ^ m.nnz() as u64);
        if let Some(c) = workloads::case(name, &m, &mut rng) {
            f(&mname, &c);
            ran += 1;
        }
    }
    assert!(ran >= 3, "{name} ran on only {ran} matrices");
}

/// Every matrix of the shared folder, then the generated ones.
pub fn all_matrices() -> Vec<(String, Mat)> {
    let mut v = shared_matrices();
    v.extend(generated_matrices());
    v
}

/// A CSR matrix with `usize` indices and `f32` values, sorted and without duplicates.
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

    pub fn row_vals(&self, i: usize) -> &[f32] {
        &self.vals[self.indptr[i]..self.indptr[i + 1]]
    }

    pub fn to_dense(&self) -> Vec<f32> {
        let mut d = vec![0f32; self.rows * self.cols];
        for i in 0..self.rows {
            for (&j, &v) in self.row(i).iter().zip(self.row_vals(i)) {
                d[i * self.cols + j] = v;
            }
        }
        d
    }

    pub fn from_triplets(rows: usize, cols: usize, mut t: Vec<(usize, usize, f32)>) -> Mat {
        t.sort_by_key(|&(i, j, _)| (i, j));
        t.dedup_by_key(|&mut (i, j, _)| (i, j));
        let mut indptr = vec![0; rows + 1];
        for &(i, _, _) in &t {
            indptr[i + 1] += 1;
        }
        for i in 0..rows {
            indptr[i + 1] += indptr[i];
        }
        Mat { rows, cols, indptr, indices: t.iter().map(|x| x.1).collect(), vals: t.iter().map(|x| x.2).collect() }
    }

    /// The leading `r × c` submatrix.
    pub fn window(&self, r: usize, c: usize) -> Mat {
        let (r, c) = (r.min(self.rows), c.min(self.cols));
        let t = (0..r)
            .flat_map(|i| self.row(i).iter().zip(self.row_vals(i)).filter(|(&j, _)| j < c).map(move |(&j, &v)| (i, j, v)))
            .collect();
        Mat::from_triplets(r, c, t)
    }

    pub fn transpose(&self) -> Mat {
        let t = (0..self.rows)
            .flat_map(|i| self.row(i).iter().zip(self.row_vals(i)).map(move |(&j, &v)| (j, i, v)))
            .collect();
        Mat::from_triplets(self.cols, self.rows, t)
    }
}

/// A small seeded generator over the project's one (`formats::gen::SplitMix64`, checked
/// against the reference outputs in `formats/tests/gen.rs`).
pub struct Rng(sparsec::formats::gen::SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(sparsec::formats::gen::SplitMix64::new(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in [-1, 1).
    pub fn f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// `|got - want| <= rtol * max(|got|, |want|) + atol` element-wise, with atol = rtol / 10 ×
/// the largest magnitude of `want` (at least 1), so that a value that cancels to near zero
/// may carry the rounding of its larger terms: fused and unfused sums of a few dozen f32
/// terms near 1 differ by several ulp of 1.
pub fn assert_close(what: &str, got: &[f32], want: &[f32], rtol: f32) {
    if let Err(e) = check_close(got, want, rtol) {
        panic!("{what}{e}");
    }
}

/// [`assert_close`]'s rule without the panic: the first element that misses it (`[i]: got
/// g, want w`, NaN never passing), or the lengths (`: length a against b`).
pub fn check_close(got: &[f32], want: &[f32], rtol: f32) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(": length {} against {}", got.len(), want.len()));
    }
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1.0);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let tol = rtol * g.abs().max(w.abs()) + rtol * scale * 1e-1;
        if !((g - w).abs() <= tol) {
            return Err(format!("[{i}]: got {g}, want {w}"));
        }
    }
    Ok(())
}

type FCsr = sparsec::formats::Csr<i64, f64>;

impl Mat {
    /// The matrix as the formats crate's CSR (i64 indices, f64 values), for its conversions.
    pub fn to_csr(&self) -> FCsr {
        FCsr::try_new(
            self.rows,
            self.cols,
            self.indptr.iter().map(|&x| x as i64).collect(),
            self.indices.iter().map(|&x| x as i64).collect(),
            self.vals.iter().map(|&v| v as f64).collect(),
        )
        .expect("a testkit matrix is a valid CSR")
    }
}

fn from_formats(csr: &FCsr) -> Mat {
    Mat {
        rows: csr.rows(),
        cols: csr.cols(),
        indptr: csr.indptr().iter().map(|&x| x as usize).collect(),
        indices: csr.indices().iter().map(|&x| x as usize).collect(),
        vals: csr.values().iter().map(|&v| v as f32).collect(),
    }
}

/// Every `.mtx` file of `$SPARSEC_DATA`, read by the formats crate.
pub fn shared_matrices() -> Vec<(String, Mat)> {
    let found = sparsec::formats::shared_matrices();
    // Tests on real matrices must not pass vacuously when the data folder is missing.
    assert!(
        !found.is_empty(),
        "no .mtx file in {} (set SPARSEC_DATA to the shared data folder)",
        sparsec::formats::data_dir().display()
    );
    found
        .into_iter()
        .map(|(name, path)| {
            let csr: FCsr = sparsec::formats::mtx::read_mtx_path(&path).unwrap_or_else(|e| panic!("{e}"));
            (name, from_formats(&csr))
        })
        .collect()
}

/// Generated matrices: random, power-law, banded, block-sparse, and the edge cases (empty
/// rows, one row holding every nonzero, 1 × 1).
pub fn generated_matrices() -> Vec<(String, Mat)> {
    use sparsec::formats::gen;
    let all: Vec<(&str, FCsr)> = vec![
        ("gen-uniform-50x40", gen::uniform(50, 40, 300, 1).unwrap()),
        ("gen-rmat-256", gen::rmat(8, 1500, [0.57, 0.19, 0.19, 0.05], 2).unwrap()),
        ("gen-banded-97", gen::banded(97, 3, 3).unwrap()),
        ("gen-blocks-61x45", gen::block_sparse(61, 45, 4, 0.2, 4).unwrap()),
        ("gen-empty-rows-40x30", gen::with_empty_rows(40, 30, 5).unwrap()),
        ("gen-one-full-row-30x64", gen::single_full_row(30, 64, 7, 6).unwrap()),
        ("gen-1x1", gen::one_by_one(2.5)),
    ];
    all.into_iter().map(|(n, m)| (n.to_string(), from_formats(&m))).collect()
}
