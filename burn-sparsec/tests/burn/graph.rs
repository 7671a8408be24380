//! Graph convolution: the GCN and mean-aggregation adjacencies against their dense
//! definitions, and `GraphConv` and `SageConv` against dense Burn (forward, fused ReLU,
//! gradients), on wgpu and on Flex.

use crate::common::*;
use burn::tensor::{activation::relu, Tensor, TensorData};
use burn_sparsec::{gcn_adjacency, mean_adjacency, GraphConvConfig, SageConvConfig};
use sparsec_testkit::{self as tk, Mat};

/// Square generated matrices small enough to densify.
fn graphs() -> Vec<(String, Mat)> {
    tk::generated_matrices().into_iter().filter(|(_, m)| m.rows == m.cols && m.rows <= 1200).collect()
}

/// `D^-½ (A + Aᵀ + I) D^-½`, dense, from the definition.
fn dense_gcn(m: &Mat) -> Vec<f32> {
    let n = m.rows;
    let mut s = vec![false; n * n];
    for i in 0..n {
        s[i * n + i] = true;
        for &j in m.row(i) {
            s[i * n + j] = true;
            s[j * n + i] = true;
        }
    }
    let d: Vec<f32> = (0..n).map(|i| (0..n).filter(|&j| s[i * n + j]).count() as f32).collect();
    (0..n * n).map(|p| if s[p] { 1.0 / (d[p / n] * d[p % n]).sqrt() } else { 0.0 }).collect()
}

/// `D^-1 (A + Aᵀ)` without self loops, dense, from the definition.
fn dense_mean(m: &Mat) -> Vec<f32> {
    let n = m.rows;
    let mut s = vec![false; n * n];
    for i in 0..n {
        for &j in m.row(i).iter().filter(|&&j| j != i) {
            s[i * n + j] = true;
            s[j * n + i] = true;
        }
    }
    let d: Vec<f32> = (0..n).map(|i| (0..n).filter(|&j| s[i * n + j]).count() as f32).collect();
    (0..n * n).map(|p| if s[p] { 1.0 / d[p / n] } else { 0.0 }).collect()
}

#[test]
fn gcn_adjacency_is_the_normalised_symmetric_graph_with_self_loops() {
    let dev = device();
    let graphs = graphs();
    assert!(graphs.len() >= 3, "{} square generated graphs", graphs.len());
    for (name, m) in graphs {
        let adj = gcn_adjacency(&m.to_csr(), &dev).unwrap();
        close(&format!("gcn adjacency {name}"), &host(adj.to_dense()), &dense_gcn(&m), 1e-6);
    }
}

#[test]
fn graph_conv_equals_dense_burn_with_its_gradients() {
    for dev in devices() {
        let ad = dev.clone().autodiff();
        for (name, m) in graphs().into_iter().take(3) {
            let adj = gcn_adjacency(&m.to_csr(), &ad).unwrap();
            let layer = GraphConvConfig::new(12, 5).init(&ad);
            let x = dense(m.rows, 12, 3, &ad).require_grad();
            let w = dense(m.rows, 5, 4, &ad);
            let a_dense = Tensor::<2>::from_data(TensorData::new(dense_gcn(&m), [m.rows, m.rows]), &ad);
            for fused in [false, true] {
                let y =
                    if fused { layer.forward_relu(&adj, x.clone()) } else { layer.forward(&adj, x.clone()) }.unwrap();
                let grads = (y.clone() * w.clone()).sum().backward();
                let (dw, db, dx) = (
                    layer.linear.weight.val().grad(&grads).unwrap(),
                    layer.bias.val().grad(&grads).unwrap(),
                    x.grad(&grads).unwrap(),
                );
                let w2 = layer.linear.weight.val().detach().require_grad();
                let b2 = layer.bias.val().detach().require_grad();
                let x2 = x.clone().detach().require_grad();
                let pre = a_dense.clone().matmul(x2.clone().matmul(w2.clone())) + b2.clone().unsqueeze::<2>();
                let y2 = if fused { relu(pre) } else { pre };
                let what = format!("{name} fused={fused} on {dev:?}");
                close(&format!("GraphConv {what}"), &host(y), &host(y2.clone()), 1e-4);
                let grads2 = (y2 * w.clone()).sum().backward();
                close(&format!("dW {what}"), &host(dw), &host(w2.grad(&grads2).unwrap()), 1e-3);
                close(&format!("db {what}"), &host(db), &host(b2.grad(&grads2).unwrap()), 1e-3);
                close(&format!("dx {what}"), &host(dx), &host(x2.grad(&grads2).unwrap()), 1e-3);
            }
        }
    }
}

#[test]
fn mean_adjacency_averages_the_neighbours() {
    let dev = device();
    for (name, m) in graphs() {
        let adj = mean_adjacency(&m.to_csr(), &dev).unwrap();
        close(&format!("mean adjacency {name}"), &host(adj.to_dense()), &dense_mean(&m), 1e-6);
    }
}

#[test]
fn sage_conv_equals_dense_burn_with_its_gradients() {
    for dev in devices() {
        let ad = dev.clone().autodiff();
        for (name, m) in graphs().into_iter().take(3) {
            let adj = mean_adjacency(&m.to_csr(), &ad).unwrap();
            let a_dense = Tensor::<2>::from_data(TensorData::new(dense_mean(&m), [m.rows, m.rows]), &ad);
            // Both orders of the SpMM: narrower output (Â · (X · W)) and wider ((Â · X) · W).
            for (din, dout) in [(12, 5), (4, 9)] {
                let layer = SageConvConfig::new(din, dout).init(&ad);
                let x = dense(m.rows, din, 3, &ad).require_grad();
                let w = dense(m.rows, dout, 4, &ad);
                let y = layer.forward(&adj, x.clone()).unwrap();
                let grads = (y.clone() * w.clone()).sum().backward();
                let ws = layer.self_linear.weight.val().detach().require_grad();
                let b = layer.self_linear.bias.as_ref().unwrap().val().detach().require_grad();
                let wn = layer.neigh_linear.weight.val().detach().require_grad();
                let x2 = x.clone().detach().require_grad();
                let y2 = x2.clone().matmul(ws.clone())
                    + a_dense.clone().matmul(x2.clone()).matmul(wn.clone())
                    + b.clone().unsqueeze::<2>();
                let what = format!("{name} {din}→{dout} on {dev:?}");
                close(&format!("SageConv {what}"), &host(y), &host(y2.clone()), 1e-4);
                let grads2 = (y2 * w).sum().backward();
                let pairs = [
                    ("dW_self", layer.self_linear.weight.val().grad(&grads), ws.grad(&grads2)),
                    ("dW_neigh", layer.neigh_linear.weight.val().grad(&grads), wn.grad(&grads2)),
                    (
                        "db",
                        layer.self_linear.bias.as_ref().unwrap().val().grad(&grads).map(|t| t.unsqueeze::<2>()),
                        b.grad(&grads2).map(|t| t.unsqueeze::<2>()),
                    ),
                    ("dx", x.grad(&grads), x2.grad(&grads2)),
                ];
                for (g, got, want) in pairs {
                    close(&format!("{g} {what}"), &host(got.unwrap()), &host(want.unwrap()), 1e-3);
                }
            }
        }
    }
}
