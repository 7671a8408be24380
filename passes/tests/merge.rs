//! Co-iteration merge loops (`lower_sparse_iter`): an intersection gallops, so its steps
//! grow with the shorter member (times a logarithm), not with the longer one; unions and
//! intersections equal Stage I on random pairs of rows, lowered to Stages II and III.

use sparsec_formats::gen::SplitMix64;
use sparsec_interp::{run_with, InterpError, Options};
use sparsec_ir::data::{Args, Array};
use sparsec_ir::text::parse_func;
use sparsec_ir::Func;
use sparsec_passes::{lower_sparse_buffer, lower_sparse_iter};

const DOT: &str = include_str!("../../examples/formats/coiter_dot.sptir");

/// The dot product of two sparse vectors over `0..n`, written as a union (`S = sum A + B`
/// over the union, so one-sided points count) or an intersection.
fn dot(union: bool) -> Func {
    let src = if union {
        DOT.replace("intersect(JA, JB)", "union(JA, JB)").replace("A[j] * B[j]", "A[j] + B[j]")
    } else {
        DOT.to_string()
    };
    parse_func("coiter_dot", &src).unwrap()
}

/// The value stored at coordinate `x` of side `k` (1 for A, 2 for B): a small integer, so
/// every sum is exact in f32 whatever its order.
fn value(x: i32, k: i32) -> f32 {
    (x % 7 + k) as f32
}

fn args(n: usize, a: &[i32], b: &[i32]) -> Args {
    let val = |c: &[i32], k: i32| Array::F32(c.iter().map(|&x| value(x, k)).collect());
    let mut args = Args::new();
    args.array("a", val(a, 1))
        .array("b", val(b, 2))
        .array("s", Array::F32(vec![0.0]))
        .array("a_indices", Array::I32(a.to_vec()))
        .array("b_indices", Array::I32(b.to_vec()))
        .int("n", n as i64)
        .int("nnz_a", a.len() as i64)
        .int("nnz_b", b.len() as i64);
    args
}

/// `s` computed directly from the two coordinate sets.
fn reference(union: bool, a: &[i32], b: &[i32]) -> f32 {
    if union {
        a.iter().map(|&x| value(x, 1)).sum::<f32>() + b.iter().map(|&x| value(x, 2)).sum::<f32>()
    } else {
        a.iter().filter(|x| b.binary_search(x).is_ok()).map(|&x| value(x, 1) * value(x, 2)).sum()
    }
}

fn stages(f: &Func) -> [(&'static str, Func); 2] {
    let two = lower_sparse_iter(f).unwrap();
    let three = lower_sparse_buffer(&two).unwrap();
    [("II", two), ("III", three)]
}

fn s_of(f: &Func, args: &Args, max_steps: u64) -> Result<f32, InterpError> {
    let out = run_with(f, args, &Options { max_steps, ..Options::default() })?;
    Ok(out.arrays["s"].get_f64(0).unwrap() as f32)
}

#[test]
fn an_intersection_gallops_past_a_long_row() {
    let n = 1 << 20;
    let long: Vec<i32> = (0..n as i32).step_by(2).collect();
    let short = [0, 999, 1000, 200_001, 524_288, n as i32 - 2];
    let f = dot(false);
    for (a, b) in [(&short[..], &long[..]), (&long[..], &short[..])] {
        let want = reference(false, a, b);
        assert_eq!(s_of(&f, &args(n, a, b), u64::MAX).unwrap(), want);
        for (stage, g) in stages(&f) {
            // Two pointers take ~500k steps; each gallop takes ~2·log2(500k) ≈ 40.
            assert_eq!(s_of(&g, &args(n, a, b), 2_000).unwrap(), want, "Stage {stage}");
        }
    }
    // A union still visits every point, so the same budget runs out.
    let g = lower_sparse_iter(&dot(true)).unwrap();
    let err = s_of(&g, &args(n, &short, &long), 2_000).unwrap_err();
    assert!(matches!(err, InterpError::FuelExhausted { .. }), "{err}");
}

/// A sorted random subset of `0..n` with about `n * p` points.
fn subset(rng: &mut SplitMix64, n: usize, p: f64) -> Vec<i32> {
    (0..n as i32).filter(|_| rng.next_f64() < p).collect()
}

#[test]
fn merges_equal_stage_one_on_random_rows() {
    let mut rng = SplitMix64::new(0x5eed_0017);
    let densities = [0.0, 0.002, 0.05, 0.5, 1.0];
    let (fi, fu) = (dot(false), dot(true));
    let (si, su) = (stages(&fi), stages(&fu));
    let mut cases = 0;
    for n in [1usize, 2, 7, 64, 1000] {
        for &pa in &densities {
            for &pb in &densities {
                let (a, b) = (subset(&mut rng, n, pa), subset(&mut rng, n, pb));
                let args = args(n, &a, &b);
                for (union, f, lowered) in [(false, &fi, &si), (true, &fu, &su)] {
                    let want = reference(union, &a, &b);
                    assert_eq!(s_of(f, &args, u64::MAX).unwrap(), want, "Stage I, n {n}, {a:?} {b:?}");
                    for (stage, g) in lowered {
                        let got = s_of(g, &args, u64::MAX).unwrap();
                        assert_eq!(got, want, "Stage {stage}, union {union}, n {n}, {a:?} {b:?}");
                    }
                    cases += 1;
                }
            }
        }
    }
    assert_eq!(cases, 5 * 25 * 2);
}
