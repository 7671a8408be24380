//! The IR's integer arithmetic (`sparsec_ir::value`) on the device: `/` truncates, `//` and
//! `%` round toward negative infinity, all wrap (`MIN / -1 == MIN`), at the extremes where
//! device instructions and the textbook identities (`(a - a % b) / b`) overflow.

use super::common::client;
use sparsec_backend_cubecl::compile;
use sparsec_ir::data::{Args, Array};
use sparsec_ir::value::Value;
use sparsec_ir::BinOp;

#[test]
fn integer_division_matches_the_semantic_core() {
    let f = sparsec_ir::text::parse_func(
        "div.sptir",
        "func div(a: handle, b: handle, q: handle, fq: handle, fr: handle, n: i32) stage III {
  buffer A = match_buffer(a, [n], i32)
  buffer B = match_buffer(b, [n], i32)
  buffer Q = match_buffer(q, [n], i32)
  buffer FQ = match_buffer(fq, [n], i32)
  buffer FR = match_buffer(fr, [n], i32)
  for i in serial(n) {
    block d(vi: spatial(n) = i) {
      Q[vi] = A[vi] / B[vi]
      FQ[vi] = A[vi] // B[vi]
      FR[vi] = A[vi] % B[vi]
    }
  }
}
",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let edges = [
        i32::MIN,
        i32::MIN + 1,
        -7,
        -2,
        -1,
        1,
        2,
        7,
        i32::MAX - 1,
        i32::MAX,
    ];
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for x in edges.iter().chain(&[0]) {
        for y in edges {
            a.push(*x);
            b.push(y);
        }
    }
    let n = a.len();
    let mut args = Args::new();
    args.array("a", Array::I32(a.clone()))
        .array("b", Array::I32(b.clone()))
        .array("q", Array::I32(vec![0; n]))
        .array("fq", Array::I32(vec![0; n]))
        .array("fr", Array::I32(vec![0; n]))
        .int("n", n as i64);
    let out = compile(&f)
        .unwrap()
        .run(&client(), &args)
        .unwrap_or_else(|e| panic!("{e}"));
    for (name, op) in [
        ("q", BinOp::Div),
        ("fq", BinOp::FloorDiv),
        ("fr", BinOp::FloorMod),
    ] {
        let Array::I32(got) = &out.arrays[name] else {
            panic!()
        };
        for i in 0..n {
            let want = Value::binary(op, Value::I32(a[i]), Value::I32(b[i])).unwrap();
            assert_eq!(
                Value::I32(got[i]),
                want,
                "{} {} {}",
                a[i],
                op.symbol().unwrap_or("?"),
                b[i]
            );
        }
    }
}

