//! Results are right or refused: lavapipe's loop limiter (65,535 iterations per unit), panics
//! inside CubeCL, non-finite literals, the barrier after a serial init beside
//! thread-bound loops, and updates that units along an unbound thread index would repeat.

use super::common::{client, workload};
use sparsec_backend_cubecl::{compile, CompiledProgram, CubeclError, RuntimeError};
use sparsec_ir::data::{Args, Array};
use sparsec_testkit as tk;

fn parse(text: &str) -> sparsec_ir::Func {
    let name = text.split(['(', ' ']).nth(1).unwrap();
    sparsec_ir::text::parse_func(name, text).unwrap_or_else(|e| panic!("{e}"))
}

fn mat_of(csr: &sparsec::formats::Csr<i64, f32>) -> tk::Mat {
    tk::Mat {
        rows: csr.rows(),
        cols: csr.cols(),
        indptr: csr.indptr().iter().map(|&x| x as usize).collect(),
        indices: csr.indices().iter().map(|&x| x as usize).collect(),
        vals: csr.values().to_vec(),
    }
}

/// Either the oracle's numbers or the loop-limit error; never other numbers.
fn right_or_refused(what: &str, prog: &CompiledProgram, case: &tk::workloads::Case) -> bool {
    match prog.run(&client(), &case.args) {
        Ok(out) => {
            for (p, want) in &case.expected {
                tk::assert_close(&format!("{what}: {p}"), &tk::output_f32(&out, p), want, 1e-4);
            }
            true
        }
        Err(CubeclError::Runtime(RuntimeError::LoopLimit(k))) => {
            assert!(!k.is_empty());
            false
        }
        Err(e) => panic!("{what}: {e}"),
    }
}

fn programs(name: &str) -> Vec<(&'static str, CompiledProgram)> {
    let f = workload(name);
    let s = sparsec_schedule::auto::gpu_schedule(&f, 64).unwrap();
    vec![("unscheduled", compile(&f).unwrap()), ("gpu_schedule", compile(&s).unwrap())]
}

/// A 1 × 20,000 row of ones: one unit walks 20,000 nonzeros (plus inner loops).
#[test]
fn long_row_of_ones_is_right_or_refused() {
    let n = 20_000;
    let m = tk::Mat { rows: 1, cols: n, indptr: vec![0, n], indices: (0..n).collect(), vals: vec![1.0; n] };
    let mut refused = 0;
    for name in ["csrmm", "csr_reduce"] {
        let case = tk::workloads::case(name, &m, &mut tk::Rng::new(3)).unwrap();
        for (what, prog) in programs(name) {
            refused += !right_or_refused(&format!("{name} ({what})"), &prog, &case) as usize;
        }
    }
    // csrmm's unit walks 20,000 × 4 features: beyond the limit on lavapipe.
    let lavapipe = client().properties().identity.name.contains("llvmpipe");
    assert!(!lavapipe || refused > 0, "lavapipe ran every long row to the end");
}

/// An R-MAT power-law matrix with rows far longer than 65,535 / features.
#[test]
fn power_law_long_rows_are_right_or_refused() {
    let csr = sparsec::formats::gen::rmat::<i64, f32>(16, 150_000, [0.45, 0.45, 0.05, 0.05], 5).unwrap();
    let m = mat_of(&csr);
    // One row holds over 20,000 nonzeros: csrmm's unit walks 4 features for each.
    assert!(csr.max_row_length() > 20_000, "{}", csr.max_row_length());
    let mut refused = 0;
    for name in ["csrmm", "csr_reduce"] {
        let case = tk::workloads::case(name, &m, &mut tk::Rng::new(4)).unwrap();
        for (what, prog) in programs(name) {
            refused += !right_or_refused(&format!("{name} ({what})"), &prog, &case) as usize;
        }
    }
    let lavapipe = client().properties().identity.name.contains("llvmpipe");
    assert!(!lavapipe || refused > 0, "lavapipe ran every long row to the end");
}

/// A short loop runs without the limit error (the check does not fire on complete runs).
#[test]
fn complete_loops_are_not_refused() {
    let m = tk::Mat { rows: 1, cols: 5_000, indptr: vec![0, 5_000], indices: (0..5_000).collect(), vals: vec![1.0; 5_000] };
    let case = tk::workloads::case("csr_reduce", &m, &mut tk::Rng::new(3)).unwrap();
    for (what, prog) in programs("csr_reduce") {
        assert!(right_or_refused(what, &prog, &case), "{what}: refused");
    }
}

