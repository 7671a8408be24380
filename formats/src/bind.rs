//! Binding matrices to the axes and sparse buffers of a Stage-I function.
//!
//! A [`Binder`] fills a [`sparsec_ir::data::Args`]: values go to the buffer's handle
//! parameter (converted to the buffer dtype), `indptr`/`indices` to the axes' handle
//! parameters (converted to the axis `idtype`), and scalars are inferred from axis
//! lengths and `nnz` fields. A scalar is inferred only when the field is exactly
//! `Expr::Var` of a scalar parameter; an integer literal must match the matrix (for a
//! `dense_variable` length, it must bound the longest row); other expressions are left
//! unchecked. Binding the same scalar or array twice with different contents is an error.

use crate::bsr::Bsr;
use crate::csr::Csr;
use crate::ell::Ell;
use crate::scalar::{Index, Value};
use sparsec_ir::data::{Args, Array, Scalar};
use sparsec_ir::{AxisId, AxisKind, DType, Expr, Func, Layout, ParamId, ParamKind, Storage};
use thiserror::Error;

/// Why a binding failed.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum BindError {
    /// No buffer with this name.
    #[error("unknown buffer `{0}`")]
    UnknownBuffer(String),
    /// No axis with this name.
    #[error("unknown axis `{0}`")]
    UnknownAxis(String),
    /// The buffer is dense, not bound to axes.
    #[error("buffer `{0}` is not a sparse buffer")]
    NotSparse(String),
    /// The buffer is allocated by the function, not passed as a parameter.
    #[error("buffer `{0}` is not bound to a parameter")]
    NotParam(String),
    /// The buffer has the wrong number of axes.
    #[error("buffer `{buffer}` has {found} axes, expected {expected}")]
    AxisCount {
        /// Buffer name.
        buffer: String,
        /// Axes required.
        expected: String,
        /// Axes found.
        found: usize,
    },
    /// An axis of the wrong kind.
    #[error("axis `{axis}` is {found}, expected {expected}")]
    AxisKind {
        /// Axis name.
        axis: String,
        /// Kind required.
        expected: &'static str,
        /// Kind found.
        found: &'static str,
    },
    /// An axis whose parent is not the preceding axis of the buffer.
    #[error("axis `{axis}` has parent {found}, expected `{expected}`")]
    ParentMismatch {
        /// Axis name.
        axis: String,
        /// Parent required.
        expected: String,
        /// Parent found (`none` or a name).
        found: String,
    },
    /// An axis lacks an `indptr` or `indices` parameter.
    #[error("axis `{axis}` has no `{what}` parameter")]
    MissingArray {
        /// Axis name.
        axis: String,
        /// `indptr` or `indices`.
        what: &'static str,
    },
    /// A dtype the binding cannot produce.
    #[error("{what} has dtype {dtype}, which cannot hold {expected}")]
    DTypeUnsupported {
        /// What has the dtype (buffer, axis or scalar).
        what: String,
        /// The dtype.
        dtype: DType,
        /// What it must hold.
        expected: &'static str,
    },
    /// A literal axis field that does not match the matrix.
    #[error("axis `{axis}` {field} is the literal {literal}, but the matrix needs {needed}")]
    LiteralMismatch {
        /// Axis name.
        axis: String,
        /// `length` or `nnz`.
        field: &'static str,
        /// The literal.
        literal: i64,
        /// What the matrix needs (`= n` or `>= n`).
        needed: String,
    },
    /// An axis field that is a variable but not a scalar parameter.
    #[error("axis `{axis}` {field} is the variable `{var}`, which is not a scalar parameter")]
    NotScalarParam {
        /// Axis name.
        axis: String,
        /// `length` or `nnz`.
        field: &'static str,
        /// The variable.
        var: String,
    },
    /// A scalar already bound to another value.
    #[error("scalar `{name}` is already bound to {existing}, cannot bind {new}")]
    ScalarConflict {
        /// Parameter name.
        name: String,
        /// Earlier value.
        existing: String,
        /// Rejected value.
        new: i64,
    },
    /// An array parameter already bound to different contents.
    #[error("parameter `{0}` is already bound to a different array")]
    ArrayConflict(String),
    /// A value that does not fit the dtype of its parameter.
    #[error("{what} = {value} does not fit {dtype}")]
    Overflow {
        /// What overflowed.
        what: String,
        /// The value.
        value: i64,
        /// The dtype.
        dtype: DType,
    },
    /// The axis requires sorted indices but the matrix rows are not sorted.
    #[error("axis `{0}` is declared sorted but the matrix has unsorted rows")]
    Unsorted(String),
    /// A matrix whose block size does not fit the buffer (e.g. blocked ELL on 2 axes).
    #[error("buffer `{buffer}`: {message}")]
    Shape {
        /// Buffer name.
        buffer: String,
        /// What does not fit.
        message: String,
    },
    /// A tensor that cannot be laid out in the buffer's levels.
    #[error("buffer `{buffer}`: {source}")]
    Tensor {
        /// Buffer name.
        buffer: String,
        /// Why.
        source: crate::tensor::TensorError,
    },
    /// Segment arrays (for `dense_variable`) that are not valid.
    #[error("invalid segments for buffer `{buffer}`: {source}")]
    Segments {
        /// Buffer name.
        buffer: String,
        /// The validation error.
        source: crate::validate::ValidateError,
    },
}

