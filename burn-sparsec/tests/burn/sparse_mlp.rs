//! The sparse-MLP example: the 90%-sparse model learns its task (far above chance) beside the
//! dense one; the accuracy gap is reported by the example, not asserted.

#[allow(dead_code)]
#[path = "../../examples/sparse_mlp.rs"]
mod example;

#[test]
fn a_ninety_percent_sparse_mlp_learns_the_teacher_task() {
    for cpu in [false, true] {
        let o = example::Options { train: 1024, test: 512, hidden: 128, steps: 120, cpu, ..Default::default() };
        let (dense, sparse) = example::compare(&o).unwrap();
        let chance = 1.0 / o.classes as f64;
        let on = if cpu { "flex" } else { "wgpu" };
        println!("{on}: dense {dense:?}\n{on}: sparse {sparse:?}");
        assert!(sparse.weights * 9 < dense.weights, "{} of {} weights stored", sparse.weights, dense.weights);
        assert!(dense.accuracy > 4.0 * chance, "{on}: dense accuracy {}", dense.accuracy);
        assert!(sparse.accuracy > 4.0 * chance, "{on}: sparse accuracy {}", sparse.accuracy);
    }
}
