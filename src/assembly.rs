//! Sparse outputs at run time: the symbolic phase runs before the program.
//!
//! A function with assembled axes (`pattern = union(JA, JB)`, `product(JA, KB)`) writes a
//! sparse output whose pattern the arguments do not give. [`crate::backend::prepare`] then
//! also prepares the programs of its symbolic phase ([`phases`]), and each run counts the
//! rows, takes the prefix sums here ([`complete`]: the row pointer, `nnz`, the coordinate
//! and value arrays, zeroed), writes a product's coordinates, then runs the program, which
//! fills the rest.

use crate::driver::{DriverError, Plan};
use sparsec_passes::assemble::{Phase, Units};
use sparsec_ir::data::{Args, Array};
use sparsec_ir::{AxisId, DType, Expr, Func, Layout, Stage, Storage};

/// Why the pattern of a sparse output could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AssemblyError {
    /// The symbolic phase returned no row pointer, or one of the wrong length.
    #[error("the symbolic phase of assembled axis `{axis}` returned {found}")]
    Count {
        /// The axis.
        axis: String,
        /// What it returned instead.
        found: String,
    },
    /// The pattern holds more entries than its index type or this machine allows.
    #[error("assembled axis `{axis}` holds {entries} entries, more than {limit}")]
    TooLarge {
        /// The axis.
        axis: String,
        /// Its entries.
        entries: u128,
        /// What allows fewer.
        limit: String,
    },
    /// A buffer over the axis cannot be sized.
    #[error("{0}")]
    Size(#[from] sparsec_ir::args::ArgsError),
}

/// The assembled axes of `func` whose row pointer `args` lacks: the run assembles them.
pub fn missing(func: &Func, args: &Args) -> Vec<AxisId> {
    sparsec_passes::assemble::assembled_axes(func)
        .into_iter()
        .filter(|&a| func.axes[a].indptr.is_some_and(|p| !args.arrays.contains_key(&func.params[p].name)))
        .collect()
}

/// The programs of the symbolic phase of Stage-I `func` ([`sparsec_passes::assemble::symbolic_phases`]),
/// each as written and as it runs: a Stage-I one lowered to `stage` the way `plan` lowers the
/// program (a default schedule schedules it too; a trace is the program's, so it runs
/// plain), a Stage-III one as it is, its rows spread over a GPU's units where `gpu`
/// ([`Units`]). Empty where `func` assembles nothing.
pub fn phases(func: &Func, plan: &Plan, stage: Stage, gpu: bool) -> Result<Vec<(Phase, Func)>, DriverError> {
    let plan = match plan {
        Plan::Auto(a) => Plan::Auto(*a),
        Plan::Plain | Plan::Trace(_) => Plan::Plain,
    };
    // On a GPU a product's rows spread over its units, in blocks as the default GPU schedule
    // makes them; elsewhere they run in the chunks of a `parallel` loop.
    let threads = match &plan {
        Plan::Auto(a) => a.gpu_threads(),
        _ => None,
    };
    let units = if gpu { Units::Gpu { threads: threads.unwrap_or(crate::driver::GPU_THREADS) } } else { Units::Parallel };
    let mut out = Vec::new();
    for phase in sparsec_passes::assemble::symbolic_phases(func, units)? {
        let lowered = match (&plan, phase.func.stage) {
            (_, s) if s >= stage => phase.func.clone(),
            (Plan::Plain, _) => crate::driver::lower(&phase.func, stage)?,
            (plan, _) => crate::driver::lower_with(&phase.func, plan)?
                .into_iter()
                .rev()
                .find(|g| g.stage == stage)
                .ok_or(DriverError::CannotRaise { func: phase.func.name.clone(), at: phase.func.stage, want: stage })?,
        };
        out.push((phase, lowered));
    }
    Ok(out)
}

/// The row pointer and coordinate arrays of the assembled axes of `func` that `args` lacks
/// (what the symbolic phase's programs return).
pub fn pattern_arrays(func: &Func, args: &Args) -> (Vec<String>, Vec<String>) {
    let name = |p: Option<usize>| p.map(|p| func.params[p].name.clone());
    let axes = missing(func, args);
    (
        axes.iter().filter_map(|&a| name(func.axes[a].indptr)).collect(),
        axes.iter().filter_map(|&a| name(func.axes[a].indices)).collect(),
    )
}

