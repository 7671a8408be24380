//! A two-layer GCN or GraphSAGE on cora (`$SPARSEC_DATA/cora.mtx`) with synthetic features
//! and labels, trained with Adam on the default wgpu device or on Flex (the CPU). The
//! propagations run sparsec kernels: the GCN's first layer is the fused SpMM + bias + ReLU,
//! the second a plain SpMM, GraphSAGE's layers average the neighbours by SpMM; gradients come
//! back through SDDMM and the transposed SpMM. With `--dense` the same model also trains with
//! a dense adjacency (Burn's matmul) on the same device, for accuracy and time side by side.
//!
//! ```text
//! cargo run -p burn-sparsec --example gcn -- --epochs 50 [--model sage] [--device flex] [--dense]
//! ```

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::activation::relu;
use burn::tensor::{Device, DeviceKind, Int, Tensor, TensorData};
use burn_sparsec::{gcn_adjacency, mean_adjacency, GraphConv, GraphConvConfig, SageConv, SageConvConfig, SparseCsr};
use sparsec_formats::Csr;
use std::error::Error;
use std::time::Instant;

/// Training settings.
pub struct Options {
    /// Epochs to train.
    pub epochs: usize,
    /// Hidden width.
    pub hidden: usize,
    /// Input feature width.
    pub features: usize,
    /// Number of classes.
    pub classes: usize,
    /// Learning rate.
    pub lr: f64,
    /// GraphSAGE (mean aggregator) instead of GCN.
    pub sage: bool,
    /// Train on Flex (the CPU) instead of wgpu.
    pub cpu: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { epochs: 100, hidden: 16, features: 32, classes: 7, lr: 0.01, sage: false, cpu: false }
    }
}

/// One epoch's result.
pub struct Epoch {
    /// Training loss before the update.
    pub loss: f32,
    /// Wall time of the epoch (forward, backward, update, loss read-back).
    pub seconds: f64,
}

/// A run's epochs and the accuracy of the trained model on the held-out nodes.
pub struct Run {
    /// Every epoch.
    pub epochs: Vec<Epoch>,
    /// Accuracy on the test nodes (every fifth node; the others train).
    pub accuracy: f64,
}

/// The graph's adjacency: sparse (sparsec kernels) or dense (Burn's matmul, the baseline).
pub enum Adjacency {
    /// A sparse matrix.
    Sparse(SparseCsr),
    /// The same matrix densified.
    Dense(Tensor<2>),
}

impl Adjacency {
    fn spmm(&self, x: Tensor<2>) -> Result<Tensor<2>, Box<dyn Error>> {
        Ok(match self {
            Adjacency::Sparse(a) => a.spmm(x)?,
            Adjacency::Dense(a) => a.clone().matmul(x),
        })
    }
}

/// The model: two [`GraphConv`] layers (`relu(Â X W1 + b1)` then `Â H W2 + b2`) or two
/// [`SageConv`] layers with a ReLU between.
#[derive(Module, Debug)]
pub enum Gnn {
    /// GCN.
    Gcn(Layers<GraphConv>),
    /// GraphSAGE.
    Sage(Layers<SageConv>),
}

/// Two layers.
#[derive(Module, Debug)]
pub struct Layers<L: Module> {
    first: L,
    second: L,
}

impl Gnn {
    fn new(o: &Options, device: &Device) -> Self {
        if o.sage {
            Gnn::Sage(Layers {
                first: SageConvConfig::new(o.features, o.hidden).init(device),
                second: SageConvConfig::new(o.hidden, o.classes).init(device),
            })
        } else {
            Gnn::Gcn(Layers {
                first: GraphConvConfig::new(o.features, o.hidden).init(device),
                second: GraphConvConfig::new(o.hidden, o.classes).init(device),
            })
        }
    }

