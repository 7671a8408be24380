//! Sparse weights as module parameters: `SparseLinear` against dense Burn on its densified
//! weight (forward, gradients, finite differences), training with Adam, records that carry
//! the pattern (and refuse a malformed one), pruning invariants, statistics.

use crate::common::*;
use burn::module::{Module, Param, ParamId};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::{activation::relu, DType, Device, Int, Tensor, TensorData};
use burn_sparsec::{erdos_renyi_densities, SparseError, SparseLinear, SparseLinearConfig, SparseWeight};

/// `x · Wᵀ + b` in dense Burn from the layer's densified weight.
fn dense_forward(layer: &SparseLinear, x: Tensor<2>) -> Tensor<2> {
    let w = layer.weight.to_dense().unwrap();
    let y = x.matmul(w.transpose());
    match &layer.bias {
        Some(b) => y + b.val().unsqueeze::<2>(),
        None => y,
    }
}

/// The CSR pattern of a weight on the host: `(indptr, indices)`.
fn pattern(w: &SparseWeight) -> (Vec<usize>, Vec<usize>) {
    let m = w.matrix().unwrap();
    (m.host_indptr().iter().map(|&x| x as usize).collect(), m.host_indices().iter().map(|&x| x as usize).collect())
}

#[test]
fn sparse_linear_equals_dense_linear_on_its_densified_weight() {
    for dev in devices() {
        sparse_linear_equals_dense_linear_on_its_densified_weight_on(&dev);
    }
}

fn sparse_linear_equals_dense_linear_on_its_densified_weight_on(dev: &Device) {
    let dev = dev.clone();
    // (d_input, d_output, density, batch)
    for (i, &(din, dout, density, batch)) in
        [(64, 32, 0.1, 16), (33, 17, 0.5, 5), (128, 10, 1.0, 3), (20, 7, 0.01, 9), (48, 1, 0.25, 1)].iter().enumerate()
    {
        let layer = SparseLinearConfig::new(din, dout).with_density(density).with_seed(i as u64).init(&dev).unwrap();
        let total = (density * (din * dout) as f64).round() as usize;
        let s = layer.weight.stats().unwrap();
        assert_eq!((s.rows, s.cols, s.nnz), (dout, din, total), "{s}");
        assert!(s.max_row - s.min_row <= 1 && s.min_row == total / dout, "rows spread evenly: {s}");
        let x = dense(batch, din, 100 + i as u64, &dev);
        let got = host(layer.forward(x.clone()).unwrap());
        close(&format!("SparseLinear {din}→{dout} at {density}"), &got, &host(dense_forward(&layer, x)), 1e-4);
    }
    // Without a bias, and a layer whose pattern is empty (density 0): y = b.
    let layer = SparseLinearConfig::new(16, 8).with_bias(false).init(&dev).unwrap();
    let x = dense(4, 16, 7, &dev);
    close("no bias", &host(layer.forward(x.clone()).unwrap()), &host(dense_forward(&layer, x.clone())), 1e-4);
    let empty = SparseLinearConfig::new(16, 8).with_density(0.0).init(&dev).unwrap();
    assert_eq!(empty.weight.nnz(), 0);
    close("empty weight", &host(empty.forward(x.clone()).unwrap()), &host(dense_forward(&empty, x)), 1e-6);
}

#[test]
fn sparse_linear_gradients_match_dense_autodiff_and_finite_differences() {
    for dev in devices() {
        sparse_linear_gradients_match_dense_autodiff_and_finite_differences_on(&dev);
    }
}

