//! Stage I programs (coordinate space) against dense computations in plain Rust.

mod common;

use common::*;
use sparsec_interp::run;
use sparsec_ir::data::{Args, Array};

const CSRMM: &str = r#"
# C = A · B with A in CSR.
func csrmm(a: handle, b: handle, c: handle, indptr: handle, indices: handle, m: i32, n: i32, feat: i32, nnz: i32) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz, indptr, indices)
  axis J_detach = dense_fixed(n)
  axis K = dense_fixed(feat)
  buffer A = match_sparse_buffer(a, [I, J], f32)
  buffer B = match_sparse_buffer(b, [J_detach, K], f32)
  buffer C = match_sparse_buffer(c, [I, K], f32)
  sp_iter csrmm([I, J, K], "SRS") as [i, j, k] {
    init {
      C[i, k] = 0.0
    }
    C[i, k] = C[i, k] + A[i, j] * B[j, k]
  }
}
"#;

fn csr_args(csr: &Csr, a: &[f32]) -> Args {
    let mut args = Args::new();
    args.array("a", Array::F32(a.to_vec()))
        .array("indptr", Array::I32(csr.indptr.clone()))
        .array("indices", Array::I32(csr.indices.clone()))
        .int("m", csr.rows as i64)
        .int("n", csr.cols as i64)
        .int("nnz", csr.nnz() as i64);
    args
}

/// Dense `C = A · B` with `A` m×n (row-major f64) and `B` n×feat.
fn matmul(a: &[f64], b: &[f32], m: usize, n: usize, feat: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * feat];
    for i in 0..m {
        for j in 0..n {
            for k in 0..feat {
                c[i * feat + k] += a[i * n + j] * b[j * feat + k] as f64;
            }
        }
    }
    c
}

#[test]
fn csrmm_matches_dense() {
    let mut rng = Rng::new(1);
    let (m, n, feat) = (13, 11, 3);
    let csr = Csr::random(&mut rng, m, n, 0.3);
    let a = rng.vals(csr.nnz());
    let b = rng.vals(n * feat);
    let mut args = csr_args(&csr, &a);
    // C starts as garbage: `init` must zero every row, the empty row 1 included.
    args.array("b", Array::F32(b.clone())).array("c", Array::F32(vec![7.0; m * feat])).int("feat", feat as i64);
    let out = run(&parse(CSRMM), &args).unwrap();
    assert_close(&f32s(&out, "c"), &matmul(&csr.to_dense(&a), &b, m, n, feat));
    assert!(f32s(&out, "c")[feat..2 * feat].iter().all(|&x| x == 0.0));
    // Inputs come back unchanged, scalars too.
    assert_eq!(f32s(&out, "a"), a);
    assert_eq!(out.scalars, args.scalars);
}

#[test]
fn csrmm_accepts_i64_index_arrays() {
    let mut rng = Rng::new(2);
    let (m, n, feat) = (6, 7, 2);
    let csr = Csr::random(&mut rng, m, n, 0.4);
    let a = rng.vals(csr.nnz());
    let b = rng.vals(n * feat);
    let mut args = csr_args(&csr, &a);
    args.array("indptr", Array::I64(csr.indptr.iter().map(|&x| x as i64).collect()))
        .array("indices", Array::I64(csr.indices.iter().map(|&x| x as i64).collect()))
        .array("b", Array::F32(b.clone()))
        .array("c", Array::F32(vec![0.0; m * feat]))
        .int("feat", feat as i64);
    let out = run(&parse(CSRMM), &args).unwrap();
    assert_close(&f32s(&out, "c"), &matmul(&csr.to_dense(&a), &b, m, n, feat));
}

fn sddmm_src(axes: &str) -> String {
    format!(
        r#"
func sddmm(a: handle, b: handle, c: handle, indptr: handle, indices: handle, m: i32, n: i32, feat: i32, nnz: i32) {{
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz, indptr, indices)
  axis J_detach = dense_fixed(n)
  axis K = dense_fixed(feat)
  buffer A = match_sparse_buffer(a, [I, K], f32)
  buffer B = match_sparse_buffer(b, [J_detach, K], f32)
  buffer C = match_sparse_buffer(c, [I, J], f32)
  sp_iter sddmm([{axes}, K], "SSR") as [i, j, k] {{
    init {{
      C[i, j] = 0.0
    }}
    C[i, j] = C[i, j] + A[i, k] * B[j, k]
  }}
}}
"#
    )
}

