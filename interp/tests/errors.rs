//! Every failure is an error value naming what went wrong, with the statement's span.

mod common;

use common::*;
use sparsec_interp::{run, run_with, InterpError, Options};
use sparsec_ir::data::{Args, Array};
use sparsec_ir::DType;

const FLAT: &str = r#"
func f(x: handle, n: i32, d: i32) stage III {
  buffer X = match_buffer(x, [n], f32)
  for i in serial(n + d) {
    X[i] = 1.0
  }
}
"#;

fn flat_args(n: usize, d: i64) -> Args {
    let mut args = Args::new();
    args.array("x", Array::F32(vec![0.0; n])).int("n", n as i64).int("d", d);
    args
}

#[test]
fn out_of_range_index() {
    let err = run(&parse(FLAT), &flat_args(4, 1)).unwrap_err();
    match &err {
        InterpError::IndexOutOfRange { buffer, dim, index, extent, .. } => {
            assert_eq!((buffer.as_str(), *dim, *index, *extent), ("X", 0, 4, 4));
        }
        e => panic!("unexpected error {e}"),
    }
    assert_eq!(line_of(FLAT, err.span()), line_containing(FLAT, "X[i] = 1.0"));
    assert_eq!(err.to_string(), "index 4 of dimension 0 of `X` is outside 0..4");
    // In range is fine.
    assert!(run(&parse(FLAT), &flat_args(4, 0)).is_ok());
}

const CSR_HEADER: &str = r#"
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz, indptr, indices)
  axis J_detach = dense_fixed(n)
  buffer A = match_sparse_buffer(a, [I, J], f32)
"#;

fn csr_func(body: &str) -> String {
    format!("func f(a: handle, indptr: handle, indices: handle, m: i32, n: i32, nnz: i32) {{{CSR_HEADER}{body}}}")
}

fn csr_args() -> Args {
    // [[1, 0, 2], [0, 0, 0], [0, 3, 0]]
    let mut args = Args::new();
    args.array("a", Array::F32(vec![1.0, 2.0, 3.0]))
        .array("indptr", Array::I32(vec![0, 2, 2, 3]))
        .array("indices", Array::I32(vec![0, 2, 1]))
        .int("m", 3)
        .int("n", 3)
        .int("nnz", 3);
    args
}

#[test]
fn store_to_an_absent_coordinate() {
    // A constant coordinate: row 0 stores columns 0 and 2, not 1.
    let src = csr_func(
        r#"
  sp_iter s([I], "S") as [i] {
    A[i, 1] = A[i, 1] + 1.0
  }
"#,
    );
    let err = run(&parse(&src), &csr_args()).unwrap_err();
    assert_eq!(err, InterpError::AbsentStore { buffer: "A".into(), coords: vec![0, 1], span: err.span() });
    assert_eq!(line_of(&src, err.span()), line_containing(&src, "A[i, 1] = "));
    assert!(err.to_string().contains("outside the sparsity structure"), "{err}");
    // An iterator over another axis as the coordinate is refused before anything runs.
    let src = csr_func(
        r#"
  sp_iter s([I, J_detach], "SS") as [i, j] {
    A[i, j] = A[i, j] + 1.0
  }
"#,
    );
    let err = run(&parse(&src), &csr_args()).unwrap_err();
    assert!(err.to_string().contains("an iterator over `J_detach`, as its coordinate in `J`, which may not store it"), "{err}");
}

#[test]
fn stage1_dense_coordinate_out_of_range() {
    let src = csr_func(
        r#"
  buffer Y = match_sparse_buffer(a, [J_detach], f32)
  sp_iter s([I, J], "RS") as [i, j] {
    Y[j + 1] = 0.0
  }
"#,
    );
    let err = run(&parse(&src), &csr_args()).unwrap_err();
    assert!(matches!(err, InterpError::IndexOutOfRange { index: 3, extent: 3, .. }), "{err}");
}

