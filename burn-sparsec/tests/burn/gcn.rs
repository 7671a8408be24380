//! The GCN example trains on cora and its loss falls.

#[allow(dead_code)]
#[path = "../../examples/gcn.rs"]
mod example;

#[test]
fn gcn_loss_falls() {
    let o = example::Options { epochs: 8, ..Default::default() };
    let epochs = example::train(&o, |_, _| {}).unwrap();
    let (first, last) = (epochs[0].loss, epochs[epochs.len() - 1].loss);
    assert!(first.is_finite() && last.is_finite());
    assert!(last < first * 0.98, "loss {first} -> {last}");
}