fn sparse_linear_gradients_match_dense_autodiff_and_finite_differences_on(dev: &Device) {
    let dev = dev.clone().autodiff();
    let (din, dout, batch) = (40, 24, 6);
    let layer = SparseLinearConfig::new(din, dout).with_density(0.2).with_seed(3).init(&dev).unwrap();
    let w = dense(batch, dout, 31, &dev);
    let x = dense(batch, din, 32, &dev).require_grad();
    // A loss that is not linear in the weights: Σ w ⊙ y².
    let y = layer.forward(x.clone()).unwrap();
    let grads = (y.clone() * y * w.clone()).sum().backward();
    let dv = host(layer.weight.values_param().val().grad(&grads).expect("value gradient"));
    let dx = host(x.grad(&grads).expect("input gradient"));
    let db = host(layer.bias.as_ref().unwrap().val().grad(&grads).expect("bias gradient"));

    let d = layer.weight.to_dense().unwrap().detach().require_grad();
    let b = layer.bias.as_ref().unwrap().val().detach().require_grad();
    let x2 = dense(batch, din, 32, &dev).require_grad();
    let y2 = x2.clone().matmul(d.clone().transpose()) + b.clone().unsqueeze::<2>();
    let grads = (y2.clone() * y2 * w.clone()).sum().backward();
    let dd = host(d.grad(&grads).unwrap());
    let (indptr, indices) = pattern(&layer.weight);
    let at: Vec<f32> = (0..dout)
        .flat_map(|r| (indptr[r]..indptr[r + 1]).map(|p| dd[r * din + indices[p]]).collect::<Vec<_>>())
        .collect();
    close("dW at the pattern", &dv, &at, 1e-3);
    close("dx", &dx, &host(x2.grad(&grads).unwrap()), 1e-3);
    close("db", &db, &host(b.grad(&grads).unwrap()), 1e-3);

    // Central differences in a few values, on the plain device.
    let plain = dev.clone().inner();
    let values = host(layer.weight.values());
    let (indptr32, indices32): (Vec<i32>, Vec<i32>) =
        (indptr.iter().map(|&v| v as i32).collect(), indices.iter().map(|&v| v as i32).collect());
    let bias = layer.bias.as_ref().unwrap().val().detach();
    let loss = |vals: Vec<f32>| -> f64 {
        let wgt = SparseWeight::from_parts(dout, din, indptr32.clone(), indices32.clone(), vals, &plain).unwrap();
        let l = SparseLinear::new(wgt, Some(Tensor::from_data(bias.clone().into_data(), &plain)));
        let x = dense(batch, din, 32, &plain);
        let y = l.forward(x).unwrap();
        let w = dense(batch, dout, 31, &plain);
        host((y.clone() * y * w).sum()).iter().map(|&v| v as f64).sum()
    };
    let eps = 1e-2f32;
    for p in [0, values.len() / 3, values.len() / 2, values.len() - 1] {
        let (mut up, mut down) = (values.clone(), values.clone());
        up[p] += eps;
        down[p] -= eps;
        let fd = (loss(up) - loss(down)) / (2.0 * eps as f64);
        let g = dv[p] as f64;
        assert!((fd - g).abs() <= 1e-2 * g.abs().max(0.1), "value {p}: finite difference {fd}, gradient {g}");
    }
}

/// A two-layer sparse MLP.
#[derive(Module, Debug)]
struct SparseMlp {
    hidden: SparseLinear,
    output: SparseLinear,
}

impl SparseMlp {
    fn new(seed: u64, device: &Device) -> Self {
        SparseMlp {
            hidden: SparseLinearConfig::new(16, 64).with_density(0.25).with_seed(seed).init(device).unwrap(),
            output: SparseLinearConfig::new(64, 4).with_density(0.5).with_seed(seed + 1).init(device).unwrap(),
        }
    }
    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.output.forward(relu(self.hidden.forward(x).unwrap())).unwrap()
    }
}

/// 256 points in 16 dimensions labelled by the largest of 4 fixed random projections.
fn teacher_task(device: &Device) -> (Tensor<2>, Tensor<1, Int>, Vec<i64>) {
    let (n, d, c) = (256, 16, 4);
    let x = host(dense(n, d, 77, device));
    let t = host(dense(d, c, 78, device));
    let labels: Vec<i64> = (0..n)
        .map(|i| {
            let score = |k: usize| (0..d).map(|j| x[i * d + j] * t[j * c + k]).sum::<f32>();
            (0..c).max_by(|&a, &b| score(a).total_cmp(&score(b))).unwrap() as i64
        })
        .collect();
    let xs = Tensor::<2>::from_data(TensorData::new(x, [n, d]), device);
    let ys = Tensor::<1, Int>::from_data(TensorData::new(labels.clone(), [n]), device);
    (xs, ys, labels)
}

