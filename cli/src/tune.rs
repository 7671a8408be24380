//! `sparsec tune`: searches the parameters of the default schedule for a program on its data
//! (the CPU's on mlir-cpu, the GPU's on a CubeCL backend or by `gpu-report`'s estimate) and
//! format decompositions (priced by a cost model first), measures or estimates each distinct
//! candidate, prints the table of what it tried and writes the winner as a schedule trace that
//! `--schedule` replays.

use crate::backends::Backend;
use crate::run::{self, RunArgs};
use sparsec::driver::{self, AutoSchedule, Plan};
use sparsec::schedule::auto::{CpuTuning, GpuTuning};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Arguments of `sparsec tune`: those of `run` (on `--backend mlir-cpu`, `cubecl-wgpu` or
/// `cubecl-cuda`), and the search's.
#[derive(clap::Args)]
pub struct TuneArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Seconds the search may take (lowering, compiling and timing candidates); the
    /// default schedule is always measured.
    #[arg(long, default_value_t = 120.0)]
    budget: f64,
    /// Seed of the order in which candidates are tried.
    #[arg(long, default_value_t = 0)]
    order_seed: u64,
    /// Timed runs of each candidate (its fastest counts), after one untimed run.
    #[arg(long, default_value_t = 10)]
    repeat: usize,
    /// Writes the fastest candidate's schedule here, as a trace for `--schedule`.
    #[arg(long)]
    write: Option<PathBuf>,
    /// Also prints every schedule measured during the search.
    #[arg(long)]
    all: bool,
    /// Searches the schedule's parameters only, not format decompositions.
    #[arg(long)]
    schedules_only: bool,
    /// GPU architecture whose PTX `--backend gpu-report` estimates (ptxas's resources; the
    /// model is an H100's).
    #[arg(long, default_value = "sm_90")]
    chip: String,
    /// The cost model's limit: a format decomposition whose pieces store more than this many
    /// value slots per nonzero of A (padding, blocks' zeros) does that many times CSR's
    /// multiply-adds, and is pruned before it is compiled.
    #[arg(long, default_value_t = 3.0)]
    max_slots: f64,
}

/// Candidates kept compiled besides the default for the final rounds.
const LEADERS: usize = 4;

/// Interleaved rounds in which the default and the leaders are measured again.
const ROUNDS: usize = 5;

/// The parameters of a default schedule: the CPU's or the GPU's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Params {
    Cpu(CpuTuning),
    Gpu(GpuTuning),
}

impl Params {
    /// The default schedule with these parameters.
    fn auto(self) -> AutoSchedule {
        match self {
            Params::Cpu(t) => AutoSchedule::CpuTuned(t),
            Params::Gpu(tuning) => AutoSchedule::GpuTuned { threads: driver::GPU_THREADS, tuning },
        }
    }

    /// The defaults of the CPU's (`gpu` false) or the GPU's schedule.
    fn default_for(gpu: bool) -> Params {
        if gpu {
            Params::Gpu(GpuTuning::default())
        } else {
            Params::Cpu(CpuTuning::default())
        }
    }
}

/// One measured candidate.
struct Tried {
    tuning: Params,
    /// The format decomposition (its name and the decomposed program's text), if any.
    format: Option<(String, String)>,
    /// Fastest kernel, in milliseconds.
    best_ms: f64,
    /// A format's: the default's fastest kernel timed between two timings of the format's
    /// (the machine's speed drifts; this is what its ratio is taken against).
    beside_default_ms: Option<f64>,
}

impl Tried {
    fn describe(&self) -> String {
        match &self.format {
            Some((name, _)) => format!("format {name}, default schedule"),
            None => describe(&self.tuning),
        }
    }
}