/// Integer division and remainder by zero (a literal, folded by CubeCL, or a scalar): an
/// error, never a silent result.
#[test]
fn division_by_zero_is_an_error() {
    for body in ["A[vi] % 0", "7 % 0", "A[vi] // 0", "7 // 0", "A[vi] % z", "A[vi] / 0", "7 / z"] {
        let f = parse(&format!(
            "func rem0(a: handle, b: handle, n: i32, z: i32) stage III {{
  buffer A = match_buffer(a, [n], i32)
  buffer B = match_buffer(b, [n], i32)
  for i in serial(n) {{
    block r(vi: spatial(n) = i) {{
      B[vi] = {body}
    }}
  }}
}}
"
        ));
        let mut args = Args::new();
        args.array("a", Array::I32(vec![5, 6, 7])).array("b", Array::I32(vec![9, 9, 9])).int("n", 3).int("z", 0);
        assert!(sparsec_interp::run(&f, &args).is_err(), "{body}");
        match compile(&f).and_then(|p| p.run(&client(), &args)) {
            Err(e) => assert!(e.to_string().contains("division by"), "{body}: {e}"),
            Ok(out) => panic!("{body} returned {:?}", out.arrays["b"]),
        }
    }
}

/// `inf`, `-inf` and `nan` literals print valid WGSL and CUDA; WGSL does not define them
/// (implementations may assume finite floats), so running them on wgpu is refused.
#[test]
fn non_finite_literals_print_and_are_refused_on_wgpu() {
    let f = parse(
        "func lits(b: handle, n: i32) stage III {
  buffer B = match_buffer(b, [n], f32)
  for i in serial(n) {
    block l(vi: spatial(n) = i) {
      B[vi] = select(vi == 0, inf, select(vi == 1, -inf, select(vi == 2, nan, max(-inf, 1.5))))
    }
  }
}
",
    );
    let mut args = Args::new();
    args.array("b", Array::F32(vec![0.0; 4])).int("n", 4);
    let want = sparsec_interp::run(&f, &args).unwrap();
    let Array::F32(w) = &want.arrays["b"] else { panic!() };
    assert_eq!(w[0], f32::INFINITY);
    match compile(&f).unwrap().run(&client(), &args) {
        Err(CubeclError::Runtime(RuntimeError::NonFinite(k))) => assert_eq!(k, "lits_k0"),
        other => panic!("expected a non-finite refusal, got {other:?}"),
    }
    let wgsl = compile(&f).unwrap().wgsl().unwrap();
    assert!(!wgsl.contains("Inf") && !wgsl.contains("NaN"), "{wgsl}");
    assert!(sparsec_backend_cubecl::emit_cuda(&f).is_ok());
}

/// Each body writes `V[i]` from finite inputs `W = [1, 2, -3, 0]` and scalar `s`. On wgpu
/// a run whose IEEE evaluation meets inf or NaN anywhere is refused (also where the shader
/// compiler folds `x / 0.0` on its known divisor, or where the value is discarded); the others
/// equal the interpreter.
#[test]
fn non_finite_intermediates_are_refused_on_wgpu() {
    // (body, scalar s, refused)
    let cases: &[(&str, f64, bool)] = &[
        ("W[i] / 0.0", 1.0, true),
        ("min(1.0, W[i] / 0.0)", 1.0, true),
        ("select(W[i] / 0.0 > 1.0, 2.0, 3.0)", 1.0, true),
        ("log(W[i] - W[i])", 1.0, true),
        ("sqrt(W[i] - 5.0)", 1.0, true),
        ("exp(W[i] * 100.0)", 1.0, true),
        ("pow(W[i] - W[i], -1.0)", 1.0, true),
        ("W[i] * 3.0e38", 1.0, true),
        ("W[i] * s", 1.0e39, true),
        ("W[i] + s", f64::INFINITY, true),
        ("W[i] % (W[i] - W[i])", 1.0, true),
        // Finite all the way: the same numbers as the interpreter.
        ("max(min_value(f32), W[i])", 1.0, false),
        ("sigmoid(W[i] * -100.0)", 1.0, false),
        ("tanh(W[i] * 100.0)", 1.0, false),
        ("exp(W[i] * 10.0) / s", 2.0, false),
        ("pow(W[i], 2.0) + sqrt(abs(W[i]))", 1.0, false),
    ];
    for (body, s, refused) in cases {
        let text = format!(
            "func nf(v: handle, w: handle, n: i32, s: f32) {{
  axis I = dense_fixed(n)
  buffer V = match_sparse_buffer(v, [I], f32)
  buffer W = match_sparse_buffer(w, [I], f32)
  sp_iter it([I], \"S\") as [i] {{
    V[i] = {body}
  }}
}}
"
        );
        let f = parse(&text);
        let mut args = Args::new();
        args.array("v", Array::F32(vec![0.0; 4])).array("w", Array::F32(vec![1.0, 2.0, -3.0, 0.0])).int("n", 4).float("s", *s);
        let got = compile(&f).unwrap().run(&client(), &args);
        match (got, refused) {
            (Err(CubeclError::Runtime(RuntimeError::NonFinite(_) | RuntimeError::NonFiniteScalar(_))), true) => {}
            (Ok(out), false) => {
                let want = sparsec_interp::run(&f, &args).unwrap();
                tk::assert_close(body, &tk::output_f32(&out, "v"), &tk::output_f32(&want, "v"), 1e-5);
            }
            (other, _) => panic!("{body} (s = {s}): refused {refused} expected, got {other:?}"),
        }
    }
}

