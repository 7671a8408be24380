//! `horizontal_fusion`: independent kernels share one launch; dependent ones stay apart.

use sparsec_interp::run;
use sparsec_ir::data::{Args, Array};
use sparsec_ir::text::{parse_func, print_func};
use sparsec_passes::horizontal_fusion;

/// Two row reductions into different outputs, a third kernel that reads the first's output
/// (it must stay a separate launch), and two hyb-style buckets adding into the same output.
const KERNELS: &str = r#"func kernels(a: handle, b: handle, c: handle, d: handle, e: handle, m: i32, n: i32) stage III {
  buffer A = match_buffer(a, [m * 32], f32)
  buffer B = match_buffer(b, [m], f32)
  buffer C = match_buffer(c, [n * 16], f32)
  buffer D = match_buffer(d, [n], f32)
  buffer E = match_buffer(e, [n], f32)
  for i in blockIdx.x(m) {
    for t in threadIdx.x(32) {
      block k1(vi: spatial(m) = i, vt: reduce(32) = t) {
        atomic_add(B[vi], A[vi * 32 + vt])
      }
    }
  }
  for r in blockIdx.x(n) {
    for t in threadIdx.x(16) {
      block k2(vr: spatial(n) = r, vt: reduce(16) = t) {
        atomic_add(D[vr], C[vr * 16 + vt] * 2.0)
      }
    }
  }
  for r in blockIdx.x(n) {
    block k3(vr: spatial(n) = r) {
      E[vr] = D[vr] + B[0]
    }
  }
  for r in blockIdx.x(n) {
    for t in threadIdx.x(8) {
      block bucket1(vr: spatial(n) = r, vt: reduce(8) = t) {
        atomic_add(E[vr], C[vr * 16 + vt])
      }
    }
  }
  for r in blockIdx.x(n) {
    for t in threadIdx.x(8) {
      block bucket2(vr: spatial(n) = r, vt: reduce(8) = t) {
        atomic_add(E[vr], C[vr * 16 + 8 + vt])
      }
    }
  }
}
"#;

fn args() -> Args {
    let mut a = Args::new();
    a.array("a", Array::F32((0..5 * 32).map(|x| (x % 5) as f32).collect()))
        .array("b", Array::F32(vec![0.0; 5]))
        .array("c", Array::F32((0..3 * 16).map(|x| (x % 3) as f32 - 1.0).collect()))
        .array("d", Array::F32(vec![1.0; 3]))
        .array("e", Array::F32(vec![0.0; 3]))
        .int("m", 5)
        .int("n", 3);
    a
}

#[test]
fn fuses_independent_kernels_and_keeps_dependent_ones_apart() {
    let f = parse_func("kernels", KERNELS).unwrap();
    let g = horizontal_fusion(&f).unwrap();
    sparsec_ir::verify::verify_func(&g).unwrap();
    let text = print_func(&g);
    insta::assert_snapshot!("kernels_fused", text);
    // k1 + k2 fuse; k3 reads B and D; the two buckets fuse with each other.
    assert_eq!(text.matches("blockIdx.x(").count(), 3, "{text}");
    assert!(text.contains("for i in blockIdx.x(m + n)"), "{text}");
    assert!(text.contains("for r in blockIdx.x(n + n)"), "{text}");
    // k2's 16 threads are padded to k1's 32 and guarded.
    assert!(text.contains("if t < 16 {"), "{text}");
    let want = run(&f, &args()).unwrap();
    let got = run(&g, &args()).unwrap();
    for p in ["b", "d", "e"] {
        assert_eq!(got.arrays[p], want.arrays[p], "{p}");
    }
}

#[test]
fn a_single_kernel_and_stage_one_are_left_alone() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/workloads/csrmm.sptir")).unwrap();
    let f = parse_func("csrmm", &text).unwrap();
    assert!(matches!(horizontal_fusion(&f), Err(sparsec_passes::PassError::WrongStage { .. })));
    let g = sparsec_passes::lower_sparse_iter(&f).unwrap();
    assert_eq!(print_func(&horizontal_fusion(&g).unwrap()), print_func(&g));
}
