//! # sparsec-interp
//!
//! The reference interpreter of the sparsec IR. It *is* the meaning of the IR: every pass
//! and backend is checked against it. It favours precision and clear errors over speed.
//!
//! [`run`] executes a [`Func`] on [`Args`] (arrays by handle-parameter name, scalars by
//! scalar-parameter name) and returns every array after execution. Errors never panic; those
//! raised by a statement carry its [`Span`](sparsec_ir::Span).
//!
//! ## Values
//!
//! * `i32`, `i64`: wrapping arithmetic. `/` truncates, `//` floors, `%` takes the sign of
//!   the divisor; division or remainder by zero is an error.
//! * `f32` is computed in `f32`, `f64` in `f64`; `f16`/`bf16` are computed in `f32` and
//!   rounded to the narrow type after every operation. Float division by zero follows IEEE.
//! * `bool`: `&&` and `||` short-circuit; `select` evaluates both arms.
//! * Operands must have the same dtype (no implicit conversions); casts behave like Rust's
//!   `as` (and `x != 0` for casts to `bool`). `max_value`/`min_value` are the largest and
//!   lowest finite values. `atomic_add(buf[i], v)` adds and yields the old value.
//!
//! ## Storage
//!
//! Each handle parameter has one array, shared by all buffers bound to it. A sparse buffer
//! over axes `A1..An` is addressed by walking the axes with a flat offset `off = 0`: a fixed
//! axis (`dense_fixed` with `length`, `sparse_fixed` with `k` entries per row) does
//! `off = off * extent + pos`; a variable axis does `off = indptr[off] + pos`, with
//! `pos < indptr[off + 1] - indptr[off]`. The storage length is the same walk with
//! "one past the end" (fixed: `size *= extent`; variable: `size = indptr[size]`, from
//! `size = 1`) plus `extra_storage`; the last index of an access may run up to
//! `extra_storage` past the end of its row (`J_indptr[i + 1]`, `K_indptr[i, j + 1]`) as long
//! as the offset stays inside the storage. Dense buffers are row-major over
//! their shape. A parameter's array must be at least as long as every buffer bound to it;
//! value arrays must have the buffer's dtype, while arrays used as an axis's
//! `indptr`/`indices` may be `i32` or `i64` whatever the declared dtypes. Allocated buffers are filled with their default
//! (zero unless `default = ...`): function-level ones once at entry, `Alloc` statements
//! afresh each time they run, until the end of their statement list.
//!
//! ## Stage I
//!
//! A sparse iteration expands its axes (`fuse` groups iterate as nested axes) into
//! iterators, outermost first. An iterator over a root `dense_fixed` axis runs over
//! `0..length`. An axis with a parent takes as row `r` the flat position of the nearest
//! active iterator over the parent (for `attach(X, Q)`: the *coordinate* of the nearest
//! iterator over `Q`), then runs over `indptr[r]..indptr[r+1]` (variable axes; coordinate =
//! `indices[flat]` if sparse, else the position in the row) or `r*k..r*k+k` (`sparse_fixed`,
//! coordinate `indices[flat]`). If there is an `init`, the spatial iterators alone run first,
//! with `init` at each point; then the full nest runs the body. Accesses take coordinates:
//! a `dense_fixed` coordinate must lie in `0..length`; on other axes a coordinate that is
//! not stored in its row is *absent*: reading it yields the buffer's default, storing to it
//! is an error. An assembled axis (`pattern = union(..)`, a sparse output) gets its row
//! pointer, coordinates and `nnz` at entry from `sparsec_ir::args::assemble` (a given row
//! pointer must equal them), and the buffers over it zeroed arrays where none is given.
//!
//! ## Stages II and III
//!
//! Loops run sequentially from `min` to `min + extent` (thread-bound ones included; a
//! negative extent runs nothing). A block evaluates its bindings (each must lie in
//! `0..extent`), runs `init` when every reduction iterator is 0, then its body. Sparse buffers take positions per axis, each
//! checked against its row; dense buffers take row-major indices, each checked against its
//! dimension. `reads`/`writes` are not checked.
//!
//! Every loop step (`for`, `while`, sparse-iteration point) counts against
//! [`Options::max_steps`].
//!
//! ## Access traces
//!
//! [`run_observed`] runs like [`run_with`] and also calls an observer with every access to a
//! global buffer ([`Access`]: buffer, element, size, load/store/atomic, the static site, and
//! the `blockIdx`/`threadIdx` values of the unit making it); see [`observe`]. It is how
//! `sparsec gpu-report --matrix` estimates GPU memory traffic. [`run`] and [`run_with`]
//! have no observer and pay one untaken branch per access for it.

