//! Emits the PTX (sm_80 and sm_90) and launch plans of GPU-scheduled csrmm and sddmm into a
//! folder, for `scripts/gpu-check` on a GPU machine: `<workload>_<variant>.<chip>.ptx` and
//! `<workload>_<variant>.json`. Variants: `auto` (the default GPU schedule, `--auto gpu`) and
//! `hand` (a simple hand schedule: csrmm one row per block and 32 feature threads, sddmm
//! fused nonzeros over blocks of 32 threads), and `csrmm_segments_auto`
//! (`examples/csrmm_segments.sptir` under `--auto gpu`: rows cut into segments), and
//! `csrmm_auto_coherent`, `csrmm_auto` with every load coherent (`ld.global`, not `.nc`), and
//! `csrmm_auto_rolled`/`_unroll2`/`_unroll8`: its nonzero walk at other unroll factors, and
//! `csrmm_auto_c2y`/`_c1y`: 2 or 1 features per lane with a row's walks on `blockIdx.y`
//! (several warps per wide row, GE-SpMM's grid; `auto::GpuTuning`).
//! `cargo run -p sparsec-backend-mlir --example emit_gpu_check -- OUT_DIR`

use sparsec_backend_mlir::{emit_ptx, gpu_plan};
use sparsec_ir::{Func, Stage, ThreadTag::*};
use sparsec_schedule::{auto, LoopRv, Schedule};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn loops(sch: &mut Schedule, block: &str) -> Result<Vec<LoopRv>> {
    let b = sch.get_block(block)?;
    Ok(sch.get_loops(b)?)
}

fn workload(name: &str) -> Result<Func> {
    program(&format!("tests/workloads/{name}.sptir"))
}

fn program(rel: &str) -> Result<Func> {
    let path = format!("{}/../{rel}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path)?;
    Ok(sparsec_ir::text::parse_func(&path, &text)?)
}

/// csrmm: one row per block, 32 feature threads.
fn csrmm_hand() -> Result<Func> {
    let mut sch = Schedule::new(workload("csrmm")?)?;
    sch.lower_sparse_iter()?;
    let i = loops(&mut sch, "csrmm0")?[0];
    sch.bind(i, BlockIdxX)?;
    for block in ["csrmm1", "csrmm_init1"] {
        let l = loops(&mut sch, block)?;
        let k = *l.last().ok_or("no loop")?;
        let k = sch.split(k, &[None, Some(32)])?;
        sch.bind(k[1], ThreadIdxX)?;
    }
    sch.lower_sparse_buffer()?;
    Ok(sch.func().clone())
}

/// sddmm: fused nonzeros over blocks of 32 threads.
fn sddmm_hand() -> Result<Func> {
    let mut sch = Schedule::new(workload("sddmm")?)?;
    let sp = sch.get_sparse_iteration("sddmm")?;
    let it = sch.get_sp_iters(sp)?;
    sch.sparse_fuse(sp, &[it[0], it[1]])?;
    sch.lower_sparse_iter()?;
    let ij = loops(&mut sch, "sddmm0")?[0];
    let ij = sch.split(ij, &[None, Some(32)])?;
    sch.bind(ij[0], BlockIdxX)?;
    sch.bind(ij[1], ThreadIdxX)?;
    sch.lower_sparse_buffer()?;
    Ok(sch.func().clone())
}

/// `f` with every `unroll_factor` annotation set to `n` (removed for 1): the nonzero walk of
/// the default schedule at other unroll factors, to time them.
fn with_unroll(mut f: Func, n: i64) -> Func {
    fn go(stmts: &mut [sparsec_ir::Stmt], n: i64) {
        for s in stmts {
            if let sparsec_ir::StmtKind::For(l) = &mut s.kind {
                if l.attrs.contains_key(sparsec_ir::UNROLL_FACTOR_ATTR) {
                    if n > 1 {
                        l.attrs.insert(sparsec_ir::UNROLL_FACTOR_ATTR.into(), sparsec_ir::AttrValue::Int(n));
                    } else {
                        l.attrs.shift_remove(sparsec_ir::UNROLL_FACTOR_ATTR);
                    }
                }
            }
            for l in s.kind.child_lists_mut() {
                go(l, n);
            }
        }
    }
    go(&mut f.body, n);
    f
}

/// The default GPU tuning with `coarsen` features per lane and a row's walks on `blockIdx.y`.
fn walks_on_blocks(coarsen: i64) -> auto::GpuTuning {
    auto::GpuTuning { coarsen, walks_on_blocks: true, ..Default::default() }
}

fn main() -> Result<()> {
    let out = std::env::args().nth(1).unwrap_or_else(|| "gpu-check".into());
    std::fs::create_dir_all(&out)?;
    let variants = [
        ("csrmm_auto", auto::gpu_schedule(&workload("csrmm")?, 128)?),
        ("sddmm_auto", auto::gpu_schedule(&workload("sddmm")?, 128)?),
        ("csrmm_hand", csrmm_hand()?),
        ("sddmm_hand", sddmm_hand()?),
        ("csrmm_segments_auto", auto::gpu_schedule(&program("examples/csrmm_segments.sptir")?, 128)?),
        ("csrmm_auto_rolled", with_unroll(auto::gpu_schedule(&workload("csrmm")?, 128)?, 1)),
        ("csrmm_auto_unroll2", with_unroll(auto::gpu_schedule(&workload("csrmm")?, 128)?, 2)),
        ("csrmm_auto_unroll8", with_unroll(auto::gpu_schedule(&workload("csrmm")?, 128)?, 8)),
        ("csrmm_auto_c2y", auto::gpu_schedule_tuned(&workload("csrmm")?, 128, &walks_on_blocks(2))?),
        ("csrmm_auto_c1y", auto::gpu_schedule_tuned(&workload("csrmm")?, 128, &walks_on_blocks(1))?),
    ];
    for (name, f) in variants {
        if f.stage != Stage::III {
            return Err(format!("{name} is not at Stage III").into());
        }
        for chip in ["sm_80", "sm_90"] {
            let ptx = emit_ptx(&f, chip)?;
            if name == "csrmm_auto" {
                // The same kernel with every load coherent, to time the read-only path.
                std::fs::write(format!("{out}/{name}_coherent.{chip}.ptx"), ptx.replace("ld.global.nc.", "ld.global."))?;
            }
            std::fs::write(format!("{out}/{name}.{chip}.ptx"), ptx)?;
        }
        std::fs::write(format!("{out}/{name}.json"), gpu_plan(&f)?.to_json())?;
        println!("{out}/{name}.{{sm_80,sm_90}}.ptx, {out}/{name}.json");
        if name == "csrmm_auto" {
            std::fs::write(format!("{out}/{name}_coherent.json"), gpu_plan(&f)?.to_json())?;
        }
    }
    Ok(())
}
