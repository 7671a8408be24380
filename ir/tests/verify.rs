//! The verifier: every valid program verifies, and every rule is caught — with all errors of
//! a program collected, not just the first.
//!
//! Faults the parser already rejects (or cannot express) are built by editing parsed IR;
//! programs written as text, valid or not, are filetests (`tests/filetests/verify/`).

use sparsec_ir::text::{parse, parse_func};
use sparsec_ir::verify::{render_errors, verify_func, verify_module, VerifyError, VerifyErrorKind as K};
use sparsec_ir::*;
use std::path::PathBuf;

// ---- helpers ------------------------------------------------------------------------------

/// A CSR SpMM prelude; `BODY` is replaced by the statements under test.
const CSR: &str = "func csrmm(a: handle, b: handle, c: handle, indptr: handle, indices: handle, m: i32, n: i32, feat: i32, nnz: i32) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz, indptr, indices)
  axis J_detach = dense_fixed(n)
  axis K = dense_fixed(feat)
  buffer A = match_sparse_buffer(a, [I, J], f32)
  buffer B = match_sparse_buffer(b, [J_detach, K], f32)
  buffer C = match_sparse_buffer(c, [I, K], f32)
BODY
}";

/// A Stage II prelude with dense buffers `X` (f32, 2-D) and `L` (i32, 1-D).
const DENSE: &str = "func g(x: handle, l: handle, m: i32, n: i32) stage STAGE {
  buffer X = match_buffer(x, [m, n], f32)
  buffer L = match_buffer(l, [m], i32)
BODY
}";

fn csr(body: &str) -> Func {
    parse_ok(&CSR.replace("BODY", body))
}

fn dense(stage: &str, body: &str) -> Func {
    parse_ok(&DENSE.replace("STAGE", stage).replace("BODY", body))
}

fn parse_ok(src: &str) -> Func {
    parse_func("test.sptir", src).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

/// The error kinds of `f`, in order (empty when it verifies).
fn kinds(f: &Func) -> Vec<K> {
    verify_func(f).err().unwrap_or_default().into_iter().map(|e| e.kind).collect()
}

fn s(x: &str) -> String {
    x.to_string()
}

fn var(f: &Func, name: &str) -> VarId {
    f.var_by_name(name).unwrap_or_else(|| panic!("no variable {name}"))
}

/// The statements of the first sp_iter of the body.
fn sp_iter_mut(f: &mut Func) -> &mut SpIter {
    f.body
        .iter_mut()
        .find_map(|s| match &mut s.kind {
            StmtKind::SpIter(it) => Some(it),
            _ => None,
        })
        .expect("an sp_iter")
}

const SPMM: &str = r#"  sp_iter csrmm([I, J, K], "SRS") as [i, j, k] {
    init {
      C[i, k] = 0.0
    }
    C[i, k] = C[i, k] + A[i, j] * B[j, k]
  }"#;

// ---- valid programs ---------------------------------------------------------------------

fn workloads() -> Vec<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/workloads"));
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut v: Vec<PathBuf> =
        entries.map(|e| e.expect("dir entry").path()).filter(|p| p.extension().is_some_and(|e| e == "sptir")).collect();
    v.sort();
    v
}

#[test]
fn corpus_verifies() {
    for path in workloads() {
        let src = std::fs::read_to_string(&path).unwrap();
        let name = path.display().to_string();
        let m = parse(&name, &src).unwrap_or_else(|e| panic!("{e}"));
        if let Err(errors) = verify_module(&m) {
            panic!("{}", render_errors(&errors, &SourceFile::new(&name, &src)));
        }
    }
}

/// Valid programs written as text are filetests (`tests/filetests/verify/`); this one is the
/// example shipped in `examples/`.
#[test]
fn example_program_verifies() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/csrmm.sptir")).unwrap();
    assert_eq!(kinds(&parse_ok(&src)), vec![]);
}

// ---- collecting -------------------------------------------------------------------------

#[test]
fn errors_render_with_locations() {
    let src = CSR.replace("BODY", "  sp_iter s([I, J], \"SR\") as [i, j] {\n    C[i, j] = 0.0\n  }");
    let f = parse_ok(&src);
    let errors = verify_func(&f).unwrap_err();
    let text = render_errors(&errors, &SourceFile::new("t.sptir", &src));
    assert_eq!(
        text,
        "t.sptir:10:5: reduction iterator `j` of sp_iter `s` indexes the store to `C`: a reduction may only write \
         outputs indexed by spatial iterators\n   |\n10 |     C[i, j] = 0.0\n   |     ^^^^^^^^^^^^^\n"
    );
    // IR built without source renders as a bare message.
    let e = VerifyError { span: Span::NONE, kind: K::EvaluateNotCall };
    assert_eq!(render_errors(&[e], &SourceFile::new("x", "")), "x: only calls can be evaluated as statements\n");
}