/// Accumulates bindings of one function's parameters.
#[derive(Clone, Debug)]
pub struct Binder<'f> {
    func: &'f Func,
    args: Args,
}

/// A sparse buffer's parameter name and axes.
struct SparseBuf {
    name: String,
    param: String,
    dtype: DType,
    axes: Vec<AxisId>,
    /// The mode each axis stores, where declared.
    modes: Option<Vec<usize>>,
}

impl<'f> Binder<'f> {
    /// A binder with no arguments yet.
    pub fn new(func: &'f Func) -> Self {
        Binder {
            func,
            args: Args::new(),
        }
    }

    /// A binder extending existing arguments (conflicts with them are errors).
    pub fn with_args(func: &'f Func, args: Args) -> Self {
        Binder { func, args }
    }

    /// The arguments bound so far.
    pub fn args(&self) -> &Args {
        &self.args
    }

    /// The arguments.
    pub fn finish(self) -> Args {
        self.args
    }

    fn buffer(&self, name: &str) -> Result<SparseBuf, BindError> {
        let id = self
            .func
            .buffer_by_name(name)
            .ok_or_else(|| BindError::UnknownBuffer(name.into()))?;
        let b = &self.func.buffers[id];
        let Layout::Sparse(axes) = &b.layout else {
            return Err(BindError::NotSparse(name.into()));
        };
        let Storage::Param(p) = b.storage else {
            return Err(BindError::NotParam(name.into()));
        };
        let param = self
            .param_name(p)
            .ok_or_else(|| BindError::NotParam(name.into()))?;
        Ok(SparseBuf {
            name: name.into(),
            param,
            dtype: b.dtype,
            axes: axes.clone(),
            modes: b.modes.clone(),
        })
    }

    fn param_name(&self, p: ParamId) -> Option<String> {
        self.func.params.get(p).map(|p| p.name.clone())
    }

    fn axis_name(&self, a: AxisId) -> String {
        self.func
            .axes
            .try_get(a)
            .map_or_else(|| format!("{a:?}"), |a| a.name.clone())
    }

    fn expect_kind(
        &self,
        a: AxisId,
        kinds: &[AxisKind],
        expected: &'static str,
    ) -> Result<(), BindError> {
        let ax = self
            .func
            .axes
            .try_get(a)
            .ok_or_else(|| BindError::UnknownAxis(format!("{a:?}")))?;
        if !kinds.contains(&ax.kind) {
            return Err(BindError::AxisKind {
                axis: ax.name.clone(),
                expected,
                found: ax.kind.name(),
            });
        }
        Ok(())
    }

    fn expect_parent(&self, a: AxisId, parent: AxisId) -> Result<(), BindError> {
        let found = self.func.axes[a].parent;
        if found != Some(parent) {
            return Err(BindError::ParentMismatch {
                axis: self.axis_name(a),
                expected: self.axis_name(parent),
                found: found.map_or_else(
                    || "none".to_string(),
                    |p| format!("`{}`", self.axis_name(p)),
                ),
            });
        }
        Ok(())
    }

