//! Vector forms of `vectorized` loops (`ir::vector`): which loops have one, what it assumes,
//! and which loops keep their serial form because lanes would see each other's writes.

use sparsec_ir::text::{parse_func, print_expr};
use sparsec_ir::vector::{multiple_of, plan, Plan, VExpr, VStmt};
use sparsec_ir::{For, Func, StmtKind};

/// A kernel over `Y` and `X` (`n` rows of `f` features, `f` a parameter); `BODY` is the
/// body of `for k in vectorized(4)` inside a lane loop `t` and a row loop `i`.
const KERNEL: &str = "func g(x: handle, y: handle, n: i32, f: i32) stage III {
  buffer X = match_buffer(x, [n * f], f32)
  buffer Y = match_buffer(y, [n * f], f32)
  for i in blockIdx.x(n) {
    for t in threadIdx.x(32) {
      for k in vectorized(WIDTH) {
BODY
      }
    }
  }
}";

fn kernel(width: i64, body: &str) -> Func {
    let text = KERNEL.replace("WIDTH", &width.to_string()).replace("BODY", body);
    parse_func("t.sptir", &text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The `vectorized` loop of a [`kernel`].
fn vloop(f: &Func) -> &For {
    fn find(stmts: &[sparsec_ir::Stmt]) -> Option<&For> {
        stmts.iter().find_map(|s| match &s.kind {
            StmtKind::For(l) if l.kind == sparsec_ir::ForKind::Vectorized => Some(l),
            k => k.child_lists().into_iter().find_map(|c| find(c)),
        })
    }
    find(&f.body).expect("a vectorized loop")
}

fn planned(f: &Func) -> Option<Plan<'_>> {
    plan(f, vloop(f))
}

fn names(f: &Func, p: &Plan) -> Vec<String> {
    p.assume.iter().map(|v| f.vars[*v].name.clone()).collect()
}

/// SpMM's accumulation with a lane's 4 features consecutive: `B` and the output are unit
/// stride, the guard holds for all lanes or none once `f` is a multiple of 4.
#[test]
fn spmm_lanes_have_a_vector_form_assuming_the_width_divides_the_features() {
    let f = kernel(
        4,
        "        if (i * 32 + t) * 4 + k < f {
          block b(vk: spatial(f) = (i * 32 + t) * 4 + k) {
            Y[i * f + vk] = fma(2.0, X[i * f + vk], Y[i * f + vk])
          }
        }",
    );
    let p = planned(&f).expect("a vector form");
    assert_eq!((p.width, names(&f, &p)), (4, vec!["f".to_string()]));
    let [VStmt::If { cond, then }] = p.body.as_slice() else { panic!("{p:?}") };
    // The guard at the first lane.
    assert_eq!(print_expr(&f, cond), "(i * 32 + t) * 4 + 0 < f");
    let [VStmt::Block { stores, .. }] = then.as_slice() else { panic!("{p:?}") };
    let VExpr::Fma(a, x, y) = &stores[0].value else { panic!("{p:?}") };
    assert!(matches!(**a, VExpr::Splat(_)));
    for v in [x, y] {
        let VExpr::Load(acc) = &**v else { panic!("{p:?}") };
        assert!(acc.aligned, "{acc:?}");
    }
    assert!(stores[0].at.aligned);
}

/// A loop whose lanes read what other lanes write keeps its serial form.
#[test]
fn lanes_that_read_another_lanes_element_have_no_vector_form() {
    for body in [
        // Each lane reads its right neighbour's element, which that lane overwrites.
        "        Y[i * f + k] = Y[i * f + k + 1] * 2.0",
        // Every lane reads element 0, which lane 0 overwrites.
        "        Y[i * f + k] = Y[i * f] + 1.0",
        // Two stores to one buffer.
        "        Y[i * f + k] = 1.0\n        Y[i * f + k] = 2.0",
        // Lane 0 reads element 4 - 0, which no lane stores, but lane 1 reads lane 3's.
        "        Y[i * f + k] = X[i * f + k] + Y[i * f + 4 - k]",
    ] {
        let f = kernel(4, body);
        assert!(planned(&f).is_none(), "{body}");
    }
    // The same shapes without the cross-lane read do have one.
    let f = kernel(4, "        Y[i * f + k] = X[i * f + k + 1] * 2.0");
    assert!(planned(&f).is_some());
}

