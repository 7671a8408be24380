//! MLIR's own sparsifier as a peer (`sparsec bench --compare sparsifier`): CSR SpMM or SpMV
//! written the way the sparse_tensor dialect's users write it (`linalg.matmul`/`matvec`
//! over a `#CSR` tensor built by `sparse_tensor.assemble` from the caller's arrays), lowered
//! by the upstream `sparsifier` pipeline and JIT-compiled in this process.
//!
//! Unlike sparsec's kernels, which are built with operation builders, this module is parsed
//! from its text: the text is the peer's input, as a sparsifier user would write it.
//! The pipeline runs without its runtime library (`enable-runtime-library=false`), and
//! vectorises by the host's vector width (`vl`). It lowers `scf.parallel` to serial loops, so
//! the peer runs on one thread.

use crate::context::{new_context, run_pipeline, verify};
use crate::cpu::{host_vector_bytes, Jit};
use crate::error::{MlirError, Result};
use melior::ir::Module;
use std::ffi::c_void;

/// What the sparsifier computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SparsifierOp {
    /// `C = A·B`: B (`cols × feat`) and C (`rows × feat`) dense, row-major.
    Spmm {
        /// Columns of B and C.
        feat: usize,
    },
    /// `y = A·x`.
    Spmv,
}

impl SparsifierOp {
    /// Columns of the dense operand and the output (1 for SpMV).
    pub fn width(self) -> usize {
        match self {
            SparsifierOp::Spmm { feat } => feat,
            SparsifierOp::Spmv => 1,
        }
    }
}

/// A rank-`N` strided memref descriptor, as the C interface passes it.
#[repr(C)]
struct Descriptor<const N: usize> {
    allocated: *mut c_void,
    aligned: *mut c_void,
    offset: i64,
    sizes: [i64; N],
    strides: [i64; N],
}

impl<const N: usize> Descriptor<N> {
    /// A row-major descriptor of `len` elements at `ptr` with shape `sizes`.
    fn new(ptr: *mut c_void, sizes: [i64; N]) -> Self {
        let mut strides = [1i64; N];
        for d in (0..N.saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * sizes[d + 1];
        }
        Descriptor { allocated: ptr, aligned: ptr, offset: 0, sizes, strides }
    }
}

/// The sparsifier's kernel for one CSR matrix, compiled for its shape, holding its arrays.
pub struct SparsifierKernel {
    jit: Jit,
    op: SparsifierOp,
    rows: usize,
    cols: usize,
    indptr: Vec<i64>,
    indices: Vec<i64>,
    values: Vec<f32>,
}

impl std::fmt::Debug for SparsifierKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SparsifierKernel").field("op", &self.op).field("rows", &self.rows).field("cols", &self.cols).finish()
    }
}

const ENTRY: &str = "sparsifier_peer";

/// The module the sparsifier lowers for `op` on a `rows × cols` matrix. C (or y) is
/// accumulated into (`outs`), so that bufferization writes the caller's array in place;
/// [`SparsifierKernel::run`] zeroes it first.
pub fn sparsifier_module(op: SparsifierOp, rows: usize, cols: usize) -> String {
    let (dense, out, body) = match op {
        SparsifierOp::Spmm { feat } => (
            format!("tensor<{cols}x{feat}xf32>"),
            format!("tensor<{rows}x{feat}xf32>"),
            "linalg.matmul",
        ),
        SparsifierOp::Spmv => (format!("tensor<{cols}xf32>"), format!("tensor<{rows}xf32>"), "linalg.matvec"),
    };
    let a = format!("tensor<{rows}x{cols}xf32, #CSR>");
    format!(
        r#"#CSR = #sparse_tensor.encoding<{{ map = (i, j) -> (i : dense, j : compressed), posWidth = 64, crdWidth = 64 }}>
module {{
  func.func @{ENTRY}(%pos: tensor<?xi64>, %crd: tensor<?xi64>, %val: tensor<?xf32>, %b: {dense}, %c: {out} {{bufferization.writable = true}}) -> {out} attributes {{ llvm.emit_c_interface }} {{
    %a = sparse_tensor.assemble (%pos, %crd), %val : (tensor<?xi64>, tensor<?xi64>), tensor<?xf32> to {a}
    %r = {body} ins(%a, %b : {a}, {dense}) outs(%c : {out}) -> {out}
    return %r : {out}
  }}
}}
"#
    )
}

/// The pass pipeline: the upstream sparsifier at the host's vector width.
pub fn sparsifier_pipeline() -> String {
    format!("builtin.module(sparsifier{{enable-runtime-library=false vl={}}})", (host_vector_bytes() / 4).max(1))
}

