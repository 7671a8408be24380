//! The access observer: what `run_observed` reports on a tiny Stage-III program, counted by
//! hand.

mod common;

use common::*;
use sparsec_interp::{run_observed, run_with, Access, AccessKind, Options};
use sparsec_ir::data::{Args, Array};

/// A 3-row CSR SpMM with 2 feature columns: row 0 has 2 nonzeros, row 1 none, row 2 one.
/// One block per row, one thread per feature; a local accumulator (not reported).
const SRC: &str = r#"
func csrmm(a: handle, b: handle, c: handle, indptr: handle, indices: handle, m: i32, n: i32, feat: i32, nnz: i32) stage III {
  buffer A = match_buffer(a, [nnz], f32)
  buffer B = match_buffer(b, [n * feat], f32)
  buffer C = match_buffer(c, [m * feat], f32)
  buffer J_indptr = match_buffer(indptr, [m + 1], i32)
  buffer J_indices = match_buffer(indices, [nnz], i32)
  for i in blockIdx.x(m) {
    for k in threadIdx.x(feat) {
      buffer acc = alloc_buffer([1], f32, local)
      block row(vi: spatial(m) = i, vk: spatial(feat) = k) {
        acc[0] = 0.0
        for p in serial(J_indptr[vi + 1] - J_indptr[vi], start = J_indptr[vi]) {
          acc[0] = acc[0] + A[p] * B[J_indices[p] * feat + vk]
        }
        C[vi * feat + vk] = acc[0]
      }
    }
  }
}
"#;

fn args() -> Args {
    let mut a = Args::new();
    a.arrays.insert("a".into(), Array::F32(vec![1.0, 2.0, 3.0]));
    a.arrays.insert("b".into(), Array::F32(vec![1.0, 10.0, 2.0, 20.0, 3.0, 30.0]));
    a.arrays.insert("c".into(), Array::F32(vec![0.0; 6]));
    a.arrays.insert("indptr".into(), Array::I32(vec![0, 2, 2, 3]));
    a.arrays.insert("indices".into(), Array::I32(vec![0, 2, 1]));
    for (k, v) in [("m", 3), ("n", 3), ("feat", 2), ("nnz", 3)] {
        a.scalars.insert(k.into(), sparsec_ir::data::Scalar::Int(v));
    }
    a
}

#[test]
fn every_global_access_is_reported_with_its_unit() {
    let f = parse(SRC);
    let mut seen: Vec<Access> = Vec::new();
    let out = run_observed(&f, &args(), &Options::default(), &mut |a| seen.push(*a)).unwrap();
    // Same numbers as a plain run.
    let plain = run_with(&f, &args(), &Options::default()).unwrap();
    assert_eq!(out.arrays["c"], plain.arrays["c"]);
    assert_eq!(out.arrays["c"], Array::F32(vec![7.0, 70.0, 0.0, 0.0, 6.0, 60.0]));

    // Per unit (6 = 3 rows × 2 features): the loop extent reads indptr[vi + 1], indptr[vi],
    // its start indptr[vi] (3 loads); each nonzero reads A[p], J_indices[p], B[..] (3 loads);
    // one store of C. Rows have 2, 0, 1 nonzeros: 2 units each.
    let loads = seen.iter().filter(|a| a.kind == AccessKind::Load).count();
    let stores = seen.iter().filter(|a| a.kind == AccessKind::Store).count();
    let nonzeros = 2 + 1; // rows 0, 1, 2 hold 2, 0 and 1
    assert_eq!(loads, 6 * 3 + 2 * 3 * nonzeros);
    assert_eq!(stores, 6);
    // The local accumulator is never reported; every element size is 4 bytes.
    let buffers: std::collections::BTreeSet<usize> = seen.iter().map(|a| a.buffer).collect();
    assert_eq!(buffers.len(), 5, "{buffers:?}");
    assert!(seen.iter().all(|a| a.bytes == 4 && a.stmt == 0));
    // Units: blockIdx.x is the row, threadIdx.x the feature.
    let c: Vec<(i64, i64, u64)> =
        seen.iter().filter(|a| a.kind == AccessKind::Store).map(|a| (a.block[0], a.thread[0], a.index)).collect();
    assert_eq!(c, [(0, 0, 0), (0, 1, 1), (1, 0, 2), (1, 1, 3), (2, 0, 4), (2, 1, 5)]);
    assert!(seen.iter().all(|a| a.block[1..] == [0, 0] && a.thread[1..] == [0, 0]));
    // B's loads of unit (0, 1): rows 0 and 2 of B, column 1.
    let b: Vec<u64> = seen.iter().filter(|a| a.buffer == 1 && a.block[0] == 0 && a.thread[0] == 1).map(|a| a.index).collect();
    assert_eq!(b, [1, 5]);
    // Sites: one number per expression, whatever the data; B's load is 2 loads deep
    // (indices, then B; `p` is a loop variable), A's 1, indptr's 1, the store of C 1.
    let depth_of = |buffer: usize| {
        let d: std::collections::BTreeSet<(u32, u32)> = seen.iter().filter(|a| a.buffer == buffer).map(|a| (a.site, a.depth)).collect();
        d.into_iter().collect::<Vec<_>>()
    };
    assert_eq!(depth_of(1).len(), 1);
    assert_eq!(depth_of(1)[0].1, 2);
    assert_eq!(depth_of(0)[0].1, 1);
    assert_eq!(depth_of(2)[0].1, 1);
    assert_eq!(depth_of(3).len(), 3, "three loads of indptr in the source");
    assert!(depth_of(3).iter().all(|&(_, d)| d == 1));
}

