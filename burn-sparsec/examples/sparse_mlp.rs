//! A 90%-sparse MLP against the dense one on the same task: both trained with Adam on the
//! default wgpu device or on Flex (the CPU), the sparse one made of `SparseLinear` layers
//! (sparsec kernels forward, SDDMM and the transposed SpMM backward). Prints test accuracy and
//! step time of each.
//!
//! The sparse model's pattern is found by gradual magnitude pruning from a dense start (the
//! default: Zhu & Gupta's cubic schedule over the first `--prune-until` of the steps, then
//! fine-tuning), or is random and static (`--static`), or is updated by RigL
//! (`--rigl-every N`); the optimiser's state follows every new pattern (`follow_patterns`).
//! Every layer keeps the same density unless `--erdos-renyi` spreads it by Erdős–Rényi scaling.
//!
//! The task: Gaussian inputs labelled by a fixed random linear teacher (the largest of its
//! projections), split into training and test points. With few training points (`--train
//! 4096`) both models are starved of data and the sparse one falls 4–6 points behind.
//!
//! ```text
//! cargo run --release -p burn-sparsec --example sparse_mlp -- --device flex
//! cargo run --release -p burn-sparsec --example sparse_mlp -- --rigl-every 50 --device flex
//! ```

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig};
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::{activation::relu, Device, DeviceKind, Int, Tensor, TensorData};
use burn_sparsec::{erdos_renyi_densities, follow_patterns, GradualPruning, SparseLinear, SparseLinearConfig};
use std::error::Error;
use std::time::Instant;

/// Settings.
pub struct Options {
    /// Training points.
    pub train: usize,
    /// Test points.
    pub test: usize,
    /// Input features.
    pub inputs: usize,
    /// Hidden units.
    pub hidden: usize,
    /// Classes.
    pub classes: usize,
    /// Optimiser steps.
    pub steps: usize,
    /// Minibatch size.
    pub batch: usize,
    /// Density of the sparse model's weights.
    pub density: f64,
    /// Learning rate.
    pub lr: f64,
    /// RigL: update the sparse patterns every this many steps (0: static patterns).
    pub rigl_every: usize,
    /// RigL: fraction of the entries swapped at the first update (decays to 0 by the end).
    pub rigl_fraction: f64,
    /// Gradual magnitude pruning from a dense start instead of a random static pattern.
    pub gradual: bool,
    /// Gradual pruning reaches the target density at this fraction of the steps.
    pub prune_until: f64,
    /// Gradual pruning prunes every this many steps.
    pub prune_every: usize,
    /// Run on Flex (the CPU; sparse kernels through the MLIR JIT) instead of wgpu.
    pub cpu: bool,
    /// The same density in every layer instead of Erdős–Rényi densities.
    pub uniform: bool,
    /// Seed of the device (the dense model's initial weights, the sparse ones' values).
    pub seed: u64,
}

impl Default for Options {
    /// The recipe the closing figures use: enough teacher-labelled points that neither model
    /// is starved of data, Adam at 5e-4, gradual pruning to 10% in every layer.
    fn default() -> Self {
        Options {
            train: 65536,
            test: 8192,
            inputs: 64,
            hidden: 1024,
            classes: 8,
            steps: 6000,
            batch: 256,
            density: 0.1,
            lr: 0.0005,
            rigl_every: 0,
            rigl_fraction: 0.3,
            gradual: true,
            prune_until: 0.5,
            prune_every: 10,
            cpu: false,
            seed: 3,
            uniform: true,
        }
    }
}

/// What a run measured for one model.
#[derive(Debug)]
pub struct Outcome {
    /// Accuracy on the test points.
    pub accuracy: f64,
    /// Median seconds of a training step over the last half of the steps (once a gradually
    /// pruned model has its final pattern, by default).
    pub step_seconds: f64,
    /// Stored weights.
    pub weights: usize,
}

/// The dense MLP.
#[derive(Module, Debug)]
pub struct DenseMlp {
    hidden: Linear,
    output: Linear,
}

/// The sparse MLP, and the densities its layers are pruned to (gradual pruning).
#[derive(Module, Debug)]
pub struct SparseMlp {
    hidden: SparseLinear,
    output: SparseLinear,
    #[module(skip)]
    targets: [f64; 2],
}

/// A model that maps a batch to logits.
pub trait Classifier: Module + Sized {
    /// Logits of `x`.
    fn logits(&self, x: Tensor<2>) -> Result<Tensor<2>, Box<dyn Error>>;

    /// Stored weights (biases excluded).
    fn stored(&self) -> usize;

    /// The model and optimiser before training step `step` on the batch `(x, y)`: a RigL or
    /// gradual-pruning update of the sparse patterns where `o` asks for one (the dense model
    /// has none).
    fn update(
        self,
        _o: &Options,
        _step: usize,
        _x: Tensor<2>,
        _y: Tensor<1, Int>,
        optim: ModuleOptimizer,
    ) -> Result<(Self, ModuleOptimizer), Box<dyn Error>> {
        Ok((self, optim))
    }
}

