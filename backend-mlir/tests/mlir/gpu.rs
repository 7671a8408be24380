//! GPU modules: verified for every workload, golden MLIR and PTX for csrmm, sddmm, bsrmm, and
//! every emitted kernel assembled by NVIDIA's `ptxas` (PyPI's `nvidia-cuda-nvcc-cu12`).

use super::common::{bsrmm_gpu, csrmm_gpu, ellmm_gpu, gpu_auto, sddmm_gpu, snapshot, stage3};
use sparsec_backend_mlir::{emit_mlir, emit_ptx, gpu_plan};
use sparsec_testkit::nvidia::ptxas;
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

/// Every kernel the MLIR path emits is real PTX: NVIDIA's assembler takes it for sm_80 and
/// sm_90 (libdevice math linked in), within the register file and without spills.
#[test]
fn ptxas_assembles_every_kernel_without_spills() {
    let mut kernels = 0;
    for name in WORKLOADS {
        for (what, f) in [("plain", stage3(name)), ("auto gpu", gpu_auto(name))] {
            for chip in ["sm_80", "sm_90"] {
                let ptx = emit_ptx(&f, chip).unwrap_or_else(|e| panic!("{name} ({what}): {e}"));
                let report = ptxas(&format!("{name}_{}", what.replace(' ', "_")), &ptx, chip);
                for e in &report {
                    assert_eq!(e.spills, 0, "{name} ({what}) {chip}: {e:?}");
                }
                kernels += report.len();
            }
        }
    }
    for f in [csrmm_gpu(), sddmm_gpu(), bsrmm_gpu(), ellmm_gpu()] {
        for e in ptxas(&f.name, &emit_ptx(&f, "sm_90").unwrap(), "sm_90") {
            assert_eq!(e.spills, 0, "{}: {e:?}", f.name);
        }
        kernels += 1;
    }
    assert!(kernels >= 4 * WORKLOADS.len(), "only {kernels} kernels assembled");
}

/// GPU emulation of `f` on csrmm's cases over the generated matrices equals the interpreter.
fn emulated_csrmm_agrees(what: &str, f: &sparsec_ir::Func) {
    let opts = sparsec_backend_mlir::CpuOptions { emulate_gpu: true, ..Default::default() };
    let kernel = sparsec_backend_mlir::CpuKernel::compile(f, &opts).unwrap_or_else(|e| panic!("{what}: {e}"));
    for (mname, m) in sparsec_testkit::generated_matrices() {
        let case = sparsec_testkit::workloads::case("csrmm", &m, &mut sparsec_testkit::Rng::new(5)).unwrap();
        let mut out = case.args.clone();
        kernel.run(&mut out).unwrap_or_else(|e| panic!("{what} on {mname}: {e}"));
        let got = sparsec_testkit::output_f32(&out, "c");
        sparsec_testkit::assert_close(&format!("csrmm, {what}, emulated, on {mname}"), &got, &case.expected[0].1, 1e-4);
    }
}

/// The GPU default at other tunings (`auto::GpuTuning`: fewer features per lane, a row's walks
/// on `blockIdx.y`, rolled walks, one row per block) assembles without spills and, emulated,
/// equals the interpreter; with the walks on blocks the launch grid spreads over `y`.
#[test]
fn gpu_tunings_of_csrmm_agree_when_emulated() {
    use sparsec_schedule::auto::GpuTuning;
    let tunings = [
        GpuTuning { coarsen: 2, walks_on_blocks: true, ..Default::default() },
        GpuTuning { coarsen: 1, walks_on_blocks: true, ..Default::default() },
        GpuTuning { coarsen: 2, unroll: 1, rows_per_block: 1, walks_on_blocks: false },
    ];
    for t in tunings {
        let what = format!("{t:?}");
        let f = sparsec_schedule::auto::gpu_schedule_tuned(&sparsec_testkit::workload("csrmm"), 128, &t).unwrap_or_else(|e| panic!("{what}: {e}"));
        let ptx = emit_ptx(&f, "sm_90").unwrap_or_else(|e| panic!("{what}: {e}"));
        for r in ptxas("csrmm_tuned", &ptx, "sm_90") {
            assert_eq!((r.spills, r.stack), (0, 0), "{what}: {r:?}");
        }
        let plan = gpu_plan(&f).unwrap();
        assert_eq!(plan.launches.len(), 1, "{what}: {}", plan.to_json());
        assert_eq!(plan.launches[0].grid[1] != "1", t.walks_on_blocks, "{what}: {}", plan.to_json());
        emulated_csrmm_agrees(&what, &f);
    }
    let zero = GpuTuning { coarsen: 0, ..Default::default() };
    assert!(sparsec_schedule::auto::gpu_schedule_tuned(&sparsec_testkit::workload("csrmm"), 128, &zero).is_err());
}

