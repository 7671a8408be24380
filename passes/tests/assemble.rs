//! The symbolic phase of a sparse output (`passes::assemble`): the count function of sparse
//! add and multiply (golden), and its counts, summed, against the pattern as
//! `ir::args::assemble` defines it, on random pairs of matrices (empty rows, one side empty,
//! identical patterns); then the numeric phase lowered to Stage III fills exactly that pattern.

mod common;

use common::{i32s, FCsr};
use sparsec_interp::run;
use sparsec_ir::data::{Args, Array};
use sparsec_ir::text::{parse_func, print_func};
use sparsec_ir::Func;
use sparsec_passes::{count_function, PassManager};

const ADD: &str = include_str!("../../examples/formats/sparse_add.sptir");
const MUL: &str = include_str!("../../examples/formats/sparse_mul.sptir");

fn program(text: &str) -> Func {
    parse_func("t.sptir", text).unwrap()
}

#[test]
fn count_function_of_sparse_add() {
    let g = count_function(&program(ADD)).unwrap().expect("sparse_add assembles JC");
    insta::assert_snapshot!(print_func(&g));
}

#[test]
fn functions_without_assembled_axes_have_no_symbolic_phase() {
    assert!(count_function(&common::csrmm()).unwrap().is_none());
}

fn pairs() -> Vec<(String, FCsr, FCsr)> {
    use sparsec_formats::gen;
    let mut out = Vec::new();
    for (k, (m, n, na, nb)) in [(1, 1, 1, 0), (7, 9, 20, 11), (30, 5, 60, 60), (50, 200, 400, 900)].into_iter().enumerate() {
        let a: FCsr = gen::uniform(m, n, na, 11 + k as u64).unwrap();
        let b: FCsr = gen::uniform(m, n, nb, 77 + k as u64).unwrap();
        out.push((format!("uniform {m}x{n}"), a.clone(), b));
        out.push((format!("itself {m}x{n}"), a.clone(), a));
    }
    let e: FCsr = gen::with_empty_rows(40, 30, 5).unwrap();
    let f: FCsr = gen::with_empty_rows(40, 30, 6).unwrap();
    out.push(("empty rows".into(), e, f));
    out
}

fn args(a: &FCsr, b: &FCsr) -> Args {
    let vals = |m: &FCsr| Array::F32(m.values().iter().map(|&v| v as f32).collect());
    let mut x = Args::new();
    x.array("a", vals(a)).array("b", vals(b));
    x.array("a_indptr", i32s(a.indptr())).array("a_indices", i32s(a.indices()));
    x.array("b_indptr", i32s(b.indptr())).array("b_indices", i32s(b.indices()));
    x.int("m", a.rows() as i64).int("n", a.cols() as i64).int("nnz_a", a.nnz() as i64).int("nnz_b", b.nnz() as i64);
    x
}

fn ints(a: &Array) -> Vec<i64> {
    (0..a.len()).filter_map(|k| a.get_i64(k)).collect()
}

#[test]
fn counts_sum_to_the_pattern_and_the_numeric_phase_fills_it() {
    for text in [ADD, MUL] {
        let f = program(text);
        let jc = f.axis_by_name("JC").unwrap();
        let count = count_function(&f).unwrap().unwrap();
        let stages = PassManager::lowering_to(sparsec_ir::Stage::III).run_all(&count).unwrap();
        let numeric = PassManager::lowering_to(sparsec_ir::Stage::III).run_all(&f).unwrap();
        for (label, a, b) in pairs() {
            let x = args(&a, &b);
            let (ptr, coords) = sparsec_ir::args::assemble(&f, jc, &x).unwrap();
            for g in std::iter::once(&count).chain(&stages) {
                let mut y = x.clone();
                y.array("c_indptr", Array::I32(vec![-5; a.rows() + 1]));
                let out = run(g, &y).unwrap();
                let mut got = ints(&out.arrays["c_indptr"]);
                got[0] = 0;
                for r in 0..a.rows() {
                    got[r + 1] += got[r];
                }
                assert_eq!(got, ptr, "{} on {label}: counts at Stage {}", f.name, g.stage);
            }
            // Lowered, the numeric phase writes every coordinate over zeros.
            let mut y = x.clone();
            y.array("c_indptr", Array::I32(ptr.iter().map(|&p| p as i32).collect()));
            y.array("c_indices", Array::I32(vec![0; coords.len()]));
            y.array("c", Array::F32(vec![0.0; coords.len()]));
            y.int("nnz_c", coords.len() as i64);
            let out = run(numeric.last().unwrap(), &y).unwrap();
            assert_eq!(ints(&out.arrays["c_indices"]), coords, "{} on {label}: coordinates", f.name);
        }
    }
}

const SPGEMM: &str = include_str!("../../examples/formats/spgemm.sptir");

#[test]
fn symbolic_phases_of_spgemm() {
    let phases = sparsec_passes::assemble::symbolic_phases(&program(SPGEMM)).unwrap();
    assert_eq!(phases.iter().map(|p| p.counts).collect::<Vec<_>>(), [true, false]);
    insta::assert_snapshot!(phases.iter().map(|p| print_func(&p.func)).collect::<Vec<_>>().join("\n"));
}
