//! Matrix Market reader/writer: semantics, error snapshots, never-panic properties.

use proptest::prelude::*;
use sparsec_formats::mtx::{self, MtxField, MtxSymmetry};
use sparsec_formats::{Coo, Csr, MtxError};

fn read(s: &str) -> Result<Csr<i32, f64>, MtxError> {
    mtx::read_mtx_str(s)
}

fn err(s: &[u8]) -> MtxError {
    mtx::parse_mtx::<i32, f64>(s).map(|_| ()).unwrap_err()
}

const GEN: &str = "%%MatrixMarket matrix coordinate real general\n";

#[test]
fn reads_general_with_comments_blank_lines_and_crlf() {
    let s = "%%MatrixMarket Matrix Coordinate REAL General\r\n% a comment\r\n\r\n  % indented comment\n3 4 4\n1 1 1.5\n\n% mid comment\n3 4 -2e1\n1 1 0.5\n2 3 1D2\n";
    let a = read(s).unwrap();
    assert_eq!(a.shape(), (3, 4));
    assert_eq!(a.indptr(), &[0, 1, 2, 3]);
    assert_eq!(a.indices(), &[0, 2, 3]);
    // Duplicate (1,1) summed; Fortran exponent accepted.
    assert_eq!(a.values(), &[2.0, 100.0, -20.0]);
}

#[test]
fn symmetric_mirrors_off_diagonal() {
    let s = "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 4\n3 1 2\n2 3 5\n";
    let (h, coo): (_, Coo<i32, f64>) = mtx::parse_mtx(s.as_bytes()).unwrap();
    assert_eq!(
        (h.field, h.symmetry, h.entries),
        (MtxField::Real, MtxSymmetry::Symmetric, 3)
    );
    assert_eq!(coo.nnz(), 5);
    let a = coo.to_csr();
    assert_eq!(
        a.to_dense().unwrap(),
        vec![4.0, 0.0, 2.0, 0.0, 0.0, 5.0, 2.0, 5.0, 0.0]
    );
}

#[test]
fn skew_symmetric_negates_mirror() {
    let s = "%%MatrixMarket matrix coordinate integer skew-symmetric\n2 2 1\n2 1 3\n";
    let a = read(s).unwrap();
    assert_eq!(a.to_dense().unwrap(), vec![0.0, -3.0, 3.0, 0.0]);
}

#[test]
fn pattern_values_are_one_and_symmetric_duplicates_sum() {
    // Both triangles listed in a symmetric file (as in cora.mtx): entries add up.
    let s = "%%MatrixMarket matrix coordinate pattern symmetric\n2 2 3\n1 2\n2 1\n2 2\n";
    let a = read(s).unwrap();
    assert_eq!(a.to_dense().unwrap(), vec![0.0, 2.0, 2.0, 1.0]);
}

#[test]
fn empty_matrix_and_zero_entries() {
    let a = read(&format!("{GEN}0 0 0\n")).unwrap();
    assert_eq!((a.shape(), a.nnz()), ((0, 0), 0));
    let a = read(&format!("{GEN}5 2 0\n% nothing\n")).unwrap();
    assert_eq!(a.indptr(), &[0; 6]);
}

#[test]
fn writer_roundtrip() {
    let a = Csr::<i64, f32>::try_new(2, 3, vec![0, 2, 3], vec![0, 2, 1], vec![0.1, -2.5, 1e-7])
        .unwrap();
    let mut out = Vec::new();
    mtx::write_mtx(&mut out, &a).unwrap();
    let text = String::from_utf8(out.clone()).unwrap();
    assert!(text.starts_with("%%MatrixMarket matrix coordinate real general\n"));
    assert!(text.contains("\n2 3 3\n1 1 0.1\n1 3 -2.5\n"));
    let b: Csr<i64, f32> = mtx::read_mtx(&out[..]).unwrap();
    assert_eq!(a, b);
    let mut out2 = Vec::new();
    mtx::write_mtx_coo(&mut out2, &a.to_coo()).unwrap();
    assert_eq!(out, out2);
}