    fn forward(&self, adj: &Adjacency, x: Tensor<2>) -> Result<Tensor<2>, Box<dyn Error>> {
        let bias = |l: &GraphConv| l.bias.val().unsqueeze::<2>();
        Ok(match (self, adj) {
            (Gnn::Gcn(Layers { first: l1, second: l2 }), Adjacency::Sparse(a)) => {
                l2.forward(a, l1.forward_relu(a, x)?)?
            }
            (Gnn::Gcn(Layers { first: l1, second: l2 }), Adjacency::Dense(_)) => {
                let h = relu(adj.spmm(l1.linear.forward(x))? + bias(l1));
                adj.spmm(l2.linear.forward(h))? + bias(l2)
            }
            (Gnn::Sage(Layers { first: l1, second: l2 }), Adjacency::Sparse(a)) => {
                l2.forward(a, relu(l1.forward(a, x)?))?
            }
            (Gnn::Sage(Layers { first: l1, second: l2 }), Adjacency::Dense(_)) => {
                let sage = |l: &SageConv, x: Tensor<2>| -> Result<Tensor<2>, Box<dyn Error>> {
                    Ok(l.self_linear.forward(x.clone()) + l.neigh_linear.forward(adj.spmm(x)?))
                };
                sage(l2, relu(sage(l1, x)?))?
            }
        })
    }
}

/// Deterministic pseudo-random numbers in [0, 1).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// Synthetic labels (node id modulo classes, smoothed once over the graph so neighbours tend
/// to agree) and features (a noisy one-hot of the label spread over `features` columns).
fn synthetic(n: usize, indptr: &[i32], indices: &[i32], o: &Options) -> (Vec<f32>, Vec<i64>) {
    let mut rng = Lcg(42);
    let seed: Vec<usize> = (0..n).map(|_| (rng.next() * o.classes as f32) as usize % o.classes).collect();
    let labels: Vec<i64> = (0..n)
        .map(|i| {
            let mut votes = vec![0usize; o.classes];
            for p in indptr[i] as usize..indptr[i + 1] as usize {
                votes[seed[indices[p] as usize]] += 1;
            }
            (0..o.classes).max_by_key(|&c| (votes[c], c == seed[i])).unwrap_or(0) as i64
        })
        .collect();
    let mut x = vec![0f32; n * o.features];
    for i in 0..n {
        for f in 0..o.features {
            let signal = if f % o.classes == labels[i] as usize { 1.0 } else { 0.0 };
            x[i * o.features + f] = signal + (rng.next() - 0.5) * 2.0;
        }
    }
    (x, labels)
}

/// Trains on cora with the sparse adjacency (or, with `dense`, the densified one) and returns
/// every epoch's loss and time and the test accuracy.
pub fn train(o: &Options, dense: bool, mut report: impl FnMut(usize, &Epoch)) -> Result<Run, Box<dyn Error>> {
    let path = sparsec_formats::data_dir().join("cora.mtx");
    let a: Csr<i64, f64> = sparsec_formats::mtx::read_mtx_path(&path)?;
    let device = if o.cpu { Device::flex() } else { Device::wgpu(DeviceKind::default()) }.autodiff();
    device.seed(7);
    let gcn = gcn_adjacency(&a, &device)?;
    let adj = if o.sage { mean_adjacency(&a, &device)? } else { gcn.clone() };
    let n = adj.rows();
    // The labels are smoothed over the GCN's neighbourhoods for both models.
    let (indptr, indices) = (gcn.host_indptr().to_vec(), gcn.host_indices().to_vec());
    let (x, labels) = synthetic(n, &indptr, &indices, o);
    let adj = if dense { Adjacency::Dense(adj.to_dense()) } else { Adjacency::Sparse(adj) };
    let x = Tensor::<2>::from_data(TensorData::new(x, [n, o.features]), &device);
    // Every fifth node is held out: the loss reads the others only.
    let train: Vec<i64> = (0..n as i64).filter(|i| i % 5 != 0).collect();
    let train_ids = Tensor::<1, Int>::from_data(TensorData::new(train.clone(), [train.len()]), &device);
    let train_labels: Vec<i64> = train.iter().map(|&i| labels[i as usize]).collect();
    let targets = Tensor::<1, Int>::from_data(TensorData::new(train_labels, [train.len()]), &device);
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    let mut model = Gnn::new(o, &device);
    let mut optim = AdamConfig::new().init();
    let mut epochs = Vec::new();
    for e in 0..o.epochs {
        let t = Instant::now();
        let logits = model.forward(&adj, x.clone())?.select(0, train_ids.clone());
        let loss = loss_fn.forward(logits, targets.clone());
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(o.lr, model, grads);
        let loss = loss.try_into_scalar::<f32>().map_err(|e| format!("reading the loss: {e:?}"))?;
        let epoch = Epoch { loss, seconds: t.elapsed().as_secs_f64() };
        report(e, &epoch);
        epochs.push(epoch);
    }
    let logits =
        model.forward(&adj, x)?.into_data().convert::<f32>().try_to_vec::<f32>().map_err(|e| format!("{e:?}"))?;
    let c = o.classes;
    let test: Vec<usize> = (0..n).filter(|i| i % 5 == 0).collect();
    let right = test
        .iter()
        .filter(|&&i| {
            let row = &logits[i * c..(i + 1) * c];
            (0..c).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap_or(0) as i64 == labels[i]
        })
        .count();
    Ok(Run { epochs, accuracy: right as f64 / test.len().max(1) as f64 })
}

