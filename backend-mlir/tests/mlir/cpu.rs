//! CPU JIT against the interpreter and the testkit oracles: every workload, unscheduled and
//! scheduled (default CPU and GPU schedules, hand-written GPU schedules; thread bindings run
//! as `scf.parallel`/`scf.for`), on every shared and generated matrix (fp32 rtol 1e-5).

use super::common::{gpu_scheduled, stage3};
use sparsec_backend_mlir::{CpuKernel, CpuOptions};
use sparsec_ir::Func;
use sparsec_testkit as kit;

/// Cases up to this many nonzeros are also run by the interpreter (larger ones only against
/// the dense oracle, which the interpreter matches in `tests/corpus.rs`).
const INTERP_NNZ: usize = 20_000;

fn variants(name: &str) -> Vec<(&'static str, Func)> {
    let plain = stage3(name);
    let mut v = vec![("unscheduled", plain.clone())];
    if let Some(f) = gpu_scheduled(name) {
        v.push(("gpu schedule", f));
    }
    v.push(("auto cpu schedule", super::common::cpu_scheduled(name)));
    v.push(("auto gpu schedule", super::common::gpu_auto(name)));
    v
}

fn check(name: &str) {
    let reference = stage3(name);
    let mut kernels: Vec<(String, CpuKernel)> = Vec::new();
    for (what, f) in variants(name) {
        let k = CpuKernel::compile(&f, &CpuOptions::default()).unwrap_or_else(|e| panic!("{name} ({what}): {e}"));
        kernels.push((what.to_string(), k));
        if what.contains("gpu") {
            // The GPU kernels themselves, run over their grid on the CPU.
            let opts = CpuOptions { emulate_gpu: true, ..CpuOptions::default() };
            let k = CpuKernel::compile(&f, &opts).unwrap_or_else(|e| panic!("{name} ({what}, emulated): {e}"));
            kernels.push((format!("{what}, GPU kernels emulated"), k));
        }
    }
    kit::for_each_case(name, |mname, c| {
        let nnz = c.args.arrays.values().map(|a| a.len()).max().unwrap_or(0);
        let interp = (nnz <= INTERP_NNZ).then(|| {
            sparsec_interp::run(&reference, &c.args).unwrap_or_else(|e| panic!("{name} on {mname}: interpreter: {e}"))
        });
        for (what, k) in &kernels {
            let mut out = c.args.clone();
            k.run(&mut out).unwrap_or_else(|e| panic!("{name} ({what}) on {mname}: {e}"));
            for (param, want) in &c.expected {
                let got = kit::output_f32(&out, param);
                kit::assert_close(&format!("{name} ({what}) on {mname}: {param} vs oracle"), &got, want, 1e-5);
                if let Some(i) = &interp {
                    let want = kit::output_f32(i, param);
                    kit::assert_close(&format!("{name} ({what}) on {mname}: {param} vs interpreter"), &got, &want, 1e-5);
                }
            }
        }
    });
}

macro_rules! cpu_tests {
    ($($name:ident),* $(,)?) => {
        $(#[test]
        fn $name() {
            check(stringify!($name));
        })*
    };
}

sparsec_testkit::with_workloads!(cpu_tests);

#[test]
fn square_sum_two_k() {
    check("square_sum_two_K");
}

#[test]
fn run_cpu_has_the_interpreter_contract() {
    let f = stage3("csrmm");
    kit::for_each_case("csrmm", |mname, c| {
        if c.args.arrays.values().map(|a| a.len()).max().unwrap_or(0) > INTERP_NNZ {
            return;
        }
        let want = sparsec_interp::run(&f, &c.args).unwrap();
        let got = sparsec_backend_mlir::run_cpu(&f, &c.args).unwrap_or_else(|e| panic!("{mname}: {e}"));
        assert_eq!(got.arrays.keys().collect::<Vec<_>>(), want.arrays.keys().collect::<Vec<_>>());
        for (k, a) in &want.arrays {
            let g = &got.arrays[k];
            assert_eq!(g.dtype(), a.dtype(), "{k}");
            kit::assert_close(&format!("{mname}: {k}"), &g.to_f64_vec().iter().map(|&x| x as f32).collect::<Vec<_>>(),
                &a.to_f64_vec().iter().map(|&x| x as f32).collect::<Vec<_>>(), 1e-5);
        }
        assert_eq!(got.scalars, want.scalars);
    });
}

