//! Validation catches each bad case with the right variant and location.

use sparsec_formats::validate::{check_bsr, check_compressed, check_coo, check_dcsr, check_ell};
use sparsec_formats::{
    Bsr, Coo, Csc, Csr, Dcsr, Ell, ValidateError as E, ValidateOptions, ValidateWarning as W,
};

const STRICT: ValidateOptions = ValidateOptions::STRICT;

fn csr_err(rows: usize, cols: usize, p: &[i32], i: &[i32], v: &[f64]) -> E {
    Csr::<i32, f64>::try_new(rows, cols, p.to_vec(), i.to_vec(), v.to_vec()).unwrap_err()
}

#[test]
fn valid_csr_passes() {
    let a =
        Csr::<i32, f64>::try_new(2, 3, vec![0, 2, 3], vec![0, 2, 1], vec![1.0, 2.0, 3.0]).unwrap();
    assert_eq!(a.validate(&STRICT), Default::default());
}

#[test]
fn indptr_errors() {
    assert_eq!(
        csr_err(2, 3, &[0, 1], &[0], &[1.0]),
        E::LengthMismatch {
            array: "indptr",
            len: 2,
            expected: 3
        }
    );
    assert_eq!(
        csr_err(2, 3, &[1, 1, 1], &[0], &[1.0]),
        E::IndptrStart { value: 1 }
    );
    assert_eq!(
        csr_err(2, 3, &[0, 2, 1], &[0], &[1.0]),
        E::IndptrDecreasing {
            row: 1,
            start: 2,
            end: 1
        }
    );
    assert_eq!(
        csr_err(2, 3, &[0, 1, 1], &[0, 1], &[1.0, 2.0]),
        E::IndptrEnd { value: 1, nnz: 2 }
    );
    assert_eq!(
        csr_err(2, 3, &[0, 1, 1], &[0], &[1.0, 2.0]),
        E::LengthMismatch {
            array: "values",
            len: 2,
            expected: 1
        }
    );
}

#[test]
fn index_errors_with_location() {
    assert_eq!(
        csr_err(2, 3, &[0, 1, 3], &[0, 1, 3], &[1.0; 3]),
        E::OutOfRange {
            row: 1,
            pos: 2,
            index: 3,
            bound: 3
        }
    );
    assert_eq!(
        csr_err(2, 3, &[0, 1, 3], &[0, -1, 2], &[1.0; 3]),
        E::OutOfRange {
            row: 1,
            pos: 1,
            index: -1,
            bound: 3
        }
    );
    assert_eq!(
        csr_err(2, 3, &[0, 1, 3], &[0, 2, 1], &[1.0; 3]),
        E::Unsorted {
            row: 1,
            pos: 2,
            index: 1,
            prev: 2
        }
    );
    assert_eq!(
        csr_err(2, 3, &[0, 1, 3], &[0, 2, 2], &[1.0; 3]),
        E::Duplicate {
            row: 1,
            pos: 2,
            index: 2
        }
    );
}

#[test]
fn lenient_options() {
    let unsorted_dup = |opts: ValidateOptions| {
        check_compressed::<i32, f64>(1, 5, &[0, 4], &[3, 1, 4, 3], &[1.0; 4], &opts).errors
    };
    // Unsorted allowed but a non-adjacent duplicate is still found.
    let e = unsorted_dup(ValidateOptions {
        require_sorted: false,
        allow_duplicates: false,
    });
    assert_eq!(
        e,
        vec![E::Duplicate {
            row: 0,
            pos: 3,
            index: 3
        }]
    );
    assert!(unsorted_dup(ValidateOptions::LENIENT).is_empty());
    let e = unsorted_dup(STRICT);
    assert_eq!(
        e,
        vec![
            E::Unsorted {
                row: 0,
                pos: 1,
                index: 1,
                prev: 3
            },
            E::Unsorted {
                row: 0,
                pos: 3,
                index: 3,
                prev: 4
            },
            E::Duplicate {
                row: 0,
                pos: 3,
                index: 3
            },
        ]
    );
}

#[test]
fn warnings_for_zeros_and_nan() {
    let r =
        check_compressed::<i32, f64>(2, 3, &[0, 2, 3], &[0, 1, 2], &[0.0, f64::NAN, 1.0], &STRICT);
    assert!(r.is_ok());
    assert_eq!(
        r.warnings,
        vec![
            W::ExplicitZero {
                row: 0,
                pos: 0,
                index: 0
            },
            W::NaN {
                row: 0,
                pos: 1,
                index: 1
            }
        ]
    );
    // Warnings do not stop construction.
    assert!(
        Csr::<i32, f64>::try_new(2, 3, vec![0, 2, 3], vec![0, 1, 2], vec![0.0, f64::NAN, 1.0])
            .is_ok()
    );
}