    /// Binds an axis field to `value` (`exact`) or to at least `value` (`!exact`: a
    /// variable gets `value`, a literal must be `>= value`).
    fn bind_field(
        &mut self,
        a: AxisId,
        field: &'static str,
        e: Option<&Expr>,
        value: usize,
        exact: bool,
    ) -> Result<(), BindError> {
        let axis = self.axis_name(a);
        match e {
            Some(Expr::Int(lit, _)) => {
                let ok = if exact {
                    *lit >= 0 && *lit as u64 == value as u64
                } else {
                    *lit >= 0 && *lit as u64 >= value as u64
                };
                if !ok {
                    let needed = if exact {
                        format!("{value}")
                    } else {
                        format!("at least {value}")
                    };
                    return Err(BindError::LiteralMismatch {
                        axis,
                        field,
                        literal: *lit,
                        needed,
                    });
                }
                Ok(())
            }
            Some(Expr::Var(v)) => {
                let v = *v;
                let var = self
                    .func
                    .vars
                    .try_get(v)
                    .map_or_else(|| format!("{v:?}"), |x| x.name.clone());
                let p = self
                    .func
                    .params
                    .iter()
                    .find(|p| p.kind == ParamKind::Scalar(v))
                    .ok_or_else(|| BindError::NotScalarParam {
                        axis: axis.clone(),
                        field,
                        var: var.clone(),
                    })?;
                let dtype = self.func.vars.try_get(v).map_or(DType::I32, |x| x.dtype);
                let value = i64::try_from(value).map_err(|_| BindError::Overflow {
                    what: p.name.clone(),
                    value: i64::MAX,
                    dtype,
                })?;
                match dtype {
                    DType::I32 if i32::try_from(value).is_err() => {
                        return Err(BindError::Overflow {
                            what: p.name.clone(),
                            value,
                            dtype,
                        })
                    }
                    DType::I32 | DType::I64 => {}
                    _ => {
                        return Err(BindError::DTypeUnsupported {
                            what: format!("scalar `{}`", p.name),
                            dtype,
                            expected: "an integer",
                        })
                    }
                }
                match self.args.scalars.get(&p.name) {
                    // An upper bound already bound to a large enough value is fine.
                    Some(Scalar::Int(x)) if *x == value || (!exact && *x >= value) => Ok(()),
                    Some(other) => Err(BindError::ScalarConflict {
                        name: p.name.clone(),
                        existing: match other {
                            Scalar::Int(x) => x.to_string(),
                            Scalar::Float(x) => x.to_string(),
                            Scalar::Bool(x) => x.to_string(),
                        },
                        new: value,
                    }),
                    None => {
                        self.args.int(p.name.clone(), value);
                        Ok(())
                    }
                }
            }
            // Absent or computed fields are not inferred.
            _ => Ok(()),
        }
    }

    fn put_array(&mut self, name: String, a: Array) -> Result<(), BindError> {
        match self.args.arrays.get(&name) {
            Some(old) if *old != a => Err(BindError::ArrayConflict(name)),
            Some(_) => Ok(()),
            None => {
                self.args.array(name, a);
                Ok(())
            }
        }
    }

    /// Puts an index array on an axis's `indptr` or `indices` parameter in its idtype.
    fn put_index<I: Index>(
        &mut self,
        a: AxisId,
        what: &'static str,
        data: &[I],
    ) -> Result<(), BindError> {
        let ax = &self.func.axes[a];
        let p = if what == "indptr" {
            ax.indptr
        } else {
            ax.indices
        };
        let name = p
            .and_then(|p| self.param_name(p))
            .ok_or_else(|| BindError::MissingArray {
                axis: ax.name.clone(),
                what,
            })?;
        let array = match ax.idtype {
            DType::I32 => Array::I32(
                data.iter()
                    .map(|x| {
                        i32::try_from(x.to_i64()).map_err(|_| BindError::Overflow {
                            what: name.clone(),
                            value: x.to_i64(),
                            dtype: DType::I32,
                        })
                    })
                    .collect::<Result<_, _>>()?,
            ),
            DType::I64 => Array::I64(data.iter().map(|x| x.to_i64()).collect()),
            d => {
                return Err(BindError::DTypeUnsupported {
                    what: format!("axis `{}`", ax.name),
                    dtype: d,
                    expected: "indices",
                })
            }
        };
        self.put_array(name, array)
    }

    /// Puts values on a buffer's parameter in the buffer dtype.
    fn put_values<V: Value>(&mut self, b: &SparseBuf, values: &[V]) -> Result<(), BindError> {
        let array = match b.dtype {
            DType::F32 => Array::F32(values.iter().map(|v| v.to_f64() as f32).collect()),
            DType::F64 => Array::F64(values.iter().map(|v| v.to_f64()).collect()),
            DType::F16 => Array::F16(
                values
                    .iter()
                    .map(|v| half::f16::from_f64(v.to_f64()).to_f32())
                    .collect(),
            ),
            DType::BF16 => Array::BF16(
                values
                    .iter()
                    .map(|v| half::bf16::from_f64(v.to_f64()).to_f32())
                    .collect(),
            ),
            d => {
                return Err(BindError::DTypeUnsupported {
                    what: format!("buffer `{}`", b.name),
                    dtype: d,
                    expected: "floating-point values",
                })
            }
        };
        self.put_array(b.param.clone(), array)
    }

    fn expect_axes(
        &self,
        b: &SparseBuf,
        counts: &[usize],
        expected: &str,
    ) -> Result<(), BindError> {
        if !counts.contains(&b.axes.len()) {
            return Err(BindError::AxisCount {
                buffer: b.name.clone(),
                expected: expected.into(),
                found: b.axes.len(),
            });
        }
        Ok(())
    }

    /// Binds a `dense_fixed` axis of length `n`.
    fn dense_fixed(&mut self, a: AxisId, n: usize) -> Result<(), BindError> {
        self.expect_kind(a, &[AxisKind::DenseFixed], "dense_fixed")?;
        let len = self.func.axes[a].length.clone();
        self.bind_field(a, "length", Some(&len), n, true)
    }