#[test]
fn cpu_schedule_runs_on_threads() {
    let f = super::common::cpu_scheduled("csrmm");
    let k = CpuKernel::compile(&f, &CpuOptions::default()).unwrap();
    assert!(k.is_threaded(), "the CPU schedule of csrmm must use scf.parallel");
    let text = sparsec_backend_mlir::emit_cpu_mlir(&f, &CpuOptions::default()).unwrap();
    assert!(text.contains("scf.parallel"), "{text}");
    let serial = CpuKernel::compile(&f, &CpuOptions { parallel: false, ..CpuOptions::default() }).unwrap();
    assert!(!serial.is_threaded());
    // Running it starts the OpenMP runtime's team (one thread per core) in this process.
    let (name, m) = kit::all_matrices().into_iter().max_by_key(|(_, m)| m.nnz()).unwrap();
    let mut rng = kit::Rng::new(1);
    let c = kit::workloads::case("csrmm", &m, &mut rng).unwrap();
    let mut args = c.args.clone();
    k.run(&mut args).unwrap_or_else(|e| panic!("{name}: {e}"));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let omp = |name: &str| unsafe {
        let c = std::ffi::CString::new(name).unwrap();
        dlsym(std::ptr::null_mut(), c.as_ptr())
    };
    assert!(!omp("__kmpc_fork_call").is_null(), "the OpenMP runtime is not loaded");
    // The team it forks: one thread per core (unless OMP_NUM_THREADS says otherwise).
    let max_threads = omp("omp_get_max_threads");
    assert!(!max_threads.is_null(), "the OpenMP runtime has no omp_get_max_threads");
    let max_threads: extern "C" fn() -> std::ffi::c_int = unsafe { std::mem::transmute(max_threads) };
    if std::env::var_os("OMP_NUM_THREADS").is_none() {
        let team = max_threads();
        assert!(team as usize >= cores.min(2), "an OpenMP team of {team} threads for {cores} cores");
    }
}

unsafe extern "C" {
    fn dlsym(handle: *mut std::ffi::c_void, symbol: *const std::ffi::c_char) -> *mut std::ffi::c_void;
}

/// A parallel loop of one iteration runs on the calling thread (`scf.if` around the
/// `scf.parallel`), so a light nest pays nothing for threads; the result is the same either
/// way.
#[test]
fn a_single_chunk_runs_on_the_calling_thread() {
    let f = super::common::cpu_scheduled("csrmm");
    let text = sparsec_backend_mlir::emit_cpu_mlir(&f, &CpuOptions::default()).unwrap();
    let at = text.find("scf.parallel").expect("a parallel loop");
    let before = &text[..at];
    let guard = before.rfind("scf.if").expect("the parallel loop lies under an scf.if");
    assert!(before[guard..].lines().count() <= 2, "the scf.if is not the parallel loop's own:\n{}", &text[guard..at]);
    let k = CpuKernel::compile(&f, &CpuOptions::default()).unwrap();
    let one_row = kit::Mat { rows: 1, cols: 3, indptr: vec![0, 2], indices: vec![0, 2], vals: vec![1.5, -2.0] };
    let (_, largest) = kit::all_matrices().into_iter().max_by_key(|(_, m)| m.nnz()).unwrap();
    for (name, m) in [("one row (one chunk)", one_row), ("largest matrix (several chunks)", largest)] {
        let c = kit::workloads::case("csrmm", &m, &mut kit::Rng::new(2)).unwrap();
        let mut args = c.args.clone();
        k.run(&mut args).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = sparsec_interp::run(&f, &c.args).unwrap();
        kit::assert_close(name, &kit::output_f32(&args, "c"), &kit::output_f32(&want, "c"), 1e-5);
    }
}

