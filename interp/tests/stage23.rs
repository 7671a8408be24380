//! Stage II (positions, blocks, loops) and Stage III (flat buffers) programs.

mod common;

use common::*;
use sparsec_interp::run;
use sparsec_ir::data::{Args, Array};

const HEADER_II: &str = r#"
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz, indptr, indices)
  axis J_detach = dense_fixed(n)
  axis K = dense_fixed(feat)
  buffer A = match_sparse_buffer(a, [I, J], f32)
  buffer B = match_sparse_buffer(b, [J_detach, K], f32)
  buffer C = match_sparse_buffer(c, [I, K], f32)
  buffer J_indptr = match_sparse_buffer(indptr, [I], i32, extra_storage = 1)
  buffer J_indices = match_sparse_buffer(indices, [I, J], i32)
"#;

const SIG: &str = "(a: handle, b: handle, c: handle, indptr: handle, indices: handle, m: i32, n: i32, feat: i32, nnz: i32)";

fn stage2(body: &str) -> String {
    format!("func csrmm{SIG} stage II {{{HEADER_II}{body}}}")
}

const CSRMM_II: &str = r#"
  for i in serial(m) {
    block csrmm0(vi: spatial(m) = i) {
      for j in serial(J_indptr[vi + 1] - J_indptr[vi]) {
        for k in serial(feat) {
          block csrmm1(vj: reduce(n) = j, vk: spatial(feat) = k) {
            reads(A[vi, vj], B[J_indices[vi, vj], vk], J_indptr[vi:vi + 2])
            writes(C[vi, vk])
            init {
              C[vi, vk] = 0.0
            }
            C[vi, vk] = C[vi, vk] + A[vi, vj] * B[J_indices[vi, vj], vk]
          }
        }
      }
    }
  }
"#;

const CSRMM_II_THREADS: &str = r#"
  for i in blockIdx.x(m) {
    for k in threadIdx.x(feat) {
      block row(vi: spatial(m) = i, vk: spatial(feat) = k) {
        buffer acc = alloc_buffer([1], f32, local)
        for j in serial(J_indptr[vi + 1] - J_indptr[vi]) {
          block nz(vj: reduce(n) = j) {
            acc[0] = acc[0] + A[vi, vj] * B[J_indices[vi, vj], vk]
          }
        }
        C[vi, vk] = acc[0]
      }
    }
  }
"#;

struct Problem {
    csr: Csr,
    a: Vec<f32>,
    b: Vec<f32>,
    feat: usize,
    want: Vec<f64>,
}

fn problem(seed: u64) -> Problem {
    let mut rng = Rng::new(seed);
    let (m, n, feat) = (11, 9, 3);
    let csr = Csr::random(&mut rng, m, n, 0.3);
    let a = rng.vals(csr.nnz());
    let b = rng.vals(n * feat);
    let dense = csr.to_dense(&a);
    let mut want = vec![0.0; m * feat];
    for i in 0..m {
        for j in 0..n {
            for k in 0..feat {
                want[i * feat + k] += dense[i * n + j] * b[j * feat + k] as f64;
            }
        }
    }
    Problem { csr, a, b, feat, want }
}

fn args(p: &Problem, c_init: f32) -> Args {
    let mut args = Args::new();
    args.array("a", Array::F32(p.a.clone()))
        .array("b", Array::F32(p.b.clone()))
        .array("c", Array::F32(vec![c_init; p.csr.rows * p.feat]))
        .array("indptr", Array::I32(p.csr.indptr.clone()))
        .array("indices", Array::I32(p.csr.indices.clone()))
        .int("m", p.csr.rows as i64)
        .int("n", p.csr.cols as i64)
        .int("feat", p.feat as i64)
        .int("nnz", p.csr.nnz() as i64);
    args
}

#[test]
fn stage2_blocks_run_init_at_the_first_reduction_step() {
    let p = problem(21);
    let out = run(&parse(&stage2(CSRMM_II)), &args(&p, 5.0)).unwrap();
    let c = f32s(&out, "c");
    // Empty rows never reach `vj == 0`, so C keeps its input there.
    let feat = p.feat;
    let mut want = p.want.clone();
    for i in (0..p.csr.rows).filter(|&i| p.csr.row(i).is_empty()) {
        want[i * feat..(i + 1) * feat].iter_mut().for_each(|x| *x = 5.0);
    }
    assert!(p.csr.row(1).is_empty());
    assert_close(&c, &want);
}