/// Non-unit strides, guards that are not a prefix of the lanes, integer values, widths other than 2, 4
/// and 8: no vector form.
#[test]
fn other_shapes_have_no_vector_form() {
    for (w, body) in [
        (4, "        Y[i * f + 2 * k] = 1.0"),
        (4, "        Y[i * f + k] = X[i * f + 2 * k]"),
        (4, "        if i * f + k <= f {\n          Y[i * f + k] = 1.0\n        }"),
        (4, "        Y[i * f + k] = cast(f32, k)"),
        (4, "        Y[i * f + k] = exp(X[i * f + k])"),
        (3, "        Y[i * f + k] = 1.0"),
    ] {
        let f = kernel(w, body);
        assert!(planned(&f).is_none(), "{body}");
    }
}

/// A unit-stride access whose first lane is not a proven multiple of the width is a vector
/// access all the same, only not aligned; it adds nothing to the assumptions.
#[test]
fn unaligned_accesses_keep_the_vector_form() {
    let f = kernel(2, "        Y[i * 2 + k] = X[i * n + k + 1]");
    let p = planned(&f).expect("a vector form");
    let [VStmt::Store(st)] = p.body.as_slice() else { panic!("{p:?}") };
    let VExpr::Load(x) = &st.value else { panic!("{p:?}") };
    assert!(st.at.aligned && !x.aligned, "{p:?}");
    assert!(names(&f, &p).is_empty());
}

/// `multiple_of` proves what literals, products and sums prove, and names the parameters
/// it needs.
#[test]
fn multiples_are_proven_from_the_expression() {
    let m = |s: &str| {
        let f = kernel(4, &format!("        Y[{s}] = 1.0"));
        let StmtKind::Store { indices, .. } = &vloop(&f).body[0].kind else { panic!() };
        multiple_of(&f, &indices[0], 4).map(|v| v.iter().map(|x| f.vars[*x].name.clone()).collect::<Vec<_>>())
    };
    assert_eq!(m("8 * i + 4 * t"), Some(vec![]));
    assert_eq!(m("i * f + 12"), Some(vec!["f".into()]));
    assert_eq!(m("(i * 32 + t) * 4"), Some(vec![]));
    assert_eq!(m("i * f + n * f"), Some(vec!["f".into()]));
    assert_eq!(m("i * 4 + 2"), None);
    assert_eq!(m("i + t"), None);
    assert_eq!(m("f // 2"), None);
}

/// A guard `first + k < bound` whose multiples are not proven holds on a prefix of the
/// lanes: the vector form runs its body under a mask, beside a lane-independent guard.
#[test]
fn guards_on_a_prefix_of_the_lanes_become_masks() {
    let f = kernel(4, "        if k + 1 < f {\n          Y[i * f + k] = 1.0\n        }");
    let p = planned(&f).expect("a vector form");
    let [VStmt::Masked { first, bound, then }] = p.body.as_slice() else { panic!("{p:?}") };
    assert_eq!((print_expr(&f, first), print_expr(&f, bound)), ("0 + 1".to_string(), "f".to_string()));
    assert!(matches!(then.as_slice(), [VStmt::Store(_)]), "{p:?}");
    // The store's alignment is all it assumes: the mask is exact for any `f`.
    assert_eq!(names(&f, &p), vec!["f".to_string()]);

    let f = kernel(4, "        if t < n && i * 4 + k < n + 1 {\n          Y[i * f + k] = X[i * f + k]\n        }");
    let p = planned(&f).expect("a vector form");
    let [VStmt::If { cond, then }] = p.body.as_slice() else { panic!("{p:?}") };
    assert_eq!(print_expr(&f, cond), "t < n");
    let [VStmt::Masked { first, bound, .. }] = then.as_slice() else { panic!("{p:?}") };
    assert_eq!((print_expr(&f, first), print_expr(&f, bound)), ("i * 4 + 0".to_string(), "n + 1".to_string()));
}