/// The format decompositions tried (`passes` rules for a CSR buffer `A[I, J]`): BSR blocks,
/// ELL as wide as the longest row (up to 256 slots), hyb buckets of 1 to 32 entries, GroupCOO
/// groups, SR-BCRS tiles and CSR with its rows in reverse Cuthill–McKee order (`rcm`). Each is
/// bound from the matrix (`driver::bind_*_pieces`).
fn format_rules(longest_row: usize) -> Vec<(String, Vec<sparsec::passes::FormatRewriteRule>)> {
    use sparsec::passes as p;
    let mut out = Vec::new();
    let mut add = |name: String, rules: Result<Vec<p::FormatRewriteRule>, p::DecomposeError>| {
        if let Ok(r) = rules {
            out.push((name, r));
        }
    };
    for b in [2, 4, 8] {
        add(format!("bsr_{b}"), p::bsr_rule(b).map(|r| vec![r]));
    }
    let k = longest_row.max(1).next_power_of_two();
    if k <= 256 {
        add(format!("ell_{k}"), p::ell_rule(k as i64).map(|r| vec![r]));
    }
    add("hyb_1_32".into(), p::hyb_rules(1, &[1, 2, 4, 8, 16, 32]));
    add("group_coo_8".into(), p::group_coo_rule(8).map(|r| vec![r]));
    add("sr_bcrs_4_8".into(), p::sr_bcrs_rule(4, 8).map(|r| vec![r]));
    add("rcm".into(), p::rcm_rule().map(|r| vec![r]));
    out
}

/// A format decomposition ready to score ([`prepare_format`]).
struct FormatCase<'a> {
    /// The kernel (the program without its preprocess), compiled.
    prepared: sparsec::backend::Prepared<'a>,
    /// The whole program's schedule, which `--write` saves.
    trace: sparsec::schedule::Trace,
    /// The decomposed program's text.
    text: String,
    /// The kernel at Stage III and its arguments, the pieces filled.
    lowered: sparsec::ir::Func,
    args: sparsec::ir::data::Args,
}

/// The decomposition of `stage1` by `rules` and its arguments, the pieces bound from the
/// matrix in `args` (O(nnz), nothing compiled). Refused where the rules do not fit the
/// program or the matrix.
fn decompose(stage1: &sparsec::ir::Func, args: &sparsec::ir::data::Args, rules: &[sparsec::passes::FormatRewriteRule]) -> Result<(sparsec::ir::Func, sparsec::ir::data::Args), String> {
    let g = sparsec::passes::decompose_format(stage1, rules).map_err(|x| x.to_string())?;
    let mut gargs = args.clone();
    driver::bind_hyb_pieces(&g, &mut gargs).map_err(|x| x.to_string())?;
    driver::bind_rule_pieces(&g, &mut gargs).map_err(|x| x.to_string())?;
    Ok((g, gargs))
}

/// The decomposition `g` of `stage1` (its arguments `gargs`, from [`decompose`]), ready to
/// time: the program without its preprocess, scheduled by the default schedule `auto` and
/// compiled, on arguments whose pieces hold what a run of the whole program (preprocess
/// included) put there; with the trace of the whole program and its text, which `--write`
/// saves. Refused where the result differs from `want` (the default's).
fn prepare_format<'a>(
    runner: &dyn sparsec::backend::Backend,
    loaded: &'a driver::Loaded,
    stage1: &sparsec::ir::Func,
    (g, mut gargs): (sparsec::ir::Func, sparsec::ir::data::Args),
    want: &sparsec::ir::data::Args,
    checked: bool,
    auto: &Plan,
) -> Result<FormatCase<'a>, String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let stage3 = |f: &sparsec::ir::Func, plan: &Plan| crate::backends::stage_iii(f, plan).map_err(|x| e(&x));
    // The whole program once: its preprocess fills the pieces.
    let whole = stage3(&g, auto)?;
    let full = sparsec::backend::prepare(runner, loaded, &g, &whole, auto, &gargs, checked).map_err(|x| e(&x))?;
    let filled = full.run().map_err(|x| e(&x))?;
    for p in g.params.iter().filter(|p| !stage1.params.iter().any(|q| q.name == p.name)) {
        if let Some(a) = filled.arrays.get(&p.name) {
            gargs.array(p.name.clone(), a.clone());
        }
    }
    let kernel = sparsec::passes::remove_preprocess(&g);
    let lowered = stage3(&kernel, auto)?;
    let prepared = sparsec::backend::prepare(runner, loaded, &kernel, &lowered, auto, &gargs, checked).map_err(|x| e(&x))?;
    let got = prepared.run().map_err(|x| e(&x))?;
    same_outputs(stage1, &got, want)?;
    let trace = auto.trace(&g).map_err(|x| e(&x))?;
    Ok(FormatCase { prepared, trace, text: sparsec::ir::text::print_func(&g), lowered, args: gargs })
}

