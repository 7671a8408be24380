//! The MLIR backend's tests (one binary: every MLIR link is slow).

mod mlir {
    pub mod common;
    mod bad_inputs;
    mod cpu;
    mod formats;
    mod fuzz;
    mod gpu;
    mod refusals;
    mod runtime;
    mod semantics;
    mod sparsifier;
}
