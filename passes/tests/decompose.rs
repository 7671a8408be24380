//! `decompose_format`: golden decompositions of csrmm, differential runs against the
//! original program (Stage I and lowered to Stage III), and the error variants.
//!
//! Matrices come from `sparsec_formats` (generators and the shared Matrix Market files).

mod common;

use common::Rng;
use sparsec_interp::run;
use sparsec_ir::data::{Args, Array};
use sparsec_ir::text::{parse_func, print_func};
use sparsec_ir::{Func, Stage};
use sparsec_passes::decompose::{
    bsr_rule, decompose_format, ell_rule, extract_preprocess, padding_rule, remove_preprocess, DecomposeError,
    FormatRewriteRule, IndexMap,
};
use sparsec_passes::PassManager;

const CSRMM: &str = include_str!("../../tests/workloads/csrmm.sptir");
const FEAT: usize = 4;

fn csrmm() -> Func {
    parse_func("csrmm", CSRMM).unwrap()
}

// ---- matrices --------------------------------------------------------------------------

/// A canonical CSR (sorted, duplicate-free rows).
#[derive(Clone, Debug)]
struct Mat {
    rows: usize,
    cols: usize,
    indptr: Vec<usize>,
    indices: Vec<usize>,
    vals: Vec<f32>,
}

impl Mat {
    fn row(&self, i: usize) -> &[usize] {
        &self.indices[self.indptr[i]..self.indptr[i + 1]]
    }

    fn max_row(&self) -> usize {
        (0..self.rows).map(|i| self.row(i).len()).max().unwrap_or(0)
    }
}


type FCsr = sparsec_formats::Csr<i64, f64>;

fn from_formats(c: &FCsr) -> Mat {
    Mat {
        rows: c.rows(),
        cols: c.cols(),
        indptr: c.indptr().iter().map(|&x| x as usize).collect(),
        indices: c.indices().iter().map(|&x| x as usize).collect(),
        vals: c.values().iter().map(|&v| v as f32).collect(),
    }
}

/// A shared matrix read by the formats crate, if `$SPARSEC_DATA` has it.
fn shared(name: &str) -> Option<Mat> {
    let (_, path) = sparsec_formats::shared_matrices().into_iter().find(|(n, _)| n == name)?;
    let c: FCsr = sparsec_formats::mtx::read_mtx_path(&path).unwrap();
    Some(from_formats(&c))
}

// ---- arguments -------------------------------------------------------------------------

fn i32s(v: &[usize]) -> Array {
    Array::I32(v.iter().map(|&x| x as i32).collect())
}

fn csrmm_args(m: &Mat) -> Args {
    let mut r = Rng::new(99);
    let b: Vec<f32> = (0..m.cols * FEAT).map(|_| r.val()).collect();
    let mut a = Args::new();
    a.array("a", Array::F32(m.vals.clone()))
        .array("b", Array::F32(b))
        .array("c", Array::F32(vec![7.0; m.rows * FEAT]))
        .array("indptr", i32s(&m.indptr))
        .array("indices", i32s(&m.indices));
    a.int("m", m.rows as i64).int("n", m.cols as i64).int("feat_size", FEAT as i64).int("nnz", m.indices.len() as i64);
    a
}

/// Structure of the BSR(b) of `m` (partial blocks padded), zero values.
fn bind_bsr(args: &mut Args, m: &Mat, b: usize) {
    let (nb, mb) = (m.rows.div_ceil(b), m.cols.div_ceil(b));
    let (mut indptr, mut indices) = (vec![0], Vec::new());
    for bi in 0..nb {
        let mut cols: Vec<usize> = (bi * b..((bi + 1) * b).min(m.rows)).flat_map(|i| m.row(i).iter().map(|&j| j / b)).collect();
        cols.sort_unstable();
        cols.dedup();
        indices.extend(cols);
        indptr.push(indices.len());
    }
    let s = format!("bsr_{b}");
    args.array(format!("a_{s}"), Array::F32(vec![0.0; indices.len() * b * b]))
        .array(format!("indptr_{s}"), i32s(&indptr))
        .array(format!("indices_{s}"), i32s(&indices));
    args.int(format!("nb_{s}"), nb as i64).int(format!("mb_{s}"), mb as i64).int(format!("nnzb_{s}"), indices.len() as i64);
}

