//! [`SparseLinear`]: `y = x · Wᵀ + b` with a sparse trainable `W`.

use crate::error::Result as SparseResult;
use crate::weight::{check_density, SparseWeight, SplitMix};
use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{Device, Tensor, TensorData};

/// Configuration of a [`SparseLinear`] layer.
#[derive(Config, Debug)]
pub struct SparseLinearConfig {
    /// Input features.
    pub d_input: usize,
    /// Output features.
    pub d_output: usize,
    /// Fraction of the weight's entries stored (spread evenly over the output rows).
    #[config(default = 0.1)]
    pub density: f64,
    /// Whether the layer adds a bias.
    #[config(default = true)]
    pub bias: bool,
    /// Seed of the random pattern and initial values.
    #[config(default = 0)]
    pub seed: u64,
}

/// A linear layer with a sparse weight: `y = x · Wᵀ + b` for `x` of `[batch, d_input]`, `W`
/// a `[d_output, d_input]` [`SparseWeight`] and `b` of `[d_output]`. Computed as
/// `(W · xᵀ)ᵀ` by the SpMM kernel of the weight's format (CSR, or BSR when set:
/// [`SparseWeight::with_format`]); differentiable in `W`'s values, `x` and `b`.
#[derive(Module, Debug)]
pub struct SparseLinear {
    /// The sparse weight, `[d_output, d_input]`.
    pub weight: SparseWeight,
    /// The bias, `[d_output]`.
    pub bias: Option<Param<Tensor<1>>>,
}

impl SparseLinearConfig {
    /// A layer with a random pattern of the configured density on `device`.
    pub fn init(&self, device: &Device) -> SparseResult<SparseLinear> {
        check_density("SparseLinearConfig::init", self.density)?;
        let weight = SparseWeight::random(self.d_output, self.d_input, self.density, self.seed, device)?;
        let bias = if self.bias {
            // Burn's `Linear` bias initialisation, over the real fan-in of a row.
            let fan_in = (weight.nnz() / self.d_output.max(1)).max(1);
            let mut rng = SplitMix::new(self.seed ^ 0xB1A5);
            let bound = 1.0 / (fan_in as f32).sqrt();
            let v: Vec<f32> = (0..self.d_output).map(|_| rng.symmetric(bound)).collect();
            Some(Param::from_tensor(Tensor::from_data(TensorData::new(v, [self.d_output]), device)))
        } else {
            None
        };
        Ok(SparseLinear { weight, bias })
    }
}

impl SparseLinear {
    /// A layer from a weight (for example a pruned dense one) and an optional bias.
    pub fn new(weight: SparseWeight, bias: Option<Tensor<1>>) -> Self {
        SparseLinear { weight, bias: bias.map(Param::from_tensor) }
    }

    /// `x · Wᵀ + b` for `x` of `[batch, d_input]`.
    pub fn forward(&self, x: Tensor<2>) -> SparseResult<Tensor<2>> {
        let y = self.weight.spmm(x.transpose())?.transpose();
        Ok(match &self.bias {
            Some(b) => add_bias(y, b.val()),
            None => y,
        })
    }

    /// The layer with its weight pruned by magnitude to `density` (see
    /// [`SparseWeight::prune`]); the bias is kept.
    pub fn prune(&self, density: f64) -> SparseResult<Self> {
        Ok(SparseLinear { weight: self.weight.prune(density)?, bias: self.bias.clone() })
    }

    /// The layer after one RigL update of its weight (see [`SparseWeight::rigl`]); `dense_grad`
    /// is the loss gradient of the dense `[d_output, d_input]` weight.
    pub fn rigl(&self, dense_grad: Tensor<2>, fraction: f64) -> SparseResult<Self> {
        Ok(SparseLinear { weight: self.weight.rigl(dense_grad, fraction)?, bias: self.bias.clone() })
    }
}

/// Erdős–Rényi densities for the layers of a network (as in RigL, Evci et al. 2020): layer
/// `l` of `d_output × d_input` gets density `ε · (d_input + d_output) / (d_input · d_output)`,
/// capped at 1, with `ε` chosen so that the network stores `density` of all its weights. Small
/// layers (the classifier) stay denser than wide ones.
pub fn erdos_renyi_densities(shapes: &[(usize, usize)], density: f64) -> SparseResult<Vec<f64>> {
    check_density("erdos_renyi_densities", density)?;
    let total: f64 = shapes.iter().map(|&(o, i)| (o * i) as f64).sum();
    let budget = density * total;
    let mut dense = vec![false; shapes.len()];
    // Raise ε until the budget is spent; layers that would exceed density 1 are fixed at 1.
    loop {
        let fixed: f64 = shapes.iter().zip(&dense).filter(|(_, &d)| d).map(|(&(o, i), _)| (o * i) as f64).sum();
        let scale: f64 = shapes.iter().zip(&dense).filter(|(_, &d)| !d).map(|(&(o, i), _)| (o + i) as f64).sum();
        let eps = if scale > 0.0 { ((budget - fixed) / scale).max(0.0) } else { 0.0 };
        let mut changed = false;
        for (l, &(o, i)) in shapes.iter().enumerate() {
            if !dense[l] && o * i > 0 && eps * (o + i) as f64 / (o * i) as f64 > 1.0 {
                dense[l] = true;
                changed = true;
            }
        }
        if !changed {
            return Ok(shapes
                .iter()
                .zip(&dense)
                .map(|(&(o, i), &d)| {
                    if d {
                        1.0
                    } else if o * i == 0 {
                        0.0
                    } else {
                        eps * (o + i) as f64 / (o * i) as f64
                    }
                })
                .collect());
        }
    }
}

/// `y + b` with `b` (`[n]`) added to every row of `y` (`[_, n]`), in `y`'s float type.
pub(crate) fn add_bias(y: Tensor<2>, b: Tensor<1>) -> Tensor<2> {
    let dtype = y.dtype();
    y + b.cast(dtype).unsqueeze::<2>()
}
