//! `gpu-report`'s estimates: ptxas's resources and the innermost loops of each kernel of a
//! function's PTX, and with data, each kernel's time by the model of `sparsec::estimate` on
//! the accesses the interpreter observes (`gpu-report --matrix`, `tune --backend gpu-report`).

use sparsec::estimate::{self, Collector, Estimate, Traffic, H100};
use sparsec::ir::data::Args;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The `gpu-report` of one function's PTX; for each kernel with a trace in `traffic` (by
/// kernel name), the trace's summary and the estimate of its time, which it also returns.
pub(crate) fn gpu_report(
    name: &str,
    ptx: &str,
    chip: &str,
    traffic: &BTreeMap<String, Traffic>,
) -> Result<(String, Vec<Estimate>), Box<dyn std::error::Error>> {
    let reports = sparsec_nvidia::ptxas(name, ptx, chip)?;
    let mut out = String::new();
    let mut estimates = Vec::new();
    for (kernel, text) in sparsec_nvidia::entries(ptx) {
        let r = reports.iter().find(|r| r.name == kernel);
        let (regs, spills, stack, shared) = r.map_or((0, 0, 0, 0), |r| (r.registers, r.spills, r.stack, r.shared));
        writeln!(out, "kernel {kernel} ({chip}): {regs} registers, {spills} B spilled, {stack} B stack, {shared} B shared")?;
        let mut loops: Vec<(String, Vec<String>)> =
            sparsec_nvidia::innermost_loops(text).into_iter().enumerate().map(|(k, l)| (format!("innermost loop {}", k + 1), l)).collect();
        if loops.is_empty() {
            // A kernel without loops: what one unit does.
            let body = text.lines().map(str::trim).filter(|l| l.ends_with(';') && !l.starts_with('.') && !l.starts_with("//"));
            loops.push(("no loop; the whole kernel".to_string(), body.map(str::to_string).collect()));
        }
        for (what, l) in &loops {
            let s = sparsec_nvidia::LoopStats::of(l);
            writeln!(
                out,
                "  {what}: {} instructions; global loads {} ({} non-coherent), stores {}, atomics {}; shared accesses {}; fma {}, unfused float multiplies {}; vector width {}",
                s.instructions,
                s.global_loads,
                s.nc_loads,
                s.global_stores,
                s.atomics,
                s.shared_accesses,
                s.fmas,
                s.float_muls,
                s.vector_width
            )?;
        }
        if let Some(t) = traffic.get(&kernel) {
            let threads = u32::try_from(t.threads_per_block).unwrap_or(u32::MAX);
            let e = estimate::estimate(&H100, t, estimate::occupancy(&H100, threads, regs, shared));
            write!(out, "{t}{e}")?;
            estimates.push(e);
        }
    }
    Ok((out, estimates))
}

/// The name of the GPU kernel that runs each top-level statement of a Stage-III function
/// (`ir::kernel_ranges`, the split the MLIR backend launches).
fn kernel_of_statements(func: &sparsec::ir::Func) -> Vec<String> {
    let mut out = Vec::new();
    for (k, r) in sparsec::ir::kernel_ranges(func).into_iter().enumerate() {
        out.extend(r.map(|_| format!("{}_kernel{k}", func.name)));
    }
    out
}

/// The report of the Stage-III function `lowered` (whose PTX is `ptx`) with each kernel's
/// estimate on `args`, from the accesses of an interpreted run; and the run's results.
pub(crate) fn estimated(
    name: &str,
    lowered: &sparsec::ir::Func,
    args: &Args,
    ptx: &str,
    chip: &str,
) -> Result<(String, Vec<Estimate>, Args), Box<dyn std::error::Error>> {
    let mut args = args.clone();
    sparsec::interp::alloc_missing_outputs(lowered, &mut args)?;
    // Accesses are gathered per kernel, by name.
    let names = kernel_of_statements(lowered);
    let mut kernel_ids: Vec<String> = names.clone();
    kernel_ids.dedup();
    let mut collector = Collector::new();
    let result = sparsec::interp::run_observed(lowered, &args, &sparsec::interp::Options::default(), &mut |a| {
        let k = kernel_ids.iter().position(|n| *n == names[a.stmt]).unwrap_or(a.stmt);
        collector.record(&sparsec::interp::Access { stmt: k, ..*a });
    })?;
    let traffic: BTreeMap<String, Traffic> =
        collector.finish().into_iter().filter_map(|(k, t)| Some((kernel_ids.get(k)?.clone(), t))).collect();
    let (text, estimates) = gpu_report(name, ptx, chip, &traffic)?;
    Ok((text, estimates, result))
}