#[test]
fn path_errors_name_the_file() {
    let dir = std::env::temp_dir().join(format!("sparsec-formats-mtx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bad.mtx");
    std::fs::write(&p, format!("{GEN}2 2 1\n1 3 1.0\n")).unwrap();
    let e = mtx::read_mtx_path::<i32, f64>(&p).unwrap_err();
    assert!(
        matches!(&e, MtxError::File { source, .. } if matches!(**source, MtxError::IndexOutOfRange { line: 3, col: 3, .. }))
    );
    assert_eq!(
        e.to_string(),
        format!(
            "{}: line 3, column 3: column index 3 out of range 1..=2",
            p.display()
        )
    );
    let missing = dir.join("missing.mtx");
    let e = mtx::read_mtx_path::<i32, f64>(&missing).unwrap_err();
    assert!(matches!(&e, MtxError::File { source, .. } if matches!(**source, MtxError::Io(_))));
    assert!(e.to_string().starts_with(&missing.display().to_string()));
    // Writer and reader agree through files too.
    let good = dir.join("good.mtx");
    let a = Csr::<i32, f64>::try_new(1, 2, vec![0, 1], vec![1], vec![3.0]).unwrap();
    mtx::write_mtx_path(&good, &a).unwrap();
    assert_eq!(mtx::read_mtx_path::<i32, f64>(&good).unwrap(), a);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Bad inputs: (snapshot name, input, expected variant check).
#[test]
fn bad_inputs_report_specific_errors() {
    let big = format!("{GEN}3000000000 2 0\n");
    type Case = (&'static str, Vec<u8>, fn(&MtxError) -> bool);
    let cases: Vec<Case> = vec![
        ("empty_input", b"".to_vec(), |e| {
            matches!(e, MtxError::Banner { line: 1, .. })
        }),
        (
            "misspelled_banner",
            b"%%MatrixMarke matrix coordinate real general\n1 1 0\n".to_vec(),
            |e| {
                matches!(
                    e,
                    MtxError::Banner {
                        line: 1,
                        col: 1,
                        ..
                    }
                )
            },
        ),
        ("no_banner", b"3 3 1\n1 1 1\n".to_vec(), |e| {
            matches!(e, MtxError::Banner { .. })
        }),
        (
            "short_banner",
            b"%%MatrixMarket matrix coordinate real\n1 1 0\n".to_vec(),
            |e| matches!(e, MtxError::Banner { .. }),
        ),
        (
            "banner_extra_word",
            b"%%MatrixMarket matrix coordinate real general extra\n1 1 0\n".to_vec(),
            |e| {
                matches!(
                    e,
                    MtxError::TooManyTokens {
                        line: 1,
                        col: 47,
                        ..
                    }
                )
            },
        ),
        (
            "array_format",
            b"%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n".to_vec(),
            |e| {
                matches!(
                    e,
                    MtxError::Unsupported {
                        what: "format",
                        col: 23,
                        ..
                    }
                )
            },
        ),
        (
            "complex_field",
            b"%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n".to_vec(),
            |e| matches!(e, MtxError::Unsupported { what: "field", .. }),
        ),
        (
            "hermitian",
            b"%%MatrixMarket matrix coordinate real hermitian\n1 1 0\n".to_vec(),
            |e| {
                matches!(
                    e,
                    MtxError::Unsupported {
                        what: "symmetry",
                        ..
                    }
                )
            },
        ),
        (
            "vector_object",
            b"%%MatrixMarket vector coordinate real general\n1 0\n".to_vec(),
            |e| matches!(e, MtxError::Unsupported { what: "object", .. }),
        ),
        (
            "missing_size_line",
            format!("{GEN}% only a comment\n\n").into_bytes(),
            |e| matches!(e, MtxError::MissingSize { line: 3 }),
        ),
        (
            "size_too_few_tokens",
            format!("{GEN}3 3\n").into_bytes(),
            |e| {
                matches!(
                    e,
                    MtxError::TooFewTokens {
                        line: 2,
                        expected: 3,
                        found: 2,
                        ..
                    }
                )
            },
        ),
        (
            "size_not_a_number",
            format!("{GEN}3 x 1\n1 1 1\n").into_bytes(),
            |e| {
                matches!(
                    e,
                    MtxError::BadNumber {
                        line: 2,
                        col: 3,
                        ..
                    }
                )
            },
        ),
        (
            "size_negative",
            format!("{GEN}-3 3 1\n").into_bytes(),
            |e| {
                matches!(
                    e,
                    MtxError::BadNumber {
                        line: 2,
                        col: 1,
                        ..
                    }
                )
            },
        ),
        (
            "row_index_zero",
            format!("{GEN}3 3 1\n0 1 1.0\n").into_bytes(),
            |e| {
                matches!(
                    e,
                    MtxError::IndexOutOfRange {
                        line: 3,
                        col: 1,
                        value: 0,
                        ..
                    }
                )
            },
        ),
        (
            "column_index_too_large",
            format!("{GEN}3 3 2\n1 1 1\n2 4 1.0\n").into_bytes(),
            |e| {
                matches!(
                    e,
                    MtxError::IndexOutOfRange {
                        line: 4,
                        col: 3,
                        value: 4,
                        bound: 3,
                        ..
                    }
                )
            },
        ),
        (
            "index_not_integer",
            format!("{GEN}3 3 1\n1.0 1 1.0\n").into_bytes(),
            |e| {
                matches!(
                    e,
                    MtxError::BadNumber {
                        line: 3,
                        col: 1,
                        ..
                    }
                )
            },
        ),
        (
            "malformed_real",
            format!("{GEN}3 3 1\n1 1 1.2.3\n").into_bytes(),
            |e| {
                matches!(
                    e,
                    MtxError::BadNumber {
                        line: 3,
                        col: 5,
                        expected: "a real value",
                        ..
                    }
                )
            },
        ),
        (
            "integer_field_with_real",
            b"%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 1.5\n".to_vec(),
            |e| {
                matches!(
                    e,
                    MtxError::BadNumber {
                        expected: "an integer value",
                        ..
                    }
                )
            },
        ),
        (
            "entry_too_few_tokens",
            format!("{GEN}3 3 1\n1 2\n").into_bytes(),
            |e| {
                matches!(
                    e,
                    MtxError::TooFewTokens {
                        line: 3,
                        col: 4,
                        found: 2,
                        ..
                    }
                )
            },
        ),
        (
            "pattern_entry_too_many_tokens",
            b"%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 2 3\n".to_vec(),
            |e| {
                matches!(
                    e,
                    MtxError::TooManyTokens {
                        line: 3,
                        col: 5,
                        expected: 2,
                        ..
                    }
                )
            },
        ),
        (
            "too_few_entries",
            format!("{GEN}3 3 3\n1 1 1\n2 2 2\n\n").into_bytes(),
            |e| {
                matches!(
                    e,
                    MtxError::TooFewEntries {
                        expected: 3,
                        found: 2,
                        ..
                    }
                )
            },
        ),
        (
            "too_many_entries",
            format!("{GEN}3 3 1\n1 1 1\n2 2 2\n").into_bytes(),
            |e| {
                matches!(
                    e,
                    MtxError::TooManyEntries {
                        line: 4,
                        expected: 1
                    }
                )
            },
        ),
        (
            "symmetric_not_square",
            b"%%MatrixMarket matrix coordinate real symmetric\n2 3 0\n".to_vec(),
            |e| {
                matches!(
                    e,
                    MtxError::NotSquare {
                        line: 2,
                        rows: 2,
                        cols: 3,
                        ..
                    }
                )
            },
        ),
        (
            "invalid_utf8",
            [GEN.as_bytes(), b"2 2 1\n1 1 \xff\n"].concat(),
            |e| matches!(e, MtxError::Utf8 { line: 3 }),
        ),
        ("rows_overflow_index_type", big.into_bytes(), |e| {
            matches!(e, MtxError::TooLarge { what: "rows", .. })
        }),
    ];
    assert!(cases.len() >= 15);
    for (name, input, check) in cases {
        let e = err(&input);
        assert!(check(&e), "{name}: unexpected error {e:?}");
        insta::assert_snapshot!(name, e.to_string());
    }
}

fn valid_file() -> String {
    "%%MatrixMarket matrix coordinate real symmetric\n% comment\n4 4 5\n1 1 1.0\n2 1 -2.5\n3 3 3e-2\n4 2 4\n4 4 5\n".to_string()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = mtx::parse_mtx::<i32, f64>(&bytes);
        let _ = mtx::parse_mtx::<i64, f32>(&bytes);
    }

    #[test]
    fn random_text_after_banner_never_panics(body in "[0-9 .eE+\\-%\n\r\tx]{0,200}") {
        for banner in ["%%MatrixMarket matrix coordinate real general\n",
                       "%%MatrixMarket matrix coordinate pattern symmetric\n",
                       "%%MatrixMarket matrix coordinate integer skew-symmetric\n"] {
            let s = format!("{banner}{body}");
            if let Ok((_, coo)) = mtx::parse_mtx::<i32, f64>(s.as_bytes()) {
                // Whatever parses converts to a valid CSR.
                prop_assert!(coo.validate().is_ok());
                prop_assert!(coo.to_csr().validate(&Default::default()).is_ok());
            }
        }
    }

    #[test]
    fn mutated_valid_files_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<u8>()), 1..8)
    ) {
        let mut bytes = valid_file().into_bytes();
        for (at, op, b) in edits {
            let n = bytes.len();
            match op {
                0 if n > 0 => { let i = at.index(n); bytes[i] = b; }
                1 if n > 0 => { bytes.remove(at.index(n)); }
                2 => { bytes.insert(at.index(n + 1), b); }
                _ => { let i = at.index(n + 1); bytes.truncate(i); }
            }
        }
        let _ = mtx::parse_mtx::<i32, f64>(&bytes);
        let _ = mtx::read_mtx::<i32, f32, _>(&bytes[..]);
    }
}

