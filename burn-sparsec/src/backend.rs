//! The backend extension: sparse operations on tensor primitives, implemented for the CubeCL
//! backend by launching sparsec kernels on Burn's device buffers, for the Flex (CPU) backend by
//! running the same programs JIT-compiled by the MLIR backend on the host data, and for
//! `Autodiff<B>` over either with hand-written backward passes.
//!
//! Callers (the public functions of this crate) validate shapes, dtypes and devices and build
//! the kernels before calling in, so the implementations below only see well-formed input.

use crate::kernels::{HostArg, Kernel};
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::wgpu::{CubeBackend, CubeTensor};
use burn::backend::{backend_extension, Autodiff, Backend, DType, Flex, Shape, TensorData, TensorMetadata};
use burn::tensor::FloatDType;
use burn_cubecl::kernel::{cast, into_contiguous};
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use sparsec_backend_cubecl::DeviceArg;
use sparsec_ir::data::Array;

/// The sparse operations sparsec provides to Burn, on tensor primitives.
///
/// `indptr`/`indices` describe a CSR pattern of `rows × cols`; `t_indptr`, `t_indices` and
/// `t_perm` describe its transpose (`t_perm[q]` is the position in the original of the
/// transpose's `q`-th entry). The transpose is only read by backward passes.
#[backend_extension(Cube, Flex, Autodiff)]
pub trait SparseBackend: Backend {
    /// CSR SpMM: `C[rows, f] = A · rhs` with `A`'s entries in `values` and `rhs` of `[cols, f]`.
    #[allow(clippy::too_many_arguments)]
    fn csr_spmm(
        indptr: IntTensor<Self>,
        indices: IntTensor<Self>,
        t_indptr: IntTensor<Self>,
        t_indices: IntTensor<Self>,
        t_perm: IntTensor<Self>,
        values: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        rows: usize,
        cols: usize,
    ) -> FloatTensor<Self>;

    /// `relu(A · rhs + bias)` with `bias` of `[f]`, in one program.
    #[allow(clippy::too_many_arguments)]
    fn csr_spmm_bias_relu(
        indptr: IntTensor<Self>,
        indices: IntTensor<Self>,
        t_indptr: IntTensor<Self>,
        t_indices: IntTensor<Self>,
        t_perm: IntTensor<Self>,
        values: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        rows: usize,
        cols: usize,
    ) -> FloatTensor<Self>;

    /// SDDMM: the values `Σ_k lhs[i, k] · rhs[j, k]` at every entry `(i, j)` of the pattern,
    /// with `lhs` of `[rows, f]` and `rhs` of `[cols, f]`.
    #[allow(clippy::too_many_arguments)]
    fn csr_sddmm(
        indptr: IntTensor<Self>,
        indices: IntTensor<Self>,
        t_indptr: IntTensor<Self>,
        t_indices: IntTensor<Self>,
        t_perm: IntTensor<Self>,
        lhs: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        rows: usize,
        cols: usize,
    ) -> FloatTensor<Self>;

    /// A row operation over the stored entries ([`RowOp`]).
    #[allow(clippy::too_many_arguments)]
    fn csr_row_op(
        op: RowOp,
        indptr: IntTensor<Self>,
        indices: IntTensor<Self>,
        t_indptr: IntTensor<Self>,
        t_indices: IntTensor<Self>,
        t_perm: IntTensor<Self>,
        values: FloatTensor<Self>,
        rows: usize,
        cols: usize,
    ) -> FloatTensor<Self>;

    /// BSR SpMM: `C[nb·blk, f] = A · rhs` with `A` of `nb × mb` blocks of `blk × blk`
    /// (`values` of `nnzb·blk²`, row-major blocks) and `rhs` of `[mb·blk, f]`; `block_rows`
    /// holds the block row of every stored block (for the backward pass).
    #[allow(clippy::too_many_arguments)]
    fn bsr_spmm(
        indptr: IntTensor<Self>,
        indices: IntTensor<Self>,
        block_rows: IntTensor<Self>,
        t_indptr: IntTensor<Self>,
        t_indices: IntTensor<Self>,
        t_perm: IntTensor<Self>,
        values: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        nb: usize,
        mb: usize,
        blk: usize,
    ) -> FloatTensor<Self>;
}