    /// Binds a variable axis `j` from a compressed structure (`rows` rows, `length` the
    /// coordinate bound); binds the parent's length if the parent is `dense_fixed`.
    #[allow(clippy::too_many_arguments)]
    fn variable_axis<I: Index>(
        &mut self,
        j: AxisId,
        rows: usize,
        length: usize,
        indptr: &[I],
        indices: Option<&[I]>,
        sorted: bool,
    ) -> Result<(), BindError> {
        self.expect_kind(
            j,
            &[AxisKind::SparseVariable, AxisKind::DenseVariable],
            "a variable axis",
        )?;
        let ax = self.func.axes[j].clone();
        if let Some(p) = ax.parent {
            if self
                .func
                .axes
                .try_get(p)
                .is_some_and(|p| p.kind == AxisKind::DenseFixed)
            {
                self.dense_fixed(p, rows)?;
            }
        }
        let nnz = indptr.last().map_or(0, |x| x.ix());
        let exact = ax.kind == AxisKind::SparseVariable;
        self.bind_field(j, "nnz", ax.nnz.as_ref(), nnz, true)?;
        self.bind_field(j, "length", Some(&ax.length), length, exact)?;
        self.put_index(j, "indptr", indptr)?;
        if ax.kind == AxisKind::SparseVariable {
            if ax.sorted && !sorted {
                return Err(BindError::Unsorted(ax.name));
            }
            self.put_index(j, "indices", indices.unwrap_or(&[]))?;
        }
        Ok(())
    }

    /// Binds only the axis `axis` (`sparse_variable` or `dense_variable`) to the pattern
    /// of `m`: `indptr`, `indices` (sparse only), `length` (= cols for sparse, >= longest
    /// row for dense), `nnz`, and the parent's length (= rows) if it is `dense_fixed`.
    pub fn axis_csr<I: Index, V: Value>(
        &mut self,
        axis: &str,
        m: &Csr<I, V>,
    ) -> Result<&mut Self, BindError> {
        let j = self
            .func
            .axis_by_name(axis)
            .ok_or_else(|| BindError::UnknownAxis(axis.into()))?;
        let length = if self.func.axes[j].kind == AxisKind::DenseVariable {
            m.max_row_length()
        } else {
            m.cols()
        };
        self.variable_axis(
            j,
            m.rows(),
            length,
            m.indptr(),
            Some(m.indices()),
            m.has_sorted_indices(),
        )?;
        Ok(self)
    }

    /// Binds a CSR matrix to a buffer over `[I, J]`, `I = dense_fixed(rows)`,
    /// `J = sparse_variable(I, cols, nnz, indptr, indices)`.
    pub fn csr<I: Index, V: Value>(
        &mut self,
        buffer: &str,
        m: &Csr<I, V>,
    ) -> Result<&mut Self, BindError> {
        let b = self.buffer(buffer)?;
        self.expect_axes(&b, &[2], "2 ([I, J])")?;
        let (i, j) = (b.axes[0], b.axes[1]);
        self.expect_kind(i, &[AxisKind::DenseFixed], "dense_fixed")?;
        self.expect_kind(j, &[AxisKind::SparseVariable], "sparse_variable")?;
        self.expect_parent(j, i)?;
        self.variable_axis(
            j,
            m.rows(),
            m.cols(),
            m.indptr(),
            Some(m.indices()),
            m.has_sorted_indices(),
        )?;
        self.put_values(&b, m.values())?;
        Ok(self)
    }

    /// Binds a BSR matrix to a buffer over `[I, J, BI, BJ]`: `I = dense_fixed(block
    /// rows)`, `J = sparse_variable(I, block cols, nnz blocks, indptr, indices)`,
    /// `BI = BJ = dense_fixed(block)`.
    pub fn bsr<I: Index, V: Value>(
        &mut self,
        buffer: &str,
        m: &Bsr<I, V>,
    ) -> Result<&mut Self, BindError> {
        let b = self.buffer(buffer)?;
        self.expect_axes(&b, &[4], "4 ([I, J, BI, BJ])")?;
        let (i, j) = (b.axes[0], b.axes[1]);
        self.expect_kind(i, &[AxisKind::DenseFixed], "dense_fixed")?;
        self.expect_kind(j, &[AxisKind::SparseVariable], "sparse_variable")?;
        self.expect_parent(j, i)?;
        self.variable_axis(
            j,
            m.block_rows(),
            m.block_cols(),
            m.indptr(),
            Some(m.indices()),
            true,
        )?;
        self.dense_fixed(b.axes[2], m.block_size())?;
        self.dense_fixed(b.axes[3], m.block_size())?;
        self.put_values(&b, m.values())?;
        Ok(self)
    }

