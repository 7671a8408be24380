//! The GNN example trains on cora and its loss falls: GCN and GraphSAGE, on wgpu and on Flex,
//! with the sparse adjacency; the dense-adjacency baseline learns the same task.

#[allow(dead_code)]
#[path = "../../examples/gcn.rs"]
mod example;

#[test]
fn gcn_loss_falls() {
    for (sage, cpu) in [(false, false), (true, false), (false, true), (true, true)] {
        let o = example::Options { epochs: 8, sage, cpu, ..Default::default() };
        let run = example::train(&o, false, |_, _| {}).unwrap();
        let (first, last) = (run.epochs[0].loss, run.epochs[run.epochs.len() - 1].loss);
        assert!(first.is_finite() && last.is_finite());
        assert!(last < first * 0.98, "sage={sage} cpu={cpu}: loss {first} -> {last}");
    }
}

#[test]
fn sparse_and_dense_adjacencies_train_alike() {
    // The same model, seed and data: the sparse kernels and Burn's dense matmul give losses
    // equal to float rounding over a few epochs (both forwards first use the parameters in
    // the same order: Burn initialises them lazily, in that order).
    for sage in [false, true] {
        let o = example::Options { epochs: 5, sage, cpu: true, ..Default::default() };
        let sparse = example::train(&o, false, |_, _| {}).unwrap();
        let dense = example::train(&o, true, |_, _| {}).unwrap();
        for (s, d) in sparse.epochs.iter().zip(&dense.epochs) {
            assert!((s.loss - d.loss).abs() <= 1e-3 * d.loss.abs(), "sage={sage}: {} vs {}", s.loss, d.loss);
        }
    }
}
