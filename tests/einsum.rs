//! `sparsec::einsum`: programs written from index notation compute what the hand-written
//! corpus programs compute (the testkit's dense oracles, on generated and real matrices), and
//! expressions outside what sparsec lowers are refused with a message.

use sparsec::einsum::{self, EinsumError, Format};
use sparsec::ir::data::Args;
use sparsec_testkit as tk;

/// Formats by tensor name.
type Formats = Vec<(String, Format)>;

/// `args` with its names renamed by `map` (corpus name → einsum name).
fn renamed(args: &Args, map: &[(&str, &str)]) -> Args {
    let name = |n: &String| map.iter().find(|(from, _)| from == n).map_or_else(|| n.clone(), |(_, to)| to.to_string());
    let mut out = Args::new();
    for (n, a) in &args.arrays {
        out.array(name(n), a.clone());
    }
    for (n, v) in &args.scalars {
        out.scalars.insert(name(n), *v);
    }
    out
}

/// The corpus workloads that index notation expresses, with the expression, the formats and
/// how the corpus names its parameters.
#[allow(clippy::type_complexity)]
const CASES: &[(&str, &str, &[(&str, Format)], &[(&str, &str)])] = &[
    (
        "csrmm",
        "C(i,k) = A(i,j) * B(j,k)",
        &[("A", Format::Csr)],
        &[("indptr", "indptr_a"), ("indices", "indices_a"), ("m", "n_i"), ("n", "n_j"), ("feat_size", "n_k"), ("nnz", "nnz_a")],
    ),
    (
        "sddmm",
        "C(i,j) = A(i,k) * B(j,k)",
        &[("C", Format::Csr)],
        &[("indptr", "indptr_c"), ("indices", "indices_c"), ("m", "n_i"), ("n", "n_j"), ("feat_size", "n_k"), ("nnz", "nnz_c")],
    ),
    ("csr_reduce", "B(i) = A(i,j)", &[("A", Format::Csr)], &[("indptr", "indptr_a"), ("indices", "indices_a"), ("n", "n_i"), ("m", "n_j"), ("nnz", "nnz_a")]),
    (
        "csr_element_wise",
        "B(i,j) = A(i,j) * 2.5",
        &[("A", Format::Csr), ("B", Format::Csr)],
        &[("indptr", "indptr_a"), ("indices", "indices_a"), ("m", "n_i"), ("n", "n_j"), ("nnz", "nnz_a")],
    ),
    (
        "square_sum",
        "B(i) = A(i,j,k)",
        &[("A", Format::Csf)],
        &[
            ("indptr_j", "indptr_a_j"),
            ("indices_j", "indices_a_j"),
            ("indptr_k", "indptr_a_k"),
            ("indices_k", "indices_a_k"),
            ("nnz_j", "nnz_a_j"),
            ("nnz_k", "nnz_a_k"),
            ("M", "n_i"),
            ("N1", "n_j"),
            ("N2", "n_k"),
        ],
    ),
];

#[test]
fn einsum_programs_compute_the_corpus_workloads() {
    let mut matrices = tk::generated_matrices();
    matrices.extend(tk::shared_matrices().into_iter().filter(|(n, _)| n == "cora" || n == "dwt_992"));
    for (workload, expr, formats, names) in CASES {
        let formats: Formats = formats.iter().map(|(t, f)| (t.to_string(), *f)).collect();
        let f = einsum::func(workload, expr, &formats).unwrap_or_else(|e| panic!("{workload}: {e}"));
        let mut ran = 0;
        for (mname, m) in &matrices {
            let Some(case) = tk::workloads::case(workload, m, &mut tk::Rng::new(5)) else { continue };
            // The output B shares A's pattern (and its names).
            let args = renamed(&case.args, names);
            let got = sparsec::interp::run(&f, &args).unwrap_or_else(|e| panic!("{workload} on {mname}: {e}\n{}", sparsec::ir::text::print_func(&f)));
            for (out, want) in &case.expected {
                tk::assert_close(&format!("{workload} from `{expr}` on {mname}"), &tk::output_f32(&got, out), want, 1e-5);
            }
            ran += 1;
        }
        assert!(ran > 0, "{workload}: no case ran");
    }
}

