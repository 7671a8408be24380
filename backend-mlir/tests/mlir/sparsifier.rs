//! The sparsifier peer (`SparsifierKernel`): MLIR's own sparsifier on CSR SpMM and SpMV,
//! compiled in-process, against an f64 product on every shared and generated matrix; and
//! its refusal of arrays that would take the compiled code out of bounds.

use sparsec_backend_mlir::{sparsifier_module, SparsifierKernel, SparsifierOp};
use sparsec_testkit::{all_matrices, check_close, Mat, Rng};

fn kernel(m: &Mat, op: SparsifierOp) -> SparsifierKernel {
    let ptr = m.indptr.iter().map(|&x| x as i64).collect();
    let idx = m.indices.iter().map(|&x| x as i64).collect();
    SparsifierKernel::compile(op, m.rows, m.cols, ptr, idx, m.vals.clone()).unwrap_or_else(|e| panic!("{op:?}: {e}"))
}

/// A·B in f64, rounded to f32.
fn product(m: &Mat, b: &[f32], feat: usize) -> Vec<f32> {
    let mut out = vec![0f32; m.rows * feat];
    for i in 0..m.rows {
        for k in 0..feat {
            let s: f64 = m.row(i).iter().zip(m.row_vals(i)).map(|(&j, &v)| f64::from(v) * f64::from(b[j * feat + k])).sum();
            out[i * feat + k] = s as f32;
        }
    }
    out
}

#[test]
fn the_sparsifier_peer_computes_spmm_and_spmv_on_every_matrix() {
    let mut rng = Rng::new(11);
    for (name, m) in all_matrices() {
        for op in [SparsifierOp::Spmm { feat: 5 }, SparsifierOp::Spmv] {
            let feat = op.width();
            let k = kernel(&m, op);
            let b = rng.vec(m.cols * feat);
            // Garbage in the output: the kernel must overwrite it, not accumulate into it.
            let mut out = vec![f32::NAN; m.rows * feat];
            for _ in 0..2 {
                k.run(&b, &mut out).unwrap();
                check_close(&out, &product(&m, &b, feat), 1e-4).unwrap_or_else(|e| panic!("{name} {op:?}{e}"));
            }
        }
    }
}

#[test]
fn the_sparsifier_peer_is_the_upstream_dialect_on_a_csr_encoding() {
    let text = sparsifier_module(SparsifierOp::Spmm { feat: 8 }, 4, 5);
    for part in ["(i : dense, j : compressed)", "sparse_tensor.assemble", "linalg.matmul ins(%a, %b : tensor<4x5xf32, #CSR>, tensor<5x8xf32>)"] {
        assert!(text.contains(part), "{part} missing from\n{text}");
    }
}

#[test]
fn the_sparsifier_peer_refuses_arrays_out_of_bounds() {
    let compile = |ptr: Vec<i64>, idx: Vec<i64>, vals: Vec<f32>| SparsifierKernel::compile(SparsifierOp::Spmv, 2, 3, ptr, idx, vals).map(|_| ()).unwrap_err().to_string();
    assert!(compile(vec![0, 1], vec![0], vec![1.0]).contains("a 2-row CSR matrix has 3"));
    assert!(compile(vec![0, 2, 1], vec![0], vec![1.0]).contains("decreases after row 1"));
    assert!(compile(vec![0, 1, 2], vec![0], vec![1.0]).contains("1 indices and 1 values for 2 nonzeros"));
    assert!(compile(vec![0, 1, 2], vec![0, 3], vec![1.0, 2.0]).contains("entry 1 is 3, outside 0..3"));
    let k = SparsifierKernel::compile(SparsifierOp::Spmv, 2, 3, vec![0, 1, 2], vec![0, 2], vec![1.0, 2.0]).unwrap();
    let e = k.run(&[1.0; 2], &mut [0.0; 2]).unwrap_err().to_string();
    assert!(e.contains("`dense`: 2 elements, expected 3"), "{e}");
}
