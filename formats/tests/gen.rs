//! Generators: determinism, shapes, densities and edge cases.

use sparsec_formats::gen::{self, SplitMix64};
use sparsec_formats::{Csr, GenError, ValidateOptions};

fn canonical(a: &Csr<i32, f64>) {
    let r = a.validate(&ValidateOptions::STRICT);
    assert!(r.is_ok(), "{:?}", r.errors);
    assert!(
        r.warnings.is_empty(),
        "generated values are never zero or NaN"
    );
    assert!(a.values().iter().all(|v| *v > 0.0));
}

#[test]
fn same_seed_same_matrix() {
    type M = Csr<i32, f64>;
    let pairs: Vec<(M, M, M)> = vec![
        (
            gen::uniform(50, 40, 200, 7).unwrap(),
            gen::uniform(50, 40, 200, 7).unwrap(),
            gen::uniform(50, 40, 200, 8).unwrap(),
        ),
        (
            gen::rmat(8, 1000, [0.57, 0.19, 0.19, 0.05], 7).unwrap(),
            gen::rmat(8, 1000, [0.57, 0.19, 0.19, 0.05], 7).unwrap(),
            gen::rmat(8, 1000, [0.57, 0.19, 0.19, 0.05], 8).unwrap(),
        ),
        (
            gen::banded(30, 2, 7).unwrap(),
            gen::banded(30, 2, 7).unwrap(),
            gen::banded(30, 2, 8).unwrap(),
        ),
        (
            gen::block_sparse(40, 40, 4, 0.25, 7).unwrap(),
            gen::block_sparse(40, 40, 4, 0.25, 7).unwrap(),
            gen::block_sparse(40, 40, 4, 0.25, 8).unwrap(),
        ),
    ];
    for (a, b, c) in pairs {
        assert_eq!(a, b);
        assert_ne!(a, c);
        canonical(&a);
    }
}

#[test]
fn rng_is_stable_across_platforms() {
    // Reference outputs of SplitMix64 seeded with 0 (Vigna's splitmix64.c).
    let mut r = SplitMix64::new(0);
    assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
    assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    let mut r = SplitMix64::new(1);
    for _ in 0..1000 {
        assert!(r.below(10) < 10);
        let f = r.next_f64();
        assert!((0.0..1.0).contains(&f));
    }
}

#[test]
fn uniform_shape_and_density() {
    let a: Csr<i32, f64> = gen::uniform(100, 80, 1234, 1).unwrap();
    assert_eq!(a.shape(), (100, 80));
    assert_eq!(a.nnz(), 1234);
    canonical(&a);
    assert!(a.values().iter().all(|v| *v <= 1.0));
    // Dense request uses the complement path and is still exact.
    let d: Csr<i32, f64> = gen::uniform_density(20, 10, 0.9, 2).unwrap();
    assert_eq!(d.nnz(), 180);
    canonical(&d);
    let full: Csr<i32, f64> = gen::uniform_density(7, 3, 1.0, 3).unwrap();
    assert_eq!(full.nnz(), 21);
    let none: Csr<i32, f64> = gen::uniform_density(7, 3, 0.0, 3).unwrap();
    assert_eq!(none.nnz(), 0);
    // Rows are hit roughly evenly: no row holds more than 3x the mean.
    let lens = a.row_lengths();
    assert!(lens.iter().all(|&l| l < 3 * 1234 / 100));
}

#[test]
fn rmat_is_skewed() {
    let a: Csr<i64, f64> = gen::rmat(10, 20000, [0.57, 0.19, 0.19, 0.05], 5).unwrap();
    assert_eq!(a.shape(), (1024, 1024));
    assert!(a.nnz() <= 20000 && a.nnz() > 10000);
    // Power law: the heaviest row holds far more than the mean.
    let mean = a.nnz() / 1024;
    assert!(
        a.max_row_length() > 8 * mean,
        "max {} mean {}",
        a.max_row_length(),
        mean
    );
    // Uniform parameters give a flat distribution.
    let u: Csr<i64, f64> = gen::rmat(10, 20000, [0.25; 4], 5).unwrap();
    assert!(u.max_row_length() < 4 * (u.nnz() / 1024 + 1));
}

