//! The one calling convention shared by the GPU host function, the kernels and the CPU runner.
//!
//! Parameters keep the order of [`Func::params`]. A handle parameter is a `memref<?xT>`
//! (a rank-1 descriptor: allocated pointer, aligned pointer, offset, size, stride) whose
//! element type is the dtype of the buffers bound to it; a scalar parameter is passed as its
//! own type (`i32`, `i64`, `f32`, ...).

use crate::error::{MlirError, Result};
use sparsec_ir::{DType, Func, ParamKind, Storage};

/// How one parameter is passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// A rank-1 memref of this element type.
    Buffer(DType),
    /// A scalar of this type.
    Scalar(DType),
}

/// One parameter of the calling convention.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AbiParam {
    /// Parameter name.
    pub name: String,
    /// How it is passed.
    pub kind: ArgKind,
}

/// The signature of `func`: one entry per parameter, in order.
///
/// A handle parameter takes the dtype of the buffers bound to it (`i32` if only axes use
/// it); buffers of different dtypes on one parameter are unsupported.
pub fn signature(func: &Func) -> Result<Vec<AbiParam>> {
    let mut out = Vec::with_capacity(func.params.len());
    for (p, param) in func.params.iter().enumerate() {
        let kind = match param.kind {
            ParamKind::Scalar(v) => {
                let var = func
                    .vars
                    .try_get(v)
                    .ok_or_else(|| MlirError::internal(format!("scalar `{}` has no variable", param.name)))?;
                ArgKind::Scalar(var.dtype)
            }
            ParamKind::Handle => {
                let mut dtype: Option<DType> = None;
                for (_, b) in func.buffers.iter() {
                    if b.storage != Storage::Param(p) {
                        continue;
                    }
                    match dtype {
                        Some(d) if d != b.dtype => {
                            return Err(MlirError::unsupported(format!(
                                "parameter `{}` is bound by buffers of dtypes {d} and {}",
                                param.name, b.dtype
                            )))
                        }
                        _ => dtype = Some(b.dtype),
                    }
                }
                ArgKind::Buffer(dtype.unwrap_or(DType::I32))
            }
        };
        out.push(AbiParam { name: param.name.clone(), kind });
    }
    Ok(out)
}