// ---------------------------------------------------------------------------------------------
// The kernels' calls, written once: each operation's operands in its program's parameter
// order. A backend that runs kernels turns them into its own arguments.

/// One operand of a kernel call, in the program's parameter order.
enum Operand<B: Backend> {
    /// An `f32` array.
    Float(FloatTensor<B>),
    /// An `i32` array.
    Int(IntTensor<B>),
    /// The output: a fresh `f32` array of this shape.
    Output(Vec<usize>),
    /// An integer scalar (sizes were checked to fit `i32` when the matrix was built).
    Scalar(usize),
}

/// A backend that runs the shipped kernels on its own tensors.
trait KernelHost: Backend {
    /// Runs `kernel` on `operands` (parameter order) and returns its output. The caller built
    /// the kernel beforehand and checked the operands (the public operations do), so a failure
    /// here is a bug in this crate.
    fn run(kernel: Kernel, operands: Vec<Operand<Self>>) -> FloatTensor<Self>;
}

/// `csrmm` / `csrmm_bias_relu`: `C[rows, feat] = A · rhs` (with `bias` after `rhs`).
fn spmm_call<B: Backend>(
    indptr: IntTensor<B>,
    indices: IntTensor<B>,
    values: FloatTensor<B>,
    rhs: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
    rows: usize,
    cols: usize,
) -> (Kernel, Vec<Operand<B>>) {
    let feat = rhs.shape()[1];
    let nnz = indices.shape().num_elements();
    let kernel = if bias.is_some() { Kernel::CsrmmBiasRelu } else { Kernel::Csrmm };
    let mut ops = vec![Operand::Float(values), Operand::Float(rhs)];
    ops.extend(bias.map(Operand::Float));
    ops.extend([
        Operand::Output(vec![rows, feat]),
        Operand::Int(indptr),
        Operand::Int(indices),
        Operand::Scalar(rows),
        Operand::Scalar(cols),
        Operand::Scalar(feat),
        Operand::Scalar(nnz),
    ]);
    (kernel, ops)
}

/// `sddmm`: `C[nnz]` on the pattern from `lhs[rows, feat]` and `rhs[cols, feat]`.
fn sddmm_call<B: Backend>(
    indptr: IntTensor<B>,
    indices: IntTensor<B>,
    lhs: FloatTensor<B>,
    rhs: FloatTensor<B>,
    rows: usize,
    cols: usize,
) -> (Kernel, Vec<Operand<B>>) {
    let feat = lhs.shape()[1];
    let nnz = indices.shape().num_elements();
    let ops = vec![
        Operand::Float(lhs),
        Operand::Float(rhs),
        Operand::Output(vec![nnz]),
        Operand::Int(indptr),
        Operand::Int(indices),
        Operand::Scalar(rows),
        Operand::Scalar(cols),
        Operand::Scalar(feat),
        Operand::Scalar(nnz),
    ];
    (Kernel::Sddmm, ops)
}

/// A row operation over a CSR matrix's stored entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowOp {
    /// Softmax of every row: the `[nnz]` values `exp(a_ij − max_j a_ij) / Σ_j exp(a_ij −
    /// max_j a_ij)` on the same pattern (`kernels/softmax.sptir`).
    Softmax,
    /// The largest entry of every row, `[rows]` (the lowest finite `f32` for a row without
    /// entries; `kernels/row_max.sptir`).
    Max,
}

impl RowOp {
    /// The kernel that computes it.
    pub fn kernel(self) -> Kernel {
        match self {
            RowOp::Softmax => Kernel::Softmax,
            RowOp::Max => Kernel::RowMax,
        }
    }
}