#[test]
fn banded_structure() {
    let a: Csr<i32, f64> = gen::banded(10, 2, 1).unwrap();
    assert_eq!(a.nnz(), 10 * 5 - 2 * (2 + 1));
    for i in 0..10 {
        let (cols, _) = a.row(i).unwrap();
        let expect: Vec<i32> = (i.saturating_sub(2)..=(i + 2).min(9))
            .map(|c| c as i32)
            .collect();
        assert_eq!(cols, &expect[..]);
    }
    assert_eq!(gen::banded::<i32, f64>(4, 100, 1).unwrap().nnz(), 16);
    assert_eq!(gen::banded::<i32, f64>(0, 1, 1).unwrap().nnz(), 0);
}

#[test]
fn block_sparse_structure() {
    let a: Csr<i32, f64> = gen::block_sparse(30, 30, 5, 0.2, 9).unwrap();
    // 36 blocks, 20% = 7 blocks, each full 5x5.
    assert_eq!(a.nnz(), 7 * 25);
    let bsr = a.to_bsr(5).unwrap();
    assert_eq!(bsr.nnz_blocks(), 7);
    assert!(bsr.values().iter().all(|v| *v > 0.0));
    // Edge blocks are clipped.
    let e: Csr<i32, f64> = gen::block_sparse(7, 7, 4, 1.0, 1).unwrap();
    assert_eq!(e.nnz(), 49);
}

#[test]
fn edge_case_helpers() {
    let e: Csr<i32, f64> = gen::with_empty_rows(30, 20, 4).unwrap();
    canonical(&e);
    let lens = e.row_lengths();
    assert!(lens
        .iter()
        .enumerate()
        .all(|(i, &l)| (i % 3 != 0 && i != 29) || l == 0));
    assert!(lens.iter().filter(|&&l| l > 0).count() > 10);
    let h: Csr<i32, f64> = gen::single_full_row(6, 9, 2, 1).unwrap();
    canonical(&h);
    assert_eq!(h.row_lengths(), vec![0, 0, 9, 0, 0, 0]);
    let o: Csr<i32, f64> = gen::one_by_one(3.0);
    assert_eq!((o.shape(), o.values()), ((1, 1), &[3.0][..]));
}

#[test]
fn bad_parameters() {
    assert_eq!(
        gen::uniform::<i32, f64>(2, 2, 5, 0).unwrap_err(),
        GenError::TooManyNonzeros {
            nnz: 5,
            capacity: 4
        }
    );
    assert_eq!(
        gen::uniform_density::<i32, f64>(2, 2, 1.5, 0).unwrap_err(),
        GenError::InvalidDensity(1.5)
    );
    assert!(matches!(
        gen::uniform_density::<i32, f64>(2, 2, f64::NAN, 0),
        Err(GenError::InvalidDensity(_))
    ));
    assert!(matches!(
        gen::rmat::<i32, f64>(4, 10, [0.5, 0.5, 0.5, 0.0], 0),
        Err(GenError::InvalidRmat { .. })
    ));
    assert!(matches!(
        gen::rmat::<i32, f64>(4, 10, [-0.1, 0.5, 0.5, 0.1], 0),
        Err(GenError::InvalidRmat { .. })
    ));
    assert!(matches!(
        gen::rmat::<i32, f64>(40, 10, [0.25; 4], 0),
        Err(GenError::TooLarge { what: "rows", .. })
    ));
    assert_eq!(
        gen::block_sparse::<i32, f64>(4, 4, 0, 0.5, 0).unwrap_err(),
        GenError::ZeroBlockSize
    );
    assert_eq!(
        gen::single_full_row::<i32, f64>(3, 3, 3, 0).unwrap_err(),
        GenError::RowOutOfRange { row: 3, rows: 3 }
    );
    assert!(matches!(
        gen::uniform::<i32, f64>(1 << 31, 1, 0, 0),
        Err(GenError::TooLarge { what: "rows", .. })
    ));
}
