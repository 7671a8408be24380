//! A two-layer GCN on cora (`$SPARSEC_DATA/cora.mtx`) with synthetic features and labels,
//! trained with Adam on the default wgpu device. Both propagations run sparsec kernels: the
//! first layer is the fused SpMM + bias + ReLU, the second a plain SpMM; gradients come back
//! through SDDMM and the transposed SpMM.
//!
//! ```text
//! cargo run -p burn-sparsec --example gcn -- --epochs 50
//! ```

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::{Device, DeviceKind, Int, Tensor, TensorData};
use burn_sparsec::{gcn_adjacency, GraphConv, GraphConvConfig, SparseCsr};
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
}

impl Default for Options {
    fn default() -> Self {
        Options { epochs: 100, hidden: 16, features: 32, classes: 7, lr: 0.01 }
    }
}

/// One epoch's result.
pub struct Epoch {
    /// Training loss before the update.
    pub loss: f32,
    /// Wall time of the epoch (forward, backward, update, loss read-back).
    pub seconds: f64,
}

/// The model: `relu(Â X W1 + b1)` then `Â H W2 + b2`, two [`GraphConv`] layers.
#[derive(Module, Debug)]
pub struct Gcn {
    layer1: GraphConv,
    layer2: GraphConv,
}

impl Gcn {
    fn new(o: &Options, device: &Device) -> Self {
        Gcn {
            layer1: GraphConvConfig::new(o.features, o.hidden).init(device),
            layer2: GraphConvConfig::new(o.hidden, o.classes).init(device),
        }
    }

    fn forward(&self, adj: &SparseCsr, x: Tensor<2>) -> Result<Tensor<2>, Box<dyn Error>> {
        let h = self.layer1.forward_relu(adj, x)?;
        Ok(self.layer2.forward(adj, h)?)
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

/// Trains on cora and returns every epoch's loss and time.
pub fn train(o: &Options, mut report: impl FnMut(usize, &Epoch)) -> Result<Vec<Epoch>, Box<dyn Error>> {
    let path = sparsec_formats::data_dir().join("cora.mtx");
    let a: Csr<i64, f64> = sparsec_formats::mtx::read_mtx_path(&path)?;
    let device = Device::wgpu(DeviceKind::default()).autodiff();
    device.seed(7);
    let adj = gcn_adjacency(&a, &device)?;
    let n = adj.rows();
    let (indptr, indices) = (adj.host_indptr().to_vec(), adj.host_indices().to_vec());
    let (x, labels) = synthetic(n, &indptr, &indices, o);
    let x = Tensor::<2>::from_data(TensorData::new(x, [n, o.features]), &device);
    let targets = Tensor::<1, Int>::from_data(TensorData::new(labels, [n]), &device);
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    let mut model = Gcn::new(o, &device);
    let mut optim = AdamConfig::new().init();
    let mut epochs = Vec::new();
    for e in 0..o.epochs {
        let t = Instant::now();
        let logits = model.forward(&adj, x.clone())?;
        let loss = loss_fn.forward(logits, targets.clone());
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(o.lr, model, grads);
        let loss = loss.try_into_scalar::<f32>().map_err(|e| format!("reading the loss: {e:?}"))?;
        let epoch = Epoch { loss, seconds: t.elapsed().as_secs_f64() };
        report(e, &epoch);
        epochs.push(epoch);
    }
    Ok(epochs)
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--epochs" => o.epochs = value("--epochs")?.parse().map_err(|e| format!("--epochs: {e}"))?,
            "--hidden" => o.hidden = value("--hidden")?.parse().map_err(|e| format!("--hidden: {e}"))?,
            "--lr" => o.lr = value("--lr")?.parse().map_err(|e| format!("--lr: {e}"))?,
            other => return Err(format!("unknown argument `{other}` (try --epochs N, --hidden N, --lr X)")),
        }
    }
    Ok(o)
}

fn main() -> Result<(), Box<dyn Error>> {
    let o = parse_args()?;
    let epochs = train(&o, |e, ep| println!("epoch {e:4}  loss {:.4}  {:.1} ms", ep.loss, ep.seconds * 1e3))?;
    if let (Some(first), Some(last)) = (epochs.first(), epochs.last()) {
        // The first epoch includes kernel compilation; report the mean of the rest.
        let rest = &epochs[1.min(epochs.len() - 1)..];
        let mean = rest.iter().map(|e| e.seconds).sum::<f64>() / rest.len() as f64;
        println!("loss {:.4} -> {:.4}; mean epoch time after the first: {:.1} ms", first.loss, last.loss, mean * 1e3);
        if epochs.len() > 1 && last.loss >= first.loss {
            return Err(format!("the loss did not fall ({:.4} -> {:.4})", first.loss, last.loss).into());
        }
    }
    Ok(())
}