/// The csrmm program as printed: the same axes, buffers and sparse iteration as the corpus's.
#[test]
fn einsum_writes_the_program_a_person_would() {
    let text = einsum::program("spmm", "C(i,k) = A(i,j) * B(j,k)", &[("A".into(), Format::Csr)]).unwrap();
    insta::assert_snapshot!("einsum_csrmm", text);
    assert!(text.contains("sp_iter spmm([I, J, K], \"SRS\") as [i, j, k]"), "{text}");
    assert!(text.contains("buffer B = match_sparse_buffer(b, [J_detach, K], f32)"), "{text}");
    // A sum on the right is parenthesised under the accumulation.
    let text = einsum::program("t", "y(i) = A(i,j) * x(j) - 2 * A(i,j) * z(j)", &[("A".into(), Format::Csr)]).unwrap();
    assert!(text.contains("y[i] = y[i] + (A[i, j] * x[j] - 2.0 * A[i, j] * z[j])"), "{text}");
}

/// Binds `m` to sparse tensor `t` (values `t`, pattern `indptr_t`, `indices_t`, `nnz_t`).
fn bind_csr(args: &mut Args, t: &str, m: &tk::Mat) {
    use sparsec::ir::data::Array;
    let ints = |v: &[usize]| Array::I32(v.iter().map(|&x| x as i32).collect());
    args.array(t, Array::F32(m.vals.clone()))
        .array(format!("indptr_{t}"), ints(&m.indptr))
        .array(format!("indices_{t}"), ints(&m.indices))
        .int(format!("nnz_{t}"), m.nnz() as i64);
}

/// `m` with every value of its pattern replaced by a distinct small number.
fn valued(m: &tk::Mat, seed: usize) -> tk::Mat {
    let vals = (0..m.nnz()).map(|x| ((x * 7 + seed) % 13) as f32 / 4.0 - 1.0).collect();
    tk::Mat { vals, ..m.clone() }
}

