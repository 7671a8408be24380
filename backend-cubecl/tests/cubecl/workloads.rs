//! Every corpus workload against the oracle (fp32, rtol 1e-4): with the GPU default schedule
//! on every shared and generated matrix, unscheduled (one unit per nest) on the generated
//! ones. Outputs start filled with the testkit sentinel, so a missed `init` fails.

use super::common::{check_all, check_generated, workload};
use sparsec_backend_cubecl::compile;
use sparsec_ir::ThreadTag::*;
use sparsec_schedule::Schedule;
use sparsec_testkit::schedules::{self as hand, loops};

fn unscheduled(name: &str) {
    let prog = compile(&workload(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    check_generated(name, "unscheduled", &prog);
}

/// The default GPU schedule (`blockIdx.x` × 64 `threadIdx.x` on independent outer loops).
fn auto_scheduled(name: &str) {
    let f = workload(name);
    let s = sparsec_schedule::auto::gpu_schedule(&f, 64).unwrap_or_else(|e| panic!("{name}: {e}"));
    let prog = compile(&s).unwrap_or_else(|e| panic!("{name}: {e}"));
    check_all(name, "gpu_schedule", &prog);
}

macro_rules! workload_tests {
    ($($name:ident),* $(,)?) => {
        mod unscheduled {
            $(#[test]
            fn $name() {
                super::unscheduled(stringify!($name));
            })*
        }
        mod auto_scheduled {
            $(#[test]
            fn $name() {
                super::auto_scheduled(stringify!($name));
            })*
        }
    };
}

sparsec_testkit::with_workloads!(workload_tests);

/// The GPU default at other tunings (`auto::GpuTuning`): 2 or 1 features per lane with a
/// row's walks on `blockIdx.y`, and rolled walks of one row per block, on every shared and
/// generated matrix.
#[test]
fn gpu_tunings_of_csrmm() {
    use sparsec_schedule::auto::GpuTuning;
    for t in [
        GpuTuning { coarsen: 2, walks_on_blocks: true, ..Default::default() },
        GpuTuning { coarsen: 1, walks_on_blocks: true, ..Default::default() },
        GpuTuning { coarsen: 2, unroll: 1, rows_per_block: 1, walks_on_blocks: false },
    ] {
        let s = sparsec_schedule::auto::gpu_schedule_tuned(&workload("csrmm"), 64, &t).unwrap_or_else(|e| panic!("{t:?}: {e}"));
        let prog = compile(&s).unwrap_or_else(|e| panic!("{t:?}: {e}"));
        check_all("csrmm", &format!("{t:?}"), &prog);
    }
}

#[test]
fn scheduled_csrmm_row_per_block() {
    let sch = hand::csrmm_row_per_block(8);
    let prog = compile(sch.func()).unwrap();
    check_all("csrmm", "row per block", &prog);
}

#[test]
fn scheduled_sddmm_fused_nonzeros() {
    let mut sch = hand::sddmm_fused_nonzeros(32);
    let k = loops(&mut sch, "sddmm1")[0];
    sch.unroll(k).unwrap();
    let prog = compile(sch.func()).unwrap();
    check_all("sddmm", "fused nonzeros", &prog);
}

#[test]
fn scheduled_bsrmm_threads_over_block_rows_and_features() {
    let prog = compile(hand::bsrmm_block_rows().func()).unwrap();
    check_all("bsrmm", "block rows and features on threads", &prog);
}

#[test]
fn scheduled_ellmm_threads() {
    let prog = compile(hand::ellmm_threads().func()).unwrap();
    check_all("ellmm", "threads", &prog);
}

#[test]
fn unscheduled_square_sum_two_k() {
    unscheduled("square_sum_two_K");
}

#[test]
fn auto_scheduled_square_sum_two_k() {
    auto_scheduled("square_sum_two_K");
}

/// sddmm, one row per cube: the row of A is staged in shared memory by the cube's units
/// (its size, `feat_size`, is fixed at launch), then the units take 32 nonzeros at a time;
/// the launch synchronises after the fill, the copy and the init.
#[test]
fn scheduled_sddmm_row_of_a_in_shared_memory() {
    let f = workload("sddmm");
    let mut sch = Schedule::new(sparsec_passes::lower_sparse_iter(&f).unwrap()).unwrap();
    let row = sch.get_block("sddmm0").unwrap();
    let inner = sch.get_block("sddmm1").unwrap();
    let copy = sch.cache_read(inner, "A", sparsec_ir::Scope::Shared, row).unwrap();
    let i = loops(&mut sch, "sddmm0")[0];
    sch.bind(i, BlockIdxX).unwrap();
    let ax = sch.get_loops(copy).unwrap()[0];
    sch.bind(ax, ThreadIdxX).unwrap();
    let j = loops(&mut sch, "sddmm_init1")[0];
    let j = sch.split(j, &[None, Some(32)]).unwrap();
    sch.bind(j[1], ThreadIdxX).unwrap();
    let j = loops(&mut sch, "sddmm1")[0];
    let j = sch.split(j, &[None, Some(32)]).unwrap();
    sch.bind(j[1], ThreadIdxX).unwrap();
    let prog = compile(sch.func()).unwrap_or_else(|e| panic!("{e}\n{}", sch.text()));
    check_all("sddmm", "A row in shared memory", &prog);
}
