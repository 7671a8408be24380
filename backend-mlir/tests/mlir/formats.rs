//! Level formats from files (issue #17) on mlir-cpu: the programs of `examples/formats`
//! (DCSR and CSC SpMV, a sparse-vector dot product, TTV/TTM/MTTKRP on CSF tensors) bound
//! from every shared and generated matrix and from generated `.tns` tensors as `sparsec run
//! --matrix` binds them, run unscheduled, with the default CPU schedule (and its every-path
//! tuning), as emulated GPU kernels and under a random schedule: each equals the dense f64
//! result and the interpreter at Stage I.

use sparsec_testkit::formats::file_cases;
use sparsec_testkit::fuzz::Outcome;

#[test]
fn format_programs_from_files_agree_on_mlir_cpu() {
    let dir = std::env::temp_dir().join(format!("sparsec_mlir_formats_{}", std::process::id()));
    let runner = super::fuzz::runner();
    let runner = sparsec_testkit::fuzz::Runner { max_steps: 1 << 26, ..runner };
    let cases = file_cases(&dir, usize::MAX);
    for c in &cases {
        let out = sparsec_interp::run(&c.func, &c.args).unwrap_or_else(|e| panic!("{}: {e}", c.label));
        c.assert_matches(&out);
        match runner.check_func(&c.func, &c.args) {
            Outcome::Agree => {}
            o => panic!("{}: {o:?}", c.label),
        }
    }
    assert!(cases.len() >= 44, "{} cases", cases.len());
    std::fs::remove_dir_all(&dir).ok();
}

/// COO given as arrays (not from a file): repeated rows, an empty row and entries that repeat
/// a whole coordinate, which add up. The interpreter at Stage I gives the f64 sums, and every
/// mlir-cpu configuration (unscheduled, default CPU schedule, emulated GPU, random schedules)
/// agrees with it.
#[test]
fn coo_entries_that_repeat_a_coordinate_add_up_on_every_configuration() {
    use sparsec_ir::data::{Args, Array};
    let f = sparsec_testkit::formats::program("coo_spmv");
    let (rows, cols) = (vec![0, 0, 0, 2, 2, 3, 3, 3], vec![1, 1, 0, 2, 2, 0, 1, 2]);
    let vals = vec![1.5f32, -0.25, 2.0, 3.0, 0.5, -1.0, 4.0, 0.125];
    let x = vec![0.5f32, -2.0, 3.0];
    let mut args = Args::new();
    args.array("rows", Array::I32(rows.clone()))
        .array("cols", Array::I32(cols.clone()))
        .array("a", Array::F32(vals.clone()))
        .array("x", Array::F32(x.clone()))
        .array("y", Array::F32(vec![f32::NAN; 4]))
        .int("m", 4)
        .int("n", 3)
        .int("nnz", 8);
    let mut want = vec![0f64; 4];
    for e in 0..8 {
        want[rows[e] as usize] += f64::from(vals[e]) * f64::from(x[cols[e] as usize]);
    }
    let out = sparsec_interp::run(&f, &args).unwrap_or_else(|e| panic!("{e}"));
    let y = out.arrays["y"].to_f64_vec();
    for (r, (g, w)) in y.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 1e-6 * w.abs().max(1.0), "y[{r}] = {g}, want {w}");
    }
    let runner = super::fuzz::runner();
    match runner.check_func(&f, &args) {
        Outcome::Agree => {}
        o => panic!("coo_spmv: {o:?}"),
    }
}