mod access;
mod error;
mod exec;
mod machine;
pub mod observe;

pub use error::InterpError;
pub use observe::{Access, AccessKind};

use machine::Machine;
use sparsec_ir::data::{Args, Array};
use sparsec_ir::{BufferId, Func, ParamKind, Storage};

/// Execution limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Loop steps allowed before the run fails with [`InterpError::FuelExhausted`].
    pub max_steps: u64,
    /// Iterations of one execution of a `while` before the run fails with
    /// [`InterpError::WhileLimit`]; [`sparsec_ir::MAX_WHILE_ITERATIONS`] by default.
    pub max_while: i64,
}

impl Default for Options {
    fn default() -> Self {
        Options { max_steps: 1 << 36, max_while: sparsec_ir::MAX_WHILE_ITERATIONS }
    }
}

/// Runs `func` on `args` with default [`Options`]; returns the arrays (inputs and outputs)
/// and scalars after execution.
///
/// Every scalar parameter needs a value (integer scalars are accepted for float
/// parameters) and every handle parameter bound by a buffer or axis needs an array; see
/// [`alloc_missing_outputs`] to create outputs. Arrays in `args` that name no parameter are
/// passed through.
pub fn run(func: &Func, args: &Args) -> Result<Args, InterpError> {
    run_with(func, args, &Options::default())
}

/// Runs `func` on `args` with explicit [`Options`].
pub fn run_with(func: &Func, args: &Args, opts: &Options) -> Result<Args, InterpError> {
    run_boxed(func, args, opts).map_err(|e| *e)
}

fn run_boxed(func: &Func, args: &Args, opts: &Options) -> machine::Result<Args> {
    let assembled = assemble(func, args)?;
    let args = assembled.as_ref().unwrap_or(args);
    let mut m = Machine::new(func, args, opts.max_steps)?;
    m.max_while = opts.max_while;
    m.check_arrays()?;
    m.alloc_function_buffers()?;
    m.exec_list(&func.body)?;
    Ok(m.into_args(args))
}

/// Runs `func` on `args` like [`run_with`], calling `observer` with every access to a global
/// buffer (see [`observe`] for what is reported and in which order). Accesses made while
/// the arguments are checked and buffers set up are not reported.
pub fn run_observed(
    func: &Func,
    args: &Args,
    opts: &Options,
    observer: &mut dyn FnMut(&Access),
) -> Result<Args, InterpError> {
    let assembled = assemble(func, args).map_err(|e| *e)?;
    let args = assembled.as_ref().unwrap_or(args);
    let mut m = Machine::new(func, args, opts.max_steps).map_err(|e| *e)?;
    m.max_while = opts.max_while;
    m.check_arrays().map_err(|e| *e)?;
    m.alloc_function_buffers().map_err(|e| *e)?;
    m.observer = Some(observe::Observer::new(func, observer));
    m.exec_body(&func.body).map_err(|e| *e)?;
    Ok(m.into_args(args))
}

