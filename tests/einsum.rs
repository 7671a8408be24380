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
        &[("indptr", "indptr_b"), ("indices", "indices_b"), ("m", "n_i"), ("n", "n_j"), ("nnz", "nnz_b")],
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
            // A shared pattern takes the names of its first tensor (the output B here).
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
    let text = einsum::program("t", "y(i) = A(i,j) * x(j) + 2 * z(i)", &[("A".into(), Format::Csr)]).unwrap();
    assert!(text.contains("y[i] = y[i] + (A[i, j] * x[j] + 2.0 * z[i])"), "{text}");
}

#[test]
fn what_einsum_cannot_express_is_refused_with_a_reason() {
    let csr = |t: &str| (t.to_string(), Format::Csr);
    let cases: Vec<(&str, Formats, &str)> = vec![
        ("C(i,j) = A(i,j) + B(i,j)", vec![csr("A"), csr("C"), ("B".into(), Format::Csf)], "different patterns"),
        ("C(i,j) = A(i,k) * B(k,j)", vec![csr("A"), csr("B")], "co-iteration"),
        ("C(i) = A(i,i)", vec![], "repeats an index"),
        ("C(i) = A(i) + A(i,j)", vec![], "has 1 indices in one place and 2"),
        ("C(i) = C(i) * 2", vec![], "both written and read"),
        ("C(i,j,k) = A(i,j,k)", vec![csr("A")], "csr takes 2"),
        ("C(i) = A(i)", vec![csr("Z")], "does not use"),
        ("C(i) = A(i) *", vec![], "column 14"),
        ("C(i) = A(i) B(i)", vec![], "unexpected `B`"),
    ];
    for (expr, formats, want) in cases {
        let e = einsum::program("t", expr, &formats).expect_err(expr);
        assert!(e.to_string().contains(want), "{expr}: {e}");
    }
    assert!(matches!("coo".parse::<Format>(), Err(EinsumError::Format(m)) if m.contains("unknown format `coo`")));
}