/// The number of `bar.sync` instructions in `ptx`.
fn barriers(ptx: &str) -> usize {
    ptx.lines().filter(|l| l.trim_start().starts_with("bar.sync") || l.trim_start().starts_with("barrier.sync")).count()
}

/// Rows on blocks and features on threads, C's zeroing left serial beside the sum: every
/// thread zeroes the row redundantly while others would add into it, so barriers fence the
/// thread nest (`sparsec_ir::sync`); emulation, in phases, gives the interpreter's numbers.
#[test]
fn redundant_writes_beside_thread_loops_are_fenced_by_barriers() {
    use sparsec_ir::ThreadTag;
    let mut sch = sparsec_schedule::Schedule::new(sparsec_testkit::workload("csrmm")).unwrap();
    sch.lower_sparse_iter().unwrap();
    let b0 = sch.get_block("csrmm0").unwrap();
    let i = sch.get_loops(b0).unwrap()[0];
    sch.bind(i, ThreadTag::BlockIdxX).unwrap();
    let b1 = sch.get_block("csrmm1").unwrap();
    let k = sch.get_loops(b1).unwrap()[1];
    sch.bind(k, ThreadTag::ThreadIdxX).unwrap();
    sch.lower_sparse_buffer().unwrap();
    let f = sch.into_func();
    let mlir = emit_mlir(&f).unwrap();
    assert!(mlir.contains("gpu.barrier"), "{mlir}");
    let ptx = emit_ptx(&f, "sm_90").unwrap();
    assert!(barriers(&ptx) >= 2, "{ptx}");
    ptxas("csrmm_fenced", &ptx, "sm_90");
    emulated_csrmm_agrees("zeroing beside the thread nest", &f);
}

/// A shared cache of a row (copied in and written back by every unit) around a thread nest,
/// in a serial loop over rows: besides the barriers around the nest, one opens the loop body,
/// so no unit copies the next row in while another still writes this one back
/// (`sparsec_ir::sync::ListSync::opens`; fuzzer seed 9109907 on wgpu).
#[test]
fn a_loop_body_around_a_thread_nest_opens_with_a_barrier() {
    use sparsec_ir::{Scope, ThreadTag};
    let src = include_str!("../../../backend-cubecl/tests/fuzz_regressions/shared_cache_reused_across_serial_iterations.sptir");
    // GPU allocations need a constant size: the reproducer's n = 6 in the axes.
    let fixed = src.replace("dense_fixed(n)", "dense_fixed(6)");
    let f1 = sparsec_ir::text::parse_func("r.sptir", &fixed).unwrap_or_else(|e| panic!("{e}"));
    let mut sch = sparsec_schedule::Schedule::new(f1.clone()).unwrap();
    sch.lower_sparse_iter().unwrap();
    let b = sch.get_block("it_70").unwrap();
    let l = sch.get_loops(b).unwrap();
    sch.cache_write(b, "D", Scope::Shared, l[0]).unwrap();
    sch.bind(l[1], ThreadTag::ThreadIdxY).unwrap();
    sch.lower_sparse_buffer().unwrap();
    let f = sch.into_func();
    let mlir = emit_mlir(&f).unwrap();
    // The row loop's body: a barrier, the copy-in, the fenced nest, the write-back.
    let body = &mlir[mlir.find("scf.for").expect("the row loop")..];
    let copy_in = body.find("scf.if").expect("the copy-in");
    assert!(body[..copy_in].contains("gpu.barrier"), "{mlir}");
    assert_eq!(body.matches("gpu.barrier").count(), 4, "three in the body, one after the loop: {mlir}");
    ptxas("shared_row_loop", &emit_ptx(&f, "sm_90").unwrap(), "sm_90");
    let (cols, data) = sparsec_testkit::fuzz::parse_reproducer(src).unwrap();
    let args = sparsec_testkit::fuzz::build_args(&f1, &cols, &data).unwrap();
    let want = sparsec_interp::run(&f1, &args).unwrap();
    let opts = sparsec_backend_mlir::CpuOptions { emulate_gpu: true, ..Default::default() };
    let k = sparsec_backend_mlir::CpuKernel::compile(&f, &opts).unwrap();
    let mut out = args.clone();
    k.run(&mut out).unwrap();
    assert_eq!(out.arrays["d"], want.arrays["d"]);
}