#[test]
fn atomics_are_reported_as_writes() {
    let src = r#"
func count(t: handle, n: i32) stage III {
  buffer T = match_buffer(t, [2], i32)
  for i in blockIdx.x(n) {
    atomic_add(T[i % 2], 1)
  }
}
"#;
    let f = parse(src);
    let mut a = Args::new();
    a.arrays.insert("t".into(), Array::I32(vec![0, 0]));
    a.scalars.insert("n".into(), sparsec_ir::data::Scalar::Int(5));
    let mut seen = Vec::new();
    let out = run_observed(&f, &a, &Options::default(), &mut |x| seen.push(*x)).unwrap();
    assert_eq!(out.arrays["t"], Array::I32(vec![3, 2]));
    assert_eq!(seen.len(), 5);
    assert!(seen.iter().all(|x| x.kind == AccessKind::Atomic && x.kind.writes()));
    assert_eq!(seen.iter().map(|x| x.block[0]).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
}

/// Each iteration of an `unrolled` loop is a copy of the code: its accesses have sites of
/// their own, distinct between iterations and from the serial loop's single site.
#[test]
fn unrolled_iterations_are_sites_of_their_own() {
    let sites = |kind: &str| {
        let src = SRC.replace("for p in serial(", &format!("for p in {kind}("));
        let f = parse(&src);
        let mut seen: Vec<Access> = Vec::new();
        run_observed(&f, &args(), &Options::default(), &mut |a| seen.push(*a)).unwrap();
        // The loads of A by unit (block 0, thread 0): row 0's two nonzeros.
        let a = seen.iter().filter(|x| x.block[0] == 0 && x.thread[0] == 0 && x.buffer == 0).map(|x| x.site).collect::<Vec<_>>();
        assert_eq!(a.len(), 2);
        a
    };
    let serial = sites("serial");
    assert_eq!(serial[0], serial[1]);
    let unrolled = sites("unrolled");
    assert_ne!(unrolled[0], unrolled[1]);
    assert!(!unrolled.contains(&serial[0]));
}

/// The iterations of a `vectorized` loop that runs as vectors are the lanes of one access;
/// where its vector form's assumption fails (`n` not a multiple of 4), they are separate.
#[test]
fn vector_lanes_are_reported_where_the_loop_runs_as_vectors() {
    let src = r#"
func scale(x: handle, y: handle, n: i32) stage III {
  buffer X = match_buffer(x, [n], f32)
  buffer Y = match_buffer(y, [n], f32)
  for t in threadIdx.x((n + 3) // 4) {
    for v in vectorized(4) {
      if t * 4 + v < n {
        block s(vi: spatial(n) = t * 4 + v) {
          Y[vi] = X[vi] * 2.0
        }
      }
    }
  }
}
"#;
    let f = parse(src);
    let lanes = |n: usize| {
        let mut a = Args::new();
        a.arrays.insert("x".into(), Array::F32(vec![1.0; n]));
        a.arrays.insert("y".into(), Array::F32(vec![0.0; n]));
        a.scalars.insert("n".into(), sparsec_ir::data::Scalar::Int(n as i64));
        let mut seen: Vec<Access> = Vec::new();
        run_observed(&f, &a, &Options::default(), &mut |x| seen.push(*x)).unwrap();
        seen.iter().filter(|x| x.thread[0] == 0 && x.buffer == 0).map(|x| x.lane).collect::<Vec<_>>()
    };
    assert_eq!(lanes(8), vec![0, 1, 2, 3]);
    assert_eq!(lanes(6), vec![0, 0, 0, 0]);
}