/// SpMV's lanes: `X[J[p + k]]` with `J` unit stride is a gather with a lane-wise index.
const GATHER: &str = "func g(x: handle, y: handle, j: handle, a: handle, n: i32, nnz: i32) stage III {
  buffer X = match_buffer(x, [n], f32)
  buffer Y = match_buffer(y, [n * 4], f32)
  buffer J = match_buffer(j, [nnz], i32)
  buffer A = match_buffer(a, [nnz], f32)
  for i in serial(n) {
    for k in vectorized(4) {
BODY
    }
  }
}";

#[test]
fn indirect_loads_are_gathers() {
    let func = |body: &str| {
        let text = GATHER.replace("BODY", body);
        parse_func("t.sptir", &text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    };
    let f = func(
        "      if i * 4 + k < nnz - 1 {\n        Y[i * 4 + k] = A[i * 4 + k] * X[cast(i64, J[i * 4 + k]) + 1]\n      }",
    );
    let p = planned(&f).expect("a vector form");
    let [VStmt::Masked { then, .. }] = p.body.as_slice() else { panic!("{p:?}") };
    let [VStmt::Store(st)] = then.as_slice() else { panic!("{p:?}") };
    let VExpr::Binary(_, a, g) = &st.value else { panic!("{p:?}") };
    assert!(matches!(**a, VExpr::Load(_)), "{p:?}");
    let VExpr::Gather { index, .. } = &**g else { panic!("{p:?}") };
    let VExpr::Binary(_, c, one) = &**index else { panic!("{p:?}") };
    assert!(matches!(**one, VExpr::Splat(_)), "{p:?}");
    let VExpr::Cast(_, j) = &**c else { panic!("{p:?}") };
    assert!(matches!(**j, VExpr::Load(_)), "{p:?}");

    for body in [
        // A gather from the buffer the loop stores: any lane may read another's element.
        "      Y[i * 4 + k] = Y[J[i * 4 + k]]",
        // An index that does not go through a load is a strided access, not a gather.
        "      Y[i * 4 + k] = X[2 * k]",
        // The index's load is itself not unit stride.
        "      Y[i * 4 + k] = X[J[J[i * 4 + k]]]",
    ] {
        assert!(planned(&func(body)).is_none(), "{body}");
    }
}

/// A block whose body is one guard the lanes share around its stores (a padded format's
/// bound, hyb's buckets: `if R[..] < n { .. }` in terms of the block's iterators) has a vector
/// form that tests the guard once, outside the block, in terms of the loops' variables; a
/// guard inside a block that the lane decides keeps the serial form.
#[test]
fn a_guard_the_lanes_share_inside_a_block_is_tested_once() {
    let f = kernel(
        4,
        "        block b(vi: spatial(n) = i, vk: spatial(f) = t * 4 + k) {
          if vi < n - 1 && X[vi] < 2.0 {
            Y[vi * f + vk] = fma(2.0, X[vi * f + vk], Y[vi * f + vk])
          }
        }",
    );
    let p = planned(&f).expect("a vector form");
    let [VStmt::If { cond, then }] = p.body.as_slice() else { panic!("{p:?}") };
    assert_eq!(print_expr(&f, cond), "i < n - 1 && X[i] < 2.0");
    let [VStmt::Block { stores, .. }] = then.as_slice() else { panic!("{p:?}") };
    assert_eq!(stores.len(), 1);
    let f = kernel(
        4,
        "        block b(vi: spatial(n) = i, vk: spatial(f) = t * 4 + k) {
          if vk < n {
            Y[vi * f + vk] = 1.0
          }
        }",
    );
    assert!(planned(&f).is_none());
}