/// Two nests over `threadIdx.x` with different mappings exchange C through memory: a barrier
/// orders them; with the same mapping each thread meets only its own elements (no barrier).
#[test]
fn thread_nests_exchanging_data_are_synchronised() {
    let mut sch = sparsec_testkit::schedules::csrmm_init_on_threads(16);
    sch.lower_sparse_buffer().unwrap();
    let f = sch.into_func();
    let ptx = emit_ptx(&f, "sm_90").unwrap();
    assert!(barriers(&ptx) >= 1, "{ptx}");
    emulated_csrmm_agrees("init split by 16, sum by 32", &f);
    let mut sch = sparsec_testkit::schedules::csrmm_init_on_threads(32);
    sch.lower_sparse_buffer().unwrap();
    let f = sch.into_func();
    assert_eq!(barriers(&emit_ptx(&f, "sm_90").unwrap()), 0);
    emulated_csrmm_agrees("init and sum split by 32", &f);
}

/// C accumulated in a register per thread: GPU emulation gives the interpreter's numbers, and
/// the innermost loop of the PTX stores nothing to global memory. A local buffer that the
/// threads of a loop share in the IR is refused.
#[test]
fn register_accumulators_are_per_thread() {
    let mut sch = sparsec_testkit::schedules::csrmm_register_accumulator();
    sch.lower_sparse_buffer().unwrap();
    let f = sch.into_func();
    emulated_csrmm_agrees("register accumulator", &f);
    let ptx = emit_ptx(&f, "sm_90").unwrap();
    let loops = sparsec_testkit::nvidia::innermost_loops(&ptx);
    let inner = loops.iter().map(|l| l.join("\n")).find(|l| l.contains("mul.rn.f32") || l.contains("fma.rn.f32")).unwrap_or_else(|| panic!("no loop multiplies:\n{ptx}"));
    assert!(!inner.contains("st.global"), "a global store in the innermost loop:\n{inner}");
    if std::env::var_os("SPARSEC_SHOW_PTX").is_some() {
        eprintln!("{inner}");
    }
    let f = sparsec_ir::text::parse_func("l", sparsec_testkit::schedules::LOCAL_ACROSS_UNITS).unwrap();
    let e = emit_mlir(&f).unwrap_err().to_string();
    assert!(e.contains("local buffer `L` is allocated outside a thread-bound loop"), "{e}");
}