fn accuracy(logits: Tensor<2>, labels: &[i64]) -> f64 {
    let l = host(logits);
    let c = l.len() / labels.len();
    let right = labels
        .iter()
        .enumerate()
        .filter(|&(i, &y)| (0..c).max_by(|&a, &b| l[i * c + a].total_cmp(&l[i * c + b])).unwrap() as i64 == y)
        .count();
    right as f64 / labels.len() as f64
}

#[test]
fn a_sparse_mlp_trains_with_adam_and_its_record_replays() {
    for dev in devices() {
        a_sparse_mlp_trains_with_adam_and_its_record_replays_on(&dev);
    }
}

fn a_sparse_mlp_trains_with_adam_and_its_record_replays_on(dev: &Device) {
    let dev = dev.clone().autodiff();
    let (x, y, labels) = teacher_task(&dev);
    let loss_fn = CrossEntropyLossConfig::new().init(&dev);
    let mut model = SparseMlp::new(5, &dev);
    let nnz = (model.hidden.weight.nnz(), model.output.weight.nnz());
    let mut optim = AdamConfig::new().init();
    let mut losses = Vec::new();
    for _ in 0..80 {
        let loss = loss_fn.forward(model.forward(x.clone()), y.clone());
        losses.push(host(loss.clone())[0]);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(0.02, model, grads);
    }
    let (first, last) = (losses[0], *losses.last().unwrap());
    let acc = accuracy(model.forward(x.clone()), &labels);
    assert!(last < 0.35 * first && acc > 0.85, "loss {first} → {last}, accuracy {acc}");
    // The optimiser updated values only: the patterns are the initial ones.
    assert_eq!((model.hidden.weight.nnz(), model.output.weight.nnz()), nnz);
    assert_eq!(pattern(&model.hidden.weight), pattern(&SparseMlp::new(5, &dev).hidden.weight));

    // A record carries patterns and values: a model with other patterns (built and used
    // first, so its own patterns are cached) gives the trained model's outputs bit for bit.
    let want = host(model.forward(x.clone()));
    let other = SparseMlp::new(9, &dev);
    assert_ne!(pattern(&other.hidden.weight), pattern(&model.hidden.weight));
    let _ = other.forward(x.clone());
    let loaded = other.load_record(model.clone().into_record());
    assert_eq!(host(loaded.forward(x.clone())), want, "load_record");
    assert_eq!(pattern(&loaded.hidden.weight), pattern(&model.hidden.weight));

    let path = std::env::temp_dir().join(format!("burn-sparsec-mlp-{}.bpk", std::process::id()));
    model.clone().save_file(&path).unwrap();
    let from_file = SparseMlp::new(11, &dev).load_file(&path);
    let got = host(from_file.forward(x.clone()));
    let _ = std::fs::remove_file(&path);
    assert_eq!(got, want, "save_file / load_file");

    // Evaluation mode (the plain device) and a device move keep the outputs.
    let valid = model.valid();
    assert_eq!(host(valid.forward(x.clone().inner())), want, "valid()");
    let moved = model.clone().to_device(&dev);
    assert_eq!(host(moved.forward(x)), want, "to_device");
}

/// The field names of `SparseWeight`'s parameters, to write records of any content.
#[derive(Module, Debug)]
struct Donor {
    shape: Param<Tensor<1, Int>>,
    indptr: Param<Tensor<1, Int>>,
    indices: Param<Tensor<1, Int>>,
    values: Param<Tensor<1>>,
}

fn ints(v: Vec<i32>, dev: &Device) -> Param<Tensor<1, Int>> {
    let n = v.len();
    Param::initialized(ParamId::new(), Tensor::from_data(TensorData::new(v, [n]), (dev, DType::I32)))
}

#[test]
fn a_malformed_record_is_refused_before_any_launch() {
    for dev in devices() {
        a_malformed_record_is_refused_before_any_launch_on(&dev);
    }
}