impl Classifier for DenseMlp {
    fn logits(&self, x: Tensor<2>) -> Result<Tensor<2>, Box<dyn Error>> {
        Ok(self.output.forward(relu(self.hidden.forward(x))))
    }

    fn stored(&self) -> usize {
        self.hidden.weight.val().shape().num_elements() + self.output.weight.val().shape().num_elements()
    }
}

impl Classifier for SparseMlp {
    fn logits(&self, x: Tensor<2>) -> Result<Tensor<2>, Box<dyn Error>> {
        Ok(self.output.forward(relu(self.hidden.forward(x)?))?)
    }

    fn stored(&self) -> usize {
        self.hidden.weight.nnz() + self.output.weight.nnz()
    }

    fn update(
        self,
        o: &Options,
        step: usize,
        x: Tensor<2>,
        y: Tensor<1, Int>,
        optim: ModuleOptimizer,
    ) -> Result<(Self, ModuleOptimizer), Box<dyn Error>> {
        let next = if o.gradual {
            let end = (o.prune_until * o.steps as f64) as usize;
            let mut densities = [0.0; 2];
            for (d, &target) in densities.iter_mut().zip(&self.targets) {
                match GradualPruning::new(1.0, target, 0, end, o.prune_every)?.prune_at(step) {
                    Some(density) if step > 0 => *d = density,
                    _ => return Ok((self, optim)),
                }
            }
            SparseMlp { hidden: self.hidden.prune(densities[0])?, output: self.output.prune(densities[1])?, ..self }
        } else if o.rigl_every > 0 && step > 0 && step.is_multiple_of(o.rigl_every) {
            // Cosine decay of the swapped fraction, as in RigL.
            let decay = 0.5 * (1.0 + (std::f64::consts::PI * step as f64 / o.steps as f64).cos());
            self.regrow(x, y, o.rigl_fraction * decay)?
        } else {
            return Ok((self, optim));
        };
        let optim = follow_patterns(
            optim,
            &[(&self.hidden.weight, &next.hidden.weight), (&self.output.weight, &next.output.weight)],
        )?;
        Ok((next, optim))
    }
}

impl SparseMlp {
    /// RigL: the dense weight gradients from one pass through dense views of the weights.
    fn regrow(&self, x: Tensor<2>, y: Tensor<1, Int>, fraction: f64) -> Result<Self, Box<dyn Error>> {
        let leaf = |l: &SparseLinear| -> Result<Tensor<2>, Box<dyn Error>> {
            Ok(l.weight.to_dense()?.detach().require_grad())
        };
        let bias = |l: &SparseLinear| l.bias.as_ref().map(|b| b.val().detach().unsqueeze::<2>());
        let (w1, w2) = (leaf(&self.hidden)?, leaf(&self.output)?);
        let mut h = x.matmul(w1.clone().transpose());
        if let Some(b) = bias(&self.hidden) {
            h = h + b;
        }
        let mut logits = relu(h).matmul(w2.clone().transpose());
        if let Some(b) = bias(&self.output) {
            logits = logits + b;
        }
        let grads = CrossEntropyLossConfig::new().init(&w1.device()).forward(logits, y).backward();
        let (g1, g2) = (w1.grad(&grads).ok_or("no gradient")?, w2.grad(&grads).ok_or("no gradient")?);
        Ok(SparseMlp {
            hidden: self.hidden.rigl(g1, fraction)?,
            output: self.output.rigl(g2, fraction)?,
            targets: self.targets,
        })
    }
}

struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f32 {
        let (u, v) = (self.uniform(), self.uniform());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
}

/// `n` Gaussian points and their teacher labels: the largest of `classes` fixed random
/// projections.
fn task(o: &Options, n: usize, seed: u64) -> (Vec<f32>, Vec<i64>) {
    let mut teacher = Rng(99);
    let w: Vec<f32> = (0..o.inputs * o.classes).map(|_| teacher.normal()).collect();
    let mut rng = Rng(seed);
    let x: Vec<f32> = (0..n * o.inputs).map(|_| rng.normal()).collect();
    let labels = (0..n)
        .map(|i| {
            let logit = |c: usize| (0..o.inputs).map(|j| x[i * o.inputs + j] * w[j * o.classes + c]).sum::<f32>();
            (0..o.classes).max_by(|&a, &b| logit(a).total_cmp(&logit(b))).unwrap_or(0) as i64
        })
        .collect();
    (x, labels)
}