// ---- names --------------------------------------------------------------------------------

#[test]
fn duplicate_parameters() {
    let mut f = csr("");
    let p = f.params[0].clone();
    f.params.push(p);
    assert_eq!(kinds(&f), vec![K::DuplicateParam { name: s("a") }]);
}

#[test]
fn scalar_parameter_variables() {
    let mut f = csr("");
    let m = var(&f, "m");
    f.vars[m].name = s("q");
    let n = f.param_index("n").unwrap();
    f.params[n].kind = ParamKind::Scalar(Handle::from_index(99));
    assert_eq!(
        kinds(&f),
        vec![
            K::ParamVarName { param: s("m"), var: s("q") },
            K::DanglingHandle { what: "variable", index: 99, len: 4 },
            // `n` is then no parameter where the axes use it.
            K::AxisExprNotParamExpr { axis: s("J"), field: "length", culprit: s("variable `n`") },
            K::AxisExprNotParamExpr { axis: s("J_detach"), field: "length", culprit: s("variable `n`") },
        ]
    );
}

#[test]
fn axis_and_buffer_names_clash() {
    let mut f = csr("");
    let k = f.axis_by_name("K").unwrap();
    f.axes[k].name = s("J");
    let c = f.buffer_by_name("C").unwrap();
    f.buffers[c].name = s("I");
    let b = f.buffer_by_name("B").unwrap();
    f.buffers[b].name = s("A");
    assert_eq!(
        kinds(&f),
        vec![
            K::NameClash { name: s("J"), first: "an axis", second: "an axis" },
            K::NameClash { name: s("A"), first: "a buffer", second: "a buffer" },
            K::NameClash { name: s("I"), first: "an axis", second: "a buffer" },
        ]
    );
}

#[test]
fn names_print_as_identifiers() {
    // Variables spelled like literals (`inf`) are
    // `tests/filetests/verify/structure/reserved_variable_names.sptir`.
    let mut f = dense("II", "  for i in serial(4) {\n  }");
    let i = var(&f, "i");
    f.vars[i].name = s("i.outer");
    let x = f.buffer_by_name("X").unwrap();
    f.buffers[x].name = s("for");
    let l = f.param_index("l").unwrap();
    f.params[l].name = s("2l");
    assert_eq!(
        kinds(&f),
        vec![
            K::BadName { what: "parameter", name: s("2l") },
            K::BadName { what: "buffer", name: s("for") },
            K::BadName { what: "variable", name: s("i.outer") },
        ]
    );
}

#[test]
fn duplicate_functions_in_a_module() {
    let f = csr("");
    let m = Module { funcs: vec![f.clone(), f] };
    let errors = verify_module(&m).unwrap_err();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].kind, K::DuplicateFunc { name: s("csrmm") });
}

// ---- axes ---------------------------------------------------------------------------------

/// `m`, `n`, `nnz` and handles `indptr`, `indices`, and the given axes.
fn axes_only(axes: &str) -> Func {
    parse_ok(&format!("func f(indptr: handle, indices: handle, m: i32, n: i32, nnz: i32) {{\n{axes}\n}}"))
}

#[test]
fn axis_parent_defined_after_it() {
    let f = axes_only("axis I = dense_fixed(m)\naxis J = sparse_variable(I, n, nnz, indptr, indices)");
    // Rebuild with J first, still pointing at I (now second).
    let mut g = f.clone();
    g.axes = Arena::new();
    let (i, j) = (f.axes[Handle::from_index(0)].clone(), f.axes[Handle::from_index(1)].clone());
    g.axes.append(Axis { parent: Some(Handle::from_index(1)), ..j });
    g.axes.append(i);
    assert_eq!(kinds(&g), vec![K::AxisParentAfter { axis: s("J"), parent: s("I") }]);
    // An axis that is its own parent is caught the same way.
    let mut h = f;
    h.axes[Handle::from_index(1)].parent = Some(Handle::from_index(1));
    assert_eq!(kinds(&h), vec![K::AxisParentAfter { axis: s("J"), parent: s("J") }]);
}

