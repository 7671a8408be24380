//! Helpers: lowering, hand-written GPU schedules, comparisons.

use sparsec_ir::{Func, Stage, ThreadTag::*};
use sparsec_passes::PassManager;
use sparsec_schedule::{LoopRv, Schedule};
use sparsec_testkit as kit;

/// The workload lowered to Stage III without a schedule.
pub fn stage3(name: &str) -> Func {
    PassManager::lowering_to(Stage::III).run(&kit::workload(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn loops(sch: &mut Schedule, block: &str) -> Vec<LoopRv> {
    let b = sch.get_block(block).unwrap();
    sch.get_loops(b).unwrap()
}

fn finish(mut sch: Schedule) -> Func {
    sch.lower_sparse_buffer().unwrap();
    sch.func().clone()
}

/// csrmm: one row per GPU block, features over 32 threads.
pub fn csrmm_gpu() -> Func {
    let mut sch = Schedule::new(kit::workload("csrmm")).unwrap();
    sch.lower_sparse_iter().unwrap();
    let i = loops(&mut sch, "csrmm0")[0];
    sch.bind(i, BlockIdxX).unwrap();
    for block in ["csrmm1", "csrmm_init1"] {
        let l = loops(&mut sch, block);
        let k = *l.last().unwrap();
        let k = sch.split(k, &[None, Some(32)]).unwrap();
        sch.bind(k[1], ThreadIdxX).unwrap();
    }
    finish(sch)
}

/// sddmm: fused nonzeros split over blocks of 32 threads.
pub fn sddmm_gpu() -> Func {
    let mut sch = Schedule::new(kit::workload("sddmm")).unwrap();
    let sp = sch.get_sparse_iteration("sddmm").unwrap();
    let it = sch.get_sp_iters(sp).unwrap();
    sch.sparse_fuse(sp, &[it[0], it[1]]).unwrap();
    sch.lower_sparse_iter().unwrap();
    let ij = loops(&mut sch, "sddmm0")[0];
    let ij = sch.split(ij, &[None, Some(32)]).unwrap();
    sch.bind(ij[0], BlockIdxX).unwrap();
    sch.bind(ij[1], ThreadIdxX).unwrap();
    finish(sch)
}

/// bsrmm: block rows over GPU blocks, block rows × features over threads.
pub fn bsrmm_gpu() -> Func {
    let mut sch = Schedule::new(kit::workload("bsrmm")).unwrap();
    let sp = sch.get_sparse_iteration("bsrmm").unwrap();
    let it = sch.get_sp_iters(sp).unwrap();
    let (i, bi, bj, f, j) = (it[0], it[1], it[2], it[3], it[4]);
    sch.sparse_reorder(sp, &[i, j, bi, bj, f]).unwrap();
    sch.lower_sparse_iter().unwrap();
    let i = loops(&mut sch, "bsrmm0")[0];
    sch.bind(i, BlockIdxX).unwrap();
    let init = loops(&mut sch, "bsrmm_init1");
    sch.bind(init[0], ThreadIdxY).unwrap();
    sch.bind(init[1], ThreadIdxX).unwrap();
    let l = loops(&mut sch, "bsrmm1");
    sch.reorder(&[l[1], l[3], l[0], l[2]]).unwrap();
    sch.bind(l[1], ThreadIdxY).unwrap();
    sch.bind(l[3], ThreadIdxX).unwrap();
    finish(sch)
}

/// ellmm: rows over blocks, block rows × features over threads.
pub fn ellmm_gpu() -> Func {
    let mut sch = Schedule::new(kit::workload("ellmm")).unwrap();
    sch.lower_sparse_iter().unwrap();
    let i = loops(&mut sch, "ellmm0")[0];
    sch.bind(i, BlockIdxX).unwrap();
    let init = loops(&mut sch, "ellmm_init1");
    sch.bind(init[0], ThreadIdxY).unwrap();
    sch.bind(init[1], ThreadIdxX).unwrap();
    let l = loops(&mut sch, "ellmm1");
    let (j, bi, bj, f) = (l[0], l[1], l[2], l[3]);
    sch.reorder(&[bi, f, j, bj]).unwrap();
    sch.bind(bi, ThreadIdxY).unwrap();
    sch.bind(f, ThreadIdxX).unwrap();
    sch.unroll(bj).unwrap();
    finish(sch)
}

/// The GPU schedules by workload name.
pub fn gpu_scheduled(name: &str) -> Option<Func> {
    Some(match name {
        "csrmm" => csrmm_gpu(),
        "sddmm" => sddmm_gpu(),
        "bsrmm" => bsrmm_gpu(),
        "ellmm" => ellmm_gpu(),
        _ => return None,
    })
}

/// The default CPU schedule (`parallel` outer loops, `vectorized` inner spatial loops).
pub fn cpu_scheduled(name: &str) -> Func {
    sparsec_schedule::auto::cpu_schedule(&kit::workload(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The default GPU schedule (outer loops over `blockIdx.x` × 32 `threadIdx.x`).
pub fn gpu_auto(name: &str) -> Func {
    sparsec_schedule::auto::gpu_schedule(&kit::workload(name), 32).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A golden snapshot in `backend-mlir/tests/snapshots/`.
pub fn snapshot(name: &str, text: &str) {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path("../snapshots");
    s.set_prepend_module_to_snapshot(false);
    s.bind(|| insta::assert_snapshot!(name.to_string(), text));
}
