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
    let phases = sparsec_passes::assemble::symbolic_phases(&program(SPGEMM), sparsec_passes::assemble::Units::Parallel).unwrap();
    assert_eq!(phases.iter().map(|p| p.counts).collect::<Vec<_>>(), [true, false]);
    insta::assert_snapshot!(phases.iter().map(|p| print_func(&p.func)).collect::<Vec<_>>().join("\n"));
}

/// Rows of SpGEMM's pattern of every length come out of the symbolic phase sorted and
/// duplicate-free, merged from zero to thousands of B's rows: B's row `j` holds columns
/// `perm[j]` and `perm[j + 1]`, so each row of C is written in a scrambled order with repeats.
/// Both layouts: one chunk, and the GPU's hundreds of chunks of a row or none (bound loops
/// run in order here).
#[test]
fn spgemm_symbolic_phase_sorts_rows_of_every_length() {
    use sparsec_passes::assemble::Units;
    for units in [Units::Parallel, Units::Gpu { threads: 64 }] {
        sorts_rows_of_every_length(units);
    }
}

fn sorts_rows_of_every_length(units: sparsec_passes::assemble::Units) {
    use sparsec_passes::assemble::Units;
    let f = program(SPGEMM);
    let kc = f.axis_by_name("KC").unwrap();
    let phases = sparsec_passes::assemble::symbolic_phases(&f, units).unwrap();
    let text = print_func(&phases[0].func);
    let bound = text.contains("blockIdx.x(") && text.contains("threadIdx.x(");
    assert_eq!(bound, units != Units::Parallel, "{text}");
    let lens = [0usize, 1, 2, 3, 4, 5, 7, 8, 9, 31, 33, 400, 1751, 4097, 6000];
    let p = 6100;
    let mut rng = sparsec_formats::gen::SplitMix64::new(41);
    let mut perm: Vec<usize> = (0..p).collect();
    for k in (1..p).rev() {
        perm.swap(k, rng.below(k as u64 + 1) as usize);
    }
    let mut b = vec![Vec::new(); p];
    for (j, row) in b.iter_mut().enumerate() {
        let (x, y) = (perm[j], perm[(j + 1) % p]);
        row.extend([x.min(y), x.max(y)]);
    }
    // Row r of A picks B's rows 0..len: C's row holds len + 1 columns (len > 0).
    let a: Vec<Vec<usize>> = lens.iter().map(|&l| (0..l).collect()).collect();
    let csr = |rows: &[Vec<usize>]| {
        let mut ptr = vec![0i32];
        let idx: Vec<i32> = rows.iter().flat_map(|r| r.iter().map(|&c| c as i32)).collect();
        for r in rows {
            ptr.push(ptr.last().unwrap() + r.len() as i32);
        }
        (ptr, idx)
    };
    let ((ap, ai), (bp, bi)) = (csr(&a), csr(&b));
    let mut x = Args::new();
    x.array("a", Array::F32(vec![1.0; ai.len()])).array("b", Array::F32(vec![1.0; bi.len()]));
    x.int("m", a.len() as i64).int("n", p as i64).int("p", p as i64);
    x.int("nnz_a", ai.len() as i64).int("nnz_b", bi.len() as i64);
    x.array("a_indptr", Array::I32(ap)).array("a_indices", Array::I32(ai));
    x.array("b_indptr", Array::I32(bp)).array("b_indices", Array::I32(bi));
    let (ptr, coords) = sparsec_ir::args::assemble(&f, kc, &x).unwrap();
    let want: Vec<usize> = lens.iter().map(|&l| if l == 0 { 0 } else { l + 1 }).collect();
    assert_eq!(ptr.windows(2).map(|w| (w[1] - w[0]) as usize).collect::<Vec<_>>(), want);
    // Count, prefix sums, fill.
    x.array("c_indptr", Array::I32(vec![0; a.len() + 1]));
    let out = run(&phases[0].func, &x).unwrap();
    let mut counted = ints(&out.arrays["c_indptr"]);
    for r in 0..a.len() {
        counted[r + 1] += counted[r];
    }
    assert_eq!(counted, ptr);
    x.array("c_indptr", Array::I32(counted.iter().map(|&v| v as i32).collect()));
    x.array("c_indices", Array::I32(vec![-1; coords.len()])).int("nnz_c", coords.len() as i64);
    let out = run(&phases[1].func, &x).unwrap();
    assert_eq!(ints(&out.arrays["c_indices"]), coords);
}