/// A [`RowOp`]'s kernel call: one operand, the values.
fn row_call<B: Backend>(
    op: RowOp,
    indptr: IntTensor<B>,
    indices: IntTensor<B>,
    values: FloatTensor<B>,
    rows: usize,
    cols: usize,
) -> (Kernel, Vec<Operand<B>>) {
    let nnz = indices.shape().num_elements();
    let out = if op == RowOp::Max { rows } else { nnz };
    let ops = vec![
        Operand::Float(values),
        Operand::Output(vec![out]),
        Operand::Int(indptr),
        Operand::Int(indices),
        Operand::Scalar(rows),
        Operand::Scalar(cols),
        Operand::Scalar(nnz),
    ];
    (op.kernel(), ops)
}

/// `bsrmm`: `C[nb·blk, feat] = A · rhs` for `nb × mb` blocks of `blk × blk`.
fn bsrmm_call<B: Backend>(
    indptr: IntTensor<B>,
    indices: IntTensor<B>,
    values: FloatTensor<B>,
    rhs: FloatTensor<B>,
    nb: usize,
    mb: usize,
    blk: usize,
) -> (Kernel, Vec<Operand<B>>) {
    let feat = rhs.shape()[1];
    let nnzb = indices.shape().num_elements();
    let ops = vec![
        Operand::Float(values),
        Operand::Float(rhs),
        Operand::Output(vec![nb * blk, feat]),
        Operand::Int(indptr),
        Operand::Int(indices),
        Operand::Scalar(nb),
        Operand::Scalar(mb),
        Operand::Scalar(nnzb),
        Operand::Scalar(blk),
        Operand::Scalar(feat),
    ];
    (Kernel::Bsrmm, ops)
}

/// `SparseBackend` for a [`KernelHost`]: every operation is its call, run.
macro_rules! kernel_host_ops {
    ($backend:ty) => {
        impl SparseBackend for $backend {
            fn csr_spmm(
                indptr: IntTensor<Self>,
                indices: IntTensor<Self>,
                _t_indptr: IntTensor<Self>,
                _t_indices: IntTensor<Self>,
                _t_perm: IntTensor<Self>,
                values: FloatTensor<Self>,
                rhs: FloatTensor<Self>,
                rows: usize,
                cols: usize,
            ) -> FloatTensor<Self> {
                let (k, ops) = spmm_call(indptr, indices, values, rhs, None, rows, cols);
                Self::run(k, ops)
            }

            fn csr_spmm_bias_relu(
                indptr: IntTensor<Self>,
                indices: IntTensor<Self>,
                _t_indptr: IntTensor<Self>,
                _t_indices: IntTensor<Self>,
                _t_perm: IntTensor<Self>,
                values: FloatTensor<Self>,
                rhs: FloatTensor<Self>,
                bias: FloatTensor<Self>,
                rows: usize,
                cols: usize,
            ) -> FloatTensor<Self> {
                let (k, ops) = spmm_call(indptr, indices, values, rhs, Some(bias), rows, cols);
                Self::run(k, ops)
            }

            fn csr_sddmm(
                indptr: IntTensor<Self>,
                indices: IntTensor<Self>,
                _t_indptr: IntTensor<Self>,
                _t_indices: IntTensor<Self>,
                _t_perm: IntTensor<Self>,
                lhs: FloatTensor<Self>,
                rhs: FloatTensor<Self>,
                rows: usize,
                cols: usize,
            ) -> FloatTensor<Self> {
                let (k, ops) = sddmm_call(indptr, indices, lhs, rhs, rows, cols);
                Self::run(k, ops)
            }

            fn csr_row_op(
                op: RowOp,
                indptr: IntTensor<Self>,
                indices: IntTensor<Self>,
                _t_indptr: IntTensor<Self>,
                _t_indices: IntTensor<Self>,
                _t_perm: IntTensor<Self>,
                values: FloatTensor<Self>,
                rows: usize,
                cols: usize,
            ) -> FloatTensor<Self> {
                let (k, ops) = row_call(op, indptr, indices, values, rows, cols);
                Self::run(k, ops)
            }

            fn bsr_spmm(
                indptr: IntTensor<Self>,
                indices: IntTensor<Self>,
                _block_rows: IntTensor<Self>,
                _t_indptr: IntTensor<Self>,
                _t_indices: IntTensor<Self>,
                _t_perm: IntTensor<Self>,
                values: FloatTensor<Self>,
                rhs: FloatTensor<Self>,
                nb: usize,
                mb: usize,
                blk: usize,
            ) -> FloatTensor<Self> {
                let (k, ops) = bsrmm_call(indptr, indices, values, rhs, nb, mb, blk);
                Self::run(k, ops)
            }
        }
    };
}

