//! Checks of the arguments before anything reaches the device: every array present, of the
//! right element type and long enough, and the sparse structure sound (row pointers start in
//! range and never decrease, coordinates lie inside their axis and are sorted where declared).

use sparsec_ir::data::{Args, Array, Scalar};
use sparsec_ir::{AxisKind, DType, Func, ParamKind, VarId};
use std::collections::HashMap;

/// Why the arguments are rejected.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ValidateError {
    /// A parameter has no value.
    #[error("no value for parameter `{0}`")]
    Missing(String),
    /// A scalar of the wrong kind or out of range.
    #[error("scalar `{param}`: {message}")]
    BadScalar {
        /// The parameter.
        param: String,
        /// What is wrong.
        message: String,
    },
    /// An array of the wrong element type.
    #[error("array `{param}` holds {found}, expected {expected}")]
    DType {
        /// The parameter.
        param: String,
        /// Its dtype.
        expected: DType,
        /// What it got.
        found: DType,
    },
    /// An array too short for the buffers bound to it.
    #[error("array `{param}` has {found} elements, needs at least {needed}")]
    Length {
        /// The parameter.
        param: String,
        /// Elements needed.
        needed: usize,
        /// Elements given.
        found: usize,
    },
    /// Broken sparse structure.
    #[error("array `{param}`: {message}")]
    Structure {
        /// The parameter.
        param: String,
        /// What is wrong.
        message: String,
    },
}

type R<T> = Result<T, ValidateError>;

/// The integer values of the scalar parameters of `func`.
pub fn scalar_values(func: &Func, args: &Args) -> R<HashMap<VarId, i64>> {
    let mut out = HashMap::new();
    for p in &func.params {
        if let ParamKind::Scalar(v) = p.kind {
            let d = func.vars.try_get(v).map_or(DType::I32, |x| x.dtype);
            let s = args.scalars.get(&p.name).ok_or_else(|| ValidateError::Missing(p.name.clone()))?;
            let bad = |message: &str| ValidateError::BadScalar { param: p.name.clone(), message: message.into() };
            match (s, d) {
                (Scalar::Int(x), DType::I32) => {
                    i32::try_from(*x).map_err(|_| bad("does not fit in i32"))?;
                    out.insert(v, *x);
                }
                (Scalar::Int(x), DType::I64) => {
                    out.insert(v, *x);
                }
                (Scalar::Int(_) | Scalar::Float(_), d) if d.is_float() => {}
                (Scalar::Bool(_), DType::Bool) => {}
                _ => return Err(bad(&format!("is not a {d} value"))),
            }
        }
    }
    Ok(out)
}

fn int_at(a: &Array, i: usize) -> Option<i64> {
    a.get_i64(i)
}

/// Checks the sparse structure described by the axes of `func` (a Stage I or II function)
/// against `args`.
pub fn check_structure(func: &Func, args: &Args) -> R<()> {
    if func.axes.is_empty() {
        return Ok(());
    }
    let scalars = scalar_values(func, args)?;
    let eval = |e: &sparsec_ir::Expr| crate::plan::host_eval(e, &scalars);
    // Number of rows (parent positions) of each axis, computed in declaration order.
    let mut positions: HashMap<sparsec_ir::AxisId, i64> = HashMap::new();
    for (id, axis) in func.axes.iter() {
        let length = eval(&axis.length);
        let rows = match axis.parent {
            None => 1,
            Some(p) => positions.get(&p).copied().unwrap_or(0),
        };
        let total = match axis.kind {
            AxisKind::DenseFixed => length.unwrap_or(0).saturating_mul(if axis.parent.is_some() { rows } else { 1 }),
            AxisKind::SparseFixed => rows.saturating_mul(axis.nnz.as_ref().and_then(eval).unwrap_or(0)),
            AxisKind::DenseVariable | AxisKind::SparseVariable => {
                let Some(p) = axis.indptr else { continue };
                let name = &func.params[p].name;
                let a = args.arrays.get(name).ok_or_else(|| ValidateError::Missing(name.clone()))?;
                let err = |message: String| ValidateError::Structure { param: name.clone(), message };
                if !a.dtype().is_int() {
                    return Err(err(format!("row pointers must be integers, found {}", a.dtype())));
                }
                let rows = rows.max(0) as usize;
                if a.len() < rows + 1 {
                    return Err(ValidateError::Length { param: name.clone(), needed: rows + 1, found: a.len() });
                }
                let mut prev = int_at(a, 0).unwrap_or(0);
                if prev < 0 {
                    return Err(err(format!("row pointer 0 is negative ({prev})")));
                }
                for i in 1..=rows {
                    let x = int_at(a, i).unwrap_or(0);
                    if x < prev {
                        return Err(err(format!("row pointers decrease at row {}: {prev} then {x}", i - 1)));
                    }
                    prev = x;
                }
                if let Some(nnz) = axis.nnz.as_ref().and_then(eval) {
                    if prev > nnz {
                        return Err(err(format!("the last row pointer {prev} exceeds nnz = {nnz}")));
                    }
                }
                prev
            }
        };
        positions.insert(id, total);
        // Coordinates.
        if let (true, Some(p)) = (axis.kind.is_sparse(), axis.indices) {
            let name = &func.params[p].name;
            let a = args.arrays.get(name).ok_or_else(|| ValidateError::Missing(name.clone()))?;
            let err = |message: String| ValidateError::Structure { param: name.clone(), message };
            if !a.dtype().is_int() {
                return Err(err(format!("coordinates must be integers, found {}", a.dtype())));
            }
            let n = total.max(0) as usize;
            if a.len() < n {
                return Err(ValidateError::Length { param: name.clone(), needed: n, found: a.len() });
            }
            let len = length.unwrap_or(i64::MAX);
            for i in 0..n {
                let x = int_at(a, i).unwrap_or(0);
                if x < 0 || x >= len {
                    return Err(err(format!("coordinate {x} at position {i} is outside 0..{len}")));
                }
            }
            // Sorted rows of a sparse-variable axis (binary searches rely on them).
            if axis.kind == AxisKind::SparseVariable && axis.sorted {
                let ip = &func.params[axis.indptr.unwrap_or(p)].name;
                if let Some(ptr) = args.arrays.get(ip) {
                    let rows = positions.get(&axis.parent.unwrap_or(id)).copied().unwrap_or(0).max(0) as usize;
                    for r in 0..rows {
                        let (s, e) = (int_at(ptr, r).unwrap_or(0), int_at(ptr, r + 1).unwrap_or(0));
                        for k in (s + 1).max(1)..e {
                            let (x, y) = (int_at(a, (k - 1) as usize).unwrap_or(0), int_at(a, k as usize).unwrap_or(0));
                            if y <= x {
                                return Err(err(format!("row {r} is not sorted without duplicates ({x} then {y})")));
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(())
}
