//! burn-sparsec end to end on the default wgpu device (lavapipe in CI): forward results
//! against dense Burn matmul, gradients against Burn autodiff on the densified matrix,
//! refusals of invalid input, the shipped schedules, the GCN example, and sparse weights as
//! module parameters (SparseLinear, records, pruning, optimiser state that follows a new pattern).

#[path = "burn/attention.rs"]
mod attention;
#[path = "burn/common.rs"]
mod common;
#[path = "burn/dynamic.rs"]
mod dynamic;
#[path = "burn/forward.rs"]
mod forward;
#[path = "burn/gcn.rs"]
mod gcn;
#[path = "burn/grad.rs"]
mod grad;
#[path = "burn/graph.rs"]
mod graph;
#[path = "burn/invalid.rs"]
mod invalid;
#[path = "burn/kernels.rs"]
mod kernels;
#[path = "burn/layers.rs"]
mod layers;
#[path = "burn/schedules.rs"]
mod schedules;
#[path = "burn/sparse_mlp.rs"]
mod sparse_mlp;