/// ELL(k) of `m`: padding slots hold column `n` (the format's `n` is bound to at least `n + 1`).
fn bind_ell(args: &mut Args, m: &Mat, k: usize) {
    let mut idx = Vec::new();
    for i in 0..m.rows {
        let row = m.row(i);
        assert!(row.len() <= k);
        idx.extend_from_slice(row);
        idx.extend(std::iter::repeat_n(m.cols, k - row.len()));
    }
    let s = format!("ell_{k}");
    args.array(format!("a_{s}"), Array::F32(vec![0.0; m.rows * k])).array(format!("indices_{s}"), i32s(&idx));
    // Coordinates stay below n + 1; a row never has more positions than the axis length.
    let n = (m.cols + 1).max(k);
    args.int(format!("m_{s}"), m.rows as i64).int(format!("n_{s}"), n as i64);
}

/// Rows padded to multiples of `k`: padding entries hold column `n`.
fn bind_padding(args: &mut Args, m: &Mat, k: usize) {
    let (mut indptr, mut idx) = (vec![0], Vec::new());
    for i in 0..m.rows {
        let row = m.row(i);
        idx.extend_from_slice(row);
        idx.extend(std::iter::repeat_n(m.cols, row.len().div_ceil(k) * k - row.len()));
        indptr.push(idx.len());
    }
    let s = format!("padding_{k}");
    let longest = (0..m.rows).map(|i| indptr[i + 1] - indptr[i]).max().unwrap_or(0);
    let n = (m.cols + 1).max(longest);
    args.array(format!("a_{s}"), Array::F32(vec![0.0; idx.len()]))
        .array(format!("indptr_{s}"), i32s(&indptr))
        .array(format!("indices_{s}"), i32s(&idx));
    args.int(format!("m_{s}"), m.rows as i64).int(format!("n_{s}"), n as i64).int(format!("nnz_{s}"), idx.len() as i64);
}

#[derive(Clone, Copy, Debug)]
enum Fmt {
    Bsr(usize),
    Ell(usize),
    Pad(usize),
}

impl Fmt {
    fn rule(self) -> FormatRewriteRule {
        match self {
            Fmt::Bsr(b) => bsr_rule(b as i64),
            Fmt::Ell(k) => ell_rule(k as i64),
            Fmt::Pad(k) => padding_rule(k as i64),
        }
        .unwrap()
    }
    fn bind(self, args: &mut Args, m: &Mat) {
        match self {
            Fmt::Bsr(b) => bind_bsr(args, m, b),
            Fmt::Ell(k) => bind_ell(args, m, k),
            Fmt::Pad(k) => bind_padding(args, m, k),
        }
    }
}

fn assert_close(got: &Array, want: &Array, what: &str) {
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    assert_eq!(g.len(), w.len(), "{what}");
    for (p, (x, y)) in g.iter().zip(&w).enumerate() {
        assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "{what}: c[{p}] = {x}, expected {y}");
    }
}

/// Runs csrmm and its decomposition (Stage I, and lowered to Stage III) on `m`.
fn differential(m: &Mat, fmt: Fmt, lowered: bool) {
    let f = csrmm();
    let args = csrmm_args(m);
    let want = run(&f, &args).unwrap();
    let g = decompose_format(&f, &[fmt.rule()]).unwrap();
    let mut gargs = args.clone();
    fmt.bind(&mut gargs, m);
    let got = run(&g, &gargs).unwrap();
    let what = format!("{fmt:?} on {}x{}", m.rows, m.cols);
    assert_close(&got.arrays["c"], &want.arrays["c"], &what);
    // Preprocess alone, then compute alone on its outputs.
    let pre = run(&extract_preprocess(&g), &gargs).unwrap();
    let post = run(&remove_preprocess(&g), &pre).unwrap();
    assert_close(&post.arrays["c"], &want.arrays["c"], &format!("{what} (split)"));
    if lowered {
        let low = PassManager::lowering_to(Stage::III).run(&g).unwrap();
        let got3 = run(&low, &gargs).unwrap();
        assert_close(&got3.arrays["c"], &want.arrays["c"], &format!("{what} (Stage III)"));
    }
}

