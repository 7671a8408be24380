//! The `.npy` reader: round trips, Fortran order, and hostile headers refused before any
//! allocation in proportion to what they claim.

use sparsec::ir::data::Array;
use sparsec::npy::{self, NpyError};
use std::path::PathBuf;

/// A version-1 `.npy` file with the given header fields and data bytes.
fn npy_bytes(descr: &str, fortran: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}");
    let mut header = dict.into_bytes();
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(b' ');
    }
    header.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(data);
    out
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sparsec-npy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn writer_and_reader_round_trip_with_shape() {
    let path = file("round.npy", b"");
    let a = Array::F64(vec![1.0, -2.5, 3.0, 4.0, 5.0, 6.0]);
    npy::write(&path, &a, &[2, 3]).unwrap();
    assert_eq!(npy::read_shaped(&path).unwrap(), (a, vec![2, 3]));
    let b = Array::I32(vec![7, 8, 9]);
    npy::write(&path, &b, &[3]).unwrap();
    assert_eq!(npy::read_shaped(&path).unwrap(), (b, vec![3]));
}

#[test]
fn fortran_order_is_transposed_to_c_order() {
    // The 2 × 3 matrix [[0, 1, 2], [3, 4, 5]] stored column by column.
    let data = f32_bytes(&[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    let path = file("fortran.npy", &npy_bytes("<f4", "True", "(2, 3)", &data));
    let (a, shape) = npy::read_shaped(&path).unwrap();
    assert_eq!(shape, vec![2, 3]);
    assert_eq!(a, Array::F32(vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]));
    // Three dimensions: element (i, j, k) at i + 2j + 4k in the file.
    let data: Vec<u8> = (0..8).flat_map(|x| (x as i64).to_le_bytes()).collect();
    let path = file("fortran3.npy", &npy_bytes("<i8", "True", "(2, 2, 2)", &data));
    let Array::I64(v) = npy::read(&path).unwrap() else { panic!() };
    assert_eq!(v, vec![0, 4, 2, 6, 1, 5, 3, 7]);
}

#[test]
fn hostile_headers_are_refused() {
    // 20 bytes of data under a header claiming 4 GB.
    let path = file("huge.npy", &npy_bytes("<f4", "False", "(1073741824,)", &[0; 20]));
    let e = npy::read(&path).unwrap_err();
    assert!(matches!(e, NpyError::Length { expected: 4294967296, found: 20, .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!("{}: shape (1073741824,) of `<f4` needs 4294967296 data bytes, the file has 20", path.display())
    );
    // A shape whose product wraps around to 1,200 elements.
    let data = f32_bytes(&[0.0; 1200]);
    let path = file("wrap.npy", &npy_bytes("<f4", "False", "(4611686018427388204, 4)", &data));
    let e = npy::read(&path).unwrap_err();
    assert!(matches!(e, NpyError::ShapeOverflow { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!("{}: shape (4611686018427388204, 4) has too many elements (the product overflows)", path.display())
    );
    // Malformed headers name the problem.
    for (name, bytes, want) in [
        ("magic.npy", b"NUMPY\x01\x00".to_vec(), "missing the `\\x93NUMPY` magic string"),
        ("short.npy", b"\x93NUMPY\x01\x00\xff\x00{".to_vec(), "header runs past the end of the file"),
        ("order.npy", npy_bytes("<f4", "1", "(1,)", &[0; 4]), "'fortran_order' is not True or False"),
        ("noshape.npy", [&b"\x93NUMPY\x01\x00\x29\x00"[..], b"{'descr': '<f4', 'fortran_order': False}\n"].concat(), "missing key 'shape'"),
        ("negative.npy", npy_bytes("<f4", "False", "(-1,)", &[]), "unexpected `-1,), }"),
    ] {
        let path = file(name, &bytes);
        let e = npy::read(&path).unwrap_err();
        assert!(matches!(e, NpyError::Header { .. }), "{name}: {e:?}");
        let text = e.to_string();
        assert!(text.starts_with(&format!("{}: not a valid .npy file: ", path.display())), "{text}");
        assert!(text.contains(want), "{name}: {text}");
    }
    let path = file("big_endian.npy", &npy_bytes(">f4", "False", "(1,)", &[0; 4]));
    assert!(matches!(npy::read(&path).unwrap_err(), NpyError::UnsupportedType { .. }));
}

/// Mutants of a valid file (header bytes and words replaced, the file cut) read to an array
/// or an error, never a panic; an array read back always has its shape's element count.
mod mutants {
    use super::npy_bytes;
    use proptest::prelude::*;

    const WORDS: &[&str] =
        &["(", ")", ",", "'", "True", "False", "<f4", ">f4", "|b1", "<i8", "<u2", "9999999999999", "-3", "4611686018427387904", "", " "];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        #[test]
        fn mutated_files_never_panic(edits in proptest::collection::vec((0usize..120, 0usize..WORDS.len(), any::<bool>()), 1..5), cut in 0usize..200) {
            let data: Vec<u8> = (0..24u8).collect();
            let mut bytes = npy_bytes("<f4", "False", "(2, 3)", &data);
            for (at, word, insert) in edits {
                let at = at.min(bytes.len());
                let w = WORDS[word].as_bytes();
                if insert {
                    bytes.splice(at..at, w.iter().copied());
                } else {
                    let end = (at + w.len()).min(bytes.len());
                    bytes.splice(at..end, w.iter().copied());
                }
            }
            bytes.truncate(bytes.len().saturating_sub(cut % 8));
            let path = std::env::temp_dir().join(format!("sparsec-npy-mutant-{}.npy", std::process::id()));
            std::fs::write(&path, &bytes).unwrap();
            if let Ok((array, shape)) = sparsec::npy::read_shaped(&path) {
                prop_assert_eq!(array.len() as u64, shape.iter().product::<u64>());
            }
        }
    }
}
