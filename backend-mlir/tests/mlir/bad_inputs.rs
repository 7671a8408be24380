//! Unsupported constructs and wrong arguments are errors, never panics.

use super::common::{csrmm_gpu, stage3};
use sparsec_backend_mlir::{emit_mlir, emit_ptx, run_cpu, CpuKernel, CpuOptions, MlirError};
use sparsec_ir::data::{Args, Array};
use sparsec_ir::{Expr, ForKind, StmtKind};
use sparsec_testkit as kit;

fn small_csrmm_args() -> Args {
    let mut a = Args::new();
    a.array("a", Array::F32(vec![1.0, 2.0]))
        .array("b", Array::F32(vec![1.0; 4]))
        .array("c", Array::F32(vec![0.0; 4]))
        .array("indptr", Array::I32(vec![0, 1, 2]))
        .array("indices", Array::I32(vec![1, 0]))
        .int("m", 2)
        .int("n", 2)
        .int("feat_size", 2)
        .int("nnz", 2);
    a
}

#[test]
fn stage_one_is_refused() {
    let f = kit::workload("csrmm");
    assert!(matches!(emit_mlir(&f), Err(MlirError::NotStageIII { .. })));
    assert!(matches!(run_cpu(&f, &small_csrmm_args()), Err(MlirError::NotStageIII { .. })));
}

#[test]
fn wrong_arguments_are_errors() {
    let k = CpuKernel::compile(&stage3("csrmm"), &CpuOptions::default()).unwrap();
    let mut ok = small_csrmm_args();
    k.run(&mut ok).unwrap();
    assert_eq!(ok.arrays["c"], Array::F32(vec![1.0, 1.0, 2.0, 2.0]));

    type Edit = Box<dyn Fn(&mut Args)>;
    let cases: Vec<(&str, Edit)> = vec![
        ("short output", Box::new(|a: &mut Args| { a.array("c", Array::F32(vec![0.0; 3])); })),
        ("short indices", Box::new(|a: &mut Args| { a.array("indices", Array::I32(vec![0])); })),
        ("wrong dtype", Box::new(|a: &mut Args| { a.array("a", Array::F64(vec![1.0, 2.0])); })),
        ("missing array", Box::new(|a: &mut Args| { a.arrays.shift_remove("b"); })),
        ("missing scalar", Box::new(|a: &mut Args| { a.scalars.shift_remove("m"); })),
        ("scalar out of range", Box::new(|a: &mut Args| { a.int("nnz", 1 << 40); })),
        ("float for an int", Box::new(|a: &mut Args| { a.float("m", 2.0); })),
    ];
    for (what, edit) in cases {
        let mut a = small_csrmm_args();
        edit(&mut a);
        let before = a.clone();
        let e = k.run(&mut a).expect_err(what);
        assert!(matches!(e, MlirError::BadArgument { .. } | MlirError::Size(_)), "{what}: {e}");
        assert_eq!(a, before, "{what}: arguments changed");
    }
    // i64 index arrays are accepted like the interpreter does.
    let mut a = small_csrmm_args();
    a.array("indptr", Array::I64(vec![0, 1, 2]));
    k.run(&mut a).unwrap();
    assert_eq!(a.arrays["c"], Array::F32(vec![1.0, 1.0, 2.0, 2.0]));
    assert_eq!(a.arrays["indptr"], Array::I64(vec![0, 1, 2]));
}

#[test]
fn unsupported_constructs_are_errors() {
    assert!(matches!(emit_ptx(&csrmm_gpu(), "gfx90a"), Err(MlirError::Unsupported(_))));
    // A launch extent read from a buffer cannot be computed by the host.
    let mut f = csrmm_gpu();
    let ptr = f.buffer_by_name("J_indptr").unwrap();
    for s in &mut f.body {
        if let StmtKind::For(l) = &mut s.kind {
            if matches!(l.kind, ForKind::Thread(_)) {
                l.extent = Expr::Load(ptr, vec![Expr::i32(0)]);
            }
        }
    }
    let e = emit_mlir(&f).unwrap_err();
    assert!(matches!(e, MlirError::Unsupported(_)), "{e}");
    // A Stage III function with a variable used outside its scope.
    let mut g = stage3("csrmm");
    let v = g.add_var("ghost", sparsec_ir::DType::I32);
    if let StmtKind::For(l) = &mut g.body[0].kind {
        l.extent = Expr::Var(v);
    }
    assert!(matches!(CpuKernel::compile(&g, &CpuOptions::default()), Err(MlirError::Unsupported(_))));
}
