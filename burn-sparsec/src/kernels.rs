//! The shipped kernels: each is a `.sptir` program and a schedule trace (`kernels/`), compiled
//! on first use and cached for the life of the process: through sparsec's CubeCL backend with
//! the trace for CubeCL devices, and through the MLIR CPU JIT under the default CPU schedule
//! for Flex (CPU) devices.

use sparsec_backend_cubecl::CompiledProgram;
use sparsec_backend_mlir::{CpuKernel, CpuOptions};
use sparsec_ir::data::{Args, Array};
use sparsec_ir::Func;
use sparsec_schedule::Trace;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Why a shipped kernel could not be built.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The `.sptir` program does not parse.
    #[error("kernel `{kernel}`: the program does not parse: {detail}")]
    Parse {
        /// Kernel name.
        kernel: &'static str,
        /// The parser's message.
        detail: String,
    },
    /// The trace is not valid JSON or does not replay.
    #[error("kernel `{kernel}`: the schedule does not apply: {detail}")]
    Schedule {
        /// Kernel name.
        kernel: &'static str,
        /// What failed.
        detail: String,
    },
    /// The CubeCL backend refused the scheduled program.
    #[error("kernel `{kernel}`: the CubeCL backend refused it: {detail}")]
    Compile {
        /// Kernel name.
        kernel: &'static str,
        /// The backend's message.
        detail: String,
    },
    /// A launch was refused (wrong arguments for the program).
    #[error("kernel `{kernel}`: launch refused: {detail}")]
    Launch {
        /// Kernel name.
        kernel: &'static str,
        /// The backend's message.
        detail: String,
    },
    /// The MLIR CPU backend refused the program or a run.
    #[error("kernel `{kernel}` on the CPU: {detail}")]
    Cpu {
        /// Kernel name.
        kernel: &'static str,
        /// The backend's message.
        detail: String,
    },
    /// The kernel cache lock was poisoned by a panic elsewhere.
    #[error("the kernel cache is unusable after a panic")]
    Poisoned,
}

/// A shipped kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// CSR SpMM: `C = A · B` (`kernels/csrmm.sptir`).
    Csrmm,
    /// CSR SpMM with the bias + ReLU epilogue in the same program
    /// (`kernels/csrmm_bias_relu.sptir`).
    CsrmmBiasRelu,
    /// SDDMM: `C[i, j] = Σ_k A[i, k] · B[j, k]` on a CSR pattern (`kernels/sddmm.sptir`).
    Sddmm,
    /// BSR SpMM (`kernels/bsrmm.sptir`).
    Bsrmm,
    /// Row-wise softmax over a CSR matrix's stored entries (`kernels/softmax.sptir`).
    Softmax,
    /// The largest stored entry of every CSR row (`kernels/row_max.sptir`).
    RowMax,
}

impl Kernel {
    /// Every shipped kernel.
    pub const ALL: [Kernel; 6] =
        [Kernel::Csrmm, Kernel::CsrmmBiasRelu, Kernel::Sddmm, Kernel::Bsrmm, Kernel::Softmax, Kernel::RowMax];