fn parse_args() -> Result<(Options, bool), String> {
    let mut o = Options::default();
    let mut dense = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--epochs" => o.epochs = value("--epochs")?.parse().map_err(|e| format!("--epochs: {e}"))?,
            "--hidden" => o.hidden = value("--hidden")?.parse().map_err(|e| format!("--hidden: {e}"))?,
            "--lr" => o.lr = value("--lr")?.parse().map_err(|e| format!("--lr: {e}"))?,
            "--model" => {
                o.sage = match value("--model")?.as_str() {
                    "gcn" => false,
                    "sage" => true,
                    other => return Err(format!("--model: `{other}` is not gcn or sage")),
                }
            }
            "--device" => {
                o.cpu = match value("--device")?.as_str() {
                    "flex" | "cpu" => true,
                    "wgpu" => false,
                    other => return Err(format!("--device: `{other}` is not flex or wgpu")),
                }
            }
            "--dense" => dense = true,
            other => {
                return Err(format!(
                    "unknown argument `{other}` (try --epochs N, --hidden N, --lr X, --model gcn|sage, --device wgpu|flex, --dense)"
                ))
            }
        }
    }
    Ok((o, dense))
}

fn main() -> Result<(), Box<dyn Error>> {
    let (o, dense) = parse_args()?;
    let model = if o.sage { "GraphSAGE" } else { "GCN" };
    let device = if o.cpu { "flex" } else { "wgpu" };
    let runs: &[bool] = if dense { &[false, true] } else { &[false] };
    for &d in runs {
        let adjacency = if d { "dense adjacency (Burn matmul)" } else { "sparse adjacency (sparsec kernels)" };
        println!("== {model} on {device}, {adjacency}");
        let run = train(&o, d, |e, ep| println!("epoch {e:4}  loss {:.4}  {:.1} ms", ep.loss, ep.seconds * 1e3))?;
        let epochs = &run.epochs;
        if let (Some(first), Some(last)) = (epochs.first(), epochs.last()) {
            // The first epoch includes kernel compilation; report the mean of the rest.
            let rest = &epochs[1.min(epochs.len() - 1)..];
            let mean = rest.iter().map(|e| e.seconds).sum::<f64>() / rest.len() as f64;
            println!(
                "loss {:.4} -> {:.4}; test accuracy {:.1}%; mean epoch time after the first: {:.1} ms",
                first.loss,
                last.loss,
                run.accuracy * 100.0,
                mean * 1e3
            );
            if epochs.len() > 1 && last.loss >= first.loss {
                return Err(format!("the loss did not fall ({:.4} -> {:.4})", first.loss, last.loss).into());
            }
        }
    }
    Ok(())
}
