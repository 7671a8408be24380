//! Differential test of the lowering passes: for every workload, on every shared matrix and on
//! generated ones (empty rows, one row holding every nonzero, 1 × 1, ...), the interpreter gives
//! the same outputs at Stage I, II and III (fp32 rtol 1e-5, integers exactly). Outputs start
//! filled with a sentinel, so a lowering that misses an `init` fails.

use sparsec_testkit as common;

use sparsec::ir::Stage;
use sparsec_passes::PassManager;

fn check(name: &str) {
    let stage1 = common::workload(name);
    let stages = PassManager::lowering_to(Stage::III).run_all(&stage1).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(stages.iter().map(|f| f.stage).collect::<Vec<_>>(), [Stage::II, Stage::III]);
    common::for_each_case(name, |mname, c| {
        let reference = sparsec::interp::run(&stage1, &c.args).unwrap_or_else(|e| panic!("{name} on {mname}, Stage I: {e}"));
        for f in &stages {
            let out = sparsec::interp::run(f, &c.args)
                .unwrap_or_else(|e| panic!("{name} on {mname}, Stage {}: {e}", f.stage));
            for (param, _) in &c.expected {
                let want = common::output_f32(&reference, param);
                let got = common::output_f32(&out, param);
                common::assert_close(&format!("{name} on {mname}, Stage {}: {param}", f.stage), &got, &want, 1e-5);
            }
        }
    });
}

macro_rules! lowering_tests {
    ($($name:ident),* $(,)?) => {
        $(#[test]
        fn $name() {
            check(stringify!($name));
        })*
    };
}

sparsec_testkit::with_workloads!(lowering_tests);

#[test]
fn square_sum_two_k() {
    check("square_sum_two_K");
}