#[test]
fn fixers() {
    let mut a = Csr::<i32, f64>::try_new_with(
        2,
        4,
        vec![0, 4, 5],
        vec![3, 1, 3, 0, 2],
        vec![1.0, 2.0, 3.0, 0.0, 5.0],
        &ValidateOptions::LENIENT,
    )
    .unwrap();
    let mut sorted = a.clone();
    sorted.sort_indices();
    assert_eq!(sorted.indices(), &[0, 1, 3, 3, 2]);
    assert_eq!(sorted.values(), &[0.0, 2.0, 1.0, 3.0, 5.0]);
    assert_eq!(
        sorted.validate(&STRICT).errors,
        vec![E::Duplicate {
            row: 0,
            pos: 3,
            index: 3
        }]
    );
    a.sum_duplicates();
    assert_eq!(a.indptr(), &[0, 3, 4]);
    assert_eq!(a.indices(), &[0, 1, 3, 2]);
    assert_eq!(a.values(), &[0.0, 2.0, 4.0, 5.0]);
    assert!(a.validate(&STRICT).is_ok());
    assert_eq!(
        a.validate(&STRICT).warnings,
        vec![W::ExplicitZero {
            row: 0,
            pos: 0,
            index: 0
        }]
    );
    a.eliminate_zeros();
    assert_eq!(a.indices(), &[1, 3, 2]);
    assert_eq!(a.indptr(), &[0, 2, 3]);
    assert!(a.validate(&STRICT).warnings.is_empty());
}

#[test]
fn shape_must_fit_index_type() {
    let e = Csr::<i32, f32>::zeros(1 << 31, 1).unwrap_err();
    assert_eq!(
        e,
        E::ShapeTooLarge {
            dim: "rows",
            value: 1 << 31,
            index: "i32"
        }
    );
    assert!(Csr::<i64, f32>::zeros(1 << 31, 1).is_ok());
}

#[test]
fn csc_locations_use_columns() {
    let e = Csc::<i32, f64>::try_new(3, 2, vec![0, 1, 3], vec![0, 2, 1], vec![1.0; 3]).unwrap_err();
    assert_eq!(
        e,
        E::Unsorted {
            row: 1,
            pos: 2,
            index: 1,
            prev: 2
        }
    );
}

#[test]
fn coo_errors() {
    let r = check_coo::<i32, f64>(2, 3, &[0, 2, 1, 1], &[0, 0, 3, 2], &[1.0, 1.0, 1.0, 0.0]);
    assert_eq!(
        r.errors,
        vec![
            E::RowOutOfRange {
                pos: 1,
                row: 2,
                bound: 2
            },
            E::OutOfRange {
                row: 1,
                pos: 2,
                index: 3,
                bound: 3
            }
        ]
    );
    assert_eq!(
        r.warnings,
        vec![W::ExplicitZero {
            row: 1,
            pos: 3,
            index: 2
        }]
    );
    let e = Coo::<i32, f64>::try_new(2, 3, vec![0], vec![0, 1], vec![1.0]).unwrap_err();
    assert_eq!(
        e,
        E::LengthMismatch {
            array: "col",
            len: 2,
            expected: 1
        }
    );
    let mut c = Coo::<i32, f64>::zeros(2, 2).unwrap();
    assert_eq!(
        c.push(2, 0, 1.0),
        Err(E::RowOutOfRange {
            pos: 0,
            row: 2,
            bound: 2
        })
    );
    assert_eq!(
        c.push(1, 5, 1.0),
        Err(E::OutOfRange {
            row: 1,
            pos: 0,
            index: 5,
            bound: 2
        })
    );
}