#[test]
fn stage2_thread_loops_and_local_allocations() {
    let p = problem(22);
    let out = run(&parse(&stage2(CSRMM_II_THREADS)), &args(&p, 5.0)).unwrap();
    assert_close(&f32s(&out, "c"), &p.want);
}

#[test]
fn stage2_while_binary_search() {
    let src = r#"
func lookup(a: handle, d: handle, indptr: handle, indices: handle, m: i32, n: i32, nnz: i32) stage II {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz, indptr, indices)
  axis J_detach = dense_fixed(n)
  buffer A = match_sparse_buffer(a, [I, J], f32)
  buffer D = match_sparse_buffer(d, [I, J_detach], f32)
  buffer J_indptr = match_sparse_buffer(indptr, [I], i32, extra_storage = 1)
  buffer J_indices = match_sparse_buffer(indices, [I, J], i32)
  for i in serial(m) {
    for q in serial(n) {
      block lookup(vi: spatial(m) = i, vq: spatial(n) = q) {
        buffer lo = alloc_buffer([1], i32, local)
        buffer hi = alloc_buffer([1], i32, local)
        let len = J_indptr[vi + 1] - J_indptr[vi]
        hi[0] = len
        while lo[0] < hi[0] {
          let mid = (lo[0] + hi[0]) // 2
          if J_indices[vi, mid] < vq {
            lo[0] = mid + 1
          } else {
            hi[0] = mid
          }
        }
        if lo[0] < len && J_indices[vi, lo[0]] == vq {
          D[vi, vq] = A[vi, lo[0]]
        } else {
          D[vi, vq] = -1.0
        }
      }
    }
  }
}
"#;
    let mut rng = Rng::new(23);
    let (m, n) = (10, 13);
    let csr = Csr::random(&mut rng, m, n, 0.3);
    let a = rng.vals(csr.nnz());
    let want: Vec<f64> = (0..m * n)
        .map(|x| {
            let (i, j) = (x / n, x % n);
            csr.row(i).find(|&p| csr.indices[p] as usize == j).map_or(-1.0, |p| a[p] as f64)
        })
        .collect();
    let mut args = Args::new();
    args.array("a", Array::F32(a))
        .array("d", Array::F32(vec![0.0; m * n]))
        .array("indptr", Array::I32(csr.indptr.clone()))
        .array("indices", Array::I32(csr.indices.clone()))
        .int("m", m as i64)
        .int("n", n as i64)
        .int("nnz", csr.nnz() as i64);
    let out = run(&parse(src), &args).unwrap();
    assert_close(&f32s(&out, "d"), &want);
}

const CSRMM_III: &str = r#"
func csrmm(a: handle, b: handle, c: handle, indptr: handle, indices: handle, m: i32, n: i32, feat: i32, nnz: i32) stage III {
  buffer A = match_buffer(a, [nnz], f32)
  buffer B = match_buffer(b, [n * feat], f32)
  buffer C = match_buffer(c, [m * feat], f32)
  buffer J_indptr = match_buffer(indptr, [m + 1], i32)
  buffer J_indices = match_buffer(indices, [nnz], i32)
  for i in blockIdx.x(m) {
    for k in threadIdx.x(feat) {
      block row(vi: spatial(m) = i, vk: spatial(feat) = k) {
        C[vi * feat + vk] = 0.0
        for p in serial(J_indptr[vi + 1] - J_indptr[vi], start = J_indptr[vi]) {
          C[vi * feat + vk] = C[vi * feat + vk] + A[p] * B[J_indices[p] * feat + vk]
        }
      }
    }
  }
}
"#;

#[test]
fn stage3_flat_csrmm() {
    let p = problem(24);
    let out = run(&parse(CSRMM_III), &args(&p, 5.0)).unwrap();
    assert_close(&f32s(&out, "c"), &p.want);
}