/// Whether `got` holds the same numbers as `want` (the default's), output by output of `stage1`.
fn same_outputs(stage1: &sparsec::ir::Func, got: &sparsec::ir::data::Args, want: &sparsec::ir::data::Args) -> Result<(), String> {
    for b in driver::written_buffers(stage1) {
        let sparsec::ir::Storage::Param(p) = stage1.buffers[b].storage else { continue };
        let name = &stage1.params[p].name;
        let (Some(x), Some(y)) = (got.arrays.get(name), want.arrays.get(name)) else { continue };
        let (x, y) = (x.to_f64_vec(), y.to_f64_vec());
        let scale = y.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        if x.len() != y.len() || x.iter().zip(&y).any(|(p, q)| (p - q).abs() > 1e-4 * scale) {
            return Err(format!("its `{}` differs from the default's (a bug: please report it)", stage1.buffers[b].name));
        }
    }
    Ok(())
}

/// The cost model of a decomposition `g` of `stage1`: the value slots its pieces store
/// (padding and blocks' zeros included), bound in `args`, per stored entry of the `nnz` of A.
/// A kernel's multiply-adds grow with the slots it walks.
fn slots_per_nonzero(stage1: &sparsec::ir::Func, g: &sparsec::ir::Func, args: &sparsec::ir::data::Args, nnz: usize) -> f64 {
    // The pieces: the float parameters that `stage1` lacks.
    let slots: usize = g.buffers
        .iter()
        .filter(|(_, b)| b.dtype.is_float())
        .filter_map(|(_, b)| match b.storage {
            sparsec::ir::Storage::Param(p) => Some(&g.params[p].name),
            sparsec::ir::Storage::Alloc(_) => None,
        })
        .filter(|name| !stage1.params.iter().any(|q| &q.name == *name))
        .filter_map(|name| args.arrays.get(name))
        .map(|a| a.len())
        .sum();
    slots as f64 / nnz.max(1) as f64
}

/// The candidates of the CPU's (`gpu` false) or the GPU's default schedule: the default
/// first, then every combination of the values below in an order drawn from `seed`.
fn candidates(gpu: bool, seed: u64) -> Vec<Params> {
    let mut out = if gpu { gpu_candidates() } else { cpu_candidates().into_iter().map(Params::Cpu).collect() };
    // A seeded Fisher–Yates shuffle of all but the default (splitmix64).
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for i in (2..out.len()).rev() {
        let j = 1 + (next() % i as u64) as usize;
        out.swap(i, j);
    }
    out
}

/// The GPU default's parameters: features per lane, nonzeros per trip, rows per block, and
/// walks on `blockIdx.y` or not; the default first.
fn gpu_candidates() -> Vec<Params> {
    let d = GpuTuning::default();
    let mut out = vec![Params::Gpu(d)];
    for coarsen in [d.coarsen, 1, 2, 8] {
        for unroll in [d.unroll, 1, 2] {
            for rows_per_block in [d.rows_per_block, 1, 2, 8] {
                for walks_on_blocks in [d.walks_on_blocks, !d.walks_on_blocks] {
                    let t = Params::Gpu(GpuTuning { coarsen, unroll, rows_per_block, walks_on_blocks });
                    if !out.contains(&t) {
                        out.push(t);
                    }
                }
            }
        }
    }
    out
}

