//! `ir::args`: what compiled code may run is proven in range before it runs.

use sparsec_ir::args::{check_accesses, check_structure, ArgsError};
use sparsec_ir::data::{Args, Array};
use sparsec_ir::text::parse_func;

/// A CSR row-gather program with `BODY` as the sparse iteration's body; matrix 2×4 with rows
/// {1, 3} and {0}.
fn run(body: &str, extra: &[(&str, Array)]) -> Result<(), ArgsError> {
    let src = "func f(a: handle, b: handle, c: handle, d: handle, t: handle, indptr: handle, indices: handle, m: i32, n: i32, nnz: i32) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz, indptr, indices)
  axis N = dense_fixed(n)
  axis M = dense_fixed(m)
  buffer A = match_sparse_buffer(a, [I, J], f32)
  buffer B = match_sparse_buffer(b, [N], f32)
  buffer C = match_sparse_buffer(c, [M], f32)
  buffer D = match_sparse_buffer(d, [M], f32)
  buffer T = match_sparse_buffer(t, [I], i32)
  sp_iter s([I, J], \"SR\") as [i, j] {
BODY
  }
}
"
    .replace("BODY", body);
    let f = parse_func("t.sptir", &src).unwrap_or_else(|e| panic!("{e}"));
    sparsec_ir::verify::verify_func(&f).unwrap_or_else(|e| panic!("{e:?}"));
    let mut args = Args::new();
    args.array("a", Array::F32(vec![1.0; 3]))
        .array("b", Array::F32(vec![0.0; 4]))
        .array("c", Array::F32(vec![0.0; 2]))
        .array("d", Array::F32(vec![0.0; 2]))
        .array("t", Array::I32(vec![1, 5]))
        .array("indptr", Array::I32(vec![0, 2, 3]))
        .array("indices", Array::I32(vec![1, 3, 0]));
    for (name, a) in extra {
        args.array(*name, a.clone());
    }
    args.int("m", 2).int("n", 4).int("nnz", 3);
    check_structure(&f, &args)?;
    check_accesses(&f, &args)
}

fn refused(r: Result<(), ArgsError>, needle: &str) {
    match r {
        Err(e) => assert!(e.to_string().contains(needle), "{e}"),
        Ok(()) => panic!("expected a refusal containing {needle:?}"),
    }
}

#[test]
fn iterators_index_dimensions_at_least_as_long() {
    run("    C[i] = C[i] + A[i, j] * B[j]", &[]).unwrap();
    // Column coordinates (up to n - 1 = 3) do not fit C's m = 2 rows.
    refused(run("    C[i] = C[i] + B[j] * D[j]", &[]), "index 0 of buffer `D` takes values in 0..=3 but the dimension has extent 2");
}

#[test]
fn index_arithmetic_is_bounded_by_intervals() {
    run("    C[i] = C[i] + B[j // 2 + i]", &[]).unwrap();
    refused(run("    C[i] = C[i] + B[j - 1]", &[]), "takes values in -1..=2");
    refused(run("    C[i] = C[i] + B[j * 2]", &[]), "takes values in 0..=6");
}

#[test]
fn guards_narrow_the_range() {
    // Only j < 2 reaches the access C[j].
    run("    if j < m {\n      C[i] = C[i] + D[j]\n    }", &[]).unwrap();
    refused(run("    if j <= m {\n      C[i] = C[i] + D[j]\n    }", &[]), "takes values in 0..=2");
}

#[test]
fn gathered_indices_range_over_the_input_values() {
    // T holds 1 and 5: B has 4 elements.
    refused(run("    C[i] = C[i] + B[T[i]]", &[]), "takes values in 1..=5");
    run("    C[i] = C[i] + B[T[i]]", &[("t", Array::I32(vec![1, 3]))]).unwrap();
    // Written buffers are not trusted as indices.
    refused(run("    T[i] = 7\n    C[i] = C[i] + B[T[i]]", &[("t", Array::I32(vec![1, 3]))]), "cannot be bounded");
}

#[test]
fn a_select_ranges_over_both_values() {
    // 2:4's column: either the low or the high half of a metadata word (T holds 1 and 5).
    run("    C[i] = C[i] + B[select(j == 1, T[i] % 4, T[i] // 4)]", &[]).unwrap();
    run("    C[i] = C[i] + B[select(j == 1, 0, 3)]", &[]).unwrap();
    refused(run("    C[i] = C[i] + B[select(j == 1, T[i], 0)]", &[]), "takes values in 0..=5");
}