fn generated() -> Vec<Mat> {
    use sparsec_formats::gen;
    let all: Vec<FCsr> = vec![
        gen::uniform(37, 29, 150, 1).unwrap(),
        gen::with_empty_rows(41, 53, 2).unwrap(),
        gen::rmat(6, 400, [0.57, 0.19, 0.19, 0.05], 3).unwrap(),
        gen::one_by_one(1.5),
        gen::uniform(18, 35, 0, 5).unwrap(),
    ];
    all.iter().map(from_formats).collect()
}

// ---- golden ----------------------------------------------------------------------------

fn decomposed_text(fmt: Fmt) -> String {
    let g = decompose_format(&csrmm(), &[fmt.rule()]).unwrap();
    PassManager::lowering_to(Stage::III).run(&g).unwrap();
    let text = print_func(&g);
    // Prints and parses back to an equal function.
    assert_eq!(print_func(&parse_func("g", &text).unwrap()), text);
    text
}

#[test]
fn golden_bsr() {
    insta::assert_snapshot!("csrmm_bsr_4", decomposed_text(Fmt::Bsr(4)));
    insta::assert_snapshot!("csrmm_bsr_16", decomposed_text(Fmt::Bsr(16)));
    insta::assert_snapshot!("csrmm_bsr_32", decomposed_text(Fmt::Bsr(32)));
}

#[test]
fn golden_ell_and_padding() {
    insta::assert_snapshot!("csrmm_ell_4", decomposed_text(Fmt::Ell(4)));
    insta::assert_snapshot!("csrmm_ell_512", decomposed_text(Fmt::Ell(512)));
    insta::assert_snapshot!("csrmm_padding_32", decomposed_text(Fmt::Pad(32)));
}

#[test]
fn golden_bsr_4_stage_ii() {
    let g = decompose_format(&csrmm(), &[bsr_rule(4).unwrap()]).unwrap();
    let s2 = PassManager::lowering_to(Stage::II).run(&g).unwrap();
    insta::assert_snapshot!("csrmm_bsr_4_stage_ii", print_func(&s2));
}

// ---- differential ----------------------------------------------------------------------

#[test]
fn bsr_matches_csrmm_on_generated_matrices() {
    for m in generated() {
        for b in [4, 16, 32] {
            differential(&m, Fmt::Bsr(b), b == 4);
        }
    }
}

#[test]
fn ell_matches_csrmm_on_generated_matrices() {
    for m in generated() {
        differential(&m, Fmt::Ell(m.max_row().max(1)), true);
        differential(&m, Fmt::Ell(m.max_row() + 3), false);
    }
}

#[test]
fn padding_matches_csrmm_on_generated_matrices() {
    for m in generated() {
        for k in [4, 32] {
            differential(&m, Fmt::Pad(k), k == 4);
        }
    }
}

#[test]
fn decompositions_match_csrmm_on_shared_matrices() {
    // Every shared matrix at Stage I; the two small graphs also lowered to Stage III. ELL of
    // the widest rows is skipped where its padded size would make the interpreter slow.
    for (name, _) in sparsec_formats::shared_matrices() {
        let m = shared(&name).expect("listed");
        let small = name == "cora" || name == "dwt_992";
        differential(&m, Fmt::Bsr(4), small);
        if m.rows * m.max_row() <= 1_000_000 {
            differential(&m, Fmt::Ell(m.max_row()), small);
        }
        differential(&m, Fmt::Pad(32), false);
    }
}

// ---- index maps ------------------------------------------------------------------------

#[test]
fn index_map_roundtrips() {
    for text in [
        "(i, j) => (i // 4, j // 4, i % 4, j % 4)",
        "(io, jo, ii, ji) => (io * 4 + ii, jo * 4 + ji)",
        "(i, j) => (i, j)",
        "(x) => ((x + 1) * 2, min(x, 3))",
    ] {
        assert_eq!(IndexMap::parse(text).unwrap().print(), text);
    }
}

#[test]
fn index_map_applies_and_rejects_bad_text() {
    let m = IndexMap::parse("(i, j) => (i // 4, j % 4)").unwrap();
    let out = m.apply(vec![sparsec_ir::Expr::i32(9), sparsec_ir::Expr::i32(7)]);
    let f = Func::new("x");
    let printed: Vec<String> = out.iter().map(|e| sparsec_ir::text::print_expr(&f, e)).collect();
    assert_eq!(printed, ["9 // 4", "7 % 4"]);
    for bad in ["i, j => i", "(i) => (q)", "(i) => ()", "(i) => (1.0)"] {
        assert!(matches!(IndexMap::parse(bad), Err(DecomposeError::InvalidMap { .. })), "{bad}");
    }
}

