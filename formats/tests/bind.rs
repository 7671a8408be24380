//! Binding matrices to hand-built Stage-I functions.

use sparsec_formats::{bind, gen, BindError, Binder, Csr, Ell, ValidateOptions};
use sparsec_ir::data::{Array, Scalar};
use sparsec_ir::{
    Axis, AxisId, AxisKind, Buffer, BufferId, DType, Expr, Func, Layout, Param, ParamId, ParamKind,
    Scope, Span, Storage,
};

/// Builds functions through the IR API.
struct FuncBuilder {
    f: Func,
}

impl FuncBuilder {
    fn new(name: &str) -> Self {
        FuncBuilder { f: Func::new(name) }
    }
    fn handle(&mut self, name: &str) -> ParamId {
        self.f.params.push(Param {
            name: name.into(),
            kind: ParamKind::Handle,
            span: Span::NONE,
        });
        self.f.params.len() - 1
    }
    fn scalar(&mut self, name: &str, dtype: DType) -> Expr {
        let v = self.f.add_var(name, dtype);
        self.f.params.push(Param {
            name: name.into(),
            kind: ParamKind::Scalar(v),
            span: Span::NONE,
        });
        Expr::Var(v)
    }
    #[allow(clippy::too_many_arguments)]
    fn axis(
        &mut self,
        name: &str,
        kind: AxisKind,
        parent: Option<AxisId>,
        length: Expr,
        nnz: Option<Expr>,
        indptr: Option<ParamId>,
        indices: Option<ParamId>,
        idtype: DType,
    ) -> AxisId {
        self.f.axes.append(Axis {
            name: name.into(),
            kind,
            parent,
            length,
            nnz,
            indptr,
            indices,
            idtype,
            sorted: true,
            unique: true,
            pattern: None,
            span: Span::NONE,
        })
    }
    fn dense(&mut self, name: &str, length: Expr) -> AxisId {
        self.axis(
            name,
            AxisKind::DenseFixed,
            None,
            length,
            None,
            None,
            None,
            DType::I32,
        )
    }
    fn buffer(
        &mut self,
        name: &str,
        axes: Vec<AxisId>,
        storage: Storage,
        dtype: DType,
    ) -> BufferId {
        self.f.buffers.append(Buffer {
            name: name.into(),
            dtype,
            layout: Layout::Sparse(axes),
            storage,
            extra_storage: None,
            default: None,
            modes: None,
            span: Span::NONE,
        })
    }
}

/// `csrmm(a, b, c, indptr, indices, m, n, feat, nnz)` with the given idtype and dtype.
fn csrmm(idtype: DType, dtype: DType) -> Func {
    let mut fb = FuncBuilder::new("csrmm");
    let (a, b, c, indptr, indices) = (
        fb.handle("a"),
        fb.handle("b"),
        fb.handle("c"),
        fb.handle("indptr"),
        fb.handle("indices"),
    );
    let m = fb.scalar("m", DType::I32);
    let n = fb.scalar("n", DType::I32);
    let feat = fb.scalar("feat", DType::I32);
    let nnz = fb.scalar("nnz", DType::I32);
    let i = fb.dense("I", m);
    let j = fb.axis(
        "J",
        AxisKind::SparseVariable,
        Some(i),
        n.clone(),
        Some(nnz),
        Some(indptr),
        Some(indices),
        idtype,
    );
    let jd = fb.dense("J_detach", n);
    let k = fb.dense("K", feat);
    fb.buffer("A", vec![i, j], Storage::Param(a), dtype);
    fb.buffer("B", vec![jd, k], Storage::Param(b), dtype);
    fb.buffer("C", vec![i, k], Storage::Param(c), dtype);
    fb.buffer("T", vec![i, j], Storage::Alloc(Scope::Global), dtype);
    fb.f
}

fn small() -> Csr<i32, f64> {
    Csr::try_new(3, 4, vec![0, 2, 2, 3], vec![1, 3, 0], vec![1.0, 2.5, -3.0]).unwrap()
}

#[test]
fn csrmm_binds_arrays_and_scalars() {
    let f = csrmm(DType::I32, DType::F32);
    let args = bind::bind_csr(&f, "A", &small()).unwrap();
    assert_eq!(args.arrays["a"], Array::F32(vec![1.0, 2.5, -3.0]));
    assert_eq!(args.arrays["indptr"], Array::I32(vec![0, 2, 2, 3]));
    assert_eq!(args.arrays["indices"], Array::I32(vec![1, 3, 0]));
    assert_eq!(args.arrays.len(), 3);
    assert_eq!(args.scalars["m"], Scalar::Int(3));
    assert_eq!(args.scalars["n"], Scalar::Int(4));
    assert_eq!(args.scalars["nnz"], Scalar::Int(3));
    assert!(!args.scalars.contains_key("feat"));
}

