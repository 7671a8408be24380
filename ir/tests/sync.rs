//! Barriers between runs of a thread-bound statement (`ir::needs_barrier`): a statement that
//! a loop of the kernel runs again must be fenced when one run may touch what another unit
//! wrote in an earlier run, and only then.

use sparsec_ir::text::parse_func;
use sparsec_ir::{needs_barrier, Func, StmtKind};

/// A kernel whose serial loop `j` runs `update` (a statement over unit `t`) once per row.
fn kernel(update: &str) -> Func {
    let text = format!(
        "func k(x: handle, y: handle, pos: handle, n: i32) stage III {{
  buffer X = match_buffer(x, [64], f32)
  buffer Y = match_buffer(y, [32, 64], f32)
  buffer P = match_buffer(pos, [n, 32], i32)
  for b in blockIdx.x(1) {{
    for j in serial(n) {{
      for t in threadIdx.x(32) {{
        {update}
      }}
    }}
  }}
}}"
    );
    parse_func("k.sptir", &text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Whether the body of loop `j` needs a barrier around its thread-bound statement.
fn fenced(update: &str) -> bool {
    let f = kernel(update);
    let StmtKind::For(b) = &f.body[0].kind else { panic!("no loop") };
    let StmtKind::For(j) = &b.body[0].kind else { panic!("no loop j") };
    needs_barrier(&f, &j.body, true)
}

/// Row `j`'s column of unit `t`, found by a search in each run, as SpGEMM's numeric phase
/// finds a product's position in its row; then `update` at position `at[0]`.
fn searched(update: &str) -> String {
    format!(
        "buffer at = alloc_buffer([1], i32, local)
        at[0] = 0
        while at[0] < 63 && P[j, t] != at[0] {{
          at[0] = at[0] + 1
        }}
        {update}"
    )
}

#[test]
fn a_position_found_in_each_run_is_fenced_between_runs() {
    // With a row's products over the lanes, the unit adding to a column next row may be
    // another.
    assert!(fenced(&searched("X[at[0]] = X[at[0]] + 1.0")));
    // A write alone is ordered too (the last run's value must win).
    assert!(fenced(&searched("X[at[0]] = 1.0")));
    // Reading a position elsewhere than it writes.
    assert!(fenced("X[t + 1] = X[t] + 1.0"));
}

#[test]
fn a_statement_run_once_needs_no_barrier_for_itself() {
    let f = kernel(&searched("X[at[0]] = X[at[0]] + 1.0"));
    let StmtKind::For(b) = &f.body[0].kind else { panic!("no loop") };
    let StmtKind::For(j) = &b.body[0].kind else { panic!("no loop j") };
    assert!(!needs_barrier(&f, &j.body, false));
}

#[test]
fn each_units_own_element_needs_no_barrier() {
    // SpMM's features over the lanes: unit `t` only ever meets its own element.
    assert!(!fenced("X[t] = X[t] + 1.0"));
    assert!(!fenced("X[j * 32 + t] = 2.0"));
    // A position found in the run, within a row of the unit's own.
    assert!(!fenced(&searched("Y[t, at[0]] = Y[t, at[0]] + 1.0")));
    // ... but not within a row that two units share.
    assert!(fenced(&searched("Y[t // 2, at[0]] = Y[t // 2, at[0]] + 1.0")));
    // Atomic additions commute.
    assert!(!fenced(&searched("atomic_add(X[at[0]], 1.0)")));
    // An offset read from memory the statement does not write is the same in every run.
    assert!(!fenced("X[P[0, 0] + t] = X[P[0, 0] + t] + 1.0"));
    assert!(!fenced("X[P[j, 0] + t] = 2.0"));
}

#[test]
fn a_scatter_through_an_index_array_is_fenced_between_runs() {
    // A dense row of the output scattered by the columns of a sparse row over the lanes
    // (SpGEMM into a dense C): next row, another unit may meet the same column.
    assert!(fenced("X[P[j, t]] = X[P[j, t]] + 1.0"));
    assert!(fenced("X[P[j, t]] = 1.0"));
    // ... unless a dimension stays the unit's own.
    assert!(!fenced("Y[t, P[j, t]] = Y[t, P[j, t]] + 1.0"));
}