#[test]
fn sddmm_plain_and_fused() {
    let mut rng = Rng::new(3);
    let (m, n, feat) = (9, 12, 5);
    let csr = Csr::random(&mut rng, m, n, 0.35);
    let a = rng.vals(m * feat);
    let b = rng.vals(n * feat);
    let mut want = vec![0.0; csr.nnz()];
    for i in 0..m {
        for p in csr.row(i) {
            let j = csr.indices[p] as usize;
            want[p] = (0..feat).map(|k| a[i * feat + k] as f64 * b[j * feat + k] as f64).sum();
        }
    }
    for axes in ["I, J", "fuse(I, J)"] {
        let mut args = csr_args(&csr, &a);
        args.array("b", Array::F32(b.clone())).array("c", Array::F32(vec![3.0; csr.nnz()])).int("feat", feat as i64);
        let out = run(&parse(&sddmm_src(axes)), &args).unwrap();
        assert_close(&f32s(&out, "c"), &want);
    }
}

#[test]
fn segment_reduce_over_dense_variable_axis() {
    let src = r#"
func segment_reduce(a: handle, b: handle, indptr: handle, n: i32, nnz: i32) {
  axis I = dense_fixed(n)
  axis J = dense_variable(I, 100, nnz, indptr)
  buffer A = match_sparse_buffer(a, [I, J], f32)
  buffer B = match_sparse_buffer(b, [I], f32)
  sp_iter segment_reduce([I, J], "SR") as [i, j] {
    init {
      B[i] = 0.0
    }
    B[i] = B[i] + A[i, j] * cast(f32, j + 1)
  }
}
"#;
    let lens = [3usize, 0, 5, 1, 0, 4];
    let mut indptr = vec![0i32];
    for l in lens {
        indptr.push(indptr.last().unwrap() + l as i32);
    }
    let nnz = *indptr.last().unwrap() as usize;
    let a = Rng::new(4).vals(nnz);
    let want: Vec<f64> = (0..lens.len())
        .map(|i| (indptr[i] as usize..indptr[i + 1] as usize).map(|p| a[p] as f64 * (p - indptr[i] as usize + 1) as f64).sum())
        .collect();
    let mut args = Args::new();
    args.array("a", Array::F32(a))
        .array("b", Array::F32(vec![9.0; lens.len()]))
        .array("indptr", Array::I32(indptr))
        .int("n", lens.len() as i64)
        .int("nnz", nnz as i64);
    let out = run(&parse(src), &args).unwrap();
    assert_close(&f32s(&out, "b"), &want);
}

#[test]
fn square_sum_over_two_level_sparse_axes() {
    let src = r#"
func square_sum(a: handle, b: handle, indptr_j: handle, indices_j: handle, indptr_k: handle, indices_k: handle, nnz_j: i32, nnz_k: i32, M: i32, N1: i32, N2: i32) {
  axis I = dense_fixed(M)
  axis J = sparse_variable(I, N1, nnz_j, indptr_j, indices_j)
  axis K = sparse_variable(J, N2, nnz_k, indptr_k, indices_k)
  buffer A = match_sparse_buffer(a, [I, J, K], f32)
  buffer B = match_sparse_buffer(b, [I], f32)
  sp_iter square_sum([I, J, K], "SRR") as [i, j, k] {
    init {
      B[i] = 0.0
    }
    B[i] = B[i] + A[i, j, k] * A[i, j, k] + cast(f32, k) * 0.25
  }
}
"#;
    let mut rng = Rng::new(5);
    let (m, n1, n2) = (7, 6, 8);
    let outer = Csr::random(&mut rng, m, n1, 0.5);
    // One K row per stored (i, j).
    let inner = Csr::random(&mut rng, outer.nnz(), n2, 0.4);
    let a = rng.vals(inner.nnz());
    let want: Vec<f64> = (0..m)
        .map(|i| {
            outer
                .row(i)
                .flat_map(|pj| inner.row(pj))
                .map(|pk| (a[pk] as f64).powi(2) + inner.indices[pk] as f64 * 0.25)
                .sum()
        })
        .collect();
    let mut args = Args::new();
    args.array("a", Array::F32(a))
        .array("b", Array::F32(vec![0.0; m]))
        .array("indptr_j", Array::I32(outer.indptr.clone()))
        .array("indices_j", Array::I32(outer.indices.clone()))
        .array("indptr_k", Array::I32(inner.indptr.clone()))
        .array("indices_k", Array::I32(inner.indices.clone()))
        .int("nnz_j", outer.nnz() as i64)
        .int("nnz_k", inner.nnz() as i64)
        .int("M", m as i64)
        .int("N1", n1 as i64)
        .int("N2", n2 as i64);
    let out = run(&parse(src), &args).unwrap();
    assert_close(&f32s(&out, "b"), &want);
}