/// The arguments of the symbolic phase: `args` and a zeroed row pointer for each axis it
/// counts (its parent's length + 1 entries).
pub fn count_args(func: &Func, args: &Args) -> Result<Args, AssemblyError> {
    let scalars = sparsec_ir::args::scalar_values(func, args)?;
    let mut out = args.clone();
    for a in missing(func, args) {
        let axis = &func.axes[a];
        let rows = axis.parent.and_then(|p| sparsec_ir::args::eval_int(&func.axes[p].length, &scalars)).unwrap_or(0);
        let len = usize::try_from(rows).unwrap_or(0).saturating_add(1);
        let name = &func.params[axis.indptr.expect("assembled axes have a row pointer")].name;
        out.array(name.clone(), Array::zeros(axis.idtype, len));
    }
    Ok(out)
}

/// Completes `args` after the symbolic phase returned `counted`: for each assembled axis
/// the run computes, the row pointer (prefix sums of the counts), `nnz`, a zeroed
/// coordinate array of `nnz` entries and zeroed value arrays for the buffers over it.
pub fn complete(func: &Func, args: &mut Args, counted: &Args) -> Result<(), AssemblyError> {
    let axes = missing(func, args);
    for &a in &axes {
        let axis = &func.axes[a];
        let ptr_name = func.params[axis.indptr.expect("assembled axes have a row pointer")].name.clone();
        let counts = counted.arrays.get(&ptr_name).ok_or_else(|| AssemblyError::Count {
            axis: axis.name.clone(),
            found: "no row pointer".into(),
        })?;
        let limit = match axis.idtype {
            DType::I64 => i64::MAX,
            _ => i32::MAX as i64,
        };
        let mut ptr = Vec::with_capacity(counts.len());
        let mut total: i64 = 0;
        ptr.push(0);
        for r in 1..counts.len() {
            let c = counts.get_i64(r).filter(|&c| c >= 0).ok_or_else(|| AssemblyError::Count {
                axis: axis.name.clone(),
                found: format!("a count of {:?} for row {}", counts.get_f64(r), r - 1),
            })?;
            total = total.checked_add(c).filter(|&t| t <= limit).ok_or_else(|| AssemblyError::TooLarge {
                axis: axis.name.clone(),
                entries: total as u128 + c as u128,
                limit: format!("its index type {} allows", axis.idtype),
            })?;
            ptr.push(total);
        }
        let entries = usize::try_from(total).map_err(|_| AssemblyError::TooLarge {
            axis: axis.name.clone(),
            entries: total as u128,
            limit: "this machine addresses".into(),
        })?;
        sparsec_ir::args::set_pattern(func, a, args, ptr, vec![0; entries])?;
    }
    // Value arrays of the buffers over those axes.
    sparsec_ir::args::zero_assembled_values(func, args)?;
    Ok(())
}

/// The sparse output `buffer` of `func` as a matrix, from the arrays of a run (`out`):
/// `Some` for a buffer over a root dense axis and an assembled axis (rows × the axis
/// length, its pattern and values), `None` for any other buffer.
pub fn matrix(
    func: &Func,
    buffer: sparsec_ir::BufferId,
    out: &Args,
) -> Result<Option<sparsec_formats::Csr<i64, f64>>, AssemblyError> {
    let b = &func.buffers[buffer];
    let (Layout::Sparse(axes), Storage::Param(vp)) = (&b.layout, b.storage) else { return Ok(None) };
    let [rows, cols] = axes.as_slice() else { return Ok(None) };
    let ax = &func.axes[*cols];
    let (Some(_), Some(ip), Some(ix)) = (&ax.pattern, ax.indptr, ax.indices) else { return Ok(None) };
    let scalars = sparsec_ir::args::scalar_values(func, out)?;
    let size = |e: &Expr| sparsec_ir::args::eval_int(e, &scalars).and_then(|x| usize::try_from(x).ok()).unwrap_or(0);
    let (m, n) = (size(&func.axes[*rows].length), size(&ax.length));
    let get = |p: usize| {
        out.arrays.get(&func.params[p].name).ok_or_else(|| sparsec_ir::args::ArgsError::Missing(func.params[p].name.clone()))
    };
    let ints = |a: &Array| (0..a.len()).filter_map(|k| a.get_i64(k)).collect::<Vec<_>>();
    let (ptr, ind, vals) = (ints(get(ip)?), ints(get(ix)?), get(vp)?.to_f64_vec());
    let nnz = ptr.get(m).copied().unwrap_or(0).max(0) as usize;
    let csr = sparsec_formats::Csr::try_new(m, n, ptr, ind[..nnz.min(ind.len())].to_vec(), vals[..nnz.min(vals.len())].to_vec())
        .map_err(|e| AssemblyError::Count { axis: ax.name.clone(), found: format!("a pattern that is not a matrix: {e}") })?;
    Ok(Some(csr))
}
