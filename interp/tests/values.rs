//! Scalar semantics: integer division, wrapping, casts, narrow floats, intrinsics.

mod common;

use common::*;
use half::{bf16, f16};
use sparsec_interp::run;
use sparsec_ir::data::{Args, Array};

#[test]
fn integer_arithmetic() {
    let src = r#"
func ints(o: handle, x: i32, y: i32, big: i64) stage III {
  buffer O = match_buffer(o, [10], i32)
  O[0] = x / y
  O[1] = x // y
  O[2] = x % y
  O[3] = x * 1000000000
  O[4] = -x
  O[5] = min(x, y)
  O[6] = max(x, y)
  O[7] = abs(x)
  O[8] = cast(i32, big)
  O[9] = cast(i32, big // cast(i64, y))
}
"#;
    let func = parse(src);
    for (x, y) in [(7, 2), (-7, 2), (7, -2), (-7, -2), (6, 3), (i32::MIN, -1), (i32::MAX, 1)] {
        let big = (1i64 << 40) + 5;
        let mut args = Args::new();
        args.array("o", Array::I32(vec![0; 10])).int("x", x as i64).int("y", y as i64).int("big", big);
        let out = run(&func, &args).unwrap();
        let floor_div = |a: i64, b: i64| a.div_euclid(b) - if b < 0 && a.rem_euclid(b) != 0 { 1 } else { 0 };
        let (xl, yl) = (x as i64, y as i64);
        let want = vec![
            x.wrapping_div(y),
            floor_div(xl, yl) as i32,
            (xl - yl * floor_div(xl, yl)) as i32,
            x.wrapping_mul(1_000_000_000),
            x.wrapping_neg(),
            x.min(y),
            x.max(y),
            x.wrapping_abs(),
            big as i32,
            floor_div(big, yl) as i32,
        ];
        assert_eq!(i32s(&out, "o"), want, "x = {x}, y = {y}");
    }
}

#[test]
fn floor_division_rounds_down() {
    // Spot values, independent of the reference formula above.
    let src = r#"
func f(o: handle) stage III {
  buffer O = match_buffer(o, [6], i32)
  O[0] = -7 // 2
  O[1] = -7 % 2
  O[2] = 7 % -2
  O[3] = -7 / 2
  O[4] = 2147483647 + 1
  O[5] = cast(i32, -7.5 // 2.0)
}
"#;
    let mut args = Args::new();
    args.array("o", Array::I32(vec![0; 6]));
    let out = run(&parse(src), &args).unwrap();
    assert_eq!(i32s(&out, "o"), vec![-4, 1, -1, -3, i32::MIN, -4]);
}

#[test]
fn casts_and_limits() {
    let src = r#"
func casts(o: handle, f: handle, g: handle, v: f64) stage III {
  buffer O = match_buffer(o, [5], i32)
  buffer F = match_buffer(f, [5], f32)
  buffer G = match_buffer(g, [2], f64)
  O[0] = cast(i32, v)
  O[1] = cast(i32, v * 1e10f64)
  O[2] = cast(i32, cast(bool, v))
  O[3] = cast(i32, nan)
  O[4] = cast(i32, true) + cast(i32, 3000000000i64)
  F[0] = 16777216.0 + 1.0
  F[1] = cast(f32, 16777216.0f64 + 1.0f64)
  F[2] = max_value(f32)
  F[3] = min_value(f32)
  F[4] = cast(f32, max_value(i32))
  G[0] = cast(f64, 0.1)
  G[1] = 0.1f64
}
"#;
    let mut args = Args::new();
    args.array("o", Array::I32(vec![0; 5]))
        .array("f", Array::F32(vec![0.0; 5]))
        .array("g", Array::F64(vec![0.0; 2]))
        .float("v", -2.7);
    let out = run(&parse(src), &args).unwrap();
    assert_eq!(i32s(&out, "o"), vec![-2, i32::MIN, 1, 0, 1 + 3_000_000_000i64 as i32]);
    // f32 arithmetic is done in f32.
    assert_eq!(f32s(&out, "f"), vec![16777216.0, 16777216.0, f32::MAX, f32::MIN, i32::MAX as f32]);
    assert_eq!(out.arrays["g"], Array::F64(vec![0.1f32 as f64, 0.1]));
}

#[test]
fn narrow_floats_round_after_each_operation() {
    let src = r#"
func narrow(x: handle, h: handle, g: handle) stage III {
  buffer X = match_buffer(x, [3], f16)
  buffer H = match_buffer(h, [4], f16)
  buffer G = match_buffer(g, [2], bf16)
  H[0] = X[0] + X[1] + X[2]
  H[1] = max_value(f16) + max_value(f16)
  H[2] = cast(f16, 0.1f64)
  H[3] = exp(X[0])
  G[0] = 1.0bf16 + 0.001bf16
  G[1] = cast(bf16, 2.71)
}
"#;
    let xs = [1.0f32, f16::from_f32(0.0004).to_f32(), f16::from_f32(0.0004).to_f32()];
    let mut args = Args::new();
    args.array("x", Array::F16(xs.to_vec()))
        .array("h", Array::F16(vec![0.0; 4]))
        .array("g", Array::BF16(vec![0.0; 2]));
    let out = run(&parse(src), &args).unwrap();
    let r16 = |x: f32| f16::from_f32(x).to_f32();
    let rb = |x: f32| bf16::from_f32(x).to_f32();
    let want_h = vec![
        r16(r16(xs[0] + xs[1]) + xs[2]),
        f32::INFINITY,
        f16::from_f64(0.1).to_f32(),
        r16(1.0f32.exp()),
    ];
    assert_eq!(out.arrays["h"], Array::F16(want_h));
    // Rounding after each step differs from computing the sum in f32.
    assert_ne!(r16(r16(xs[0] + xs[1]) + xs[2]), r16(xs[0] + xs[1] + xs[2]));
    let want_g = vec![rb(1.0 + bf16::from_f32(0.001).to_f32()), rb(2.71)];
    assert_eq!(out.arrays["g"], Array::BF16(want_g));
}

#[test]
fn float_intrinsics_in_f32() {
    let src = r#"
func f(o: handle, x: f32) stage III {
  buffer O = match_buffer(o, [10], f32)
  O[0] = exp(x)
  O[1] = log(x)
  O[2] = sqrt(x)
  O[3] = tanh(x)
  O[4] = sigmoid(x)
  O[5] = pow(x, 2.5)
  O[6] = floor(-x)
  O[7] = ceil(-x)
  O[8] = abs(-x)
  O[9] = -7.5 % 2.0
}
"#;
    let x = 1.7f32;
    let mut args = Args::new();
    args.array("o", Array::F32(vec![0.0; 10])).float("x", x as f64);
    let out = run(&parse(src), &args).unwrap();
    let want = vec![
        x.exp(),
        x.ln(),
        x.sqrt(),
        x.tanh(),
        1.0 / (1.0 + (-x).exp()),
        x.powf(2.5),
        (-x).floor(),
        (-x).ceil(),
        x,
        0.5,
    ];
    assert_eq!(f32s(&out, "o"), want);
}

#[test]
fn let_scopes_and_allocations_are_fresh() {
    let src = r#"
func f(o: handle, n: i32) stage III {
  buffer O = match_buffer(o, [n], i32)
  buffer G = alloc_buffer([1], i32, global)
  for i in serial(n) {
    buffer t = alloc_buffer([2], i32, local, default = 10)
    let sq = i * i
    t[0] = t[0] + sq
    G[0] = G[0] + 1
    O[i] = t[0] + G[0] + t[1]
  }
}
"#;
    let mut args = Args::new();
    args.array("o", Array::I32(vec![0; 5])).int("n", 5);
    let out = run(&parse(src), &args).unwrap();
    // `t` starts at its default each iteration; the function-level `G` persists.
    assert_eq!(i32s(&out, "o"), (0..5).map(|i| 10 + i * i + (i + 1) + 10).collect::<Vec<_>>());
}

#[test]
fn float_min_and_max_compare_and_select() {
    let src = r#"
func mm(o: handle, x: f32, y: f32) stage III {
  buffer O = match_buffer(o, [4], f32)
  O[0] = min(x, y)
  O[1] = max(x, y)
  O[2] = min(x, nan)
  O[3] = max(nan, y)
}
"#;
    let func = parse(src);
    // Of equal operands the second; a NaN operand yields the other.
    let cases: [((f32, f32), [f32; 4]); 3] = [
        ((-0.0, 0.0), [0.0, 0.0, -0.0, 0.0]),
        ((0.0, -0.0), [-0.0, -0.0, 0.0, -0.0]),
        ((2.0, 1.0), [1.0, 2.0, 2.0, 1.0]),
    ];
    for ((x, y), want) in cases {
        let mut args = Args::new();
        args.array("o", Array::F32(vec![0.0; 4])).float("x", x as f64).float("y", y as f64);
        let out = run(&func, &args).unwrap();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&f32s(&out, "o")), bits(&want), "x = {x}, y = {y}");
    }
}
