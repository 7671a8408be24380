//! Roundtrip conversions on generated and shared real matrices.

use sparsec_formats::{
    data_dir, gen, mtx, shared_matrices, ConvertError, Coo, Csr, ValidateOptions,
};

/// Checks every conversion pair on `a` (canonical, no explicit zeros).
fn roundtrips(a: &Csr<i32, f64>, name: &str) {
    assert!(a.has_canonical_format(), "{name}: not canonical");
    let strict = ValidateOptions::STRICT;
    assert!(a.validate(&strict).is_ok(), "{name}");
    // COO
    assert_eq!(&a.to_coo().to_csr(), a, "{name}: coo");
    // CSC
    let csc = a.to_csc();
    assert_eq!(csc.shape(), a.shape());
    assert!(csc.validate(&strict).is_ok(), "{name}: csc valid");
    assert_eq!(&csc.to_csr(), a, "{name}: csc");
    assert_eq!(&csc.to_coo().to_csr(), a, "{name}: csc->coo");
    // Transpose twice.
    assert_eq!(&a.transpose().transpose(), a, "{name}: transpose");
    // BSR with several block sizes, incl. ones not dividing the shape.
    for b in [1, 2, 3, 4, 7] {
        let bsr = a.to_bsr(b).unwrap();
        assert!(bsr.validate(&strict).is_ok(), "{name}: bsr {b} valid");
        let mut back = bsr.to_csr().unwrap();
        back.eliminate_zeros();
        assert_eq!(&back, a, "{name}: bsr {b}");
        // Blocked ELL from BSR and back.
        let kb = (0..bsr.block_rows())
            .map(|r| bsr.indptr()[r + 1] - bsr.indptr()[r])
            .max()
            .unwrap_or(0) as usize;
        let bell = bsr.to_ell(kb).unwrap();
        assert!(bell.validate(&strict).is_ok(), "{name}: bell {b} valid");
        assert_eq!(bell.to_bsr().unwrap(), bsr, "{name}: bell {b}");
    }
    // ELL with exactly the max row length and with slack.
    let k = a.max_row_length();
    for kk in [k, k + 2] {
        let ell = a.to_ell(kk).unwrap();
        assert!(ell.validate(&strict).is_ok(), "{name}: ell valid");
        assert_eq!(ell.nnz_slots(), a.nnz());
        assert_eq!(&ell.to_csr().unwrap(), a, "{name}: ell {kk}");
    }
    if k > 0 {
        let err = a.to_ell(k - 1).unwrap_err();
        assert!(
            matches!(err, ConvertError::EllRowTooLong { len, .. } if len == k),
            "{name}: {err}"
        );
    }
    // DCSR
    let d = a.to_dcsr();
    assert!(d.validate(&strict).is_ok(), "{name}: dcsr valid");
    assert_eq!(
        d.row_ids().len(),
        a.row_lengths().iter().filter(|&&l| l > 0).count()
    );
    assert_eq!(&d.to_csr(), a, "{name}: dcsr");
    // Index types.
    let wide = a.cast_index::<i64>().unwrap();
    assert_eq!(wide.indices().len(), a.nnz());
    assert_eq!(&wide.cast_index::<i32>().unwrap(), a, "{name}: i64");
    // Value types.
    assert_eq!(a.cast_values::<f32>().cast_values::<f64>().nnz(), a.nnz());
}

