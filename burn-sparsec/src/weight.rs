//! [`SparseWeight`]: a sparse matrix as a Burn module parameter. The CSR pattern is constant
//! (integer parameters that optimisers never touch, saved and loaded with the record); the
//! entries are a trainable `Param`.

use crate::blocks::{self, BsrPlan, WeightFormat};
use crate::csr::{fit, int_tensor, read_floats, Pattern, SparseCsr};
use crate::error::{Result, SparseError};
use burn::module::{Content, DisplaySettings, Module, ModuleDisplay, Param, ParamId};
use burn::tensor::{Device, Int, Tensor};
use sparsec_formats::compose::NmMatrix;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The validated host pattern the forward pass uses. It is rebuilt from the pattern
/// parameters only after a load replaced them (their load mappers count loads) and moved to
/// the values' device when they moved.
#[derive(Debug)]
struct PatternCache {
    /// Loads of the pattern parameters so far; shared by clones, whose params share mappers.
    loads: Arc<AtomicU64>,
    /// The pattern and the load count it was built at.
    built: Mutex<Option<(u64, Arc<Pattern>)>>,
    /// The BSR plan last built, with the pattern it was made of.
    bsr: Mutex<Option<PlanOf>>,
}

/// A pattern and its BSR plan.
type PlanOf = (Arc<Pattern>, Arc<BsrPlan>);

impl Clone for PatternCache {
    fn clone(&self) -> Self {
        // A clone keeps what this weight built: each module's cache only ever holds a
        // pattern read from its own parameters.
        let built = self.built.lock().map(|b| b.clone()).unwrap_or(None);
        let bsr = self.bsr.lock().map(|b| b.clone()).unwrap_or(None);
        PatternCache { loads: self.loads.clone(), built: Mutex::new(built), bsr: Mutex::new(bsr) }
    }
}

/// A sparse `rows × cols` matrix as a module parameter, for fields of `#[derive(Module)]`
/// structs: the CSR pattern is constant and the `f32` entries are a trainable [`Param`] that
/// Burn's optimisers update.
///
/// The pattern is held as integer parameters (`shape`, `indptr`, `indices`), so it is saved
/// and loaded with the module's record and moves with it between devices; a loaded pattern
/// is validated before its first use (a malformed record is an error, never a launch). The
/// pattern changes only by loading or by building a new weight ([`SparseWeight::prune`]);
/// a custom `ModuleMapper` must not rewrite the integer parameters.
#[derive(Module, Debug)]
#[module(custom_display)]
pub struct SparseWeight {
    shape: Param<Tensor<1, Int>>,
    indptr: Param<Tensor<1, Int>>,
    indices: Param<Tensor<1, Int>>,
    values: Param<Tensor<1>>,
    #[module(skip)]
    cache: PatternCache,
    /// The format the forward pass multiplies in ([`SparseWeight::with_format`]).
    #[module(skip)]
    format: WeightFormat,
}

/// The shape statistics of a sparse weight (what `Display` prints).
#[derive(Clone, Debug, PartialEq)]
pub struct SparseStats {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Stored entries.
    pub nnz: usize,
    /// `nnz / (rows · cols)`.
    pub density: f64,
    /// The storage format.
    pub format: &'static str,
    /// Fewest entries in a row.
    pub min_row: usize,
    /// Most entries in a row.
    pub max_row: usize,
    /// Mean entries per row.
    pub mean_row: f64,
}

impl fmt::Display for SparseStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}×{}, nnz {} (density {:.2}%), row lengths {}–{} (mean {:.1})",
            self.format,
            self.rows,
            self.cols,
            self.nnz,
            self.density * 100.0,
            self.min_row,
            self.max_row,
            self.mean_row
        )
    }
}

/// A small deterministic generator (splitmix64) for patterns and initial values.
pub(crate) struct SplitMix(u64);