// ---- errors ----------------------------------------------------------------------------

fn err(rule: FormatRewriteRule) -> DecomposeError {
    decompose_format(&csrmm(), &[rule]).unwrap_err()
}

#[test]
fn unknown_buffer() {
    let mut r = bsr_rule(4).unwrap();
    r.buffers = vec!["Z".into()];
    assert!(matches!(err(r), DecomposeError::UnknownBuffer { name, .. } if name == "Z"));
}

#[test]
fn unknown_axis() {
    let mut r = bsr_rule(4).unwrap();
    r.axes_before[1] = "Q".into();
    assert!(matches!(err(r), DecomposeError::UnknownAxis { name, .. } if name == "Q"));
    let mut r = bsr_rule(4).unwrap();
    r.axes_after[3] = "QI".into();
    assert!(matches!(err(r), DecomposeError::UnknownAxis { name, .. } if name == "QI"));
}

#[test]
fn axes_not_contiguous() {
    let f = parse_func("csrmm", &CSRMM.replace("[I, J, K], \"SRS\"", "[I, K, J], \"SSR\"")).unwrap();
    let e = decompose_format(&f, &[bsr_rule(4).unwrap()]).unwrap_err();
    assert!(matches!(e, DecomposeError::NotContiguous { .. }), "{e}");
}

#[test]
fn arity_mismatch() {
    let mut r = bsr_rule(4).unwrap();
    r.inv_idx_map = IndexMap::parse("(io, jo, ii, ji) => (io * 4 + ii)").unwrap();
    assert!(matches!(err(r), DecomposeError::ArityMismatch { map: "inv_idx_map", expected: 2, found: 1, .. }));
    let mut r = bsr_rule(4).unwrap();
    r.idx_map = Some(IndexMap::parse("(i) => (i, i, i, i)").unwrap());
    assert!(matches!(err(r), DecomposeError::ArityMismatch { map: "idx_map", .. }));
}

#[test]
fn invalid_format() {
    let mut r = bsr_rule(4).unwrap();
    // Parses, but a format function holds declarations only.
    let src = "func bad(a: handle, m: i32) {\n  axis IO = dense_fixed(m)\n  buffer A = match_sparse_buffer(a, [IO], f32)\n  sp_iter s([IO], \"S\") as [i] {\n    A[i] = 0.0\n  }\n}\n";
    r.format = parse_func("bad", src).unwrap();
    assert!(matches!(err(r), DecomposeError::InvalidFormat { .. }));
    let mut r = bsr_rule(4).unwrap();
    r.format.buffers = Default::default();
    assert!(matches!(err(r), DecomposeError::InvalidFormat { .. }));
}

#[test]
fn buffer_axes_mismatch() {
    let mut r = bsr_rule(4).unwrap();
    r.buffers = vec!["B".into()];
    assert!(matches!(err(r), DecomposeError::BufferAxes { .. }));
}

#[test]
fn output_does_not_verify() {
    // JO and II swapped between the old axes: C is then stored under reduction iterator ii.
    let mut r = bsr_rule(4).unwrap();
    r.axis_map = vec![("I".into(), vec!["IO".into(), "JO".into()]), ("J".into(), vec!["II".into(), "JI".into()])];
    assert!(matches!(err(r), DecomposeError::InvalidOutput(_)));
}

#[test]
fn name_clash_and_unsupported_and_wrong_stage() {
    let e = decompose_format(&csrmm(), &[bsr_rule(4).unwrap(), bsr_rule(4).unwrap()]).unwrap_err();
    assert!(matches!(e, DecomposeError::NameClash { .. }), "{e}");
    let f = parse_func("csrmm", &CSRMM.replace("C[i, k] = C[i, k] + A[i, j] * B[j, k]", "A[i, j] = A[i, j] * B[j, k]")).unwrap();
    let e = decompose_format(&f, &[bsr_rule(4).unwrap()]).unwrap_err();
    assert!(matches!(e, DecomposeError::Unsupported { .. }), "{e}");
    let low = PassManager::lowering_to(Stage::II).run(&csrmm()).unwrap();
    assert!(matches!(decompose_format(&low, &[]), Err(DecomposeError::WrongStage(Stage::II))));
}