#[test]
fn missing_arguments() {
    let src = csr_func("");
    let mut args = csr_args();
    args.arrays.shift_remove("a");
    let err = run(&parse(&src), &args).unwrap_err();
    assert!(matches!(err, InterpError::MissingArray { ref param, .. } if param == "a"), "{err}");

    let mut args = csr_args();
    args.scalars.shift_remove("m");
    let err = run(&parse(&src), &args).unwrap_err();
    assert!(matches!(err, InterpError::MissingScalar { ref param, .. } if param == "m"), "{err}");
    assert_eq!(err.to_string(), "missing value for scalar parameter `m`");

    let mut args = csr_args();
    args.arrays.shift_remove("indptr");
    let err = run(&parse(&src), &args).unwrap_err();
    assert!(matches!(err, InterpError::MissingArray { ref param, .. } if param == "indptr"), "{err}");
}

#[test]
fn wrong_dtypes() {
    let src = csr_func("");
    let mut args = csr_args();
    args.array("a", Array::F64(vec![1.0, 2.0, 3.0]));
    let err = run(&parse(&src), &args).unwrap_err();
    assert!(
        matches!(err, InterpError::ArrayDType { ref param, ref expected, found: DType::F64, .. } if param == "a" && expected == "f32"),
        "{err}"
    );

    let mut args = csr_args();
    args.array("indices", Array::F32(vec![0.0, 2.0, 1.0]));
    let err = run(&parse(&src), &args).unwrap_err();
    assert!(matches!(err, InterpError::ArrayDType { ref param, ref expected, .. } if param == "indices" && expected == "i32 or i64"), "{err}");

    let mut args = csr_args();
    args.float("m", 3.0);
    let err = run(&parse(&src), &args).unwrap_err();
    assert!(matches!(err, InterpError::BadScalar { ref param, .. } if param == "m"), "{err}");

    let mut args = csr_args();
    args.int("m", 1 << 40);
    let err = run(&parse(&src), &args).unwrap_err();
    assert!(matches!(err, InterpError::BadScalar { ref param, .. } if param == "m"), "{err}");

    // Operands of different types.
    let src = "func f(x: handle) stage III {\n  buffer X = match_buffer(x, [1], f32)\n  X[0] = 1.0 + 1.0f64\n}";
    let mut args = Args::new();
    args.array("x", Array::F32(vec![0.0]));
    // The interpreter verifies what it runs: an ill-typed program is refused where the
    // verifier points, before anything runs.
    let err = run(&parse(src), &args).unwrap_err();
    assert!(matches!(err, InterpError::Invalid { .. }) && err.to_string().contains("different types"), "{err}");
    assert_eq!(line_of(src, err.span()), 3);
    // Storing a value of another type.
    let src = "func f(x: handle) stage III {\n  buffer X = match_buffer(x, [1], f32)\n  X[0] = 1.0f64\n}";
    let err = run(&parse(src), &args).unwrap_err();
    assert!(matches!(err, InterpError::Invalid { .. }), "{err}");
}

#[test]
fn too_short_arrays() {
    let src = csr_func("");
    let mut args = csr_args();
    args.array("a", Array::F32(vec![1.0, 2.0]));
    let err = run(&parse(&src), &args).unwrap_err();
    assert!(
        matches!(err, InterpError::ArrayTooShort { ref param, ref buffer, len: 2, needed: 3, .. } if param == "a" && buffer == "A"),
        "{err}"
    );
    let err = run(&parse(FLAT), &{
        let mut a = flat_args(4, 0);
        a.int("n", 5);
        a
    })
    .unwrap_err();
    assert!(matches!(err, InterpError::ArrayTooShort { len: 4, needed: 5, .. }), "{err}");
}

#[test]
fn malformed_indptr() {
    let src = csr_func(
        r#"
  sp_iter s([I, J], "SS") as [i, j] {
    A[i, j] = 0.0
  }
"#,
    );
    let mut args = csr_args();
    args.array("indptr", Array::I32(vec![0, 2, 1, 3]));
    let err = run(&parse(&src), &args).unwrap_err();
    assert!(matches!(err, InterpError::MalformedIndptr { ref axis, .. } if axis == "J"), "{err}");

    let mut args = csr_args();
    args.array("indptr", Array::I32(vec![0, 2, 2]));
    let err = run(&parse(&src), &args).unwrap_err();
    assert!(matches!(err, InterpError::AxisArrayOutOfBounds { ref param, index: 3, len: 3, .. } if param == "indptr"), "{err}");

    // indptr disagreeing with the declared nnz.
    let mut args = csr_args();
    args.array("indptr", Array::I32(vec![0, 2, 2, 5])).array("a", Array::F32(vec![0.0; 5]));
    let err = run(&parse(&src), &args).unwrap_err();
    assert!(
        matches!(err, InterpError::Invalid { ref message, .. } if message.contains("declares nnz = 3 but its indptr ends at 5")),
        "{err}"
    );

    // A row pointing past the end of `indices`.
    args.int("nnz", 5);
    let err = run(&parse(&src), &args).unwrap_err();
    assert!(matches!(err, InterpError::AxisArrayOutOfBounds { role: "indices", index: 3, .. }), "{err}");
}

