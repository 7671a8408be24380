//! `ir::names`: the one rule for new names.

use sparsec_ir::names::{block_names, closest, fresh_in, fresh_name, function_names};
use std::collections::HashSet;

#[test]
fn fresh_names_skip_taken_ones_in_order() {
    let mut taken: HashSet<String> = ["i", "i_1", "j_1"].iter().map(|s| s.to_string()).collect();
    assert_eq!(fresh_name("k", |n| taken.contains(n)), "k");
    assert_eq!(fresh_in(&mut taken, "i"), "i_2");
    assert_eq!(fresh_in(&mut taken, "i"), "i_3");
    assert_eq!(fresh_in(&mut taken, "j"), "j");
    assert_eq!(fresh_in(&mut taken, "j"), "j_2");
    assert!(taken.contains("i_3") && taken.contains("j_2"));
}

#[test]
fn function_and_block_names_are_collected() {
    let text = include_str!("../../tests/workloads/csrmm.sptir");
    let f = sparsec_ir::text::parse_func("csrmm", text).unwrap();
    let names = function_names(&f);
    for n in ["I", "J", "J_detach", "K", "A", "B", "C", "indptr", "indices", "m", "nnz"] {
        assert!(names.contains(n), "{n}: {names:?}");
    }
    assert!(block_names(&f).is_empty(), "Stage I has no blocks");
}

#[test]
fn closest_names_suggest_likely_typos_only() {
    let known = ["b", "B", "feat_size", "indptr", "indices"];
    assert_eq!(closest("BB", known), Some("B"));
    assert_eq!(closest("bb", known), Some("b"));
    assert_eq!(closest("c", ["C", "indptr"]), Some("C"));
    assert_eq!(closest("feat_sise", known), Some("feat_size"));
    assert_eq!(closest("indics", known), Some("indices"));
    assert_eq!(closest("weights", known), None);
    assert_eq!(closest("x", []), None);
}