/// An atomic sum that overflows is refused on wgpu (its additions happen inside the atomic).
#[test]
fn overflowing_atomic_sums_are_refused_on_wgpu() {
    let f = parse(
        "func sum(x: handle, y: handle, n: i32) stage III {
  buffer X = match_buffer(x, [n], f32)
  buffer Y = match_buffer(y, [1], f32)
  for i in threadIdx.x(n) {
    block s(vi: spatial(n) = i) {
      atomic_add(Y[0], X[vi])
    }
  }
}
",
    );
    let mut args = Args::new();
    // Two additions: every old value the kernel sees is finite, only the sum is not.
    args.array("x", Array::F32(vec![3.0e38; 2])).array("y", Array::F32(vec![0.0])).int("n", 2);
    match compile(&f).unwrap().run(&client(), &args) {
        Err(CubeclError::Runtime(RuntimeError::NonFiniteSum(p))) => assert_eq!(p, "y"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    args.array("x", Array::F32(vec![1.5; 2]));
    let out = compile(&f).unwrap().run(&client(), &args).unwrap();
    assert_eq!(tk::output_f32(&out, "y"), vec![3.0]);
}

/// The README's csrmm schedule: rows over `blockIdx.x`, the product's features split by 32
/// over `threadIdx.x`, the init left serial (every unit runs it): a barrier must order the
/// init before the product.
#[test]
fn serial_init_beside_thread_loops_is_synchronised() {
    use sparsec_ir::ThreadTag::*;
    let f = workload("csrmm");
    let mut sch = sparsec_schedule::Schedule::new(f.clone()).unwrap();
    sch.lower_sparse_iter().unwrap();
    let row = sch.get_block("csrmm0").unwrap();
    let i = sch.get_loops(row).unwrap()[0];
    sch.bind(i, BlockIdxX).unwrap();
    let b1 = sch.get_block("csrmm1").unwrap();
    let k = sch.get_loops(b1).unwrap()[1];
    let parts = sch.split(k, &[None, Some(32)]).unwrap();
    sch.bind(parts[1], ThreadIdxX).unwrap();
    let prog = compile(&sch.into_func()).unwrap();
    let client = client();
    for (mname, m) in tk::generated_matrices() {
        let case = tk::workloads::case("csrmm", &m, &mut tk::Rng::new(8)).unwrap();
        let out = prog.run(&client, &case.args).unwrap_or_else(|e| panic!("{mname}: {e}"));
        tk::assert_close(&format!("csrmm README schedule on {mname}"), &tk::output_f32(&out, "c"), &case.expected[0].1, 1e-4);
    }
}

/// Two nests over `threadIdx.x` with different mappings (the init's features split by 32, the
/// sum's by 16): units add into elements others zeroed, so a storage barrier orders the nests,
/// and the numbers are the interpreter's; with the same mapping no barrier is needed.
#[test]
fn thread_nests_exchanging_data_are_synchronised() {
    let f = tk::schedules::csrmm_init_on_threads(16).into_func();
    assert!(sparsec_backend_cubecl::emit_cubecl(&f).unwrap().contains("sync_storage();"));
    let same = tk::schedules::csrmm_init_on_threads(32).into_func();
    assert!(!sparsec_backend_cubecl::emit_cubecl(&same).unwrap().contains("sync_storage();"));
    let client = client();
    for g in [f, same] {
        let prog = compile(&g).unwrap();
        for (mname, m) in tk::generated_matrices() {
            let case = tk::workloads::case("csrmm", &m, &mut tk::Rng::new(3)).unwrap();
            let out = prog.run(&client, &case.args).unwrap_or_else(|e| panic!("{mname}: {e}"));
            tk::assert_close(&format!("csrmm, init and sum on other threads, on {mname}"), &tk::output_f32(&out, "c"), &case.expected[0].1, 1e-4);
        }
    }
}

/// C accumulated in a register per unit (`cache_write` to local scope at the thread-bound
/// loop): the interpreter's numbers, also at feature widths that are not a multiple of 32
/// (the copies are guarded by the block's domain). A local buffer that the units of a thread
/// loop share in the IR is refused: a GPU gives each unit its own.
#[test]
fn register_accumulators_are_per_unit() {
    let prog = compile(&tk::schedules::csrmm_register_accumulator().into_func()).unwrap();
    let client = client();
    for (mname, m) in tk::generated_matrices() {
        let case = tk::workloads::case("csrmm", &m, &mut tk::Rng::new(5)).unwrap();
        let out = prog.run(&client, &case.args).unwrap_or_else(|e| panic!("{mname}: {e}"));
        tk::assert_close(&format!("csrmm, register accumulator, on {mname}"), &tk::output_f32(&out, "c"), &case.expected[0].1, 1e-4);
    }
    let f = sparsec_ir::text::parse_func("l", tk::schedules::LOCAL_ACROSS_UNITS).unwrap();
    let e = compile(&f).map(drop).unwrap_err().to_string();
    assert!(e.contains("local buffer `L` is allocated outside a thread-bound loop"), "{e}");
}

/// The default GPU schedule of RGCN binds only the features; the fused relation × row loop
/// only adds atomically, so its iterations are spread over `blockIdx.y` instead of walked by
/// every unit (which lavapipe's loop limit cut short).
#[test]
fn atomic_serial_loops_are_spread_over_cubes() {
    let f = workload("rgcn_hetero_forward");
    let s = sparsec_schedule::auto::gpu_schedule(&f, 64).unwrap();
    let prog = compile(&s).unwrap();
    let (_, m) = tk::generated_matrices().into_iter().find(|(n, _)| n.contains("rmat")).unwrap();
    let case = tk::workloads::case("rgcn_hetero_forward", &m, &mut tk::Rng::new(2)).unwrap();
    let shapes = prog.launch_shapes(&case.args).unwrap();
    assert!(shapes.iter().any(|s| s.cubes[1] > 1), "{shapes:?}");
    assert!(right_or_refused("rgcn", &prog, &case), "refused");
}

/// Duplicate coordinates in an unsorted sparse axis (relation 0 lists row 1 three times,
/// with `m = 2`): unscheduled and with the GPU default (fused relation × position loop,
/// atomic adds) the scatter gives the interpreter's numbers.
#[test]
fn duplicate_coordinates_of_an_unsorted_axis_are_all_added() {
    let f = parse(
        "func scatter(a: handle, y: handle, indptr: handle, indices: handle, r: i32, m: i32, nnz: i32, feat: i32) {
  axis R = dense_fixed(r)
  axis I = sparse_variable(R, m, nnz, indptr, indices, sorted = false)
  axis ID = dense_fixed(m)
  axis F = dense_fixed(feat)
  buffer A = match_sparse_buffer(a, [R, I], f32)
  buffer Y = match_sparse_buffer(y, [ID, F], f32)
  sp_iter s([F, R, I], \"SRS\") as [k, q, i] {
    Y[i, k] = Y[i, k] + A[q, i]
  }
}
",
    );
    let mut args = Args::new();
    args.array("a", Array::F32(vec![1.0, 2.0, 4.0, 8.0]))
        .array("y", Array::F32(vec![0.0; 2]))
        .array("indptr", Array::I32(vec![0, 3, 4]))
        .array("indices", Array::I32(vec![1, 1, 1, 0]));
    args.int("r", 2).int("m", 2).int("nnz", 4).int("feat", 1);
    let want = sparsec_interp::run(&f, &args).unwrap();
    let s = sparsec_schedule::auto::gpu_schedule(&f, 64).unwrap();
    for (what, prog) in [("unscheduled", compile(&f).unwrap()), ("gpu schedule", compile(&s).unwrap())] {
        let got = prog.run(&client(), &args).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(got.arrays["y"], want.arrays["y"], "{what}");
    }
}