#[test]
fn converts_to_axis_idtype_and_buffer_dtype() {
    let f = csrmm(DType::I64, DType::F64);
    let args = bind::bind_csr(&f, "A", &small()).unwrap();
    assert_eq!(args.arrays["indptr"], Array::I64(vec![0, 2, 2, 3]));
    assert_eq!(args.arrays["indices"], Array::I64(vec![1, 3, 0]));
    assert_eq!(args.arrays["a"], Array::F64(vec![1.0, 2.5, -3.0]));
    // i64 matrix onto i32 axes, f16 buffer (values rounded to f16).
    let f = csrmm(DType::I32, DType::F16);
    let m = small()
        .cast_index::<i64>()
        .unwrap()
        .map_values(|v| v + 0.0001);
    let args = bind::bind_csr(&f, "A", &m).unwrap();
    assert_eq!(args.arrays["indices"], Array::I32(vec![1, 3, 0]));
    assert_eq!(args.arrays["a"], Array::F16(vec![1.0, 2.5, -3.0]));
    // A column index that does not fit i32.
    let big =
        Csr::<i64, f64>::try_new(1, 1 << 40, vec![0, 1], vec![(1 << 40) - 1], vec![1.0]).unwrap();
    let e = bind::bind_csr(&f, "A", &big).unwrap_err();
    assert!(
        matches!(e, BindError::Overflow { ref what, .. } if what == "n"),
        "{e}"
    );
}

#[test]
fn buffer_errors() {
    let f = csrmm(DType::I32, DType::F32);
    let m = small();
    assert_eq!(
        bind::bind_csr(&f, "Z", &m).unwrap_err(),
        BindError::UnknownBuffer("Z".into())
    );
    assert_eq!(
        bind::bind_csr(&f, "T", &m).unwrap_err(),
        BindError::NotParam("T".into())
    );
    let e = bind::bind_csr(&f, "B", &m).unwrap_err();
    assert_eq!(
        e,
        BindError::AxisKind {
            axis: "K".into(),
            expected: "sparse_variable",
            found: "dense_fixed"
        }
    );
    assert_eq!(
        e.to_string(),
        "axis `K` is dense_fixed, expected sparse_variable"
    );
    let e = bind::bind_bsr(&f, "A", &m.to_bsr(2).unwrap()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "buffer `A` has 2 axes, expected 4 ([I, J, BI, BJ])"
    );
    let f = csrmm(DType::I32, DType::I32);
    let e = bind::bind_csr(&f, "A", &m).unwrap_err();
    assert_eq!(
        e.to_string(),
        "buffer `A` has dtype i32, which cannot hold floating-point values"
    );
}