#[test]
fn ellmm_over_sparse_fixed_axis() {
    let src = r#"
func ellmm(a: handle, b: handle, c: handle, indices: handle, m: i32, n: i32, feat: i32, k: i32) {
  axis I = dense_fixed(m)
  axis J = sparse_fixed(I, n, k, indices)
  axis J_detach = dense_fixed(n)
  axis F = dense_fixed(feat)
  buffer A = match_sparse_buffer(a, [I, J], f32)
  buffer B = match_sparse_buffer(b, [J_detach, F], f32)
  buffer C = match_sparse_buffer(c, [I, F], f32)
  sp_iter ellmm([I, J, F], "SRS") as [i, j, f] {
    init {
      C[i, f] = 0.0
    }
    C[i, f] = C[i, f] + A[i, j] * B[j, f]
  }
}
"#;
    let mut rng = Rng::new(6);
    let (m, n, feat, k) = (8, 10, 3, 3);
    let mut indices = Vec::new();
    for _ in 0..m {
        let mut cols: Vec<i32> = Vec::new();
        while cols.len() < k {
            let c = rng.below(n) as i32;
            if !cols.contains(&c) {
                cols.push(c);
            }
        }
        cols.sort();
        indices.extend(cols);
    }
    let a = rng.vals(m * k);
    let b = rng.vals(n * feat);
    let mut dense = vec![0.0; m * n];
    for i in 0..m {
        for p in i * k..i * k + k {
            dense[i * n + indices[p] as usize] = a[p] as f64;
        }
    }
    let mut args = Args::new();
    args.array("a", Array::F32(a))
        .array("b", Array::F32(b.clone()))
        .array("c", Array::F32(vec![0.0; m * feat]))
        .array("indices", Array::I32(indices))
        .int("m", m as i64)
        .int("n", n as i64)
        .int("feat", feat as i64)
        .int("k", k as i64);
    let out = run(&parse(src), &args).unwrap();
    assert_close(&f32s(&out, "c"), &matmul(&dense, &b, m, n, feat));
}

fn dense_iter_src(sorted: bool, default: Option<&str>) -> String {
    let sorted = if sorted { "" } else { ", sorted = false" };
    let default = default.map_or(String::new(), |d| format!(", default = {d}"));
    format!(
        r#"
func csrmm_dense_iter(a: handle, b: handle, c: handle, indptr: handle, indices: handle, m: i32, n: i32, feat: i32, nnz: i32) {{
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz, indptr, indices{sorted})
  axis J_detach = dense_fixed(n)
  axis K = dense_fixed(feat)
  buffer A = match_sparse_buffer(a, [I, J], f32{default})
  buffer B = match_sparse_buffer(b, [J_detach, K], f32)
  buffer C = match_sparse_buffer(c, [I, K], f32)
  sp_iter csrmm([I, J_detach, K], "SRS") as [i, j, k] {{
    init {{
      C[i, k] = 0.0
    }}
    C[i, k] = C[i, k] + A[i, j] * B[j, k]
  }}
}}
"#
    )
}

#[test]
fn coordinate_access_through_a_dense_iterator() {
    let mut rng = Rng::new(7);
    let (m, n, feat) = (10, 9, 4);
    let csr = Csr::random(&mut rng, m, n, 0.3);
    let a = rng.vals(csr.nnz());
    let b = rng.vals(n * feat);
    let dense = csr.to_dense(&a);
    let mut args = csr_args(&csr, &a);
    args.array("b", Array::F32(b.clone())).array("c", Array::F32(vec![0.0; m * feat])).int("feat", feat as i64);

    // Absent entries read as 0 (binary search in sorted rows).
    let out = run(&parse(&dense_iter_src(true, None)), &args).unwrap();
    assert_close(&f32s(&out, "c"), &matmul(&dense, &b, m, n, feat));

    // ... or as the buffer's default.
    let with_default: Vec<f64> = (0..m * n)
        .map(|x| {
            let (i, j) = (x / n, x % n);
            let stored = csr.row(i).any(|p| csr.indices[p] as usize == j);
            if stored { dense[x] } else { 0.5 }
        })
        .collect();
    let out = run(&parse(&dense_iter_src(true, Some("0.5"))), &args).unwrap();
    assert_close(&f32s(&out, "c"), &matmul(&with_default, &b, m, n, feat));

    // Unsorted rows are searched linearly.
    let mut shuffled = csr.clone();
    let mut a_shuffled = a.clone();
    for i in 0..m {
        let r = shuffled.row(i);
        shuffled.indices[r.clone()].reverse();
        a_shuffled[r].reverse();
    }
    let mut args = csr_args(&shuffled, &a_shuffled);
    args.array("b", Array::F32(b.clone())).array("c", Array::F32(vec![0.0; m * feat])).int("feat", feat as i64);
    let out = run(&parse(&dense_iter_src(false, None)), &args).unwrap();
    assert_close(&f32s(&out, "c"), &matmul(&dense, &b, m, n, feat));
}