/// csrmm with the sum's features on `threadIdx.y` and the init's on `threadIdx.x` (fuzz seed
/// 7302925 gave `3` for `2.78`): every unit along `threadIdx.x` would repeat the sum, so the
/// kernel is refused; the interpreter runs the same IR.
#[test]
fn updates_repeated_along_unbound_thread_indices_are_refused() {
    let sch = tk::schedules::csrmm_update_repeated_along_threads();
    let e = compile(sch.func()).map(drop).unwrap_err().to_string();
    assert!(e.contains("is not supported: buffer `C` is updated in place outside every loop bound to threadIdx.x"), "{e}");
    let m = &tk::generated_matrices()[2].1;
    let case = tk::workloads::case("csrmm", m, &mut tk::Rng::new(3)).unwrap();
    let out = sparsec_interp::run(sch.func(), &case.args).unwrap();
    tk::assert_close("interp", &tk::output_f32(&out, "c"), &case.expected[0].1, 1e-5);
}

/// `--checked` code keeps conditions in bool locals (a `while` whose condition loads, the
/// right operand of `&&`): CubeCL keeps them as i32 and gives the interpreter's numbers; an
/// out-of-range access is reported in the fault array instead of run.
#[test]
fn checked_code_with_bool_locals_runs() {
    let f = parse(
        "func w(a: handle, b: handle, n: i32) stage III {
  buffer A = match_buffer(a, [n], i32)
  buffer B = match_buffer(b, [n], i32)
  for i in serial(n) {
    buffer K = alloc_buffer([1], i32, local)
    K[0] = i
    while K[0] < n && A[K[0]] > 0 {
      K[0] = K[0] + 1
    }
    B[i] = K[0] + A[i + 1 - 1]
  }
}
",
    );
    let (g, sites) = sparsec::passes::insert_checks(&f).unwrap();
    assert!(g.buffers.iter().any(|(_, b)| b.dtype == sparsec_ir::DType::Bool), "no bool local to test");
    let mut args = Args::new();
    args.array("a", Array::I32(vec![1, 0, 2, 3])).array("b", Array::I32(vec![0; 4])).int("n", 4);
    args.array(sparsec::passes::FAULT_PARAM, Array::I64(vec![0; 3]));
    let want = sparsec_interp::run(&g, &args).unwrap();
    let got = compile(&g).and_then(|p| p.run(&client(), &args)).unwrap();
    assert_eq!(got.arrays["b"], want.arrays["b"]);
    let Array::I64(fault) = &got.arrays[sparsec::passes::FAULT_PARAM] else { panic!("no fault array") };
    assert!(sparsec::passes::Fault::decode(&sites, fault).is_none(), "{fault:?}");
}

