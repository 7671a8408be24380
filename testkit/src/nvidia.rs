//! NVIDIA's offline toolchain from PyPI in tests (see `sparsec-nvidia`): `ptxas` that panics
//! with ptxas's message, and NVRTC (nvidia-cuda-nvrtc-cu12, through `scripts/nvrtc`) to
//! compile CUDA C++. `scripts/install-deps` installs both.

pub use sparsec_nvidia::{entries, innermost_loops, parse_report, EntryReport, LoopStats};

/// Assembles `ptx` for `chip` (`sm_80`) with ptxas; panics with ptxas's message when it refuses.
/// Returns the report of every entry function.
pub fn ptxas(name: &str, ptx: &str, chip: &str) -> Vec<EntryReport> {
    sparsec_nvidia::ptxas(name, ptx, chip).unwrap_or_else(|e| panic!("{name} on {chip}: {e}"))
}

/// Compiles CUDA C++ for `chip` with NVRTC (`sparsec_nvidia::nvrtc`); panics with NVRTC's log
/// when it does not compile. Returns the PTX.
pub fn nvrtc(name: &str, cuda: &str, chip: &str) -> String {
    sparsec_nvidia::nvrtc(name, cuda, chip).unwrap_or_else(|e| panic!("{name} on {chip}: NVRTC refused the CUDA source: {e}"))
}