/// `args` completed with the pattern of every assembled axis (`None` when there is none):
/// its row pointer (checked where given), coordinates and `nnz`, and zeroed arrays for the
/// buffers over it that the caller did not give, as
/// [`sparsec_ir::args::assemble`] defines them. At Stage I the coordinates are the run's
/// output; lowered code writes them itself, the same.
fn assemble(func: &Func, args: &Args) -> machine::Result<Option<Args>> {
    let mut out: Option<Args> = None;
    for (id, axis) in func.axes.iter() {
        let (Some(_), Some(ip)) = (&axis.pattern, axis.indptr) else { continue };
        let ip = func.params[ip].name.clone();
        // Lowered code fills the coordinates of a given row pointer itself.
        if func.stage != sparsec_ir::Stage::I && args.arrays.contains_key(&ip) {
            continue;
        }
        let fail = |message: String| Box::new(InterpError::Assembly { axis: axis.name.clone(), message, span: axis.span });
        let (ptr, coords) = sparsec_ir::args::assemble(func, id, args).map_err(|e| fail(e.to_string()))?;
        // A given row pointer must be the pattern's; the coordinates are the run's to write.
        if let Some(given) = args.arrays.get(&ip) {
            let same = given.len() >= ptr.len() && ptr.iter().enumerate().all(|(r, &x)| given.get_i64(r) == Some(x));
            if !same {
                return Err(fail(format!("the given row pointer `{ip}` is not its pattern's")));
            }
        }
        let total = ptr.last().copied().unwrap_or(0);
        if total as u64 > machine::MAX_ALLOC as u64 {
            return Err(fail(format!("{total} entries, more than the interpreter allocates")));
        }
        let a = out.get_or_insert_with(|| args.clone());
        sparsec_ir::args::set_pattern(func, id, a, ptr, coords).map_err(|e| fail(e.to_string()))?;
    }
    // The values over them, which only now have a size: zeros where not given.
    if let Some(a) = &mut out {
        sparsec_ir::args::zero_assembled_values(func, a).map_err(|e| {
            let axes: Vec<&str> = func.axes.iter().filter(|(_, x)| x.pattern.is_some()).map(|(_, x)| x.name.as_str()).collect();
            Box::new(InterpError::Assembly { axis: axes.join("`, `"), message: e.to_string(), span: func.span })
        })?;
    }
    Ok(out)
}

/// Number of elements of storage that the interpreter allocates for `buffer`, given the
/// scalars and index arrays in `args`. Compiled code sizes buffers with
/// `sparsec_ir::args::buffer_len`; this is the reference it is checked against
/// (`tests/corpus.rs`).
pub fn buffer_len(func: &Func, buffer: BufferId, args: &Args) -> Result<usize, InterpError> {
    let len = Machine::new(func, args, Options::default().max_steps).and_then(|mut m| m.buffer_len(buffer));
    len.map_err(|e| *e)
}

/// Adds a zero-filled array for every handle parameter that `args` lacks and that buffers
/// are bound to, with the first such buffer's dtype and the longest storage among them.
/// Parameters bound only by axes are left missing.
pub fn alloc_missing_outputs(func: &Func, args: &mut Args) -> Result<(), InterpError> {
    let added = missing_outputs(func, args).map_err(|e| *e)?;
    args.arrays.extend(added);
    Ok(())
}

fn missing_outputs(func: &Func, args: &Args) -> machine::Result<Vec<(String, Array)>> {
    let assembled = assemble(func, args)?;
    let mut added = Vec::new();
    if let Some(a) = &assembled {
        added.extend(a.arrays.iter().filter(|(k, _)| !args.arrays.contains_key(*k)).map(|(k, v)| (k.clone(), v.clone())));
    }
    let args = assembled.as_ref().unwrap_or(args);
    let mut m = Machine::new(func, args, Options::default().max_steps)?;
    for (p, param) in func.params.iter().enumerate() {
        if param.kind != ParamKind::Handle || args.arrays.contains_key(&param.name) {
            continue;
        }
        let mut out: Option<(sparsec_ir::DType, usize)> = None;
        for (b, buf) in func.buffers.iter() {
            if buf.storage == Storage::Param(p) {
                let len = m.buffer_len(b)?;
                let entry = out.get_or_insert((buf.dtype, 0));
                entry.1 = entry.1.max(len);
            }
        }
        if let Some((dtype, len)) = out {
            if len > machine::MAX_ALLOC {
                return Err(Box::new(InterpError::BadSize {
                    message: format!("output `{}` needs {len} elements, more than the interpreter allocates", param.name),
                    span: param.span,
                }));
            }
            added.push((param.name.clone(), Array::zeros(dtype, len)));
        }
    }
    Ok(added)
}
