//! The verifier: every valid program verifies, and every rule is caught — with all errors of
//! a program collected, not just the first.
//!
//! Faults the parser already rejects (or cannot express) are built by editing parsed IR.

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

#[test]
fn example_and_built_in_programs_verify() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/csrmm.sptir")).unwrap();
    assert_eq!(kinds(&parse_ok(&src)), vec![]);
    assert_eq!(kinds(&csr(SPMM)), vec![]);
    assert_eq!(kinds(&parse_ok(STAGE2)), vec![]);
    assert_eq!(kinds(&parse_ok(STAGE3)), vec![]);
}

/// A Stage II program using every statement form.
const STAGE2: &str = r#"
func f(a: handle, indptr: handle, m: i32, nnz: i32) stage II attrs(global_symbol = "main") {
  axis I = dense_fixed(m)
  axis J = dense_variable(I, 100, nnz, indptr, idtype = i64, sorted = false)
  buffer A = match_sparse_buffer(a, [I, J], f32, default = -1.0)
  buffer J_indptr = match_sparse_buffer(indptr, [I], i64, extra_storage = 1)
  buffer T = alloc_buffer([4, m], f32, shared)
  for i in blockIdx.x(m) {
    block "blk-0"(vi: spatial(m) = i) {
      reads(J_indptr[vi:vi + 2], A[vi, 0:100])
      writes(T[0, vi])
      init {
        T[0, vi] = 0.0
      }
      buffer low = alloc_buffer([1], i32, local)
      low[0] = -(1) - -2 * (3 + 4) // 2 % 5
      let x: i64 = cast(i64, low[0])
      while low[0] < 10 && !(low[0] == 3) || false {
        low[0] = low[0] + 1
      }
      if x > 1i64 {
        T[0, vi] = max(T[0, vi], exp(-inf))
      } else if x == 0i64 {
        T[0, vi] = select(true, 1.0, min_value(f32))
      } else {
        atomic_add(T[0, vi], pow(abs(-1.5e-7), 2.0))
      }
      for j in serial(4, start = 2) {
        T[j, vi] = T[j, vi] + cast(f32, j)
      }
    }
  }
}
"#;

/// A Stage III program: flat buffers, thread loops and a reduction block.
const STAGE3: &str = r#"
func f(a: handle, c: handle, m: i32, n: i32) stage III {
  buffer A = match_buffer(a, [m * n], f32)
  buffer C = match_buffer(c, [m], f32)
  for bx in blockIdx.x(m) {
    for tx in threadIdx.x(n) {
      block red(vi: spatial(m) = bx, vj: reduce(n) = tx) {
        reads(A[vi * n + vj])
        writes(C[vi])
        init {
          C[vi] = 0.0
        }
        C[vi] = C[vi] + A[vi * n + vj]
      }
    }
  }
}
"#;

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
    let mut f = dense("II", "  let inf = 1\n  let nanf16 = 2\n  let inf_ok = 3\n  for i in serial(4) {\n  }");
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
            K::BadName { what: "variable", name: s("inf") },
            K::BadName { what: "variable", name: s("nanf16") },
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

#[test]
fn axis_lengths_are_integer_parameter_expressions() {
    let f = parse_ok(
        "func f(x: handle, indptr: handle, m: i32, len: f32) {
  buffer X = match_buffer(x, [4], i32)
  axis I = dense_fixed(2.5)
  axis J = dense_variable(I, X[0], m, indptr)
  axis K = dense_fixed(len)
  axis L = dense_fixed(m * 2 + 1)
}",
    );
    assert_eq!(
        kinds(&f),
        vec![
            K::AxisExprNotInt { axis: s("I"), field: "length", found: DType::F32 },
            K::AxisExprNotParamExpr { axis: s("J"), field: "length", culprit: s("a load from `X`") },
            K::AxisExprNotInt { axis: s("K"), field: "length", found: DType::F32 },
        ]
    );
    // A variable that is not a parameter.
    let mut g = f.clone();
    let v = g.add_var("i", DType::I32);
    g.axes[Handle::from_index(3)].length = Expr::Var(v);
    assert!(kinds(&g).contains(&K::AxisExprNotParamExpr { axis: s("L"), field: "length", culprit: s("variable `i`") }));
}

#[test]
fn axis_index_dtype() {
    let mut f = axes_only("axis I = dense_fixed(m)");
    f.axes[Handle::from_index(0)].idtype = DType::F32;
    assert_eq!(kinds(&f), vec![K::AxisIdType { axis: s("I"), found: DType::F32 }]);
}