#[test]
fn integer_divisors_must_not_be_zero() {
    refused(run("    C[i] = C[i] + B[j % (n - n)]", &[]), "divisor of this statement may be 0");
    run("    C[i] = C[i] + B[j % n]", &[]).unwrap();
}

#[test]
fn coordinates_outside_their_axis_are_refused() {
    refused(run("    C[i] = C[i] + B[j]", &[("indices", Array::I32(vec![1, 4, 0]))]), "coordinate 4 at position 1 is outside 0..4");
    refused(run("    C[i] = C[i] + B[j]", &[("indptr", Array::I32(vec![0, 3, 2]))]), "row pointers decrease");
}

#[test]
fn iterations_without_points_are_not_checked() {
    // m = 0 rows: the gather through the empty T never runs.
    let src = "func f(b: handle, c: handle, t: handle, m: i32, n: i32) {
  axis I = dense_fixed(m)
  axis N = dense_fixed(n)
  buffer B = match_sparse_buffer(b, [N], f32)
  buffer C = match_sparse_buffer(c, [I], f32)
  buffer T = match_sparse_buffer(t, [I], i32)
  sp_iter s([I], \"S\") as [i] {
    C[i] = B[T[i]]
  }
}
";
    let f = parse_func("t.sptir", src).unwrap();
    let mut args = Args::new();
    args.array("b", Array::F32(vec![0.0; 4])).array("c", Array::F32(vec![])).array("t", Array::I32(vec![]));
    args.int("m", 0).int("n", 4);
    check_accesses(&f, &args).unwrap();
    args.int("m", 1).array("t", Array::I32(vec![9])).array("c", Array::F32(vec![0.0]));
    refused(check_accesses(&f, &args), "takes values in 9..=9");
}

/// Without reduction steps the init still runs once per spatial point (fuzz seed 7000839:
/// `1 // k` at k = 0 over zero rows ran unchecked on mlir-cpu).
#[test]
fn an_empty_reduction_still_runs_the_init() {
    let src = "func f(u: handle, m: i32, k: i32) {
  axis K = dense_fixed(k)
  axis I = dense_fixed(m)
  buffer U = match_sparse_buffer(u, [K], i32)
  sp_iter s([K, I], \"SR\") as [kk, i] {
    init {
      U[kk] = 1 // kk
    }
    U[kk] = U[kk] + i
  }
}
";
    let f = parse_func("t.sptir", src).unwrap();
    sparsec_ir::verify::verify_func(&f).unwrap_or_else(|e| panic!("{e:?}"));
    let mut args = Args::new();
    args.array("u", Array::I32(vec![0; 2])).int("m", 0).int("k", 2);
    refused(check_accesses(&f, &args), "divisor");
    // No spatial point: nothing runs.
    args.array("u", Array::I32(vec![])).int("k", 0);
    check_accesses(&f, &args).unwrap();
}

/// Hand-written Stage III: loop variables and block iterators are bounded by their loops, so
/// flat indices are proven without `--checked`; an index one below is refused.
#[test]
fn loops_and_blocks_bound_their_variables() {
    let src = |idx: &str| {
        format!(
            "func f(b: handle, c: handle, m: i32, n: i32) stage III {{
  buffer B = match_buffer(b, [m * n], f32)
  buffer C = match_buffer(c, [m], f32)
  for i in serial(m) {{
    for k in serial(n) {{
      block s(vi: spatial(m) = i, vk: reduce(n) = k) {{
        C[vi] = C[vi] + B[{idx}]
      }}
    }}
  }}
}}
"
        )
    };
    let mut args = Args::new();
    args.array("b", Array::F32(vec![0.0; 6])).array("c", Array::F32(vec![0.0; 2])).int("m", 2).int("n", 3);
    let ok = parse_func("t.sptir", &src("vi * n + vk")).unwrap();
    check_accesses(&ok, &args).unwrap();
    let below = parse_func("t.sptir", &src("vi * n + vk - 1")).unwrap();
    refused(check_accesses(&below, &args), "takes values in -1..=4");
}