#[test]
fn roundtrip_generated() {
    let mats: Vec<(String, Csr<i32, f64>)> = vec![
        ("uniform".into(), gen::uniform(37, 53, 300, 1).unwrap()),
        (
            "uniform-dense".into(),
            gen::uniform_density(9, 11, 0.8, 2).unwrap(),
        ),
        (
            "rmat".into(),
            gen::rmat(7, 900, [0.57, 0.19, 0.19, 0.05], 3).unwrap(),
        ),
        ("banded".into(), gen::banded(41, 3, 4).unwrap()),
        (
            "block".into(),
            gen::block_sparse(50, 45, 4, 0.2, 5).unwrap(),
        ),
        (
            "empty-rows".into(),
            gen::with_empty_rows(30, 20, 6).unwrap(),
        ),
        (
            "full-row".into(),
            gen::single_full_row(10, 17, 4, 7).unwrap(),
        ),
        ("1x1".into(), gen::one_by_one(2.5)),
        ("zeros".into(), Csr::zeros(5, 0).unwrap()),
        ("empty".into(), Csr::zeros(0, 0).unwrap()),
    ];
    for (name, a) in &mats {
        roundtrips(a, name);
    }
}

#[test]
fn roundtrip_real_matrices() {
    let files = shared_matrices();
    if files.is_empty() {
        println!("note: no .mtx files in {}; skipping", data_dir().display());
        return;
    }
    for (name, path) in files {
        let a: Csr<i32, f64> = mtx::read_mtx_path(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let banner = text.lines().next().unwrap().to_ascii_lowercase();
        let size: Vec<usize> = text
            .lines()
            .find(|l| !l.starts_with('%'))
            .unwrap()
            .split_whitespace()
            .map(|t| t.parse().unwrap())
            .collect();
        assert_eq!(a.shape(), (size[0], size[1]), "{name}: shape");
        if banner.ends_with(" symmetric") {
            // Mirrored: the matrix equals its transpose; at most two entries per line.
            assert_eq!(a.transpose(), a, "{name}: symmetric");
            assert!(a.nnz() <= 2 * size[2], "{name}: nnz");
        } else {
            assert!(a.nnz() <= size[2], "{name}: nnz");
        }
        println!("{name}: {}x{} nnz {}", a.rows(), a.cols(), a.nnz());
        let mut clean = a.clone();
        clean.eliminate_zeros();
        roundtrips(&clean, &name);
        // Write and read back: identical.
        let mut buf = Vec::new();
        mtx::write_mtx(&mut buf, &a).unwrap();
        let b: Csr<i32, f64> = mtx::read_mtx(&buf[..]).unwrap();
        assert_eq!(a, b, "{name}: mtx write/read");
    }
}

#[test]
fn dense_roundtrip_and_errors() {
    let a: Csr<i64, f32> = gen::uniform(6, 7, 15, 9).unwrap();
    let d = a.to_dense().unwrap();
    assert_eq!(d.len(), 42);
    assert_eq!(d.iter().filter(|v| **v != 0.0).count(), 15);
    assert_eq!(Csr::from_dense(6, 7, &d).unwrap(), a);
    assert_eq!(
        Csr::<i32, f32>::from_dense(2, 2, &[1.0, 2.0, 3.0]).unwrap_err(),
        ConvertError::DenseLength {
            len: 3,
            expected: 4
        }
    );
    assert!(matches!(
        Csr::<i32, f32>::from_dense(usize::MAX, 2, &[]),
        Err(ConvertError::TooLarge { .. })
    ));
}

#[test]
fn coo_duplicates_are_summed_and_sorted() {
    let coo = Coo::<i32, f64>::try_new(
        3,
        4,
        vec![2, 0, 2, 0, 2],
        vec![3, 1, 0, 1, 3],
        vec![1.0, 2.0, 3.0, 4.0, 5.0],
    )
    .unwrap();
    let a = coo.to_csr();
    assert_eq!(a.indptr(), &[0, 1, 1, 3]);
    assert_eq!(a.indices(), &[1, 0, 3]);
    assert_eq!(a.values(), &[6.0, 3.0, 6.0]);
    assert_eq!(coo.to_csc().to_csr(), a);
}

#[test]
fn bsr_pads_partial_blocks() {
    // 3x3 matrix, 2x2 blocks: the block grid is 2x2 and edge blocks are padded.
    let a = Csr::<i32, f64>::try_new(3, 3, vec![0, 2, 2, 3], vec![0, 2, 2], vec![1.0, 2.0, 3.0])
        .unwrap();
    let b = a.to_bsr(2).unwrap();
    assert_eq!((b.block_rows(), b.block_cols()), (2, 2));
    assert_eq!(b.indptr(), &[0, 2, 3]);
    assert_eq!(b.indices(), &[0, 1, 1]);
    assert_eq!(
        b.values(),
        &[1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0]
    );
    assert!(matches!(a.to_bsr(0), Err(ConvertError::ZeroBlockSize)));
}

#[test]
fn ell_padding_convention() {
    let a = Csr::<i32, f64>::try_new(3, 5, vec![0, 2, 2, 3], vec![1, 4, 2], vec![1.0, 2.0, 3.0])
        .unwrap();
    let e = a.to_ell(3).unwrap();
    assert_eq!(e.indices(), &[1, 4, 4, 0, 0, 0, 2, 2, 2]);
    assert_eq!(e.values(), &[1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0]);
    assert_eq!(e.lengths(), &[2, 0, 1]);
    assert_eq!(e.is_padding(1), Some(false));
    assert_eq!(e.is_padding(2), Some(true));
    assert_eq!(e.is_padding(9), None);
    assert_eq!(
        a.to_ell(1).unwrap_err(),
        ConvertError::EllRowTooLong {
            row: 0,
            len: 2,
            k: 1
        }
    );
}

#[test]
fn unsorted_input_converts_canonically() {
    let a = Csr::<i32, f64>::try_new_with(
        2,
        4,
        vec![0, 3, 4],
        vec![3, 0, 3, 1],
        vec![1.0, 2.0, 3.0, 4.0],
        &ValidateOptions::LENIENT,
    )
    .unwrap();
    assert!(!a.has_sorted_indices());
    let e = a.to_ell(2).unwrap();
    assert_eq!(e.indices(), &[0, 3, 1, 1]);
    assert_eq!(e.values(), &[2.0, 4.0, 4.0, 0.0]);
    let d = a.to_dcsr();
    assert_eq!(d.indices(), &[0, 3, 1]);
    let b = a.to_bsr(2).unwrap();
    assert_eq!(b.values(), &[2.0, 0.0, 0.0, 4.0, 0.0, 4.0, 0.0, 0.0]);
}

#[test]
fn index_cast_overflow() {
    let coo =
        Coo::<i64, f32>::try_new(1, 1 << 40, vec![0], vec![(1 << 40) - 1], vec![1.0]).unwrap();
    let err = coo.to_csr().cast_index::<i32>().unwrap_err();
    assert_eq!(
        err,
        ConvertError::IndexOverflow {
            what: "cols",
            value: 1 << 40,
            target: "i32"
        }
    );
    let err = coo.cast_index::<i32>().unwrap_err();
    assert!(matches!(
        err,
        ConvertError::IndexOverflow { what: "cols", .. }
    ));
}

mod prop {
    use super::roundtrips;
    use proptest::prelude::*;
    use sparsec_formats::Coo;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        /// Random COO triplets (with duplicates and zeros): CSR equals the dense sum, and
        /// every conversion roundtrips.
        #[test]
        fn random_coo_roundtrips(
            rows in 0usize..9,
            cols in 0usize..9,
            raw in proptest::collection::vec((0usize..100, 0usize..100, -3i32..4), 0..40),
        ) {
            let mut coo = Coo::<i32, f64>::zeros(rows, cols).unwrap();
            let mut dense = vec![0.0f64; rows * cols];
            if rows > 0 && cols > 0 {
                for (i, j, v) in raw {
                    let (i, j) = (i % rows, j % cols);
                    coo.push(i, j, v as f64).unwrap();
                    dense[i * cols + j] += v as f64;
                }
            }
            let mut a = coo.to_csr();
            prop_assert!(a.has_canonical_format());
            prop_assert_eq!(a.to_dense().unwrap(), dense);
            a.eliminate_zeros();
            roundtrips(&a, "prop");
        }
    }
}