/// Programs over two sparse patterns, the second looked up: the dense product of two CSR
/// matrices, the element-wise product (on A's pattern), a scatter into a dense output (which
/// is zeroed first) and a dense output written on A's pattern, against dense arithmetic.
#[test]
fn looked_up_patterns_and_dense_outputs_give_exact_results() {
    use sparsec::ir::data::Array;
    let csr = |t: &str| (t.to_string(), Format::Csr);
    for (mname, m) in tk::generated_matrices().into_iter().filter(|(_, m)| m.rows * m.cols <= 40_000) {
        let (a, b) = (valued(&m, 1), valued(&m, 5));
        let (r, c) = (m.rows, m.cols);
        let (da, db) = (a.to_dense(), b.to_dense());
        let at = |d: &[f32], i: usize, j: usize| d[i * c + j];
        // C(i,j) = A(i,k) * B(k,j) needs B with as many rows as A has columns: use Bᵀ's shape.
        if r == c {
            let f = einsum::func("spgemm", "C(i,j) = A(i,k) * B(k,j)", &[csr("A"), csr("B")]).unwrap();
            let mut args = Args::new();
            bind_csr(&mut args, "a", &a);
            bind_csr(&mut args, "b", &b);
            args.array("c", Array::F32(vec![9.0; r * c])).int("n_i", r as i64).int("n_k", c as i64).int("n_j", c as i64);
            let got = sparsec::interp::run(&f, &args).unwrap_or_else(|e| panic!("{mname}: {e}"));
            let want: Vec<f32> = (0..r * c).map(|x| (0..c).map(|k| at(&da, x / c, k) * at(&db, k, x % c)).sum()).collect();
            tk::assert_close(&format!("A·B (both csr) on {mname}"), &tk::output_f32(&got, "c"), &want, 1e-5);
        }
        // C(i,j) = A(i,j) * B(i,j): C on A's pattern, B looked up.
        let f = einsum::func("ew", "C(i,j) = A(i,j) * B(i,j)", &[csr("A"), csr("B"), csr("C")]).unwrap();
        let mut args = Args::new();
        bind_csr(&mut args, "a", &a);
        bind_csr(&mut args, "b", &b);
        args.array("c", Array::F32(vec![9.0; m.nnz()])).int("n_i", r as i64).int("n_j", c as i64);
        let got = sparsec::interp::run(&f, &args).unwrap_or_else(|e| panic!("{mname}: {e}"));
        let idx = &m.indices;
        let want: Vec<f32> = (0..r).flat_map(|i| (m.indptr[i]..m.indptr[i + 1]).map(move |p| (i, idx[p]))).map(|(i, j)| at(&da, i, j) * at(&db, i, j)).collect();
        tk::assert_close(&format!("A .* B on {mname}"), &tk::output_f32(&got, "c"), &want, 1e-6);
        // C(j,k) = A(i,j) * X(i,k): a scatter into a dense output; C(i,j) = A(i,j) * 2.
        let f = einsum::func("scatter", "C(j,k) = A(i,j) * X(i,k)", &[csr("A")]).unwrap();
        let mut args = Args::new();
        bind_csr(&mut args, "a", &a);
        let x: Vec<f32> = (0..r * 3).map(|v| (v % 5) as f32 - 2.0).collect();
        args.array("x", Array::F32(x.clone())).array("c", Array::F32(vec![9.0; c * 3])).int("n_i", r as i64).int("n_j", c as i64).int("n_k", 3);
        let got = sparsec::interp::run(&f, &args).unwrap_or_else(|e| panic!("{mname}: {e}"));
        let want: Vec<f32> = (0..c * 3).map(|v| (0..r).map(|i| at(&da, i, v / 3) * x[i * 3 + v % 3]).sum()).collect();
        tk::assert_close(&format!("Aᵀ·X on {mname}"), &tk::output_f32(&got, "c"), &want, 1e-5);
        let f = einsum::func("twice", "C(i,j) = A(i,j) * 2", &[csr("A")]).unwrap();
        let mut args = Args::new();
        bind_csr(&mut args, "a", &a);
        args.array("c", Array::F32(vec![9.0; r * c])).int("n_i", r as i64).int("n_j", c as i64);
        let got = sparsec::interp::run(&f, &args).unwrap_or_else(|e| panic!("{mname}: {e}"));
        let want: Vec<f32> = da.iter().map(|v| v * 2.0).collect();
        tk::assert_close(&format!("2A (dense) on {mname}"), &tk::output_f32(&got, "c"), &want, 1e-6);
    }
}

#[test]
fn what_einsum_cannot_express_is_refused_with_a_reason() {
    let csr = |t: &str| (t.to_string(), Format::Csr);
    let cases: Vec<(&str, Formats, &str)> = vec![
        ("C(i,j) = A(i,j) * B(i,j) + E(i,j)", vec![csr("A"), csr("C"), csr("B"), csr("E")], "mix unions and intersections"),
        ("C(i,j) = A(i,j) + B(i,j) + 1", vec![csr("A"), csr("C"), csr("B")], "`C` would be dense"),
        ("C(i,j) = A(i,j) + B(i,j)", vec![csr("A"), csr("B")], "needs co-iteration"),
        ("C(i,k) = A(i,j) * B(j,k) + E(i,k)", vec![csr("A")], "a term has no factor of `A`"),
        ("C(i,j) = A(i,j) + 1", vec![csr("A")], "a term has no factor of `A`"),
        ("C(i,j) = (A(i,j) + B(i,j)) * D(i,j)", vec![csr("A"), csr("B")], "a term has no factor of `A`"),
        ("C(i) = A(i,i)", vec![], "repeats an index"),
        ("C(i) = A(i) + A(i,j)", vec![], "has 1 indices in one place and 2"),
        ("C(i) = C(i) * 2", vec![], "both written and read"),
        ("C(i,j,k) = A(i,j,k)", vec![csr("A")], "csr takes 2"),
        ("C(i) = A(i)", vec![csr("Z")], "does not use"),
        ("C(i) = A(i) *", vec![], "column 14"),
        ("C(i) = A(i) B(i)", vec![], "unexpected `B`"),
        ("C(in) = A(in)", vec![], "index `in` cannot be a name"),
        ("IF(i) = A(i)", vec![], "tensor `IF` cannot be a name"),
    ];
    for (expr, formats, want) in cases {
        let e = einsum::program("t", expr, &formats).expect_err(expr);
        assert!(e.to_string().contains(want), "{expr}: {e}");
    }
    assert!(matches!("bcsr".parse::<Format>(), Err(EinsumError::Format(m)) if m.contains("unknown format `bcsr`")));
    // A coo tensor is walked, never looked up, and read into a dense output.
    let coo = |t: &str| (t.to_string(), Format::Coo);
    for (expr, formats) in [
        ("C(i,j) = E(i,j) * A(i,j)", vec![coo("A"), csr("E")]),
        ("C(i,j) = A(i,j) * 2", vec![coo("A"), coo("C")]),
        ("C(i,j) = A(i,j) * D(i,j)", vec![coo("A"), csr("C")]),
    ] {
        let e = einsum::program("t", expr, &formats).expect_err(expr);
        assert!(e.to_string().contains("in coo is walked entry by entry and never looked up"), "{expr}: {e}");
    }
}

