//! Interpreter state and its setup: parameters, axes, buffers and storage.

use crate::error::InterpError;
use sparsec_ir::verify::Verified;
use sparsec_ir::value::{filled, Value};
use sparsec_ir::data::{Args, Array, Scalar};
use sparsec_ir::{
    Axis, AxisId, AxisKind, Buffer, BufferId, DType, Func, Layout, ParamId, ParamKind, Span, Storage, Var,
    VarId,
};

/// Errors are boxed inside the interpreter to keep `Result`s small on the hot path.
pub(crate) type Result<T> = std::result::Result<T, Box<InterpError>>;

/// Largest number of elements the interpreter allocates for one buffer.
pub(crate) const MAX_ALLOC: usize = 1 << 31;

/// An axis with its sizes evaluated.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AxisInfo {
    pub(crate) kind: AxisKind,
    pub(crate) parent: Option<AxisId>,
    /// Coordinates lie in `0..length`.
    pub(crate) length: i64,
    /// Stored positions per row of a fixed axis (`length` or the sparse-fixed `nnz`).
    pub(crate) row_extent: i64,
    pub(crate) indptr: Option<ParamId>,
    pub(crate) indices: Option<ParamId>,
    pub(crate) idtype: DType,
    pub(crate) sorted: bool,
    /// Declared total of stored positions of a variable axis.
    pub(crate) nnz: Option<i64>,
}

/// A buffer's layout with its sizes evaluated.
#[derive(Clone, Debug)]
pub(crate) enum BufLayout {
    Sparse(Vec<AxisId>),
    /// Row-major shape; set when allocated for statement-level allocations.
    Dense(Vec<i64>),
}

/// A buffer with its sizes and default evaluated.
#[derive(Clone, Debug)]
pub(crate) struct BufInfo {
    pub(crate) dtype: DType,
    pub(crate) storage: Storage,
    pub(crate) layout: BufLayout,
    /// Value of coordinates that are not stored.
    pub(crate) default: Value,
    /// Elements past the last stored position.
    pub(crate) extra: i64,
}

impl BufInfo {
    pub(crate) fn ndim(&self) -> usize {
        match &self.layout {
            BufLayout::Sparse(a) => a.len(),
            BufLayout::Dense(s) => s.len(),
        }
    }
}

/// Where a Stage-I iterator variable currently is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IterPos {
    pub(crate) axis: AxisId,
    /// Row (flat position of the parent, or the attached coordinate); 0 without a parent.
    pub(crate) row: i64,
    /// Flat position in the axis's storage.
    pub(crate) flat: i64,
    /// The variable of the iterator that picked the row (`None` for a root axis).
    pub(crate) src: Option<VarId>,
}

/// An active Stage-I iterator, for finding parents.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Active {
    pub(crate) axis: AxisId,
    pub(crate) flat: i64,
    pub(crate) coord: i64,
    pub(crate) var: VarId,
}

/// The interpreter: variables, storage and precomputed declarations of one run.
pub(crate) struct Machine<'f> {
    /// The function, verified: the machine indexes its arenas directly.
    pub(crate) func: Verified<'f>,
    pub(crate) max_steps: u64,
    /// Iterations of one `while` execution allowed.
    pub(crate) max_while: i64,
    pub(crate) steps: u64,
    /// Values by [`VarId`]; `None` when unbound.
    pub(crate) vars: Vec<Option<Value>>,
    /// Positions of Stage-I iterator variables, by [`VarId`].
    pub(crate) iters: Vec<Option<IterPos>>,
    /// Active Stage-I iterators, outermost first.
    pub(crate) active: Vec<Active>,
    pub(crate) axes: Vec<AxisInfo>,
    pub(crate) bufs: Vec<BufInfo>,
    /// Arrays by parameter.
    pub(crate) arrays: Vec<Option<Array>>,
    /// Whether a parameter is an axis's `indptr` or `indices` (either integer width allowed).
    pub(crate) index_params: Vec<bool>,
    /// Storage of allocated buffers, by buffer.
    pub(crate) allocs: Vec<Option<Array>>,
    /// Whether a buffer is allocated by an `Alloc` statement (not at function entry).
    pub(crate) stmt_alloc: Vec<bool>,
    /// The access observer of [`crate::run_observed`]; `None` for plain runs.
    pub(crate) observer: Option<crate::observe::Observer<'f>>,
}

