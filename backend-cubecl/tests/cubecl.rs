//! End-to-end tests of the CubeCL backend on cubecl-wgpu (Mesa's software Vulkan in CI):
//! every corpus workload with and without a GPU schedule against the oracles, kernel caching,
//! argument validation, emitted sources and the vendored fixture.

mod cubecl {
    pub mod common;
    mod atomic;
    mod emit;
    mod formats;
    mod fuzz;
    mod limits;
    mod runner;
    mod runtime;
    mod semantics;
    mod validate;
    mod workloads;
}