fn a_malformed_record_is_refused_before_any_launch_on(dev: &Device) {
    let dev = dev.clone();
    // The target: 3 × 4 with 4 entries.
    let target = || SparseWeight::from_parts(3, 4, vec![0, 1, 3, 4], vec![0, 1, 3, 2], vec![1.0; 4], &dev).unwrap();
    let good = target();
    assert!(good.matrix().is_ok());
    let cases: Vec<(&str, Vec<i32>, Vec<i32>, Vec<i32>)> = vec![
        ("column out of range", vec![3, 4], vec![0, 1, 3, 4], vec![0, 1, 3, 4]),
        ("negative column", vec![3, 4], vec![0, 1, 3, 4], vec![0, -1, 3, 2]),
        ("unsorted row", vec![3, 4], vec![0, 1, 3, 4], vec![0, 3, 1, 2]),
        ("decreasing indptr", vec![3, 4], vec![0, 3, 1, 4], vec![0, 1, 3, 2]),
        ("indptr past nnz", vec![3, 4], vec![0, 1, 3, 9], vec![0, 1, 3, 2]),
        ("negative rows", vec![-3, 4], vec![0, 1, 3, 4], vec![0, 1, 3, 2]),
        ("rows disagree with indptr", vec![2, 4], vec![0, 1, 3, 4], vec![0, 1, 3, 2]),
    ];
    for (what, shape, indptr, indices) in cases {
        let donor = Donor {
            shape: ints(shape, &dev),
            indptr: ints(indptr, &dev),
            indices: ints(indices, &dev),
            values: Param::from_tensor(Tensor::from_data(TensorData::new(vec![2.0f32; 4], [4]), &dev)),
        };
        let w = target().load_record(donor.into_record());
        let err = w.matrix().expect_err(what);
        assert!(matches!(err, SparseError::Invalid(_) | SparseError::Record(_)), "{what}: {err}");
        let layer = SparseLinear::new(w, None);
        assert!(layer.forward(dense(2, 4, 1, &dev)).is_err(), "{what}: forward ran");
    }
}

#[test]
fn pruning_keeps_the_stated_density_and_pattern() {
    for dev in devices() {
        pruning_keeps_the_stated_density_and_pattern_on(&dev);
    }
}

fn pruning_keeps_the_stated_density_and_pattern_on(dev: &Device) {
    let dev = dev.clone();
    let (rows, cols) = (40, 48);
    let d = dense(rows, cols, 55, &dev);
    let flat = host(d.clone());

    let w = SparseWeight::magnitude(d.clone(), 0.1).unwrap();
    let (indptr, indices) = pattern(&w);
    assert_eq!(w.nnz(), 192, "round(0.1 · 1920)");
    let kept: Vec<usize> =
        (0..rows).flat_map(|r| (indptr[r]..indptr[r + 1]).map(|p| r * cols + indices[p]).collect::<Vec<_>>()).collect();
    assert_eq!(host(w.values()), kept.iter().map(|&p| flat[p]).collect::<Vec<_>>());
    let least_kept = kept.iter().map(|&p| flat[p].abs()).fold(f32::INFINITY, f32::min);
    let most_dropped = (0..flat.len()).filter(|p| !kept.contains(p)).map(|p| flat[p].abs()).fold(0.0, f32::max);
    assert!(least_kept >= most_dropped, "kept {least_kept} < dropped {most_dropped}");

    let w = SparseWeight::two_four(d.clone()).unwrap();
    let (indptr, indices) = pattern(&w);
    assert_eq!(w.nnz(), rows * cols / 2);
    for r in 0..rows {
        let row = &indices[indptr[r]..indptr[r + 1]];
        for g in 0..cols / 4 {
            let group: Vec<usize> = row.iter().copied().filter(|&c| c / 4 == g).collect();
            assert_eq!(group.len(), 2, "row {r} group {g}");
            let dropped = (g * 4..g * 4 + 4).filter(|c| !group.contains(c));
            for c in dropped {
                assert!(
                    group.iter().all(|&k| flat[r * cols + k].abs() >= flat[r * cols + c].abs()),
                    "row {r} group {g}"
                );
            }
        }
    }
    let w = SparseWeight::n_m(d.clone(), 1, 8).unwrap();
    assert_eq!(w.nnz(), rows * cols / 8);

    // Pruning a sparse layer keeps a subset of its entries, with their values.
    let layer = SparseLinearConfig::new(cols, rows).with_density(0.5).with_seed(8).init(&dev).unwrap();
    let pruned = layer.prune(0.2).unwrap();
    assert_eq!(pruned.weight.nnz(), 384, "round(0.2 · 1920)");
    let dense_before = host(layer.weight.to_dense().unwrap());
    let dense_after = host(pruned.weight.to_dense().unwrap());
    for (p, &v) in dense_after.iter().enumerate() {
        assert!(v == 0.0 || v == dense_before[p], "entry {p} changed");
    }
    let x = dense(3, cols, 9, &dev);
    close("pruned layer", &host(pruned.forward(x.clone()).unwrap()), &host(dense_forward(&pruned, x)), 1e-4);

    // Refusals.
    for density in [1.5, -0.1, f64::NAN] {
        assert!(matches!(SparseWeight::magnitude(d.clone(), density), Err(SparseError::Argument { .. })), "{density}");
        assert!(SparseLinearConfig::new(4, 4).with_density(density).init(&dev).is_err(), "{density}");
    }
    assert!(matches!(SparseWeight::n_m(dense(4, 30, 1, &dev), 2, 4), Err(SparseError::Argument { .. })));
    assert!(matches!(SparseWeight::n_m(d.clone(), 0, 4), Err(SparseError::Argument { .. })));
    assert!(matches!(pruned.prune(0.5), Err(SparseError::Argument { .. })), "more entries than stored");
}

