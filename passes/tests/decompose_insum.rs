//! `decompose_format` with the remaining composable formats of csrmm: GroupCOO and
//! BlockGroupCOO (Insum), SR-BCRS (`condense`), 2:4 and rows in reverse Cuthill–McKee order
//! (`rcm`, whose one piece keeps csrmm's init). Golden text, and the decomposed
//! program (preprocess + compute, also lowered to Stage III) computes what csrmm computes on
//! generated matrices and the small shared ones. The runtime side binds the structure that
//! `sparsec_formats::compose` builds (`formats::bind_*`); padding slots get a column past the
//! matrix, which the decomposed program guards away.

mod common;

use common::*;
use sparsec_formats::compose::{condense, prune_to_nm, BlockGroupCoo, GroupCoo, NmMatrix, ReorderedRows};
use sparsec_interp::run;
use sparsec_ir::data::Args;
use sparsec_ir::text::print_func;
use sparsec_ir::Stage;
use sparsec_passes::{
    block_group_coo_rule, decompose_format, group_coo_rule, nm_2_4_rule, rcm_rule, sr_bcrs_rule, FormatRewriteRule,
    PassManager,
};

/// Builds the rule and binds its structure for matrix `m` (`formats::bind_*`, the run-time
/// half that `sparsec run` uses too).
fn rule_and_args(kind: &str, m: &FCsr, args: &mut Args) -> FormatRewriteRule {
    use sparsec_formats::{bind_block_group_coo, bind_group_coo, bind_nm_2_4, bind_rcm, bind_sr_bcrs};
    match kind {
        "group_coo" => {
            let g = GroupCoo::from_csr(m).unwrap();
            let rule = group_coo_rule(g.group_size() as i64).unwrap();
            bind_group_coo(args, &rule.name, &g).unwrap();
            rule
        }
        "block_group_coo" => {
            let g = BlockGroupCoo::from_csr(m, 4).unwrap();
            let rule = block_group_coo_rule(4, g.group_size() as i64).unwrap();
            bind_block_group_coo(args, &rule.name, &g).unwrap();
            rule
        }
        "sr_bcrs" => {
            let s = condense(m, 4, 8).unwrap();
            let rule = sr_bcrs_rule(4, 8).unwrap();
            bind_sr_bcrs(args, &rule.name, &s).unwrap();
            rule
        }
        "nm_2_4" => {
            let nm = NmMatrix::from_csr_2_4(m).unwrap();
            let rule = nm_2_4_rule().unwrap();
            bind_nm_2_4(args, &rule.name, &nm).unwrap();
            rule
        }
        "rcm" => {
            let r = ReorderedRows::rcm(m).unwrap();
            let rule = rcm_rule().unwrap();
            bind_rcm(args, &rule.name, &r).unwrap();
            rule
        }
        other => panic!("unknown format {other}"),
    }
}

/// csrmm and its decomposition give the same C (2:4 runs on the matrix pruned to 2:4).
fn differential(kind: &str, m: &FCsr, lowered: bool) {
    let m = if kind == "nm_2_4" { prune_to_nm(m, 2, 4).unwrap() } else { m.clone() };
    let f = csrmm();
    let args = csrmm_args(&m);
    let want = run(&f, &args).unwrap();
    let mut gargs = args.clone();
    let rule = rule_and_args(kind, &m, &mut gargs);
    let g = decompose_format(&f, &[rule]).unwrap();
    let what = format!("{kind} on {}x{} ({} nnz)", m.rows(), m.cols(), m.nnz());
    let got = run(&g, &gargs).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_close(&got.arrays["c"], &want.arrays["c"], &what);
    if lowered {
        let low = PassManager::lowering_to(Stage::III).run(&g).unwrap();
        let got3 = run(&low, &gargs).unwrap_or_else(|e| panic!("{what} (Stage III): {e}"));
        assert_close(&got3.arrays["c"], &want.arrays["c"], &format!("{what} (Stage III)"));
    }
}

fn matrices() -> Vec<(String, FCsr)> {
    use sparsec_formats::gen;
    let mut v: Vec<(String, FCsr)> = vec![
        ("uniform".into(), gen::uniform(37, 29, 150, 1).unwrap()),
        ("empty-rows".into(), gen::with_empty_rows(41, 53, 2).unwrap()),
        ("power-law".into(), gen::rmat(6, 400, [0.57, 0.19, 0.19, 0.05], 3).unwrap()),
        ("1x1".into(), gen::one_by_one(1.5)),
    ];
    for name in ["cora", "dwt_992", "citeseer"] {
        if let Some(m) = shared(name) {
            v.push((name.into(), m));
        }
    }
    v
}

#[test]
fn every_format_computes_csrmm() {
    for kind in ["group_coo", "block_group_coo", "sr_bcrs", "nm_2_4", "rcm"] {
        for (k, (_, m)) in matrices().iter().enumerate() {
            // SR-BCRS and 2:4 store dense tiles: keep the interpreter's work small.
            let dense_work = m.rows() * m.cols();
            if (kind == "sr_bcrs" && dense_work > 8_000_000) || (kind == "nm_2_4" && dense_work > 50_000) {
                continue;
            }
            differential(kind, m, k == 0 || k == 4);
        }
    }
}

#[test]
fn golden_decompositions() {
    let rules = [
        group_coo_rule(4).unwrap(),
        block_group_coo_rule(4, 2).unwrap(),
        sr_bcrs_rule(4, 8).unwrap(),
        nm_2_4_rule().unwrap(),
        rcm_rule().unwrap(),
    ];
    for rule in rules {
        let name = rule.name.clone();
        let g = decompose_format(&csrmm(), &[rule]).unwrap();
        insta::assert_snapshot!(format!("csrmm_{name}"), print_func(&g));
    }
}

/// A piece keeps the program's init only where it visits every spatial point once: `rcm`
/// (a permutation of the rows) does, so there is no separate zeroing pass over C; GroupCOO
/// (a row in several groups) and BSR (a row split over block rows) do not.
#[test]
fn only_a_piece_that_visits_each_row_once_keeps_the_init() {
    let g = decompose_format(&csrmm(), &[rcm_rule().unwrap()]).unwrap();
    let text = print_func(&g);
    assert!(!text.contains("csrmm_init("), "{text}");
    assert!(text.contains("init {") && !text.contains("if "), "{text}");
    for rule in [group_coo_rule(4).unwrap(), sparsec_passes::bsr_rule(4).unwrap()] {
        let text = print_func(&decompose_format(&csrmm(), &[rule]).unwrap());
        assert!(text.contains("csrmm_init("), "{text}");
    }
}