kernel_host_ops!(CubeBackend);
kernel_host_ops!(Flex);

// ---------------------------------------------------------------------------------------------
// CubeCL: launch the compiled programs on the tensors' buffers.

/// A contiguous buffer of `dtype` (cast if needed) as a kernel argument.
fn buffer(t: CubeTensor, dtype: DType) -> (CubeTensor, DeviceArg) {
    let t = into_contiguous(cast(t, dtype));
    let len = t.meta.shape().num_elements();
    let arg = DeviceArg::buffer(t.handle.clone(), len);
    (t, arg)
}

impl KernelHost for CubeBackend {
    fn run(kernel: Kernel, operands: Vec<Operand<Self>>) -> CubeTensor {
        let prog = match kernel.compiled() {
            Ok(p) => p,
            Err(e) => panic!("burn-sparsec: kernel used before it was built: {e}"),
        };
        // The buffers live until the launch is queued; the output is made beside the first.
        let mut keep = Vec::new();
        let mut out = None;
        let mut args = Vec::with_capacity(operands.len());
        for op in operands {
            match op {
                Operand::Float(t) => {
                    let (t, arg) = buffer(t, DType::F32);
                    keep.push(t);
                    args.push(arg);
                }
                Operand::Int(t) => {
                    let (t, arg) = buffer(t, DType::I32);
                    keep.push(t);
                    args.push(arg);
                }
                Operand::Output(shape) => {
                    let Some(like) = keep.first() else {
                        panic!("burn-sparsec: {}: output before inputs", kernel.name())
                    };
                    let t = empty_device_contiguous_dtype(
                        like.client.clone(),
                        like.device.clone(),
                        Shape::from(shape),
                        DType::F32,
                    );
                    let len = t.meta.shape().num_elements();
                    args.push(DeviceArg::buffer(t.handle.clone(), len));
                    out = Some(t);
                }
                Operand::Scalar(v) => args.push(DeviceArg::scalar(v as i64)),
            }
        }
        let (Some(out), Some(like)) = (out, keep.first()) else {
            panic!("burn-sparsec: {}: a call without output or inputs", kernel.name())
        };
        if let Err(e) = prog.launch_on(&like.client, args) {
            panic!("burn-sparsec: {} launch refused: {e}", kernel.name());
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Flex (CPU): the programs under the default CPU schedule, JIT-compiled by the MLIR backend
// and run on the tensors' host data.

impl KernelHost for Flex {
    fn run(kernel: Kernel, operands: Vec<Operand<Self>>) -> FlexTensor {
        let read = |t: FlexTensor, float: bool| {
            let data = t.into_data();
            let v = if float {
                data.convert::<f32>().try_into_vec::<f32>().map(Array::F32)
            } else {
                data.convert::<i32>().try_into_vec::<i32>().map(Array::I32)
            };
            HostArg::Array(v.unwrap_or_else(|e| panic!("burn-sparsec: reading a Flex tensor: {e:?}")))
        };
        let mut output = None;
        let mut args = Vec::with_capacity(operands.len());
        for (p, op) in operands.into_iter().enumerate() {
            args.push(match op {
                Operand::Float(t) => read(t, true),
                Operand::Int(t) => read(t, false),
                Operand::Output(shape) => {
                    let len = shape.iter().product();
                    output = Some((p, shape));
                    HostArg::Array(Array::F32(vec![0.0; len]))
                }
                Operand::Scalar(v) => HostArg::Scalar(v as i64),
            });
        }
        let Some((p, shape)) = output else { panic!("burn-sparsec: {}: a call without output", kernel.name()) };
        match kernel.run_cpu(args, p) {
            Ok(out) => FlexTensor::from_data(TensorData::new(out, shape)),
            Err(e) => panic!("burn-sparsec: {e}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Autodiff: forward on the inner backend (CubeCL or Flex), backward through the same kernels.

/// The CSR pattern and its transpose, kept for the backward pass.
#[derive(Clone, Debug)]
struct Pattern<B: SparseBackend> {
    indptr: IntTensor<B>,
    indices: IntTensor<B>,
    t_indptr: IntTensor<B>,
    t_indices: IntTensor<B>,
    t_perm: IntTensor<B>,
    rows: usize,
    cols: usize,
}

impl<B: SparseBackend> Pattern<B> {
    /// `A · rhs` for `A` with this pattern.
    fn spmm(&self, values: FloatTensor<B>, rhs: FloatTensor<B>) -> FloatTensor<B> {
        B::csr_spmm(
            self.indptr.clone(),
            self.indices.clone(),
            self.t_indptr.clone(),
            self.t_indices.clone(),
            self.t_perm.clone(),
            values,
            rhs,
            self.rows,
            self.cols,
        )
    }

    /// `Aᵀ · rhs`: the transpose's values are `values[t_perm]`.
    fn spmm_t(&self, values: FloatTensor<B>, rhs: FloatTensor<B>) -> FloatTensor<B> {
        let tv = B::float_select(values, 0, self.t_perm.clone());
        B::csr_spmm(
            self.t_indptr.clone(),
            self.t_indices.clone(),
            self.indptr.clone(),
            self.indices.clone(),
            self.t_perm.clone(),
            tv,
            rhs,
            self.cols,
            self.rows,
        )
    }

    /// `op` of `values` on this pattern.
    fn row_op(&self, op: RowOp, values: FloatTensor<B>) -> FloatTensor<B> {
        B::csr_row_op(
            op,
            self.indptr.clone(),
            self.indices.clone(),
            self.t_indptr.clone(),
            self.t_indices.clone(),
            self.t_perm.clone(),
            values,
            self.rows,
            self.cols,
        )
    }

    /// The sum of every row of `values` on this pattern, as `[rows, 1]`.
    fn row_sums(&self, values: FloatTensor<B>) -> FloatTensor<B> {
        let ones = B::float_ones(Shape::new([self.cols, 1]), &values.device(), FloatDType::F32);
        self.spmm(values, ones)
    }

    /// `[nnz]` values whose entry `(i, j)` is `per_row[i]` (`per_row` of `[rows, 1]`): SDDMM
    /// against a column of ones.
    fn broadcast_rows(&self, per_row: FloatTensor<B>) -> FloatTensor<B> {
        let ones = B::float_ones(Shape::new([self.cols, 1]), &per_row.device(), FloatDType::F32);
        self.sddmm(per_row, ones)
    }

    /// SDDMM on this pattern.
    fn sddmm(&self, lhs: FloatTensor<B>, rhs: FloatTensor<B>) -> FloatTensor<B> {
        B::csr_sddmm(
            self.indptr.clone(),
            self.indices.clone(),
            self.t_indptr.clone(),
            self.t_indices.clone(),
            self.t_perm.clone(),
            lhs,
            rhs,
            self.rows,
            self.cols,
        )
    }
}

/// Backward of `C = A · B`: `dA = SDDMM(dC, B)` on A's pattern, `dB = Aᵀ · dC`.
#[derive(Debug)]
struct SpmmBackward;

impl<B: SparseBackend> Backward<B, 2> for SpmmBackward {
    type State = (Pattern<B>, FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _c: &mut Checkpointer) {
        let [node_v, node_b] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (pattern, values, rhs) = ops.state;
        if let Some(node) = node_v {
            grads.register::<B>(node.id, pattern.sddmm(grad.clone(), rhs));
        }
        if let Some(node) = node_b {
            grads.register::<B>(node.id, pattern.spmm_t(values, grad));
        }
    }
}

/// Backward of `Y = relu(A · B + bias)`: the ReLU mask from `Y`, then as [`SpmmBackward`];
/// `dbias` sums the masked gradient over rows.
#[derive(Debug)]
struct SpmmBiasReluBackward;

impl<B: SparseBackend> Backward<B, 3> for SpmmBiasReluBackward {
    type State = (Pattern<B>, FloatTensor<B>, FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _c: &mut Checkpointer) {
        let [node_v, node_b, node_bias] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (pattern, values, rhs, out) = ops.state;
        let grad = B::relu_backward(out, grad);
        if let Some(node) = node_v {
            grads.register::<B>(node.id, pattern.sddmm(grad.clone(), rhs));
        }
        if let Some(node) = node_b {
            grads.register::<B>(node.id, pattern.spmm_t(values, grad.clone()));
        }
        if let Some(node) = node_bias {
            let feat = grad.shape()[1];
            let summed = B::float_sum_dim(grad, 0);
            grads.register::<B>(node.id, B::float_reshape(summed, Shape::new([feat])));
        }
    }
}

/// Backward of the SDDMM `C = (L · Rᵀ) ∘ pattern`: `dL = dC · R`, `dR = dCᵀ · L`.
#[derive(Debug)]
struct SddmmBackward;

impl<B: SparseBackend> Backward<B, 2> for SddmmBackward {
    type State = (Pattern<B>, FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _c: &mut Checkpointer) {
        let [node_l, node_r] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (pattern, lhs, rhs) = ops.state;
        if let Some(node) = node_l {
            grads.register::<B>(node.id, pattern.spmm(grad.clone(), rhs));
        }
        if let Some(node) = node_r {
            grads.register::<B>(node.id, pattern.spmm_t(grad, lhs));
        }
    }
}

/// Backward of a [`RowOp`] with output `Y`. Softmax: `dA = Y ∘ (dY − s)` with
/// `s_i = Σ_j Y_ij · dY_ij` broadcast over row `i`; maximum: a row's gradient goes to its
/// entries equal to the maximum, shared evenly among ties (a subgradient). Row sums by SpMM
/// and per-row broadcasts by SDDMM, both against a column of ones.
#[derive(Debug)]
struct RowOpBackward(RowOp);

impl<B: SparseBackend> Backward<B, 1> for RowOpBackward {
    /// The pattern, the values and the output.
    type State = (Pattern<B>, FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _c: &mut Checkpointer) {
        let [node] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (pattern, values, y) = ops.state;
        let Some(node) = node else { return };
        let dx = match self.0 {
            RowOp::Softmax => {
                let s = pattern.broadcast_rows(pattern.row_sums(B::float_mul(y.clone(), grad.clone())));
                B::float_mul(y, B::float_sub(grad, s))
            }
            RowOp::Max => {
                let rows = pattern.rows;
                let at_max = pattern.broadcast_rows(B::float_reshape(y, Shape::new([rows, 1])));
                // 1 where an entry equals its row's maximum, else 0: 1 − sign|x − max| (float
                // operations only, so no backend's boolean storage is assumed).
                let ones = B::float_ones(values.shape(), &values.device(), FloatDType::F32);
                let mask = B::float_sub(ones, B::float_sign(B::float_abs(B::float_sub(values, at_max))));
                let ties = pattern.row_sums(mask.clone());
                let share = B::float_div(B::float_reshape(grad, Shape::new([rows, 1])), ties);
                B::float_mul(mask, pattern.broadcast_rows(share))
            }
        };
        grads.register::<B>(node.id, dx);
    }
}

/// Backward of BSR SpMM. `dB = Aᵀ · dC` through the transposed block pattern (blocks gathered
/// by `t_perm` and transposed); `dA` block `(I, J)` is `dC[I-rows] · B[J-rows]ᵀ`, a batched
/// matmul over the stored blocks.
#[derive(Debug)]
struct BsrBackward;

/// Block pattern state: the pattern and its transpose plus the row/column block of every
/// stored block, and the sizes.
#[derive(Clone, Debug)]
struct BsrState<B: SparseBackend> {
    pattern: Pattern<B>,
    block_rows: IntTensor<B>,
    blk: usize,
}

impl<B: SparseBackend> Backward<B, 2> for BsrBackward {
    type State = (BsrState<B>, FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _c: &mut Checkpointer) {
        let [node_v, node_b] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (st, values, rhs) = ops.state;
        let p = &st.pattern;
        let (nb, mb, blk) = (p.rows, p.cols, st.blk);
        let nnzb = p.indices.shape().num_elements();
        let feat = grad.shape()[1];
        if let Some(node) = node_v {
            // [nnzb, blk, f] slices of dC and B, then dC_sel · B_selᵀ.
            let dc = B::float_reshape(grad.clone(), Shape::new([nb, blk * feat]));
            let dc = B::float_select(dc, 0, st.block_rows.clone());
            let dc = B::float_reshape(dc, Shape::new([nnzb, blk, feat]));
            let b = B::float_reshape(rhs, Shape::new([mb, blk * feat]));
            let b = B::float_select(b, 0, p.indices.clone());
            let b = B::float_reshape(b, Shape::new([nnzb, blk, feat]));
            let da = B::float_matmul(dc, B::float_swap_dims(b, 1, 2));
            grads.register::<B>(node.id, B::float_reshape(da, Shape::new([nnzb * blk * blk])));
        }
        if let Some(node) = node_b {
            let v = B::float_reshape(values, Shape::new([nnzb, blk, blk]));
            let v = B::float_select(v, 0, p.t_perm.clone());
            let v = B::float_swap_dims(v, 1, 2);
            let v = B::float_reshape(v, Shape::new([nnzb * blk * blk]));
            let db = B::bsr_spmm(
                p.t_indptr.clone(),
                p.t_indices.clone(),
                st.block_rows.clone(),
                p.indptr.clone(),
                p.indices.clone(),
                p.t_perm.clone(),
                v,
                grad,
                mb,
                nb,
                blk,
            );
            grads.register::<B>(node.id, db);
        }
    }
}

impl<B: SparseBackend, C: CheckpointStrategy> SparseBackend for Autodiff<B, C> {
    fn csr_spmm(
        indptr: IntTensor<Self>,
        indices: IntTensor<Self>,
        t_indptr: IntTensor<Self>,
        t_indices: IntTensor<Self>,
        t_perm: IntTensor<Self>,
        values: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        rows: usize,
        cols: usize,
    ) -> FloatTensor<Self> {
        let pattern = Pattern { indptr, indices, t_indptr, t_indices, t_perm, rows, cols };
        match SpmmBackward.prepare::<C>([values.node(), rhs.node()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (v, b) = (values.primitive().clone(), rhs.primitive().clone());
                let out = pattern.spmm(v.clone(), b.clone());
                prep.finish((pattern, v, b), out)
            }
            OpsKind::UnTracked(prep) => prep.finish(pattern.spmm(values.into_primitive(), rhs.into_primitive())),
        }
    }

    fn csr_spmm_bias_relu(
        indptr: IntTensor<Self>,
        indices: IntTensor<Self>,
        t_indptr: IntTensor<Self>,
        t_indices: IntTensor<Self>,
        t_perm: IntTensor<Self>,
        values: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        rows: usize,
        cols: usize,
    ) -> FloatTensor<Self> {
        let pattern = Pattern { indptr, indices, t_indptr, t_indices, t_perm, rows, cols };
        let fused = |p: &Pattern<B>, v, b, bias| {
            B::csr_spmm_bias_relu(
                p.indptr.clone(),
                p.indices.clone(),
                p.t_indptr.clone(),
                p.t_indices.clone(),
                p.t_perm.clone(),
                v,
                b,
                bias,
                p.rows,
                p.cols,
            )
        };
        match SpmmBiasReluBackward.prepare::<C>([values.node(), rhs.node(), bias.node()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (v, b) = (values.primitive().clone(), rhs.primitive().clone());
                let out = fused(&pattern, v.clone(), b.clone(), bias.into_primitive());
                prep.finish((pattern, v, b, out.clone()), out)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(fused(&pattern, values.into_primitive(), rhs.into_primitive(), bias.into_primitive()))
            }
        }
    }

    fn csr_sddmm(
        indptr: IntTensor<Self>,
        indices: IntTensor<Self>,
        t_indptr: IntTensor<Self>,
        t_indices: IntTensor<Self>,
        t_perm: IntTensor<Self>,
        lhs: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        rows: usize,
        cols: usize,
    ) -> FloatTensor<Self> {
        let pattern = Pattern { indptr, indices, t_indptr, t_indices, t_perm, rows, cols };
        match SddmmBackward.prepare::<C>([lhs.node(), rhs.node()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (l, r) = (lhs.primitive().clone(), rhs.primitive().clone());
                let out = pattern.sddmm(l.clone(), r.clone());
                prep.finish((pattern, l, r), out)
            }
            OpsKind::UnTracked(prep) => prep.finish(pattern.sddmm(lhs.into_primitive(), rhs.into_primitive())),
        }
    }

    fn csr_row_op(
        op: RowOp,
        indptr: IntTensor<Self>,
        indices: IntTensor<Self>,
        t_indptr: IntTensor<Self>,
        t_indices: IntTensor<Self>,
        t_perm: IntTensor<Self>,
        values: FloatTensor<Self>,
        rows: usize,
        cols: usize,
    ) -> FloatTensor<Self> {
        let pattern = Pattern { indptr, indices, t_indptr, t_indices, t_perm, rows, cols };
        match RowOpBackward(op).prepare::<C>([values.node()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let v = values.primitive().clone();
                let y = pattern.row_op(op, v.clone());
                prep.finish((pattern, v, y.clone()), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(pattern.row_op(op, values.into_primitive())),
        }
    }

    fn bsr_spmm(
        indptr: IntTensor<Self>,
        indices: IntTensor<Self>,
        block_rows: IntTensor<Self>,
        t_indptr: IntTensor<Self>,
        t_indices: IntTensor<Self>,
        t_perm: IntTensor<Self>,
        values: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        nb: usize,
        mb: usize,
        blk: usize,
    ) -> FloatTensor<Self> {
        let forward = |p: &Pattern<B>, block_rows: &IntTensor<B>, v, b| {
            B::bsr_spmm(
                p.indptr.clone(),
                p.indices.clone(),
                block_rows.clone(),
                p.t_indptr.clone(),
                p.t_indices.clone(),
                p.t_perm.clone(),
                v,
                b,
                nb,
                mb,
                blk,
            )
        };
        let pattern = Pattern { indptr, indices, t_indptr, t_indices, t_perm, rows: nb, cols: mb };
        match BsrBackward.prepare::<C>([values.node(), rhs.node()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (v, b) = (values.primitive().clone(), rhs.primitive().clone());
                let out = forward(&pattern, &block_rows, v.clone(), b.clone());
                prep.finish((BsrState { pattern, block_rows, blk }, v, b), out)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(forward(&pattern, &block_rows, values.into_primitive(), rhs.into_primitive()))
            }
        }
    }
}