    /// Binds an ELL matrix to a buffer over `[I, J]` (scalar ELL) or `[I, J, BI, BJ]`
    /// (blocked ELL, or scalar with block 1): `I = dense_fixed(rows)`,
    /// `J = sparse_fixed(I, cols, k, indices)`; padding slots are bound as stored.
    pub fn ell<I: Index, V: Value>(
        &mut self,
        buffer: &str,
        m: &Ell<I, V>,
    ) -> Result<&mut Self, BindError> {
        let b = self.buffer(buffer)?;
        self.expect_axes(&b, &[2, 4], "2 ([I, J]) or 4 ([I, J, BI, BJ])")?;
        if b.axes.len() == 2 && m.block_size() != 1 {
            return Err(BindError::Shape {
                buffer: b.name.clone(),
                message: format!(
                    "blocked ELL (block {}) needs 4 axes [I, J, BI, BJ]",
                    m.block_size()
                ),
            });
        }
        let (i, j) = (b.axes[0], b.axes[1]);
        self.dense_fixed(i, m.slot_rows())?;
        self.expect_kind(j, &[AxisKind::SparseFixed], "sparse_fixed")?;
        self.expect_parent(j, i)?;
        let ax = self.func.axes[j].clone();
        self.bind_field(j, "length", Some(&ax.length), m.slot_cols(), true)?;
        self.bind_field(j, "nnz", ax.nnz.as_ref(), m.k(), true)?;
        self.put_index(j, "indices", m.indices())?;
        if b.axes.len() == 4 {
            self.dense_fixed(b.axes[2], m.block_size())?;
            self.dense_fixed(b.axes[3], m.block_size())?;
        }
        self.put_values(&b, m.values())?;
        Ok(self)
    }

    /// Binds a tensor to a sparse buffer by walking the buffer's own axes (one per mode,
    /// axis `k` storing mode `modes[k]` of the buffer, identity by default): `dense_fixed`
    /// stores every coordinate, `sparse_variable` each row's distinct coordinates, a root
    /// `sparse_fixed` the distinct coordinates of the one root row (with `unique = false`,
    /// every entry's coordinate: COO), a `sparse_fixed` below a parent the rows padded to the
    /// longest (as [`Ell`] pads; one coordinate a row below a COO root). Lengths are the tensor's
    /// dimensions, `nnz` fields the stored positions; duplicates are summed. Fails before
    /// allocating if a level would hold more than `limit` positions.
    pub fn tensor<I: Index, V: Value>(
        &mut self,
        buffer: &str,
        t: &crate::tensor::Tensor<I, V>,
        limit: usize,
    ) -> Result<&mut Self, BindError> {
        use crate::tensor::LevelKind;
        let b = self.buffer(buffer)?;
        let order = t.dims().len();
        self.expect_axes(&b, &[order], &format!("{order} (one per mode of the tensor)"))?;
        let modes = b.modes.clone().unwrap_or_else(|| (0..order).collect());
        let mut kinds = Vec::with_capacity(order);
        for (k, &a) in b.axes.iter().enumerate() {
            let ax = &self.func.axes[a];
            // The storage rule (an axis follows its parent), which the verifier also holds.
            if let Some(p) = ax.parent {
                match k.checked_sub(1) {
                    Some(j) => self.expect_parent(a, b.axes[j])?,
                    None => {
                        return Err(BindError::ParentMismatch {
                            axis: ax.name.clone(),
                            expected: "none (it is the buffer's first axis)".into(),
                            found: format!("`{}`", self.axis_name(p)),
                        })
                    }
                }
            }
            kinds.push(match (ax.kind, ax.parent) {
                (AxisKind::DenseFixed, _) => LevelKind::Dense,
                (AxisKind::SparseVariable, _) => LevelKind::Compressed,
                (AxisKind::SparseFixed, None) if !ax.unique => LevelKind::Repeated,
                (AxisKind::SparseFixed, None) => LevelKind::Root,
                (AxisKind::SparseFixed, Some(_)) => LevelKind::Padded,
                (AxisKind::DenseVariable, _) => {
                    return Err(BindError::AxisKind {
                        axis: ax.name.clone(),
                        expected: "dense_fixed, sparse_variable or sparse_fixed (a dense_variable axis binds segments, not coordinates)",
                        found: ax.kind.name(),
                    })
                }
            });
        }
        let levels = t
            .levels(&kinds, &modes, limit)
            .map_err(|source| BindError::Tensor { buffer: b.name.clone(), source })?;
        for (&a, level) in b.axes.iter().zip(&levels.levels) {
            let ax = self.func.axes[a].clone();
            self.bind_field(a, "length", Some(&ax.length), level.dim, true)?;
            if ax.kind != AxisKind::DenseFixed {
                self.bind_field(a, "nnz", ax.nnz.as_ref(), level.extent, true)?;
            }
            if let Some(ptr) = &level.indptr {
                self.put_index(a, "indptr", ptr)?;
            }
            if let Some(idx) = &level.indices {
                self.put_index(a, "indices", idx)?;
            }
        }
        self.put_values(&b, &levels.values)?;
        Ok(self)
    }

