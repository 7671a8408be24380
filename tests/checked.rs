//! `passes::insert_checks` (`sparsec run --checked`): checked Stage III computes the same as
//! unchecked on every workload and reports no fault; an index out of its buffer or an integer
//! division by zero is reported with its buffer and values instead of running.

use sparsec_testkit as common;

use common::workloads::WORKLOADS;
use sparsec::ir::data::{Args, Array};
use sparsec::ir::Stage;
use sparsec_passes::{insert_checks, Fault, PassManager, FAULT_PARAM};

fn checked_run(f: &sparsec::ir::Func, args: &Args) -> (Args, Option<Fault>) {
    let (g, sites) = insert_checks(f).unwrap_or_else(|e| panic!("{}: {e}", f.name));
    let mut args = args.clone();
    args.array(FAULT_PARAM, Array::I64(vec![0; 3]));
    let out = sparsec::interp::run(&g, &args).unwrap_or_else(|e| panic!("{}: checked run: {e}", f.name));
    let Some(Array::I64(fault)) = out.arrays.get(FAULT_PARAM) else { panic!("no fault array") };
    let fault = Fault::decode(&sites, fault);
    (out, fault)
}

#[test]
fn checked_workloads_agree_and_do_not_fault() {
    for name in WORKLOADS {
        let stage1 = common::workload(name);
        let stage3 = PassManager::lowering_to(Stage::III).run(&stage1).unwrap();
        common::for_each_case_upto(name, 20_000, |mname, c| {
            let want = sparsec::interp::run(&stage3, &c.args).unwrap();
            let (got, fault) = checked_run(&stage3, &c.args);
            assert_eq!(fault, None, "{name} on {mname}");
            for (param, _) in &c.expected {
                let (g, w) = (common::output_f32(&got, param), common::output_f32(&want, param));
                common::assert_close(&format!("{name} on {mname}: {param}"), &g, &w, 0.0);
            }
        });
    }
}

/// csrmm with `ACCESS` for the load of B.
fn csrmm_with(access: &str) -> sparsec::ir::Func {
    let src = common::workload_text("csrmm").replace("B[j, k]", access);
    let loaded = sparsec::driver::load_text("csrmm.sptir", src).unwrap_or_else(|e| panic!("{e}"));
    PassManager::lowering_to(Stage::III).run(loaded.func(None).unwrap()).unwrap()
}

#[test]
fn faults_are_reported_instead_of_run() {
    let m = common::generated_matrices().into_iter().find(|(_, m)| m.nnz() > 0).unwrap().1;
    let args = common::workloads::csrmm_args(&m, vec![1.0; m.cols * 4], 4, 0.0);
    let (_, fault) = checked_run(&csrmm_with("B[j, k - 1]"), &args);
    match fault {
        Some(Fault::OutOfBounds { buffer, index: -1, len, .. }) => {
            assert_eq!((buffer.as_str(), len), ("B", (m.cols * 4) as i64));
        }
        other => panic!("{other:?}"),
    }
    let (_, fault) = checked_run(&csrmm_with("B[j, k + 0 % (k - k)]"), &args);
    assert!(matches!(fault, Some(Fault::DivisionByZero { .. })), "{fault:?}");
    // The unchecked program fails in the interpreter where the checked one reports.
    assert!(sparsec::interp::run(&csrmm_with("B[j, k - 1]"), &args).is_err());
}

/// A `while` whose condition never turns false: the interpreter stops it at its limit with an
/// error, and checked code reports a runaway fault instead of hanging.
#[test]
fn runaway_while_loops_are_stopped() {
    let text = "func spin(b: handle, n: i32) stage III {
  buffer B = match_buffer(b, [n], f32)
  while B[0] < 1.0 {
    B[1] = B[1] + 1.0
  }
}
";
    let f = sparsec::ir::text::parse_func("spin.sptir", text).unwrap_or_else(|e| panic!("{e}"));
    let mut args = Args::new();
    args.array("b", Array::F32(vec![0.0; 2])).int("n", 2);
    let opts = sparsec::interp::Options { max_while: 1000, ..Default::default() };
    match sparsec::interp::run_with(&f, &args, &opts) {
        Err(sparsec::interp::InterpError::WhileLimit { limit: 1000, .. }) => {}
        other => panic!("{other:?}"),
    }
    let (g, sites) = sparsec_passes::insert_checks_with(&f, 1000).unwrap();
    args.array(FAULT_PARAM, Array::I64(vec![0; 3]));
    let out = sparsec::interp::run(&g, &args).unwrap();
    let Some(Array::I64(fault)) = out.arrays.get(FAULT_PARAM) else { panic!("no fault array") };
    assert!(matches!(Fault::decode(&sites, fault), Some(Fault::WhileLimit { limit: 1000, .. })), "{fault:?}");
    // The loop body ran exactly the limit.
    assert_eq!(common::output_f32(&out, "b")[1], 1000.0);
    // A loop that ends (the body sets the condition) runs to the end, checked or not.
    let ends = text.replace("B[1] = B[1] + 1.0", "B[0] = B[0] + 0.25");
    let f = sparsec::ir::text::parse_func("ends.sptir", &ends).unwrap();
    let (g, sites) = sparsec_passes::insert_checks_with(&f, 1000).unwrap();
    let out = sparsec::interp::run(&g, &args).unwrap();
    let Some(Array::I64(fault)) = out.arrays.get(FAULT_PARAM) else { panic!("no fault array") };
    assert_eq!(Fault::decode(&sites, fault), None);
    assert_eq!(common::output_f32(&out, "b")[0], 1.0);
}