    /// The program's function name.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Csrmm => "csrmm",
            Kernel::CsrmmBiasRelu => "csrmm_bias_relu",
            Kernel::Sddmm => "sddmm",
            Kernel::Bsrmm => "bsrmm",
            Kernel::Softmax => "softmax",
            Kernel::RowMax => "row_max",
        }
    }

    /// The `.sptir` source.
    pub fn source(self) -> &'static str {
        match self {
            Kernel::Csrmm => include_str!("../kernels/csrmm.sptir"),
            Kernel::CsrmmBiasRelu => include_str!("../kernels/csrmm_bias_relu.sptir"),
            Kernel::Sddmm => include_str!("../kernels/sddmm.sptir"),
            Kernel::Bsrmm => include_str!("../kernels/bsrmm.sptir"),
            Kernel::Softmax => include_str!("../kernels/softmax.sptir"),
            Kernel::RowMax => include_str!("../kernels/row_max.sptir"),
        }
    }

    /// The schedule trace (JSON).
    pub fn trace(self) -> &'static str {
        match self {
            Kernel::Csrmm => include_str!("../kernels/csrmm.trace.json"),
            Kernel::CsrmmBiasRelu => include_str!("../kernels/csrmm_bias_relu.trace.json"),
            Kernel::Sddmm => include_str!("../kernels/sddmm.trace.json"),
            Kernel::Bsrmm => include_str!("../kernels/bsrmm.trace.json"),
            Kernel::Softmax => include_str!("../kernels/softmax.trace.json"),
            Kernel::RowMax => include_str!("../kernels/row_max.trace.json"),
        }
    }

    /// The unscheduled Stage-I program.
    pub fn program(self) -> Result<Func, KernelError> {
        sparsec_ir::text::parse_func(self.name(), self.source())
            .map_err(|e| KernelError::Parse { kernel: self.name(), detail: format!("{e:?}") })
    }

    /// The scheduled program at Stage III: [`Kernel::program`] lowered by its trace through
    /// the driver's one pipeline (`sparsec::driver::lower_with`), as `sparsec run` does.
    pub fn scheduled(self) -> Result<Func, KernelError> {
        let trace = Trace::from_json(self.trace())
            .map_err(|e| KernelError::Schedule { kernel: self.name(), detail: e.to_string() })?;
        self.lowered(&sparsec::driver::Plan::Trace(trace))
    }

    /// The program at Stage III under the default CPU schedule (`--auto cpu`), through the
    /// driver's one pipeline.
    pub fn cpu_scheduled(self) -> Result<Func, KernelError> {
        self.lowered(&sparsec::driver::Plan::Auto(sparsec::driver::AutoSchedule::Cpu))
    }

    /// [`Kernel::program`] lowered to Stage III by `plan`.
    fn lowered(self, plan: &sparsec::driver::Plan) -> Result<Func, KernelError> {
        let err = |detail: String| KernelError::Schedule { kernel: self.name(), detail };
        let mut stages = sparsec::driver::lower_with(&self.program()?, plan).map_err(|e| err(e.to_string()))?;
        stages.pop().ok_or_else(|| err("the pipeline produced no function".into()))
    }

    /// The compiled program, built on first use and cached.
    pub fn compiled(self) -> Result<Arc<CompiledProgram>, KernelError> {
        static CACHE: KernelCache<Arc<CompiledProgram>> = OnceLock::new();
        cached(&CACHE, self, || {
            let func = self.scheduled()?;
            let prog = sparsec_backend_cubecl::compile(&func)
                .map_err(|e| KernelError::Compile { kernel: self.name(), detail: e.to_string() })?;
            Ok(Arc::new(prog))
        })
    }

    /// The JIT-compiled CPU kernel, built on first use and cached (a kernel runs one call at a
    /// time: it is not `Sync`).
    pub fn cpu_compiled(self) -> Result<Arc<Mutex<CpuKernel>>, KernelError> {
        static CACHE: KernelCache<Arc<Mutex<CpuKernel>>> = OnceLock::new();
        cached(&CACHE, self, || {
            let func = self.cpu_scheduled()?;
            // Flex runs its own operations on rayon between the kernels: OpenMP threads that
            // spin after a kernel would take their cores (measured: a sparse MLP step 3.5 ms
            // instead of 0.9 ms on two cores).
            let opts = CpuOptions { openmp_blocktime_ms: Some(0), ..CpuOptions::default() };
            let kernel = CpuKernel::compile(&func, &opts)
                .map_err(|e| KernelError::Cpu { kernel: self.name(), detail: e.to_string() })?;
            Ok(Arc::new(Mutex::new(kernel)))
        })
    }

    /// Runs the CPU kernel on host arrays given in parameter order and returns the array of
    /// parameter number `output` after the call. The kernel checks every array and scalar
    /// against the program's axes before it runs.
    pub(crate) fn run_cpu(self, args: Vec<HostArg>, output: usize) -> Result<Vec<f32>, KernelError> {
        let err = |detail: String| KernelError::Cpu { kernel: self.name(), detail };
        let kernel = self.cpu_compiled()?;
        let kernel = kernel.lock().map_err(|_| KernelError::Poisoned)?;
        let params = &kernel.func().params;
        if params.len() != args.len() {
            return Err(err(format!("{} arguments for {} parameters", args.len(), params.len())));
        }
        let out_name = params.get(output).map(|p| p.name.clone()).unwrap_or_default();
        let mut call = Args::new();
        for (p, a) in params.iter().zip(args) {
            match a {
                HostArg::Array(v) => call.array(p.name.clone(), v),
                HostArg::Scalar(v) => call.int(p.name.clone(), v),
            };
        }
        kernel.run(&mut call).map_err(|e| err(e.to_string()))?;
        match call.arrays.swap_remove(&out_name) {
            Some(Array::F32(v)) => Ok(v),
            _ => Err(err(format!("no f32 array for parameter {output} after the call"))),
        }
    }
}

/// A host argument of a CPU kernel call.
#[derive(Debug)]
pub(crate) enum HostArg {
    /// An array.
    Array(Array),
    /// An integer scalar.
    Scalar(i64),
}

/// A per-kernel cache of built programs.
type KernelCache<T> = OnceLock<Mutex<HashMap<Kernel, T>>>;

/// The entry of `kernel` in `cache`, built by `build` on first use. Built outside the lock; a
/// racing thread may build too, the first insert wins.
fn cached<T: Clone>(
    cache: &KernelCache<T>,
    kernel: Kernel,
    build: impl FnOnce() -> Result<T, KernelError>,
) -> Result<T, KernelError> {
    let map = cache.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(v) = map.lock().map_err(|_| KernelError::Poisoned)?.get(&kernel) {
        return Ok(v.clone());
    }
    let v = build()?;
    let mut guard = map.lock().map_err(|_| KernelError::Poisoned)?;
    Ok(guard.entry(kernel).or_insert(v).clone())
}
