//! How diagnostics render (`file:line:col: message`, the source line and a caret),
//! snapshotted for one syntax, one name and one verifier error. Which inputs give which
//! diagnostics is `tests/filetests/diagnostics/` (and the other filetests).

use sparsec_ir::text::parse;
use sparsec_ir::verify::{render_errors, verify_module};
use sparsec_ir::SourceFile;

/// The diagnostic for `src`: the parse error, or every verifier error.
fn diagnose(name: &str, src: &str) -> String {
    let file = format!("{name}.sptir");
    match parse(&file, src) {
        Err(e) => format!("{e}\n"),
        Ok(m) => match verify_module(&m) {
            Ok(()) => panic!("{name}: expected an error, but the input is valid"),
            Err(errors) => render_errors(&errors, &SourceFile::new(&file, src)),
        },
    }
}

/// One snapshot test per input.
macro_rules! bad_inputs {
    ($($name:ident: $src:expr;)*) => {
        $(
            #[test]
            fn $name() {
                insta::assert_snapshot!(stringify!($name), diagnose(stringify!($name), &$src));
            }
        )*
    };
}

/// A valid CSR SpMM with `BODY` standing for the sparse iteration.
const CSR: &str = "func csrmm(a: handle, b: handle, c: handle, indptr: handle, indices: handle, m: i32, n: i32, feat: i32, nnz: i32) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz, indptr, indices)
  axis J_detach = dense_fixed(n)
  axis K = dense_fixed(feat)
  buffer A = match_sparse_buffer(a, [I, J], f32)
  buffer B = match_sparse_buffer(b, [J_detach, K], f32)
  buffer C = match_sparse_buffer(c, [I, K], f32)
BODY
}
";

fn csr(body: &str) -> String {
    CSR.replace("BODY", body)
}

bad_inputs! {
    missing_closing_brace: "func f(m: i32) {\n  axis I = dense_fixed(m)\n";
    unknown_variable: csr("  sp_iter s([I, K], \"SS\") as [i, k] {\n    C[i, q] = 0.0\n  }");
    // csrmm with `j` declared spatial: the store reduces over it.
    reduction_declared_spatial: csr("  sp_iter csrmm([I, J, K], \"SSS\") as [i, j, k] {\n    init {\n      C[i, k] = 0.0\n    }\n    C[i, k] = C[i, k] + A[i, j] * B[j, k]\n  }");
}
