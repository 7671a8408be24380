//! Shared helpers: the device, matrices, random dense operands and comparisons.

use burn::tensor::{Device, DeviceKind, Tensor, TensorData};
use burn_sparsec::SparseCsr;
use sparsec_testkit::{self as tk, Mat};

/// The default wgpu device.
pub fn device() -> Device {
    Device::wgpu(DeviceKind::default())
}

/// The devices the kernels run on: wgpu (CubeCL) and Flex (the CPU through the MLIR JIT).
pub fn devices() -> Vec<Device> {
    vec![device(), Device::flex()]
}

/// The default wgpu device with autodiff.
pub fn ad_device() -> Device {
    device().autodiff()
}

/// A `Mat` as a `SparseCsr` on `device`.
pub fn sparse(m: &Mat, device: &Device) -> SparseCsr {
    let indptr = m.indptr.iter().map(|&x| x as i32).collect();
    let indices = m.indices.iter().map(|&x| x as i32).collect();
    SparseCsr::from_parts(m.rows, m.cols, indptr, indices, m.vals.clone(), device).unwrap()
}

/// A seeded `[r, c]` tensor with entries in [-1, 1).
pub fn dense(r: usize, c: usize, seed: u64, device: &Device) -> Tensor<2> {
    let v = tk::Rng::new(seed).vec(r * c);
    Tensor::from_data(TensorData::new(v, [r, c]), device)
}

/// A seeded `[n]` tensor with entries in [-1, 1).
pub fn vector(n: usize, seed: u64, device: &Device) -> Tensor<1> {
    let v = tk::Rng::new(seed).vec(n);
    Tensor::from_data(TensorData::new(v, [n]), device)
}

/// The entries of a tensor on the host.
pub fn host<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_to_vec::<f32>().unwrap()
}

/// Whether a dense `rows × cols` reference fits comfortably (16 M entries).
pub fn small(m: &Mat) -> bool {
    m.rows * m.cols <= 16 << 20
}

/// Every shared and generated matrix.
pub fn matrices() -> Vec<(String, Mat)> {
    tk::all_matrices()
}

/// Feature size for a matrix: smaller on the big ones.
pub fn feat(m: &Mat) -> usize {
    if m.nnz() > 100_000 { 8 } else { 33 }
}

/// Asserts element-wise closeness (testkit's rule).
pub fn close(what: &str, got: &[f32], want: &[f32], rtol: f32) {
    tk::assert_close(what, got, want, rtol);
}

/// The half-precision float types `dev` computes: WGSL has no bf16 (Burn's own cast panics
/// on wgpu), Flex has both.
pub fn halves(dev: &Device) -> Vec<burn::tensor::FloatDType> {
    use burn::tensor::FloatDType;
    if matches!(dev.as_dispatch(), burn::backend::DispatchDevice::Flex(_)) {
        vec![FloatDType::F16, FloatDType::BF16]
    } else {
        vec![FloatDType::F16]
    }
}