    /// Binds segments (row `r` holds `values[indptr[r]..indptr[r+1]]` at coordinates
    /// `0..len`) to a buffer over `[I, J]` with `J = dense_variable(I, max_len, nnz,
    /// indptr)`.
    pub fn dense_variable<I: Index, V: Value>(
        &mut self,
        buffer: &str,
        indptr: &[I],
        values: &[V],
    ) -> Result<&mut Self, BindError> {
        let b = self.buffer(buffer)?;
        self.expect_axes(&b, &[2], "2 ([I, J])")?;
        let (i, j) = (b.axes[0], b.axes[1]);
        self.expect_kind(i, &[AxisKind::DenseFixed], "dense_fixed")?;
        self.expect_kind(j, &[AxisKind::DenseVariable], "dense_variable")?;
        self.expect_parent(j, i)?;
        // Validate the segment pointers (no column indices: use a zero-width pattern).
        let rows = indptr.len().saturating_sub(1);
        let zeros = vec![I::ZERO; values.len()];
        let seg = |source| BindError::Segments {
            buffer: b.name.clone(),
            source,
        };
        let lens_only = crate::validate::ValidateOptions::LENIENT;
        crate::validate::check_compressed(rows, 1, indptr, &zeros, values, &lens_only)
            .into_result()
            .map_err(seg)?;
        let longest = indptr
            .windows(2)
            .map(|w| w[1].ix() - w[0].ix())
            .max()
            .unwrap_or(0);
        self.variable_axis(j, rows, longest, indptr, None, true)?;
        self.put_values(&b, values)?;
        Ok(self)
    }
}

/// Binds a CSR matrix to buffer `buffer` of `func` (see [`Binder::csr`]).
pub fn bind_csr<I: Index, V: Value>(
    func: &Func,
    buffer: &str,
    m: &Csr<I, V>,
) -> Result<Args, BindError> {
    let mut b = Binder::new(func);
    b.csr(buffer, m)?;
    Ok(b.finish())
}

/// Binds a BSR matrix (see [`Binder::bsr`]).
pub fn bind_bsr<I: Index, V: Value>(
    func: &Func,
    buffer: &str,
    m: &Bsr<I, V>,
) -> Result<Args, BindError> {
    let mut b = Binder::new(func);
    b.bsr(buffer, m)?;
    Ok(b.finish())
}

/// Binds an ELL matrix (see [`Binder::ell`]).
pub fn bind_ell<I: Index, V: Value>(
    func: &Func,
    buffer: &str,
    m: &Ell<I, V>,
) -> Result<Args, BindError> {
    let mut b = Binder::new(func);
    b.ell(buffer, m)?;
    Ok(b.finish())
}

/// Binds segments to a `dense_variable` buffer (see [`Binder::dense_variable`]).
pub fn bind_dense_variable<I: Index, V: Value>(
    func: &Func,
    buffer: &str,
    indptr: &[I],
    values: &[V],
) -> Result<Args, BindError> {
    let mut b = Binder::new(func);
    b.dense_variable(buffer, indptr, values)?;
    Ok(b.finish())
}

/// Binds only an axis's arrays and scalars (see [`Binder::axis_csr`]).
pub fn bind_axis_csr<I: Index, V: Value>(
    func: &Func,
    axis: &str,
    m: &Csr<I, V>,
) -> Result<Args, BindError> {
    let mut b = Binder::new(func);
    b.axis_csr(axis, m)?;
    Ok(b.finish())
}

/// Binds row segments of `a` (`compose::RowSegments`) to a function decomposed with
/// `passes::row_segments_rule()` (parameters `a_row_segments`, `seg_ptr_row_segments`,
/// `seg_row_row_segments`, `indices_row_segments`, `nseg_row_segments`, `n_row_segments`,
/// `nnz_row_segments`). The segment values start at zero: the decomposed program's preprocess
/// fills them from the original matrix. Fails, binding nothing, when an index does not fit
/// the program's `i32` coordinates.
pub fn bind_row_segments<I: Index, V: Value>(
    args: &mut Args,
    a: &Csr<I, V>,
    segs: &crate::compose::RowSegments<I>,
) -> Result<(), BindError> {
    let narrow = |what: &str, x: I| i32::try_from(x.to_i64()).map_err(|_| BindError::Overflow { what: what.into(), value: x.to_i64(), dtype: DType::I32 });
    let i32s = |what: &str, v: &[I]| v.iter().map(|&x| narrow(what, x)).collect::<Result<Vec<i32>, _>>();
    // Every conversion before the first insertion: a refusal leaves `args` as it was.
    let (ptr, rows, cols) = (i32s("a segment pointer", segs.seg_ptr())?, i32s("a segment's row", segs.seg_row())?, i32s("a column index", a.indices())?);
    args.array("a_row_segments", Array::F32(vec![0.0; a.nnz()]))
        .array("seg_ptr_row_segments", Array::I32(ptr))
        .array("seg_row_row_segments", Array::I32(rows))
        .array("indices_row_segments", Array::I32(cols));
    args.int("nseg_row_segments", segs.len() as i64).int("n_row_segments", a.shape().1 as i64).int("nnz_row_segments", a.nnz() as i64);
    Ok(())
}