#[test]
fn axis_parent_presence() {
    let mut f = axes_only(
        "axis I = dense_fixed(m)\naxis J = sparse_variable(I, n, nnz, indptr, indices)\naxis K = dense_fixed(n)",
    );
    let (i, j, k) = (Handle::from_index(0), Handle::from_index(1), Handle::from_index(2));
    f.axes[j].parent = None;
    f.axes[k].parent = Some(i);
    assert_eq!(
        kinds(&f),
        vec![
            K::MissingAxisParent { axis: s("J"), kind: AxisKind::SparseVariable },
            K::UnexpectedAxisParent { axis: s("K"), parent: s("I") },
        ]
    );
    f.axes[k].parent = Some(Handle::from_index(7));
    assert!(kinds(&f).contains(&K::UnexpectedAxisParent { axis: s("K"), parent: s("#7") }));
}

#[test]
fn axis_fields_per_kind() {
    let mut f = axes_only(
        "axis I = dense_fixed(m)
axis DV = dense_variable(I, n, nnz, indptr)
axis SF = sparse_fixed(I, n, 2, indices)
axis SV = sparse_variable(I, n, nnz, indptr, indices)",
    );
    let h = |i| Handle::<Axis>::from_index(i);
    f.axes[h(0)].nnz = Some(Expr::i32(1));
    f.axes[h(1)].indices = f.axes[h(3)].indices;
    f.axes[h(2)].nnz = None;
    f.axes[h(2)].indptr = f.axes[h(3)].indptr;
    f.axes[h(3)].indices = None;
    assert_eq!(
        kinds(&f),
        vec![
            K::AxisFieldUnexpected { axis: s("I"), kind: AxisKind::DenseFixed, field: "nnz" },
            K::AxisFieldUnexpected { axis: s("DV"), kind: AxisKind::DenseVariable, field: "indices" },
            K::AxisFieldMissing { axis: s("SF"), kind: AxisKind::SparseFixed, field: "nnz" },
            K::AxisFieldUnexpected { axis: s("SF"), kind: AxisKind::SparseFixed, field: "indptr" },
            K::AxisFieldMissing { axis: s("SV"), kind: AxisKind::SparseVariable, field: "indices" },
        ]
    );
}

#[test]
fn axis_arrays_are_handles() {
    let mut f = axes_only("axis I = dense_fixed(m)\naxis J = sparse_variable(I, n, nnz, indptr, indices)");
    let j = Handle::from_index(1);
    f.axes[j].indptr = f.param_index("m");
    f.axes[j].indices = Some(42);
    assert_eq!(
        kinds(&f),
        vec![
            K::AxisArrayNotHandle { axis: s("J"), field: "indptr", param: s("m") },
            K::DanglingHandle { what: "parameter", index: 42, len: 5 },
        ]
    );
}

/// A variable that is not a parameter in an axis length (the parser cannot name one there);
/// the other length faults are
/// `tests/filetests/verify/structure/axis_lengths_are_integer_parameter_expressions.sptir`.
#[test]
fn axis_lengths_use_no_other_variables() {
    let mut f = axes_only("axis L = dense_fixed(m * 2 + 1)");
    let v = f.add_var("i", DType::I32);
    f.axes[Handle::from_index(0)].length = Expr::Var(v);
    assert_eq!(kinds(&f), vec![K::AxisExprNotParamExpr { axis: s("L"), field: "length", culprit: s("variable `i`") }]);
}

#[test]
fn axis_index_dtype() {
    let mut f = axes_only("axis I = dense_fixed(m)");
    f.axes[Handle::from_index(0)].idtype = DType::F32;
    assert_eq!(kinds(&f), vec![K::AxisIdType { axis: s("I"), found: DType::F32 }]);
}

// ---- buffers ------------------------------------------------------------------------------

/// A buffer stored in a scalar parameter (the parser cannot write one); shape and option
/// types are `tests/filetests/verify/buffers/shape_and_option_types.sptir`.
#[test]
fn buffer_storage_is_a_handle() {
    let mut f = parse_ok(
        "func f(b: handle, m: i32) stage III {
  buffer B = match_buffer(b, [m], f16, default = 1.0f16)
}",
    );
    let b = f.buffer_by_name("B").unwrap();
    f.buffers[b].storage = Storage::Param(f.param_index("m").unwrap());
    assert_eq!(kinds(&f), vec![K::BufferStorageNotHandle { buffer: s("B"), param: s("m") }]);
}

// ---- stages -------------------------------------------------------------------------------

#[test]
fn stage_two_has_no_sp_iter() {
    let mut f = csr(SPMM);
    f.stage = Stage::II;
    assert_eq!(
        kinds(&f),
        vec![K::StmtNotAllowed { stmt: "sp_iter", stage: Stage::II, hint: "sparse iterations belong to Stage I" }]
    );
}