#[test]
fn bsr_errors() {
    let ok = Bsr::<i32, f64>::try_new(3, 3, 2, vec![0, 1, 1], vec![1], vec![0.0; 4]);
    assert!(ok.is_ok());
    assert_eq!(
        Bsr::<i32, f64>::try_new(3, 3, 0, vec![0], vec![], vec![]).unwrap_err(),
        E::ZeroBlockSize
    );
    let e = Bsr::<i32, f64>::try_new(3, 3, 2, vec![0, 1, 1], vec![2], vec![0.0; 4]).unwrap_err();
    assert_eq!(
        e,
        E::OutOfRange {
            row: 0,
            pos: 0,
            index: 2,
            bound: 2
        }
    );
    let e = Bsr::<i32, f64>::try_new(3, 3, 2, vec![0, 1, 1], vec![1], vec![0.0; 3]).unwrap_err();
    assert_eq!(
        e,
        E::LengthMismatch {
            array: "values",
            len: 3,
            expected: 4
        }
    );
    let r = check_bsr::<i32, f64>(2, 2, 2, &[0, 1], &[0], &[0.0, f64::NAN, 0.0, 0.0], &STRICT);
    assert_eq!(
        r.warnings,
        vec![W::NaN {
            row: 0,
            pos: 0,
            index: 0
        }]
    );
}

#[test]
fn ell_errors() {
    let ok = Ell::<i32, f64>::try_new(
        2,
        3,
        1,
        2,
        vec![0, 2, 1, 1],
        vec![1.0, 2.0, 3.0, 0.0],
        vec![2, 1],
    );
    assert!(ok.is_ok());
    let e = Ell::<i32, f64>::try_new(2, 3, 1, 2, vec![0, 2, 1, 1], vec![1.0; 4], vec![3, 1])
        .unwrap_err();
    assert_eq!(
        e,
        E::EllRowLength {
            row: 0,
            len: 3,
            k: 2
        }
    );
    let e = Ell::<i32, f64>::try_new(2, 3, 1, 2, vec![2, 0, 1, 1], vec![1.0; 4], vec![2, 1])
        .unwrap_err();
    assert_eq!(
        e,
        E::Unsorted {
            row: 0,
            pos: 1,
            index: 0,
            prev: 2
        }
    );
    let e = Ell::<i32, f64>::try_new(2, 3, 1, 2, vec![0, 2, 1, 7], vec![1.0; 4], vec![2, 1])
        .unwrap_err();
    assert_eq!(
        e,
        E::OutOfRange {
            row: 1,
            pos: 3,
            index: 7,
            bound: 3
        }
    );
    let e =
        Ell::<i32, f64>::try_new(2, 3, 1, 2, vec![0, 2, 1], vec![1.0; 4], vec![2, 1]).unwrap_err();
    assert_eq!(
        e,
        E::LengthMismatch {
            array: "indices",
            len: 3,
            expected: 4
        }
    );
    let r = check_ell::<i32, f64>(1, 3, 1, 2, &[1, 1], &[0.0, 0.0], &[1], &STRICT);
    assert_eq!(
        r.warnings,
        vec![W::ExplicitZero {
            row: 0,
            pos: 0,
            index: 1
        }]
    );
}

#[test]
fn dcsr_errors() {
    let ok =
        Dcsr::<i32, f64>::try_new(4, 3, vec![1, 3], vec![0, 1, 3], vec![2, 0, 1], vec![1.0; 3]);
    assert!(ok.is_ok());
    let e = Dcsr::<i32, f64>::try_new(4, 3, vec![3, 1], vec![0, 1, 3], vec![2, 0, 1], vec![1.0; 3])
        .unwrap_err();
    assert_eq!(
        e,
        E::DcsrRowOrder {
            pos: 1,
            row: 1,
            prev: 3
        }
    );
    let e = Dcsr::<i32, f64>::try_new(4, 3, vec![1, 4], vec![0, 1, 3], vec![2, 0, 1], vec![1.0; 3])
        .unwrap_err();
    assert_eq!(
        e,
        E::RowOutOfRange {
            pos: 1,
            row: 4,
            bound: 4
        }
    );
    let r = check_dcsr::<i32, f64>(4, 3, &[1, 2], &[0, 1, 1], &[2], &[1.0], &STRICT);
    assert_eq!(r.errors, vec![E::DcsrEmptyRow { pos: 1, row: 2 }]);
}

#[test]
fn error_messages_are_descriptive() {
    let e = csr_err(2, 3, &[0, 1, 3], &[0, 2, 1], &[1.0; 3]);
    assert_eq!(
        e.to_string(),
        "row 1, position 2: index 1 follows 2; indices must be sorted"
    );
    let e = csr_err(2, 3, &[0, 2, 1], &[0], &[1.0]);
    assert_eq!(
        e.to_string(),
        "indptr decreases at row 1: indptr[1] = 2 > indptr[2] = 1"
    );
}