/// Narrow floats, i64 scalars, atomics, `while`, `select`, casts and math, against the
/// interpreter on a hand-written Stage-III function.
#[test]
fn dtypes_and_constructs_match_the_interpreter() {
    let src = r#"
func mix(a: handle, b: handle, c: handle, d: handle, n: i32, big: i64) stage III {
  buffer A = match_buffer(a, [n], f16)
  buffer B = match_buffer(b, [n], f32)
  buffer C = match_buffer(c, [1], f32)
  buffer D = match_buffer(d, [n], i64)
  for i in parallel(n) {
    block s(vi: spatial(n) = i) {
      B[vi] = cast(f32, A[vi] * A[vi]) + sigmoid(cast(f32, vi)) + sqrt(cast(f32, vi)) + pow(2.0, cast(f32, vi % 3))
      D[vi] = select(vi % 2 == 0, big + cast(i64, vi // 2), cast(i64, (0 - vi) % 3))
      let old: f32 = atomic_add(C[0], tanh(cast(f32, vi)) + exp(0.0 - cast(f32, vi)) + log(1.0 + cast(f32, vi)))
    }
  }
  for j in serial(1) {
    block w(vj: spatial(1) = j) {
      buffer K = alloc_buffer([1], i32, local)
      K[0] = 0
      while K[0] < n && cast(f32, K[0]) < max(B[0], 4.0) {
        K[0] = K[0] + 1
      }
      D[vj] = cast(i64, K[0]) + cast(i64, floor(2.7)) + cast(i64, ceil(0.2)) + cast(i64, abs(0 - 3))
    }
  }
}
"#;
    let f = sparsec_ir::text::parse_func("mix", src).unwrap_or_else(|e| panic!("{e}"));
    sparsec_ir::verify::verify_func(&f).unwrap_or_else(|e| panic!("{e:?}"));
    let n = 37;
    let mut args = sparsec_ir::data::Args::new();
    use sparsec_ir::data::Array;
    args.array("a", Array::F16((0..n).map(|i| half_round(i as f32 * 0.37)).collect()))
        .array("b", Array::F32(vec![0.0; n]))
        .array("c", Array::F32(vec![0.0; 1]))
        .array("d", Array::I64(vec![0; n]))
        .int("n", n as i64)
        .int("big", 1 << 40);
    let want = sparsec_interp::run(&f, &args).unwrap();
    sparsec_backend_mlir::emit_ptx(&f, "sm_80").unwrap();
    for (parallel, emulate_gpu) in [(true, false), (false, false), (false, true)] {
        let opts = CpuOptions { parallel, emulate_gpu, ..CpuOptions::default() };
        let k = CpuKernel::compile(&f, &opts).unwrap();
        let mut got = args.clone();
        k.run(&mut got).unwrap();
        for name in ["b", "c"] {
            let g = got.arrays[name].to_f64_vec().iter().map(|&x| x as f32).collect::<Vec<_>>();
            let w = want.arrays[name].to_f64_vec().iter().map(|&x| x as f32).collect::<Vec<_>>();
            kit::assert_close(name, &g, &w, 1e-5);
        }
        assert_eq!(got.arrays["d"], want.arrays["d"]);
        assert_eq!(got.arrays["a"], want.arrays["a"]);
    }
}

fn half_round(x: f32) -> f32 {
    // f16 has 10 mantissa bits; the values used here stay normal.
    let scale = 2f32.powi(10 - x.abs().max(1e-3).log2().floor() as i32);
    (x * scale).round() / scale
}

/// The register-tiled vector nest of CSR SpMM (tiles of 64 and 32 lanes, single vectors, a
/// masked remainder) at feature widths around every tile size, threaded and serial, against
/// the interpreter, on matrices with empty rows and a full row.
#[test]
fn spmm_register_tiles_match_the_interpreter_at_every_width() {
    let f = super::common::cpu_scheduled("csrmm");
    let text = sparsec_backend_mlir::emit_cpu_mlir(&f, &CpuOptions::default()).unwrap();
    assert!(text.contains("vector.load") && text.contains("iter_args"), "{text}");
    // The schedule's `contract` reaches the tiles: vector FMAs, no separate multiply.
    assert!(text.lines().any(|l| l.contains("math.fma") && l.contains("vector<")), "{text}");
    assert!(!text.contains("arith.mulf"), "{text}");
    let reference = stage3("csrmm");
    let threaded = CpuKernel::compile(&f, &CpuOptions::default()).unwrap();
    let serial = CpuKernel::compile(&f, &CpuOptions { parallel: false, ..CpuOptions::default() }).unwrap();
    let mut rng = kit::Rng::new(7);
    for (mname, m) in kit::generated_matrices().into_iter().filter(|(n, _)| n.contains("empty") || n.contains("full")) {
        for feat in [1, 3, 7, 8, 9, 24, 31, 32, 33, 40, 63, 64, 65, 100, 128, 136] {
            let a = kit::workloads::csrmm_args(&m, rng.vec(m.cols * feat), feat, f32::NAN);
            let want = kit::output_f32(&sparsec_interp::run(&reference, &a).unwrap(), "c");
            for (what, k) in [("threads", &threaded), ("serial", &serial)] {
                let mut out = a.clone();
                k.run(&mut out).unwrap();
                kit::assert_close(&format!("csrmm ({what}) on {mname}, feat {feat}"), &kit::output_f32(&out, "c"), &want, 1e-5);
            }
        }
    }
}

/// `examples/spmv.sptir`, verified.
fn spmv() -> Func {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/spmv.sptir");
    let f = sparsec_ir::text::parse_func("spmv.sptir", &std::fs::read_to_string(path).unwrap()).unwrap();
    sparsec_ir::verify::verify_func(&f).unwrap();
    f
}

/// Matrices for the CPU kernels' width tests: generated corner cases and the small shared ones.
fn width_matrices() -> Vec<(String, kit::Mat)> {
    let mut v: Vec<(String, kit::Mat)> = kit::generated_matrices();
    v.extend(kit::shared_matrices().into_iter().filter(|(_, m)| m.nnz() <= INTERP_NNZ));
    v
}

#[test]
fn default_sddmm_partial_sums_match_the_interpreter_at_every_width() {
    // Rows' dot products in 16 partial sums (one 512-bit vector) where the width is a multiple
    // of 16, as written elsewhere.
    let f = super::common::cpu_scheduled("sddmm");
    let text = sparsec_backend_mlir::emit_cpu_mlir(&f, &CpuOptions::default()).unwrap();
    assert!(text.lines().any(|l| l.contains("math.fma") && l.contains("vector<16xf32>")), "{text}");
    let reference = stage3("sddmm");
    let threaded = CpuKernel::compile(&f, &CpuOptions::default()).unwrap();
    let serial = CpuKernel::compile(&f, &CpuOptions { parallel: false, ..CpuOptions::default() }).unwrap();
    let mut rng = kit::Rng::new(11);
    for (mname, m) in width_matrices() {
        for feat in [1, 4, 15, 16, 17, 32, 48, 128, 130] {
            let c = kit::workloads::sddmm_case_of_width(&m, &mut rng, feat);
            let want = kit::output_f32(&sparsec_interp::run(&reference, &c.args).unwrap(), "c");
            kit::assert_close(&format!("sddmm interpreter on {mname}, feat {feat}"), &want, &c.expected[0].1, 1e-5);
            for (what, k) in [("threads", &threaded), ("serial", &serial)] {
                let mut out = c.args.clone();
                k.run(&mut out).unwrap();
                kit::assert_close(&format!("sddmm ({what}) on {mname}, feat {feat}"), &kit::output_f32(&out, "c"), &want, 1e-5);
            }
        }
    }
}

#[test]
fn default_spmv_accumulates_in_a_register_and_matches_the_interpreter() {
    use sparsec_schedule::auto::{cpu_schedule_tuned, CpuTuning, CPU_VECTOR_ROW};
    let f = sparsec_schedule::auto::cpu_schedule(&spmv()).unwrap();
    // `y[i]` is one local element over the row, not a load and a store per nonzero.
    let printed = sparsec_ir::text::print_func(&f);
    assert!(printed.contains("Y_local = alloc_buffer([1], f32, local)"), "{printed}");
    // Rows of at least `CPU_VECTOR_ROW` nonzeros in a vector of 8 partial sums, in a copy of
    // the row's loop: `A` and the column indices read as vectors, `x` gathered through them,
    // the last lanes of a row under a mask.
    let long = format!(">= {CPU_VECTOR_ROW} {{");
    assert!(printed.contains(&long) && printed.contains("Y_local_rf") && printed.contains("vectorized(8)"), "{printed}");
    let text = sparsec_backend_mlir::emit_cpu_mlir(&f, &CpuOptions::default()).unwrap();
    // The gather is `vector.gather` where the host has fast hardware gathers, else a load
    // per lane.
    let gather = if sparsec_backend_mlir::host_has_fast_gather() { "vector.gather" } else { "vector.insert" };
    for op in [gather, "vector.create_mask", "vector.maskedload"] {
        assert!(text.contains(op), "no {op}:\n{text}");
    }
    // Shorter rows walk a rolled loop: `unroll_factor = 1` becomes LLVM's unroll.disable.
    assert!(printed.contains("attrs(unroll_factor = 1"), "{printed}");
    assert!(text.contains("#llvm.loop_unroll<disable = true>"), "no unroll.disable:\n{text}");
    // Every row in the vector sums (every row's last lanes masked), and the scalar partial
    // sums where vectors are off.
    let every = cpu_schedule_tuned(&spmv(), &CpuTuning { vector_row: 1, ..CpuTuning::default() }).unwrap();
    let scalar = cpu_schedule_tuned(&spmv(), &CpuTuning { vector_row: i64::MAX, long_row: 1, ..CpuTuning::default() }).unwrap();
    assert!(!sparsec_ir::text::print_func(&scalar).contains("vectorized(8)"));
    let reference = sparsec_passes::PassManager::lowering_to(sparsec_ir::Stage::III).run(&spmv()).unwrap();
    let mut kernels = Vec::new();
    for (what, g) in [("default", &f), ("every row vector", &every), ("scalar sums", &scalar)] {
        kernels.push((format!("{what}, threads"), CpuKernel::compile(g, &CpuOptions::default()).unwrap()));
        kernels.push((format!("{what}, serial"), CpuKernel::compile(g, &CpuOptions { parallel: false, ..CpuOptions::default() }).unwrap()));
    }
    let mut rng = kit::Rng::new(12);
    for (mname, m) in width_matrices() {
        let a = kit::workloads::spmv_args(&m, rng.vec(m.cols), f32::NAN);
        let want = kit::output_f32(&sparsec_interp::run(&reference, &a).unwrap(), "y");
        for (what, k) in &kernels {
            let mut out = a.clone();
            k.run(&mut out).unwrap();
            kit::assert_close(&format!("spmv ({what}) on {mname}"), &kit::output_f32(&out, "y"), &want, 1e-5);
        }
    }
}

/// The disassembly of `f`'s serial kernel (`llvm-objdump` of the LLVM the crate links).
fn machine_code(f: &Func) -> String {
    let k = CpuKernel::compile(f, &CpuOptions { parallel: false, keep_object: true, ..CpuOptions::default() }).unwrap();
    let dir = std::env::temp_dir().join(format!("sparsec-objdump-{}-{}", std::process::id(), f.name));
    std::fs::create_dir_all(&dir).unwrap();
    let obj = dir.join("kernel.o");
    k.write_object(&obj).unwrap();
    let prefix = option_env!("MLIR_SYS_220_PREFIX").unwrap_or("/usr/lib/llvm-22");
    let out = std::process::Command::new(format!("{prefix}/bin/llvm-objdump"))
        .args(["-d", "--no-show-raw-insn", "--x86-asm-syntax=att"])
        .arg(&obj)
        .output()
        .expect("llvm-objdump runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn default_cpu_kernels_multiply_in_host_wide_vector_fmas() {
    // The register tiles of SpMM and SDDMM's partial sums reach the machine code as fused
    // multiply-adds on the host's widest registers (zmm with AVX-512), with no separate
    // multiply.
    let reg = match sparsec_backend_mlir::host_vector_bytes() {
        64 => "zmm",
        32 => "ymm",
        _ => return, // no wide FMA to look for
    };
    for name in ["csrmm", "sddmm"] {
        let asm = machine_code(&super::common::cpu_scheduled(name));
        let fmas = asm.lines().filter(|l| l.contains("vfmadd") && l.contains(reg)).count();
        assert!(fmas >= 1, "{name}: no vector FMA on {reg}:\n{asm}");
        assert!(!asm.lines().any(|l| l.contains("vmulps") && l.contains(reg)), "{name}: a separate multiply:\n{asm}");
    }
}

/// `f` with every loop's prefetch annotations passed to `edit`.
fn with_prefetch(f: &Func, edit: &dyn Fn(&mut sparsec_ir::Attrs)) -> Func {
    fn rec(stmts: &mut [sparsec_ir::Stmt], edit: &dyn Fn(&mut sparsec_ir::Attrs)) {
        for s in stmts {
            if let sparsec_ir::StmtKind::For(l) = &mut s.kind {
                if l.attrs.contains_key(sparsec_ir::prefetch::PREFETCH_DISTANCE_ATTR) {
                    edit(&mut l.attrs);
                }
            }
            for c in s.kind.child_lists_mut() {
                rec(c, edit);
            }
        }
    }
    let mut g = f.clone();
    rec(&mut g.body, edit);
    g
}

/// The default CPU schedule asks SpMM's and SpMV's nonzero loops to prefetch their gathers
/// (`sparsec_ir::prefetch`) where the gathered array is large. Told to prefetch from any
/// size, so that the tests' small matrices take the prefetching copy (its look-ahead
/// clamped at the last nonzero), a kernel gives the bits of the one that does not prefetch,
/// and its machine code prefetches.
#[test]
fn prefetching_copies_give_the_bits_of_the_loops_without() {
    use sparsec_ir::prefetch::{PREFETCH_DISTANCE_ATTR, PREFETCH_MIN_BYTES_ATTR};
    use sparsec_ir::AttrValue;
    let cases = [("csrmm", super::common::cpu_scheduled("csrmm"), "c", stage3("csrmm")), (
        "spmv",
        sparsec_schedule::auto::cpu_schedule(&spmv()).unwrap(),
        "y",
        sparsec_passes::PassManager::lowering_to(sparsec_ir::Stage::III).run(&spmv()).unwrap(),
    )];
    for (name, f, out, reference) in cases {
        let mut annotated = 0;
        sparsec_ir::walk_stmts(&f.body, &mut |s| {
            if let sparsec_ir::StmtKind::For(l) = &s.kind {
                annotated += l.attrs.contains_key(PREFETCH_DISTANCE_ATTR) as usize;
            }
        });
        assert!(annotated >= 1, "{name}: no nonzero loop prefetches");
        let eager = with_prefetch(&f, &|a| {
            a.insert(PREFETCH_MIN_BYTES_ATTR.into(), AttrValue::Int(0));
        });
        let plain = with_prefetch(&f, &|a| {
            a.shift_remove(PREFETCH_DISTANCE_ATTR);
            a.shift_remove(PREFETCH_MIN_BYTES_ATTR);
        });
        let text = sparsec_backend_mlir::emit_cpu_mlir(&eager, &CpuOptions::default()).unwrap();
        assert!(text.contains("memref.prefetch"), "{name}:\n{text}");
        assert!(machine_code(&eager).contains("prefetcht0"), "{name}: no prefetch in the machine code");
        assert!(!machine_code(&plain).contains("prefetch"), "{name}: a prefetch without the annotation");
        let kernels: Vec<(&str, CpuKernel)> = [("prefetching, serial", &eager, false), ("prefetching, threads", &eager, true), ("without", &plain, false)]
            .into_iter()
            .map(|(what, g, parallel)| (what, CpuKernel::compile(g, &CpuOptions { parallel, ..CpuOptions::default() }).unwrap()))
            .collect();
        let mut rng = kit::Rng::new(21);
        for (mname, m) in width_matrices() {
            for feat in if name == "csrmm" { vec![1, 32, 40] } else { vec![1] } {
                let a = match name {
                    "csrmm" => kit::workloads::csrmm_args(&m, rng.vec(m.cols * feat), feat, f32::NAN),
                    _ => kit::workloads::spmv_args(&m, rng.vec(m.cols), f32::NAN),
                };
                let want = kit::output_f32(&sparsec_interp::run(&reference, &a).unwrap(), out);
                let mut outs = Vec::new();
                for (what, k) in &kernels {
                    let mut got = a.clone();
                    k.run(&mut got).unwrap();
                    let got = kit::output_f32(&got, out);
                    kit::assert_close(&format!("{name} ({what}) on {mname}, feat {feat}"), &got, &want, 1e-5);
                    outs.push(got.iter().map(|x| x.to_bits()).collect::<Vec<u32>>());
                }
                assert!(outs.windows(2).all(|w| w[0] == w[1]), "{name} on {mname}, feat {feat}: prefetching changed the bits");
            }
        }
    }
}