#[test]
fn stage_three_has_no_sparse_buffers_or_sp_iter() {
    let mut f = csr(SPMM);
    f.stage = Stage::III;
    let errors = kinds(&f);
    // Axes may stay: they record the arguments' sparse structure.
    assert!(errors.iter().all(|e| !format!("{e:?}").contains("Axis")), "{errors:?}");
    for buffer in ["A", "B", "C"] {
        assert!(errors.contains(&K::SparseBufferAtStageIII { buffer: s(buffer) }), "{errors:?}");
    }
    assert!(errors.contains(&K::StmtNotAllowed {
        stmt: "sp_iter",
        stage: Stage::III,
        hint: "sparse iterations belong to Stage I"
    }));
    assert_eq!(errors.len(), 4);
}

// ---- sparse iterations --------------------------------------------------------------------

#[test]
fn iterator_count_matches_axes() {
    let mut f = csr(SPMM);
    let it = sp_iter_mut(&mut f);
    it.vars.pop();
    assert_eq!(
        kinds(&f),
        vec![
            K::SpIterVarCount { sp_iter: s("csrmm"), axes: 3, vars: 2 },
            K::KindsLength { kinds: s("SRS"), len: 3, sp_iter: s("csrmm"), iters: 2 },
            // `k` is no longer bound.
            K::VarOutOfScope { var: s("k") },
            K::VarOutOfScope { var: s("k") },
            K::VarOutOfScope { var: s("k") },
            K::VarOutOfScope { var: s("k") },
        ]
    );
}

#[test]
fn iterator_variables_are_distinct() {
    let mut f = csr(r#"  sp_iter s([I, K], "SS") as [i, k] {
    C[i, k] = 0.0
  }"#);
    let i = var(&f, "i");
    sp_iter_mut(&mut f).vars[1] = i;
    let errors = kinds(&f);
    assert_eq!(errors[0], K::VarBoundTwice { var: s("i") });
}

#[test]
fn iterator_dtype_is_the_axis_idtype() {
    let mut f = csr(SPMM);
    let j = var(&f, "j");
    f.vars[j].dtype = DType::I64;
    let errors = kinds(&f);
    assert_eq!(
        errors[0],
        K::SpIterVarDType { sp_iter: s("csrmm"), var: s("j"), axis: s("J"), expected: DType::I32, found: DType::I64 }
    );
    // i64 indices are fine, so this is the only error.
    assert_eq!(errors.len(), 1);
}

// ---- accesses -----------------------------------------------------------------------------

// ---- reductions ---------------------------------------------------------------------------

// ---- scoping ------------------------------------------------------------------------------

#[test]
fn variables_are_used_in_scope() {
    // Move the body store of a reduction out of its sp_iter: `i`, `j`, `k` dangle.
    let mut f = csr(SPMM);
    let store = sp_iter_mut(&mut f).body.pop().unwrap();
    f.body.push(store);
    assert_eq!(kinds(&f).iter().filter(|k| matches!(k, K::VarOutOfScope { .. })).count(), 8);
    // A `let` ends with its statement list.
    let mut g = dense("II", "  if true {\n    let x = 1\n  }\n  L[0] = 0");
    let x = var(&g, "x");
    let StmtKind::Store { value, .. } = &mut g.body[1].kind else { panic!() };
    *value = Expr::Var(x);
    assert_eq!(kinds(&g), vec![K::VarOutOfScope { var: s("x") }]);
}

#[test]
fn a_variable_is_bound_once() {
    let mut f = dense("II", "  for i in serial(4) {\n  }\n  for j in serial(4) {\n  }");
    let i = var(&f, "i");
    let StmtKind::For(l) = &mut f.body[1].kind else { panic!() };
    l.var = i;
    assert_eq!(kinds(&f), vec![K::VarBoundTwice { var: s("i") }]);
}

#[test]
fn statement_allocations_are_allocations_made_once() {
    let mut f = dense("II", "  if true {\n    buffer t = alloc_buffer([n], f32, local)\n  }");
    let t = f.buffer_by_name("t").unwrap();
    let x = f.buffer_by_name("X").unwrap();
    f.body.push(Stmt::new(StmtKind::Alloc(t)));
    f.body.push(Stmt::new(StmtKind::Alloc(x)));
    assert_eq!(kinds(&f), vec![K::AllocTwice { buffer: s("t") }, K::AllocOfParamBuffer { buffer: s("X") }]);
}

// ---- types --------------------------------------------------------------------------------

