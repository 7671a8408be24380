//! What a program computes, as far as a peer library computes it too (CSR SpMM, SpMV and
//! SDDMM), checked by its numbers in f64; and the peers themselves, timed on the same
//! operands for `sparsec bench --compare` and `sparsec gpu-report --peer`: scipy, oneMKL and
//! numpy in a Python process (`scripts/cpu_peers.py`), MLIR's sparsifier in this process
//! (`sparsec_backend_mlir::SparsifierKernel`).

use clap::ValueEnum;
use serde_json::Value;
use sparsec::driver;
use sparsec::ir::data::{Args, Array};
use sparsec::ir::{AxisId, AxisKind, BufferId, Func, Storage};
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The peer process's program, carried in the binary so that `bench` runs from anywhere.
const PEER_SCRIPT: &str = include_str!("../../scripts/cpu_peers.py");

/// An operation a peer library computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpKind {
    /// `C = A·B`: A in CSR, B and C dense.
    Spmm,
    /// `y = A·x`: A in CSR, x and y dense.
    Spmv,
    /// `C[i, j] = Σ_k X[i, k]·Y[j, k]` on the CSR pattern of C.
    Sddmm,
}

impl OpKind {
    /// Its name in messages and in the peer protocol.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Spmm => "spmm",
            OpKind::Spmv => "spmv",
            OpKind::Sddmm => "sddmm",
        }
    }
}

/// A program recognised as an [`OpKind`]: which buffer plays which part.
#[derive(Clone, Debug)]
pub(crate) struct Operation {
    pub kind: OpKind,
    /// The buffer whose CSR pattern is walked: A (SpMM, SpMV), C (SDDMM).
    pub sparse: BufferId,
    /// The dense inputs in the operation's order: B; x; X, Y.
    pub dense: Vec<BufferId>,
    /// The output.
    pub out: BufferId,
}

/// The operands of an [`Operation`] bound in a run's arguments, in f64.
pub(crate) struct Operands {
    pub rows: usize,
    pub cols: usize,
    pub indptr: Vec<i64>,
    pub indices: Vec<i64>,
    /// A's values (SpMM, SpMV); none for SDDMM's pattern.
    pub values: Option<Vec<f64>>,
    /// Each dense input and its shape.
    pub dense: Vec<(Vec<f64>, Vec<u64>)>,
}

fn axes(f: &Func, b: BufferId) -> &[AxisId] {
    f.buffers[b].axes()
}

/// Whether `b` is a CSR matrix: a dense root axis, then a sparse one under it, its pattern
/// given (not assembled).
fn is_csr(f: &Func, b: BufferId) -> bool {
    matches!(axes(f, b)[..], [i, j] if f.axes[i].kind == AxisKind::DenseFixed && f.axes[i].parent.is_none()
        && f.axes[j].kind == AxisKind::SparseVariable && f.axes[j].parent == Some(i) && f.axes[j].pattern.is_none())
}

fn is_dense(f: &Func, b: BufferId) -> bool {
    let a = axes(f, b);
    !a.is_empty() && a.iter().all(|&x| f.axes[x].kind == AxisKind::DenseFixed)
}

