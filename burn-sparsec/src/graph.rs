//! Graph convolution: the GCN-normalised adjacency `D^-½ (A + Aᵀ + I) D^-½` and
//! [`GraphConv`], `Â · (X · W) + b` by the SpMM kernels.

use crate::csr::{fit, SparseCsr};
use crate::error::Result as SparseResult;
use crate::linear::add_bias;
use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor};
use sparsec_formats::{Csr, Index, Value};

/// The GCN adjacency of a graph (Kipf & Welling): the pattern of `A + Aᵀ + I` (undirected,
/// with self loops, whatever `a` stores), entry `(i, j)` = `1 / √(dᵢ · dⱼ)` with `dᵢ` the
/// number of entries in row `i`. `a` must be square. The entries are constants (not tracked).
pub fn gcn_adjacency<I: Index, V: Value>(a: &Csr<I, V>, device: &Device) -> SparseResult<SparseCsr> {
    let n = a.rows().max(a.cols());
    let mut rows: Vec<Vec<i32>> = Vec::with_capacity(n);
    for i in 0..n {
        rows.push(vec![fit("node", i)?]);
    }
    for i in 0..a.rows() {
        let (lo, hi) = (a.indptr()[i].to_usize().unwrap_or(0), a.indptr()[i + 1].to_usize().unwrap_or(0));
        for p in lo..hi {
            let j = a.indices()[p].to_usize().unwrap_or(0);
            rows[i].push(fit("node", j)?);
            rows[j].push(fit("node", i)?);
        }
    }
    for r in &mut rows {
        r.sort_unstable();
        r.dedup();
    }
    let deg: Vec<f32> = rows.iter().map(|r| r.len() as f32).collect();
    let (mut indptr, mut indices, mut values) = (vec![0i32], Vec::new(), Vec::new());
    for (i, r) in rows.iter().enumerate() {
        for &j in r {
            indices.push(j);
            values.push(1.0 / (deg[i] * deg[j as usize]).sqrt());
        }
        indptr.push(fit("nnz", indices.len())?);
    }
    SparseCsr::from_parts(n, n, indptr, indices, values, device)
}

/// Configuration of a [`GraphConv`] layer.
#[derive(Config, Debug)]
pub struct GraphConvConfig {
    /// Input features per node.
    pub d_input: usize,
    /// Output features per node.
    pub d_output: usize,
}

/// A graph convolution (GCN layer): `Â · (X · W) + b` for node features `X` of
/// `[nodes, d_input]` and a normalised adjacency `Â` (for example [`gcn_adjacency`]); with
/// [`GraphConv::forward_relu`], `relu(Â · (X · W) + b)` in one program (the fused kernel).
#[derive(Module, Debug)]
pub struct GraphConv {
    /// `W` (Burn's `Linear` without bias, `[d_input, d_output]`).
    pub linear: Linear,
    /// `b`, `[d_output]`.
    pub bias: Param<Tensor<1>>,
}

impl GraphConvConfig {
    /// A layer with Burn's `Linear` initialisation and a zero bias.
    pub fn init(&self, device: &Device) -> GraphConv {
        GraphConv {
            linear: LinearConfig::new(self.d_input, self.d_output).with_bias(false).init(device),
            bias: Param::from_tensor(Tensor::zeros([self.d_output], device)),
        }
    }
}

impl GraphConv {
    /// `Â · (X · W) + b`.
    pub fn forward(&self, adj: &SparseCsr, x: Tensor<2>) -> SparseResult<Tensor<2>> {
        Ok(add_bias(adj.spmm(self.linear.forward(x))?, self.bias.val()))
    }

    /// `relu(Â · (X · W) + b)` by the fused SpMM + bias + ReLU program.
    pub fn forward_relu(&self, adj: &SparseCsr, x: Tensor<2>) -> SparseResult<Tensor<2>> {
        adj.spmm_bias_relu(self.linear.forward(x), self.bias.val())
    }
}
