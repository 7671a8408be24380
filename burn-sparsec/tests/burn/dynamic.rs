//! Patterns that change during training: the optimiser's state following a new pattern
//! (`follow_patterns`), pruning per row, the gradual pruning schedule, and 2:4 weights in the
//! sparse tensor cores' compressed layout.

use crate::common::*;
use burn::module::Module;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::{Device, Tensor};
use burn_sparsec::{follow_patterns, GradualPruning, SparseError, SparseLinear, SparseLinearConfig, SparseWeight};
use std::collections::BTreeMap;

/// `steps` Adam steps of `layer` on a loss that is not linear in its weight.
fn train(mut layer: SparseLinear, optim: &mut ModuleOptimizer, steps: usize, dev: &Device) -> SparseLinear {
    let (din, dout) = (layer.weight.shape().unwrap().1, layer.weight.shape().unwrap().0);
    let x = dense(6, din, 61, dev);
    let w = dense(6, dout, 62, dev);
    for _ in 0..steps {
        let y = layer.forward(x.clone()).unwrap();
        let grads = GradientsParams::from_grads((y.clone() * y * w.clone()).sum().backward(), &layer);
        layer = optim.step(0.01, layer, grads);
    }
    layer
}

/// The optimiser's per-entry state tensors of one parameter, by field name (`moment_1`, ...).
fn state_of(optim: &ModuleOptimizer, id: u64) -> BTreeMap<String, Vec<f32>> {
    let bytes = optim.into_bytes().unwrap();
    let reader = burn_pack::Reader::from_bytes(bytes).unwrap();
    let mut out = BTreeMap::new();
    for t in reader.into_tensors().unwrap() {
        let (name, dtype, shape, pid, bytes) = t.into_parts().unwrap();
        if pid == Some(id) {
            let field = name.split_once('.').unwrap().1.to_string();
            let v = burn::tensor::TensorData::from_bytes(bytes, shape, dtype).try_to_vec::<f32>().unwrap();
            out.insert(field, v);
        }
    }
    out
}

