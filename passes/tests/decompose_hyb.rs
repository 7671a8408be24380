//! `decompose_format` with SparseTIR's composable formats: csrmm → hyb (one ELL-like rule per
//! column part and bucket, inverse map reading the format's `RowIndices`) and
//! rgcn_hetero_forward → ELL3D. Golden snapshots, differential runs against the original
//! program (Stage I and lowered to Stage III) and the new error paths.
//!
//! The runtime side is `formats::bind_hyb`, which turns a `compose::Hyb` into the arguments of
//! the decomposed program (padding slots get column `n`, the format's `n` is `n + 1`).

mod common;

use common::*;
use sparsec_formats::compose::Hyb;
use sparsec_interp::run;
use sparsec_ir::data::{Args, Array};
use sparsec_ir::text::{parse_func, print_func};
use sparsec_ir::{Func, Stage};
use sparsec_passes::decompose::{
    decompose_format, ell3d_rule, extract_preprocess, hyb_rules, remove_preprocess, DecomposeError, IndexMap,
};
use sparsec_passes::PassManager;


const RGCN: &str = include_str!("../../tests/workloads/rgcn_hetero_forward.sptir");




fn rgcn() -> Func {
    parse_func("rgcn_hetero_forward", RGCN).unwrap()
}





/// Generated matrices: uniform, empty rows, power-law (rows far longer than 8), a full row,
/// 1×1, and no entries at all.
fn generated() -> Vec<FCsr> {
    use sparsec_formats::gen;
    vec![
        gen::uniform(37, 29, 150, 1).unwrap(),
        gen::with_empty_rows(41, 53, 2).unwrap(),
        gen::rmat(7, 1500, [0.57, 0.19, 0.19, 0.05], 3).unwrap(),
        gen::single_full_row(9, 40, 4, 6).unwrap(),
        gen::one_by_one(1.5),
        gen::uniform(18, 35, 0, 5).unwrap(),
    ]
}

// ---- csrmm → hyb -------------------------------------------------------------------------



/// csrmm and its hyb decomposition (Stage I, split into preprocess + compute, and
/// optionally Stage III) give the same C; the preprocess stores exactly hyb's values.
fn hyb_differential(m: &FCsr, parts: usize, bucket_log: u32, lowered: bool) {
    let f = csrmm();
    let args = csrmm_args(m);
    let want = run(&f, &args).unwrap();
    let hyb = Hyb::from_csr(m, parts, bucket_log).unwrap();
    let widths: Vec<i64> = hyb.bucket_widths().iter().map(|&w| w as i64).collect();
    let g = decompose_format(&f, &hyb_rules(parts, &widths).unwrap()).unwrap();
    let mut gargs = args.clone();
    sparsec_formats::bind_hyb(&mut gargs, &hyb).unwrap();
    let what = format!("hyb({parts}, {bucket_log}) on {}x{}", m.rows(), m.cols());
    let got = run(&g, &gargs).unwrap();
    assert_close(&got.arrays["c"], &want.arrays["c"], &what);
    let pre = run(&extract_preprocess(&g), &gargs).unwrap();
    for (p, part) in hyb.parts().iter().enumerate() {
        for (b, bucket) in part.iter().enumerate() {
            let vals = Array::F64(bucket.values().to_vec());
            assert_close(&pre.arrays[&format!("a_hyb_{p}_{b}")], &vals, &format!("{what}: values of bucket {p}/{b}"));
        }
    }
    let post = run(&remove_preprocess(&g), &pre).unwrap();
    assert_close(&post.arrays["c"], &want.arrays["c"], &format!("{what} (split)"));
    if lowered {
        let low = PassManager::lowering_to(Stage::III).run(&g).unwrap();
        let got3 = run(&low, &gargs).unwrap();
        assert_close(&got3.arrays["c"], &want.arrays["c"], &format!("{what} (Stage III)"));
    }
}

#[test]
fn golden_hyb() {
    let g = decompose_format(&csrmm(), &hyb_rules(1, &[1, 2, 4, 8]).unwrap()).unwrap();
    PassManager::lowering_to(Stage::III).run(&g).unwrap();
    let text = print_func(&g);
    assert_eq!(print_func(&parse_func("g", &text).unwrap()), text);
    insta::assert_snapshot!("csrmm_hyb_1_3", text);
}

#[test]
fn hyb_matches_csrmm_on_generated_matrices() {
    for (k, m) in generated().iter().enumerate() {
        hyb_differential(m, 1, 3, k < 4);
        hyb_differential(m, 2, 2, k == 2);
        hyb_differential(m, 3, 0, false);
    }
}

#[test]
fn hyb_matches_csrmm_on_shared_matrices() {
    for (name, _) in sparsec_formats::shared_matrices() {
        let Some(m) = shared(&name) else { continue };
        hyb_differential(&m, 1, 3, name == "cora");
        if name == "cora" {
            hyb_differential(&m, 2, 4, false);
        }
    }
}

