//! `decompose_format` with the remaining composable formats of csrmm: GroupCOO and
//! BlockGroupCOO (Insum), SR-BCRS (`condense`) and 2:4. Golden text, and the decomposed
//! program (preprocess + compute, also lowered to Stage III) computes what csrmm computes on
//! generated matrices and the small shared ones. The runtime side (binding the structure that
//! `sparsec_formats::compose` builds) is here; padding slots get a column past the matrix,
//! which the decomposed program guards away.

mod common;

use common::*;
use sparsec_formats::compose::{condense, prune_to_nm, BlockGroupCoo, GroupCoo, NmMatrix};
use sparsec_formats::scalar::Index;
use sparsec_interp::run;
use sparsec_ir::data::{Args, Array};
use sparsec_ir::text::print_func;
use sparsec_ir::Stage;
use sparsec_passes::{
    block_group_coo_rule, decompose_format, group_coo_rule, nm_2_4_rule, sr_bcrs_rule, FormatRewriteRule, PassManager,
};

/// Columns of `slots`-wide groups, with slots past each group's count moved to `past`.
fn padded_cols(cols: &[i64], counts: &[i64], slots: usize, past: i64) -> Vec<i32> {
    let mut out: Vec<i32> = cols.iter().map(|&c| c as i32).collect();
    for (q, &c) in counts.iter().enumerate() {
        for slot in &mut out[q * slots + c as usize..(q + 1) * slots] {
            *slot = past as i32;
        }
    }
    out
}

/// The format's arguments, named with the rule's suffix.
fn suffixed(args: &mut Args, rule: &str, arrays: Vec<(&str, Array)>, scalars: Vec<(&str, i64)>) {
    for (n, a) in arrays {
        args.array(format!("{n}_{rule}"), a);
    }
    for (n, v) in scalars {
        args.int(format!("{n}_{rule}"), v);
    }
}

/// Builds the rule and binds its structure for matrix `m`.
fn rule_and_args(kind: &str, m: &FCsr, args: &mut Args) -> FormatRewriteRule {
    let n = m.cols() as i64;
    match kind {
        "group_coo" => {
            let g = GroupCoo::from_csr(m).unwrap();
            let gs = g.group_size();
            let rule = group_coo_rule(gs as i64).unwrap();
            let groups = g.group_rows().len();
            let cols = padded_cols(g.col_indices(), g.group_counts(), gs, n);
            suffixed(
                args,
                &rule.name,
                vec![
                    ("a", Array::F32(vec![0.0; groups * gs])),
                    ("group_rows", i32s(g.group_rows())),
                    ("indices", Array::I32(cols)),
                ],
                vec![("groups", groups as i64), ("n", (n + 1).max(gs as i64))],
            );
            rule
        }
        "block_group_coo" => {
            let b = 4usize;
            let g = BlockGroupCoo::from_csr(m, b).unwrap();
            let gs = g.group_size();
            let rule = block_group_coo_rule(b as i64, gs as i64).unwrap();
            let groups = g.group_block_rows().len();
            let nbc = m.cols().div_ceil(b) as i64;
            let cols = padded_cols(g.block_cols(), g.group_counts(), gs, nbc);
            suffixed(
                args,
                &rule.name,
                vec![
                    ("a", Array::F32(vec![0.0; groups * gs * b * b])),
                    ("group_rows", i32s(g.group_block_rows())),
                    ("block_cols", Array::I32(cols)),
                ],
                vec![("groups", groups as i64), ("nbc", (nbc + 1).max(gs as i64))],
            );
            rule
        }
        "sr_bcrs" => {
            let (t, gw) = (4usize, 8usize);
            let s = condense(m, t, gw).unwrap();
            let rule = sr_bcrs_rule(t as i64, gw as i64).unwrap();
            let tiles = s.tile_ptr().len() - 1;
            let groups = s.tile_ptr()[tiles].to_usize().unwrap();
            let max_groups = (0..tiles).map(|k| s.tile_ptr()[k + 1] - s.tile_ptr()[k]).max().unwrap_or(0);
            let cols = padded_cols(s.col_indices(), s.group_counts(), gw, n);
            suffixed(
                args,
                &rule.name,
                vec![
                    ("a", Array::F32(vec![0.0; groups * t * gw])),
                    ("tile_ptr", i32s(s.tile_ptr())),
                    ("col_indices", Array::I32(cols)),
                ],
                vec![("tiles", tiles as i64), ("groups", groups as i64), ("max_groups", max_groups.max(1))],
            );
            rule
        }
        "nm_2_4" => {
            let nm = NmMatrix::from_csr_2_4(m).unwrap();
            let rule = nm_2_4_rule().unwrap();
            let (rows, groups) = (m.rows(), nm.groups_per_row());
            let meta: Vec<i32> = (0..rows)
                .flat_map(|i| {
                    let nm = &nm;
                    (0..groups).map(move |j| {
                        (nm.position(i, j, 0).unwrap() | (nm.position(i, j, 1).unwrap() << 2)) as i32
                    })
                })
                .collect();
            suffixed(
                args,
                &rule.name,
                vec![("a", Array::F32(vec![0.0; rows * groups * 2])), ("meta", Array::I32(meta))],
                vec![("rows", rows as i64), ("groups", groups as i64)],
            );
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
    for kind in ["group_coo", "block_group_coo", "sr_bcrs", "nm_2_4"] {
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
    ];
    for rule in rules {
        let name = rule.name.clone();
        let g = decompose_format(&csrmm(), &[rule]).unwrap();
        insta::assert_snapshot!(format!("csrmm_{name}"), print_func(&g));
    }
}