/// Recognises what `f` computes by its declarations: one float output and float parameter
/// inputs laid out as SpMM, SpMV or SDDMM over CSR. Whether it computes that is for its
/// numbers to show ([`Operation::check`]).
pub(crate) fn recognize(f: &Func) -> Result<Operation, String> {
    let refuse = |why: String| format!("`{}` is not an operation a peer computes (CSR SpMM, SpMV or SDDMM): it {why}", f.name);
    let own = sparsec::passes::remove_preprocess(f);
    let written = driver::written_buffers(&own);
    let [out] = written[..] else { return Err(refuse(format!("writes {} buffers, not one", written.len()))) };
    let inputs: Vec<BufferId> = f
        .buffers
        .iter()
        .filter(|(b, buf)| *b != out && buf.dtype.is_float() && matches!(buf.storage, Storage::Param(_)))
        .map(|(b, _)| b)
        .collect();
    if !f.buffers[out].dtype.is_float() {
        return Err(refuse(format!("writes `{}`, which is not a float buffer", f.buffers[out].name)));
    }
    let sparse: Vec<BufferId> = inputs.iter().copied().filter(|&b| is_csr(f, b)).collect();
    let dense: Vec<BufferId> = inputs.iter().copied().filter(|&b| is_dense(f, b)).collect();
    if sparse.len() + dense.len() != inputs.len() {
        return Err(refuse("reads a float buffer that is neither CSR nor dense".into()));
    }
    let (oa, rank) = (axes(f, out), |b: BufferId| axes(f, b).len());
    let kind = match (&sparse[..], &dense[..]) {
        ([a], [b]) if is_dense(f, out) && oa.len() == 2 && rank(*b) == 2 && axes(f, *a)[0] == oa[0] && axes(f, *b)[1] == oa[1] => {
            return Ok(Operation { kind: OpKind::Spmm, sparse: *a, dense: vec![*b], out });
        }
        ([a], [x]) if is_dense(f, out) && oa.len() == 1 && rank(*x) == 1 && axes(f, *a)[0] == oa[0] => {
            return Ok(Operation { kind: OpKind::Spmv, sparse: *a, dense: vec![*x], out });
        }
        ([], [p, q]) if is_csr(f, out) && rank(*p) == 2 && rank(*q) == 2 && axes(f, *p)[1] == axes(f, *q)[1] => {
            // X runs over C's rows.
            let (x, y) = if axes(f, *p)[0] == oa[0] { (*p, *q) } else { (*q, *p) };
            return Ok(Operation { kind: OpKind::Sddmm, sparse: out, dense: vec![x, y], out });
        }
        _ => format!("has {} CSR and {} dense float inputs and writes a {} buffer", sparse.len(), dense.len(), if is_csr(f, out) { "CSR" } else { "dense" }),
    };
    Err(refuse(kind))
}

fn ints(a: Option<&Array>) -> Option<Vec<i64>> {
    match a? {
        Array::I32(v) => Some(v.iter().map(|&x| i64::from(x)).collect()),
        Array::I64(v) => Some(v.clone()),
        _ => None,
    }
}

fn floats(a: Option<&Array>) -> Option<Vec<f64>> {
    let a = a?;
    a.dtype().is_float().then(|| a.to_f64_vec())
}

impl Operation {
    fn param(f: &Func, b: BufferId) -> Option<&str> {
        match f.buffers[b].storage {
            Storage::Param(p) => Some(&f.params[p].name),
            Storage::Alloc(_) => None,
        }
    }

    /// Its operands as bound in `args`.
    pub fn operands(&self, f: &Func, args: &Args) -> Result<Operands, String> {
        let missing = |what: &str| format!("`{}`: {what} is not bound", f.name);
        let j = axes(f, self.sparse)[1];
        let array = |p: Option<sparsec::ir::ParamId>| p.and_then(|p| args.arrays.get(&f.params[p].name));
        let indptr = ints(array(f.axes[j].indptr)).ok_or_else(|| missing("the row pointer"))?;
        let indices = ints(array(f.axes[j].indices)).ok_or_else(|| missing("the column indices"))?;
        let values = match self.kind {
            OpKind::Sddmm => None,
            _ => Some(floats(Self::param(f, self.sparse).and_then(|n| args.arrays.get(n))).ok_or_else(|| missing("A's values"))?),
        };
        let mut dense = Vec::new();
        for &b in &self.dense {
            let v = floats(Self::param(f, b).and_then(|n| args.arrays.get(n))).ok_or_else(|| missing(&format!("`{}`", f.buffers[b].name)))?;
            let shape = crate::run::dense_shape(f, b, args).ok_or_else(|| missing(&format!("the shape of `{}`", f.buffers[b].name)))?;
            dense.push((v, shape));
        }
        let rows = indptr.len().saturating_sub(1);
        // The columns: the rows of B, the length of x, the rows of Y.
        let from = dense.last().map_or(0, |(_, s)| s[0] as usize);
        Ok(Operands { rows, cols: from, indptr, indices, values, dense })
    }