/// An update that the units along an unbound thread index would repeat is refused.
#[test]
fn updates_repeated_along_unbound_thread_indices_are_refused() {
    let mut sch = sparsec_testkit::schedules::csrmm_update_repeated_along_threads();
    sch.lower_sparse_buffer().unwrap();
    let f = sch.into_func();
    let e = emit_mlir(&f).unwrap_err().to_string();
    assert!(e.contains("buffer `C` is updated in place outside every loop bound to threadIdx.x"), "{e}");
    let opts = sparsec_backend_mlir::CpuOptions { emulate_gpu: true, ..Default::default() };
    let e = sparsec_backend_mlir::CpuKernel::compile(&f, &opts).map(drop).unwrap_err().to_string();
    assert!(e.contains("would repeat the update"), "{e}");
    // Blocks too: every block along blockIdx.y repeats an update of global memory made
    // outside the loop bound to it (each block has shared memory of its own).
    let text = "func t(x: handle, y: handle, n: i32) stage III {
  buffer X = match_buffer(x, [n], f32)
  buffer Y = match_buffer(y, [1], f32)
  for i in blockIdx.x(n) {
    buffer S = alloc_buffer([1], f32, shared)
    S[0] = S[0] + 1.0
    Y[0] = Y[0] + 1.0
    for j in blockIdx.y(4) {
      X[i] = X[i] + S[0]
    }
  }
}
";
    let f = sparsec_ir::text::parse_func("t", text).unwrap();
    let e = emit_mlir(&f).unwrap_err().to_string();
    assert!(e.contains("buffer `Y` is updated in place outside every loop bound to blockIdx.y"), "{e}");
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
    // The GPU default binds rgcn_hetero_forward's atomic loop (nnz_i iterations) to
    // blockIdx.y: the launch caps y at 65,535 blocks and the kernel strides over the rest.
    let f = gpu_auto("rgcn_hetero_forward");
    let plan = gpu_plan(&f).unwrap();
    assert!(plan.launches.iter().any(|l| l.grid[1] == "min(max(1, nnz_i), 65535)"), "{}", plan.to_json());
    let mlir = emit_mlir(&f).unwrap();
    assert!(mlir.contains("arith.minsi"), "{mlir}");
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

/// Shared memory is a workgroup attribution. Each thread writes its own element and reads
/// another's (`L[31 - vt]`): barriers order the two nests, and phased emulation, the CPU path
/// and the interpreter agree.
#[test]
fn shared_memory_is_a_workgroup_attribution() {
    let src = sparsec_testkit::schedules::LOCAL_ACROSS_UNITS.replace("local)", "shared)");
    let f = sparsec_ir::text::parse_func("l", &src).unwrap_or_else(|e| panic!("{e}"));
    sparsec_ir::verify::verify_func(&f).unwrap_or_else(|e| panic!("{e:?}"));
    let text = emit_mlir(&f).unwrap();
    assert!(text.contains("workgroup(") && text.contains("#gpu.address_space<workgroup>"), "{text}");
    assert!(text.contains("gpu.barrier"), "{text}");
    let ptx = emit_ptx(&f, "sm_80").unwrap();
    assert!(ptx.contains(".shared") && barriers(&ptx) >= 1, "{ptx}");
    ptxas("shared_flip", &ptx, "sm_80");
    let mut args = sparsec_ir::data::Args::new();
    args.array("a", sparsec_ir::data::Array::F32((0..64).map(|i| i as f32).collect()))
        .array("b", sparsec_ir::data::Array::F32(vec![0.0; 64]))
        .int("n", 2);
    let want = sparsec_interp::run(&f, &args).unwrap().arrays["b"].clone();
    assert_eq!(sparsec_backend_mlir::run_cpu(&f, &args).unwrap().arrays["b"], want);
    let opts = sparsec_backend_mlir::CpuOptions { emulate_gpu: true, ..Default::default() };
    let k = sparsec_backend_mlir::CpuKernel::compile(&f, &opts).unwrap();
    let mut out = args.clone();
    k.run(&mut out).unwrap();
    assert_eq!(out.arrays["b"], want);
}

