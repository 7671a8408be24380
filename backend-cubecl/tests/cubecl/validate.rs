//! Malformed arguments are rejected before anything reaches the device.

use super::common::{client, workload};
use sparsec_backend_cubecl::{compile, CubeclError, ValidateError};
use sparsec_ir::data::{Args, Array};
use sparsec_testkit as tk;

fn csrmm_args() -> Args {
    let (_, m) = tk::generated_matrices().into_iter().next().unwrap();
    tk::workloads::case("csrmm", &m, &mut tk::Rng::new(5)).unwrap().args
}

fn i32s<'a>(args: &'a mut Args, name: &str) -> &'a mut Vec<i32> {
    match args.arrays.get_mut(name) {
        Some(Array::I32(v)) => v,
        other => panic!("{name}: {other:?}"),
    }
}

/// Runs csrmm on `args`; the error, after checking that nothing was compiled or launched.
fn rejected(args: &Args) -> ValidateError {
    let prog = compile(&workload("csrmm")).unwrap();
    let err = prog.run(&client(), args).expect_err("malformed arguments were accepted");
    assert_eq!(prog.compilations(), 0, "a kernel was built for malformed arguments");
    match err {
        CubeclError::Invalid(e) => e,
        other => panic!("expected a validation error, got {other}"),
    }
}

#[test]
fn well_formed_arguments_pass() {
    let prog = compile(&workload("csrmm")).unwrap();
    prog.run(&client(), &csrmm_args()).unwrap();
}

#[test]
fn unsorted_row_is_rejected() {
    let mut args = csrmm_args();
    let indptr = i32s(&mut args, "indptr").clone();
    let row = (0..indptr.len() - 1).find(|&r| indptr[r + 1] - indptr[r] >= 2).unwrap();
    let s = indptr[row] as usize;
    i32s(&mut args, "indices").swap(s, s + 1);
    let e = rejected(&args);
    assert!(e.to_string().contains("not sorted"), "{e}");
}

#[test]
fn out_of_range_index_is_rejected() {
    let mut args = csrmm_args();
    let last = i32s(&mut args, "indices").len() - 1;
    i32s(&mut args, "indices")[last] = 1_000_000;
    let e = rejected(&args);
    assert!(e.to_string().contains("outside"), "{e}");
    i32s(&mut args, "indices")[last] = -1;
    rejected(&args);
}

#[test]
fn decreasing_indptr_is_rejected() {
    let mut args = csrmm_args();
    let ip = i32s(&mut args, "indptr");
    ip[3] = ip[2] - 1;
    let e = rejected(&args);
    assert!(e.to_string().contains("decrease"), "{e}");
}

#[test]
fn indptr_past_nnz_is_rejected() {
    let mut args = csrmm_args();
    let ip = i32s(&mut args, "indptr");
    let n = ip.len();
    ip[n - 1] += 5;
    rejected(&args);
}

#[test]
fn short_arrays_are_rejected() {
    let mut args = csrmm_args();
    if let Some(Array::F32(v)) = args.arrays.get_mut("b") {
        v.pop();
    }
    assert!(matches!(rejected(&args), ValidateError::Length { .. }));
    let mut args = csrmm_args();
    i32s(&mut args, "indptr").pop();
    rejected(&args);
}

#[test]
fn wrong_dtype_and_missing_values_are_rejected() {
    let mut args = csrmm_args();
    let a = match &args.arrays["a"] {
        Array::F32(v) => Array::F64(v.iter().map(|x| *x as f64).collect()),
        other => panic!("{other:?}"),
    };
    args.arrays.insert("a".into(), a);
    assert!(matches!(rejected(&args), ValidateError::DType { .. }));
    let mut args = csrmm_args();
    args.scalars.shift_remove("feat_size");
    assert!(matches!(rejected(&args), ValidateError::Missing(_)));
    let mut args = csrmm_args();
    args.arrays.shift_remove("indices");
    assert!(matches!(rejected(&args), ValidateError::Missing(_)));
}

/// Dtypes without a GPU buffer type are refused at compile time, with the buffer named.
#[test]
fn bool_buffers_are_refused_with_a_clear_error() {
    let text = "func flags(a: handle, n: i32) stage III {
  buffer A = match_buffer(a, [n], bool)
  for i in serial(n) {
    block b(vi: spatial(n) = i) {
      A[vi] = true
    }
  }
}
";
    let f = sparsec_ir::text::parse_func("flags", text).unwrap();
    let e = compile(&f).expect_err("a bool buffer was accepted").to_string();
    assert!(e.contains("`A`") && e.contains("bool"), "{e}");
}