impl SplitMix {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix(seed)
    }
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, n)`.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 11) as u128 * n as u128) >> 53) as usize
    }
    /// Uniform in `[-bound, bound)`.
    pub(crate) fn symmetric(&mut self, bound: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        (2.0 * u - 1.0) * bound
    }
}

/// Reads an integer tensor back as `i64`s.
fn read_ints(what: &str, t: Tensor<1, Int>) -> Result<Vec<i64>> {
    let data = t.try_into_data().map_err(|e| SparseError::ReadBack(format!("{what}: {e:?}")))?;
    data.convert::<i64>().try_to_vec::<i64>().map_err(|e| SparseError::ReadBack(format!("{what}: {e:?}")))
}

/// `v` as `i32`s, or the record error naming `what`.
fn to_i32(what: &'static str, v: &[i64]) -> Result<Vec<i32>> {
    v.iter()
        .map(|&x| i32::try_from(x).map_err(|_| SparseError::Record(format!("{what} holds {x}, outside 32-bit range"))))
        .collect()
}

impl SparseWeight {
    /// A weight from CSR arrays (validated: sorted distinct columns per row, in bounds).
    pub fn from_parts(
        rows: usize,
        cols: usize,
        indptr: Vec<i32>,
        indices: Vec<i32>,
        values: Vec<f32>,
        device: &Device,
    ) -> Result<Self> {
        let m = SparseCsr::from_parts(rows, cols, indptr, indices, values, device)?;
        Self::from_csr(&m)
    }

    /// A weight with `m`'s pattern and entries (the entries become a fresh trainable leaf).
    pub fn from_csr(m: &SparseCsr) -> Result<Self> {
        let pattern = m.pattern.clone();
        let loads = Arc::new(AtomicU64::new(0));
        let device = pattern.device.clone();
        let param = |v: Vec<i32>| {
            let loads = loads.clone();
            Param::initialized(ParamId::new(), int_tensor(v, &device)).load_mapper(move |t| {
                loads.fetch_add(1, Ordering::SeqCst);
                t
            })
        };
        let shape = param(vec![fit("rows", pattern.rows)?, fit("cols", pattern.cols)?]);
        let indptr = param(pattern.host_indptr.clone());
        let indices = param(pattern.host_indices.clone());
        let values = Param::from_tensor(m.values().detach());
        let built = Mutex::new(Some((0, pattern)));
        let cache = PatternCache { loads, built, bsr: Mutex::new(None) };
        Ok(SparseWeight { shape, indptr, indices, values, cache, format: WeightFormat::Csr })
    }

    /// A random pattern of `round(density · rows · cols)` entries spread evenly over the rows
    /// (row lengths differ by at most one), columns drawn uniformly without repetition, and
    /// entries uniform in `[-1/√k, 1/√k)` for `k` the mean row length (Burn's `Linear`
    /// initialisation for the real fan-in). Deterministic in `seed`.
    pub fn random(rows: usize, cols: usize, density: f64, seed: u64, device: &Device) -> Result<Self> {
        check_density("SparseWeight::random", density)?;
        let cells = rows as u128 * cols as u128;
        let total = ((density * cells as f64).round() as u128).min(cells);
        let mut rng = SplitMix::new(seed);
        let mean = if rows == 0 { 0.0 } else { total as f32 / rows as f32 };
        let bound = if mean == 0.0 { 0.0 } else { 1.0 / mean.max(1.0).sqrt() };
        let (mut indptr, mut indices, mut values) = (vec![0i32], Vec::new(), Vec::new());
        let mut row = Vec::new();
        for r in 0..rows as u128 {
            let k = ((r + 1) * total / rows as u128 - r * total / rows as u128) as usize;
            // Floyd's sampling of k distinct columns.
            row.clear();
            for j in cols - k..cols {
                let t = rng.below(j + 1);
                row.push(if row.contains(&t) { j } else { t });
            }
            row.sort_unstable();
            for &c in &row {
                indices.push(fit("column index", c)?);
                values.push(rng.symmetric(bound));
            }
            indptr.push(fit("nnz", indices.len())?);
        }
        Self::from_parts(rows, cols, indptr, indices, values, device)
    }

    /// Magnitude pruning of a dense `[rows, cols]` matrix: the `round(density · rows · cols)`
    /// entries of largest magnitude (ties to the earlier row-major position). Reads `dense`
    /// back to the host.
    pub fn magnitude(dense: Tensor<2>, density: f64) -> Result<Self> {
        check_density("SparseWeight::magnitude", density)?;
        let device = dense.device();
        let [rows, cols] = dense.dims();
        let flat = read_floats(dense)?;
        let keep = ((density * flat.len() as f64).round() as usize).min(flat.len());
        let mut keep_mask = vec![false; flat.len()];
        for p in largest(&flat, keep) {
            keep_mask[p] = true;
        }
        Self::from_mask(rows, cols, &flat, &keep_mask, &device)
    }

    /// Block magnitude pruning of a dense `[rows, cols]` matrix: the
    /// `round(density · ⌈rows/block⌉ · ⌈cols/block⌉)` blocks of `block × block` with the
    /// largest sum of squares, every cell of a kept block stored (its
    /// [`suggested_format`](SparseWeight::suggested_format) is BSR). Reads `dense` back.
    pub fn magnitude_blocks(dense: Tensor<2>, density: f64, block: usize) -> Result<Self> {
        let op = "SparseWeight::magnitude_blocks";
        check_density(op, density)?;
        if block == 0 {
            return Err(SparseError::Argument { op, detail: "block size 0".into() });
        }
        let device = dense.device();
        let [rows, cols] = dense.dims();
        let flat = read_floats(dense)?;
        let total = rows.div_ceil(block) * cols.div_ceil(block);
        let keep = ((density * total as f64).round() as usize).min(total);
        let mask = blocks::largest_blocks(&flat, rows, cols, block, keep);
        Self::from_mask(rows, cols, &flat, &mask, &device)
    }

    /// N:M structured pruning of a dense `[rows, cols]` matrix: in every row, every group of
    /// `m` consecutive columns keeps its `n` entries of largest magnitude (ties to the earlier
    /// column). `cols` must be a multiple of `m` and `0 < n ≤ m`.
    pub fn n_m(dense: Tensor<2>, n: usize, m: usize) -> Result<Self> {
        let op = "SparseWeight::n_m";
        let device = dense.device();
        let [rows, cols] = dense.dims();
        if n == 0 || n > m {
            return Err(SparseError::Argument { op, detail: format!("{n}:{m} needs 0 < n ≤ m") });
        }
        if cols % m != 0 {
            return Err(SparseError::Argument { op, detail: format!("{cols} columns are not groups of {m}") });
        }
        let flat = read_floats(dense)?;
        let mut keep_mask = vec![false; flat.len()];
        for g in 0..flat.len() / m {
            for p in largest(&flat[g * m..(g + 1) * m], n) {
                keep_mask[g * m + p] = true;
            }
        }
        Self::from_mask(rows, cols, &flat, &keep_mask, &device)
    }

    /// 2:4 structured sparsity (see [`SparseWeight::n_m`]).
    pub fn two_four(dense: Tensor<2>) -> Result<Self> {
        Self::n_m(dense, 2, 4)
    }

    /// The weight in the compressed N:M layout of sparse tensor cores (PTX `mma.sp`, as
    /// `sparsec_formats::compose::NmMatrix` defines it: `n` values per group of `m` columns
    /// and each kept slot's position in the group in `ceil(log2 m)` metadata bits, 2:4 groups
    /// one nibble, 8 to a `u32`). Fails if a group holds more than `n` entries (prune with
    /// [`SparseWeight::n_m`] first); entries whose value is exactly zero are not kept.
    pub fn to_n_m(&self, n: usize, m: usize) -> Result<NmMatrix<f32>> {
        let csr = self.matrix()?.to_csr()?;
        NmMatrix::from_csr(&csr, n, m)
            .map_err(|e| SparseError::Argument { op: "SparseWeight::to_n_m", detail: e.to_string() })
    }

    /// A weight holding the nonzero entries of an N:M matrix (see [`SparseWeight::to_n_m`]).
    pub fn from_n_m(nm: &NmMatrix<f32>, device: &Device) -> Result<Self> {
        let csr = nm
            .to_csr::<i32>()
            .map_err(|e| SparseError::Argument { op: "SparseWeight::from_n_m", detail: e.to_string() })?;
        Self::from_csr(&SparseCsr::from_csr(&csr, device)?)
    }

    /// This weight pruned by magnitude to `round(density · rows · cols)` entries (its own
    /// entries of largest magnitude; the pattern shrinks, the kept values are copied).
    pub fn prune(&self, density: f64) -> Result<Self> {
        let op = "SparseWeight::prune";
        check_density(op, density)?;
        let pattern = self.pattern()?;
        let values = read_floats(self.values.val())?;
        let keep = (density * (pattern.rows * pattern.cols) as f64).round() as usize;
        if keep > values.len() {
            return Err(SparseError::Argument {
                op,
                detail: format!("density {density} keeps {keep} entries, the weight has {}", values.len()),
            });
        }
        let mut keep_mask = vec![false; values.len()];
        for p in largest(&values, keep) {
            keep_mask[p] = true;
        }
        self.keep(&pattern, &values, &keep_mask)
    }

    /// This weight pruned by magnitude row by row: every row keeps its
    /// `round(density · cols)` entries of largest magnitude (all of them if it has fewer), so
    /// no output loses all its inputs the way a global threshold can starve a row.
    pub fn prune_rows(&self, density: f64) -> Result<Self> {
        check_density("SparseWeight::prune_rows", density)?;
        let pattern = self.pattern()?;
        let values = read_floats(self.values.val())?;
        let per_row = (density * pattern.cols as f64).round() as usize;
        let mut keep_mask = vec![false; values.len()];
        for r in 0..pattern.rows {
            let (lo, hi) = (pattern.host_indptr[r] as usize, pattern.host_indptr[r + 1] as usize);
            for p in largest(&values[lo..hi], per_row) {
                keep_mask[lo + p] = true;
            }
        }
        self.keep(&pattern, &values, &keep_mask)
    }

    /// The entries of this weight (stored order) that `keep_mask` marks, as a new weight.
    fn keep(&self, pattern: &Pattern, values: &[f32], keep_mask: &[bool]) -> Result<Self> {
        let (mut indptr, mut indices, mut kept) = (vec![0i32], Vec::new(), Vec::new());
        for r in 0..pattern.rows {
            for p in pattern.host_indptr[r] as usize..pattern.host_indptr[r + 1] as usize {
                if keep_mask[p] {
                    indices.push(pattern.host_indices[p]);
                    kept.push(values[p]);
                }
            }
            indptr.push(fit("nnz", indices.len())?);
        }
        Self::from_parts(pattern.rows, pattern.cols, indptr, indices, kept, &self.values.val().device())
    }

    /// One RigL update (dynamic sparsity at constant `nnz`): drops the `round(fraction · nnz)`
    /// entries of smallest magnitude and grows as many new entries, at zero, where the dense
    /// gradient `dense_grad` (`[rows, cols]`, for example from a forward pass through
    /// [`SparseWeight::to_dense`] on a tracked leaf) has the largest magnitude among the
    /// positions outside the current pattern (ties to the earlier position). Kept entries keep
    /// their values.
    pub fn rigl(&self, dense_grad: Tensor<2>, fraction: f64) -> Result<Self> {
        let op = "SparseWeight::rigl";
        if !(0.0..=1.0).contains(&fraction) {
            return Err(SparseError::Argument { op, detail: format!("fraction {fraction} is not in [0, 1]") });
        }
        let pattern = self.pattern()?;
        let (rows, cols) = (pattern.rows, pattern.cols);
        let [gr, gc] = dense_grad.dims();
        if (gr, gc) != (rows, cols) {
            return Err(SparseError::Shape {
                op,
                detail: format!("the gradient is {gr}×{gc}, the weight {rows}×{cols}"),
            });
        }
        let values = read_floats(self.values.val())?;
        let grad = read_floats(dense_grad)?;
        let nnz = values.len();
        // Row-major position of every entry, in storage order.
        let entries: Vec<usize> = pattern.coords().map(|(r, c)| r * cols + c).collect();
        let mut active = vec![false; rows * cols];
        let mut value_at = vec![0f32; rows * cols];
        for (&f, &v) in entries.iter().zip(&values) {
            active[f] = true;
            value_at[f] = v;
        }
        let swap = ((fraction * nnz as f64).round() as usize).min(rows * cols - nnz);
        // Drop: keep the nnz - swap largest of the current entries.
        let mut keep = vec![false; rows * cols];
        for p in largest(&values, nnz - swap) {
            keep[entries[p]] = true;
        }
        // Grow: the largest gradients outside the old pattern.
        let outside: Vec<usize> = (0..rows * cols).filter(|&f| !active[f]).collect();
        let outside_grads: Vec<f32> = outside.iter().map(|&f| grad[f]).collect();
        for p in largest(&outside_grads, swap) {
            keep[outside[p]] = true;
        }
        Self::from_mask(rows, cols, &value_at, &keep, &self.values.val().device())
    }

    /// For each of this weight's entries in storage order, the position of the same
    /// `(row, column)` among `other`'s entries, if it has one. The shapes must agree.
    pub(crate) fn slots_in(&self, other: &SparseWeight) -> Result<Vec<Option<usize>>> {
        let (p, q) = (self.pattern()?, other.pattern()?);
        if (p.rows, p.cols) != (q.rows, q.cols) {
            return Err(SparseError::Shape {
                op: "follow_patterns",
                detail: format!("the weight was {}×{} and is {}×{}", q.rows, q.cols, p.rows, p.cols),
            });
        }
        let mut slots = Vec::with_capacity(p.nnz());
        for r in 0..p.rows {
            let (lo, hi) = (q.host_indptr[r] as usize, q.host_indptr[r + 1] as usize);
            let row = &q.host_indices[lo..hi];
            for &c in &p.host_indices[p.host_indptr[r] as usize..p.host_indptr[r + 1] as usize] {
                slots.push(row.binary_search(&c).ok().map(|k| lo + k));
            }
        }
        Ok(slots)
    }

    /// The kept entries of a dense row-major matrix as a weight.
    fn from_mask(rows: usize, cols: usize, flat: &[f32], keep: &[bool], device: &Device) -> Result<Self> {
        Self::from_csr(&SparseCsr::from_masked(rows, cols, flat, |p| keep[p], device)?)
    }

    /// The validated pattern on the values' device: the cached one, or one rebuilt after a
    /// load or a device move.
    fn pattern(&self) -> Result<Arc<Pattern>> {
        let device = self.values.val().device();
        let loads = self.cache.loads.load(Ordering::SeqCst);
        let mut built =
            self.cache.built.lock().map_err(|_| SparseError::Record("the pattern cache is poisoned".into()))?;
        if let Some((at, p)) = built.as_ref() {
            if *at == loads && p.device == device {
                return Ok(p.clone());
            }
        }
        let pattern = match built.as_ref() {
            // Same parameters, another device: move the host arrays.
            Some((at, p)) if *at == loads => {
                Pattern::new(p.rows, p.cols, p.host_indptr.clone(), p.host_indices.clone(), &device)?
            }
            _ => self.read_pattern(&device)?,
        };
        let pattern = Arc::new(pattern);
        *built = Some((loads, pattern.clone()));
        Ok(pattern)
    }

    /// The pattern read back from the integer parameters and validated.
    fn read_pattern(&self, device: &Device) -> Result<Pattern> {
        let shape = read_ints("shape", self.shape.val())?;
        let [rows, cols] = shape[..] else {
            return Err(SparseError::Record(format!("shape has {} entries, expected 2", shape.len())));
        };
        let size = |what: &'static str, v: i64| {
            usize::try_from(v).map_err(|_| SparseError::Record(format!("{what} = {v} is negative")))
        };
        let (rows, cols) = (size("rows", rows)?, size("cols", cols)?);
        let indptr = to_i32("indptr", &read_ints("indptr", self.indptr.val())?)?;
        let indices = to_i32("indices", &read_ints("indices", self.indices.val())?)?;
        if indptr.len() != rows + 1 {
            return Err(SparseError::Record(format!("indptr has {} entries for {rows} rows", indptr.len())));
        }
        Pattern::new(rows, cols, indptr, indices, device)
    }

    /// The format the forward pass multiplies in: CSR unless set by
    /// [`SparseWeight::with_format`] (a pruned or regrown weight starts at CSR again).
    pub fn format(&self) -> WeightFormat {
        self.format
    }

    /// The format the pattern's block structure suggests: BSR with the largest block of
    /// [`BSR_BLOCKS`](crate::BSR_BLOCKS) whose blocks the entries fill to
    /// [`BSR_FILL`](crate::BSR_FILL), else CSR. Not applied by itself: on the devices measured
    /// so far the BSR kernel is slower even then (docs/burn.md), so CSR stays the default.
    pub fn suggested_format(&self) -> Result<WeightFormat> {
        Ok(blocks::choose(&*self.pattern()?))
    }

    /// This weight multiplying in `format` (BSR: the entries scattered into `block × block`
    /// blocks, zeros padding the cells they do not fill; `block ≥ 1`).
    pub fn with_format(mut self, format: WeightFormat) -> Result<Self> {
        if format == (WeightFormat::Bsr { block: 0 }) {
            return Err(SparseError::Argument { op: "SparseWeight::with_format", detail: "block size 0".into() });
        }
        self.format = format;
        Ok(self)
    }

    /// `W · rhs` (`rhs` of `[cols, f]`) in the weight's [`format`](SparseWeight::format): by
    /// the CSR kernel, or by the BSR kernel on the entries scattered into their blocks (a
    /// differentiable scatter, so the gradient comes back to the same entries).
    pub fn spmm(&self, rhs: Tensor<2>) -> Result<Tensor<2>> {
        match self.bsr_plan()? {
            None => self.matrix()?.spmm(rhs),
            Some(plan) => {
                let values = self.values.val();
                let zeros = Tensor::<1>::zeros([plan.len], (&values.device(), values.dtype()));
                let blocked = zeros.scatter(0, plan.slots.clone(), values, burn::tensor::IndexingUpdateOp::Add);
                plan.matrix.with_values(blocked)?.spmm(rhs)
            }
        }
    }

    /// The BSR plan of the current pattern if the weight multiplies as BSR, built once per
    /// pattern and block size.
    fn bsr_plan(&self) -> Result<Option<Arc<BsrPlan>>> {
        let WeightFormat::Bsr { block } = self.format else { return Ok(None) };
        let pattern = self.pattern()?;
        let mut cached = self.cache.bsr.lock().map_err(|_| SparseError::Record("the BSR cache is poisoned".into()))?;
        if let Some((p, plan)) = cached.as_ref() {
            if Arc::ptr_eq(p, &pattern) && plan.matrix.block_size() == block {
                return Ok(Some(plan.clone()));
            }
        }
        let plan = Arc::new(blocks::plan(&pattern, block)?);
        *cached = Some((pattern, plan.clone()));
        Ok(Some(plan))
    }

    /// The matrix: this pattern with the trainable values (tracked on an autodiff device).
    pub fn matrix(&self) -> Result<SparseCsr> {
        SparseCsr::from_pattern(self.pattern()?, self.values.val())
    }

    /// The entries (`[nnz]`).
    pub fn values(&self) -> Tensor<1> {
        self.values.val()
    }

    /// The entries' parameter (for optimiser groups and gradients).
    pub fn values_param(&self) -> &Param<Tensor<1>> {
        &self.values
    }

    /// `(rows, cols)` (reads the pattern back if a load replaced it).
    pub fn shape(&self) -> Result<(usize, usize)> {
        let p = self.pattern()?;
        Ok((p.rows, p.cols))
    }

    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.values.shape().dims::<1>()[0]
    }

    /// The dense `[rows, cols]` matrix (differentiable in the values).
    pub fn to_dense(&self) -> Result<Tensor<2>> {
        Ok(self.matrix()?.to_dense())
    }

    /// Shape, density and row-length spread.
    pub fn stats(&self) -> Result<SparseStats> {
        let p = self.pattern()?;
        let lens = p.host_indptr.windows(2).map(|w| (w[1] - w[0]) as usize);
        let (min_row, max_row) = lens.fold((usize::MAX, 0), |(lo, hi), l| (lo.min(l), hi.max(l)));
        let nnz = p.nnz();
        let cells = (p.rows * p.cols).max(1) as f64;
        Ok(SparseStats {
            rows: p.rows,
            cols: p.cols,
            nnz,
            density: nnz as f64 / cells,
            format: self.format.name(),
            min_row: if p.rows == 0 { 0 } else { min_row },
            max_row,
            mean_row: nnz as f64 / p.rows.max(1) as f64,
        })
    }
}

impl ModuleDisplay for SparseWeight {
    fn custom_settings(&self) -> Option<DisplaySettings> {
        DisplaySettings::new().with_new_line_after_attribute(false).optional()
    }

    fn custom_content(&self, content: Content) -> Option<Content> {
        match self.stats() {
            Ok(s) => content.add_formatted(&s).optional(),
            Err(e) => content.add_formatted(&format!("unreadable pattern: {e}")).optional(),
        }
    }
}

/// Fails unless `density` is in `[0, 1]`.
pub(crate) fn check_density(op: &'static str, density: f64) -> Result<()> {
    if (0.0..=1.0).contains(&density) {
        Ok(())
    } else {
        Err(SparseError::Argument { op, detail: format!("density {density} is not in [0, 1]") })
    }
}

/// Positions of the `k` entries of largest magnitude (ties to the earlier position; NaN
/// counts as largest, so a diverged weight is kept visible rather than silently dropped).
pub(crate) fn largest(v: &[f32], k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    let key = |p: usize| {
        if v[p].is_nan() {
            f32::INFINITY
        } else {
            v[p].abs()
        }
    };
    order.sort_by(|&a, &b| key(b).total_cmp(&key(a)).then(a.cmp(&b)));
    order.truncate(k);
    order
}