impl SparsifierKernel {
    /// Checks the CSR arrays (so that the compiled code, which trusts them, stays in
    /// bounds), then lowers and JIT-compiles the sparsifier's kernel for them.
    pub fn compile(op: SparsifierOp, rows: usize, cols: usize, indptr: Vec<i64>, indices: Vec<i64>, values: Vec<f32>) -> Result<SparsifierKernel> {
        let bad = |param: &str, message: String| MlirError::BadArgument { param: param.into(), message };
        if indptr.len() != rows + 1 || indptr.first() != Some(&0) {
            return Err(bad("indptr", format!("has {} entries starting at {:?}; a {rows}-row CSR matrix has {} starting at 0", indptr.len(), indptr.first(), rows + 1)));
        }
        if let Some(r) = indptr.windows(2).position(|w| w[1] < w[0]) {
            return Err(bad("indptr", format!("decreases after row {r}")));
        }
        let nnz = indptr[rows] as usize;
        if indices.len() != nnz || values.len() != nnz {
            return Err(bad("indices", format!("{} indices and {} values for {nnz} nonzeros", indices.len(), values.len())));
        }
        if let Some(p) = indices.iter().position(|&c| c < 0 || c as usize >= cols) {
            return Err(bad("indices", format!("entry {p} is {}, outside 0..{cols}", indices[p])));
        }
        let ctx = new_context();
        let text = sparsifier_module(op, rows, cols);
        let mut module = Module::parse(&ctx, &text).ok_or_else(|| MlirError::internal("the sparsifier's module does not parse"))?;
        verify(&ctx, &module)?;
        run_pipeline(&ctx, &mut module, &sparsifier_pipeline())?;
        let jit = Jit::new(&module, 3, false, ENTRY)?;
        Ok(SparsifierKernel { jit, op, rows, cols, indptr, indices, values })
    }

    /// Computes `out = A·dense`: zeroes `out`, then calls the kernel.
    pub fn run(&self, dense: &[f32], out: &mut [f32]) -> Result<()> {
        let feat = self.op.width();
        let bad = |param: &str, want: usize, got: usize| MlirError::BadArgument { param: param.into(), message: format!("{got} elements, expected {want}") };
        if dense.len() != self.cols * feat {
            return Err(bad("dense", self.cols * feat, dense.len()));
        }
        if out.len() != self.rows * feat {
            return Err(bad("out", self.rows * feat, out.len()));
        }
        out.fill(0.0);
        let ptr = |v: *const c_void| v.cast_mut();
        let vector = |p: *const c_void, n: usize| Descriptor::<1>::new(ptr(p), [n as i64]);
        let mut pos = vector(self.indptr.as_ptr().cast(), self.indptr.len());
        let mut crd = vector(self.indices.as_ptr().cast(), self.indices.len());
        let mut val = vector(self.values.as_ptr().cast(), self.values.len());
        // Room for the result descriptor the C interface writes (of `out`, rank 1 or 2).
        let mut result = Descriptor::<2>::new(std::ptr::null_mut(), [0, 0]);
        let mut args: Vec<*mut c_void> = vec![&mut result as *mut _ as *mut c_void];
        let (mut b1, mut c1, mut b2, mut c2);
        match self.op {
            SparsifierOp::Spmm { .. } => {
                b2 = Descriptor::<2>::new(ptr(dense.as_ptr().cast()), [self.cols as i64, feat as i64]);
                c2 = Descriptor::<2>::new(out.as_mut_ptr().cast(), [self.rows as i64, feat as i64]);
                args.extend([&mut pos as *mut _ as *mut c_void, &mut crd as *mut _ as _, &mut val as *mut _ as _, &mut b2 as *mut _ as _, &mut c2 as *mut _ as _]);
            }
            SparsifierOp::Spmv => {
                b1 = vector(dense.as_ptr().cast(), self.cols);
                c1 = vector(out.as_mut_ptr().cast(), self.rows);
                args.extend([&mut pos as *mut _ as *mut c_void, &mut crd as *mut _ as _, &mut val as *mut _ as _, &mut b1 as *mut _ as _, &mut c1 as *mut _ as _]);
            }
        }
        // Each packed argument points to a pointer to its descriptor.
        let mut packed: Vec<*mut c_void> = args.iter_mut().map(|a| a as *mut *mut c_void as *mut c_void).collect();
        // SAFETY: the descriptors describe the checked arrays, which outlive the call; the
        // kernel reads A, B and writes only `out` (and the result descriptor).
        unsafe { self.jit.call(&mut packed) };
        Ok(())
    }
}