/// A loop bound to blockIdx.y with more iterations than the grid allows (70,000 > 65,535)
/// strides over the blocks: every element is written once, as the interpreter does.
#[test]
fn block_y_loops_stride_past_the_grid() {
    let src = r#"
func wide(y: handle, n: i32) stage III {
  buffer Y = match_buffer(y, [n], f32)
  for i in blockIdx.y(n) {
    block b(vi: spatial(n) = i) {
      Y[vi] = Y[vi] + cast(f32, vi % 7)
    }
  }
}
"#;
    let f = sparsec_ir::text::parse_func("wide", src).unwrap_or_else(|e| panic!("{e}"));
    let n = 70_000;
    let mut args = sparsec_ir::data::Args::new();
    args.array("y", sparsec_ir::data::Array::F32(vec![1.0; n])).int("n", n as i64);
    let want = sparsec_interp::run(&f, &args).unwrap();
    let opts = sparsec_backend_mlir::CpuOptions { emulate_gpu: true, ..Default::default() };
    let k = sparsec_backend_mlir::CpuKernel::compile(&f, &opts).unwrap();
    let mut got = args.clone();
    k.run(&mut got).unwrap();
    assert!(got.arrays["y"] == want.arrays["y"], "the emulated launch differs from the interpreter");
    assert_eq!(gpu_plan(&f).unwrap().launches[0].grid[1], "min(max(1, n), 65535)");
}

/// Under the default GPU schedule (which ends with `contract`) the multiply-adds of the
/// SpMM and SDDMM inner loops are fused: every innermost PTX loop that multiplies floats does
/// it with `fma.rn.f32`, none with `mul.rn.f32`.
#[test]
fn default_gpu_schedule_fuses_multiply_adds() {
    for name in ["csrmm", "sddmm", "bsrmm", "ellmm", "bmm"] {
        let ptx = emit_ptx(&gpu_auto(name), "sm_90").unwrap_or_else(|e| panic!("{name}: {e}"));
        let loops = sparsec_testkit::nvidia::innermost_loops(&ptx);
        let arith: Vec<String> = loops.iter().map(|l| l.join("\n")).filter(|l| l.contains(".f32")).collect();
        assert!(arith.iter().any(|l| l.contains("fma.rn.f32")), "{name}: no innermost loop fuses:\n{ptx}");
        for l in &arith {
            assert!(!l.contains("mul.rn.f32"), "{name}: an unfused multiply in an innermost loop:\n{l}");
        }
    }
}

/// csrmm under the default GPU schedule walks a row's nonzeros once for 32 lanes × 4
/// consecutive features, `NONZERO_UNROLL` nonzeros per trip (the schedule's `unroll_factor`,
/// which the module passes to LLVM as `llvm.loop.unroll.count`; a remainder loop takes the
/// rest). Where the feature count is a multiple of 4 (a test outside the row loop), a lane's
/// features are one vector: per nonzero the loop loads the value and column once and B with
/// one 128-bit load, does 4 FMAs into registers and stores nothing. Elsewhere the same loops
/// run with scalar loads (also no stores). No spills, no stack.
#[test]
fn default_csrmm_kernel_reads_each_nonzero_once_per_walk() {
    let coarsen = sparsec_schedule::auto::COARSEN as usize;
    let unroll = sparsec_schedule::auto::NONZERO_UNROLL as usize;
    let f = gpu_auto("csrmm");
    let count = format!("#llvm.loop_unroll<count = {unroll} : i32>");
    assert!(emit_mlir(&f).unwrap().contains(&count), "the nonzero loop carries its unroll factor");
    let ptx = emit_ptx(&f, "sm_90").unwrap();
    let loops = sparsec_testkit::nvidia::innermost_loops(&ptx);
    let stats: Vec<sparsec_nvidia::LoopStats> = loops.iter().map(|l| sparsec_nvidia::LoopStats::of(l)).collect();
    let multiplying: Vec<_> = stats.iter().filter(|s| s.fmas > 0).collect();
    for s in &multiplying {
        assert_eq!(s.fmas % coarsen, 0, "{s:?}");
        assert_eq!((s.global_stores, s.atomics, s.float_muls), (0, 0, 0), "{ptx}");
    }
    // The unrolled walks, vector and scalar.
    let walks: Vec<_> = multiplying.iter().filter(|s| s.fmas == unroll * coarsen).collect();
    assert!(walks.iter().any(|s| s.vector_width == 1), "no scalar walk of {unroll} nonzeros:\n{ptx}");
    let v = walks.iter().find(|s| s.vector_width == coarsen).unwrap_or_else(|| panic!("no vector walk of {unroll} nonzeros:\n{ptx}"));
    // One vector load of B and the nonzero's value and column per 4 FMAs.
    assert!(v.global_loads * 4 <= v.fmas * 3, "{} loads for {} FMAs:\n{ptx}", v.global_loads, v.fmas);
    // C is written once, by the register cache's write-back (one vector store, or 4 scalar
    // ones): the init stores into the registers (no zeroing pass, no copy of C in).
    assert_eq!(ptx.matches("st.global.v4").count(), 1, "{ptx}");
    assert_eq!(ptx.matches("st.global").count(), 1 + coarsen, "{ptx}");
    for r in ptxas("csrmm_coarsened", &ptx, "sm_90") {
        assert_eq!((r.spills, r.stack), (0, 0), "{r:?}");
    }
}