    /// The output as computed in f64 from `ops`, each element with the sum of its terms'
    /// magnitudes and their count (the scale of its rounding).
    fn reference(&self, ops: &Operands) -> Vec<(f64, f64, usize)> {
        let (ptr, idx) = (&ops.indptr, &ops.indices);
        let row = |r: usize| ptr[r] as usize..ptr[r + 1] as usize;
        match self.kind {
            OpKind::Spmm | OpKind::Spmv => {
                let vals = ops.values.as_deref().unwrap_or(&[]);
                let (b, shape) = &ops.dense[0];
                let feat = if self.kind == OpKind::Spmm { shape[1] as usize } else { 1 };
                let mut out = Vec::with_capacity(ops.rows * feat);
                for r in 0..ops.rows {
                    for k in 0..feat {
                        let terms = row(r).map(|p| vals[p] * b[idx[p] as usize * feat + k]);
                        out.push(terms.fold((0.0, 0.0, 0), |(s, m, n), t| (s + t, m + t.abs(), n + 1)));
                    }
                }
                out
            }
            OpKind::Sddmm => {
                let ((x, xs), (y, _)) = (&ops.dense[0], &ops.dense[1]);
                let feat = xs[1] as usize;
                let mut out = Vec::with_capacity(idx.len());
                for r in 0..ops.rows {
                    for p in row(r) {
                        let c = idx[p] as usize;
                        let terms = (0..feat).map(|k| x[r * feat + k] * y[c * feat + k]);
                        out.push(terms.fold((0.0, 0.0, 0), |(s, m, n), t| (s + t, m + t.abs(), n + 1)));
                    }
                }
                out
            }
        }
    }

    /// Checks `got` (the output of `who`) against the f64 result on `ops`: each element within
    /// the rounding of a sum of its terms in f32.
    pub fn check(&self, ops: &Operands, got: &[f64], who: &str) -> Result<(), String> {
        let want = self.reference(ops);
        if got.len() != want.len() {
            return Err(format!("{who} gives {} values where {} gives {}", got.len(), self.kind.name(), want.len()));
        }
        for (e, (&g, &(w, scale, n))) in got.iter().zip(&want).enumerate() {
            let tol = (2.0 * (n as f64 + 1.0) * f64::from(f32::EPSILON)).max(1e-4) * scale + 1e-30;
            if (g - w).abs() > tol || g.is_nan() != w.is_nan() {
                return Err(format!("{who} does not compute {} on these data: element {e} is {g}, {} gives {w}", self.kind.name(), self.kind.name()));
            }
        }
        Ok(())
    }
}

/// The output of `op` in a run's results, in f64 (empty where it is missing).
pub(crate) fn output(f: &Func, op: &Operation, out: &Args) -> Vec<f64> {
    Operation::param(f, op.out).and_then(|n| out.arrays.get(n)).map(Array::to_f64_vec).unwrap_or_default()
}

/// A peer library (`--compare`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Peer {
    /// scipy's CSR product (one thread): SpMM, SpMV.
    Scipy,
    /// oneMKL through sparse_dot_mkl's `dot_product_mkl` (a handle per call): SpMM, SpMV.
    Mkl,
    /// oneMKL's inspector-executor API, the handle built and optimised once: SpMM, SpMV.
    MklIe,
    /// numpy's gather and sum: SDDMM.
    Numpy,
    /// MLIR's own sparsifier (`linalg.matmul`/`matvec` on a CSR encoding, the upstream
    /// `sparsifier` pipeline), JIT-compiled in this process; one thread: SpMM, SpMV.
    Sparsifier,
}

impl Peer {
    /// Its `--compare` spelling.
    pub fn name(self) -> String {
        self.to_possible_value().map_or_else(String::new, |v| v.get_name().to_string())
    }

    /// Whether it computes `op`.
    pub fn computes(self, op: OpKind) -> bool {
        match self {
            Peer::Scipy | Peer::Mkl | Peer::MklIe | Peer::Sparsifier => matches!(op, OpKind::Spmm | OpKind::Spmv),
            Peer::Numpy => op == OpKind::Sddmm,
        }
    }

    /// Whether it is oneMKL.
    pub fn is_mkl(self) -> bool {
        matches!(self, Peer::Mkl | Peer::MklIe)
    }

    /// Whether it runs in the Python process.
    fn in_python(self) -> bool {
        self != Peer::Sparsifier
    }
}

/// Seconds a peer's calls are repeated for, at least [`LEAST_CALLS`] times; the best is
/// its time (the Python process's `best`).
const BUDGET_S: f64 = 0.15;
const LEAST_CALLS: usize = 3;

/// The peers of one `bench`: the Python process where a peer needs it, and the in-process
/// sparsifier's kernel and operands for each case.
pub(crate) struct Peers {
    python: Option<PeerProcess>,
    sparsifier: Vec<Option<InProcess>>,
}