#[test]
fn rigl_drops_the_smallest_entries_and_grows_the_largest_gradients() {
    for dev in devices() {
        rigl_drops_the_smallest_entries_and_grows_the_largest_gradients_on(&dev);
    }
}

fn rigl_drops_the_smallest_entries_and_grows_the_largest_gradients_on(dev: &Device) {
    let dev = dev.clone().autodiff();
    let (din, dout, batch) = (24, 12, 8);
    let layer = SparseLinearConfig::new(din, dout).with_density(0.25).with_seed(4).init(&dev).unwrap();
    // The dense gradient of a loss, through a tracked dense view of the weight.
    let x = dense(batch, din, 41, &dev);
    let w = layer.weight.to_dense().unwrap().detach().require_grad();
    let y = x.matmul(w.clone().transpose());
    let grads = (y.clone() * y).sum().backward();
    let g = w.grad(&grads).unwrap();
    let gh = host(g.clone());

    let before = host(layer.weight.to_dense().unwrap());
    let nnz = layer.weight.nnz();
    let next = layer.rigl(g.clone(), 0.3).unwrap();
    let swap = (0.3 * nnz as f64).round() as usize;
    assert_eq!(next.weight.nnz(), nnz, "RigL keeps nnz");
    let (indptr, indices) = pattern(&next.weight);
    let after_pattern: Vec<usize> = (0..dout)
        .flat_map(|r| (indptr[r]..indptr[r + 1]).map(move |p| (r, p)))
        .map(|(r, p)| r * din + indices[p])
        .collect();
    let (old_indptr, old_indices) = pattern(&layer.weight);
    let old_pattern: Vec<usize> = (0..dout)
        .flat_map(|r| (old_indptr[r]..old_indptr[r + 1]).map(move |p| (r, p)))
        .map(|(r, p)| r * din + old_indices[p])
        .collect();
    let after = host(next.weight.to_dense().unwrap());
    let dropped: Vec<usize> = old_pattern.iter().copied().filter(|f| !after_pattern.contains(f)).collect();
    let grown: Vec<usize> = after_pattern.iter().copied().filter(|f| !old_pattern.contains(f)).collect();
    assert_eq!((dropped.len(), grown.len()), (swap, swap));
    for &f in &grown {
        assert_eq!(after[f], 0.0, "grown entries start at zero");
    }
    for &f in old_pattern.iter().filter(|f| !dropped.contains(f)) {
        assert_eq!(after[f], before[f], "kept entries keep their values");
    }
    let max_dropped = dropped.iter().map(|&f| before[f].abs()).fold(0.0, f32::max);
    let min_kept =
        old_pattern.iter().filter(|f| !dropped.contains(f)).map(|&f| before[f].abs()).fold(f32::INFINITY, f32::min);
    assert!(max_dropped <= min_kept, "dropped {max_dropped} > kept {min_kept}");
    let min_grown = grown.iter().map(|&f| gh[f].abs()).fold(f32::INFINITY, f32::min);
    let max_not_grown = (0..din * dout)
        .filter(|f| !old_pattern.contains(f) && !grown.contains(f))
        .map(|f| gh[f].abs())
        .fold(0.0, f32::max);
    assert!(min_grown >= max_not_grown, "grew {min_grown} < left {max_not_grown}");
    // The updated layer still computes x · Wᵀ + b with its new weight, and trains.
    let x = dense(3, din, 42, &dev);
    close("after RigL", &host(next.forward(x.clone()).unwrap()), &host(dense_forward(&next, x)), 1e-4);
    assert!(matches!(layer.rigl(g.clone(), 1.5), Err(SparseError::Argument { .. })));
    assert!(matches!(layer.rigl(dense(2, 2, 1, &dev), 0.1), Err(SparseError::Shape { .. })));
}