/// A kernel loads the buffers it never writes through the read-only, non-coherent path
/// (`ld.global.nc`, vector loads included), and every buffer it writes through the coherent
/// one: csrmm's default kernel reads A, B and the indices non-coherently; an unscheduled
/// kernel that reads and adds to `X` loads `X` coherently but `Y` non-coherently; a later
/// kernel that only reads what an earlier one wrote loads it non-coherently.
#[test]
fn read_only_buffers_load_through_the_non_coherent_path() {
    let ptx = emit_ptx(&gpu_auto("csrmm"), "sm_90").unwrap();
    let loops = sparsec_testkit::nvidia::innermost_loops(&ptx);
    for s in loops.iter().map(|l| sparsec_nvidia::LoopStats::of(l)).filter(|s| s.fmas > 0) {
        assert!(s.global_loads > 0 && s.nc_loads == s.global_loads, "{s:?}:\n{ptx}");
    }
    assert!(ptx.contains("ld.global.nc.v4"), "{ptx}");
    let text = "func t(x: handle, y: handle, z: handle, n: i32) stage III {
  buffer X = match_buffer(x, [n], f32)
  buffer Y = match_buffer(y, [n], f32)
  buffer Z = match_buffer(z, [n], f32)
  for i in blockIdx.x(n) {
    X[i] = X[i] + Y[i]
  }
  for i in blockIdx.x(n) {
    Z[i] = X[i] * 2.0
  }
}
";
    let f = sparsec_ir::text::parse_func("t", text).unwrap();
    let ptx = emit_ptx(&f, "sm_90").unwrap();
    let kernels = sparsec_testkit::nvidia::entries(&ptx);
    assert_eq!(kernels.len(), 2, "{ptx}");
    let (first, second) = (kernels[0].1, kernels[1].1);
    // X (read and written) coherently, Y non-coherently.
    assert_eq!((first.matches("ld.global.nc").count(), first.matches("ld.global.f32").count() + first.matches("ld.global.b32").count()), (1, 1), "{first}");
    // The second kernel only reads X.
    assert_eq!(second.matches("ld.global.nc").count(), 1, "{second}");
    assert_eq!(second.matches("ld.global").count(), 1, "{second}");
    ptxas("read_only", &ptx, "sm_90");
}