/// Sizes on the size line are untrusted: nothing in proportion to them is allocated before it
/// is known to be needed and possible.
#[test]
fn hostile_sizes_are_refused_without_allocating() {
    // i64 rows near the type's limit: the row pointer array cannot exist.
    let e = mtx::read_mtx_str::<i64, f64>(&format!("{GEN}9223372036854775807 1 0\n")).unwrap_err();
    assert!(matches!(e, MtxError::Alloc { line: 2, .. }), "{e:?}");
    insta::assert_snapshot!("rows_cannot_be_allocated", e.to_string());
    // One past i64::MAX does not fit the index type.
    let e = mtx::read_mtx_str::<i64, f64>(&format!("{GEN}9223372036854775808 1 0\n")).unwrap_err();
    assert!(
        matches!(e, MtxError::TooLarge { what: "rows", .. }),
        "{e:?}"
    );
    // Columns beyond i32 with i32 indices.
    let e = err(format!("{GEN}2 3000000000 0\n").as_bytes());
    assert!(
        matches!(
            e,
            MtxError::TooLarge {
                what: "cols",
                value: 3_000_000_000,
                ..
            }
        ),
        "{e:?}"
    );
    // A huge declared entry count in a short file is reported once the entries run out.
    let e = err(format!("{GEN}2 2 1000000000000000\n1 1 1\n").as_bytes());
    assert!(
        matches!(e, MtxError::TooFewEntries { found: 1, .. }),
        "{e:?}"
    );
    // Through a file, the error names it and the line.
    let dir = std::env::temp_dir().join(format!("sparsec-mtx-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("huge.mtx");
    std::fs::write(&path, format!("{GEN}9223372036854775807 1 0\n")).unwrap();
    let e = mtx::read_mtx_path::<i64, f64>(&path)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!(
            "{}: line 2: rows = 9223372036854775807",
            path.display()
        )),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Mutants of a valid file (bytes replaced, dropped, or numbers swapped for huge, negative
/// or malformed ones) read to a matrix or an error, never a panic.
mod mutants {
    use proptest::prelude::*;
    use sparsec_formats::mtx::parse_mtx;

    const VALID: &str = "%%MatrixMarket matrix coordinate real general\n% a comment\n4 5 6\n1 1 1.5\n1 5 -2\n2 3 3e2\n3 2 0.25\n4 4 1\n4 5 -0.5\n";
    const WORDS: &[&str] = &[
        "3000000000", "9223372036854775807", "18446744073709551616", "-1", "0", "1e309", "nan", "inf", "",
        " ", "\n", "%%MatrixMarket", "pattern", "symmetric", "skew-symmetric", "hermitian", "array", "integer", "complex",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        #[test]
        fn mutated_files_never_panic(edits in proptest::collection::vec((0usize..200, 0usize..WORDS.len(), 0u8..3), 1..6)) {
            let mut text = VALID.to_string();
            for (at, word, how) in edits {
                let at = at % (text.len() + 1);
                let at = (0..=at).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
                match how {
                    0 => text.insert_str(at, WORDS[word]),
                    1 => { text.truncate(at); text.push_str(WORDS[word]); text.push_str(&VALID[at.min(VALID.len())..]); }
                    _ => { let end = (at + 3).min(text.len()); if text.is_char_boundary(end) { text.replace_range(at..end, WORDS[word]); } }
                }
            }
            let _ = parse_mtx::<i32, f32>(text.as_bytes());
            let _ = parse_mtx::<i64, f64>(text.as_bytes());
        }
    }
}
