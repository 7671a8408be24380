//! Helpers shared by the interpreter tests: a seeded generator, CSR matrices, comparisons.

#![allow(dead_code)]

use sparsec_ir::data::{Args, Array};
use sparsec_ir::Func;

/// Parses one function, panicking with the rendered diagnostic.
pub fn parse(src: &str) -> Func {
    sparsec_ir::text::parse_func("test.sptir", src).unwrap_or_else(|e| panic!("{e}"))
}

/// A small deterministic generator: the project's one (`formats::gen::SplitMix64`).
pub struct Rng(sparsec_formats::gen::SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(sparsec_formats::gen::SplitMix64::new(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `[-1, 1)`, exactly representable in f32.
    pub fn val(&mut self) -> f32 {
        (self.below(1 << 16) as f32 / (1 << 15) as f32) - 1.0
    }

    pub fn vals(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.val()).collect()
    }
}

/// A CSR sparsity structure (sorted, unique columns per row).
#[derive(Clone, Debug)]
pub struct Csr {
    pub rows: usize,
    pub cols: usize,
    pub indptr: Vec<i32>,
    pub indices: Vec<i32>,
}

impl Csr {
    /// Each entry is present with probability `density`; row 1 (if any) is left empty.
    pub fn random(rng: &mut Rng, rows: usize, cols: usize, density: f64) -> Csr {
        let mut indptr = vec![0i32];
        let mut indices = Vec::new();
        for r in 0..rows {
            for c in 0..cols {
                if r != 1 && (rng.next_u64() as f64 / u64::MAX as f64) < density {
                    indices.push(c as i32);
                }
            }
            indptr.push(indices.len() as i32);
        }
        Csr { rows, cols, indptr, indices }
    }

    pub fn nnz(&self) -> usize {
        self.indices.len()
    }

    pub fn row(&self, r: usize) -> std::ops::Range<usize> {
        self.indptr[r] as usize..self.indptr[r + 1] as usize
    }

    /// Dense row-major copy of values stored in CSR order.
    pub fn to_dense(&self, vals: &[f32]) -> Vec<f64> {
        let mut d = vec![0.0; self.rows * self.cols];
        for r in 0..self.rows {
            for p in self.row(r) {
                d[r * self.cols + self.indices[p] as usize] = vals[p] as f64;
            }
        }
        d
    }

    /// The transpose's structure (also sorted).
    pub fn transpose(&self) -> Csr {
        let mut rows: Vec<Vec<i32>> = vec![Vec::new(); self.cols];
        for r in 0..self.rows {
            for p in self.row(r) {
                rows[self.indices[p] as usize].push(r as i32);
            }
        }
        let mut indptr = vec![0i32];
        let mut indices = Vec::new();
        for row in rows {
            indices.extend(row);
            indptr.push(indices.len() as i32);
        }
        Csr { rows: self.cols, cols: self.rows, indptr, indices }
    }
}

pub fn f32s(args: &Args, name: &str) -> Vec<f32> {
    match args.arrays.get(name) {
        Some(Array::F32(v)) => v.clone(),
        other => panic!("array `{name}` is not f32: {other:?}"),
    }
}

pub fn i32s(args: &Args, name: &str) -> Vec<i32> {
    match args.arrays.get(name) {
        Some(Array::I32(v)) => v.clone(),
        other => panic!("array `{name}` is not i32: {other:?}"),
    }
}

/// Asserts `got ≈ want` elementwise with a relative tolerance of 1e-5.
pub fn assert_close(got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "lengths differ");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let tol = 1e-5 * w.abs().max(1.0);
        assert!((g as f64 - w).abs() <= tol, "element {i}: got {g}, want {w}");
    }
}

/// Line of the start of an error's span in `src`.
pub fn line_of(src: &str, span: sparsec_ir::Span) -> usize {
    sparsec_ir::SourceFile::new("t", src).location(span.start as usize).line
}

/// 1-based number of the first line of `src` containing `needle`.
pub fn line_containing(src: &str, needle: &str) -> usize {
    src.lines().position(|l| l.contains(needle)).expect("needle in source") + 1
}