/// Binds the structure of a hyb matrix to a function decomposed with
/// `passes::hyb_rules(parts, widths)` (parameters `a_hyb_<p>_<b>`, `row_indices_hyb_<p>_<b>`,
/// `indices_hyb_<p>_<b>`, `rows_hyb_<p>_<b>`, `n_hyb_<p>_<b>`). The bucket values start at
/// zero: the decomposed program's preprocess fills them from the original matrix. Padding
/// slots get column `n`, which the decomposed program guards away. Fails when an index does
/// not fit the program's `i32` coordinates.
pub fn bind_hyb<I: Index, V: Value>(args: &mut Args, hyb: &crate::compose::Hyb<I, V>) -> Result<(), BindError> {
    let n = hyb.shape().1;
    for (p, part) in hyb.parts().iter().enumerate() {
        for (b, bucket) in part.iter().enumerate() {
            let (s, w) = (format!("hyb_{p}_{b}"), bucket.width());
            let cols = padded_slots(&format!("a column index of bucket {s}"), bucket.col_indices(), bucket.counts(), w, n)?;
            let rows = narrow_all(&format!("a row index of bucket {s}"), bucket.row_indices())?;
            args.array(format!("a_{s}"), Array::F32(vec![0.0; bucket.len() * w]))
                .array(format!("row_indices_{s}"), Array::I32(rows))
                .array(format!("indices_{s}"), Array::I32(cols));
            args.int(format!("rows_{s}"), bucket.len() as i64).int(format!("n_{s}"), (n + 1).max(w) as i64);
        }
    }
    Ok(())
}

/// `v` as the program's `i32` coordinates.
fn narrow_all<I: Index>(what: &str, v: &[I]) -> Result<Vec<i32>, BindError> {
    v.iter()
        .map(|x| i32::try_from(x.to_i64()).map_err(|_| BindError::Overflow { what: what.into(), value: x.to_i64(), dtype: DType::I32 }))
        .collect()
}

/// Coordinates of groups of `slots` entries, the slots past each group's count moved to
/// `past` (one past the matrix), which the decomposed programs' guards skip.
fn padded_slots<I: Index>(what: &str, coords: &[I], counts: &[I], slots: usize, past: usize) -> Result<Vec<i32>, BindError> {
    let mut out = narrow_all(what, coords)?;
    let pad = i32::try_from(past).map_err(|_| BindError::Overflow { what: format!("{what} (padding)"), value: past as i64, dtype: DType::I32 })?;
    for (q, &c) in counts.iter().enumerate() {
        for slot in &mut out[q * slots + c.ix()..(q + 1) * slots] {
            *slot = pad;
        }
    }
    Ok(out)
}

/// The arrays and scalars of a piece, named with the rule's suffix.
fn put_piece(args: &mut Args, rule: &str, arrays: Vec<(&str, Array)>, scalars: Vec<(&str, usize)>) {
    for (n, a) in arrays {
        args.array(format!("{n}_{rule}"), a);
    }
    for (n, v) in scalars {
        args.int(format!("{n}_{rule}"), v as i64);
    }
}

/// Binds the structure of GroupCOO `g` to a function decomposed with
/// `passes::group_coo_rule(G)` (named `rule`: parameters `a_<rule>`, `group_rows_<rule>`,
/// `indices_<rule>`, `groups_<rule>`, `n_<rule>`). Values start at zero (the program's
/// preprocess fills them); padding slots get column `n`, one past the matrix.
pub fn bind_group_coo<I: Index, V: Value>(args: &mut Args, rule: &str, g: &crate::compose::GroupCoo<I, V>) -> Result<(), BindError> {
    let (gs, n, groups) = (g.group_size(), g.shape().1, g.group_rows().len());
    let cols = padded_slots("a GroupCOO column", g.col_indices(), g.group_counts(), gs, n)?;
    let rows = narrow_all("a GroupCOO row", g.group_rows())?;
    let arrays = vec![("a", Array::F32(vec![0.0; groups * gs])), ("group_rows", Array::I32(rows)), ("indices", Array::I32(cols))];
    put_piece(args, rule, arrays, vec![("groups", groups), ("n", (n + 1).max(gs))]);
    Ok(())
}

