//! The 19 workloads with their inputs and dense oracles, built from any matrix.
//!
//! Oracles are plain Rust over dense data, accumulating in f32 in the order of the program.
//! Output arrays start filled with a sentinel (7.0), so a missing `init` shows up.

use crate::{Mat, Rng};
use sparsec::ir::data::{Args, Array};

/// One run: the arguments and the expected contents of the output arrays.
pub struct Case {
    pub args: Args,
    pub expected: Vec<(&'static str, Vec<f32>)>,
}

/// Calls macro `$m` with the workload names that are Rust identifiers in snake case (every
/// workload but `square_sum_two_K`), so that test files generate one test per workload from
/// this one list: `sparsec_testkit::with_workloads!(my_tests);`.
#[macro_export]
macro_rules! with_workloads {
    ($m:ident) => {
        $m! {
            csrmm, csrmm_dense_iter, segment_reduce, csr_reduce, bsrmm, ellmm, csr_element_wise, hyper_gnn, bmm,
            sddmm, fused_sddmm, square_sum, fused_reduction_4d_2d, fused_reduction_4d_3d, rgcn_homo_forward,
            rgcn_hetero_forward, sparse_softmax, csr2bsr
        }
    };
}

/// The workload names, as in `tests/workloads/<name>.sptir`.
pub const WORKLOADS: [&str; 19] = [
    "csrmm",
    "csrmm_dense_iter",
    "bsrmm",
    "ellmm",
    "segment_reduce",
    "csr_reduce",
    "csr_element_wise",
    "sparse_softmax",
    "sddmm",
    "fused_sddmm",
    "hyper_gnn",
    "rgcn_homo_forward",
    "rgcn_hetero_forward",
    "square_sum",
    "square_sum_two_K",
    "fused_reduction_4d_2d",
    "fused_reduction_4d_3d",
    "bmm",
    "csr2bsr",
];

/// The run of workload `name` on matrix `m`, or `None` when the workload does not apply.
pub fn case(name: &str, m: &Mat, rng: &mut Rng) -> Option<Case> {
    match name {
        "csrmm" => build_csrmm(m, rng),
        "csrmm_dense_iter" => build_csrmm_dense_iter(m, rng),
        "bsrmm" => build_bsrmm(m, rng),
        "ellmm" => build_ellmm(m, rng),
        "segment_reduce" => build_segment_reduce(m, rng),
        "csr_reduce" => build_csr_reduce(m, rng),
        "csr_element_wise" => build_csr_element_wise(m, rng),
        "sparse_softmax" => build_sparse_softmax(m, rng),
        "sddmm" => build_sddmm(m, rng),
        "fused_sddmm" => build_fused_sddmm(m, rng),
        "hyper_gnn" => build_hyper_gnn(m, rng),
        "rgcn_homo_forward" => build_rgcn_homo_forward(m, rng),
        "rgcn_hetero_forward" => build_rgcn_hetero_forward(m, rng),
        "square_sum" => build_square_sum(m, rng),
        "square_sum_two_K" => build_square_sum_two_k(m, rng),
        "fused_reduction_4d_2d" => build_fused_reduction_4d_2d(m, rng),
        "fused_reduction_4d_3d" => build_fused_reduction_4d_3d(m, rng),
        "bmm" => build_bmm(m, rng),
        "csr2bsr" => build_csr2bsr(m, rng),
        _ => panic!("unknown workload {name}"),
    }
}

fn f32s(v: &[f32]) -> Array {
    Array::F32(v.to_vec())
}

fn i32s(v: &[usize]) -> Array {
    Array::I32(v.iter().map(|&x| x as i32).collect())
}

/// An output array before the run: filled with a sentinel that no oracle produces.
fn zeros(n: usize) -> Array {
    Array::F32(vec![7.0; n])
}

// ---- SpMM family ---------------------------------------------------------------------------

/// A CSR SpMM case (`csrmm`'s parameters) of `m` with `feat` features, random values.
pub fn spmm_case(m: &Mat, rng: &mut Rng, feat: usize) -> Case {
    let b = rng.vec(m.cols * feat);
    let dense = m.to_dense();
    let mut c = vec![0f32; m.rows * feat];
    for i in 0..m.rows {
        for k in 0..feat {
            let mut acc = 0f32;
            for j in 0..m.cols {
                acc += dense[i * m.cols + j] * b[j * feat + k];
            }
            c[i * feat + k] = acc;
        }
    }
    Case { args: csrmm_args(m, b, feat, 7.0), expected: vec![("c", c)] }
}

/// Arguments of `csrmm` on `m` with dense input `b` (`cols × feat`) and the output `c`
/// filled with `fill`.
pub fn csrmm_args(m: &Mat, b: Vec<f32>, feat: usize, fill: f32) -> Args {
    let mut args = Args::new();
    args.array("a", f32s(&m.vals))
        .array("b", Array::F32(b))
        .array("c", Array::F32(vec![fill; m.rows * feat]))
        .array("indptr", i32s(&m.indptr))
        .array("indices", i32s(&m.indices));
    args.int("m", m.rows as i64).int("n", m.cols as i64).int("feat_size", feat as i64).int("nnz", m.nnz() as i64);
    args
}

/// A run of `examples/csrmm_segments.sptir`: `m` cut into segments of at most `max_len`
/// entries (`formats::compose::RowSegments`), a random `b` of `feat` columns, `c` filled with
/// the sentinel, and `c = A · B` summed row by row from the CSR arrays.
pub fn segments_case(m: &Mat, rng: &mut Rng, feat: usize, max_len: usize) -> Case {
    let csr = m.to_csr();
    let segs = sparsec::formats::compose::RowSegments::from_csr(&csr, max_len).expect("max_len > 0");
    let b = rng.vec(m.cols * feat);
    let mut c = vec![0f32; m.rows * feat];
    for i in 0..m.rows {
        for p in m.indptr[i]..m.indptr[i + 1] {
            for k in 0..feat {
                c[i * feat + k] += m.vals[p] * b[m.indices[p] * feat + k];
            }
        }
    }
    let mut args = csrmm_args(m, b, feat, 7.0);
    args.arrays.shift_remove("indptr");
    let usizes = |v: &[i64]| v.iter().map(|&x| x as usize).collect::<Vec<_>>();
    args.array("seg_ptr", i32s(&usizes(segs.seg_ptr()))).array("seg_row", i32s(&usizes(segs.seg_row())));
    args.int("nseg", segs.len() as i64);
    Case { args, expected: vec![("c", c)] }
}

/// Arguments of `examples/spmv.sptir` on `m` with input vector `x` (`cols` long) and the
/// output `y` filled with `fill`.
pub fn spmv_args(m: &Mat, x: Vec<f32>, fill: f32) -> Args {
    let mut args = Args::new();
    args.array("a", f32s(&m.vals))
        .array("x", Array::F32(x))
        .array("y", Array::F32(vec![fill; m.rows]))
        .array("indptr", i32s(&m.indptr))
        .array("indices", i32s(&m.indices));
    args.int("m", m.rows as i64).int("n", m.cols as i64).int("nnz", m.nnz() as i64);
    args
}

fn build_csrmm(m: &Mat, rng: &mut Rng) -> Option<Case> {
    Some(spmm_case(m, rng, 4))
}

/// Iterates all rows × columns: keeps to a leading 384 × 384 window of the big matrices.
fn build_csrmm_dense_iter(m: &Mat, rng: &mut Rng) -> Option<Case> {
    Some(spmm_case(&m.window(384, 384), rng, 2))
}

fn block_matrix(m: &Mat, blk: usize) -> (usize, usize, Vec<usize>, Vec<usize>, Vec<f32>) {
    // BSR of `m` with zero padding of partial blocks: (nb, mb, indptr, indices, values).
    let nb = m.rows.div_ceil(blk);
    let mb = m.cols.div_ceil(blk);
    let mut indptr = vec![0usize];
    let mut indices = Vec::new();
    let mut values = Vec::new();
    let dense = m.to_dense();
    for bi in 0..nb {
        let mut cols: Vec<usize> = (bi * blk..((bi + 1) * blk).min(m.rows))
            .flat_map(|i| m.row(i).iter().map(|&j| j / blk).collect::<Vec<_>>())
            .collect();
        cols.sort_unstable();
        cols.dedup();
        for &bj in &cols {
            indices.push(bj);
            for r in 0..blk {
                for c in 0..blk {
                    let (i, j) = (bi * blk + r, bj * blk + c);
                    values.push(if i < m.rows && j < m.cols { dense[i * m.cols + j] } else { 0.0 });
                }
            }
        }
        indptr.push(indices.len());
    }
    (nb, mb, indptr, indices, values)
}

fn block_spmm_oracle(m: &Mat, blk: usize, b: &[f32], feat: usize) -> Vec<f32> {
    // C = A · B on the padded block grid, accumulating blocks in order, then bj within a block.
    let (nb, _, indptr, indices, values) = block_matrix(m, blk);
    let mut c = vec![0f32; nb * blk * feat];
    for i in 0..nb {
        for bi in 0..blk {
            for f in 0..feat {
                let mut acc = 0f32;
                for bj in 0..blk {
                    for p in indptr[i]..indptr[i + 1] {
                        acc += values[(p * blk + bi) * blk + bj] * b[(indices[p] * blk + bj) * feat + f];
                    }
                }
                c[(i * blk + bi) * feat + f] = acc;
            }
        }
    }
    c
}

fn build_bsrmm(m: &Mat, rng: &mut Rng) -> Option<Case> {
    let (blk, feat) = (4, 2);
    let (nb, mb, indptr, indices, values) = block_matrix(m, blk);
    let b = rng.vec(mb * blk * feat);
    let c = block_spmm_oracle(m, blk, &b, feat);
    let mut args = Args::new();
    args.array("a", f32s(&values))
        .array("b", f32s(&b))
        .array("c", zeros(nb * blk * feat))
        .array("indptr", i32s(&indptr))
        .array("indices", i32s(&indices));
    args.int("nb", nb as i64).int("mb", mb as i64).int("nnzb", indices.len() as i64);
    args.int("blk", blk as i64).int("feat_size", feat as i64);
    Some(Case { args, expected: vec![("c", c)] })
}

fn build_ellmm(m: &Mat, rng: &mut Rng) -> Option<Case> {
    let (blk, feat) = (2, 2);
    let (nb, mb, indptr, indices, values) = block_matrix(m, blk);
    let col = (0..nb).map(|i| indptr[i + 1] - indptr[i]).max().unwrap_or(0).max(1);
    // Pad every block row to `col` blocks: padding repeats a valid column with zero values.
    let mut ell_idx = Vec::new();
    let mut ell_val = Vec::new();
    for i in 0..nb {
        let row = indptr[i]..indptr[i + 1];
        for p in row.clone() {
            ell_idx.push(indices[p]);
            ell_val.extend_from_slice(&values[p * blk * blk..(p + 1) * blk * blk]);
        }
        for _ in row.len()..col {
            ell_idx.push(if row.is_empty() { 0 } else { indices[row.end - 1] });
            ell_val.extend(std::iter::repeat_n(0.0, blk * blk));
        }
    }
    let b = rng.vec(mb * blk * feat);
    // ellmm reduces j outside bj: accumulate in that order.
    let mut c = vec![0f32; nb * blk * feat];
    for i in 0..nb {
        for bi in 0..blk {
            for f in 0..feat {
                let mut acc = 0f32;
                for j in 0..col {
                    for bj in 0..blk {
                        let p = i * col + j;
                        acc += ell_val[(p * blk + bi) * blk + bj] * b[(ell_idx[p] * blk + bj) * feat + f];
                    }
                }
                c[(i * blk + bi) * feat + f] = acc;
            }
        }
    }
    let mut args = Args::new();
    args.array("a", f32s(&ell_val)).array("b", f32s(&b)).array("c", zeros(nb * blk * feat));
    args.array("indices", i32s(&ell_idx));
    args.int("nb", nb as i64).int("mb", mb as i64).int("feat_size", feat as i64);
    args.int("col", col as i64).int("blk", blk as i64);
    Some(Case { args, expected: vec![("c", c)] })
}

// ---- reductions and element-wise -----------------------------------------------------------

fn row_sums(m: &Mat) -> Vec<f32> {
    (0..m.rows).map(|i| m.row_vals(i).iter().fold(0f32, |a, v| a + v)).collect()
}

fn build_segment_reduce(m: &Mat, _rng: &mut Rng) -> Option<Case> {
    let mut args = Args::new();
    args.array("a", f32s(&m.vals)).array("b", zeros(m.rows)).array("indptr", i32s(&m.indptr));
    args.int("n", m.rows as i64).int("nnz", m.nnz() as i64);
    Some(Case { args, expected: vec![("b", row_sums(m))] })
}

fn build_csr_reduce(m: &Mat, _rng: &mut Rng) -> Option<Case> {
    let mut args = Args::new();
    args.array("a", f32s(&m.vals)).array("b", zeros(m.rows));
    args.array("indptr", i32s(&m.indptr)).array("indices", i32s(&m.indices));
    args.int("n", m.rows as i64).int("m", m.cols as i64).int("nnz", m.nnz() as i64);
    Some(Case { args, expected: vec![("b", row_sums(m))] })
}

fn build_csr_element_wise(m: &Mat, _rng: &mut Rng) -> Option<Case> {
    let mut args = Args::new();
    args.array("a", f32s(&m.vals)).array("b", zeros(m.nnz()));
    args.array("indptr", i32s(&m.indptr)).array("indices", i32s(&m.indices));
    args.int("m", m.rows as i64).int("n", m.cols as i64).int("nnz", m.nnz() as i64);
    let want = m.vals.iter().map(|v| v * 2.5).collect();
    Some(Case { args, expected: vec![("b", want)] })
}

fn build_sparse_softmax(m: &Mat, rng: &mut Rng) -> Option<Case> {
    if m.rows != m.cols {
        return None;
    }
    let a = rng.vec(m.nnz());
    let mut want = vec![0f32; m.nnz()];
    for i in 0..m.rows {
        let r = m.indptr[i]..m.indptr[i + 1];
        let mx = a[r.clone()].iter().fold(f32::MIN, |x, &y| x.max(y));
        let sum = a[r.clone()].iter().fold(0f32, |s, &v| s + (v - mx).exp());
        for p in r {
            want[p] = (a[p] - mx).exp() / sum;
        }
    }
    let mut args = Args::new();
    args.array("a", f32s(&a)).array("b", zeros(m.nnz()));
    args.array("indptr", i32s(&m.indptr)).array("indices", i32s(&m.indices));
    args.int("n", m.rows as i64).int("nnz", m.nnz() as i64);
    Some(Case { args, expected: vec![("b", want)] })
}

// ---- SDDMM ---------------------------------------------------------------------------------

fn sddmm_case(m: &Mat, rng: &mut Rng) -> Case {
    sddmm_case_of_width(m, rng, 4)
}

/// An SDDMM case (`sddmm`'s parameters) of the pattern of `m` with `feat` features.
pub fn sddmm_case_of_width(m: &Mat, rng: &mut Rng, feat: usize) -> Case {
    let a = rng.vec(m.rows * feat);
    let b = rng.vec(m.cols * feat);
    let mut want = Vec::with_capacity(m.nnz());
    for i in 0..m.rows {
        for &j in m.row(i) {
            want.push((0..feat).fold(0f32, |acc, k| acc + a[i * feat + k] * b[j * feat + k]));
        }
    }
    let mut args = Args::new();
    args.array("a", f32s(&a)).array("b", f32s(&b)).array("c", zeros(m.nnz()));
    args.array("indptr", i32s(&m.indptr)).array("indices", i32s(&m.indices));
    args.int("m", m.rows as i64).int("n", m.cols as i64).int("feat_size", feat as i64).int("nnz", m.nnz() as i64);
    Case { args, expected: vec![("c", want)] }
}

fn build_sddmm(m: &Mat, rng: &mut Rng) -> Option<Case> {
    Some(sddmm_case(m, rng))
}

fn build_fused_sddmm(m: &Mat, rng: &mut Rng) -> Option<Case> {
    Some(sddmm_case(m, rng))
}

// ---- graph workloads -----------------------------------------------------------------------

fn build_hyper_gnn(m: &Mat, rng: &mut Rng) -> Option<Case> {
    // Incidence H = pattern of m (n vertices × m hyperedges); I_T is its transpose.
    let feat = 2;
    let t = m.transpose();
    let x = rng.vec(m.rows * feat);
    let mut y = vec![0f32; m.rows * feat];
    for i in 0..m.rows {
        for f in 0..feat {
            let mut acc = 0f32;
            for &j in m.row(i) {
                for &it in t.row(j) {
                    acc += x[it * feat + f];
                }
            }
            y[i * feat + f] = acc;
        }
    }
    let mut args = Args::new();
    args.array("x", f32s(&x)).array("y", zeros(m.rows * feat));
    args.array("indptr", i32s(&m.indptr)).array("indices", i32s(&m.indices));
    args.array("indptr_T", i32s(&t.indptr)).array("indices_T", i32s(&t.indices));
    args.int("n", m.rows as i64).int("m", m.cols as i64).int("nnz", m.nnz() as i64).int("feat_size", feat as i64);
    Some(Case { args, expected: vec![("y", y)] })
}

fn build_rgcn_homo_forward(m: &Mat, rng: &mut Rng) -> Option<Case> {
    let (r, feat) = (3, 2);
    let etype: Vec<usize> = (0..m.rows).flat_map(|i| m.row(i).iter().map(move |&j| (i + j) % r)).collect();
    let w = rng.vec(r * feat * feat);
    let x = rng.vec(m.cols * feat);
    let mut y = vec![0f32; m.rows * feat];
    for i in 0..m.rows {
        for fo in 0..feat {
            let mut acc = 0f32;
            for p in m.indptr[i]..m.indptr[i + 1] {
                for fi in 0..feat {
                    acc += w[(etype[p] * feat + fo) * feat + fi] * x[m.indices[p] * feat + fi];
                }
            }
            y[i * feat + fo] = acc;
        }
    }
    let mut args = Args::new();
    args.array("etype", i32s(&etype)).array("w", f32s(&w)).array("x", f32s(&x)).array("y", zeros(m.rows * feat));
    args.array("indptr", i32s(&m.indptr)).array("indices", i32s(&m.indices));
    args.int("m", m.rows as i64).int("n", m.cols as i64).int("r", r as i64);
    args.int("feat_size", feat as i64).int("nnz", m.nnz() as i64);
    Some(Case { args, expected: vec![("y", y)] })
}

fn build_rgcn_hetero_forward(m: &Mat, rng: &mut Rng) -> Option<Case> {
    // Relation of edge (i, j) is (i + j) % R; relation r's rows are those with such edges.
    let (nr, feat) = (3, 2);
    let (mut indptr_i, mut indices_i, mut indptr_j, mut indices_j) = (vec![0], vec![], vec![0], vec![]);
    for rel in 0..nr {
        for i in 0..m.rows {
            let cols: Vec<usize> = m.row(i).iter().copied().filter(|&j| (i + j) % nr == rel).collect();
            if !cols.is_empty() {
                indices_i.push(i);
                indices_j.extend(cols);
                indptr_j.push(indices_j.len());
            }
        }
        indptr_i.push(indices_i.len());
    }
    let a = rng.vec(indices_j.len());
    let w = rng.vec(nr * feat * feat);
    let x = rng.vec(m.cols * feat);
    // Loop order of the program: fo, r, i, then reduce j, fi.
    let mut y = vec![0f32; m.rows * feat];
    for fo in 0..feat {
        for rel in 0..nr {
            for pi in indptr_i[rel]..indptr_i[rel + 1] {
                let i = indices_i[pi];
                let mut acc = y[i * feat + fo];
                for pj in indptr_j[pi]..indptr_j[pi + 1] {
                    for fi in 0..feat {
                        acc += a[pj] * w[(rel * feat + fo) * feat + fi] * x[indices_j[pj] * feat + fi];
                    }
                }
                y[i * feat + fo] = acc;
            }
        }
    }
    let mut args = Args::new();
    args.array("a", f32s(&a)).array("w", f32s(&w)).array("x", f32s(&x)).array("y", zeros(m.rows * feat));
    args.array("indptr_i", i32s(&indptr_i)).array("indices_i", i32s(&indices_i));
    args.array("indptr_j", i32s(&indptr_j)).array("indices_j", i32s(&indices_j));
    args.int("m", m.rows as i64).int("n", m.cols as i64).int("num_rels", nr as i64).int("feat_size", feat as i64);
    args.int("nnz_i", indices_i.len() as i64).int("nnz_j", indices_j.len() as i64);
    Some(Case { args, expected: vec![("y", y)] })
}

// ---- multi-level sparse tensors ------------------------------------------------------------

/// Third level below each nonzero (i, j): up to `cap` coordinates of row j.
/// Third level below each nonzero (i, j): the first (or, with `from_end`, the last) `cap`
/// coordinates of row j.
fn third_level(m: &Mat, cap: usize, from_end: bool) -> (Vec<usize>, Vec<usize>) {
    let mut indptr = vec![0];
    let mut indices = Vec::new();
    for i in 0..m.rows {
        for &j in m.row(i) {
            let row = m.row(j % m.rows);
            let take = cap.min(row.len());
            let part = if from_end { &row[row.len() - take..] } else { &row[..take] };
            indices.extend_from_slice(part);
            indptr.push(indices.len());
        }
    }
    (indptr, indices)
}

fn build_square_sum(m: &Mat, rng: &mut Rng) -> Option<Case> {
    let (indptr_k, indices_k) = third_level(m, 4, false);
    let a = rng.vec(indices_k.len());
    let mut b = vec![0f32; m.rows];
    for i in 0..m.rows {
        let mut acc = 0f32;
        for p in m.indptr[i]..m.indptr[i + 1] {
            for q in indptr_k[p]..indptr_k[p + 1] {
                acc += a[q];
            }
        }
        b[i] = acc;
    }
    let mut args = Args::new();
    args.array("a", f32s(&a)).array("b", zeros(m.rows));
    args.array("indptr_j", i32s(&m.indptr)).array("indices_j", i32s(&m.indices));
    args.array("indptr_k", i32s(&indptr_k)).array("indices_k", i32s(&indices_k));
    args.int("nnz_j", m.nnz() as i64).int("nnz_k", indices_k.len() as i64);
    args.int("M", m.rows as i64).int("N1", m.cols as i64).int("N2", m.cols as i64);
    Some(Case { args, expected: vec![("b", b)] })
}

fn build_square_sum_two_k(m: &Mat, rng: &mut Rng) -> Option<Case> {
    // K0 and K1 hold as many coordinates per row (both have nnz_k), K0 from the end of row j and
    // K1 from its start: where they differ, A (over K0) is absent and reads 0.
    let (indptr_k1, indices_k1) = third_level(m, 3, false);
    let (indptr_k0, indices_k0) = third_level(m, 3, true);
    let a = rng.vec(indices_k0.len());
    let mut b = vec![0f32; m.rows];
    for i in 0..m.rows {
        let mut acc = 0f32;
        for p in m.indptr[i]..m.indptr[i + 1] {
            for q in indptr_k1[p]..indptr_k1[p + 1] {
                let k = indices_k1[q];
                let v = (indptr_k0[p]..indptr_k0[p + 1]).find(|&s| indices_k0[s] == k).map_or(0.0, |s| a[s]);
                acc += v;
            }
        }
        b[i] = acc;
    }
    let mut args = Args::new();
    args.array("a", f32s(&a)).array("b", zeros(m.rows));
    args.array("indptr_j", i32s(&m.indptr)).array("indices_j", i32s(&m.indices));
    args.array("indptr_k0", i32s(&indptr_k0)).array("indices_k0", i32s(&indices_k0));
    args.array("indptr_k1", i32s(&indptr_k1)).array("indices_k1", i32s(&indices_k1));
    args.int("nnz_j", m.nnz() as i64).int("nnz_k", indices_k1.len() as i64);
    args.int("M", m.rows as i64).int("N1", m.cols as i64).int("N2", m.cols as i64);
    Some(Case { args, expected: vec![("b", b)] })
}

/// Ragged lengths derived from the matrix: a dense-variable chain I → J → K → L.
struct Ragged {
    n: usize,
    indptr_j: Vec<usize>,
    indptr_k: Vec<usize>,
    indptr_l: Vec<usize>,
}

fn ragged(m: &Mat) -> Ragged {
    let n = m.rows.min(200);
    let len = |x: usize| x % 4;
    let mut indptr_j = vec![0];
    for i in 0..n {
        indptr_j.push(indptr_j[i] + len(m.row(i).len()) + (i % 2));
    }
    let nj = indptr_j[n];
    let mut indptr_k = vec![0];
    for p in 0..nj {
        indptr_k.push(indptr_k[p] + len(m.indices.get(p).copied().unwrap_or(p)));
    }
    let nk = indptr_k[nj];
    let mut indptr_l = vec![0];
    for q in 0..nk {
        indptr_l.push(indptr_l[q] + 1 + len(q * 7 + 3));
    }
    Ragged { n, indptr_j, indptr_k, indptr_l }
}

fn ragged_args(r: &Ragged, x: &[f32], y_len: usize) -> Args {
    let mut args = Args::new();
    args.array("x", f32s(x)).array("y", zeros(y_len));
    args.array("indptr_j", i32s(&r.indptr_j)).array("indptr_k", i32s(&r.indptr_k)).array("indptr_l", i32s(&r.indptr_l));
    args.int("n", r.n as i64).int("nnz_j", *r.indptr_j.last().unwrap() as i64);
    args.int("nnz_k", *r.indptr_k.last().unwrap() as i64).int("nnz_l", *r.indptr_l.last().unwrap() as i64);
    args
}

fn build_fused_reduction_4d_2d(m: &Mat, rng: &mut Rng) -> Option<Case> {
    let r = ragged(m);
    let nj = *r.indptr_j.last().unwrap();
    let x = rng.vec(*r.indptr_l.last().unwrap());
    let y: Vec<f32> = (0..nj)
        .map(|p| {
            (r.indptr_k[p]..r.indptr_k[p + 1])
                .flat_map(|q| r.indptr_l[q]..r.indptr_l[q + 1])
                .fold(0f32, |acc, s| acc + x[s])
        })
        .collect();
    Some(Case { args: ragged_args(&r, &x, nj), expected: vec![("y", y)] })
}

fn build_fused_reduction_4d_3d(m: &Mat, rng: &mut Rng) -> Option<Case> {
    let r = ragged(m);
    let nk = *r.indptr_k.last().unwrap();
    let x = rng.vec(*r.indptr_l.last().unwrap());
    let y: Vec<f32> = (0..nk).map(|q| (r.indptr_l[q]..r.indptr_l[q + 1]).fold(0f32, |acc, s| acc + x[s])).collect();
    Some(Case { args: ragged_args(&r, &x, nk), expected: vec![("y", y)] })
}

fn build_bmm(m: &Mat, rng: &mut Rng) -> Option<Case> {
    // Batch sizes from the matrix's first row degrees: X[b] is li × lj, Y[b] lj × lk.
    let batch = m.rows.min(6);
    let dims: Vec<(usize, usize, usize)> =
        (0..batch).map(|b| (1 + m.row(b).len() % 5, 1 + (b * 3 + m.nnz()) % 4, 1 + (m.cols + b) % 3)).collect();
    let mut ind = [vec![0usize], vec![0], vec![0]];
    let (mut ij, mut jk, mut ik) = (vec![0usize], vec![0usize], vec![0usize]);
    for &(li, lj, lk) in &dims {
        for (t, l) in [li, lj, lk].into_iter().enumerate() {
            let last = *ind[t].last().unwrap();
            ind[t].push(last + l);
        }
        for _ in 0..li {
            ij.push(ij.last().unwrap() + lj);
            ik.push(ik.last().unwrap() + lk);
        }
        for _ in 0..lj {
            jk.push(jk.last().unwrap() + lk);
        }
    }
    let x = rng.vec(*ij.last().unwrap());
    let y = rng.vec(*jk.last().unwrap());
    let mut z = vec![0f32; *ik.last().unwrap()];
    for (b, &(li, lj, lk)) in dims.iter().enumerate() {
        for i in 0..li {
            let row_i = ind[0][b] + i;
            for k in 0..lk {
                let mut acc = 0f32;
                for j in 0..lj {
                    acc += x[ij[row_i] + j] * y[jk[ind[1][b] + j] + k];
                }
                z[ik[row_i] + k] = acc;
            }
        }
    }
    let mut args = Args::new();
    args.array("x", f32s(&x)).array("y", f32s(&y)).array("z", zeros(z.len()));
    for (p, v) in [("indptr_i", &ind[0]), ("indptr_j", &ind[1]), ("indptr_k", &ind[2])] {
        args.array(p, i32s(v));
    }
    args.array("indptr_ij", i32s(&ij)).array("indptr_jk", i32s(&jk)).array("indptr_ik", i32s(&ik));
    args.int("batch_size", batch as i64);
    for (s, v) in [("nnz_i", &ind[0]), ("nnz_j", &ind[1]), ("nnz_k", &ind[2]), ("nnz_ij", &ij), ("nnz_jk", &jk), ("nnz_ik", &ik)] {
        args.int(s, *v.last().unwrap() as i64);
    }
    Some(Case { args, expected: vec![("z", z)] })
}

fn build_csr2bsr(m: &Mat, _rng: &mut Rng) -> Option<Case> {
    let blk = 4;
    let (nb, mb, indptr_out, indices_out, _) = block_matrix(m, blk);
    // Scatter every nonzero into its block independently of `block_matrix`'s values.
    let mut want = vec![0f32; indices_out.len() * blk * blk];
    for i in 0..m.rows {
        for (p, &j) in m.row(i).iter().enumerate() {
            let (bi, bj) = (i / blk, j / blk);
            let pos = (indptr_out[bi]..indptr_out[bi + 1]).find(|&q| indices_out[q] == bj).unwrap();
            want[(pos * blk + i % blk) * blk + j % blk] = m.row_vals(i)[p];
        }
    }
    let mut args = Args::new();
    args.array("a", f32s(&m.vals)).array("b", Array::F32(vec![0.0; want.len()]));
    args.array("indptr_in", i32s(&m.indptr)).array("indices_in", i32s(&m.indices));
    args.array("indptr_out", i32s(&indptr_out)).array("indices_out", i32s(&indices_out));
    args.int("m_in", m.rows as i64).int("n_in", m.cols as i64).int("m_out", nb as i64).int("n_out", mb as i64);
    args.int("nnz_in", m.nnz() as i64).int("nnz_out", indices_out.len() as i64).int("blk_size", blk as i64);
    Some(Case { args, expected: vec![("b", want)] })
}

#[cfg(test)]
mod tests {
    /// `with_workloads!` names every workload but `square_sum_two_K`, which is not snake case.
    #[test]
    fn the_workload_macro_lists_every_workload() {
        macro_rules! names {
            ($($n:ident),*) => {
                vec![$(stringify!($n)),*]
            };
        }
        let mut listed: Vec<&str> = crate::with_workloads!(names);
        listed.push("square_sum_two_K");
        listed.sort_unstable();
        let mut all = super::WORKLOADS.to_vec();
        all.sort_unstable();
        assert_eq!(listed, all);
    }
}