#[test]
fn atomic_add_accumulates_and_yields_the_old_value() {
    let src = r#"
func spmm_t(a: handle, b: handle, c: handle, indptr: handle, indices: handle, cnt: handle, t: handle, m: i32, n: i32, feat: i32, nnz: i32) stage III {
  buffer A = match_buffer(a, [nnz], f32)
  buffer B = match_buffer(b, [m * feat], f32)
  buffer C = match_buffer(c, [n * feat], f32)
  buffer J_indptr = match_buffer(indptr, [m + 1], i32)
  buffer J_indices = match_buffer(indices, [nnz], i32)
  buffer CNT = match_buffer(cnt, [1], i32)
  buffer T = match_buffer(t, [10], i32)
  for i in blockIdx.x(m) {
    for p in serial(J_indptr[i + 1] - J_indptr[i], start = J_indptr[i]) {
      for k in threadIdx.x(feat) {
        atomic_add(C[J_indices[p] * feat + k], A[p] * B[i * feat + k])
      }
    }
  }
  for x in serial(10) {
    T[x] = atomic_add(CNT[0], 2) // 2
  }
}
"#;
    let mut rng = Rng::new(25);
    let (m, n, feat) = (8, 6, 2);
    let csr = Csr::random(&mut rng, m, n, 0.4);
    let a = rng.vals(csr.nnz());
    let b = rng.vals(m * feat);
    let dense = csr.to_dense(&a);
    let mut want = vec![0.0; n * feat];
    for i in 0..m {
        for j in 0..n {
            for k in 0..feat {
                want[j * feat + k] += dense[i * n + j] * b[i * feat + k] as f64;
            }
        }
    }
    let mut args = Args::new();
    args.array("a", Array::F32(a))
        .array("b", Array::F32(b))
        .array("c", Array::F32(vec![0.0; n * feat]))
        .array("indptr", Array::I32(csr.indptr.clone()))
        .array("indices", Array::I32(csr.indices.clone()))
        .array("cnt", Array::I32(vec![0]))
        .array("t", Array::I32(vec![0; 10]))
        .int("m", m as i64)
        .int("n", n as i64)
        .int("feat", feat as i64)
        .int("nnz", csr.nnz() as i64);
    let out = run(&parse(src), &args).unwrap();
    assert_close(&f32s(&out, "c"), &want);
    assert_eq!(i32s(&out, "cnt"), vec![20]);
    assert_eq!(i32s(&out, "t"), (0..10).collect::<Vec<_>>());
}

#[test]
fn buffer_len_and_output_allocation() {
    use sparsec_interp::{alloc_missing_outputs, buffer_len};
    let p = problem(26);
    let func = parse(&stage2(CSRMM_II));
    let mut args = args(&p, 0.0);
    args.arrays.shift_remove("c");
    let len = |name: &str| buffer_len(&func, func.buffer_by_name(name).unwrap(), &args).unwrap();
    assert_eq!(len("C"), p.csr.rows * p.feat);
    assert_eq!(len("A"), p.csr.nnz());
    assert_eq!(len("J_indptr"), p.csr.rows + 1);
    assert_eq!(len("B"), p.csr.cols * p.feat);

    alloc_missing_outputs(&func, &mut args).unwrap();
    assert_eq!(args.arrays["c"], Array::F32(vec![0.0; p.csr.rows * p.feat]));
    let out = run(&func, &args).unwrap();
    assert_close(&f32s(&out, "c"), &p.want);

    // A sparse output's length comes from the indptr input.
    let sddmm = parse(
        r#"
func f(c: handle, indptr: handle, indices: handle, m: i32, n: i32, nnz: i32) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz, indptr, indices)
  buffer C = match_sparse_buffer(c, [I, J], f64)
}
"#,
    );
    let mut args = Args::new();
    args.array("indptr", Array::I32(vec![0, 2, 2, 5]))
        .array("indices", Array::I32(vec![0, 1, 0, 1, 2]))
        .int("m", 3)
        .int("n", 3)
        .int("nnz", 5);
    alloc_missing_outputs(&sddmm, &mut args).unwrap();
    assert_eq!(args.arrays["c"], Array::F64(vec![0.0; 5]));
}