#[test]
fn attach_iterates_rows_picked_by_a_coordinate() {
    let src = r#"
func hyper_gnn(x: handle, y: handle, indptr: handle, indices: handle, indptr_T: handle, indices_T: handle, n: i32, m: i32, nnz: i32, feat: i32) {
  axis I = dense_fixed(n)
  axis F = dense_fixed(feat)
  axis J = sparse_variable(I, m, nnz, indptr, indices)
  axis J_detach = dense_fixed(m)
  axis I_T = sparse_variable(J_detach, n, nnz, indptr_T, indices_T)
  buffer X = match_sparse_buffer(x, [I, F], f32)
  buffer Y = match_sparse_buffer(y, [I, F], f32)
  sp_iter hyper_gnn([I, F, J, attach(I_T, J)], "SSRR") as [i, f, j, i_t] {
    init {
      Y[i, f] = 0.0
    }
    Y[i, f] = Y[i, f] + X[i_t, f]
  }
}
"#;
    let mut rng = Rng::new(8);
    let (n, m, feat) = (9, 6, 2);
    let h = Csr::random(&mut rng, n, m, 0.4);
    let ht = h.transpose();
    let x = rng.vals(n * feat);
    let mut want = vec![0.0; n * feat];
    for i in 0..n {
        for p in h.row(i) {
            let j = h.indices[p] as usize;
            for q in ht.row(j) {
                let it = ht.indices[q] as usize;
                for f in 0..feat {
                    want[i * feat + f] += x[it * feat + f] as f64;
                }
            }
        }
    }
    let mut args = Args::new();
    args.array("x", Array::F32(x))
        .array("y", Array::F32(vec![0.0; n * feat]))
        .array("indptr", Array::I32(h.indptr.clone()))
        .array("indices", Array::I32(h.indices.clone()))
        .array("indptr_T", Array::I32(ht.indptr.clone()))
        .array("indices_T", Array::I32(ht.indices.clone()))
        .int("n", n as i64)
        .int("m", m as i64)
        .int("nnz", h.nnz() as i64)
        .int("feat", feat as i64);
    let out = run(&parse(src), &args).unwrap();
    assert_close(&f32s(&out, "y"), &want);
}

#[test]
fn nested_sparse_iterations_compute_softmax() {
    let src = r#"
func sparse_softmax(a: handle, b: handle, indptr: handle, indices: handle, n: i32, nnz: i32) {
  axis I = dense_fixed(n)
  axis J = sparse_variable(I, n, nnz, indptr, indices)
  buffer A = match_sparse_buffer(a, [I, J], f32)
  buffer B = match_sparse_buffer(b, [I, J], f32)
  buffer TMP = alloc_sparse_buffer([I], f32, global)
  buffer TMP1 = alloc_sparse_buffer([I], f32, global)
  sp_iter sparse_softmax([I], "S") as [i] {
    sp_iter computer_max([J], "R") as [j] {
      init {
        TMP[i] = min_value(f32)
      }
      TMP[i] = max(TMP[i], A[i, j])
    }
    sp_iter exp_and_sum([J], "R") as [j] {
      init {
        TMP1[i] = 0.0
      }
      TMP1[i] = TMP1[i] + exp(A[i, j] - TMP[i])
    }
    sp_iter div([J], "S") as [j] {
      B[i, j] = exp(A[i, j] - TMP[i]) / TMP1[i]
    }
  }
}
"#;
    let mut rng = Rng::new(9);
    let n = 12;
    let csr = Csr::random(&mut rng, n, n, 0.4);
    let a: Vec<f32> = rng.vals(csr.nnz()).iter().map(|x| x * 4.0).collect();
    let mut want = vec![0.0; csr.nnz()];
    for i in 0..n {
        let r = csr.row(i);
        let mx = r.clone().map(|p| a[p] as f64).fold(f64::MIN, f64::max);
        let sum: f64 = r.clone().map(|p| (a[p] as f64 - mx).exp()).sum();
        for p in r {
            want[p] = (a[p] as f64 - mx).exp() / sum;
        }
    }
    let mut args = csr_args(&csr, &a);
    args.array("b", Array::F32(vec![0.0; csr.nnz()]));
    let out = run(&parse(src), &args).unwrap();
    assert_close(&f32s(&out, "b"), &want);
}

