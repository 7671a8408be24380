//! Launching a compiled program on device buffers the caller already holds (for example the
//! handles of Burn's `CubeTensor`s), instead of uploading host arrays as
//! [`CompiledProgram::run`] does. Nothing is read back: outputs stay on the device.

use crate::plan::{self, ArgSource};
use crate::runtime::{CompiledProgram, RuntimeError, ScalarValues};
use sparsec_ir::args::{self as validate, ArgsError as ValidateError};
use crate::CubeclError;
use cubecl::prelude::*;
use cubecl::server::Handle;
use sparsec_ir::data::{Args, Scalar};
use sparsec_ir::{ParamKind, Storage};
use std::collections::HashMap;

/// One argument of [`CompiledProgram::launch_on`], in parameter order.
#[derive(Clone, Debug)]
pub enum DeviceArg {
    /// A handle parameter: a buffer of `len` elements of the parameter's element type.
    Buffer {
        /// The device buffer (on the client the program is launched on).
        handle: Handle,
        /// Its length in elements.
        len: usize,
    },
    /// A scalar parameter.
    Scalar(Scalar),
}

impl DeviceArg {
    /// A buffer argument of `len` elements.
    pub fn buffer(handle: Handle, len: usize) -> Self {
        DeviceArg::Buffer { handle, len }
    }

    /// An integer scalar argument.
    pub fn scalar(v: i64) -> Self {
        DeviceArg::Scalar(Scalar::Int(v))
    }
}

impl CompiledProgram {
    /// Launches every kernel in order on the given device buffers and scalars (`args` in
    /// parameter order; the buffers must be on `client`'s device and hold the parameters'
    /// element types).
    ///
    /// Checked: the number and kind of the arguments, the scalars, and that every buffer is as
    /// long as the buffers bound to it need. Not checked: the sparse structure inside index
    /// buffers, which stays on the device — the caller validates it beforehand (the kernels
    /// run in CubeCL's checked mode, so a bad index cannot write out of bounds).
    /// Function-level allocations are made here, filled with their defaults.
    pub fn launch_on(&self, client: &Client, args: Vec<DeviceArg>) -> Result<(), CubeclError> {
        let func = self.func();
        if args.len() != func.params.len() {
            return Err(ValidateError::Structure {
                param: func.name.clone(),
                message: format!("{} arguments for {} parameters", args.len(), func.params.len()),
            }
            .into());
        }
        // Scalars first: buffer lengths depend on them.
        let mut host = Args::new();
        for (param, arg) in func.params.iter().zip(&args) {
            match (&param.kind, arg) {
                (ParamKind::Scalar(_), DeviceArg::Scalar(s)) => {
                    host.scalars.insert(param.name.clone(), *s);
                }
                (ParamKind::Handle, DeviceArg::Buffer { .. }) => {}
                _ => {
                    return Err(ValidateError::Structure {
                        param: param.name.clone(),
                        message: "a buffer where a scalar is expected, or the reverse".into(),
                    }
                    .into())
                }
            }
        }
        let ints = validate::scalar_values(func, &host)?;
        let program = plan::plan(func)?;
        let mut handles: HashMap<ArgSource, (Handle, usize)> = HashMap::new();
        for (p, (param, arg)) in func.params.iter().zip(args).enumerate() {
            let DeviceArg::Buffer { handle, len } = arg else { continue };
            for (b, buf) in func.buffers.iter() {
                if buf.storage != Storage::Param(p) {
                    continue;
                }
                let needed = sparsec_ir::args::buffer_len(func, b, &host).map_err(|e| ValidateError::Structure {
                    param: param.name.clone(),
                    message: e.to_string(),
                })?;
                if len < needed {
                    return Err(ValidateError::Length { param: param.name.clone(), needed, found: len }.into());
                }
            }
            handles.insert(ArgSource::Param(p), (handle, len));
        }
        for g in &program.globals {
            // Globals of the plan's function, which may keep values between kernels.
            let buf = &program.func.buffers[*g];
            let n = sparsec_ir::args::buffer_len(&program.func, *g, &host).map_err(|e| ValidateError::Structure {
                param: buf.name.clone(),
                message: e.to_string(),
            })?;
            let fill = match &buf.default {
                Some(sparsec_ir::Expr::Float(x, _)) => *x,
                Some(sparsec_ir::Expr::Int(x, _)) => *x as f64,
                Some(e) => plan::host_eval(e, &ints).map_or(0.0, |x| x as f64),
                None => 0.0,
            };
            let bytes = filled_bytes(buf.dtype, n, fill).ok_or_else(|| RuntimeError::TooLarge(buf.name.clone()))?;
            let handle = if bytes.is_empty() { client.empty(4) } else { client.create_from_slice(&bytes) };
            handles.insert(ArgSource::Global(*g), (handle, n));
        }
        let scalars = ScalarValues { ints, args: host.scalars };
        let mut statuses = Vec::new();
        for k in self.kernels() {
            statuses.push(k.launch(client, &handles, &scalars)?);
        }
        for (k, st) in self.kernels().iter().zip(statuses) {
            k.check_status(client, st)?;
        }
        Ok(())
    }
}

/// `n` elements of `dtype` equal to `v`, as little-endian bytes (`None` for bool buffers,
/// which GPU programs do not hold).
fn filled_bytes(dtype: sparsec_ir::DType, n: usize, v: f64) -> Option<Vec<u8>> {
    use sparsec_ir::DType as D;
    let one: Vec<u8> = match dtype {
        D::I32 => (v as i32).to_le_bytes().to_vec(),
        D::I64 => (v as i64).to_le_bytes().to_vec(),
        D::F32 => (v as f32).to_le_bytes().to_vec(),
        D::F64 => v.to_le_bytes().to_vec(),
        D::F16 => half::f16::from_f64(v).to_le_bytes().to_vec(),
        D::BF16 => half::bf16::from_f64(v).to_le_bytes().to_vec(),
        D::Bool => return None,
    };
    Some(one.repeat(n))
}