/// csrmm and sddmm under the default GPU schedule, emulated, equal the reference at feature
/// counts that are multiples of the vector width (vector forms; csrmm's lanes partly idle
/// below 128) and that are not (the loops as written).
#[test]
fn default_spmm_and_sddmm_kernels_agree_at_every_feature_count() {
    use sparsec_testkit::workloads::{sddmm_case_of_width, spmm_case};
    let opts = sparsec_backend_mlir::CpuOptions { emulate_gpu: true, ..Default::default() };
    let matrices = sparsec_testkit::generated_matrices();
    let cases: [(&str, fn(&sparsec_testkit::Mat, &mut sparsec_testkit::Rng, usize) -> sparsec_testkit::workloads::Case); 2] =
        [("csrmm", spmm_case), ("sddmm", sddmm_case_of_width)];
    for (name, case_of) in cases {
        let f = gpu_auto(name);
        let text = sparsec_backend_mlir::emit_cpu_mlir(&f, &opts).unwrap();
        assert!(text.contains("vector.load"), "{name}: the vector form is emulated:\n{text}");
        let kernel = sparsec_backend_mlir::CpuKernel::compile(&f, &opts).unwrap();
        for feat in [1, 3, 4, 6, 32, 68, 130, 260] {
            for (mname, m) in matrices.iter().take(3) {
                let case = case_of(m, &mut sparsec_testkit::Rng::new(feat as u64), feat);
                let mut out = case.args.clone();
                kernel.run(&mut out).unwrap_or_else(|e| panic!("{name}, feat {feat} on {mname}: {e}"));
                let got = sparsec_testkit::output_f32(&out, "c");
                sparsec_testkit::assert_close(&format!("{name} --auto gpu, feat {feat}, on {mname}"), &got, &case.expected[0].1, 1e-4);
            }
        }
    }
}

/// sddmm under the default GPU schedule sums each nonzero's product in 4 partial sums, one
/// per consecutive feature: where the feature count is a multiple of 4, the innermost loop
/// reads A and B with 128-bit loads (and the column), 4 FMAs per step, no store.
#[test]
fn default_sddmm_kernel_reads_four_features_at_once() {
    let ptx = emit_ptx(&gpu_auto("sddmm"), "sm_90").unwrap();
    let loops = sparsec_testkit::nvidia::innermost_loops(&ptx);
    let stats: Vec<sparsec_nvidia::LoopStats> = loops.iter().map(|l| sparsec_nvidia::LoopStats::of(l)).collect();
    let v = stats.iter().find(|s| s.vector_width == 4 && s.fmas > 0).unwrap_or_else(|| panic!("no vector loop:\n{ptx}"));
    assert_eq!((v.global_stores, v.atomics, v.float_muls), (0, 0, 0), "{ptx}");
    assert!(v.global_loads * 4 <= v.fmas * 3, "{} loads for {} FMAs:\n{ptx}", v.global_loads, v.fmas);
    for r in ptxas("sddmm_partial_sums", &ptx, "sm_90") {
        assert_eq!((r.spills, r.stack), (0, 0), "{r:?}");
    }
}

/// Kernels index in 32 bits when every integer of the program is an `i32` (the plan says so,
/// for the launcher), in 64 bits otherwise; SpMM's kernel then has no 64-bit multiply.
#[test]
fn index_arithmetic_is_as_wide_as_the_program() {
    let text = |t: &str| format!("func t(x: handle, n: {t}) stage III {{\n  buffer X = match_buffer(x, [n], f32)\n  for i in blockIdx.x(n) {{\n    X[i] = X[i] * 2.0\n  }}\n}}\n");
    for (t, bits) in [("i32", 32), ("i64", 64)] {
        let f = sparsec_ir::text::parse_func("t", &text(t)).unwrap();
        assert_eq!(sparsec_backend_mlir::index_bits(&f), bits);
        assert!(gpu_plan(&f).unwrap().to_json().contains(&format!("\"index_bits\": {bits}")));
        let ptx = emit_ptx(&f, "sm_90").unwrap();
        // The buffer's offset, size and stride parameters.
        assert!(ptx.contains(&format!(".param .u{bits} t_kernel0_param_2")), "{t}:\n{ptx}");
        ptxas("index_width", &ptx, "sm_90");
    }
    let ptx = emit_ptx(&gpu_auto("csrmm"), "sm_90").unwrap();
    assert!(!ptx.contains("mul.lo.s64"), "{ptx}");
}