/// Wrong arity can only be built by hand (the parser knows each intrinsic's arity); the
/// operand types are `tests/filetests/verify/types/intrinsic_types.sptir`.
#[test]
fn intrinsic_arity() {
    let mut f = dense("II", "");
    f.body.push(Stmt::new(StmtKind::Evaluate(Expr::Call(Intrinsic::Sqrt, vec![]))));
    assert_eq!(kinds(&f), vec![K::IntrinsicArity { name: "sqrt", expected: 1, found: 0 }]);
}

/// A block iterator whose type differs from its binding's (the parser types it from the
/// extent); float extents and bindings are `tests/filetests/verify/types/block_iterator_types.sptir`.
#[test]
fn block_iterator_binding_dtype() {
    let mut f = dense("II", "  for i in serial(m) {\n    block b(vk: spatial(4) = i) {\n    }\n  }");
    let vk = var(&f, "vk");
    f.vars[vk].dtype = DType::I64;
    assert_eq!(kinds(&f), vec![K::BlockIterBindingDType { var: s("vk"), expected: DType::I64, found: DType::I32 }]);
}

/// Literals whose value does not fit their type, built by hand; an i32 literal out of range
/// is `tests/filetests/verify/types/int_literals_fit_i32.sptir`.
#[test]
fn literals_fit_their_types() {
    let mut f = dense("II", "");
    f.body.push(Stmt::new(StmtKind::Evaluate(Expr::Call(Intrinsic::Exp, vec![Expr::Float(1.0, DType::I32)]))));
    f.body.push(Stmt::new(StmtKind::Evaluate(Expr::Cast(DType::F32, Box::new(Expr::Int(1, DType::F32))))));
    assert_eq!(
        kinds(&f),
        vec![
            K::LiteralDType { literal: s("1.0"), dtype: DType::I32 },
            K::OperandType { op: "exp", expected: "float", found: DType::I32 },
            K::LiteralDType { literal: s("1"), dtype: DType::F32 },
        ]
    );
}

#[test]
fn only_calls_are_evaluated() {
    let mut f = dense("II", "");
    f.body.push(Stmt::new(StmtKind::Evaluate(Expr::i32(1))));
    f.body.push(Stmt::new(StmtKind::Evaluate(Expr::binary(BinOp::Max, Expr::i32(1), Expr::i32(2)))));
    assert_eq!(kinds(&f), vec![K::EvaluateNotCall]);
}

// ---- robustness ---------------------------------------------------------------------------

#[test]
fn dangling_handles_are_reported_not_panicked_on() {
    let mut f = csr(SPMM);
    let bad_var = Handle::<Var>::from_index(1000);
    let bad_buf = Handle::<Buffer>::from_index(1000);
    let bad_axis = Handle::<Axis>::from_index(1000);
    let it = sp_iter_mut(&mut f);
    it.axes.push(SpIterAxis::Attach { axis: bad_axis, parent: bad_axis });
    it.axes.push(SpIterAxis::Fuse(vec![bad_axis, bad_axis]));
    it.vars.push(bad_var);
    it.body.push(Stmt::new(StmtKind::Store {
        buffer: bad_buf,
        indices: vec![Expr::Var(bad_var)],
        value: Expr::Load(bad_buf, vec![]),
    }));
    f.body.push(Stmt::new(StmtKind::Alloc(bad_buf)));
    f.axes[Handle::from_index(1)].parent = Some(bad_axis);
    f.buffers[Handle::from_index(0)].layout = Layout::Sparse(vec![bad_axis]);
    f.body.push(Stmt::new(StmtKind::For(For {
        var: bad_var,
        min: Expr::i32(0),
        extent: Expr::Var(bad_var),
        kind: ForKind::Serial,
        body: vec![],
        attrs: Attrs::new(),
    })));
    f.body.push(Stmt::new(StmtKind::Block(Block {
        name: s("b"),
        iters: vec![BlockIter { var: bad_var, kind: IterKind::Reduce, extent: Expr::i32(1), binding: Expr::i32(0) }],
        reads: vec![Region { buffer: bad_buf, ranges: vec![] }],
        writes: vec![],
        init: None,
        body: vec![],
        attrs: Attrs::new(),
    })));
    let errors = kinds(&f);
    let dangling = errors.iter().filter(|k| matches!(k, K::DanglingHandle { .. })).count();
    assert!(dangling >= 10, "{errors:?}");
    // The printer copes with the same IR.
    let printed = sparsec_ir::text::print_func(&f);
    assert!(printed.contains("<bad-buffer>"));
}
