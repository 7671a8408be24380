//! The DSL builds the same IR as the parser: each corpus program written with the DSL is
//! equal to the parsed `tests/workloads/*.sptir` file and prints to the same text; every
//! `DslError` variant is reachable.

#![allow(non_snake_case)]

use sparsec_ir::dsl::*;
use sparsec_ir::text::{parse_func, print_func};
use sparsec_ir::{Expr, Func, MergeOp};

fn workload(name: &str) -> Func {
    let path = format!("{}/../tests/workloads/{name}.sptir", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    parse_func(&path, &text).unwrap_or_else(|e| panic!("{e}"))
}

/// Asserts IR equality and equal printed text.
fn same(dsl: &Func, parsed: &Func) {
    assert_eq!(print_func(dsl), print_func(parsed));
    assert_eq!(dsl, parsed);
}

/// The parameters and axes shared by csrmm, sddmm and fused_sddmm.
struct Spmm {
    a: HandleRef,
    b: HandleRef,
    c: HandleRef,
    I: AxisRef,
    J: AxisRef,
    J_detach: AxisRef,
    K: AxisRef,
}

fn spmm_decls(f: &mut FuncBuilder<'_>) -> Spmm {
    let (a, b, c) = (f.handle("a"), f.handle("b"), f.handle("c"));
    let (indptr, indices) = (f.handle("indptr"), f.handle("indices"));
    let (m, n) = (f.scalar("m", I32), f.scalar("n", I32));
    let (feat_size, nnz) = (f.scalar("feat_size", I32), f.scalar("nnz", I32));
    let I = f.dense_fixed("I", m);
    let J = f.sparse_variable("J", I, n, nnz, indptr, indices);
    let J_detach = f.dense_fixed("J_detach", n);
    let K = f.dense_fixed("K", feat_size);
    Spmm { a, b, c, I, J, J_detach, K }
}

#[test]
fn csrmm() {
    let f = func("csrmm", |f| {
        let Spmm { a, b, c, I, J, J_detach, K } = spmm_decls(f);
        let A = f.match_sparse_buffer("A", a, [I, J], F32);
        let B = f.match_sparse_buffer("B", b, [J_detach, K], F32);
        let C = f.match_sparse_buffer("C", c, [I, K], F32);
        f.sp_iter("csrmm", [I, J, K], "SRS", |s, [i, j, k]| {
            s.init(|s| s.store(C.at([i, k]), 0.0));
            s.store(C.at([i, k]), C.at([i, k]) + A.at([i, j]) * B.at([j, k]));
        });
    })
    .unwrap();
    same(&f, &workload("csrmm"));
}

#[test]
fn sddmm() {
    let f = func("sddmm", |f| {
        let Spmm { a, b, c, I, J, J_detach, K } = spmm_decls(f);
        let A = f.match_sparse_buffer("A", a, [I, K], F32);
        let B = f.match_sparse_buffer("B", b, [J_detach, K], F32);
        let C = f.match_sparse_buffer("C", c, [I, J], F32);
        f.sp_iter("sddmm", [I, J, K], "SSR", |s, [i, j, k]| {
            s.init(|s| s.store(C.at([i, j]), 0.0));
            s.store(C.at([i, j]), C.at([i, j]) + A.at([i, k]) * B.at([j, k]));
        });
    })
    .unwrap();
    same(&f, &workload("sddmm"));
}

#[test]
fn fused_sddmm() {
    let f = func("fused_sddmm", |f| {
        let Spmm { a, b, c, I, J, J_detach, K } = spmm_decls(f);
        let A = f.match_sparse_buffer("A", a, [I, K], F32);
        let B = f.match_sparse_buffer("B", b, [J_detach, K], F32);
        let C = f.match_sparse_buffer("C", c, [I, J], F32);
        f.sp_iter("sddmm", (fuse([I, J]), K), "SSR", |s, [i, j, k]| {
            s.init(|s| s.store(C.at([i, j]), 0.0));
            s.store(C.at([i, j]), C.at([i, j]) + A.at([i, k]) * B.at([j, k]));
        });
    })
    .unwrap();
    same(&f, &workload("fused_sddmm"));
}

#[test]
fn bsrmm() {
    let f = func("bsrmm", |f| {
        let (a, b, c) = (f.handle("a"), f.handle("b"), f.handle("c"));
        let (indptr, indices) = (f.handle("indptr"), f.handle("indices"));
        let (nb, mb, nnzb) = (f.scalar("nb", I32), f.scalar("mb", I32), f.scalar("nnzb", I32));
        let (blk, feat_size) = (f.scalar("blk", I32), f.scalar("feat_size", I32));
        let I = f.dense_fixed("I", nb);
        let J = f.sparse_variable("J", I, mb, nnzb, indptr, indices);
        let J_detach = f.dense_fixed("J_detach", mb);
        let BI = f.dense_fixed("BI", blk);
        let BJ = f.dense_fixed("BJ", blk);
        let F = f.dense_fixed("F", feat_size);
        let A = f.match_sparse_buffer("A", a, [I, J, BI, BJ], F32);
        let B = f.match_sparse_buffer("B", b, [J_detach, BJ, F], F32);
        let C = f.match_sparse_buffer("C", c, [I, BI, F], F32);
        f.sp_iter("bsrmm", [I, BI, BJ, F, J], "SSRSR", |s, [i, bi, bj, f, j]| {
            s.init(|s| s.store(C.at([i, bi, f]), 0.0));
            s.store(C.at([i, bi, f]), C.at([i, bi, f]) + A.at([i, j, bi, bj]) * B.at([j, bj, f]));
        });
    })
    .unwrap();
    same(&f, &workload("bsrmm"));
}

#[test]
fn sparse_softmax() {
    let f = func("sparse_softmax", |f| {
        let (a, b, indptr, indices) = (f.handle("a"), f.handle("b"), f.handle("indptr"), f.handle("indices"));
        let (n, nnz) = (f.scalar("n", I32), f.scalar("nnz", I32));
        let I = f.dense_fixed("I", n);
        let J = f.sparse_variable("J", I, n, nnz, indptr, indices);
        let A = f.match_sparse_buffer("A", a, [I, J], F32);
        let B = f.match_sparse_buffer("B", b, [I, J], F32);
        let TMP = f.alloc_sparse_buffer("TMP", [I], F32, Scope::Global);
        let TMP1 = f.alloc_sparse_buffer("TMP1", [I], F32, Scope::Global);
        f.sp_iter("sparse_softmax", [I], "S", |s, [i]| {
            s.sp_iter("computer_max", [J], "R", |s, [j]| {
                s.init(|s| s.store(TMP.at([i]), min_value(F32)));
                s.store(TMP.at([i]), max(TMP.at([i]), A.at([i, j])));
            });
            s.sp_iter("exp_and_sum", [J], "R", |s, [j]| {
                s.init(|s| s.store(TMP1.at([i]), 0.0));
                s.store(TMP1.at([i]), TMP1.at([i]) + exp(A.at([i, j]) - TMP.at([i])));
            });
            s.sp_iter("div", [J], "S", |s, [j]| {
                s.store(B.at([i, j]), exp(A.at([i, j]) - TMP.at([i])) / TMP1.at([i]));
            });
        });
    })
    .unwrap();
    same(&f, &workload("sparse_softmax"));
}

#[test]
fn hyper_gnn() {
    let f = func("hyper_gnn", |f| {
        let (x, y) = (f.handle("x"), f.handle("y"));
        let (indptr, indices) = (f.handle("indptr"), f.handle("indices"));
        let (indptr_T, indices_T) = (f.handle("indptr_T"), f.handle("indices_T"));
        let (n, m) = (f.scalar("n", I32), f.scalar("m", I32));
        let (nnz, feat_size) = (f.scalar("nnz", I32), f.scalar("feat_size", I32));
        let I = f.dense_fixed("I", n);
        let F = f.dense_fixed("F", feat_size);
        let J = f.sparse_variable("J", I, m, nnz, indptr, indices);
        let J_detach = f.dense_fixed("J_detach", m);
        let I_T = f.sparse_variable("I_T", J_detach, n, nnz, indptr_T, indices_T);
        let X = f.match_sparse_buffer("X", x, [I, F], F32);
        let Y = f.match_sparse_buffer("Y", y, [I, F], F32);
        f.sp_iter("hyper_gnn", (I, F, J, attach(I_T, J)), "SSRR", |s, [i, f, _j, i_t]| {
            s.init(|s| s.store(Y.at([i, f]), 0.0));
            s.store(Y.at([i, f]), Y.at([i, f]) + X.at([i_t, f]));
        });
    })
    .unwrap();
    same(&f, &workload("hyper_gnn"));
}

const MISC: &str = r#"func misc(a: handle, b: handle, c: handle, indptr: handle, indices: handle, seg: handle, ell_idx: handle, n: i32, m: i32, nnz: i32, k: i32) attrs(global_symbol = "misc", opt_level = 3, scale = 0.5, fast = true) {
  axis I = dense_fixed(n)
  axis J = sparse_variable(I, m, nnz, indptr, indices, idtype = i64, sorted = false)
  axis S = dense_variable(I, m, nnz, seg)
  axis L = sparse_fixed(I, m, k, ell_idx)
  buffer A = match_sparse_buffer(a, [I, J], f32, default = 1.0)
  buffer B = match_sparse_buffer(b, [I, S], f32)
  buffer C = match_sparse_buffer(c, [I], f32, extra_storage = 1)
  buffer TMP = alloc_sparse_buffer([I], f32, local)
  sp_iter outer([I], "S") as [row] attrs(schedule = "row", unroll = 2) {
    buffer acc = alloc_sparse_buffer([I], f64, shared, default = 2.0f64)
    let base = row * 2
    let wide = cast(i64, base)
    if base < n && !(row == 0) {
      C[row] = C[row] + 1.0
    } else if base % 3 == 1 {
      C[row] = -2.0
    } else {
      C[row] = max(C[row], min_value(f32))
    }
    while TMP[row] < 3.0 {
      TMP[row] = TMP[row] + 1.0
    }
    sp_iter inner([J], "R") as [col] {
      init {
        TMP[row] = 0.0
      }
      let x = A[row, col] * 2.0
      TMP[row] = TMP[row] + select(x > 0.0, x, -x) + exp(x) / sqrt(abs(x) + 1.0)
      atomic_add(C[row], x)
      acc[row] = acc[row] + cast(f64, x) * 0.5f64 + cast(f64, wide + col // 2i64)
    }
    sp_iter "seg-iter"([S], "R") as [s] {
      TMP[row] = TMP[row] + B[row, s] + cast(f32, base // 2 - 1)
    }
  }
}
"#;

/// COO through the DSL: `AxisOpts::unique(false)` on a root axis gives the parsed
/// `examples/formats/coo_spmv.sptir`.
#[test]
fn coo_spmv() {
    let f = func("coo_spmv", |f| {
        let (a, x, y, rows, cols) = (f.handle("a"), f.handle("x"), f.handle("y"), f.handle("rows"), f.handle("cols"));
        let (m, n, nnz) = (f.scalar("m", I32), f.scalar("n", I32), f.scalar("nnz", I32));
        let I = f.axis_with(AxisOpts::new().unique(false)).sparse_root("I", m, nnz, rows);
        let J = f.sparse_fixed("J", I, n, 1, cols);
        let I_y = f.dense_fixed("I_y", m);
        let J_x = f.dense_fixed("J_x", n);
        let A = f.match_sparse_buffer("A", a, [I, J], F32);
        let X = f.match_sparse_buffer("X", x, [J_x], F32);
        let Y = f.match_sparse_buffer("Y", y, [I_y], F32);
        f.sp_iter_with("zero", [I_y], "S").vars(["i"]).body(|s, [i]| {
            s.store(Y.at([i]), 0.0);
        });
        f.sp_iter("spmv", [I, J], "RR", |s, [i, j]| {
            s.store(Y.at([i]), Y.at([i]) + A.at([i, j]) * X.at([j]));
        });
    })
    .unwrap();
    let path = format!("{}/../examples/formats/coo_spmv.sptir", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    same(&f, &parse_func(&path, &text).unwrap_or_else(|e| panic!("{e}")));
    assert!(print_func(&f).contains("axis I = sparse_fixed(m, nnz, rows, unique = false)"));
}

/// Every other construct: attributes, axis options, all axis kinds, buffer options,
/// statement allocations, `let`, `if`/`else if`/`else`, `while`, `atomic_add`, explicit
/// iterator names, string names and untyped literals meeting f64 and i64.
fn misc_dsl() -> Result<Func, DslError> {
    func("misc", |f| {
        let (a, b, c) = (f.handle("a"), f.handle("b"), f.handle("c"));
        let (indptr, indices, seg, ell_idx) =
            (f.handle("indptr"), f.handle("indices"), f.handle("seg"), f.handle("ell_idx"));
        let (n, m, nnz, k) = (f.scalar("n", I32), f.scalar("m", I32), f.scalar("nnz", I32), f.scalar("k", I32));
        f.attr("global_symbol", "misc").attr("opt_level", 3).attr("scale", 0.5).attr("fast", true);
        let I = f.dense_fixed("I", n);
        let J = f.axis_with(AxisOpts::new().idtype(I64).sorted(false)).sparse_variable("J", I, m, nnz, indptr, indices);
        let S = f.dense_variable("S", I, m, nnz, seg);
        let _L = f.sparse_fixed("L", I, m, k, ell_idx);
        let A = f.buffer_with(BufferOpts::new().default_value(1.0)).match_sparse_buffer("A", a, [I, J], F32);
        let B = f.match_sparse_buffer("B", b, [I, S], F32);
        let C = f.buffer_with(BufferOpts::new().extra_storage(1)).match_sparse_buffer("C", c, [I], F32);
        let TMP = f.alloc_sparse_buffer("TMP", [I], F32, Scope::Local);
        f.sp_iter_with("outer", [I], "S").vars(["row"]).attr("schedule", "row").attr("unroll", 2).body(|s, [row]| {
            let acc =
                s.buffer_with(BufferOpts::new().default_value(2.0)).alloc_sparse_buffer("acc", [I], F64, Scope::Shared);
            let base = s.let_("base", row * 2);
            let wide = s.let_typed("wide", I64, cast(I64, base));
            s.if_(base.lt(n) & !row.eq_(0), |s| {
                s.store(C.at([row]), C.at([row]) + 1.0);
            })
            .else_if((base % 3).eq_(1), |s| {
                s.store(C.at([row]), -2.0);
            })
            .else_(|s| {
                s.store(C.at([row]), max(C.at([row]), min_value(F32)));
            });
            s.while_(TMP.at([row]).lt(3.0), |s| {
                s.store(TMP.at([row]), TMP.at([row]) + 1.0);
            });
            s.sp_iter_with("inner", [J], "R").vars(["col"]).body(|s, [col]| {
                s.init(|s| s.store(TMP.at([row]), 0.0));
                let x = s.let_("x", A.at((row, col)) * 2.0);
                s.store(TMP.at([row]), TMP.at([row]) + select(x.gt(0.0), x, -x) + exp(x) / sqrt(abs(x) + 1.0));
                s.atomic_add(C.at([row]), x);
                s.store(acc.at([row]), acc.at([row]) + cast(F64, x) * 0.5 + cast(F64, wide + col.floordiv(2)));
            });
            s.sp_iter("seg-iter", [S], "R", |s, [s_]| {
                s.store(TMP.at([row]), TMP.at([row]) + B.at([row, s_]) + cast(F32, base.floordiv(2) - 1));
            });
        });
    })
}

#[test]
fn misc_constructs() {
    let parsed = parse_func("misc.sptir", MISC).unwrap_or_else(|e| panic!("{e}"));
    sparsec_ir::verify::verify_func(&parsed).unwrap_or_else(|e| panic!("{e:?}"));
    let f = misc_dsl().unwrap_or_else(|e| panic!("{e}"));
    same(&f, &parsed);
    assert_eq!(print_func(&f), MISC);
}

// ---- literals and numbering ------------------------------------------------------------------

#[test]
fn literal_typing() {
    // Untyped literals: f64 and i32 Rust values.
    assert_eq!(E::from(0.5).expr(), &Expr::Float(0.5, F32));
    assert!(E::from(0.5).is_untyped());
    assert_eq!(E::from(3).expr(), &Expr::Int(3, I32));
    assert_eq!(E::from(3).typed_as(I64).expr(), &Expr::Int(3, I64));
    assert_eq!(E::from(3).typed_as(F64).expr(), &Expr::Float(3.0, F64));
    assert_eq!(E::from(0.5).typed_as(I32).expr(), &Expr::Float(0.5, F32), "floats do not become ints");
    // Typed ones.
    assert_eq!(E::from(0.1f32).expr(), &Expr::Float(0.1, F32), "shortest decimal");
    assert_eq!(E::from(0.1f32).typed_as(F64).expr(), &Expr::Float(0.1, F32));
    assert_eq!(E::from(7i64).expr(), &Expr::Int(7, I64));
    assert_eq!(E::float(2.0, F16).expr(), &Expr::Float(2.0, F16));
    // Negation folds into literals, like `-1` in the text.
    assert_eq!((-E::from(1)).expr(), &Expr::Int(-1, I32));
    assert!((-E::from(1.5)).is_untyped());
    // Meeting a typed operand; two untyped ones keep the text's defaults.
    assert_eq!(
        (E::float(1.0, F64) + 2.0).expr().clone(),
        Expr::binary(sparsec_ir::BinOp::Add, Expr::Float(1.0, F64), Expr::Float(2.0, F64))
    );
    assert_eq!((2 * E::int(1, I64)).dtype(), I64);
    assert_eq!(
        (E::from(1) + 2.0).expr().clone(),
        Expr::binary(sparsec_ir::BinOp::Add, Expr::Float(1.0, F32), Expr::Float(2.0, F32))
    );
    assert_eq!(E::from(1).lt(2).dtype(), BOOL);
    assert_eq!(select(true, 1.0, E::float(0.0, F64)).dtype(), F64);
}

#[test]
fn late_scalar_parameters_are_numbered_first() {
    // A scalar declared after a `let` still gets the variable the parser would give it.
    let text = "func late(a: handle, n: i32, m: i32) {
  axis I = dense_fixed(n)
  buffer A = match_sparse_buffer(a, [I], i32)
  let x = 1
  sp_iter s([I], \"S\") as [i] {
    A[i] = x + m
  }
}
";
    let f = func("late", |f| {
        let a = f.handle("a");
        let n = f.scalar("n", I32);
        let I = f.dense_fixed("I", n);
        let A = f.match_sparse_buffer("A", a, [I], I32);
        let x = f.let_("x", 1);
        let m = f.scalar("m", I32);
        f.sp_iter_with("s", [I], "S").body(|s, [i]| {
            s.store(A.at([i]), x + m);
        });
    })
    .unwrap();
    same(&f, &parse_func("late.sptir", text).unwrap());
}

#[test]
fn sibling_iterators_may_reuse_names() {
    // sparse_softmax binds `j` three times in sibling scopes: not shadowing.
    let f = workload("sparse_softmax");
    let js = f.vars.iter().filter(|(_, v)| v.name == "j").count();
    assert_eq!(js, 3);
}

// ---- errors ----------------------------------------------------------------------------------

fn one_axis(f: &mut FuncBuilder<'_>) -> (AxisRef, BufferRef) {
    let a = f.handle("a");
    let n = f.scalar("n", I32);
    let I = f.dense_fixed("I", n);
    let A = f.match_sparse_buffer("A", a, [I], F32);
    (I, A)
}

#[test]
fn error_invalid_name() {
    let e = func("f", |f| {
        f.handle("not a name");
    })
    .unwrap_err();
    assert_eq!(e, DslError::InvalidName { what: "parameter", name: "not a name".into() });
    let e = func("f", |f| {
        let (I, _) = one_axis(f);
        f.sp_iter_with("s", [I], "S").vars(["while"]).body(|_, [_]| {});
    })
    .unwrap_err();
    assert_eq!(e, DslError::InvalidName { what: "variable", name: "while".into() });
}

#[test]
fn error_duplicate() {
    let e = func("f", |f| {
        f.handle("a");
        f.scalar("a", I32);
    })
    .unwrap_err();
    assert_eq!(e, DslError::Duplicate { what: "parameter", name: "a".into() });
    let e = func("f", |f| {
        let (I, _) = one_axis(f);
        f.alloc_sparse_buffer("I", [I], F32, Scope::Global);
    })
    .unwrap_err();
    assert_eq!(e, DslError::Duplicate { what: "axis or buffer", name: "I".into() });
}

#[test]
fn error_shadowing() {
    let e = func("f", |f| {
        let (I, _) = one_axis(f);
        f.sp_iter("outer", [I], "S", |s, [_i]| {
            s.sp_iter("inner", [I], "S", |_, [_i]| {});
        });
    })
    .unwrap_err();
    assert_eq!(e, DslError::Shadowing { name: "i".into() });
    let e = func("f", |f| {
        let (I, _) = one_axis(f);
        f.sp_iter_with("s", [I], "S").vars(["n"]).body(|_, [_]| {});
    })
    .unwrap_err();
    assert_eq!(e, DslError::Shadowing { name: "n".into() }, "a scalar parameter is in scope");
}

#[test]
fn error_unknown() {
    let e = func("f", |f| {
        one_axis(f);
        f.axis_named("Q");
    })
    .unwrap_err();
    assert_eq!(e, DslError::Unknown { what: "axis", name: "Q".into() });
    let e = func("f", |f| {
        let (I, _) = one_axis(f);
        let B = f.buffer_named("B");
        f.sp_iter("s", [I], "S", |s, [i]| {
            s.store(B.at([i]), 0.0);
        });
    })
    .unwrap_err();
    assert_eq!(e, DslError::Unknown { what: "buffer", name: "B".into() });
    let e = func("f", |f| {
        one_axis(f);
        f.var_named("i");
    })
    .unwrap_err();
    assert_eq!(e, DslError::Unknown { what: "variable", name: "i".into() });
    // By-name lookups find declared names.
    let f = func("f", |f| {
        one_axis(f);
        let I = f.axis_named("I");
        let A = f.buffer_named("A");
        f.sp_iter("s", [I], "S", |s, [i]| {
            let n = s.var_named("n");
            s.store(A.at([i]), cast(F32, n));
        });
    });
    assert!(f.is_ok(), "{f:?}");
}

#[test]
fn error_out_of_scope() {
    let e = func("f", |f| {
        let (I, A) = one_axis(f);
        let mut escaped = None;
        f.sp_iter("s", [I], "S", |_, [i]| escaped = Some(i));
        f.sp_iter("t", [I], "S", |s, [_]| {
            s.store(A.at([escaped.unwrap()]), 0.0);
        });
    })
    .unwrap_err();
    assert_eq!(e, DslError::OutOfScope { name: "i".into() });
}

#[test]
fn error_foreign_handle() {
    let mut other = None;
    func("g", |f| {
        other = Some(f.dense_fixed("I", 4));
    })
    .unwrap();
    let e = func("f", |f| {
        let a = f.handle("a");
        f.match_sparse_buffer("A", a, [other.unwrap()], F32);
    })
    .unwrap_err();
    assert_eq!(e, DslError::ForeignHandle { what: "axis" });
    // A variable of another function inside an expression.
    let mut other_n = None;
    func("g", |f| {
        other_n = Some(f.scalar("n", I32));
    })
    .unwrap();
    let e = func("f", |f| {
        let (I, A) = one_axis(f);
        f.sp_iter("s", [I], "S", |s, [i]| s.store(A.at([i]), cast(F32, i + other_n.unwrap())));
    })
    .unwrap_err();
    assert_eq!(e, DslError::ForeignHandle { what: "expression" });
}

#[test]
fn error_iter_var_count() {
    let e = func("f", |f| {
        let (I, _) = one_axis(f);
        f.sp_iter("s", [I], "S", |_, [_, _]| {});
    })
    .unwrap_err();
    assert_eq!(e, DslError::IterVarCount { sp_iter: "s".into(), axes: 1, vars: 2 });
    let e = func("f", |f| {
        let (I, _) = one_axis(f);
        f.sp_iter_with("s", [I], "S").vars(["i", "j", "k"]).body(|_, [_]| {});
    })
    .unwrap_err();
    assert_eq!(e, DslError::IterVarCount { sp_iter: "s".into(), axes: 1, vars: 3 });
}

#[test]
fn error_arity() {
    let e = func("f", |f| {
        let (I, A) = one_axis(f);
        f.sp_iter("s", [I], "S", |s, [i]| {
            s.store(A.at((i, 0)), 0.0);
        });
    })
    .unwrap_err();
    assert_eq!(e, DslError::Arity { buffer: "A".into(), expected: 1, found: 2 });
}

#[test]
fn error_not_an_element() {
    let e = func("f", |f| {
        let (I, A) = one_axis(f);
        f.sp_iter("s", [I], "S", |s, [i]| {
            s.store(A.at([i]) + 1.0, 0.0);
        });
    })
    .unwrap_err();
    assert_eq!(e, DslError::NotAnElement { what: "store" });
    let e = func("f", |f| {
        let (I, A) = one_axis(f);
        f.sp_iter("s", [I], "S", |s, [i]| {
            s.atomic_add(A.at([i]) * 2.0, 1.0);
        });
    })
    .unwrap_err();
    assert_eq!(e, DslError::NotAnElement { what: "atomic_add" });
}

#[test]
fn error_misplaced_init() {
    let e = func("f", |f| {
        let (I, A) = one_axis(f);
        f.sp_iter("s", [I], "R", |s, [i]| {
            s.store(A.at([i]), 1.0);
            s.init(|s| s.store(A.at([i]), 0.0));
        });
    })
    .unwrap_err();
    assert_eq!(e, DslError::MisplacedInit { sp_iter: "s".into() });
    let e = func("f", |f| {
        let (I, _) = one_axis(f);
        f.sp_iter("s", [I], "R", |s, [_]| {
            s.init(|_| {});
            s.init(|_| {});
        });
    })
    .unwrap_err();
    assert_eq!(e, DslError::MisplacedInit { sp_iter: "s".into() });
}

#[test]
fn error_duplicate_attr() {
    let e = func("f", |f| {
        f.attr("k", 1).attr("k", 2);
    })
    .unwrap_err();
    assert_eq!(e, DslError::DuplicateAttr { key: "k".into() });
}

#[test]
fn error_verify() {
    // Well-formed DSL use, but the kinds string is bad and the stored value is an i32.
    let e = func("f", |f| {
        let (I, A) = one_axis(f);
        f.sp_iter("s", [I], "SX", |s, [i]| {
            s.store(A.at([i]), i);
        });
    })
    .unwrap_err();
    let DslError::Verify(errors) = &e else { panic!("{e:?}") };
    assert!(errors.len() >= 2, "{errors:?}");
    assert!(e.to_string().starts_with("the function does not verify: "), "{e}");
}

#[test]
fn first_misuse_is_reported() {
    let e = func("f", |f| {
        f.handle("a");
        f.handle("a");
        f.attr("k", 1).attr("k", 1);
    })
    .unwrap_err();
    assert_eq!(e, DslError::Duplicate { what: "parameter", name: "a".into() });
}

/// `union` and `intersect` build the co-iterations of `examples/formats/coiter_add_spmv.sptir`
/// and `coiter_dot.sptir`.
#[test]
fn co_iterations() {
    let text = |stem: &str| {
        let path = format!("{}/../examples/formats/{stem}.sptir", env!("CARGO_MANIFEST_DIR"));
        parse_func(&path, &std::fs::read_to_string(&path).unwrap()).unwrap_or_else(|e| panic!("{e}"))
    };
    let add = func("coiter_add_spmv", |f| {
        let [a, b, x, y, ap, ai, bp, bi] = ["a", "b", "x", "y", "a_indptr", "a_indices", "b_indptr", "b_indices"].map(|n| f.handle(n));
        let [m, n, na, nb] = ["m", "n", "nnz_a", "nnz_b"].map(|v| f.scalar(v, I32));
        let I = f.dense_fixed("I", m);
        let JA = f.sparse_variable("JA", I, n, na, ap, ai);
        let JB = f.sparse_variable("JB", I, n, nb, bp, bi);
        let J_x = f.dense_fixed("J_x", n);
        let A = f.match_sparse_buffer("A", a, [I, JA], F32);
        let B = f.match_sparse_buffer("B", b, [I, JB], F32);
        let X = f.match_sparse_buffer("X", x, [J_x], F32);
        let Y = f.match_sparse_buffer("Y", y, [I], F32);
        f.sp_iter_with("spmv", (I, union([JA, JB])), "SR").vars(["i", "j"]).body(|s, [i, j]| {
            s.init(|s| s.store(Y.at([i]), 0.0));
            s.store(Y.at([i]), Y.at([i]) + (A.at([i, j]) + B.at([i, j])) * X.at([j]));
        });
    })
    .unwrap();
    same(&add, &text("coiter_add_spmv"));
    let dot = func("coiter_dot", |f| {
        let [a, b, s_, ai, bi] = ["a", "b", "s", "a_indices", "b_indices"].map(|n| f.handle(n));
        let [n, na, nb] = ["n", "nnz_a", "nnz_b"].map(|v| f.scalar(v, I32));
        let JA = f.sparse_root("JA", n, na, ai);
        let JB = f.sparse_root("JB", n, nb, bi);
        let O = f.dense_fixed("O", 1);
        let A = f.match_sparse_buffer("A", a, [JA], F32);
        let B = f.match_sparse_buffer("B", b, [JB], F32);
        let S = f.match_sparse_buffer("S", s_, [O], F32);
        f.sp_iter_with("dot", (O, intersect([JA, JB])), "SR").vars(["o", "j"]).body(|s, [o, j]| {
            s.init(|s| s.store(S.at([o]), 0.0));
            s.store(S.at([o]), S.at([o]) + A.at([j]) * B.at([j]));
        });
    })
    .unwrap();
    same(&dot, &text("coiter_dot"));
}

/// `AxisDecl::assembled` declares the sparse output of `examples/formats/sparse_add.sptir`.
#[test]
fn assembled_axes() {
    let path = format!("{}/../examples/formats/sparse_add.sptir", env!("CARGO_MANIFEST_DIR"));
    let want = parse_func(&path, &std::fs::read_to_string(&path).unwrap()).unwrap_or_else(|e| panic!("{e}"));
    let add = func("sparse_add", |f| {
        let names = ["a", "b", "c", "a_indptr", "a_indices", "b_indptr", "b_indices", "c_indptr", "c_indices"];
        let [a, b, c, ap, ai, bp, bi, cp, ci] = names.map(|n| f.handle(n));
        let [m, n, na, nb, nc] = ["m", "n", "nnz_a", "nnz_b", "nnz_c"].map(|v| f.scalar(v, I32));
        let I = f.dense_fixed("I", m);
        let JA = f.sparse_variable("JA", I, n, na, ap, ai);
        let JB = f.sparse_variable("JB", I, n, nb, bp, bi);
        let JC = f.axis_with(AxisOpts::new()).assembled("JC", I, n, nc, cp, ci, MergeOp::Union, &[JA, JB]);
        let A = f.match_sparse_buffer("A", a, [I, JA], F32);
        let B = f.match_sparse_buffer("B", b, [I, JB], F32);
        let C = f.match_sparse_buffer("C", c, [I, JC], F32);
        f.sp_iter_with("add", (I, union([JA, JB])), "SS").vars(["i", "j"]).body(|s, [i, j]| {
            s.store(C.at([i, j]), A.at([i, j]) + B.at([i, j]));
        });
    })
    .unwrap();
    same(&add, &want);
}