#[test]
fn bmm_walks_rows_of_sibling_axes() {
    let src = r#"
func bmm(x: handle, y: handle, z: handle, indptr_i: handle, indptr_j: handle, indptr_k: handle, indptr_ij: handle, indptr_jk: handle, indptr_ik: handle, batch_size: i32, nnz_i: i32, nnz_j: i32, nnz_k: i32, nnz_ij: i32, nnz_jk: i32, nnz_ik: i32) {
  axis B = dense_fixed(batch_size)
  axis I = dense_variable(B, 32768, nnz_i, indptr_i)
  axis J = dense_variable(B, 32768, nnz_j, indptr_j)
  axis K = dense_variable(B, 32768, nnz_k, indptr_k)
  axis IJ = dense_variable(I, 32768, nnz_ij, indptr_ij)
  axis JK = dense_variable(J, 32768, nnz_jk, indptr_jk)
  axis IK = dense_variable(I, 32768, nnz_ik, indptr_ik)
  buffer X = match_sparse_buffer(x, [B, I, IJ], f32)
  buffer Y = match_sparse_buffer(y, [B, J, JK], f32)
  buffer Z = match_sparse_buffer(z, [B, I, IK], f32)
  sp_iter bmm([B, I, J, K], "SSRS") as [b, i, j, k] {
    init {
      Z[b, i, k] = 0.0
    }
    Z[b, i, k] = Z[b, i, k] + X[b, i, j] * Y[b, j, k]
  }
}
"#;
    let dims = [(2usize, 3usize, 4usize), (1, 1, 1), (3, 2, 2), (0, 2, 1)];
    let prefix = |v: &mut Vec<i32>, len: usize| v.push(v.last().unwrap() + len as i32);
    let (mut pi, mut pj, mut pk) = (vec![0], vec![0], vec![0]);
    let (mut pij, mut pjk, mut pik) = (vec![0], vec![0], vec![0]);
    for &(di, dj, dk) in &dims {
        prefix(&mut pi, di);
        prefix(&mut pj, dj);
        prefix(&mut pk, dk);
        (0..di).for_each(|_| prefix(&mut pij, dj));
        (0..dj).for_each(|_| prefix(&mut pjk, dk));
        (0..di).for_each(|_| prefix(&mut pik, dk));
    }
    let mut rng = Rng::new(10);
    let x = rng.vals(*pij.last().unwrap() as usize);
    let y = rng.vals(*pjk.last().unwrap() as usize);
    // Matrices are stored row-major one after the other.
    let mut want = Vec::new();
    let (mut ox, mut oy) = (0, 0);
    for &(di, dj, dk) in &dims {
        for i in 0..di {
            for k in 0..dk {
                want.push((0..dj).map(|j| x[ox + i * dj + j] as f64 * y[oy + j * dk + k] as f64).sum());
            }
        }
        ox += di * dj;
        oy += dj * dk;
    }
    let mut args = Args::new();
    let last = |v: &Vec<i32>| *v.last().unwrap() as i64;
    args.array("x", Array::F32(x))
        .array("y", Array::F32(y))
        .array("z", Array::F32(vec![0.0; want.len()]))
        .int("batch_size", dims.len() as i64)
        .int("nnz_i", last(&pi))
        .int("nnz_j", last(&pj))
        .int("nnz_k", last(&pk))
        .int("nnz_ij", last(&pij))
        .int("nnz_jk", last(&pjk))
        .int("nnz_ik", last(&pik));
    for (name, v) in [("indptr_i", pi), ("indptr_j", pj), ("indptr_k", pk), ("indptr_ij", pij), ("indptr_jk", pjk), ("indptr_ik", pik)] {
        args.array(name, Array::I32(v));
    }
    let out = run(&parse(src), &args).unwrap();
    assert_close(&f32s(&out, "z"), &want);
}

