//! NVIDIA's offline toolchain from PyPI in tests (see `sparsec-nvidia`): `ptxas` that panics
//! with ptxas's message, and NVRTC (nvidia-cuda-nvrtc-cu12, through `scripts/nvrtc`) to
//! compile CUDA C++. `scripts/install-deps` installs both.

pub use sparsec_nvidia::{innermost_loops, parse_report, EntryReport, LoopStats};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A scratch folder for this process's kernels.
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sparsec-nvidia-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary folder");
    dir
}

/// Assembles `ptx` for `chip` (`sm_80`) with ptxas; panics with ptxas's message when it refuses.
/// Returns the report of every entry function.
pub fn ptxas(name: &str, ptx: &str, chip: &str) -> Vec<EntryReport> {
    sparsec_nvidia::ptxas(name, ptx, chip).unwrap_or_else(|e| panic!("{name} on {chip}: {e}"))
}

/// Compiles CUDA C++ for `chip` with NVRTC (`scripts/nvrtc`); panics with NVRTC's log when it
/// does not compile. Returns the PTX.
pub fn nvrtc(name: &str, cuda: &str, chip: &str) -> String {
    let dir = scratch();
    let src = dir.join(format!("{name}_{chip}.cu"));
    let ptx = dir.join(format!("{name}_{chip}.nvrtc.ptx"));
    std::fs::write(&src, cuda).expect("write CUDA source");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/nvrtc");
    let out = Command::new("python3").arg(script).args(["--arch", chip]).arg(&src).arg(&ptx).output().expect("python3 runs");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name} on {chip}: NVRTC refused the CUDA source:\n{log}");
    std::fs::read_to_string(&ptx).expect("NVRTC's PTX")
}