#[test]
fn erdos_renyi_densities_spend_the_budget_and_favour_small_layers() {
    let shapes = [(512, 64), (8, 512), (256, 256)];
    let total: f64 = shapes.iter().map(|&(o, i)| (o * i) as f64).sum();
    for density in [0.05, 0.1, 0.5, 0.9, 1.0] {
        let d = erdos_renyi_densities(&shapes, density).unwrap();
        let stored: f64 = shapes.iter().zip(&d).map(|(&(o, i), &x)| x * (o * i) as f64).sum();
        assert!((stored - density * total).abs() < 1e-6 * total, "{density}: {d:?}");
        assert!(d.iter().all(|&x| (0.0..=1.0).contains(&x)), "{density}: {d:?}");
        assert!(d[1] >= d[0] && d[1] >= d[2], "the classifier is densest: {d:?}");
    }
    // At 0.9 the classifier saturates and the others take the rest.
    let d = erdos_renyi_densities(&shapes, 0.9).unwrap();
    assert_eq!(d[1], 1.0);
    assert!(erdos_renyi_densities(&shapes, 1.5).is_err());
}

#[test]
fn a_weight_prints_its_statistics() {
    let dev = device();
    let w = SparseWeight::from_parts(3, 4, vec![0, 1, 3, 3], vec![0, 1, 3], vec![1.0; 3], &dev).unwrap();
    assert_eq!(w.stats().unwrap().to_string(), "CSR 3×4, nnz 3 (density 25.00%), row lengths 0–2 (mean 1.0)");
    let layer = SparseLinear::new(w, None);
    let shown = format!("{layer}");
    assert!(shown.contains("CSR 3×4, nnz 3"), "{shown}");
}

/// The model of docs/burn.md, as written there.
mod docs_model {
    use burn::prelude::*;
    use burn_sparsec::{SparseLinear, SparseLinearConfig};

    #[derive(Module, Debug)]
    pub struct Mlp {
        hidden: SparseLinear,
        output: SparseLinear,
    }

    impl Mlp {
        pub fn new(device: &Device) -> burn_sparsec::Result<Self> {
            Ok(Mlp {
                hidden: SparseLinearConfig::new(784, 512).with_density(0.1).init(device)?,
                output: SparseLinearConfig::new(512, 10).with_density(0.5).init(device)?,
            })
        }
        pub fn forward(&self, x: Tensor<2>) -> burn_sparsec::Result<Tensor<2>> {
            self.output.forward(burn::tensor::activation::relu(self.hidden.forward(x)?))
        }
    }
}

#[test]
fn the_model_of_the_docs_builds_and_runs() {
    let dev = device();
    let model = docs_model::Mlp::new(&dev).unwrap();
    let y = model.forward(dense(2, 784, 1, &dev)).unwrap();
    assert_eq!(y.dims(), [2, 10]);
    assert!(host(y).iter().all(|v| v.is_finite()));
}

#[test]
fn a_sparse_model_moves_between_wgpu_and_flex() {
    let (gpu, cpu) = (device(), Device::flex());
    let model = SparseMlp::new(21, &gpu);
    let x = dense(16, 16, 22, &gpu);
    let want = host(model.forward(x.clone()));
    let on_cpu = model.clone().to_device(&cpu);
    let x_cpu = Tensor::<2>::from_data(x.clone().into_data(), &cpu);
    close("moved to Flex", &host(on_cpu.forward(x_cpu)), &want, 1e-4);
    let back = on_cpu.to_device(&gpu);
    assert_eq!(host(back.forward(x)), want, "moved back to wgpu");
}

#[test]
fn block_pruned_weights_run_as_bsr_and_match_dense() {
    for dev in devices() {
        block_pruned_weights_run_as_bsr_and_match_dense_on(&dev);
    }
}

