//! Helpers: lowering, hand-written GPU schedules, comparisons.

use sparsec_ir::{Func, Stage};
use sparsec_passes::PassManager;
use sparsec_schedule::Schedule;
use sparsec_testkit as kit;

/// The workload lowered to Stage III without a schedule.
pub fn stage3(name: &str) -> Func {
    PassManager::lowering_to(Stage::III).run(&kit::workload(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn finish(mut sch: Schedule) -> Func {
    sch.lower_sparse_buffer().unwrap();
    sch.into_func()
}

/// csrmm: one row per GPU block, features over 32 threads.
pub fn csrmm_gpu() -> Func {
    finish(kit::schedules::csrmm_row_per_block(32))
}

/// sddmm: fused nonzeros split over blocks of 32 threads.
pub fn sddmm_gpu() -> Func {
    finish(kit::schedules::sddmm_fused_nonzeros(32))
}

/// bsrmm: block rows over GPU blocks, block rows × features over threads.
pub fn bsrmm_gpu() -> Func {
    finish(kit::schedules::bsrmm_block_rows())
}

/// ellmm: rows over blocks, block rows × features over threads.
pub fn ellmm_gpu() -> Func {
    finish(kit::schedules::ellmm_threads())
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