#[test]
fn parent_not_iterated() {
    let src = csr_func(
        r#"
  sp_iter s([J], "S") as [j] {
    A[0, j] = 0.0
  }
"#,
    );
    // Refused by the verifier, which the interpreter runs first.
    let err = run(&parse(&src), &csr_args()).unwrap_err();
    assert!(matches!(err, InterpError::Invalid { .. }), "{err}");
    assert!(err.to_string().contains("iterates axis `J` but no iterator over its parent `I`"), "{err}");
    assert_eq!(line_of(&src, err.span()), line_containing(&src, "sp_iter s([J]"));
}

#[test]
fn block_binding_out_of_range() {
    let src = r#"
func f(x: handle, n: i32) stage III {
  buffer X = match_buffer(x, [n], f32)
  for i in serial(n) {
    block b(vi: spatial(n) = i + 2) {
      X[vi] = 1.0
    }
  }
}
"#;
    let mut args = Args::new();
    args.array("x", Array::F32(vec![0.0; 4])).int("n", 4);
    let err = run(&parse(src), &args).unwrap_err();
    assert!(matches!(err, InterpError::BindingOutOfRange { value: 4, extent: 4, .. }), "{err}");
    assert_eq!(line_of(src, err.span()), line_containing(src, "block b("));
}

#[test]
fn division_by_zero() {
    for op in ["/", "//", "%"] {
        let src = format!(
            "func f(x: handle, n: i32, d: i32) stage III {{\n  buffer X = match_buffer(x, [1], i32)\n  X[0] = n {op} d\n}}"
        );
        let mut args = Args::new();
        args.array("x", Array::I32(vec![0])).int("n", 7).int("d", 0);
        let err = run(&parse(&src), &args).unwrap_err();
        assert!(matches!(err, InterpError::DivisionByZero { .. }), "{err}");
        assert_eq!(line_of(&src, err.span()), 3);
    }
}

#[test]
fn fuel_runs_out() {
    let src = r#"
func f(x: handle) stage III {
  buffer X = match_buffer(x, [1], i32)
  while X[0] >= 0 {
    X[0] = X[0] + 1
  }
}
"#;
    let mut args = Args::new();
    args.array("x", Array::I32(vec![0]));
    let err = run_with(&parse(src), &args, &Options { max_steps: 1000, ..Default::default() }).unwrap_err();
    assert_eq!(err, InterpError::FuelExhausted { max_steps: 1000, span: err.span() });
    assert_eq!(line_of(src, err.span()), line_containing(src, "while"));

    // Loops count too.
    let err = run_with(&parse(FLAT), &flat_args(4, 0), &Options { max_steps: 3, ..Default::default() }).unwrap_err();
    assert!(matches!(err, InterpError::FuelExhausted { max_steps: 3, .. }), "{err}");
    assert!(run_with(&parse(FLAT), &flat_args(4, 0), &Options { max_steps: 4, ..Default::default() }).is_ok());
}

#[test]
fn select_evaluates_both_arms_but_logic_short_circuits() {
    let src = r#"
func f(x: handle, n: i32) stage III {
  buffer X = match_buffer(x, [n], f32)
  if n < 0 && X[n] > 0.0 {
    X[0] = 1.0
  }
  if n > 0 || X[n] > 0.0 {
    X[0] = 2.0
  }
  X[1] = select(n > 0, 3.0, X[n])
}
"#;
    let mut args = Args::new();
    args.array("x", Array::F32(vec![0.0; 2])).int("n", 2);
    let err = run(&parse(src), &args).unwrap_err();
    assert!(matches!(err, InterpError::IndexOutOfRange { index: 2, .. }), "{err}");
    assert_eq!(line_of(src, err.span()), line_containing(src, "select"));
}