fn block_pruned_weights_run_as_bsr_and_match_dense_on(dev: &Device) {
    use burn_sparsec::WeightFormat;
    let dev = dev.clone().autodiff();
    // Whole blocks (48 × 40), and edge blocks cut by the border (42 × 50).
    for (i, &(dout, din, block)) in [(48, 40, 4), (42, 50, 4), (64, 32, 8), (20, 18, 2)].iter().enumerate() {
        let d = dense(dout, din, 60 + i as u64, &dev);
        let w = SparseWeight::magnitude_blocks(d.clone(), 0.25, block).unwrap();
        let total = dout.div_ceil(block) * din.div_ceil(block);
        let kept = (0.25 * total as f64).round() as usize;
        // Every kept block is whole (within the matrix), and no other entry is stored.
        let (indptr, indices) = pattern(&w);
        let mut blocks = std::collections::BTreeMap::new();
        for r in 0..dout {
            for &c in &indices[indptr[r]..indptr[r + 1]] {
                *blocks.entry((r / block, c / block)).or_insert(0usize) += 1;
            }
        }
        assert_eq!(blocks.len(), kept, "{dout}×{din}");
        for (&(br, bc), &n) in &blocks {
            assert_eq!(n, block.min(dout - br * block) * block.min(din - bc * block), "block ({br}, {bc}) is whole");
        }
        assert_eq!(w.suggested_format().unwrap(), WeightFormat::Bsr { block }, "{dout}×{din}");
        assert_eq!(w.format(), WeightFormat::Csr, "CSR unless set");
        let w = w.with_format(WeightFormat::Bsr { block }).unwrap();
        assert!(w.stats().unwrap().to_string().starts_with("BSR"), "{}", w.stats().unwrap());

        // The layer runs the BSR kernel and equals dense Burn, gradients included.
        let layer = SparseLinear::new(w, Some(vector(dout, 70, &dev)));
        let values = layer.weight.values_param().val();
        let x = dense(5, din, 71, &dev).require_grad();
        let y = layer.forward(x.clone()).unwrap();
        let wsum = dense(5, dout, 72, &dev);
        let grads = (y.clone() * wsum.clone()).sum().backward();
        let (dv, dx) = (host(values.grad(&grads).unwrap()), host(x.grad(&grads).unwrap()));
        let wd = layer.weight.to_dense().unwrap().detach().require_grad();
        let x2 = x.detach().require_grad();
        let y2 = x2.clone().matmul(wd.clone().transpose()) + layer.bias.as_ref().unwrap().val().unsqueeze::<2>();
        close(&format!("BSR layer {dout}×{din}"), &host(y), &host(y2.clone()), 1e-4);
        let grads2 = (y2 * wsum).sum().backward();
        let dwd = host(wd.grad(&grads2).unwrap());
        let want: Vec<f32> = (0..dout)
            .flat_map(|r| indices[indptr[r]..indptr[r + 1]].iter().map(move |&c| (r, c)))
            .map(|(r, c)| dwd[r * din + c])
            .collect();
        close(&format!("BSR d values {dout}×{din}"), &dv, &want, 1e-3);
        close(&format!("BSR dx {dout}×{din}"), &dx, &host(x2.grad(&grads2).unwrap()), 1e-3);
    }
    // Scattered entries suggest CSR; BSR still computes them right (blocks padded with zeros).
    let random = SparseLinearConfig::new(64, 32).with_density(0.2).init(&dev).unwrap();
    assert_eq!(random.weight.suggested_format().unwrap(), WeightFormat::Csr);
    assert!(random.weight.stats().unwrap().to_string().starts_with("CSR"));
    let x = dense(3, 64, 73, &dev);
    let want = host(random.forward(x.clone()).unwrap());
    let blocked = SparseLinear::new(
        random.weight.with_format(WeightFormat::Bsr { block: 4 }).unwrap(),
        random.bias.map(|b| b.val()),
    );
    close("random weight as BSR", &host(blocked.forward(x).unwrap()), &want, 1e-4);
    assert!(blocked.weight.clone().with_format(WeightFormat::Bsr { block: 0 }).is_err());
    assert!(matches!(SparseWeight::magnitude_blocks(dense(4, 4, 1, &dev), 0.5, 0), Err(SparseError::Argument { .. })));
}