/// A case's operands and kernel for an in-process peer.
#[cfg(feature = "mlir")]
struct InProcess {
    kernel: sparsec_backend_mlir::SparsifierKernel,
    dense: Vec<f32>,
    out_len: usize,
}

/// Never built without the MLIR backend.
#[cfg(not(feature = "mlir"))]
enum InProcess {}

impl Peers {
    /// Starts what `peers` need.
    pub fn start(peers: &[Peer]) -> Result<Peers, String> {
        let python = if peers.iter().any(|p| p.in_python()) { Some(PeerProcess::spawn()?) } else { None };
        Ok(Peers { python, sparsifier: Vec::new() })
    }

    /// Which oneMKL ran and on which code path.
    pub fn mkl_info(&mut self) -> Result<String, String> {
        self.python.as_mut().ok_or("oneMKL was not started")?.mkl_info()
    }

    /// Hands case `case`'s operands to the peers (cases in order from 0).
    pub fn load(&mut self, case: usize, peers: &[Peer], op: &Operation, ops: &Operands) -> Result<(), String> {
        if let Some(p) = self.python.as_mut() {
            p.load(case, ops)?;
        }
        debug_assert_eq!(self.sparsifier.len(), case);
        let built = if peers.contains(&Peer::Sparsifier) { Some(in_process(op, ops)?) } else { None };
        self.sparsifier.push(built);
        Ok(())
    }

    /// The best call of `peer` computing `op` on case `case` (loaded) with `threads`
    /// threads (the Python peers; the sparsifier runs on one), in seconds, and its result.
    pub fn time(&mut self, peer: Peer, case: usize, op: &Operation, threads: usize) -> Result<(f64, Vec<f64>), String> {
        if peer.in_python() {
            return self.python.as_mut().ok_or("the peer process was not started")?.time(peer, case, op, threads);
        }
        let p = self.sparsifier.get(case).and_then(Option::as_ref).ok_or("the sparsifier was not loaded")?;
        let mut out = vec![0f32; p.out_len()];
        let (mut best, mut calls) = (f64::INFINITY, 0);
        let start = std::time::Instant::now();
        while calls < LEAST_CALLS || start.elapsed().as_secs_f64() < BUDGET_S {
            let t = std::time::Instant::now();
            p.run(&mut out)?;
            best = best.min(t.elapsed().as_secs_f64());
            calls += 1;
        }
        Ok((best, out.iter().map(|&v| f64::from(v)).collect()))
    }
}

#[cfg(feature = "mlir")]
fn in_process(op: &Operation, ops: &Operands) -> Result<InProcess, String> {
    use sparsec_backend_mlir::{SparsifierKernel, SparsifierOp};
    let (dense, shape) = &ops.dense[0];
    let sop = match op.kind {
        OpKind::Spmm => SparsifierOp::Spmm { feat: shape[1] as usize },
        OpKind::Spmv => SparsifierOp::Spmv,
        OpKind::Sddmm => return Err("the sparsifier peer computes SpMM and SpMV".into()),
    };
    let values = ops.values.as_deref().unwrap_or(&[]).iter().map(|&v| v as f32).collect();
    let kernel = SparsifierKernel::compile(sop, ops.rows, ops.cols, ops.indptr.clone(), ops.indices.clone(), values)
        .map_err(|e| format!("--compare sparsifier: {e}"))?;
    Ok(InProcess { kernel, dense: dense.iter().map(|&v| v as f32).collect(), out_len: ops.rows * sop.width() })
}

#[cfg(not(feature = "mlir"))]
fn in_process(_: &Operation, _: &Operands) -> Result<InProcess, String> {
    Err("--compare sparsifier needs the MLIR backend (build sparsec with the `mlir` feature)".into())
}

#[cfg(feature = "mlir")]
impl InProcess {
    fn out_len(&self) -> usize {
        self.out_len
    }

    fn run(&self, out: &mut [f32]) -> Result<(), String> {
        self.kernel.run(&self.dense, out).map_err(|e| format!("--compare sparsifier: {e}"))
    }
}

#[cfg(not(feature = "mlir"))]
impl InProcess {
    fn out_len(&self) -> usize {
        match *self {}
    }

    fn run(&self, _: &mut [f32]) -> Result<(), String> {
        match *self {}
    }
}

/// A running peer process (`scripts/cpu_peers.py`), spoken to one line at a time.
pub(crate) struct PeerProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// Operands are handed over as `.npy` files here; removed with the process.
    dir: PathBuf,
}