/// Each top-level statement is a kernel of its own, and top-level `let`s are repeated in every
/// later kernel: a `let` that reads a buffer a kernel between changes (`k` below, after
/// `Y[0] = 5`), and a checked `let` (`insert_checks` keeps its value in a top-level local
/// that the `if` of its check writes) must still give the value at the `let`, as the
/// interpreter does. Both came back wrong, with no error, before `plan::state_across_kernels`.
#[test]
fn values_pass_between_top_level_kernels() {
    for (text, k) in [("Y[0] + n - 1", 7), ("Y[1] + n - 1", 7)] {
        let f = parse(&format!(
            "func t(y: handle, n: i32) stage III {{
  buffer Y = match_buffer(y, [n], i32)
  let k = {text}
  Y[0] = 5
  for i in parallel(n - 1) {{
    block b(vi: spatial(n - 1) = i) {{
      Y[vi + 1] = k
    }}
  }}
}}
"
        ));
        let mut args = Args::new();
        args.array("y", Array::I32(vec![0; 8])).int("n", 8);
        let want = sparsec_interp::run(&f, &args).unwrap();
        assert_eq!(want.arrays["y"], Array::I32(vec![5, k, k, k, k, k, k, k]));
        let got = compile(&f).and_then(|p| p.run(&client(), &args)).unwrap();
        assert_eq!(got.arrays["y"], want.arrays["y"], "{text}");
        let (g, sites) = sparsec::passes::insert_checks(&f).unwrap();
        args.array(sparsec::passes::FAULT_PARAM, Array::I64(vec![0; 3]));
        let got = compile(&g).and_then(|p| p.run(&client(), &args)).unwrap();
        assert_eq!(got.arrays["y"], want.arrays["y"], "checked: {text}");
        let Array::I64(fault) = &got.arrays[sparsec::passes::FAULT_PARAM] else { panic!("no fault array") };
        assert!(sparsec::passes::Fault::decode(&sites, fault).is_none(), "{fault:?}");
    }
}