/// A hand-written `while` cannot be bounded: compiled code would run it uncounted.
#[test]
fn while_loops_are_refused() {
    let f = parse_func(
        "w.sptir",
        "func w(b: handle) stage III {
  buffer B = match_buffer(b, [2], f32)
  while B[0] < 1.0 {
    B[1] = B[1] + 1.0
  }
}
",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut args = Args::new();
    args.array("b", Array::F32(vec![0.0; 2]));
    match check_accesses(&f, &args) {
        Err(ArgsError::Access { message, .. }) => assert!(message.contains("`while`"), "{message}"),
        other => panic!("{other:?}"),
    }
}

/// `Func::row_length_bound`: `P[x + 1] - P[x]` over the row pointer of a sorted
/// sparse-variable axis (or a dense-variable one) is at most the axis length, because
/// `check_structure` refuses a row that would hold more; an unsorted axis may repeat
/// coordinates, so it gives no bound.
#[test]
fn rows_of_sorted_and_dense_variable_axes_are_bounded_by_their_length() {
    let text = |sorted: &str, kind: &str| {
        format!(
            "func f(p: handle, q: handle, r: handle, m: i32, n: i32, nnz: i32) stage III {{
  axis I = dense_fixed(m)
  axis J = {kind}
  buffer P = match_buffer(p, [m + 1], i32)
  for i in serial(m) {{
    for j in serial(P[i + 1] - P[i]) {{
    }}
  }}
}}
"
        )
        .replace("SORTED", sorted)
    };
    let sparse = "sparse_variable(I, n, nnz, p, q SORTED)";
    let extent = |f: &sparsec_ir::Func| match &f.body[0].kind {
        sparsec_ir::StmtKind::For(l) => match &l.body[0].kind {
            sparsec_ir::StmtKind::For(j) => j.extent.clone(),
            _ => unreachable!(),
        },
        _ => unreachable!(),
    };
    for (kind, sorted, bounded) in [(sparse, "", true), (sparse, ", sorted = false", false), ("dense_variable(I, n, nnz, p)", "", true)] {
        let f = parse_func("t.sptir", &text(sorted, kind)).unwrap_or_else(|e| panic!("{e}"));
        let bound = f.row_length_bound(&extent(&f)).map(|e| sparsec_ir::text::print_expr(&f, e));
        assert_eq!(bound.as_deref(), bounded.then_some("n"), "{kind} {sorted}");
    }
    // The fact rests on the structure check: a sorted row that repeats a coordinate (and so
    // could hold more than `n` entries) is refused.
    let e = run("    C[i] = C[i] + A[i, j]", &[("indices", Array::I32(vec![1, 1, 0]))]).unwrap_err();
    assert!(e.to_string().contains("not sorted without duplicates"), "{e}");
}

/// A root sparse axis stores a set of coordinates: a repeated one (sorted or not), or an
/// unsorted list under the default `sorted`, is refused before anything runs; distinct ones
/// in any order pass with `sorted = false`.
#[test]
fn root_sparse_axes_store_distinct_coordinates() {
    let check = |decl: &str, rows: Vec<i32>| {
        let src = format!(
            "func f(a: handle, rows: handle, m: i32, k: i32) {{\n  axis I = {decl}\n  buffer A = match_sparse_buffer(a, [I], f32)\n}}\n"
        );
        let f = parse_func("t.sptir", &src).unwrap_or_else(|e| panic!("{e}"));
        sparsec_ir::verify::verify_func(&f).unwrap_or_else(|e| panic!("{e:?}"));
        let mut args = Args::new();
        args.array("a", Array::F32(vec![1.0; rows.len()])).int("m", 8).int("k", rows.len() as i64);
        args.array("rows", Array::I32(rows));
        check_structure(&f, &args)
    };
    let sorted = "sparse_fixed(m, k, rows)";
    let unsorted = "sparse_fixed(m, k, rows, sorted = false)";
    assert!(check(sorted, vec![0, 3, 7]).is_ok());
    refused(check(sorted, vec![0, 3, 3]), "coordinates of root axis `I` are not sorted without duplicates (3 then 3 at position 2)");
    refused(check(sorted, vec![3, 0]), "(3 then 0 at position 1)");
    assert!(check(unsorted, vec![3, 0, 7]).is_ok());
    refused(check(unsorted, vec![3, 0, 3]), "coordinate 3 of root axis `I` is stored twice");
    refused(check(sorted, vec![0, 8]), "coordinate 8 at position 1 is outside 0..8");
}
