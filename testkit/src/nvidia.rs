//! NVIDIA's offline toolchain from PyPI, for tests that check emitted GPU code without a GPU:
//! `ptxas` (nvidia-cuda-nvcc-cu12) assembles PTX, NVRTC (nvidia-cuda-nvrtc-cu12, through
//! `scripts/nvrtc`) compiles CUDA C++. `scripts/install-deps` installs both.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The folder of the `nvidia-cuda-nvcc-cu12` package (`bin/ptxas`): `$SPARSEC_CUDA_NVCC`, or
/// where Python finds it.
pub fn nvcc_root() -> PathBuf {
    if let Some(p) = std::env::var_os("SPARSEC_CUDA_NVCC").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let out = Command::new("python3")
        .args(["-c", "import nvidia.cuda_nvcc as m; print(m.__path__[0])"])
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "NVIDIA's ptxas is missing: scripts/install-deps installs nvidia-cuda-nvcc-cu12");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// A scratch folder for this process's kernels.
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sparsec-nvidia-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary folder");
    dir
}

/// What `ptxas -v` says of each entry function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryReport {
    /// The entry function.
    pub name: String,
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of stack frame.
    pub stack: u32,
    /// Bytes of spill stores plus spill loads.
    pub spills: u32,
}

/// Assembles `ptx` for `chip` (`sm_80`) with ptxas; panics with ptxas's message when it refuses.
/// Returns the report of every entry function.
pub fn ptxas(name: &str, ptx: &str, chip: &str) -> Vec<EntryReport> {
    let dir = scratch();
    let file = dir.join(format!("{name}_{chip}.ptx"));
    std::fs::write(&file, ptx).expect("write PTX");
    let out = Command::new(nvcc_root().join("bin/ptxas"))
        .args([&format!("-arch={chip}"), "-v", "-o"])
        .arg(dir.join(format!("{name}_{chip}.cubin")))
        .arg(&file)
        .output()
        .expect("ptxas runs");
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{name} on {chip}: ptxas refused the PTX:\n{text}");
    parse_report(&text)
}

/// The entries of a `ptxas -v` log.
pub fn parse_report(text: &str) -> Vec<EntryReport> {
    let num = |line: &str, before: &str| -> u32 {
        line.split(before).next().and_then(|s| s.split_whitespace().last()).and_then(|n| n.parse().ok()).unwrap_or(0)
    };
    let mut out: Vec<EntryReport> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            out.push(EntryReport { name, registers: 0, stack: 0, spills: 0 });
        } else if let Some(e) = out.last_mut() {
            if line.contains("bytes stack frame") {
                e.stack = num(line, " bytes stack frame");
                e.spills = num(line, " bytes spill stores") + num(line, " bytes spill loads");
            } else if line.contains("Used ") && line.contains(" registers") {
                e.registers = num(line, " registers");
            }
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::parse_report;

    #[test]
    fn ptxas_reports_are_read_per_entry() {
        let log = "ptxas info    : Compiling entry function 'k0' for 'sm_90'\n\
                   ptxas info    : Function properties for k0\n    \
                   8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n\
                   ptxas info    : Used 40 registers, used 0 barriers\n\
                   ptxas info    : Compiling entry function 'k1' for 'sm_90'\n\
                   ptxas info    : Function properties for k1\n    \
                   0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
                   ptxas info    : Used 12 registers, used 1 barriers, 64 bytes smem\n";
        let r = parse_report(log);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].name.as_str(), r[0].registers, r[0].stack, r[0].spills), ("k0", 40, 8, 8));
        assert_eq!((r[1].name.as_str(), r[1].registers, r[1].stack, r[1].spills), ("k1", 12, 0, 0));
    }
}