/// Trains `model` on the task and measures it.
pub fn train<M: Classifier>(o: &Options, mut model: M, device: &Device) -> Result<Outcome, Box<dyn Error>> {
    let (x, y) = task(o, o.train, 1);
    let (tx, ty) = task(o, o.test, 2);
    let loss_fn = CrossEntropyLossConfig::new().init(device);
    let mut optim = AdamConfig::new().init();
    let batches = o.train / o.batch;
    let mut times = Vec::new();
    for step in 0..o.steps {
        let b = step % batches.max(1);
        let rows = b * o.batch..(b + 1) * o.batch;
        let xb = Tensor::<2>::from_data(
            TensorData::new(x[rows.start * o.inputs..rows.end * o.inputs].to_vec(), [o.batch, o.inputs]),
            device,
        );
        let yb = Tensor::<1, Int>::from_data(TensorData::new(y[rows].to_vec(), [o.batch]), device);
        let t = Instant::now();
        (model, optim) = model.update(o, step, xb.clone(), yb.clone(), optim)?;
        let loss = loss_fn.forward(model.logits(xb)?, yb);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(o.lr, model, grads);
        device.sync().map_err(|e| format!("{e:?}"))?;
        times.push(t.elapsed().as_secs_f64());
    }
    let txs = Tensor::<2>::from_data(TensorData::new(tx, [o.test, o.inputs]), device);
    let logits = model.logits(txs)?.into_data().convert::<f32>().try_to_vec::<f32>().map_err(|e| format!("{e:?}"))?;
    let right = ty
        .iter()
        .enumerate()
        .filter(|&(i, &l)| {
            let row = &logits[i * o.classes..(i + 1) * o.classes];
            (0..o.classes).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap_or(0) as i64 == l
        })
        .count();
    let mut rest = times[times.len() / 2..].to_vec();
    rest.sort_by(f64::total_cmp);
    Ok(Outcome {
        accuracy: right as f64 / o.test as f64,
        step_seconds: rest.get(rest.len() / 2).copied().unwrap_or(0.0),
        weights: model.stored(),
    })
}

/// Trains the dense and the sparse model on the same data; `(dense, sparse)`.
pub fn compare(o: &Options) -> Result<(Outcome, Outcome), Box<dyn Error>> {
    let device = if o.cpu { Device::flex() } else { Device::wgpu(DeviceKind::default()) }.autodiff();
    device.seed(o.seed);
    let dense = DenseMlp {
        hidden: LinearConfig::new(o.inputs, o.hidden).init(&device),
        output: LinearConfig::new(o.hidden, o.classes).init(&device),
    };
    // The weights per layer: the same density, or spread by Erdős–Rényi (the classifier denser).
    let d = if o.uniform {
        vec![o.density; 2]
    } else {
        erdos_renyi_densities(&[(o.hidden, o.inputs), (o.classes, o.hidden)], o.density)?
    };
    // A gradually pruned model starts dense (every entry stored) and reaches these densities.
    let start = |density: f64| if o.gradual { 1.0 } else { density };
    let sparse = SparseMlp {
        hidden: SparseLinearConfig::new(o.inputs, o.hidden).with_density(start(d[0])).with_seed(o.seed).init(&device)?,
        output: SparseLinearConfig::new(o.hidden, o.classes).with_density(start(d[1])).with_seed(o.seed + 1).init(&device)?,
        targets: [d[0], d[1]],
    };
    Ok((train(o, dense, &device)?, train(o, sparse, &device)?))
}

#[allow(dead_code)]
fn parse_args() -> Result<Options, String> {
    let mut o = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--steps" => o.steps = value("--steps")?.parse().map_err(|e| format!("--steps: {e}"))?,
            "--train" => o.train = value("--train")?.parse().map_err(|e| format!("--train: {e}"))?,
            "--test" => o.test = value("--test")?.parse().map_err(|e| format!("--test: {e}"))?,
            "--seed" => o.seed = value("--seed")?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--hidden" => o.hidden = value("--hidden")?.parse().map_err(|e| format!("--hidden: {e}"))?,
            "--density" => o.density = value("--density")?.parse().map_err(|e| format!("--density: {e}"))?,
            "--lr" => o.lr = value("--lr")?.parse().map_err(|e| format!("--lr: {e}"))?,
            "--device" => {
                o.cpu = match value("--device")?.as_str() {
                    "flex" | "cpu" => true,
                    "wgpu" => false,
                    other => return Err(format!("--device: `{other}` is not flex or wgpu")),
                }
            }
            "--rigl-every" => {
                o.rigl_every = value("--rigl-every")?.parse().map_err(|e| format!("--rigl-every: {e}"))?;
                o.gradual = false;
            }
            "--gradual" => o.gradual = true,
            "--static" => o.gradual = false,
            "--erdos-renyi" => o.uniform = false,
            "--prune-until" => {
                o.prune_until = value("--prune-until")?.parse().map_err(|e| format!("--prune-until: {e}"))?
            }
            other => {
                return Err(format!(
                    "unknown argument `{other}` (try --steps N, --train N, --test N, --hidden N, --density X, --lr X, --seed N, --static, --rigl-every N, --gradual, --prune-until F, --erdos-renyi, --device flex|wgpu)"
                ))
            }
        }
    }
    Ok(o)
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn Error>> {
    let o = parse_args()?;
    let (dense, sparse) = compare(&o)?;
    for (name, r) in [("dense", &dense), ("sparse", &sparse)] {
        println!(
            "{name:6}  weights {:7}  test accuracy {:.1}%  step {:.2} ms (median)",
            r.weights,
            r.accuracy * 100.0,
            r.step_seconds * 1e3
        );
    }
    println!("accuracy gap {:+.1} points", (sparse.accuracy - dense.accuracy) * 100.0);
    Ok(())
}
