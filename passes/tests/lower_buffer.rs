//! `lower_sparse_buffer` on hand-written Stage-II input.

use sparsec_ir::text::parse_func;
use sparsec_ir::verify::verify_func;
use sparsec_passes::lower_sparse_buffer;

/// The pass adds `J_indptr` for a dense_variable axis its input never indexed: offsets through
/// it are typed in the output (fuzz seed 61483 built `i32 * f32` from another buffer's dtype).
#[test]
fn offsets_through_added_indptr_are_typed_in_the_output() {
    let f = parse_func(
        "dv",
        "func dv(b: handle, y: handle, indptr: handle, m: i32, n: i32, f: i32, nnz: i32) stage II {
  axis I = dense_fixed(m)
  axis J = dense_variable(I, n, nnz, indptr)
  axis K = dense_fixed(f)
  buffer B = match_sparse_buffer(b, [I, J, K], i32)
  buffer Y = match_sparse_buffer(y, [I, K], f32)
  for i in serial(m) {
    for k in serial(f) {
      block it(vi: spatial(m) = i, vk: spatial(f) = k) {
        reads(B[vi, 0, vk])
        writes(Y[vi, vk])
        Y[vi, vk] = cast(f32, B[vi, 0, vk])
      }
    }
  }
}",
    )
    .unwrap();
    let g = lower_sparse_buffer(&f).unwrap();
    assert_eq!(verify_func(&g), Ok(()));
}