/// The CPU default's parameters, the default first.
fn cpu_candidates() -> Vec<CpuTuning> {
    let d = CpuTuning::default();
    let mut out = vec![d];
    for vector_row in [d.vector_row, 32, i64::MAX] {
        for long_row in [16, d.long_row, i64::MAX] {
            for row_sums in [2, d.row_sums, 8] {
                for chunks in [8, d.chunks, 128] {
                    for scale in [4, 1, -4] {
                        let grain = d.grain.map(|g| if scale > 0 { g * scale } else { (g / -scale).max(1) });
                        for (prefetch_distance, prefetch_min_bytes) in [(d.prefetch_distance, d.prefetch_min_bytes), (d.prefetch_distance, 0), (128, 0), (d.prefetch_distance, i64::MAX)] {
                            let t = CpuTuning { vector_row, long_row, row_sums, chunks, grain, prefetch_distance, prefetch_min_bytes };
                            if !out.contains(&t) {
                                out.push(t);
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// How many parameters differ from the default.
fn changes(t: &Params) -> usize {
    differences(t).len()
}

/// What differs from the default, for the table.
fn describe(t: &Params) -> String {
    let parts = differences(t);
    if parts.is_empty() {
        "default".into()
    } else {
        parts.join(", ")
    }
}

/// Each parameter that differs from the default, with its value.
fn differences(t: &Params) -> Vec<String> {
    let mut parts = Vec::new();
    let mut note = |differs: bool, what: String| {
        if differs {
            parts.push(what);
        }
    };
    match t {
        Params::Gpu(t) => {
            let d = GpuTuning::default();
            note(t.coarsen != d.coarsen, format!("coarsen {}", t.coarsen));
            note(t.unroll != d.unroll, format!("unroll {}", t.unroll));
            note(t.rows_per_block != d.rows_per_block, format!("rows_per_block {}", t.rows_per_block));
            note(t.walks_on_blocks != d.walks_on_blocks, format!("walks_on_blocks {}", t.walks_on_blocks));
        }
        Params::Cpu(t) => {
            let d = CpuTuning::default();
            let big = |v: i64| if v == i64::MAX { "never".to_string() } else { v.to_string() };
            note(t.vector_row != d.vector_row, format!("vector_row {}", big(t.vector_row)));
            note(t.long_row != d.long_row, format!("long_row {}", big(t.long_row)));
            note(t.row_sums != d.row_sums, format!("row_sums {}", t.row_sums));
            note(t.chunks != d.chunks, format!("chunks {}", t.chunks));
            note(t.grain != d.grain, format!("grain {}/{}", t.grain[0], t.grain[1]));
            note(t.prefetch_distance != d.prefetch_distance, format!("prefetch_distance {}", t.prefetch_distance));
            note(t.prefetch_min_bytes != d.prefetch_min_bytes, format!("prefetch_min_bytes {}", big(t.prefetch_min_bytes)));
        }
    }
    parts
}

/// `sparsec tune` (module documentation).
pub fn tune(mut a: TuneArgs, out_text: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    if a.run.backend == Backend::Interp {
        return Err("tune measures generated code: name `--backend mlir-cpu` (the CPU's schedule), `cubecl-wgpu`/`cubecl-cuda` (the GPU's) or `gpu-report` (the GPU's, ranked by the estimate)".into());
    }
    if a.repeat == 0 {
        return Err("tune: --repeat must be at least 1".into());
    }
    if !(a.max_slots.is_finite() && a.max_slots >= 1.0) {
        return Err(format!("tune: --max-slots must be a number of at least 1, not {}", a.max_slots).into());
    }
    if !(a.budget.is_finite() && a.budget > 0.0) {
        return Err(format!("tune: --budget must be a positive number of seconds, not {}", a.budget).into());
    }
    a.run.command = "tune";
    let s = run::setup_data(&a.run)?;
    // `gpu-report` scores by the model; the interpreter checks each candidate's numbers.
    let estimate = a.run.backend == Backend::GpuReport;
    let runner: Box<dyn sparsec::backend::Backend> = if estimate { Box::new(sparsec::backend::Interp) } else { crate::backends::runner(a.run.backend)? };
    let gpu = estimate || runner.gpu();
    let backend = crate::run::backend_name(a.run.backend);
    let start = Instant::now();
    let budget = Duration::from_secs_f64(a.budget);
    let mut seen: Vec<String> = Vec::new();
    let mut tried: Vec<Tried> = Vec::new();
    let mut skipped = 0;
    // The default and the fastest few so far, compiled, for the final rounds.
    let mut leaders: Vec<(usize, sparsec::schedule::Trace, sparsec::backend::Prepared<'_>)> = Vec::new();
    let time = |p: &sparsec::backend::Prepared<'_>, n: usize| -> Result<f64, sparsec::backend::BackendError> {
        let mut fastest = f64::INFINITY;
        for _ in 0..n {
            fastest = fastest.min(p.run_timed()?.1.kernel.as_secs_f64() * 1e3);
        }
        Ok(fastest)
    };
    // A candidate's score in milliseconds: its fastest kernel, or the model's estimate of the
    // sum of its kernels, once its interpreted numbers equal `want`.
    let score = |p: &sparsec::backend::Prepared<'_>, lowered: &sparsec::ir::Func, args: &sparsec::ir::data::Args, want: Option<&sparsec::ir::data::Args>| -> Result<f64, Box<dyn std::error::Error>> {
        if !estimate {
            return Ok(time(p, a.repeat)?);
        }
        let ptx = crate::backends::emit(lowered, crate::Emit::Ptx, &a.chip, None)?;
        let (_, estimates, got) = crate::report::estimated(&lowered.name, lowered, args, &ptx, &a.chip)?;
        if let Some(want) = want {
            same_outputs(&s.stage1, &got, want)?;
        }
        Ok(estimates.iter().map(|e| e.time).sum::<f64>() * 1e3)
    };
    // The default first, then every format decomposition, then the other schedules.
    let pattern = driver::csr_pattern(&s.stage1, "A", &s.args);
    let longest = pattern.as_ref().map_or(0, |m| m.row_lengths().into_iter().max().unwrap_or(0));
    let nnz = pattern.as_ref().map_or(0, |m| m.nnz());
    let formats = if a.schedules_only { Vec::new() } else { format_rules(longest) };
    let tunings = candidates(gpu, a.order_seed);
    let all: Vec<Result<Params, usize>> =
        std::iter::once(Ok(tunings[0])).chain((0..formats.len()).map(Err)).chain(tunings[1..].iter().copied().map(Ok)).collect();
    let mut want: Option<sparsec::ir::data::Args> = None;
    let mut refused: Vec<(String, String)> = Vec::new();
    // Formats the cost model ruled out, with their slots per nonzero.
    let mut pruned: Vec<(String, f64)> = Vec::new();
    let bar = crate::bench::progress("tune", all.len());
    for (k, cand) in all.iter().enumerate() {
        if k > 0 && start.elapsed() >= budget {
            break;
        }
        bar.set_position(k as u64);
        bar.set_message(format!("{:.0} of {:.0} s", start.elapsed().as_secs_f64(), a.budget));
        let mut beside_default_ms = None;
        let (tuning, format, trace, prepared, ms) = match *cand {
            Err(f) => {
                let (name, rules) = &formats[f];
                let Some(want) = want.as_ref() else { continue };
                let auto = Plan::Auto(Params::default_for(gpu).auto());
                let decomposed = match decompose(&s.stage1, &s.args, rules) {
                    Ok(d) => d,
                    Err(why) => {
                        refused.push((name.clone(), why));
                        continue;
                    }
                };
                let r = slots_per_nonzero(&s.stage1, &decomposed.0, &decomposed.1, nnz);
                if r > a.max_slots {
                    pruned.push((name.clone(), r));
                    continue;
                }
                match prepare_format(runner.as_ref(), &s.loaded, &s.stage1, decomposed, want, a.run.checked, &auto) {
                    Ok(c) => {
                        let mut ms = score(&c.prepared, &c.lowered, &c.args, None)?;
                        if let (false, Some(default)) = (estimate, leaders.first()) {
                            beside_default_ms = Some(time(&default.2, a.repeat)?);
                            ms = ms.min(time(&c.prepared, a.repeat)?);
                        }
                        (Params::default_for(gpu), Some((name.clone(), c.text)), c.trace, c.prepared, ms)
                    }
                    Err(why) => {
                        refused.push((name.clone(), why));
                        continue;
                    }
                }
            }
            Ok(tuning) => {
                let trace = Plan::Auto(tuning.auto()).trace(&s.stage1)?;
                // Lowered by replaying the trace: what is measured is what `--schedule` replays.
                let lowered = crate::backends::stage_iii(&s.stage1, &Plan::Trace(trace.clone()))?;
                // Parameters that do not change this program's code are measured once, and shown as
                // the fewest changes from the default that give the code.
                let text = sparsec::ir::text::print_func(&lowered);
                if let Some(i) = seen.iter().position(|t| *t == text) {
                    skipped += 1;
                    if let Some(t) = tried.get_mut(i).filter(|t| t.format.is_none() && changes(&tuning) < changes(&t.tuning)) {
                        t.tuning = tuning;
                    }
                    continue;
                }
                seen.push(text);
                let plan = Plan::Trace(trace.clone());
                let prepared = sparsec::backend::prepare(runner.as_ref(), &s.loaded, &s.stage1, &lowered, &plan, &s.args, a.run.checked)?;
                if want.is_none() {
                    want = Some(prepared.run()?);
                }
                let ms = score(&prepared, &lowered, &s.args, want.as_ref())?;
                (tuning, None, trace, prepared, ms)
            }
        };
        if format.is_some() {
            // Keep `seen` aligned with `tried`.
            seen.push(String::new());
        }
        let i = tried.len();
        tried.push(Tried { tuning, format, best_ms: ms, beside_default_ms });
        // Keep the default and the LEADERS fastest.
        let slowest = leaders
            .iter()
            .enumerate()
            .skip(1)
            .map(|(j, l)| (j, tried[l.0].best_ms))
            .max_by(|x, y| x.1.total_cmp(&y.1));
        if leaders.len() <= LEADERS {
            leaders.push((i, trace, prepared));
        } else if let Some((j, _)) = slowest.filter(|&(_, worst)| ms < worst) {
            leaders[j] = (i, trace, prepared);
        }
    }
    bar.finish_and_clear();
    // The leaders again, in interleaved rounds (the machine's speed drifts): these times rank.
    // Estimates do not drift: they rank as they are.
    let mut final_ms: Vec<f64> = leaders.iter().map(|l| if estimate { tried[l.0].best_ms } else { f64::INFINITY }).collect();
    for _ in 0..if estimate { 0 } else { ROUNDS } {
        for (slot, (_, _, p)) in leaders.iter().enumerate() {
            final_ms[slot] = final_ms[slot].min(time(p, a.repeat)?);
        }
    }
    let mut order: Vec<usize> = (0..leaders.len()).collect();
    order.sort_by(|&x, &y| final_ms[x].total_cmp(&final_ms[y]));
    let default_ms = final_ms[0];
    let how = if estimate {
        format!("estimated for an H100 by gpu-report's model (PTX for {}; a model, not a measurement), numbers checked by the interpreter", a.chip)
    } else {
        format!("fastest kernel of {} runs each", a.repeat)
    };
    writeln!(
        out_text,
        "tune {} on {backend}: {} distinct schedules and formats {} ({} more gave the same code) in {:.1} s, {how}",
        s.stage1.name,
        tried.len(),
        if estimate { "estimated" } else { "measured" },
        skipped,
        start.elapsed().as_secs_f64(),
    )?;
    if estimate {
        writeln!(out_text, "the default and the {} fastest by the estimate:", leaders.len() - 1)?;
    } else {
        writeln!(out_text, "the default and the {} fastest, measured again in {ROUNDS} interleaved rounds:", leaders.len() - 1)?;
    }
    let which = if gpu { "GPU" } else { "CPU" };
    let column = if estimate { "estimate ms" } else { " fastest ms" };
    writeln!(out_text, "  rank  {column}  vs default  parameters (what differs from the default {which} schedule)")?;
    for (rank, &slot) in order.iter().enumerate() {
        let t = &tried[leaders[slot].0];
        writeln!(out_text, "  {:>4} {:>12.4} {:>11.3}  {}", rank + 1, final_ms[slot], final_ms[slot] / default_ms, t.describe())?;
    }
    // Every format, measured (beside the default) or refused; the leaders above ranked again.
    if !formats.is_empty() {
        let beside = if estimate { "" } else { ", against the default timed between two timings of it" };
        writeln!(out_text, "formats (A decomposed by a rule, the default schedule; the kernel without the conversion{beside}):")?;
        for t in tried.iter().filter(|t| t.format.is_some()) {
            let base = t.beside_default_ms.unwrap_or(tried[0].best_ms);
            writeln!(out_text, "  {:>12.4} ms  {:>7.3}  {}", t.best_ms, t.best_ms / base, t.describe())?;
        }
        for (name, why) in &refused {
            writeln!(out_text, "  {:>12}     {:>7}  format {name}: {why}", "refused", "")?;
        }
        for (name, r) in &pruned {
            writeln!(out_text, "  {:>12}     {:>7}  format {name}: stores {r:.1} value slots per nonzero of A, above --max-slots {}", "pruned", "", a.max_slots)?;
        }
    }
    if a.all {
        writeln!(out_text, "every schedule {}, in the order tried{}:", if estimate { "estimated" } else { "measured" }, if estimate { "" } else { " (one pass each)" })?;
        for t in &tried {
            writeln!(out_text, "  {:>12.4} ms  {}", t.best_ms, t.describe())?;
        }
    }
    if let (Some(path), Some(&slot)) = (&a.write, order.first()) {
        let (i, trace, _) = &leaders[slot];
        std::fs::write(path, trace.to_json())?;
        match &tried[*i].format {
            None => writeln!(out_text, "wrote the fastest schedule to {} (replay it with --schedule)", path.display())?,
            Some((name, text)) => {
                let program = path.with_extension("sptir");
                std::fs::write(&program, format!("# {} decomposed as {name} by `sparsec tune`.\n{text}", s.stage1.name))?;
                writeln!(
                    out_text,
                    "wrote the fastest, format {name}, to {} and its schedule to {} (run it with `sparsec run {} --schedule {}`)",
                    program.display(),
                    path.display(),
                    program.display(),
                    path.display()
                )?;
            }
        }
    }
    Ok(())
}