// ---- rgcn_hetero_forward → ELL3D ---------------------------------------------------------

/// A heterogeneous graph: relation `r` holds the entries of `m` with `(i + 2j) % rels == r`;
/// each relation lists the rows it has entries in (its `I`), and with `keep_empty` also
/// every third empty row.
struct Hetero {
    rows: usize,
    cols: usize,
    rels: usize,
    indptr_i: Vec<usize>,
    indices_i: Vec<usize>,
    indptr_j: Vec<usize>,
    indices_j: Vec<usize>,
    vals: Vec<f32>,
}

impl Hetero {
    fn new(m: &FCsr, rels: usize, keep_empty: bool) -> Hetero {
        let mut h = Hetero {
            rows: m.rows(),
            cols: m.cols(),
            rels,
            indptr_i: vec![0],
            indices_i: vec![],
            indptr_j: vec![0],
            indices_j: vec![],
            vals: vec![],
        };
        for r in 0..rels {
            for i in 0..m.rows() {
                let (s, e) = (m.indptr()[i] as usize, m.indptr()[i + 1] as usize);
                let row: Vec<usize> = (s..e).filter(|&p| (i + 2 * m.indices()[p] as usize) % rels == r).collect();
                if row.is_empty() && !(keep_empty && i % 3 == r % 3) {
                    continue;
                }
                h.indices_i.push(i);
                h.indices_j.extend(row.iter().map(|&p| m.indices()[p] as usize));
                h.vals.extend(row.iter().map(|&p| m.values()[p] as f32));
                h.indptr_j.push(h.indices_j.len());
            }
            h.indptr_i.push(h.indices_i.len());
        }
        h
    }

    fn max_row(&self) -> usize {
        self.indptr_j.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0)
    }

    fn args(&self) -> Args {
        let mut r = Rng::new(7);
        let mut a = Args::new();
        let w: Vec<f32> = (0..self.rels * FEAT * FEAT).map(|_| r.val()).collect();
        let x: Vec<f32> = (0..self.cols * FEAT).map(|_| r.val()).collect();
        a.array("a", Array::F32(self.vals.clone()))
            .array("w", Array::F32(w))
            .array("x", Array::F32(x))
            .array("y", Array::F32(vec![7.0; self.rows * FEAT]))
            .array("indptr_i", i32s(&self.indptr_i))
            .array("indices_i", i32s(&self.indices_i))
            .array("indptr_j", i32s(&self.indptr_j))
            .array("indices_j", i32s(&self.indices_j));
        a.int("m", self.rows as i64)
            .int("n", self.cols as i64)
            .int("num_rels", self.rels as i64)
            .int("feat_size", FEAT as i64)
            .int("nnz_i", self.indices_i.len() as i64)
            .int("nnz_j", self.indices_j.len() as i64);
        a
    }

    /// The ELL3D(k) arguments: each (relation, row) padded to `k` slots with column `n`.
    fn bind_ell3d(&self, args: &mut Args, k: usize) {
        let mut idx = Vec::new();
        for w in self.indptr_j.windows(2) {
            assert!(w[1] - w[0] <= k);
            idx.extend_from_slice(&self.indices_j[w[0]..w[1]]);
            idx.extend(std::iter::repeat_n(self.cols, k - (w[1] - w[0])));
        }
        let s = format!("ell3d_{k}");
        args.array(format!("a_{s}"), Array::F32(vec![0.0; self.indices_i.len() * k]))
            .array(format!("indptr_i_{s}"), i32s(&self.indptr_i))
            .array(format!("indices_i_{s}"), i32s(&self.indices_i))
            .array(format!("indices_j_{s}"), i32s(&idx));
        args.int(format!("num_rels_{s}"), self.rels as i64)
            .int(format!("m_{s}"), self.rows as i64)
            .int(format!("n_{s}"), (self.cols + 1).max(k) as i64)
            .int(format!("nnz_i_{s}"), self.indices_i.len() as i64);
    }
}

fn ell3d_differential(h: &Hetero, k: usize, lowered: bool) {
    let f = rgcn();
    let args = h.args();
    let want = run(&f, &args).unwrap();
    let g = decompose_format(&f, &[ell3d_rule(k as i64).unwrap()]).unwrap();
    let mut gargs = args.clone();
    h.bind_ell3d(&mut gargs, k);
    let what = format!("ell3d({k}) on {} rels {}x{}", h.rels, h.rows, h.cols);
    let got = run(&g, &gargs).unwrap();
    assert_close(&got.arrays["y"], &want.arrays["y"], &what);
    let pre = run(&extract_preprocess(&g), &gargs).unwrap();
    let post = run(&remove_preprocess(&g), &pre).unwrap();
    assert_close(&post.arrays["y"], &want.arrays["y"], &format!("{what} (split)"));
    if lowered {
        let low = PassManager::lowering_to(Stage::III).run(&g).unwrap();
        let got3 = run(&low, &gargs).unwrap();
        assert_close(&got3.arrays["y"], &want.arrays["y"], &format!("{what} (Stage III)"));
    }
}