impl PeerProcess {
    /// Starts `python3` on the peer program.
    fn spawn() -> Result<PeerProcess, String> {
        let python = std::env::var("SPARSEC_PYTHON").unwrap_or_else(|_| "python3".into());
        let need = "--compare needs python3 with numpy and scipy (`python3 -m pip install numpy scipy`; mkl and sparse-dot-mkl for oneMKL)";
        let mut child = Command::new(&python)
            .args(["-c", PEER_SCRIPT])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{need}: cannot start `{python}`: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("the peer process has no pipes".into());
        };
        let dir = std::env::temp_dir().join(format!("sparsec-peers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut p = PeerProcess { child, stdin, stdout: BufReader::new(stdout), dir };
        // The imports fail here when numpy or scipy is missing.
        p.ask("ping").map_err(|e| format!("{need}: {e}"))?;
        Ok(p)
    }

    fn ask(&mut self, line: &str) -> Result<Value, String> {
        writeln!(self.stdin, "{line}").and_then(|_| self.stdin.flush()).map_err(|e| self.died(e.to_string()))?;
        let mut answer = String::new();
        match self.stdout.read_line(&mut answer) {
            Ok(0) | Err(_) => return Err(self.died("no answer".into())),
            Ok(_) => {}
        }
        let v: Value = serde_json::from_str(&answer).map_err(|e| format!("the peer answered `{}`: {e}", answer.trim()))?;
        match v.get("error").and_then(Value::as_str) {
            Some(e) => Err(e.to_string()),
            None => Ok(v),
        }
    }

    /// What the process printed when it stopped.
    fn died(&mut self, what: String) -> String {
        let _ = self.child.kill();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").to_string();
        format!("the peer process stopped ({what}){}", if last.is_empty() { String::new() } else { format!(": {last}") })
    }

    /// Which oneMKL ran and on which code path (`MKL_VERBOSE`).
    fn mkl_info(&mut self) -> Result<String, String> {
        let v = self.ask("info")?;
        Ok(format!("{}; {}", v["mkl"].as_str().unwrap_or("?"), v["mkl_path"].as_str().unwrap_or("?")))
    }

    /// Hands case `case`'s operands to the process.
    fn load(&mut self, case: usize, ops: &Operands) -> Result<(), String> {
        let dir = self.dir.join(format!("case{case}"));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let write = |name: &str, a: Array, shape: &[u64]| {
            sparsec::npy::write(&dir.join(format!("{name}.npy")), &a, shape).map_err(|e| e.to_string())
        };
        let f32s = |v: &[f64]| Array::F32(v.iter().map(|&x| x as f32).collect());
        write("indptr", Array::I64(ops.indptr.clone()), &[ops.indptr.len() as u64])?;
        write("indices", Array::I64(ops.indices.clone()), &[ops.indices.len() as u64])?;
        let ones = vec![1.0; ops.indices.len()];
        write("data", f32s(ops.values.as_deref().unwrap_or(&ones)), &[ops.indices.len() as u64])?;
        write("shape", Array::I64(vec![ops.rows as i64, ops.cols as i64]), &[2])?;
        self.ask(&format!("loadcsr c{case} {}", dir.display()))?;
        for (d, (v, shape)) in ops.dense.iter().enumerate() {
            write(&format!("dense{d}"), f32s(v), shape)?;
            self.ask(&format!("loaddense c{case}d{d} {}", dir.join(format!("dense{d}.npy")).display()))?;
        }
        Ok(())
    }

    /// The best call of `peer` computing `op` on case `case` (loaded) with `threads`
    /// threads, in seconds, and its result.
    fn time(&mut self, peer: Peer, case: usize, op: &Operation, threads: usize) -> Result<(f64, Vec<f64>), String> {
        let out = self.dir.join(format!("case{case}/out.npy"));
        let operands: Vec<String> = std::iter::once(format!("c{case}")).chain((0..op.dense.len()).map(|d| format!("c{case}d{d}"))).collect();
        let v = self.ask(&format!("peer {} {} {} {threads} {}", peer.name(), op.kind.name(), out.display(), operands.join(" ")))?;
        let seconds = v["seconds"].as_f64().ok_or("the peer gave no time")?;
        let result = sparsec::npy::read(&out).map_err(|e| e.to_string())?;
        Ok((seconds, result.to_f64_vec()))
    }
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
