//! Helpers shared by the decomposition tests: csrmm and its arguments, matrices, comparison.
#![allow(dead_code)]

use sparsec_ir::data::{Args, Array};
use sparsec_ir::text::parse_func;
use sparsec_ir::Func;

pub const CSRMM: &str = include_str!("../../../tests/workloads/csrmm.sptir");
pub const FEAT: usize = 4;

pub type FCsr = sparsec_formats::Csr<i64, f64>;

pub fn csrmm() -> Func {
    parse_func("csrmm", CSRMM).unwrap()
}

/// Test values from the project's one generator (`formats::gen::SplitMix64`).
pub struct Rng(sparsec_formats::gen::SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(sparsec_formats::gen::SplitMix64::new(seed))
    }

    /// A multiple of 1/500 in `[-2, 2)`.
    pub fn val(&mut self) -> f32 {
        (self.0.below(2000) as f32 - 1000.0) / 500.0
    }
}

pub fn i32s<T: Copy + TryInto<i32>>(v: &[T]) -> Array
where
    <T as TryInto<i32>>::Error: std::fmt::Debug,
{
    Array::I32(v.iter().map(|&x| x.try_into().unwrap()).collect())
}

pub fn assert_close(got: &Array, want: &Array, what: &str) {
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    assert_eq!(g.len(), w.len(), "{what}");
    for (p, (x, y)) in g.iter().zip(&w).enumerate() {
        assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "{what}: [{p}] = {x}, expected {y}");
    }
}

pub fn shared(name: &str) -> Option<FCsr> {
    let (_, path) = sparsec_formats::shared_matrices().into_iter().find(|(n, _)| n == name)?;
    Some(sparsec_formats::mtx::read_mtx_path(&path).unwrap())
}

pub fn csrmm_args(m: &FCsr) -> Args {
    let mut r = Rng::new(99);
    let b: Vec<f32> = (0..m.cols() * FEAT).map(|_| r.val()).collect();
    let mut a = Args::new();
    a.array("a", Array::F32(m.values().iter().map(|&v| v as f32).collect()))
        .array("b", Array::F32(b))
        .array("c", Array::F32(vec![7.0; m.rows() * FEAT]))
        .array("indptr", i32s(m.indptr()))
        .array("indices", i32s(m.indices()));
    a.int("m", m.rows() as i64).int("n", m.cols() as i64).int("feat_size", FEAT as i64).int("nnz", m.nnz() as i64);
    a
}
