//! `lower_atomic`: which accumulations become atomic, golden text, and unchanged numbers.

use sparsec_interp::run;
use sparsec_ir::data::{Args, Array};
use sparsec_ir::text::{parse_func, print_func};
use sparsec_passes::lower_atomic;

/// Column sums of a CSR matrix, one GPU block per row: rows scatter into shared columns.
const COLSUM: &str = r#"func colsum(a: handle, b: handle, indptr: handle, indices: handle, m: i32, n: i32, nnz: i32) stage III {
  buffer A = match_buffer(a, [nnz], f32)
  buffer B = match_buffer(b, [n], f32)
  buffer J_indptr = match_buffer(indptr, [m + 1], i32)
  buffer J_indices = match_buffer(indices, [nnz], i32)
  for i in blockIdx.x(m) {
    for j in serial(J_indptr[i + 1] - J_indptr[i]) {
      block colsum(vi: spatial(m) = i, vj: reduce(nnz) = J_indptr[i] + j) ATTRS{
        B[J_indices[vj]] = B[J_indices[vj]] + A[vj]
      }
    }
  }
}
"#;

/// Row sums where each thread of a row's block adds one partial: every thread updates the
/// same element, which the pass proves.
const ROWSUM_SPLIT: &str = r#"func rowsum(a: handle, b: handle, m: i32, k: i32) stage III {
  buffer A = match_buffer(a, [m * 32 * k], f32)
  buffer B = match_buffer(b, [m], f32)
  for i in blockIdx.x(m) {
    for t in threadIdx.x(32) {
      for r in serial(k) {
        block rowsum(vi: spatial(m) = i, vt: reduce(32) = t, vr: reduce(k) = r) {
          let row = vi
          B[row] = A[(vi * 32 + vt) * k + vr] + B[row]
        }
      }
    }
  }
}
"#;

fn colsum(attrs: &str) -> sparsec_ir::Func {
    parse_func("colsum", &COLSUM.replace("ATTRS", attrs)).unwrap()
}

fn csr_args() -> Args {
    // 4 × 3: [[1, 0, 2], [0, 3, 0], [], [4, 5, 6]]
    let mut a = Args::new();
    a.array("a", Array::F32(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]))
        .array("b", Array::F32(vec![0.0; 3]))
        .array("indptr", Array::I32(vec![0, 2, 3, 3, 6]))
        .array("indices", Array::I32(vec![0, 2, 1, 0, 1, 2]))
        .int("m", 4)
        .int("n", 3)
        .int("nnz", 6);
    a
}

#[test]
fn the_annotation_forces_atomics_through_indirection() {
    let plain = colsum("");
    // B[J_indices[vj]] may collide, but nothing proves it: left alone without the annotation.
    assert_eq!(print_func(&lower_atomic(&plain).unwrap()), print_func(&plain));
    let annotated = colsum("attrs(atomic = true) ");
    let lowered = lower_atomic(&annotated).unwrap();
    insta::assert_snapshot!("colsum_atomic", print_func(&lowered));
    sparsec_ir::verify::verify_func(&lowered).unwrap();
    let want = run(&annotated, &csr_args()).unwrap();
    let got = run(&lowered, &csr_args()).unwrap();
    assert_eq!(got.arrays["b"], Array::F32(vec![5.0, 8.0, 8.0]));
    assert_eq!(got.arrays["b"], want.arrays["b"]);
}

#[test]
fn proven_shared_updates_become_atomic() {
    let f = parse_func("rowsum", ROWSUM_SPLIT).unwrap();
    let lowered = lower_atomic(&f).unwrap();
    let text = print_func(&lowered);
    insta::assert_snapshot!("rowsum_atomic", text);
    assert!(text.contains("atomic_add(B[row], A[(vi * 32 + vt) * k + vr])"), "{text}");
    let mut args = Args::new();
    let a: Vec<f32> = (0..3 * 32 * 2).map(|x| (x % 7) as f32 - 3.0).collect();
    args.array("a", Array::F32(a)).array("b", Array::F32(vec![0.0; 3])).int("m", 3).int("k", 2);
    assert_eq!(run(&lowered, &args).unwrap().arrays["b"], run(&f, &args).unwrap().arrays["b"]);
}

