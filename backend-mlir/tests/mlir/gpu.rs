//! GPU modules: verified for every workload, golden MLIR and PTX for csrmm, sddmm, bsrmm.

use super::common::{bsrmm_gpu, csrmm_gpu, ellmm_gpu, gpu_auto, sddmm_gpu, snapshot, stage3};
use sparsec_backend_mlir::{emit_mlir, emit_ptx, gpu_plan};
use sparsec_testkit::workloads::WORKLOADS;

#[test]
fn every_workload_gives_a_verified_gpu_module() {
    for name in WORKLOADS {
        let f = stage3(name);
        let text = emit_mlir(&f).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(text.contains("gpu.launch_func"), "{name}");
        let ptx = emit_ptx(&f, "sm_80").unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(ptx.contains(".entry"), "{name}");
    }
    for f in [csrmm_gpu(), sddmm_gpu(), bsrmm_gpu(), ellmm_gpu()] {
        emit_mlir(&f).unwrap_or_else(|e| panic!("{}: {e}", f.name));
    }
}

#[test]
fn every_workload_with_the_default_gpu_schedule_gives_ptx() {
    for name in WORKLOADS {
        let f = gpu_auto(name);
        let text = emit_mlir(&f).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(text.contains("gpu.thread_id") || !text.contains("gpu.block_id"), "{name}");
        let ptx = emit_ptx(&f, "sm_90").unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(ptx.contains(".entry"), "{name}");
    }
}

#[test]
fn golden_mlir() {
    snapshot("csrmm_gpu_mlir", &emit_mlir(&csrmm_gpu()).unwrap());
    snapshot("sddmm_gpu_mlir", &emit_mlir(&sddmm_gpu()).unwrap());
    snapshot("bsrmm_gpu_mlir", &emit_mlir(&bsrmm_gpu()).unwrap());
}

#[test]
fn golden_ptx() {
    for chip in ["sm_80", "sm_90"] {
        for (name, f) in [("csrmm", csrmm_gpu()), ("sddmm", sddmm_gpu()), ("bsrmm", bsrmm_gpu())] {
            let ptx = emit_ptx(&f, chip).unwrap_or_else(|e| panic!("{name} {chip}: {e}"));
            assert!(ptx.contains(&format!(".target {chip}")), "{ptx}");
            assert!(ptx.contains(".entry"), "{ptx}");
            snapshot(&format!("{name}_{chip}_ptx"), &ptx);
        }
    }
}

#[test]
fn launch_plan() {
    let plan = gpu_plan(&csrmm_gpu()).unwrap();
    assert_eq!(plan.launches.len(), 1);
    snapshot("csrmm_gpu_plan", &plan.to_json());
    // Unbound code runs on a 1 x 1 grid.
    let plain = gpu_plan(&stage3("csrmm")).unwrap();
    assert_eq!(plain.launches[0].grid, ["1".to_string(), "1".to_string(), "1".to_string()]);
}

#[test]
fn function_level_allocations_go_to_the_host() {
    let f = stage3("sparse_softmax");
    let plan = gpu_plan(&f).unwrap();
    assert_eq!(plan.allocs.len(), 2, "{plan:?}");
    let text = emit_mlir(&f).unwrap();
    assert!(text.contains("gpu.alloc") && text.contains("gpu.memset") && text.contains("gpu.dealloc"), "{text}");
    emit_ptx(&f, "sm_80").unwrap();
}

#[test]
fn gpu_emulation_runs_the_kernel_translation() {
    use sparsec_backend_mlir::{emit_cpu_mlir, CpuOptions};
    let opts = CpuOptions { emulate_gpu: true, ..CpuOptions::default() };
    let text = emit_cpu_mlir(&csrmm_gpu(), &opts).unwrap();
    // Grid loops (6 per kernel) with the thread guards inside, no parallel loop.
    assert!(text.matches("scf.for").count() >= 6 + 3, "{text}");
    assert!(text.contains("scf.if") && !text.contains("scf.parallel"), "{text}");
}