/// The same expressions with A in csr, csc, dcsr and coo, bound from a Matrix Market file as
/// `sparsec run --matrix` binds them (the program's own axes lay the file out): y = A·x and
/// C = A·B equal dense arithmetic on every generated matrix, at every stage; so does an
/// element-wise product whose second operand, in dcsr, is looked up through its root axis.
#[test]
fn csc_and_dcsr_operands_bind_from_files_and_compute_dense_results() {
    use sparsec::driver::{bind_run, RunSpec};
    use sparsec::ir::data::Array;
    let dir = std::env::temp_dir().join(format!("sparsec_einsum_formats_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f32s = |args: &Args, n: &str| match args.arrays.get(n) {
        Some(Array::F32(v)) => v.clone(),
        other => panic!("{n}: {other:?}"),
    };
    let runner = sparsec_testkit::fuzz::Runner::default();
    for (mname, m) in tk::generated_matrices() {
        let path = dir.join(format!("{mname}.mtx"));
        sparsec::formats::mtx::write_mtx_path(&path, &m.to_csr()).unwrap();
        let (r, c) = (m.rows, m.cols);
        let da = m.to_dense();
        for format in [Format::Csr, Format::Csc, Format::Dcsr, Format::Coo] {
            let exprs: [(&str, Formats, usize); 3] = [
                ("y(i) = A(i,j) * x(j)", vec![("A".into(), format)], 0),
                ("C(i,k) = A(i,j) * B(j,k)", vec![("A".into(), format)], 3),
                ("C(i,j) = E(i,j) * A(i,j)", vec![("A".into(), format), ("E".into(), Format::Csr)], 0),
            ];
            // A coo operand is never looked up (the third expression walks E).
            for (expr, formats, feat) in exprs.into_iter().filter(|e| format != Format::Coo || e.2 > 0 || e.0.starts_with('y')) {
                let what = format!("{expr} with A in {format:?} on {mname}");
                let f = einsum::func("k", expr, &formats).unwrap_or_else(|e| panic!("{what}: {e}"));
                let mut spec = RunSpec { matrices: vec![("A".into(), path.clone())], seed: 3, ..RunSpec::default() };
                if expr.starts_with("C(i,j)") {
                    spec.matrices.push(("E".into(), path.clone()));
                }
                if feat > 0 {
                    spec.scalars.push(("n_k".into(), feat.to_string()));
                }
                let args = bind_run(&f, &spec).unwrap_or_else(|e| panic!("{what}: {e}"));
                let got = sparsec::interp::run(&f, &args).unwrap_or_else(|e| panic!("{what}: {e}"));
                let (out, want): (&str, Vec<f32>) = match feat {
                    _ if expr.starts_with('y') => {
                        let x = f32s(&args, "x");
                        ("y", (0..r).map(|i| (0..c).map(|j| da[i * c + j] * x[j]).sum()).collect())
                    }
                    // E = A: the dense output holds A's squares.
                    0 => ("c", da.iter().map(|v| v * v).collect()),
                    k => {
                        let b = f32s(&args, "b");
                        ("c", (0..r * k).map(|v| (0..c).map(|j| da[(v / k) * c + j] * b[j * k + v % k]).sum()).collect())
                    }
                };
                tk::assert_close(&what, &tk::output_f32(&got, out), &want, 1e-5);
                match runner.check_func(&f, &args) {
                    sparsec_testkit::fuzz::Outcome::Agree => {}
                    o => panic!("{what}: {o:?}"),
                }
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Element-wise sums and products of csr matrices into a csr output (`C(i,j) = A(i,j) +
/// B(i,j)`) co-iterate the operands and assemble the output's pattern, their union or
/// intersection: bound from Matrix Market files, the output holds scipy's pattern exactly
/// and the dense arithmetic's values, at every stage (each lowered one after its symbolic
/// phase).
#[test]
fn elementwise_expressions_of_csr_matrices_assemble_sparse_outputs() {
    use sparsec::driver::{bind_run, RunSpec};
    let dir = std::env::temp_dir().join(format!("sparsec_einsum_assembled_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runner = sparsec_testkit::fuzz::Runner::default();
    let csr = |t: &str| (t.to_string(), Format::Csr);
    for (mname, m) in tk::generated_matrices() {
        let (r, c) = (m.rows, m.cols);
        let other: sparsec::formats::Csr<i64, f64> = sparsec::formats::gen::uniform(r, c, m.nnz().div_ceil(2).min(r * c), 5).unwrap();
        let (pa, pb) = (dir.join(format!("{mname}-a.mtx")), dir.join(format!("{mname}-b.mtx")));
        sparsec::formats::mtx::write_mtx_path(&pa, &m.to_csr()).unwrap();
        sparsec::formats::mtx::write_mtx_path(&pb, &other).unwrap();
        let da = m.to_dense();
        let mut db = vec![0.0f32; r * c];
        let mut in_b = vec![false; r * c];
        for i in 0..r {
            for p in other.indptr()[i] as usize..other.indptr()[i + 1] as usize {
                db[i * c + other.indices()[p] as usize] = other.values()[p] as f32;
                in_b[i * c + other.indices()[p] as usize] = true;
            }
        }
        let mut in_a = vec![false; r * c];
        for i in 0..r {
            for p in m.indptr[i]..m.indptr[i + 1] {
                in_a[i * c + m.indices[p]] = true;
            }
        }
        let exprs: [(&str, fn(bool, bool) -> bool, fn(f32, f32, f32) -> f32); 2] = [
            ("C(i,j) = A(i,j) - 2 * B(i,j)", |a, b| a || b, |a, b, _| a - 2.0 * b),
            ("C(i,j) = A(i,j) * B(i,j) * D(i,j)", |a, b| a && b, |a, b, d| a * b * d),
        ];
        for (expr, stored, value) in exprs {
            let what = format!("{expr} on {mname}");
            let f = einsum::func("k", expr, &[csr("A"), csr("B"), csr("C")]).unwrap_or_else(|e| panic!("{what}: {e}"));
            let spec = RunSpec { matrices: vec![("A".into(), pa.clone()), ("B".into(), pb.clone())], seed: 3, ..RunSpec::default() };
            let args = bind_run(&f, &spec).unwrap_or_else(|e| panic!("{what}: {e}"));
            let got = sparsec::interp::run(&f, &args).unwrap_or_else(|e| panic!("{what}: {e}"));
            let dd = args.arrays.get("d").map(|a| a.to_f64_vec()).unwrap_or_default();
            let (mut ptr, mut ind, mut want) = (vec![0i64], Vec::new(), Vec::new());
            for i in 0..r {
                for j in 0..c {
                    let k = i * c + j;
                    if stored(in_a[k], in_b[k]) {
                        ind.push(j as i64);
                        want.push(value(da[k], db[k], dd.get(k).map_or(0.0, |&x| x as f32)));
                    }
                }
                ptr.push(ind.len() as i64);
            }
            let ints = |n: &str| (0..got.arrays[n].len()).filter_map(|k| got.arrays[n].get_i64(k)).collect::<Vec<_>>();
            assert_eq!(ints("indptr_c"), ptr, "{what}");
            assert_eq!(ints("indices_c"), ind, "{what}");
            tk::assert_close(&what, &tk::output_f32(&got, "c"), &want, 1e-5);
            match runner.check_func(&f, &args) {
                sparsec_testkit::fuzz::Outcome::Agree => {}
                o => panic!("{what}: {o:?}"),
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A product of two csr matrices into a csr output (`C(i,k) = A(i,j) * B(j,k)`, also written
/// `2 * B(j,k) * A(i,j)`) is Gustavson's SpGEMM: the output's pattern is the product's,
/// assembled by the run. Bound from Matrix Market files, it gives exactly the pattern and the
/// values of the hand-written `examples/formats/spgemm.sptir` (times 2), at every stage. With
/// a csr mask in the product (`M(i,k) * A(i,j) * B(j,k)`) the loops walk the mask's pattern
/// instead: the masked product, on `M`'s pattern.
#[test]
fn products_of_csr_matrices_are_spgemm_with_an_assembled_output() {
    use sparsec::driver::{bind_run, RunSpec};
    let dir = std::env::temp_dir().join(format!("sparsec_einsum_spgemm_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runner = sparsec_testkit::fuzz::Runner::default();
    let csr = |t: &str| (t.to_string(), Format::Csr);
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/formats/spgemm.sptir")).unwrap();
    let hand = sparsec::ir::text::parse_func("spgemm.sptir", &text).unwrap();
    let mut ran = 0;
    for (mname, m) in tk::generated_matrices().into_iter().filter(|(_, m)| m.rows == m.cols && m.nnz() <= 5_000) {
        let pa = dir.join(format!("{mname}.mtx"));
        let other: sparsec::formats::Csr<i64, f64> = sparsec::formats::gen::uniform(m.rows, m.cols, m.nnz().div_ceil(2).max(1), 7).unwrap();
        let pb = dir.join(format!("{mname}-b.mtx"));
        sparsec::formats::mtx::write_mtx_path(&pa, &m.to_csr()).unwrap();
        sparsec::formats::mtx::write_mtx_path(&pb, &other).unwrap();
        let spec = RunSpec { matrices: vec![("A".into(), pa.clone()), ("B".into(), pb.clone())], seed: 3, ..RunSpec::default() };
        let want = sparsec::interp::run(&hand, &bind_run(&hand, &spec).unwrap()).unwrap();
        for (expr, scale) in [("C(i,k) = A(i,j) * B(j,k)", 1.0f32), ("C(i,k) = 2 * B(j,k) * A(i,j)", 2.0)] {
            let what = format!("{expr} on {mname}");
            let f = einsum::func("g", expr, &[csr("A"), csr("B"), csr("C")]).unwrap_or_else(|e| panic!("{what}: {e}"));
            let args = bind_run(&f, &spec).unwrap_or_else(|e| panic!("{what}: {e}"));
            let got = sparsec::interp::run(&f, &args).unwrap_or_else(|e| panic!("{what}: {e}"));
            let ints = |a: &Args, n: &str| (0..a.arrays[n].len()).filter_map(|k| a.arrays[n].get_i64(k)).collect::<Vec<_>>();
            assert_eq!(ints(&got, "indptr_c"), ints(&want, "c_indptr"), "{what}");
            assert_eq!(ints(&got, "indices_c"), ints(&want, "c_indices"), "{what}");
            let scaled: Vec<f32> = tk::output_f32(&want, "c").iter().map(|v| v * scale).collect();
            tk::assert_close(&what, &tk::output_f32(&got, "c"), &scaled, 1e-5);
            match runner.check_func(&f, &args) {
                sparsec_testkit::fuzz::Outcome::Agree => {}
                o => panic!("{what}: {o:?}"),
            }
        }
        ran += 1;
    }
    assert!(ran >= 3, "ran on {ran} matrices");
    // The masked product walks M's pattern (M owns the output's).
    let masked = einsum::program("g", "C(i,k) = M(i,k) * A(i,j) * B(j,k)", &[csr("A"), csr("B"), csr("C"), csr("M")]).unwrap();
    assert!(!masked.contains("product(") && masked.contains("sp_iter g([I, K"), "{masked}");
    std::fs::remove_dir_all(&dir).ok();
}