#[test]
fn literal_lengths_must_match() {
    let mut fb = FuncBuilder::new("lit");
    let (a, indptr, indices) = (fb.handle("a"), fb.handle("indptr"), fb.handle("indices"));
    let i = fb.dense("I", Expr::i32(3));
    let j = fb.axis(
        "J",
        AxisKind::SparseVariable,
        Some(i),
        Expr::i32(5),
        Some(Expr::i32(3)),
        Some(indptr),
        Some(indices),
        DType::I32,
    );
    fb.buffer("A", vec![i, j], Storage::Param(a), DType::F32);
    let e = bind::bind_csr(&fb.f, "A", &small()).unwrap_err();
    assert_eq!(
        e,
        BindError::LiteralMismatch {
            axis: "J".into(),
            field: "length",
            literal: 5,
            needed: "4".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "axis `J` length is the literal 5, but the matrix needs 4"
    );
    let ok = Csr::<i32, f64>::try_new(3, 5, vec![0, 1, 2, 3], vec![0, 1, 4], vec![1.0; 3]).unwrap();
    let args = bind::bind_csr(&fb.f, "A", &ok).unwrap();
    assert!(args.scalars.is_empty());
}

#[test]
fn conflicting_scalar_binding() {
    // J's length reuses `m`: the matrix must be square.
    let mut fb = FuncBuilder::new("square");
    let (a, indptr, indices) = (fb.handle("a"), fb.handle("indptr"), fb.handle("indices"));
    let m = fb.scalar("m", DType::I32);
    let nnz = fb.scalar("nnz", DType::I64);
    let i = fb.dense("I", m.clone());
    let j = fb.axis(
        "J",
        AxisKind::SparseVariable,
        Some(i),
        m,
        Some(nnz),
        Some(indptr),
        Some(indices),
        DType::I32,
    );
    fb.buffer("A", vec![i, j], Storage::Param(a), DType::F32);
    let e = bind::bind_csr(&fb.f, "A", &small()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "scalar `m` is already bound to 3, cannot bind 4"
    );
    let sq: Csr<i32, f64> = gen::uniform(4, 4, 6, 1).unwrap();
    let args = bind::bind_csr(&fb.f, "A", &sq).unwrap();
    assert_eq!(args.scalars["m"], Scalar::Int(4));
    assert_eq!(args.scalars["nnz"], Scalar::Int(6));
}

#[test]
fn non_parameter_variable_and_parent_mismatch() {
    let mut fb = FuncBuilder::new("bad");
    let (a, indptr, indices) = (fb.handle("a"), fb.handle("indptr"), fb.handle("indices"));
    let local = Expr::Var(fb.f.add_var("local", DType::I32));
    let i = fb.dense("I", local.clone());
    let i2 = fb.dense("I2", Expr::i32(3));
    let j = fb.axis(
        "J",
        AxisKind::SparseVariable,
        Some(i2),
        Expr::i32(4),
        None,
        Some(indptr),
        Some(indices),
        DType::I32,
    );
    fb.buffer("A", vec![i, j], Storage::Param(a), DType::F32);
    fb.buffer("A2", vec![i2, j], Storage::Param(a), DType::F32);
    let e = bind::bind_csr(&fb.f, "A", &small()).unwrap_err();
    assert_eq!(
        e,
        BindError::ParentMismatch {
            axis: "J".into(),
            expected: "I".into(),
            found: "`I2`".into()
        }
    );
    assert!(bind::bind_csr(&fb.f, "A2", &small()).is_ok());
    let e = bind::bind_axis_csr(&fb.f, "I", &small()).unwrap_err();
    assert!(matches!(e, BindError::AxisKind { .. }));
    let mut fb2 = FuncBuilder::new("bad2");
    let (a, indptr, indices) = (fb2.handle("a"), fb2.handle("indptr"), fb2.handle("indices"));
    let local = Expr::Var(fb2.f.add_var("local", DType::I32));
    let i = fb2.dense("I", local);
    let j = fb2.axis(
        "J",
        AxisKind::SparseVariable,
        Some(i),
        Expr::i32(4),
        None,
        Some(indptr),
        Some(indices),
        DType::I32,
    );
    fb2.buffer("A", vec![i, j], Storage::Param(a), DType::F32);
    let e = bind::bind_csr(&fb2.f, "A", &small()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "axis `I` length is the variable `local`, which is not a scalar parameter"
    );
}

#[test]
fn unsorted_matrix_on_sorted_axis() {
    let f = csrmm(DType::I32, DType::F32);
    let m = Csr::<i32, f64>::try_new_with(
        1,
        4,
        vec![0, 2],
        vec![3, 1],
        vec![1.0, 2.0],
        &ValidateOptions::LENIENT,
    )
    .unwrap();
    assert_eq!(
        bind::bind_csr(&f, "A", &m).unwrap_err(),
        BindError::Unsorted("J".into())
    );
    let mut f2 = f.clone();
    let j = f2.axis_by_name("J").unwrap();
    f2.axes[j].sorted = false;
    assert!(bind::bind_csr(&f2, "A", &m).is_ok());
}

#[test]
fn bsr_binding() {
    let mut fb = FuncBuilder::new("bsrmm");
    let (a, indptr, indices) = (fb.handle("a"), fb.handle("indptr"), fb.handle("indices"));
    let nb = fb.scalar("nb", DType::I32);
    let mb = fb.scalar("mb", DType::I32);
    let nnzb = fb.scalar("nnzb", DType::I32);
    let blk = fb.scalar("blk", DType::I32);
    let i = fb.dense("I", nb);
    let j = fb.axis(
        "J",
        AxisKind::SparseVariable,
        Some(i),
        mb,
        Some(nnzb),
        Some(indptr),
        Some(indices),
        DType::I32,
    );
    let bi = fb.dense("BI", blk.clone());
    let bj = fb.dense("BJ", blk);
    fb.buffer("A", vec![i, j, bi, bj], Storage::Param(a), DType::F32);
    let m: Csr<i32, f64> = gen::block_sparse(10, 7, 2, 0.3, 3).unwrap();
    let bsr = m.to_bsr(2).unwrap();
    let args = bind::bind_bsr(&fb.f, "A", &bsr).unwrap();
    assert_eq!(args.scalars["nb"], Scalar::Int(5));
    assert_eq!(args.scalars["mb"], Scalar::Int(4));
    assert_eq!(args.scalars["nnzb"], Scalar::Int(bsr.nnz_blocks() as i64));
    assert_eq!(args.scalars["blk"], Scalar::Int(2));
    assert_eq!(args.arrays["indptr"], Array::I32(bsr.indptr().to_vec()));
    assert_eq!(args.arrays["indices"], Array::I32(bsr.indices().to_vec()));
    assert_eq!(args.arrays["a"].len(), bsr.nnz_blocks() * 4);
    // A blocked ELL over the same 4 axes is a kind mismatch on J.
    let e = bind::bind_ell(&fb.f, "A", &bsr.to_ell(4).unwrap()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "axis `J` is sparse_variable, expected sparse_fixed"
    );
}

fn ell_func(blocked: bool) -> Func {
    let mut fb = FuncBuilder::new("ellmm");
    let (a, indices) = (fb.handle("a"), fb.handle("indices"));
    let m = fb.scalar("m", DType::I32);
    let n = fb.scalar("n", DType::I32);
    let col = fb.scalar("col", DType::I32);
    let i = fb.dense("I", m);
    let j = fb.axis(
        "J",
        AxisKind::SparseFixed,
        Some(i),
        n,
        Some(col),
        None,
        Some(indices),
        DType::I64,
    );
    let mut axes = vec![i, j];
    if blocked {
        let blk = fb.scalar("blk", DType::I32);
        axes.push(fb.dense("BI", blk.clone()));
        axes.push(fb.dense("BJ", blk));
    }
    fb.buffer("A", axes, Storage::Param(a), DType::F32);
    fb.f
}

#[test]
fn ell_binding() {
    let ell: Ell<i32, f64> = small().to_ell(3).unwrap();
    let args = bind::bind_ell(&ell_func(false), "A", &ell).unwrap();
    assert_eq!(args.scalars["m"], Scalar::Int(3));
    assert_eq!(args.scalars["n"], Scalar::Int(4));
    assert_eq!(args.scalars["col"], Scalar::Int(3));
    assert_eq!(
        args.arrays["indices"],
        Array::I64(vec![1, 3, 3, 0, 0, 0, 0, 0, 0])
    );
    assert_eq!(
        args.arrays["a"],
        Array::F32(vec![1.0, 2.5, 0.0, 0.0, 0.0, 0.0, -3.0, 0.0, 0.0])
    );
    // Scalar ELL also binds to 4 axes with block 1.
    let args = bind::bind_ell(&ell_func(true), "A", &ell).unwrap();
    assert_eq!(args.scalars["blk"], Scalar::Int(1));
    // Blocked ELL.
    let bell = small().to_bsr(2).unwrap().to_ell(2).unwrap();
    let args = bind::bind_ell(&ell_func(true), "A", &bell).unwrap();
    assert_eq!(
        (args.scalars["m"], args.scalars["n"], args.scalars["blk"]),
        (Scalar::Int(2), Scalar::Int(2), Scalar::Int(2))
    );
    assert_eq!(args.arrays["a"].len(), 2 * 2 * 4);
    let e = bind::bind_ell(&ell_func(false), "A", &bell).unwrap_err();
    assert_eq!(
        e.to_string(),
        "buffer `A`: blocked ELL (block 2) needs 4 axes [I, J, BI, BJ]"
    );
    // CSR onto an ELL buffer.
    let e = bind::bind_csr(&ell_func(false), "A", &small()).unwrap_err();
    assert!(matches!(
        e,
        BindError::AxisKind {
            found: "sparse_fixed",
            ..
        }
    ));
}

#[test]
fn dense_variable_binding() {
    let mut fb = FuncBuilder::new("segment_reduce");
    let (a, indptr) = (fb.handle("a"), fb.handle("indptr"));
    let n = fb.scalar("n", DType::I32);
    let nnz = fb.scalar("nnz", DType::I32);
    let i = fb.dense("I", n);
    let j = fb.axis(
        "J",
        AxisKind::DenseVariable,
        Some(i),
        Expr::i32(100),
        Some(nnz),
        Some(indptr),
        None,
        DType::I32,
    );
    fb.buffer("A", vec![i, j], Storage::Param(a), DType::F32);
    let args =
        bind::bind_dense_variable(&fb.f, "A", &[0i32, 3, 3, 5], &[1.0f32, 2.0, 3.0, 4.0, 5.0])
            .unwrap();
    assert_eq!(args.scalars["n"], Scalar::Int(3));
    assert_eq!(args.scalars["nnz"], Scalar::Int(5));
    assert_eq!(args.arrays["indptr"], Array::I32(vec![0, 3, 3, 5]));
    assert_eq!(args.arrays["a"], Array::F32(vec![1.0, 2.0, 3.0, 4.0, 5.0]));
    // A segment longer than the declared bound 100.
    let long = vec![1.0f32; 101];
    let e = bind::bind_dense_variable(&fb.f, "A", &[0i32, 101], &long).unwrap_err();
    assert_eq!(
        e.to_string(),
        "axis `J` length is the literal 100, but the matrix needs at least 101"
    );
    // Broken segment pointers.
    let e = bind::bind_dense_variable(&fb.f, "A", &[0i32, 3, 2], &[1.0f32; 2]).unwrap_err();
    assert!(matches!(e, BindError::Segments { .. }), "{e}");
    // The generic axis binder on a dense_variable axis binds indptr and the row bound.
    let m: Csr<i32, f64> = gen::single_full_row(3, 7, 1, 0).unwrap();
    let args = bind::bind_axis_csr(&fb.f, "J", &m).unwrap();
    assert_eq!(args.arrays.keys().collect::<Vec<_>>(), vec!["indptr"]);
    assert_eq!(args.scalars["nnz"], Scalar::Int(7));
}

#[test]
fn several_sparse_axes_with_binder() {
    // Two CSR axes over the same rows (e.g. an adjacency and a mask), and a buffer on one.
    let mut fb = FuncBuilder::new("multi");
    let (a, p1, i1, p2, i2) = (
        fb.handle("a"),
        fb.handle("indptr1"),
        fb.handle("indices1"),
        fb.handle("indptr2"),
        fb.handle("indices2"),
    );
    let m = fb.scalar("m", DType::I32);
    let n = fb.scalar("n", DType::I32);
    let nnz1 = fb.scalar("nnz1", DType::I32);
    let nnz2 = fb.scalar("nnz2", DType::I32);
    let i = fb.dense("I", m);
    let j1 = fb.axis(
        "J1",
        AxisKind::SparseVariable,
        Some(i),
        n.clone(),
        Some(nnz1),
        Some(p1),
        Some(i1),
        DType::I32,
    );
    let _j2 = fb.axis(
        "J2",
        AxisKind::SparseVariable,
        Some(i),
        n,
        Some(nnz2),
        Some(p2),
        Some(i2),
        DType::I32,
    );
    fb.buffer("A", vec![i, j1], Storage::Param(a), DType::F32);
    let x: Csr<i32, f64> = gen::uniform(6, 5, 10, 1).unwrap();
    let y: Csr<i32, f64> = gen::uniform(6, 5, 4, 2).unwrap();
    let mut b = Binder::new(&fb.f);
    b.axis_csr("J1", &x)
        .unwrap()
        .axis_csr("J2", &y)
        .unwrap()
        .csr("A", &x)
        .unwrap();
    let args = b.finish();
    assert_eq!(args.arrays["indptr1"], Array::I32(x.indptr().to_vec()));
    assert_eq!(args.arrays["indices2"], Array::I32(y.indices().to_vec()));
    assert_eq!(
        (args.scalars["nnz1"], args.scalars["nnz2"]),
        (Scalar::Int(10), Scalar::Int(4))
    );
    assert_eq!(args.arrays.len(), 5);
    // Binding A to a different pattern than J1 already has is a conflict.
    let mut b = Binder::new(&fb.f);
    b.axis_csr("J1", &x).unwrap();
    let z: Csr<i32, f64> = gen::uniform(6, 5, 10, 3).unwrap();
    let e = b.csr("A", &z).unwrap_err();
    assert_eq!(e, BindError::ArrayConflict("indptr1".into()));
    assert_eq!(
        bind::bind_axis_csr(&fb.f, "Q", &x).unwrap_err(),
        BindError::UnknownAxis("Q".into())
    );
}