impl<'f> Machine<'f> {
    /// Binds parameters and evaluates the sizes of axes and buffers. Arrays are copied but
    /// not checked (see [`Machine::check_arrays`]).
    pub(crate) fn new(func: &'f Func, args: &Args, max_steps: u64) -> Result<Machine<'f>> {
        let proof = sparsec_ir::verify::verified(func).map_err(|errors| {
            let more = if errors.len() > 1 { format!(" (and {} more)", errors.len() - 1) } else { String::new() };
            let (message, span) = errors.first().map_or((String::new(), Span::NONE), |e| (e.to_string(), e.span));
            Box::new(InterpError::Invalid { message: format!("{message}{more}"), span })
        })?;
        let mut m = Machine {
            func: proof,
            max_steps,
            max_while: sparsec_ir::MAX_WHILE_ITERATIONS,
            steps: 0,
            vars: vec![None; func.vars.len()],
            iters: vec![None; func.vars.len()],
            active: Vec::new(),
            axes: Vec::with_capacity(func.axes.len()),
            bufs: Vec::with_capacity(func.buffers.len()),
            arrays: vec![None; func.params.len()],
            index_params: vec![false; func.params.len()],
            allocs: vec![None; func.buffers.len()],
            stmt_alloc: vec![false; func.buffers.len()],
            observer: None,
        };
        for (p, param) in func.params.iter().enumerate() {
            match param.kind {
                ParamKind::Handle => m.arrays[p] = args.arrays.get(&param.name).cloned(),
                ParamKind::Scalar(v) => {
                    let dtype = m.var(v, param.span)?.dtype;
                    let s = args.scalars.get(&param.name).ok_or_else(|| InterpError::MissingScalar {
                        param: param.name.clone(),
                        span: param.span,
                    })?;
                    let value = scalar_value(dtype, *s).map_err(|message| InterpError::BadScalar {
                        param: param.name.clone(),
                        message,
                        span: param.span,
                    })?;
                    m.vars[v.index()] = Some(value);
                }
            }
        }
        for (_, axis) in func.axes.iter() {
            let info = m.axis_info(axis)?;
            for p in [info.indptr, info.indices].into_iter().flatten() {
                m.index_params[p] = true;
            }
            m.axes.push(info);
        }
        for b in func.stmt_allocated_buffers() {
            if let Some(s) = m.stmt_alloc.get_mut(b.index()) {
                *s = true;
            }
        }
        for (b, buf) in func.buffers.iter() {
            let info = m.buf_info(b, buf)?;
            m.bufs.push(info);
        }
        Ok(m)
    }

    fn axis_info(&mut self, axis: &'f Axis) -> Result<AxisInfo> {
        let span = axis.span;
        let invalid = |message: String| InterpError::Invalid { message, span };
        let length = self.eval_size(&axis.length, span, || format!("length of axis `{}`", axis.name))?;
        let row_extent = match axis.kind {
            AxisKind::DenseFixed => length,
            AxisKind::SparseFixed => {
                let nnz = axis.nnz.as_ref().ok_or_else(|| invalid(format!("sparse-fixed axis `{}` has no row size", axis.name)))?;
                self.eval_size(nnz, span, || format!("row size of axis `{}`", axis.name))?
            }
            AxisKind::DenseVariable | AxisKind::SparseVariable => 0,
        };
        let nnz = match (axis.kind.is_variable(), &axis.nnz) {
            (true, Some(e)) => Some(self.eval_size(e, span, || format!("nnz of axis `{}`", axis.name))?),
            _ => None,
        };
        let parent = match (axis.kind, axis.parent) {
            (AxisKind::DenseFixed, _) | (AxisKind::SparseFixed, None) => None,
            (_, Some(p)) if self.func.axes.contains(p) => Some(p),
            _ => return Err(invalid(format!("axis `{}` has no valid parent", axis.name)).into()),
        };
        let param = |p: Option<ParamId>, role: &str| -> Result<Option<ParamId>> {
            match p {
                Some(p) if self.func.params.get(p).is_some_and(|q| q.kind == ParamKind::Handle) => Ok(Some(p)),
                _ => Err(invalid(format!("axis `{}` has no valid {role} parameter", axis.name)).into()),
            }
        };
        let indptr = if axis.kind.is_variable() { param(axis.indptr, "indptr")? } else { None };
        let indices = if axis.kind.is_sparse() { param(axis.indices, "indices")? } else { None };
        if !axis.idtype.is_int() {
            return Err(invalid(format!("axis `{}` has a non-integer index dtype {}", axis.name, axis.idtype)).into());
        }
        Ok(AxisInfo {
            kind: axis.kind,
            parent,
            length,
            row_extent,
            indptr,
            indices,
            idtype: axis.idtype,
            sorted: axis.sorted,
            nnz,
        })
    }

    fn buf_info(&mut self, b: BufferId, buf: &'f Buffer) -> Result<BufInfo> {
        let span = buf.span;
        let layout = match &buf.layout {
            Layout::Sparse(axes) => {
                if let Some(a) = axes.iter().find(|a| !self.func.axes.contains(**a)) {
                    let message = format!("buffer `{}` uses an unknown axis {a:?}", buf.name);
                    return Err(InterpError::Invalid { message, span }.into());
                }
                BufLayout::Sparse(axes.clone())
            }
            // Statement-level allocations get their shape when allocated.
            Layout::Dense(_) if self.stmt_alloc[b.index()] => BufLayout::Dense(Vec::new()),
            Layout::Dense(shape) => BufLayout::Dense(self.eval_shape(buf, shape, span)?),
        };
        let default = match &buf.default {
            Some(e) => {
                let v = self.eval(e, span)?;
                if v.dtype() != buf.dtype {
                    let message = format!("default of buffer `{}` is {}, expected {}", buf.name, v.dtype(), buf.dtype);
                    return Err(InterpError::Type { message, span }.into());
                }
                v
            }
            None => Value::zero(buf.dtype),
        };
        let extra = match &buf.extra_storage {
            Some(e) => self.eval_size(e, span, || format!("extra storage of buffer `{}`", buf.name))?,
            None => 0,
        };
        Ok(BufInfo { dtype: buf.dtype, storage: buf.storage, layout, default, extra })
    }

    /// Evaluates the dims of a dense shape.
    pub(crate) fn eval_shape(&mut self, buf: &Buffer, shape: &'f [sparsec_ir::Expr], span: Span) -> Result<Vec<i64>> {
        shape
            .iter()
            .enumerate()
            .map(|(d, e)| self.eval_size(e, span, || format!("dimension {d} of buffer `{}`", buf.name)))
            .collect()
    }

    /// Evaluates a size: an integer `>= 0`.
    fn eval_size(&mut self, e: &'f sparsec_ir::Expr, span: Span, what: impl Fn() -> String) -> Result<i64> {
        let v = self.eval_int(e, span)?;
        if v < 0 {
            return Err(InterpError::BadSize { message: format!("{} is negative ({v})", what()), span }.into());
        }
        Ok(v)
    }

    // ---- lookups -----------------------------------------------------------------------

    pub(crate) fn var(&self, v: VarId, span: Span) -> Result<&'f Var> {
        Ok(self.func.func().vars.try_get(v).ok_or_else(|| InterpError::Invalid { message: format!("unknown variable {v:?}"), span })?)
    }

