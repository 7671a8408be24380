# Shared set-up for the scripts: toolchain check and the build folder. Sourced, not run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "sparsec: cargo is missing; install Rust from https://rustup.rs first" >&2
    exit 1
  fi
fi
export SPARSEC_DATA="${SPARSEC_DATA:-$ROOT/../shared/data}"
# wgpu over Mesa wants a runtime folder; any writable one will do.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
# The backends link LLVM/MLIR 22 and run on Vulkan: make sure the packages are there.
"$ROOT/scripts/install-deps"
# NVIDIA's ptxas and libdevice from PyPI: PTX links libdevice's math, tests assemble kernels.
if [ -z "${SPARSEC_CUDA_NVCC:-}" ]; then
  SPARSEC_CUDA_NVCC="$(python3 -c 'import nvidia.cuda_nvcc as m; print(m.__path__[0])' 2>/dev/null || true)"
  export SPARSEC_CUDA_NVCC
fi