/// Every parameter id with state in the optimiser.
fn ids_with_state(optim: &ModuleOptimizer) -> Vec<u64> {
    let reader = burn_pack::Reader::from_bytes(optim.into_bytes().unwrap()).unwrap();
    let mut ids: Vec<u64> = reader.into_tensors().unwrap().iter().filter_map(|t| t.param_id).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// `(row, column)` of each stored entry, in storage order.
fn coords(w: &SparseWeight) -> Vec<(usize, usize)> {
    let m = w.matrix().unwrap();
    let (indptr, indices) = (m.host_indptr(), m.host_indices());
    (0..indptr.len() - 1)
        .flat_map(|r| (indptr[r] as usize..indptr[r + 1] as usize).map(move |p| (r, p)))
        .map(|(r, p)| (r, indices[p] as usize))
        .collect()
}

fn id(w: &SparseWeight) -> u64 {
    w.values_param().id.val()
}

#[test]
fn optimiser_state_follows_a_new_pattern() {
    for dev in devices() {
        optimiser_state_follows_a_new_pattern_on(&dev);
    }
}

fn optimiser_state_follows_a_new_pattern_on(dev: &Device) {
    let dev = dev.clone().autodiff();
    let mut optim = AdamConfig::new().init();
    let layer =
        train(SparseLinearConfig::new(24, 12).with_density(0.3).with_seed(2).init(&dev).unwrap(), &mut optim, 3, &dev);

    // The same pattern as a new parameter (RigL swapping nothing): with its state followed,
    // training goes on bit for bit as with the old parameter; with a fresh state it does not.
    let x = dense(5, 24, 63, &dev);
    let g = {
        let w = layer.weight.to_dense().unwrap().detach().require_grad();
        let y = x.matmul(w.clone().transpose());
        w.grad(&(y.clone() * y).sum().backward()).unwrap()
    };
    let same = layer.rigl(g.clone(), 0.0).unwrap();
    assert_ne!(id(&same.weight), id(&layer.weight));
    assert_eq!(coords(&same.weight), coords(&layer.weight));
    let mut kept_optim = optim.clone();
    let want = host(train(layer.clone(), &mut kept_optim, 2, &dev).weight.values());
    let mut followed = follow_patterns(optim.clone(), &[(&layer.weight, &same.weight)]).unwrap();
    assert_eq!(host(train(same.clone(), &mut followed, 2, &dev).weight.values()), want, "followed state");
    let mut fresh = optim.clone();
    assert_ne!(host(train(same, &mut fresh, 2, &dev).weight.values()), want, "a fresh state trains differently");

    // RigL and pruning: kept entries keep their moments, new ones start at zero, the old
    // parameter's state is gone, and repeated updates hold the state's size constant.
    let before = state_of(&optim, id(&layer.weight));
    assert!(before.len() >= 2, "Adam keeps two moments: {:?}", before.keys());
    let count = ids_with_state(&optim).len();
    let mut current = layer.clone();
    for (round, fraction) in [0.3, 0.5, 0.2].into_iter().enumerate() {
        let next = if round == 1 { current.prune(0.15).unwrap() } else { current.rigl(g.clone(), fraction).unwrap() };
        let old_state = state_of(&optim, id(&current.weight));
        optim = follow_patterns(optim, &[(&current.weight, &next.weight)]).unwrap();
        let new_state = state_of(&optim, id(&next.weight));
        assert_eq!(new_state.keys().collect::<Vec<_>>(), old_state.keys().collect::<Vec<_>>());
        let old_coords = coords(&current.weight);
        for (field, values) in &new_state {
            assert_eq!(values.len(), next.weight.nnz(), "{field}");
            for (k, c) in coords(&next.weight).iter().enumerate() {
                let want = old_coords.iter().position(|o| o == c).map_or(0.0, |p| old_state[field][p]);
                assert_eq!(values[k], want, "round {round}: {field} at {c:?}");
            }
        }
        assert!(state_of(&optim, id(&current.weight)).is_empty(), "the old state is dropped");
        assert_eq!(ids_with_state(&optim).len(), count, "round {round}");
        current = train(next, &mut optim, 1, &dev);
    }

    // Weights of different shapes are refused; a weight without state yet is skipped.
    let other = SparseLinearConfig::new(10, 12).init(&dev).unwrap();
    let err = follow_patterns(optim.clone(), &[(&current.weight, &other.weight)]).err().unwrap();
    assert!(matches!(err, SparseError::Shape { .. }), "{err}");
    let untrained = SparseLinearConfig::new(24, 12).init(&dev).unwrap();
    let moved = follow_patterns(optim.clone(), &[(&untrained.weight, &untrained.prune(0.05).unwrap().weight)]).unwrap();
    assert_eq!(ids_with_state(&moved), ids_with_state(&optim));
}

#[test]
fn pruning_rows_keeps_each_rows_largest_entries() {
    let dev = device();
    let layer = SparseLinearConfig::new(40, 16).with_density(0.5).with_seed(6).init(&dev).unwrap();
    let w = &layer.weight;
    let before = host(w.to_dense().unwrap());
    let pruned = w.prune_rows(0.2).unwrap();
    let after = host(pruned.to_dense().unwrap());
    let per_row = (0.2f64 * 40.0).round() as usize;
    for r in 0..16 {
        let row = |d: &[f32]| d[r * 40..(r + 1) * 40].to_vec();
        let (b, a) = (row(&before), row(&after));
        let stored = b.iter().filter(|v| **v != 0.0).count();
        let kept: Vec<usize> = (0..40).filter(|&c| a[c] != 0.0).collect();
        assert_eq!(kept.len(), per_row.min(stored), "row {r}");
        for &c in &kept {
            assert_eq!(a[c], b[c], "row {r} keeps its values");
        }
        let least_kept = kept.iter().map(|&c| b[c].abs()).fold(f32::INFINITY, f32::min);
        let most_dropped = (0..40).filter(|c| !kept.contains(c)).map(|c| b[c].abs()).fold(0.0, f32::max);
        assert!(least_kept >= most_dropped, "row {r}");
    }
    // A row shorter than the budget keeps all it has; densities outside [0, 1] are refused.
    assert_eq!(w.prune_rows(1.0).unwrap().nnz(), w.nnz());
    assert!(matches!(w.prune_rows(1.2), Err(SparseError::Argument { .. })));
}

#[test]
fn gradual_pruning_follows_the_cubic_schedule() {
    let s = GradualPruning::new(1.0, 0.1, 10, 110, 20).unwrap();
    assert_eq!((s.density_at(0), s.density_at(10), s.density_at(110), s.density_at(500)), (1.0, 1.0, 0.1, 0.1));
    assert!((s.density_at(60) - (0.1 + 0.9 / 8.0)).abs() < 1e-12, "halfway: {}", s.density_at(60));
    let all: Vec<f64> = (0..120).map(|t| s.density_at(t)).collect();
    assert!(all.windows(2).all(|w| w[1] <= w[0]), "never grows");
    let steps: Vec<usize> = (0..200).filter(|&t| s.prune_at(t).is_some()).collect();
    assert_eq!(steps, [10, 30, 50, 70, 90, 110]);
    // The last step prunes to the target even off the stride.
    let t = GradualPruning::new(0.5, 0.2, 0, 25, 10).unwrap();
    assert_eq!((0..40).filter(|&s| t.prune_at(s).is_some()).collect::<Vec<_>>(), [0, 10, 20, 25]);
    assert_eq!(t.prune_at(25), Some(0.2));
    for bad in [
        GradualPruning::new(0.1, 0.5, 0, 10, 1),
        GradualPruning::new(1.5, 0.5, 0, 10, 1),
        GradualPruning::new(1.0, 0.5, 10, 0, 1),
        GradualPruning::new(1.0, 0.5, 0, 10, 0),
    ] {
        assert!(matches!(bad, Err(SparseError::Argument { .. })), "{bad:?}");
    }
}

#[test]
fn a_layer_pruned_gradually_reaches_its_target_and_keeps_learning() {
    let dev = device().autodiff();
    let mut optim = AdamConfig::new().init();
    let schedule = GradualPruning::new(1.0, 0.1, 0, 40, 10).unwrap();
    let mut layer = SparseLinearConfig::new(32, 16).with_density(1.0).with_seed(3).init(&dev).unwrap();
    let x = dense(8, 32, 71, &dev);
    let target: Tensor<2> = dense(8, 16, 72, &dev);
    let loss = |l: &SparseLinear| {
        let d = l.forward(x.clone()).unwrap() - target.clone();
        (d.clone() * d).mean()
    };
    let first = host(loss(&layer))[0];
    for step in 0..60 {
        if let Some(density) = schedule.prune_at(step) {
            let next = layer.prune(density).unwrap();
            assert_eq!(next.weight.nnz(), (density * 512.0).round() as usize, "step {step}");
            optim = follow_patterns(optim, &[(&layer.weight, &next.weight)]).unwrap();
            layer = next;
        }
        let grads = GradientsParams::from_grads(loss(&layer).backward(), &layer);
        layer = optim.step(0.02, layer, grads);
    }
    assert_eq!(layer.weight.nnz(), 51, "round(0.1 · 512)");
    let last = host(loss(&layer))[0];
    assert!(last < 0.5 * first, "loss {first} → {last}");
    assert_eq!(layer.clone().valid().weight.nnz(), 51);
}

#[test]
fn a_two_four_weight_converts_to_the_tensor_core_layout_and_back() {
    let dev = device();
    let (rows, cols) = (12, 40);
    let d = dense(rows, cols, 81, &dev);
    let w = SparseWeight::two_four(d.clone()).unwrap();
    let want = host(w.to_dense().unwrap());
    let nm = w.to_n_m(2, 4).unwrap();
    assert_eq!((nm.shape(), nm.pattern(), nm.index_bits()), ((rows, cols), (2, 4), 2));
    assert_eq!(nm.values().len(), rows * cols / 2, "two values per group of four");
    assert_eq!(nm.metadata().len(), rows * (cols / 4).div_ceil(8), "8 nibbles to a word");
    for r in 0..rows {
        for g in 0..cols / 4 {
            let (lo, hi) = (nm.position(r, g, 0).unwrap(), nm.position(r, g, 1).unwrap());
            assert!(lo < hi && hi < 4, "row {r} group {g}: {lo}, {hi}");
            let nibble = (nm.metadata()[r * nm.words_per_row() + g / 8] >> ((g % 8) * 4)) & 0xF;
            assert_eq!(nibble as usize, lo | hi << 2, "row {r} group {g}");
            for (t, p) in [lo, hi].into_iter().enumerate() {
                assert_eq!(nm.values()[(r * (cols / 4) + g) * 2 + t], want[r * cols + g * 4 + p], "row {r} group {g}");
            }
        }
    }
    let back = SparseWeight::from_n_m(&nm, &dev).unwrap();
    assert_eq!((back.nnz(), host(back.to_dense().unwrap())), (w.nnz(), want));
    // A weight with three entries in some group of four is not 2:4.
    let dense_ish = SparseWeight::magnitude(d, 0.75).unwrap();
    assert!(matches!(dense_ish.to_n_m(2, 4), Err(SparseError::Argument { .. })));
}