// ---- buffers ------------------------------------------------------------------------------

#[test]
fn buffer_shapes_storage_and_options() {
    let mut f = parse_ok(
        "func f(a: handle, b: handle, m: i32) stage III {
  buffer A = match_buffer(a, [m, 2.0], f32, extra_storage = 1.0, default = 1)
  buffer B = match_buffer(b, [m], f16, default = 1.0f16)
}",
    );
    let b = f.buffer_by_name("B").unwrap();
    f.buffers[b].storage = Storage::Param(f.param_index("m").unwrap());
    assert_eq!(
        kinds(&f),
        vec![
            K::BufferShapeNotInt { buffer: s("A"), dim: 1, found: DType::F32 },
            K::BufferExtraStorageNotInt { buffer: s("A"), found: DType::F32 },
            K::BufferDefaultDType { buffer: s("A"), expected: DType::F32, found: DType::I32 },
            K::BufferStorageNotHandle { buffer: s("B"), param: s("m") },
        ]
    );
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
fn statement_allocations_are_scoped() {
    let f = dense(
        "II",
        "  if true {\n    buffer t = alloc_buffer([n], f32, local)\n    t[0] = 1.0\n  }\n  X[0, 0] = t[0]\n  t[1] = 2.0",
    );
    assert_eq!(kinds(&f), vec![K::BufferOutOfScope { buffer: s("t") }, K::BufferOutOfScope { buffer: s("t") }]);
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

#[test]
fn allocation_shapes_see_the_variables_in_scope() {
    let f =
        dense("II", "  for i in serial(4) {\n    buffer t = alloc_buffer([i + 1], f32, local)\n    t[i] = 0.0\n  }");
    assert_eq!(kinds(&f), vec![]);
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

#[test]
fn block_iterators() {
    let mut f = dense(
        "II",
        "  for i in serial(m) {\n    block b(vi: spatial(2.0) = i, vf: spatial(4) = 1.0, vk: spatial(4) = i) {\n    }\n  }",
    );
    let vk = var(&f, "vk");
    f.vars[vk].dtype = DType::I64;
    assert_eq!(
        kinds(&f),
        vec![
            K::BlockIterExtentNotInt { var: s("vi"), found: DType::F32 },
            K::BlockIterNotInt { var: s("vf"), found: DType::F32 },
            K::BlockIterBindingDType { var: s("vk"), expected: DType::I64, found: DType::I32 },
        ]
    );
}

#[test]
fn literals_fit_their_types() {
    let mut f = dense("II", "  let x = 2147483648\n  let y = -2147483648");
    f.body.push(Stmt::new(StmtKind::Evaluate(Expr::Call(Intrinsic::Exp, vec![Expr::Float(1.0, DType::I32)]))));
    f.body.push(Stmt::new(StmtKind::Evaluate(Expr::Cast(DType::F32, Box::new(Expr::Int(1, DType::F32))))));
    assert_eq!(
        kinds(&f),
        vec![
            K::LiteralDType { literal: s("2147483648"), dtype: DType::I32 },
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

// ---- block kinds (Stage II/III) -----------------------------------------------------------

/// Flat buffers `X`, `Y` (f32, `m * n`) and row pointers `L` (i32, `m + 1`).
const FLAT: &str = "func g(x: handle, y: handle, l: handle, m: i32, n: i32) stage STAGE {
  buffer X = match_buffer(x, [m * n], f32)
  buffer Y = match_buffer(y, [m * n], f32)
  buffer L = match_buffer(l, [m + 1], i32)
BODY
}";

/// Hand-written blocks and the errors they must give (none for a valid one), at Stage II
/// and III alike.
const BLOCK_CASES: &[(&str, &str, &[&str])] = &[
    (
        "buffer_private_to_the_outer_loop",
        "  for i in serial(m) {\n    buffer S = alloc_buffer([8], f32, local)\n    for j in serial(8) {\n      block b(vi: spatial(m) = i, vj: spatial(8) = j) {\n        S[vj] = X[vi * n + vj]\n        Y[vi * n + vj] = S[vj] * 2.0\n      }\n    }\n  }",
        &[],
    ),
    (
        "private_buffer_read_by_another_point",
        "  for i in serial(m) {\n    buffer S = alloc_buffer([8], f32, local)\n    for j in serial(8) {\n      block b(vi: spatial(m) = i, vj: spatial(8) = j) {\n        S[vj] = X[vi * n + vj]\n        Y[vi * n + vj] = S[7 - vj] * 2.0\n      }\n    }\n  }",
        &["block `b`: `S` is read at [7 - vj] but written at [vj], so spatial points depend on each other; they must be independent"],
    ),
    (
        "elementwise",
        "  for i in serial(m) {\n    for j in serial(n) {\n      block b(vi: spatial(m) = i, vj: spatial(n) = j) {\n        Y[vi * n + vj] = X[vi * n + vj] * 2.0\n      }\n    }\n  }",
        &[],
    ),
    (
        "row_sum",
        "  for i in serial(m) {\n    for j in serial(n) {\n      block b(vi: spatial(m) = i, vj: reduce(n) = j) {\n        init {\n          Y[vi] = 0.0\n        }\n        Y[vi] = Y[vi] + X[vi * n + vj]\n      }\n    }\n  }",
        &[],
    ),
    (
        "split",
        "  for i0 in serial(8) {\n    for i1 in serial(4) {\n      block b(vi: spatial(32) = i0 * 4 + i1) {\n        Y[vi] = X[vi]\n      }\n    }\n  }",
        &[],
    ),
    (
        "split_three_ways",
        "  for i0 in serial(2) {\n    for i1 in serial(n) {\n      for i2 in serial(8) {\n        block b(vi: spatial(m) = (i0 * n + i1) * 8 + i2) {\n          Y[vi] = X[vi]\n        }\n      }\n    }\n  }",
        &[],
    ),
    (
        "fuse",
        "  for f in serial(m * n) {\n    block b(vi: spatial(m) = f // n, vj: spatial(n) = f % n) {\n      Y[vi * n + vj] = X[vi * n + vj]\n    }\n  }",
        &[],
    ),
    (
        "fuse_then_split",
        "  for f0 in serial(m) {\n    for f1 in serial(32) {\n      block b(vi: spatial(m) = (f0 * 32 + f1) // n, vj: spatial(n) = (f0 * 32 + f1) % n) {\n        Y[vi * n + vj] = X[vi * n + vj]\n      }\n    }\n  }",
        &[],
    ),
    (
        "offset",
        "  for i in serial(m) {\n    block b(vi: spatial(m + 1) = i + 1) {\n      Y[vi] = 1.0\n    }\n  }",
        &[],
    ),
    (
        "sparse_positions",
        "  for i in serial(m) {\n    block r(vi: spatial(m) = i) {\n      for j in serial(L[vi + 1] - L[vi]) {\n        block e(vj: spatial(n) = L[vi] + j) {\n          Y[vj] = X[vj] * 2.0\n        }\n      }\n    }\n  }",
        &[],
    ),
    (
        "row_cache_read_back",
        "  for i in serial(m) {\n    block r(vi: spatial(m) = i) {\n      for k in serial(n) {\n        block a(vk: spatial(n) = k) {\n          Y[vi * n + vk] = 0.0\n        }\n      }\n      for k2 in serial(n) {\n        block c(vk2: spatial(n) = k2) {\n          X[vi * n + vk2] = Y[vi * n + vk2] + 1.0\n        }\n      }\n    }\n  }",
        &[],
    ),
    (
        "reduction_declared_spatial",
        "  for i in serial(m) {\n    for j in serial(n) {\n      block b(vi: spatial(m) = i, vj: spatial(n) = j) {\n        Y[vi] = Y[vi] + X[vi * n + vj]\n      }\n    }\n  }",
        &["block `b`: the store to `Y` does not depend on spatial iterator `vj`, so it reduces over it: declare it reduce"],
    ),
    (
        "init_reads_reduce",
        "  for i in serial(m) {\n    for j in serial(n) {\n      block b(vi: spatial(m) = i, vj: reduce(n) = j) {\n        init {\n          Y[vi] = X[vi * n + vj]\n        }\n        Y[vi] = Y[vi] + X[vi * n + vj]\n      }\n    }\n  }",
        &["block `b`: the init depends on reduce iterator `vj`, but it runs once per spatial point, before the reduction"],
    ),
    (
        "neighbour_read",
        "  for i in serial(m) {\n    block b(vi: spatial(m) = i) {\n      Y[vi] = Y[vi + 1] + 1.0\n    }\n  }",
        &["block `b`: `Y` is read at [vi + 1] but written at [vi], so spatial points depend on each other; they must be independent"],
    ),
    (
        "neighbour_row",
        "  for i in serial(m) {\n    block r(vi: spatial(m) = i) {\n      for k in serial(n) {\n        block a(vk: spatial(n) = k) {\n          Y[vi * n + vk] = Y[(vi + 1) * n + vk]\n        }\n      }\n    }\n  }",
        &[
            "block `r`: `Y` is read at [(vi + 1) * n + vk] but written at [vi * n + vk], so spatial points depend on each other; they must be independent",
            // Conservative inside the row too: the analysis does not bound `vk` by `n`.
            "block `a`: `Y` is read at [(vi + 1) * n + vk] but written at [vi * n + vk], so spatial points depend on each other; they must be independent",
        ],
    ),
    (
        "two_iterations_one_point",
        "  for i in serial(m) {\n    block b(vi: spatial(m) = i // 2) {\n      Y[vi] = 1.0\n    }\n  }",
        &["block `b`: the binding `vi = i // 2` is not provably one-to-one in the loops that drive the block, so two iterations may share a spatial point (bind loop variables, `v + c`, `c * v + w` with `w` below `c`, or `f // n` with `f % n`; else declare it reduce)"],
    ),
    (
        "overlapping_split",
        "  for i0 in serial(8) {\n    for i1 in serial(8) {\n      block b(vi: spatial(64) = i0 * 4 + i1) {\n        Y[vi] = 1.0\n      }\n    }\n  }",
        &["block `b`: the binding `vi = i0 * 4 + i1` is not provably one-to-one in the loops that drive the block, so two iterations may share a spatial point (bind loop variables, `v + c`, `c * v + w` with `w` below `c`, or `f // n` with `f % n`; else declare it reduce)"],
    ),
    (
        "fuse_without_remainder",
        "  for f in serial(m * n) {\n    block b(vi: spatial(m) = f // n) {\n      Y[vi] = 1.0\n    }\n  }",
        &["block `b`: the binding `vi = f // n` is not provably one-to-one in the loops that drive the block, so two iterations may share a spatial point (bind loop variables, `v + c`, `c * v + w` with `w` below `c`, or `f // n` with `f % n`; else declare it reduce)"],
    ),
    (
        "gathered_binding",
        "  for i in serial(m) {\n    block b(vi: spatial(m) = L[i]) {\n      Y[vi] = 1.0\n    }\n  }",
        &["block `b`: the binding `vi = L[i]` is not provably one-to-one in the loops that drive the block, so two iterations may share a spatial point (bind loop variables, `v + c`, `c * v + w` with `w` below `c`, or `f // n` with `f % n`; else declare it reduce)"],
    ),
    (
        "sum_of_two_loops",
        "  for i in serial(m) {\n    for j in serial(n) {\n      block b(vi: spatial(m) = i + j) {\n        Y[vi] = 1.0\n      }\n    }\n  }",
        &["block `b`: the binding `vi = i + j` is not provably one-to-one in the loops that drive the block, so two iterations may share a spatial point (bind loop variables, `v + c`, `c * v + w` with `w` below `c`, or `f // n` with `f % n`; else declare it reduce)"],
    ),
];

#[test]
fn block_kinds_are_checked() {
    for stage in ["II", "III"] {
        for (name, body, want) in BLOCK_CASES {
            let src = FLAT.replace("STAGE", stage).replace("BODY", body);
            let f = parse_ok(&src);
            let got: Vec<String> = verify_func(&f).err().unwrap_or_default().iter().map(|e| e.to_string()).collect();
            assert_eq!(got, *want, "{name} at Stage {stage}");
            // Every error points into the source.
            for e in verify_func(&f).err().unwrap_or_default() {
                assert!(e.span.end > e.span.start, "{name}: {e}");
            }
        }
    }
}

#[test]
fn block_kind_errors_render_at_the_statement() {
    let src = FLAT.replace("STAGE", "III").replace(
        "BODY",
        "  for i in serial(m) {\n    block b(vi: spatial(m) = i) {\n      Y[vi] = Y[vi + 1] + 1.0\n    }\n  }",
    );
    let errors = verify_func(&parse_ok(&src)).unwrap_err();
    let text = render_errors(&errors, &SourceFile::new("t.sptir", &src));
    assert!(text.starts_with("t.sptir:7:7: block `b`: `Y` is read at [vi + 1]"), "{text}");
}
