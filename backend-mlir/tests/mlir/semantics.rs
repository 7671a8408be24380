//! The arithmetic of `sparsec_ir::value` at its edges, on the JIT (threaded, serial, GPU
//! kernels emulated) against the interpreter: wrapping integer division (`MIN / -1`,
//! `MIN % -1`), floor division and remainder of negative operands, float to integer casts
//! (saturating, NaN to 0), bool comparisons, inf/nan/out-of-range literals, i32 wrapping.
//! Operands come from the inputs so that nothing is folded at compile time.

use sparsec_backend_mlir::{CpuKernel, CpuOptions};
use sparsec_ir::data::{Args, Array};

fn check(src: &str, args: &Args) {
    let f = sparsec_ir::text::parse_func("edges", src).unwrap_or_else(|e| panic!("{e}"));
    sparsec_ir::verify::verify_func(&f).unwrap_or_else(|e| panic!("{e:?}"));
    let want = sparsec_interp::run(&f, args).unwrap();
    for (parallel, emulate_gpu) in [(true, false), (false, false), (false, true)] {
        let opts = CpuOptions { parallel, emulate_gpu, ..CpuOptions::default() };
        let k = CpuKernel::compile(&f, &opts).unwrap_or_else(|e| panic!("{e}"));
        let mut got = args.clone();
        k.run(&mut got).unwrap();
        for (name, w) in &want.arrays {
            let g = &got.arrays[name];
            let (gv, wv) = (g.to_f64_vec(), w.to_f64_vec());
            let same = g.dtype() == w.dtype()
                && gv.len() == wv.len()
                && gv.iter().zip(&wv).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
            assert!(same, "{name} (parallel {parallel}, emulated GPU {emulate_gpu}): got {g:?}, want {w:?}");
        }
    }
}

#[test]
fn integer_division_wraps_and_floors_as_the_interpreter() {
    let src = r#"
func idiv(a: handle, b: handle, q: handle, n: i32) stage III {
  buffer A = match_buffer(a, [n], i32)
  buffer B = match_buffer(b, [n], i32)
  buffer Q = match_buffer(q, [n, 5], i32)
  for i in parallel(n) {
    block s(vi: spatial(n) = i) {
      Q[vi, 0] = A[vi] / B[vi]
      Q[vi, 1] = A[vi] // B[vi]
      Q[vi, 2] = A[vi] % B[vi]
      Q[vi, 3] = A[vi] * 65536 + 2147483647
      Q[vi, 4] = abs(A[vi]) - A[vi]
    }
  }
}
"#;
    let pairs: [(i32, i32); 10] =
        [(i32::MIN, -1), (i32::MIN, 1), (7, -2), (-7, 2), (-7, -2), (7, 2), (i32::MAX, -1), (-1, i32::MIN), (0, -3), (i32::MIN, 2)];
    let n = pairs.len();
    let mut args = Args::new();
    args.array("a", Array::I32(pairs.iter().map(|p| p.0).collect()))
        .array("b", Array::I32(pairs.iter().map(|p| p.1).collect()))
        .array("q", Array::I32(vec![0; n * 5]))
        .int("n", n as i64);
    check(src, &args);
}

#[test]
fn casts_and_literals_follow_rust_as() {
    let src = r#"
func casts(x: handle, y: handle, o: handle, p: handle, n: i32) stage III {
  buffer X = match_buffer(x, [n], f32)
  buffer Y = match_buffer(y, [n], f64)
  buffer O = match_buffer(o, [n, 4], i32)
  buffer P = match_buffer(p, [n, 6], f32)
  for i in parallel(n) {
    block s(vi: spatial(n) = i) {
      O[vi, 0] = cast(i32, X[vi])
      O[vi, 1] = cast(i32, cast(i64, X[vi]) // 4294967296i64)
      O[vi, 2] = cast(i32, Y[vi])
      O[vi, 3] = cast(i32, X[vi] < 0.0) + 2 * cast(i32, (X[vi] < 0.0) < (cast(f32, Y[vi]) < 0.0)) + 4 * cast(i32, (X[vi] > 0.0) >= (cast(f32, Y[vi]) > 0.0))
      P[vi, 0] = X[vi] + inf
      P[vi, 1] = X[vi] * nan
      P[vi, 2] = X[vi] + -inf
      P[vi, 3] = X[vi] + 1e39
      P[vi, 4] = cast(f32, cast(i32, 3.0e9) + cast(i32, X[vi] * 0.0))
      P[vi, 5] = max(X[vi], 0.0)
    }
  }
}
"#;
    let xs: [f32; 10] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 3e9, -3e9, 1e19, -1e19, 2.5, -2.5, 0.0];
    let n = xs.len();
    let mut args = Args::new();
    args.array("x", Array::F32(xs.to_vec()))
        .array("y", Array::F64(xs.iter().map(|&v| v as f64 * 0.75).collect()))
        .array("o", Array::I32(vec![0; n * 4]))
        .array("p", Array::F32(vec![0.0; n * 6]))
        .int("n", n as i64);
    check(src, &args);
}