#[test]
fn exclusive_writes_stay_plain() {
    // One row per block, features across threads: every (row, feature) has one writer.
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/workloads/csrmm.sptir")).unwrap();
    let f = parse_func("csrmm", &text).unwrap();
    let g = sparsec_passes::lower_sparse_iter(&f).unwrap();
    let bound = print_func(&g).replace("for i in serial(m)", "for i in blockIdx.x(m)");
    let g = parse_func("bound", &bound).unwrap();
    let h = lower_atomic(&g).unwrap();
    assert_eq!(print_func(&h), print_func(&g));
    assert!(!print_func(&h).contains("atomic_add"));
}

#[test]
fn stage_one_is_refused() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/workloads/csrmm.sptir")).unwrap();
    let f = parse_func("csrmm", &text).unwrap();
    assert!(matches!(lower_atomic(&f), Err(sparsec_passes::PassError::WrongStage { .. })));
}

#[test]
fn an_outer_block_annotation_covers_inner_blocks() {
    // The annotation sits on a block around the loop, as `annotate` on a sparse iteration
    // leaves it; the accumulation two levels down still becomes atomic.
    let text = r#"func outer(a: handle, b: handle, indptr: handle, indices: handle, m: i32, n: i32, nnz: i32) stage III {
  buffer A = match_buffer(a, [nnz], f32)
  buffer B = match_buffer(b, [n], f32)
  buffer J_indptr = match_buffer(indptr, [m + 1], i32)
  buffer J_indices = match_buffer(indices, [nnz], i32)
  for i in blockIdx.x(m) {
    block rows(vi: spatial(m) = i) attrs(atomic = true) {
      for j in serial(J_indptr[vi + 1] - J_indptr[vi]) {
        block cols(vj: reduce(nnz) = J_indptr[vi] + j) {
          B[J_indices[vj]] = B[J_indices[vj]] + A[vj]
        }
      }
    }
  }
}
"#;
    let f = parse_func("outer", text).unwrap();
    let lowered = print_func(&lower_atomic(&f).unwrap());
    assert!(lowered.contains("atomic_add(B[J_indices[vj]], A[vj])"), "{lowered}");
    let got = run(&parse_func("outer", &lowered).unwrap(), &csr_args()).unwrap();
    assert_eq!(got.arrays["b"], Array::F32(vec![5.0, 8.0, 8.0]));
}

/// `accumulates_only` over the body of the first top-level loop of `body` (a Stage-III
/// function over A[n] and B[n]).
fn only_accumulates(body: &str) -> bool {
    let text = format!(
        "func f(a: handle, b: handle, n: i32) stage III {{\n  buffer A = match_buffer(a, [n], f32)\n  buffer B = match_buffer(b, [n], f32)\n{body}}}\n"
    );
    let f = parse_func("f", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    sparsec_passes::accumulates_only(&f, &f.body)
}

#[test]
fn accumulation_only_nests_are_recognised() {
    let acc = "  for i in serial(n) {\n    B[(i * 7) % n] = B[(i * 7) % n] + A[i] * 2.0\n  }\n";
    assert!(only_accumulates(acc));
    let commuted = "  for i in serial(n) {\n    B[i] = A[i] + B[i]\n    atomic_add(B[0], A[i])\n  }\n";
    assert!(only_accumulates(commuted));
    // A plain store, a read of the output elsewhere, an output-dependent index, and an init
    // each make the order matter.
    for body in [
        "  for i in serial(n) {\n    B[i] = A[i]\n  }\n",
        "  for i in serial(n) {\n    B[i] = B[i] + B[0]\n  }\n",
        "  for i in serial(n) {\n    A[i] = A[i] + B[i]\n    B[i] = B[i] + 1.0\n  }\n",
        "  for i in serial(n) {\n    if B[0] > 0.0 {\n      B[i] = B[i] + 1.0\n    }\n  }\n",
        "  for i in serial(n) {\n    block s(vi: reduce(n) = i) {\n      init {\n        B[0] = 0.0\n      }\n      B[0] = B[0] + A[vi]\n    }\n  }\n",
    ] {
        assert!(!only_accumulates(body), "{body}");
    }
}