/// Binds reordered rows `r` to a function decomposed with `passes::rcm_rule()` (parameters
/// `a_<rule>`, `rows_<rule>`, `indptr_<rule>`, `indices_<rule>`, `nnz_<rule>`; the shape is
/// the program's). The values start at zero: the decomposed program's preprocess fills them.
pub fn bind_rcm<I: Index>(args: &mut Args, rule: &str, r: &crate::compose::ReorderedRows<I>) -> Result<(), BindError> {
    let (rows, ptr, cols) = (narrow_all("a stored row", r.order())?, narrow_all("a row pointer", r.indptr())?, narrow_all("a column index", r.indices())?);
    let nnz = cols.len();
    let arrays = vec![("a", Array::F32(vec![0.0; nnz])), ("rows", Array::I32(rows)), ("indptr", Array::I32(ptr)), ("indices", Array::I32(cols))];
    put_piece(args, rule, arrays, vec![("nnz", nnz)]);
    Ok(())
}

/// Binds BlockGroupCOO `g` (blocks of `b`) to a function decomposed with
/// `passes::block_group_coo_rule(b, G)` (parameters `a_<rule>`, `group_rows_<rule>`,
/// `block_cols_<rule>`, `groups_<rule>`, `nbc_<rule>`); padding slots get block column
/// `ceil(n / b)`.
pub fn bind_block_group_coo<I: Index, V: Value>(args: &mut Args, rule: &str, g: &crate::compose::BlockGroupCoo<I, V>) -> Result<(), BindError> {
    let (b, gs, groups) = (g.block_size(), g.group_size(), g.group_block_rows().len());
    let nbc = g.shape().1.div_ceil(b);
    let cols = padded_slots("a BlockGroupCOO block column", g.block_cols(), g.group_counts(), gs, nbc)?;
    let rows = narrow_all("a BlockGroupCOO block row", g.group_block_rows())?;
    let arrays = vec![("a", Array::F32(vec![0.0; groups * gs * b * b])), ("group_rows", Array::I32(rows)), ("block_cols", Array::I32(cols))];
    put_piece(args, rule, arrays, vec![("groups", groups), ("nbc", (nbc + 1).max(gs))]);
    Ok(())
}

/// Binds SR-BCRS `s` to a function decomposed with `passes::sr_bcrs_rule(t, g)` (parameters
/// `a_<rule>`, `tile_ptr_<rule>`, `col_indices_<rule>`, `tiles_<rule>`, `groups_<rule>`,
/// `max_groups_<rule>`); padding slots get column `n`.
pub fn bind_sr_bcrs<I: Index, V: Value>(args: &mut Args, rule: &str, s: &crate::compose::SrBcrs<I, V>) -> Result<(), BindError> {
    let (t, gw, n) = (s.tile_rows(), s.group_width(), s.shape().1);
    let ptr = s.tile_ptr();
    let tiles = ptr.len().saturating_sub(1);
    let groups = ptr.last().map_or(0, |p| p.ix());
    let max_groups = ptr.windows(2).map(|w| w[1].ix() - w[0].ix()).max().unwrap_or(0);
    let cols = padded_slots("an SR-BCRS column", s.col_indices(), s.group_counts(), gw, n)?;
    let arrays = vec![("a", Array::F32(vec![0.0; groups * t * gw])), ("tile_ptr", Array::I32(narrow_all("an SR-BCRS tile pointer", ptr)?)), ("col_indices", Array::I32(cols))];
    put_piece(args, rule, arrays, vec![("tiles", tiles), ("groups", groups), ("max_groups", max_groups.max(1))]);
    Ok(())
}

/// Binds 2:4 matrix `m` to a function decomposed with `passes::nm_2_4_rule()` (parameters
/// `a_<rule>`, `meta_<rule>` holding `lo | hi << 2` per group, `rows_<rule>`, `groups_<rule>`).
pub fn bind_nm_2_4<V: Value>(args: &mut Args, rule: &str, m: &crate::compose::NmMatrix<V>) -> Result<(), BindError> {
    let (rows, groups) = (m.shape().0, m.groups_per_row());
    let mut meta = Vec::with_capacity(rows * groups);
    for i in 0..rows {
        for j in 0..groups {
            let (lo, hi) = (m.position(i, j, 0).unwrap_or(0), m.position(i, j, 1).unwrap_or(0));
            meta.push((lo | (hi << 2)) as i32);
        }
    }
    put_piece(args, rule, vec![("a", Array::F32(vec![0.0; rows * groups * 2])), ("meta", Array::I32(meta))], vec![("rows", rows), ("groups", groups)]);
    Ok(())
}