#[test]
fn golden_ell3d() {
    let g = decompose_format(&rgcn(), &[ell3d_rule(4).unwrap()]).unwrap();
    PassManager::lowering_to(Stage::III).run(&g).unwrap();
    let text = print_func(&g);
    assert_eq!(print_func(&parse_func("g", &text).unwrap()), text);
    insta::assert_snapshot!("rgcn_ell3d_4", text);
}

#[test]
fn ell3d_matches_rgcn_on_generated_graphs() {
    for (c, m) in generated().iter().enumerate() {
        for (rels, keep_empty) in [(3, true), (1, false), (2, false)] {
            let h = Hetero::new(m, rels, keep_empty);
            let k = h.max_row().max(1);
            ell3d_differential(&h, k, c < 3 && rels == 3);
            ell3d_differential(&h, k + 2, false);
        }
    }
}

#[test]
fn ell3d_matches_rgcn_on_shared_matrices() {
    // Every shared matrix whose padded ELL3D stays small enough for the interpreter.
    for (name, _) in sparsec_formats::shared_matrices() {
        let Some(m) = shared(&name) else { continue };
        let h = Hetero::new(&m, 3, true);
        if h.rows * h.max_row() > 2_000_000 {
            continue;
        }
        ell3d_differential(&h, h.max_row(), name == "cora");
    }
}

// ---- index maps over format buffers and errors -------------------------------------------

#[test]
fn scoped_index_map_roundtrips() {
    let rule = &hyb_rules(1, &[4]).unwrap()[0];
    let text = "(io, jo) => (RowIndices[io], jo)";
    assert_eq!(rule.inv_idx_map.print(), text);
    for t in [text, "(io, jo) => (RowIndices[io] * 2 + n, min(jo, rows))"] {
        assert_eq!(IndexMap::parse_in(t, &rule.format).unwrap().print(), t);
    }
    // Without the scope the buffer is unknown.
    assert!(matches!(IndexMap::parse(text), Err(DecomposeError::InvalidMap { .. })));
    // The scope's names cannot be reused as parameters.
    assert!(matches!(IndexMap::parse_in("(n, jo) => (n, jo)", &rule.format), Err(DecomposeError::InvalidMap { .. })));
}

#[test]
fn hyb_rules_reject_bad_parameters() {
    assert!(matches!(hyb_rules(0, &[1, 2]), Err(DecomposeError::InvalidFormat { .. })));
    assert!(matches!(hyb_rules(1, &[]), Err(DecomposeError::InvalidFormat { .. })));
    assert!(matches!(hyb_rules(1, &[2, 0]), Err(DecomposeError::InvalidFormat { .. })));
    assert_eq!(hyb_rules(2, &[1, 2, 4]).unwrap().iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), [
        "hyb_0_0", "hyb_0_1", "hyb_0_2", "hyb_1_0", "hyb_1_1", "hyb_1_2"
    ]);
}

#[test]
fn map_reading_a_buffer_the_format_lacks() {
    // A map parsed in another format's scope names a buffer this format does not declare.
    let mut rule = hyb_rules(1, &[4]).unwrap().remove(0);
    let other = parse_func(
        "other",
        "func other(a: handle, r: handle, rows: i32, q: i32) {\n  axis IO = dense_fixed(rows)\n  buffer Rows2 = match_sparse_buffer(r, [IO], i32)\n}\n",
    )
    .unwrap();
    rule.inv_idx_map = IndexMap::parse_in("(io, jo) => (Rows2[io], jo)", &other).unwrap();
    let e = decompose_format(&csrmm(), &[rule]).unwrap_err();
    assert!(matches!(&e, DecomposeError::InvalidMap { message, .. } if message.contains("Rows2")), "{e}");
    // Nor a scalar it does not take.
    let mut rule = hyb_rules(1, &[4]).unwrap().remove(0);
    rule.inv_idx_map = IndexMap::parse_in("(io, jo) => (io, jo + q)", &other).unwrap();
    let e = decompose_format(&csrmm(), &[rule]).unwrap_err();
    assert!(matches!(e, DecomposeError::InvalidMap { .. }), "{e}");
}

#[test]
fn hyb_without_idx_map_rejects_other_coordinates() {
    // A[j, i]-style access: the rule has no idx_map to rewrite it with.
    let src = CSRMM.replace("C[i, k] + A[i, j] * B[j, k]", "C[i, k] + A[i, j] * A[i, min(j, 0)] * B[j, k]");
    let f = parse_func("csrmm", &src).unwrap();
    let e = decompose_format(&f, &hyb_rules(1, &[2]).unwrap()).unwrap_err();
    assert!(matches!(&e, DecomposeError::Unsupported { what, .. } if what.contains("idx_map")), "{e}");
}