    pub(crate) fn buffer(&self, b: BufferId, span: Span) -> Result<&'f Buffer> {
        Ok(self.func.func().buffers.try_get(b).ok_or_else(|| InterpError::Invalid { message: format!("unknown buffer {b:?}"), span })?)
    }

    pub(crate) fn axis_name(&self, a: AxisId) -> String {
        self.func.axes.try_get(a).map_or_else(|| format!("{a:?}"), |x| x.name.clone())
    }

    pub(crate) fn param_name(&self, p: ParamId) -> String {
        self.func.params.get(p).map_or_else(|| format!("#{p}"), |x| x.name.clone())
    }

    fn param_span(&self, p: ParamId) -> Span {
        self.func.params.get(p).map_or(Span::NONE, |x| x.span)
    }

    /// The array of an axis's `indptr` or `indices` parameter.
    pub(crate) fn index_array(&self, p: ParamId, span: Span) -> Result<&Array> {
        let a = self.arrays.get(p).and_then(Option::as_ref).ok_or_else(|| InterpError::MissingArray {
            param: self.param_name(p),
            span: self.param_span(p),
        })?;
        if !a.dtype().is_int() {
            return Err(InterpError::ArrayDType {
                param: self.param_name(p),
                expected: "i32 or i64".into(),
                found: a.dtype(),
                span,
            }.into());
        }
        Ok(a)
    }

    /// The evaluated declaration of a buffer.
    pub(crate) fn info(&self, b: BufferId, span: Span) -> Result<&BufInfo> {
        Ok(self.bufs.get(b.index()).ok_or_else(|| InterpError::Invalid { message: format!("unknown buffer {b:?}"), span })?)
    }

    /// The name of a buffer known to exist.
    pub(crate) fn buffer_name(&self, b: BufferId) -> String {
        self.func.buffers.try_get(b).map_or_else(|| format!("{b:?}"), |x| x.name.clone())
    }

    /// The storage of a buffer.
    pub(crate) fn buf_array(&self, b: BufferId, span: Span) -> Result<&Array> {
        let info = self.info(b, span)?;
        self.storage(b, info).ok_or_else(|| self.missing_storage(b, span))
    }

    /// The storage of buffer `b` (whose declaration is `info`), if it exists now.
    pub(crate) fn storage(&self, b: BufferId, info: &BufInfo) -> Option<&Array> {
        match info.storage {
            Storage::Param(p) => self.arrays.get(p).and_then(Option::as_ref),
            Storage::Alloc(_) => self.allocs.get(b.index()).and_then(Option::as_ref),
        }
    }

    /// The storage of a buffer, for writing.
    pub(crate) fn buf_array_mut(&mut self, b: BufferId, span: Span) -> Result<&mut Array> {
        let present = match self.info(b, span)?.storage {
            Storage::Param(p) => self.arrays.get(p).is_some_and(Option::is_some),
            Storage::Alloc(_) => self.allocs[b.index()].is_some(),
        };
        if !present {
            return Err(self.missing_storage(b, span));
        }
        let arr = match self.bufs[b.index()].storage {
            Storage::Param(p) => self.arrays[p].as_mut(),
            Storage::Alloc(_) => self.allocs[b.index()].as_mut(),
        };
        Ok(arr.ok_or_else(|| InterpError::Invalid { message: "storage vanished".into(), span })?)
    }

    pub(crate) fn missing_storage(&self, b: BufferId, span: Span) -> Box<InterpError> {
        Box::new(match self.bufs[b.index()].storage {
            Storage::Param(p) => InterpError::MissingArray { param: self.param_name(p), span: self.param_span(p) },
            Storage::Alloc(_) => self.unallocated(b, span),
        })
    }

    fn unallocated(&self, b: BufferId, span: Span) -> InterpError {
        let name = self.func.buffers.try_get(b).map_or("?", |x| x.name.as_str());
        InterpError::Invalid { message: format!("buffer `{name}` is used outside its allocation"), span }
    }

    // ---- storage -----------------------------------------------------------------------

    /// Number of flat positions of the chain ending at `axis` (1 for no axis).
    fn flat_size(&self, axis: Option<AxisId>, span: Span) -> Result<i64> {
        let mut chain = Vec::new();
        let mut cur = axis;
        while let Some(a) = cur {
            chain.push(a);
            cur = self.axes[a.index()].parent;
        }
        let mut size = 1i64;
        for &a in chain.iter().rev() {
            let ax = &self.axes[a.index()];
            size = if ax.kind.is_variable() {
                self.indptr_at(a, size, span)?
            } else {
                size.checked_mul(ax.row_extent)
                    .ok_or_else(|| InterpError::BadSize { message: "flat size overflows".into(), span })?
            };
        }
        Ok(size)
    }

    /// Storage length of a buffer: the layout walk with "one past the end" positions, plus
    /// the extra storage.
    pub(crate) fn storage_len(&self, b: BufferId, span: Span) -> Result<usize> {
        let info = &self.bufs[b.index()];
        let overflow = || InterpError::BadSize {
            message: format!("storage size of buffer `{}` overflows", self.func.buffers[b].name),
            span,
        };
        let size = match &info.layout {
            BufLayout::Sparse(axes) => {
                let mut size = 1i64;
                for &a in axes {
                    let ax = &self.axes[a.index()];
                    size = if ax.kind.is_variable() {
                        self.indptr_at(a, size, span)?
                    } else {
                        size.checked_mul(ax.row_extent).ok_or_else(overflow)?
                    };
                }
                size
            }
            BufLayout::Dense(shape) => shape.iter().try_fold(1i64, |acc, &d| acc.checked_mul(d)).ok_or_else(overflow)?,
        };
        let size = size.checked_add(info.extra).ok_or_else(overflow)?;
        Ok(usize::try_from(size).map_err(|_| overflow())?)
    }

    /// Storage length of any buffer; statement-level dense allocations must have a shape
    /// that depends on parameters only.
    pub(crate) fn buffer_len(&mut self, b: BufferId) -> Result<usize> {
        let buf = self.buffer(b, Span::NONE)?;
        if let (true, Layout::Dense(shape)) = (self.stmt_alloc[b.index()], &buf.layout) {
            let dims = self.eval_shape(buf, shape, buf.span)?;
            self.bufs[b.index()].layout = BufLayout::Dense(dims);
        }
        self.storage_len(b, buf.span)
    }

    /// Fresh storage for an allocated buffer, filled with its default.
    pub(crate) fn fresh_storage(&self, b: BufferId, span: Span) -> Result<Array> {
        let buf = self.buffer(b, span)?;
        let len = self.storage_len(b, span)?;
        if len > MAX_ALLOC {
            let message = format!("buffer `{}` needs {len} elements, more than the interpreter allocates", buf.name);
            return Err(InterpError::BadSize { message, span }.into());
        }
        Ok(filled(buf.dtype, len, self.bufs[b.index()].default))
    }

    /// Checks that every array the function binds is present, well typed and long enough,
    /// and that every variable axis stores as many positions as its declared `nnz`.
    pub(crate) fn check_arrays(&self) -> Result<()> {
        for (a, axis) in self.func.axes.iter() {
            let info = &self.axes[a.index()];
            for p in [info.indptr, info.indices].into_iter().flatten() {
                self.index_array(p, axis.span)?;
            }
            if let Some(declared) = info.nnz {
                let rows = self.flat_size(info.parent, axis.span)?;
                let stored = self.indptr_at(a, rows, axis.span)?;
                if stored != declared {
                    let message = format!(
                        "axis `{}` declares nnz = {declared} but its indptr ends at {stored}",
                        axis.name
                    );
                    return Err(InterpError::Invalid { message, span: axis.span }.into());
                }
            }
        }
        for (b, buf) in self.func.buffers.iter() {
            let Storage::Param(p) = buf.storage else { continue };
            let arr = self.buf_array(b, buf.span)?;
            let lenient = buf.dtype.is_int() && arr.dtype().is_int() && self.index_params.get(p) == Some(&true);
            if arr.dtype() != buf.dtype && !lenient {
                return Err(InterpError::ArrayDType {
                    param: self.param_name(p),
                    expected: buf.dtype.name().into(),
                    found: arr.dtype(),
                    span: buf.span,
                }.into());
            }
            let needed = self.storage_len(b, buf.span)?;
            if arr.len() < needed {
                return Err(InterpError::ArrayTooShort {
                    param: self.param_name(p),
                    buffer: buf.name.clone(),
                    len: arr.len(),
                    needed,
                    span: buf.span,
                }.into());
            }
        }
        Ok(())
    }

    /// Allocates the function-level `alloc` buffers.
    pub(crate) fn alloc_function_buffers(&mut self) -> Result<()> {
        for (b, buf) in self.func.buffers.iter() {
            if matches!(buf.storage, Storage::Alloc(_)) && !self.stmt_alloc[b.index()] {
                self.allocs[b.index()] = Some(self.fresh_storage(b, buf.span)?);
            }
        }
        Ok(())
    }

    /// The arrays after the run (by parameter name, then any extra inputs) and the scalars.
    pub(crate) fn into_args(mut self, args: &Args) -> Args {
        let mut out = Args::new();
        for (p, param) in self.func.params.iter().enumerate() {
            if let Some(a) = self.arrays[p].take() {
                out.arrays.insert(param.name.clone(), a);
            }
        }
        for (name, a) in &args.arrays {
            if !out.arrays.contains_key(name) {
                out.arrays.insert(name.clone(), a.clone());
            }
        }
        out.scalars = args.scalars.clone();
        out
    }

    /// Counts one loop step against the fuel.
    pub(crate) fn tick(&mut self, span: Span) -> Result<()> {
        self.steps += 1;
        if self.steps > self.max_steps {
            return Err(InterpError::FuelExhausted { max_steps: self.max_steps, span }.into());
        }
        Ok(())
    }
}

/// The value of a scalar argument for a parameter of type `dtype`.
fn scalar_value(dtype: DType, s: Scalar) -> std::result::Result<Value, String> {
    match (s, dtype) {
        (Scalar::Int(x), DType::I32) => i32::try_from(x).map(Value::I32).map_err(|_| format!("{x} does not fit in i32")),
        (Scalar::Int(x), DType::I64) => Ok(Value::I64(x)),
        (Scalar::Int(x), d) if d.is_float() => Ok(Value::from_f64(d, x as f64)),
        (Scalar::Float(x), d) if d.is_float() => Ok(Value::from_f64(d, x)),
        (Scalar::Bool(b), DType::Bool) => Ok(Value::Bool(b)),
        (s, d) => Err(format!("expected a {d} value, found {s:?}")),
    }
}
