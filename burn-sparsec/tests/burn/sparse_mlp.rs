//! The sparse-MLP example: the 90%-sparse model (static, or pruned gradually from a dense
//! start) learns its task (far above chance) beside the dense one on both devices, and with
//! the example's own recipe ends within 2 points of the dense model's accuracy (#19).

#[allow(dead_code)]
#[path = "../../examples/sparse_mlp.rs"]
mod example;

#[test]
fn a_ninety_percent_sparse_mlp_learns_the_teacher_task() {
    // Static patterns on both devices; gradual pruning from a dense start on Flex.
    for (cpu, gradual) in [(false, false), (true, false), (true, true)] {
        let o = example::Options {
            train: 1024,
            test: 512,
            hidden: 128,
            steps: 120,
            lr: 0.01,
            cpu,
            gradual,
            uniform: false,
            ..Default::default()
        };
        let (dense, sparse) = example::compare(&o).unwrap();
        let chance = 1.0 / o.classes as f64;
        let on = match (cpu, gradual) {
            (false, _) => "wgpu",
            (true, false) => "flex",
            (true, true) => "flex, gradual",
        };
        println!("{on}: dense {dense:?}\n{on}: sparse {sparse:?}");
        assert!(sparse.weights * 9 < dense.weights, "{} of {} weights stored", sparse.weights, dense.weights);
        assert!(dense.accuracy > 4.0 * chance, "{on}: dense accuracy {}", dense.accuracy);
        assert!(sparse.accuracy > 4.0 * chance, "{on}: sparse accuracy {}", sparse.accuracy);
    }
}

#[test]
fn with_the_examples_recipe_the_sparse_mlp_is_within_two_points_of_the_dense_one() {
    // The recipe `cargo run --example sparse_mlp` runs (gradual pruning to 10% in every layer),
    // on Flex; about two minutes in the test profile.
    let o = example::Options { cpu: true, ..Default::default() };
    let (dense, sparse) = example::compare(&o).unwrap();
    println!("dense {dense:?}\nsparse {sparse:?}");
    assert!(sparse.weights * 9 < dense.weights, "{} of {} weights stored", sparse.weights, dense.weights);
    assert!(dense.accuracy > 0.95, "dense accuracy {}", dense.accuracy);
    assert!(
        sparse.accuracy >= dense.accuracy - 0.02,
        "sparse {:.4} is more than 2 points below dense {:.4}",
        sparse.accuracy,
        dense.accuracy
    );
}
