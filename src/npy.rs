//! NumPy `.npy` files to and from [`Array`]s.

use sparsec_ir::data::Array;
use npyz::WriterBuilder;
use std::path::{Path, PathBuf};

/// A `.npy` file that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// The file system failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// The element type has no sparsec dtype.
    #[error("{path}: unsupported .npy element type `{descr}` (expected i4, i8, f2, f4, f8 or b1, little-endian)")]
    UnsupportedType {
        /// The file.
        path: PathBuf,
        /// NumPy's type string.
        descr: String,
    },
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> NpyError + '_ {
    move |source| NpyError::Io { path: path.to_path_buf(), source }
}

/// Reads a `.npy` file of any shape as a flat C-order array.
pub fn read(path: &Path) -> Result<Array, NpyError> {
    let bytes = std::fs::read(path).map_err(io_err(path))?;
    let file = npyz::NpyFile::new(&bytes[..]).map_err(io_err(path))?;
    let descr = match file.dtype() {
        npyz::DType::Plain(ts) => ts.to_string(),
        other => other.descr(),
    };
    let unsupported = || NpyError::UnsupportedType { path: path.to_path_buf(), descr: descr.clone() };
    let array = match descr.trim_start_matches(['<', '|']) {
        "i4" => Array::I32(file.into_vec().map_err(io_err(path))?),
        "i8" => Array::I64(file.into_vec().map_err(io_err(path))?),
        "f4" => Array::F32(file.into_vec().map_err(io_err(path))?),
        "f8" => Array::F64(file.into_vec().map_err(io_err(path))?),
        "f2" => Array::F16(file.into_vec::<half::f16>().map_err(io_err(path))?.into_iter().map(f32::from).collect()),
        "b1" => Array::Bool(file.into_vec().map_err(io_err(path))?),
        _ => return Err(unsupported()),
    };
    Ok(array)
}

/// Writes an array as a `.npy` file with the given shape (its product must be the length).
pub fn write(path: &Path, array: &Array, shape: &[u64]) -> Result<(), NpyError> {
    fn put<T: npyz::AutoSerialize + Copy>(path: &Path, shape: &[u64], data: &[T]) -> Result<(), NpyError> {
        let file = std::fs::File::create(path).map_err(io_err(path))?;
        let mut w = npyz::WriteOptions::new()
            .default_dtype()
            .shape(shape)
            .writer(std::io::BufWriter::new(file))
            .begin_nd()
            .map_err(io_err(path))?;
        w.extend(data.iter().copied()).map_err(io_err(path))?;
        w.finish().map_err(io_err(path))
    }
    match array {
        Array::I32(v) => put(path, shape, v),
        Array::I64(v) => put(path, shape, v),
        Array::F32(v) => put(path, shape, v),
        Array::F64(v) => put(path, shape, v),
        Array::F16(v) | Array::BF16(v) => put(path, shape, v),
        Array::Bool(v) => put(path, shape, v),
    }
}
