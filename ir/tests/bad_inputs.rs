//! Malformed `.sptir` inputs and the full diagnostics they produce (`file:line:col: message`,
//! the source line and a caret), snapshotted. Syntax and name errors come from the parser,
//! the rest from the verifier.

use sparsec_ir::text::{parse, MAX_NESTING};
use sparsec_ir::verify::{render_errors, verify_module};
use sparsec_ir::SourceFile;

/// The diagnostic for `src`: the parse error, or every verifier error.
fn diagnose(name: &str, src: &str) -> String {
    let file = format!("{name}.sptir");
    match parse(&file, src) {
        Err(e) => format!("{e}\n"),
        Ok(m) => match verify_module(&m) {
            Ok(()) => panic!("{name}: expected an error, but the input is valid"),
            Err(errors) => render_errors(&errors, &SourceFile::new(&file, src)),
        },
    }
}

/// One snapshot test per input.
macro_rules! bad_inputs {
    ($($name:ident: $src:expr;)*) => {
        $(
            #[test]
            fn $name() {
                insta::assert_snapshot!(stringify!($name), diagnose(stringify!($name), &$src));
            }
        )*
    };
}

/// A valid CSR SpMM with `BODY` standing for the sparse iteration.
const CSR: &str = "func csrmm(a: handle, b: handle, c: handle, indptr: handle, indices: handle, m: i32, n: i32, feat: i32, nnz: i32) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz, indptr, indices)
  axis J_detach = dense_fixed(n)
  axis K = dense_fixed(feat)
  buffer A = match_sparse_buffer(a, [I, J], f32)
  buffer B = match_sparse_buffer(b, [J_detach, K], f32)
  buffer C = match_sparse_buffer(c, [I, K], f32)
BODY
}
";

fn csr(body: &str) -> String {
    CSR.replace("BODY", body)
}

fn deep_parens() -> String {
    let n = MAX_NESTING + 10;
    format!("func f(x: i32) {{\n  let y = {}x{}\n}}\n", "(".repeat(n), ")".repeat(n))
}

fn deep_prefix() -> String {
    format!("func f(x: i32) {{\n  let y = {}x\n}}\n", "-".repeat(MAX_NESTING + 10))
}

fn deep_blocks() -> String {
    let n = MAX_NESTING + 10;
    format!("func f() stage II {{\n{}{}\n}}\n", "if true {".repeat(n), "}".repeat(n))
}

