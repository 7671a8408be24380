use sparsec_ir::text::{parse, print_module};

#[test]
fn csrmm_roundtrips() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/csrmm.sptir")).unwrap();
    let m = parse("csrmm.sptir", &src).unwrap();
    let printed = print_module(&m);
    println!("{printed}");
    let m2 = parse("printed", &printed).unwrap();
    assert_eq!(m, m2);
    assert_eq!(printed, print_module(&m2));
}

#[test]
fn stage2_roundtrips() {
    let src = r#"
func f(a: handle, indptr: handle, m: i32, nnz: i32) stage II attrs(global_symbol = "main", x = -1, y = 2.5) {
  axis I = dense_fixed(m)
  axis J = dense_variable(I, 100, nnz, indptr, idtype = i64, sorted = false)
  buffer A = match_sparse_buffer(a, [I, J], f32, default = -1.0)
  buffer J_indptr = match_sparse_buffer(indptr, [I], i32, extra_storage = 1)
  buffer T = alloc_buffer([4, m], f32, shared)
  for i in blockIdx.x(m) attrs(pragma = 1) {
    block "blk-0"(vi: spatial(m) = i) attrs(sparse = true) {
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
        atomic_add(T[0, vi], 1.5e-7)
      }
      for j in serial(4, start = 2) {
        T[j, vi] = T[j, vi] + cast(f32, j)
      }
    }
  }
}
"#;
    let m = parse("s2", src).unwrap();
    let printed = print_module(&m);
    println!("{printed}");
    let m2 = parse("printed", &printed).unwrap();
    assert_eq!(m, m2);
    assert_eq!(printed, print_module(&m2));
}

#[test]
fn errors_have_locations() {
    for src in ["func f(", "func f(a: handle) { axis I = dense_fixed(q) }", "func f() { x[0] = 1 }", "func f(a: foo) {}"] {
        let e = parse("bad.sptir", src).unwrap_err();
        println!("{e}\n");
    }
}
