//! Generated code checks no index and no divisor: the argument checks of `sparsec_ir::args`
//! (what the CLI runs before compiled code) refuse integer division by zero and stores or
//! loads out of bounds, and accept the program they come from.

use sparsec_ir::args::{check_accesses, check_structure};
use sparsec_testkit as kit;


fn check(store: &str, load: &str) -> Result<(), String> {
    // The corpus csrmm with the store's and B's indices replaced.
    let src = kit::workload_text("csrmm").replace("C[i, k] = C[i, k] + A[i, j] * B[j, k]", &format!("C[{store}] = C[i, k] + A[i, j] * B[{load}]"));
    let f = sparsec_ir::text::parse_func("csrmm", &src).unwrap_or_else(|e| panic!("{e}"));
    sparsec_ir::verify::verify_func(&f).unwrap_or_else(|e| panic!("{e:?}"));
    let mut out = Ok(());
    for (_, m) in kit::generated_matrices() {
        let c = kit::workloads::case("csrmm", &m, &mut kit::Rng::new(3)).unwrap();
        if let Err(e) = check_structure(&f, &c.args).and_then(|()| check_accesses(&f, &c.args)) {
            out = Err(e.to_string());
        }
    }
    out
}

#[test]
fn division_by_zero_and_out_of_bounds_never_reach_compiled_code() {
    check("i, k", "j, k").unwrap();
    for (store, load, message) in [
        ("i, k", "j, k + 0 % 0", "divisor"),
        ("i, k + 0 % 0", "j, k", "divisor"),
        ("i, k", "j, k // (k - k)", "divisor"),
        ("i, k + 1", "j, k", "index 1 of buffer `C`"),
        ("i + 1, k", "j, k", "index 0 of buffer `C`"),
        ("i, k - 1", "j, k", "index 1 of buffer `C`"),
        ("i, k", "j, k + feat_size", "index 1 of buffer `B`"),
    ] {
        let e = check(store, load).expect_err(&format!("C[{store}] ... B[{load}] must be refused"));
        assert!(e.contains(message), "C[{store}] ... B[{load}]: {e}");
    }
}

/// A divisor that is a call (`1 / abs(0)`) is checked like any integer divisor (found by
/// `fuzz.rs`; reproducer `tests/fuzz_regressions/divisor_call.sptir`).
#[test]
fn divisors_that_are_calls_are_checked() {
    // `C[i, k] = C[i, k] + A[i, j] * B[j, k] * cast(f32, 1 / abs(0)) + 0.0 * B[j, k]`
    let e = check("i, k", "j, k] * cast(f32, 1 / abs(0)) + 0.0 * B[j, k").expect_err("1 / abs(0) must be refused");
    assert!(e.contains("divisor"), "{e}");
}