/// Literal divisors, which CubeCL's own folding sees: cubecl-ir 0.11.3 simplifies a remainder
/// by 1 to its left operand (`x % 1 = x`) in the CUDA and WGSL compilers (its SPIR-V path,
/// which wgpu runs on Vulkan, does not), so the backend never emits CubeCL's remainder
/// (cubecl-cuda fuzz seed 1795800000114: `W[j] % 1` was `W[j]` on an H100). The results on
/// wgpu must match the semantic core, and neither emitted source may hold a `%`.
#[test]
fn integer_division_by_literals_matches_the_semantic_core() {
    let divisors = [1, -1, 2, -3, 7];
    let mut body = String::new();
    let mut params = String::new();
    let mut buffers = String::new();
    for (k, d) in divisors.iter().enumerate() {
        for (name, op) in [("q", "/"), ("fq", "//"), ("fr", "%")] {
            params.push_str(&format!("{name}{k}: handle, "));
            buffers.push_str(&format!("  buffer {}{k} = match_buffer({name}{k}, [n], i32)\n", name.to_uppercase()));
            body.push_str(&format!("      {}{k}[vi] = A[vi] {op} {d}\n", name.to_uppercase()));
        }
    }
    let text = format!(
        "func div(a: handle, {params}n: i32) stage III {{\n  buffer A = match_buffer(a, [n], i32)\n{buffers}  for i in serial(n) {{\n    block d(vi: spatial(n) = i) {{\n{body}    }}\n  }}\n}}\n"
    );
    let f = sparsec_ir::text::parse_func("div.sptir", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let a = vec![i32::MIN, i32::MIN + 1, -7, -2, -1, 0, 1, 2, 7, 9, i32::MAX];
    let n = a.len();
    let mut args = Args::new();
    args.array("a", Array::I32(a.clone())).int("n", n as i64);
    for k in 0..divisors.len() {
        for name in ["q", "fq", "fr"] {
            args.array(&format!("{name}{k}"), Array::I32(vec![0; n]));
        }
    }
    for (what, src) in [("CUDA", sparsec_backend_cubecl::emit_cuda(&f)), ("WGSL", sparsec_backend_cubecl::emit_wgsl(&f))] {
        let src = src.unwrap_or_else(|e| panic!("{e}"));
        let line = src.lines().find(|l| l.contains('%') && !l.trim_start().starts_with("//"));
        assert!(line.is_none(), "{what} source has a remainder: {line:?}");
    }
    let out = compile(&f).unwrap().run(&client(), &args).unwrap_or_else(|e| panic!("{e}"));
    for (k, d) in divisors.iter().enumerate() {
        for (name, op) in [("q", BinOp::Div), ("fq", BinOp::FloorDiv), ("fr", BinOp::FloorMod)] {
            let Array::I32(got) = &out.arrays[&format!("{name}{k}")] else { panic!() };
            for i in 0..n {
                let want = Value::binary(op, Value::I32(a[i]), Value::I32(*d)).unwrap();
                assert_eq!(Value::I32(got[i]), want, "{} {} {d}", a[i], op.symbol().unwrap_or("?"));
            }
        }
    }
}

/// `tanh` and `sigmoid` on wgpu keep their relative precision where WGSL's `tanh` loses it
/// (near 0: fuzz seed 7103939 divided by a tanh of 2⁻⁶⁰ that lavapipe made 3e-8) and never
/// overflow an intermediate (`sigmoid(-100)`).
#[test]
fn tanh_and_sigmoid_keep_relative_precision() {
    let f = sparsec_ir::text::parse_func(
        "act.sptir",
        "func act(x: handle, t: handle, s: handle, n: i32) stage III {
  buffer X = match_buffer(x, [n], f32)
  buffer T = match_buffer(t, [n], f32)
  buffer S = match_buffer(s, [n], f32)
  for i in serial(n) {
    block a(vi: spatial(n) = i) {
      T[vi] = tanh(X[vi])
      S[vi] = sigmoid(X[vi])
    }
  }
}
",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let xs: Vec<f32> =
        vec![8.7e-19, -1e-8, 3e-5, -0.01, 0.0499, 0.0501, -0.3, 0.9, 2.5, -6.0, 9.5, 15.0, -40.0, 0.0, 30.0, -100.0];
    let n = xs.len();
    let mut args = Args::new();
    args.array("x", Array::F32(xs.clone()))
        .array("t", Array::F32(vec![0.0; n]))
        .array("s", Array::F32(vec![0.0; n]))
        .int("n", n as i64);
    let want = sparsec_interp::run(&f, &args).unwrap();
    let got = compile(&f).unwrap().run(&client(), &args).unwrap_or_else(|e| panic!("{e}"));
    for name in ["t", "s"] {
        let (Array::F32(g), Array::F32(w)) = (&got.arrays[name], &want.arrays[name]) else { panic!() };
        for k in 0..n {
            // Relative, except sigmoid's subnormal tail, which WGSL may flush to zero.
            let close = (g[k] - w[k]).abs() <= 2e-6 * w[k].abs() || w[k].abs() < f32::MIN_POSITIVE && g[k].abs() < f32::MIN_POSITIVE;
            assert!(close, "{name}({}) = {}, want {}", xs[k], g[k], w[k]);
        }
    }
}