/// `min`/`max` of floats are `ir::value`'s compare and select: a NaN operand yields the other,
/// and of equal operands (`-0.0`, `0.0`) the second (fuzz seed 7002096: `minnumf` on the CPU
/// and the compare on emulated GPU kernels picked different zeros).
#[test]
fn float_min_and_max_pick_as_the_interpreter() {
    let src = r#"
func mm(x: handle, y: handle, o: handle, n: i32) stage III {
  buffer X = match_buffer(x, [n], f32)
  buffer Y = match_buffer(y, [n], f32)
  buffer O = match_buffer(o, [n, 4], f32)
  for i in parallel(n) {
    block s(vi: spatial(n) = i) {
      O[vi, 0] = min(X[vi], Y[vi])
      O[vi, 1] = max(X[vi], Y[vi])
      O[vi, 2] = min(Y[vi], X[vi])
      O[vi, 3] = max(Y[vi], X[vi])
    }
  }
}
"#;
    let xs: [f32; 6] = [-0.0, 0.0, f32::NAN, 1.0, f32::NAN, -2.0];
    let ys: [f32; 6] = [0.0, -0.0, 1.0, f32::NAN, f32::NAN, 3.0];
    let n = xs.len();
    let mut args = Args::new();
    args.array("x", Array::F32(xs.to_vec()))
        .array("y", Array::F32(ys.to_vec()))
        .array("o", Array::F32(vec![0.0; n * 4]))
        .int("n", n as i64);
    check(src, &args);
}

/// Allocations inside a parallel loop or a GPU unit are released at the end of each
/// iteration or unit: 3,000 iterations of a 16 KiB local buffer would need 48 MiB of stack
/// if they were not (a stack overflow, found on an emulated kernel with a register array).
#[test]
fn per_iteration_allocations_do_not_grow_the_stack() {
    let src = r#"
func stack(x: handle, y: handle, z: handle, n: i32) stage III {
  buffer X = match_buffer(x, [n], i32)
  buffer Y = match_buffer(y, [n], f32)
  buffer Z = match_buffer(z, [n], f32)
  for i in parallel(n) {
    buffer L = alloc_buffer([4096], f32, local)
    L[X[i]] = cast(f32, i)
    Y[i] = L[X[i]] + L[4095 - X[i]]
  }
  for b in blockIdx.x(n) {
    for t in threadIdx.x(1) {
      buffer M = alloc_buffer([4096], f32, local)
      M[X[b]] = 2.0
      Z[b] = M[X[b]] + M[0]
    }
  }
}
"#;
    let n = 3000;
    let mut args = Args::new();
    args.arrays.insert("x".into(), Array::I32((0..n).map(|i| (i * 7919 % 4096) as i32).collect()));
    args.arrays.insert("y".into(), Array::F32(vec![0.0; n]));
    args.arrays.insert("z".into(), Array::F32(vec![0.0; n]));
    args.scalars.insert("n".into(), sparsec_ir::data::Scalar::Int(n as i64));
    // Tests run on threads with 2 MiB stacks.
    std::thread::Builder::new().stack_size(2 << 20).spawn(move || check(src, &args)).unwrap().join().unwrap();
}
