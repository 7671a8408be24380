//! Graph convolution: the GCN-normalised adjacency `D^-½ (A + Aᵀ + I) D^-½` and
//! [`GraphConv`], `Â · (X · W) + b`; the mean-aggregation adjacency `D^-1 (A + Aᵀ)` and
//! [`SageConv`] (GraphSAGE), `X · W_self + (Â · X) · W_neigh + b`; all by the SpMM kernels.

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
    let rows = neighbourhoods(a, true)?;
    let n = rows.len();
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

/// The mean-aggregation adjacency of a graph (GraphSAGE's mean aggregator): the pattern of
/// `A + Aᵀ` without self loops (a node's neighbours, whatever direction `a` stores), entry
/// `(i, j)` = `1 / dᵢ` for `dᵢ` the neighbours of `i`, so `Â · X` averages the neighbours'
/// features (an isolated node's row is empty: zeros). `a` must be square. Constant entries.
pub fn mean_adjacency<I: Index, V: Value>(a: &Csr<I, V>, device: &Device) -> SparseResult<SparseCsr> {
    let rows = neighbourhoods(a, false)?;
    let n = rows.len();
    let (mut indptr, mut indices, mut values) = (vec![0i32], Vec::new(), Vec::new());
    for r in &rows {
        indices.extend_from_slice(r);
        values.extend(std::iter::repeat_n(1.0 / r.len() as f32, r.len()));
        indptr.push(fit("nnz", indices.len())?);
    }
    SparseCsr::from_parts(n, n, indptr, indices, values, device)
}

/// The sorted, distinct neighbours of every node of `a` in both directions (`A + Aᵀ`), and
/// each node itself where `self_loops`.
fn neighbourhoods<I: Index, V: Value>(a: &Csr<I, V>, self_loops: bool) -> SparseResult<Vec<Vec<i32>>> {
    let n = a.rows().max(a.cols());
    let mut rows: Vec<Vec<i32>> = Vec::with_capacity(n);
    for i in 0..n {
        rows.push(if self_loops { vec![fit("node", i)?] } else { Vec::new() });
    }
    for i in 0..a.rows() {
        let (lo, hi) = (a.indptr()[i].to_usize().unwrap_or(0), a.indptr()[i + 1].to_usize().unwrap_or(0));
        for p in lo..hi {
            let j = a.indices()[p].to_usize().unwrap_or(0);
            if i != j || self_loops {
                rows[i].push(fit("node", j)?);
                rows[j].push(fit("node", i)?);
            }
        }
    }
    for r in &mut rows {
        r.sort_unstable();
        r.dedup();
    }
    Ok(rows)
}

/// Configuration of a [`SageConv`] layer.
#[derive(Config, Debug)]
pub struct SageConvConfig {
    /// Input features per node.
    pub d_input: usize,
    /// Output features per node.
    pub d_output: usize,
}

/// A GraphSAGE layer with the mean aggregator (Hamilton et al. 2017):
/// `X · W_self + (Â · X) · W_neigh + b` for node features `X` of `[nodes, d_input]` and a
/// mean-aggregation adjacency `Â` ([`mean_adjacency`]). The SpMM runs on the narrower side:
/// `Â · (X · W_neigh)` when `d_output < d_input`, `(Â · X) · W_neigh` otherwise (equal).
#[derive(Module, Debug)]
pub struct SageConv {
    /// `W_self` and `b` (Burn's `Linear`, `[d_input, d_output]`).
    pub self_linear: Linear,
    /// `W_neigh` (Burn's `Linear` without bias).
    pub neigh_linear: Linear,
}

impl SageConvConfig {
    /// A layer with Burn's `Linear` initialisation.
    pub fn init(&self, device: &Device) -> SageConv {
        SageConv {
            self_linear: LinearConfig::new(self.d_input, self.d_output).init(device),
            neigh_linear: LinearConfig::new(self.d_input, self.d_output).with_bias(false).init(device),
        }
    }
}

impl SageConv {
    /// `X · W_self + (Â · X) · W_neigh + b`.
    pub fn forward(&self, adj: &SparseCsr, x: Tensor<2>) -> SparseResult<Tensor<2>> {
        // `W_self` first: Burn initialises parameters lazily, in order of first use, so a
        // fixed order keeps a seeded model's weights the same whatever computes them.
        let own = self.self_linear.forward(x.clone());
        let [d_input, d_output] = self.neigh_linear.weight.dims();
        let neigh = if d_output < d_input {
            adj.spmm(self.neigh_linear.forward(x))?
        } else {
            self.neigh_linear.forward(adj.spmm(x)?)
        };
        Ok(own + neigh)
    }
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
