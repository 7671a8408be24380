//! The arithmetic simplifier: folding, identities and constant re-association.

use sparsec_ir::text::{parse_func, print_expr};
use sparsec_ir::StmtKind;
use sparsec_passes::simplify::simplify_expr;

/// Simplifies the value of the first `let` in `body`, over scalars x: i32 and y: i64.
fn simp(value: &str) -> String {
    let src = format!("func f(x: i32, y: i64) {{\n  let t = {value}\n}}\n");
    let f = parse_func("t", &src).unwrap();
    let StmtKind::Let { value, .. } = &f.body[0].kind else { panic!() };
    print_expr(&f, &simplify_expr(value.clone()))
}

#[test]
fn folds_and_simplifies() {
    let cases = [
        ("1 + 2 * 3", "7"),
        ("x * 1", "x"),
        ("1 * x", "x"),
        ("x + 0", "x"),
        ("0 + x", "x"),
        ("x - 0", "x"),
        ("x * 0", "0"),
        ("x // 1", "x"),
        ("x % 1", "0"),
        ("(x + 1) + 2", "x + 3"),
        ("(x + 3) - 3", "x"),
        ("(x - 2) + 1", "x - 1"),
        ("2 + x", "x + 2"),
        ("x + -4", "x - 4"),
        ("(x + cast(i32, y)) - cast(i32, y)", "x"),
        // Not on floats, nor where the dtype is unknown here: `(1.0 + y) - y` is not `1.0`.
        ("(x + x) - x", "x + x - x"),
        ("-7 // 2", "-4"),
        ("-7 % 2", "1"),
        ("7 // -2", "-4"),
        ("min(3, 5) + max(3, 5)", "8"),
        ("y + 0i64", "y"),
        ("cast(i64, 3)", "3i64"),
        ("x // 0", "x // 0"),
        ("2147483647 + 1", "-2147483648"),
        // Folds mean what the interpreter computes (the semantic core, ir::value).
        ("1 + 2147483647", "-2147483648"),
        ("cast(i32, 4294967297i64)", "1"),
        ("-2147483648 // -1", "-2147483648"),
    ];
    for (input, want) in cases {
        assert_eq!(simp(input), want, "simplify({input})");
    }
}

#[test]
fn leaves_floats_alone() {
    assert_eq!(simp("1.0 + 2.0"), "1.0 + 2.0");
    assert_eq!(simp("cast(f32, x) * 1.0"), "cast(f32, x) * 1.0");
}

#[test]
fn is_idempotent_on_the_corpus_index_expressions() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/workloads");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let f = parse_func("w", &text).unwrap();
        let g = sparsec_passes::lower_sparse_iter(&f).unwrap();
        let h = sparsec_passes::lower_sparse_buffer(&g).unwrap();
        sparsec_ir::walk_stmts(&h.body, &mut |s| {
            for e in s.kind.exprs() {
                let once = simplify_expr(e.clone());
                assert_eq!(simplify_expr(once.clone()), once, "{}", path.display());
                assert_eq!(&once, e, "lowered IR is already simplified");
            }
        });
    }
}