/// The decomposed hyb program, with its shipped trace and with the GPU default: every launch
/// spreads over blocks and threads (the bucket rewrites and the zeroing of C included), none
/// runs on a single thread.
#[test]
fn hyb_has_no_single_thread_kernel() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let text = std::fs::read_to_string(dir.join("hyb.sptir")).unwrap();
    let f = sparsec_ir::text::parse_func("hyb.sptir", &text).unwrap_or_else(|e| panic!("{e}"));
    let trace = sparsec_schedule::Trace::from_json(&std::fs::read_to_string(dir.join("hyb.trace.json")).unwrap()).unwrap();
    let traced = trace.replay(&f).unwrap_or_else(|e| panic!("{e}")).func().clone();
    let auto = sparsec_schedule::auto::gpu_schedule(&f, 128).unwrap_or_else(|e| panic!("{e}"));
    let one = ["1".to_string(), "1".to_string(), "1".to_string()];
    for (what, g) in [("trace", &traced), ("auto gpu", &auto)] {
        let g = sparsec_passes::PassManager::lowering(g.stage, sparsec_ir::Stage::III).run(g).unwrap_or_else(|e| panic!("{what}: {e}"));
        let plan = gpu_plan(&g).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(plan.launches.len() >= 2, "{what}: {}", plan.to_json());
        for l in &plan.launches {
            assert!(l.grid != one && l.block != one, "{what}: {} runs on one thread:\n{}", l.name, plan.to_json());
        }
    }
}

/// `examples/csrmm_segments.sptir` (rows cut into segments) under the default GPU schedule.
fn segments_gpu() -> sparsec_ir::Func {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/csrmm_segments.sptir");
    let f = sparsec_ir::text::parse_func(path, &std::fs::read_to_string(path).unwrap()).unwrap_or_else(|e| panic!("{e}"));
    sparsec_schedule::auto::gpu_schedule(&f, 128).unwrap_or_else(|e| panic!("{e}"))
}

/// Row segments under `--auto gpu`: a warp per segment sums its entries in registers (FMAs,
/// no global store or atomic in the multiply loop) and adds them to C with one atomic per
/// feature; emulated, it equals the product on every shared and generated matrix, with
/// segments of one entry, of a few, and whole rows.
#[test]
fn row_segments_sum_in_registers_and_add_once_per_segment() {
    let f = segments_gpu();
    let ptx = emit_ptx(&f, "sm_90").unwrap();
    let stats: Vec<sparsec_nvidia::LoopStats> =
        sparsec_testkit::nvidia::innermost_loops(&ptx).iter().map(|l| sparsec_nvidia::LoopStats::of(l)).collect();
    let multiplying: Vec<_> = stats.iter().filter(|s| s.fmas > 0).collect();
    assert!(!multiplying.is_empty(), "{ptx}");
    for s in &multiplying {
        assert_eq!((s.global_stores, s.atomics), (0, 0), "{s:?}\n{ptx}");
    }
    assert!(ptx.contains("atom.global.add.f32") || ptx.contains("red.global.add.f32"), "{ptx}");
    for r in ptxas("csrmm_segments", &ptx, "sm_90") {
        assert_eq!((r.spills, r.stack), (0, 0), "{r:?}");
    }
    let opts = sparsec_backend_mlir::CpuOptions { emulate_gpu: true, ..Default::default() };
    let kernel = sparsec_backend_mlir::CpuKernel::compile(&f, &opts).unwrap();
    let matrices = sparsec_testkit::shared_matrices().into_iter().chain(sparsec_testkit::generated_matrices());
    for (mname, m) in matrices {
        for (max_len, feat) in [(1, 4), (7, 32), (1 << 20, 130)] {
            if m.nnz() * feat > 4_000_000 && max_len != 7 {
                continue;
            }
            let case = sparsec_testkit::workloads::segments_case(&m, &mut sparsec_testkit::Rng::new(3), feat, max_len);
            let mut out = case.args.clone();
            kernel.run(&mut out).unwrap_or_else(|e| panic!("segments of {max_len} on {mname}: {e}"));
            let got = sparsec_testkit::output_f32(&out, "c");
            sparsec_testkit::assert_close(&format!("segments of {max_len}, feat {feat}, on {mname}"), &got, &case.expected[0].1, 1e-4);
        }
    }
}
