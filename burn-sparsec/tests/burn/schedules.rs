//! The GPU schedules of the shipped kernels, written with schedule primitives. The traces in
//! `kernels/*.trace.json` are their JSON form (`SPARSEC_BLESS=1` regenerates them).

use sparsec_ir::ThreadTag::{BlockIdxX, ThreadIdxX, ThreadIdxY};
use sparsec_schedule::{LoopRv, Schedule, ScheduleError};
use std::path::Path;

/// Threads per block along the feature (or nonzero) dimension.
const THREADS: i64 = 32;

type R<T> = Result<T, Box<dyn std::error::Error>>;

fn load(dir: &Path, name: &str) -> R<Schedule> {
    let text = std::fs::read_to_string(dir.join(format!("{name}.sptir")))?;
    let f = sparsec_ir::text::parse_func(name, &text).map_err(|e| format!("{name}: {e:?}"))?;
    Ok(Schedule::new(f)?)
}

fn loops(sch: &mut Schedule, block: &str) -> Result<Vec<LoopRv>, ScheduleError> {
    let b = sch.get_block(block)?;
    sch.get_loops(b)
}

/// `i` on blocks, the feature loop `k` split by [`THREADS`] onto threads.
fn rows_on_blocks(sch: &mut Schedule, block: &str, row: usize, feat: usize) -> Result<(), ScheduleError> {
    let l = loops(sch, block)?;
    sch.bind(l[row], BlockIdxX)?;
    let k = sch.split(l[feat], &[None, Some(THREADS)])?;
    sch.bind(k[1], ThreadIdxX)
}

/// csrmm's rows on blocks, features on threads (init and update); each thread walks the
/// row's nonzeros for its feature, accumulating C in a register (GE-SpMM's inner shape).
fn csrmm_rows(sch: &mut Schedule) -> Result<(), ScheduleError> {
    let i = loops(sch, "csrmm0")?[0];
    sch.bind(i, BlockIdxX)?;
    let b = sch.get_block("csrmm1")?;
    let jk = sch.get_loops(b)?;
    let k = sch.split(jk[1], &[None, Some(THREADS)])?;
    sch.reorder(&[k[0], k[1], jk[0]])?;
    sch.bind(k[1], ThreadIdxX)?;
    let k0 = loops(sch, "csrmm_init1")?[0];
    let k0 = sch.split(k0, &[None, Some(THREADS)])?;
    sch.bind(k0[1], ThreadIdxX)?;
    sch.cache_write(b, "C", sparsec_ir::Scope::Local, k[1])?;
    Ok(())
}

/// Row per block, features on threads, C in a register, multiply-adds fused.
pub fn csrmm(dir: &Path) -> R<Schedule> {
    let mut sch = load(dir, "csrmm")?;
    sch.lower_sparse_iter()?;
    csrmm_rows(&mut sch)?;
    sch.contract()?;
    sch.lower_sparse_buffer()?;
    Ok(sch)
}

/// [`csrmm`], and the epilogue as its own row-per-block kernel.
pub fn csrmm_bias_relu(dir: &Path) -> R<Schedule> {
    let mut sch = load(dir, "csrmm_bias_relu")?;
    sch.lower_sparse_iter()?;
    csrmm_rows(&mut sch)?;
    rows_on_blocks(&mut sch, "epilogue0", 0, 1)?;
    sch.contract()?;
    sch.lower_sparse_buffer()?;
    Ok(sch)
}

/// Rows and columns fused into one loop over the nonzeros, split onto blocks × threads.
pub fn sddmm(dir: &Path) -> R<Schedule> {
    let mut sch = load(dir, "sddmm")?;
    let sp = sch.get_sparse_iteration("sddmm")?;
    let it = sch.get_sp_iters(sp)?;
    sch.sparse_fuse(sp, &[it[0], it[1]])?;
    sch.lower_sparse_iter()?;
    let ij = loops(&mut sch, "sddmm0")?[0];
    let ij = sch.split(ij, &[None, Some(THREADS)])?;
    sch.bind(ij[0], BlockIdxX)?;
    sch.bind(ij[1], ThreadIdxX)?;
    sch.contract()?;
    sch.lower_sparse_buffer()?;
    Ok(sch)
}

/// Block row per block; block-row lanes on `threadIdx.y`, features on `threadIdx.x`.
pub fn bsrmm(dir: &Path) -> R<Schedule> {
    let mut sch = load(dir, "bsrmm")?;
    sch.lower_sparse_iter()?;
    let i = loops(&mut sch, "bsrmm0")?[0];
    sch.bind(i, BlockIdxX)?;
    let init = loops(&mut sch, "bsrmm_init1")?;
    sch.bind(init[0], ThreadIdxY)?;
    let f = sch.split(init[1], &[None, Some(THREADS)])?;
    sch.bind(f[1], ThreadIdxX)?;
    let l = loops(&mut sch, "bsrmm1")?;
    let (j, bi, bj, f) = (l[0], l[1], l[2], l[3]);
    let f = sch.split(f, &[None, Some(THREADS)])?;
    sch.reorder(&[bi, f[1], j, bj, f[0]])?;
    sch.bind(bi, ThreadIdxY)?;
    sch.bind(f[1], ThreadIdxX)?;
    sch.contract()?;
    sch.lower_sparse_buffer()?;
    Ok(sch)
}

/// Rows split over blocks × threads ([`ROWS_PER_BLOCK`] to a block): a thread walks its row.
fn rows_on_threads(sch: &mut Schedule, block: &str) -> Result<(), ScheduleError> {
    let i = loops(sch, block)?[0];
    let i = sch.split(i, &[None, Some(ROWS_PER_BLOCK)])?;
    sch.bind(i[0], BlockIdxX)?;
    sch.bind(i[1], ThreadIdxX)
}

/// Rows per block of the row-per-thread kernels.
const ROWS_PER_BLOCK: i64 = 128;

/// A row per thread: its maximum, the sum of exponentials, then the normalised entries; the
/// maximum and the sum in registers.
pub fn softmax(dir: &Path) -> R<Schedule> {
    let mut sch = load(dir, "softmax")?;
    sch.lower_sparse_iter()?;
    rows_on_threads(&mut sch, "softmax0")?;
    for (block, buffer) in [("row_max0", "MAX"), ("exp_sum0", "SUM")] {
        let (b, row) = (sch.get_block(block)?, sch.get_block("softmax0")?);
        sch.cache_write(b, buffer, sparsec_ir::Scope::Local, row)?;
    }
    sch.lower_sparse_buffer()?;
    Ok(sch)
}

/// A row per thread, its maximum in a register.
pub fn row_max(dir: &Path) -> R<Schedule> {
    let mut sch = load(dir, "row_max")?;
    sch.lower_sparse_iter()?;
    rows_on_threads(&mut sch, "row_max0")?;
    let (b, row) = (sch.get_block("row_max1")?, sch.get_block("row_max0")?);
    sch.cache_write(b, "Y", sparsec_ir::Scope::Local, row)?;
    sch.lower_sparse_buffer()?;
    Ok(sch)
}

/// Every shipped kernel with its schedule.
pub fn all(dir: &Path) -> R<Vec<(&'static str, Schedule)>> {
    Ok(vec![
        ("csrmm", csrmm(dir)?),
        ("csrmm_bias_relu", csrmm_bias_relu(dir)?),
        ("sddmm", sddmm(dir)?),
        ("bsrmm", bsrmm(dir)?),
        ("softmax", softmax(dir)?),
        ("row_max", row_max(dir)?),
    ])
}