bad_inputs! {
    // ---- syntax ---------------------------------------------------------------------------
    missing_closing_brace: "func f(m: i32) {\n  axis I = dense_fixed(m)\n";
    missing_sp_iter_brace: csr("  sp_iter s([I], \"S\") as [i]\n    C[i, 0] = 0.0\n  }");
    bad_token: "func f(x: i32) {\n  let y = x $ 2\n}\n";
    garbage_at_top_level: "hello world\n";
    missing_as_clause: csr("  sp_iter s([I], \"S\") {\n  }");
    missing_comma_in_params: "func f(a: handle b: handle) {\n}\n";
    unterminated_string: "func f() {\n  sp_iter \"csrmm([I], S) as [i] {\n  }\n}\n";
    bad_stage: "func f() stage IV {\n}\n";
    bad_loop_kind: "func f() stage II {\n  for i in threadIdx.w(4) {\n  }\n}\n";
    keyword_as_name: "func f() stage II {\n  let for = 1\n}\n";
    deep_paren_nesting: deep_parens();
    deep_prefix_operators: deep_prefix();
    deep_statement_nesting: deep_blocks();

    // ---- forms and names (parser) ---------------------------------------------------------
    unknown_axis_kind: "func f(m: i32) {\n  axis I = dense_fixd(m)\n}\n";
    unknown_buffer_kind: "func f(a: handle) {\n  buffer A = match_dense_buffer(a, [4], f32)\n}\n";
    axis_wrong_arg_count: "func f(indptr: handle, m: i32, n: i32, nnz: i32) {\n  axis I = dense_fixed(m)\n  axis J = sparse_variable(I, n, nnz, indptr)\n}\n";
    call_wrong_arg_count: "func f(x: f32) stage II {\n  let y = exp(x, 2.0)\n}\n";
    positional_after_keyword: "func f(m: i32) {\n  axis I = dense_fixed(idtype = i64, m)\n}\n";
    unknown_keyword_argument: "func f(m: i32) {\n  axis I = dense_fixed(m, sorted_ = true)\n}\n";
    unknown_axis: csr("  sp_iter s([I, Q], \"SS\") as [i, q] {\n  }");
    unknown_variable: csr("  sp_iter s([I, K], \"SS\") as [i, k] {\n    C[i, q] = 0.0\n  }");
    unknown_buffer: csr("  sp_iter s([I], \"S\") as [i] {\n    D[i] = 0.0\n  }");
    buffer_used_as_value: csr("  sp_iter s([I, K], \"SS\") as [i, k] {\n    C[i, k] = A\n  }");
    unknown_function: "func f(x: f32) stage II {\n  let y = softplus(x)\n}\n";
    bad_dtype: "func f(a: handle) {\n  buffer A = match_buffer(a, [4], f33)\n}\n";
    bad_param_type: "func f(a: ptr) {\n}\n";
    scalar_as_handle: "func f(a: i32) {\n  buffer A = match_buffer(a, [4], f32)\n}\n";
    duplicate_parameter: "func f(a: handle, a: i32) {\n}\n";
    duplicate_function: "func f() {\n}\nfunc f() {\n}\n";
    duplicate_axis: "func f(m: i32) {\n  axis I = dense_fixed(m)\n  axis I = dense_fixed(m)\n}\n";
    iterator_bound_twice: csr("  sp_iter s([I, K], \"SS\") as [i, i] {\n  }");
    iterator_count_mismatch: csr("  sp_iter s([fuse(I, J), K], \"SS\") as [i, k] {\n  }");
    int_literal_too_big: "func f() stage II {\n  let x = 99999999999\n}\n";
    axis_inside_statement: "func f() stage II {\n  if true {\n    axis I = dense_fixed(4)\n  }\n}\n";
    match_buffer_inside_statement: "func f(a: handle) stage II {\n  if true {\n    buffer A = match_buffer(a, [4], f32)\n  }\n}\n";
    atomic_add_of_a_value: "func f(x: f32) stage II {\n  atomic_add(x, 1.0)\n}\n";

    // ---- verifier -------------------------------------------------------------------------
    kind_string_too_short: csr("  sp_iter csrmm([I, J, K], \"SR\") as [i, j, k] {\n    C[i, k] = C[i, k] + A[i, j] * B[j, k]\n  }");
    kind_string_bad_letter: csr("  sp_iter s([I, K], \"SX\") as [i, k] {\n    C[i, k] = 0.0\n  }");
    reduction_writes_by_reduction_index: csr("  sp_iter s([I, J], \"SR\") as [i, j] {\n    C[i, j] = A[i, j]\n  }");
    parent_not_iterated: csr("  sp_iter s([J], \"S\") as [j] {\n  }");
    spatial_below_reduction: csr("  sp_iter s([I, J], \"RS\") as [i, j] {\n    init {\n      C[j, 0] = 0.0\n    }\n    C[j, 0] = C[j, 0] + A[i, j]\n  }");
    fuse_not_a_chain: csr("  sp_iter s([fuse(I, K)], \"SS\") as [i, k] {\n    C[i, k] = 0.0\n  }");
    attach_without_dense_parent: csr("  sp_iter s([I, J, attach(J_detach, J)], \"SRR\") as [i, j, jd] {\n  }");
    storage_rule_violated: "func f(a: handle, indptr: handle, indices: handle, m: i32, n: i32, nnz: i32) {\n  axis I = dense_fixed(m)\n  axis J = sparse_variable(I, n, nnz, indptr, indices)\n  buffer A = match_sparse_buffer(a, [J, I], f32)\n}\n";
    axis_length_not_int: "func f(len: f32) {\n  axis I = dense_fixed(len)\n}\n";
    store_type_mismatch: csr("  sp_iter s([I, K], \"SS\") as [i, k] {\n    C[i, k] = 1\n  }");
    index_count_mismatch: csr("  sp_iter s([I, K], \"SR\") as [i, k] {\n    C[i] = 0.0\n  }");
    operand_type_mismatch: "func f(x: i32, y: i64) stage II {\n  let z = x + y\n}\n";
    condition_not_bool: "func f(x: i32) stage II {\n  if x {\n  }\n}\n";
    shadowed_parameter: csr("  sp_iter s([I], \"S\") as [m] {\n  }");
    loop_at_stage_one: "func f(m: i32) {\n  for i in serial(m) {\n  }\n}\n";
    sp_iter_at_stage_two: "func f(m: i32) stage II {\n  axis I = dense_fixed(m)\n  sp_iter s([I], \"S\") as [i] {\n  }\n}\n";
    sparse_buffer_at_stage_three: "func f(a: handle, m: i32) stage III {\n  axis I = dense_fixed(m)\n  buffer A = match_sparse_buffer(a, [I], f32)\n}\n";
    allocation_used_outside_its_list: "func f() stage II {\n  if true {\n    buffer t = alloc_buffer([4], f32, local)\n  }\n  t[0] = 1.0\n}\n";
    let_type_mismatch: "func f() stage II {\n  let x: i64 = 1\n}\n";
    // ---- kinds are checked against the body ------------------------------------------------
    // csrmm with `j` declared spatial: the store reduces over it.
    reduction_declared_spatial: csr("  sp_iter csrmm([I, J, K], \"SSS\") as [i, j, k] {\n    init {\n      C[i, k] = 0.0\n    }\n    C[i, k] = C[i, k] + A[i, j] * B[j, k]\n  }");
    // A plain store that overwrites one element for every `j` reduces over `j` too.
    overwrite_declared_spatial: csr("  sp_iter s([I, J], \"SS\") as [i, j] {\n    C[i, 0] = A[i, j]\n  }");
    init_reads_reduction: csr("  sp_iter s([I, J, K], \"SRS\") as [i, j, k] {\n    init {\n      C[i, k] = A[i, j]\n    }\n    C[i, k] = C[i, k] + A[i, j]\n  }");
    // Each point reads its neighbour's element: the points are not independent.
    dependent_spatial_points: csr("  sp_iter s([I, K], \"SS\") as [i, k] {\n    C[i, k] = C[i + 1, k] + 1.0\n  }");
    indptr_read_as_float: CSR.replace("BODY", "").replace("  buffer C =", "  buffer P = match_buffer(indptr, [m], f32)\n  buffer C =");
    three_faults_three_errors: csr("  sp_iter s([I, J, K], \"SRS\") as [i, j, k] {\n    init {\n      C[i, j] = 0\n    }\n    C[i, k] = C[i, k] + exp(A[i, 0])\n  }\n  for t in serial(4) {\n  }");
}