const CSR2BSR: &str = r#"
func csr2bsr(a: handle, b: handle, indptr_in: handle, indices_in: handle, indptr_out: handle, indices_out: handle, m_in: i32, n_in: i32, m_out: i32, n_out: i32, nnz_in: i32, nnz_out: i32, blk_size: i32) {
  axis I = dense_fixed(m_in)
  axis J = sparse_variable(I, n_in, nnz_in, indptr_in, indices_in)
  axis I_bsr = dense_fixed(m_out)
  axis J_bsr = sparse_variable(I_bsr, n_out, nnz_out, indptr_out, indices_out)
  axis BI = dense_fixed(blk_size)
  axis BJ = dense_fixed(blk_size)
  buffer A = match_sparse_buffer(a, [I, J], f32)
  buffer B = match_sparse_buffer(b, [I_bsr, J_bsr, BI, BJ], f32)
  sp_iter csr2bsr([I, J], "SS") as [i, j] {
    B[i // blk_size, j // blk_size, i % blk_size, j % blk_size] = A[i, j]
  }
}
"#;

fn csr2bsr_args(csr: &Csr, a: &[f32], blocks: &Csr, blk: usize) -> Args {
    let mut args = Args::new();
    args.array("a", Array::F32(a.to_vec()))
        .array("b", Array::F32(vec![0.0; blocks.nnz() * blk * blk]))
        .array("indptr_in", Array::I32(csr.indptr.clone()))
        .array("indices_in", Array::I32(csr.indices.clone()))
        .array("indptr_out", Array::I32(blocks.indptr.clone()))
        .array("indices_out", Array::I32(blocks.indices.clone()))
        .int("m_in", csr.rows as i64)
        .int("n_in", csr.cols as i64)
        .int("m_out", blocks.rows as i64)
        .int("n_out", blocks.cols as i64)
        .int("nnz_in", csr.nnz() as i64)
        .int("nnz_out", blocks.nnz() as i64)
        .int("blk_size", blk as i64);
    args
}

#[test]
fn csr2bsr_stores_through_computed_coordinates() {
    let mut rng = Rng::new(11);
    let (m, n, blk) = (8, 6, 2);
    let csr = Csr::random(&mut rng, m, n, 0.25);
    let a = rng.vals(csr.nnz());
    let dense = csr.to_dense(&a);
    // Block structure: the blocks holding at least one nonzero.
    let mut block_dense = vec![0.0f32; (m / blk) * (n / blk)];
    for i in 0..m {
        for p in csr.row(i) {
            block_dense[(i / blk) * (n / blk) + csr.indices[p] as usize / blk] = 1.0;
        }
    }
    let mut blocks = Csr { rows: m / blk, cols: n / blk, indptr: vec![0], indices: vec![] };
    for bi in 0..m / blk {
        for bj in 0..n / blk {
            if block_dense[bi * (n / blk) + bj] != 0.0 {
                blocks.indices.push(bj as i32);
            }
        }
        blocks.indptr.push(blocks.indices.len() as i32);
    }
    let mut want = Vec::new();
    for bi in 0..blocks.rows {
        for p in blocks.row(bi) {
            let bj = blocks.indices[p] as usize;
            for x in 0..blk {
                for y in 0..blk {
                    want.push(dense[(bi * blk + x) * n + bj * blk + y]);
                }
            }
        }
    }
    let out = run(&parse(CSR2BSR), &csr2bsr_args(&csr, &a, &blocks, blk)).unwrap();
    assert_close(&f32s(&out, "b"), &want);

    // Without the last block, the store to its coordinates is outside the structure.
    let last_row = (0..blocks.rows).rev().find(|&r| !blocks.row(r).is_empty()).unwrap();
    let mut fewer = blocks.clone();
    fewer.indices.remove(fewer.indptr[last_row + 1] as usize - 1);
    for p in &mut fewer.indptr[last_row + 1..] {
        *p -= 1;
    }
    let err = run(&parse(CSR2BSR), &csr2bsr_args(&csr, &a, &fewer, blk)).unwrap_err();
    assert!(matches!(err, sparsec_interp::InterpError::AbsentStore { ref buffer, .. } if buffer == "B"), "{err}");
    assert_eq!(line_of(CSR2BSR, err.span()), line_containing(CSR2BSR, "B[i // blk_size"), "{err}");
}
