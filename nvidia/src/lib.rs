//! NVIDIA's offline toolchain, for checking emitted GPU code without a GPU: finding it (PyPI's
//! `nvidia-cuda-nvcc-cu12`, which `scripts/install-deps` installs, or a CUDA install),
//! assembling PTX with `ptxas` and reading its report, compiling CUDA C++ with NVRTC
//! ([`nvrtc`]), and the innermost loops of a PTX text
//! with what each iteration does ([`LoopStats`]). Used by the MLIR backend (libdevice), the
//! tests and `sparsec gpu-report`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What went wrong with the toolchain.
#[derive(Debug, thiserror::Error)]
pub enum NvidiaError {
    /// No toolkit was found.
    #[error("NVIDIA's toolchain was not found: install it with `pip install nvidia-cuda-nvcc-cu12` (scripts/install-deps does), or set CUDA_HOME")]
    NotFound,
    /// A file or a process could not be used.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// ptxas refused the PTX.
    #[error("ptxas refused the PTX for {chip}:\n{log}")]
    Refused {
        /// The target.
        chip: String,
        /// ptxas's messages.
        log: String,
    },
    /// NVRTC (or the Python that runs it) refused the CUDA source.
    #[error("NVRTC could not compile {name} for {chip}:\n{log}")]
    NvrtcRefused {
        /// The source's name.
        name: String,
        /// The target.
        chip: String,
        /// NVRTC's messages.
        log: String,
    },
}

/// The root of a CUDA toolchain holding `nvvm/libdevice/libdevice.10.bc` and `bin/ptxas`:
/// `$SPARSEC_CUDA_NVCC` (PyPI's `nvidia-cuda-nvcc-cu12` folder, which `scripts/common.sh`
/// sets), `$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda`, then the PyPI package as `python3`
/// finds it. Looked up once.
pub fn cuda_root() -> Option<PathBuf> {
    static ROOT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        let pip = || {
            let out = Command::new("python3")
                .args(["-c", "import nvidia.cuda_nvcc as m; print(m.__path__[0])"])
                .output()
                .ok()?;
            out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        };
        let env = |v: &str| std::env::var(v).ok().filter(|s| !s.is_empty());
        [env("SPARSEC_CUDA_NVCC"), env("CUDA_HOME"), env("CUDA_PATH"), Some("/usr/local/cuda".into())]
            .into_iter()
            .flatten()
            .chain(std::iter::once_with(pip).flatten())
            .map(PathBuf::from)
            .find(|r| r.join("nvvm/libdevice/libdevice.10.bc").exists())
    })
    .clone()
}

/// CUDA's libdevice under [`cuda_root`]: the math functions PTX calls, linked into it.
pub fn libdevice() -> Option<PathBuf> {
    cuda_root().map(|r| r.join("nvvm/libdevice/libdevice.10.bc"))
}

/// Assembles `ptx` for `chip` (`sm_80`) with ptxas and returns the report of every entry
/// function. `name` names the scratch files.
pub fn ptxas(name: &str, ptx: &str, chip: &str) -> Result<Vec<EntryReport>, NvidiaError> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let root = cuda_root().ok_or(NvidiaError::NotFound)?;
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("sparsec-nvidia-{}-{n}", std::process::id()));
    let io = |what: String| move |source| NvidiaError::Io { what, source };
    std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
    let file = dir.join(format!("{name}_{chip}.ptx"));
    std::fs::write(&file, ptx).map_err(io(format!("writing {}", file.display())))?;
    let out = run_ptxas(&root, chip, &dir.join(format!("{name}_{chip}.cubin")), &file);
    // The scratch folder goes whatever happened.
    let _ = std::fs::remove_dir_all(&dir);
    let out = out.map_err(io("running ptxas".to_string()))?;
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    if !out.status.success() {
        return Err(NvidiaError::Refused { chip: chip.to_string(), log });
    }
    Ok(parse_report(&log))
}

/// Compiles CUDA C++ to PTX for `chip` with NVRTC: `scripts/nvrtc` (built into this crate)
/// run by `python3` with PyPI's `nvidia-cuda-nvrtc-cu12`, which `scripts/install-deps`
/// installs. `name` names the scratch files.
pub fn nvrtc(name: &str, cuda: &str, chip: &str) -> Result<String, NvidiaError> {
    use std::io::Write;
    use std::process::Stdio;
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("sparsec-nvrtc-{}-{n}", std::process::id()));
    let io = |what: String| move |source| NvidiaError::Io { what, source };
    std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
    let (src, ptx) = (dir.join(format!("{name}_{chip}.cu")), dir.join(format!("{name}_{chip}.ptx")));
    let run = || -> Result<std::process::Output, NvidiaError> {
        std::fs::write(&src, cuda).map_err(io(format!("writing {}", src.display())))?;
        let mut child = Command::new("python3")
            .args(["-", "--arch", chip])
            .arg(&src)
            .arg(&ptx)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io("running python3 for NVRTC".to_string()))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(include_str!("../../scripts/nvrtc").as_bytes()).map_err(io("writing to python3".to_string()))?;
        }
        child.wait_with_output().map_err(io("running python3 for NVRTC".to_string()))
    };
    let out = run();
    let text = std::fs::read_to_string(&ptx);
    // The scratch folder goes whatever happened.
    let _ = std::fs::remove_dir_all(&dir);
    let out = out?;
    if !out.status.success() {
        let log = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(NvidiaError::NvrtcRefused { name: name.to_string(), chip: chip.to_string(), log });
    }
    text.map_err(io(format!("reading NVRTC's PTX for {name}")))
}

fn run_ptxas(root: &Path, chip: &str, cubin: &Path, ptx: &Path) -> std::io::Result<std::process::Output> {
    Command::new(root.join("bin/ptxas")).args([&format!("-arch={chip}"), "-v", "-o"]).arg(cubin).arg(ptx).output()
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
    /// Bytes of static shared memory.
    pub shared: u32,
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
            out.push(EntryReport { name, registers: 0, stack: 0, spills: 0, shared: 0 });
        } else if let Some(e) = out.last_mut() {
            if line.contains("bytes stack frame") {
                e.stack = num(line, " bytes stack frame");
                e.spills = num(line, " bytes spill stores") + num(line, " bytes spill loads");
            } else if line.contains("Used ") && line.contains(" registers") {
                e.registers = num(line, " registers");
                e.shared = num(line, " bytes smem");
            }
        }
    }
    out
}

/// The innermost loops of a PTX text, each as its instructions (in text order): loops are
/// found on the control-flow graph of basic blocks (labels, branches, fall-through), as
/// strongly connected components; a loop is innermost when removing its header leaves no
/// cycle inside it. Every kernel (`.entry`) and function of the module is walked. LLVM places loop blocks in any order, so text position is not used.
pub fn innermost_loops(ptx: &str) -> Vec<Vec<String>> {
    // Basic blocks: (label, instructions, successors by label index).
    let mut blocks: Vec<Vec<String>> = vec![Vec::new()];
    let mut ends: Vec<(Option<String>, bool)> = Vec::new(); // (branch target, falls through)
    let mut block_label: Vec<Option<String>> = vec![None];
    let close = |blocks: &mut Vec<Vec<String>>, block_label: &mut Vec<Option<String>>, label: Option<String>| {
        blocks.push(Vec::new());
        block_label.push(label);
    };
    // The first block of each function (every kernel of the module is an entry).
    let mut entries = vec![0];
    for line in ptx.lines().map(str::trim) {
        if line.contains(".entry ") || line.contains(".func ") {
            if !blocks.last().is_some_and(Vec::is_empty) || block_label.last().is_some_and(Option::is_some) {
                ends.push((None, false));
                close(&mut blocks, &mut block_label, None);
            }
            entries.push(blocks.len() - 1);
            continue;
        }
        if line.starts_with('$') && line.ends_with(':') {
            let label = Some(line.trim_end_matches(':').to_string());
            if blocks.last().is_some_and(Vec::is_empty) && block_label.last().is_some_and(Option::is_none) {
                // The empty block after a branch: it is the label's.
                *block_label.last_mut().expect("a block") = label;
            } else {
                ends.push((None, true));
                close(&mut blocks, &mut block_label, label);
            }
            continue;
        }
        if line.is_empty() || line.starts_with("//") || line.starts_with('.') || !line.ends_with(';') {
            continue;
        }
        blocks.last_mut().expect("a block").push(line.to_string());
        let words: Vec<&str> = line.trim_end_matches(';').split_whitespace().collect();
        let (guarded, op) = match words.first() {
            Some(w) if w.starts_with('@') => (true, words.get(1).copied().unwrap_or_default()),
            Some(w) => (false, *w),
            None => continue,
        };
        if op.starts_with("bra") {
            ends.push((words.last().map(|t| t.to_string()), guarded));
            close(&mut blocks, &mut block_label, None);
        } else if op == "ret" || op == "exit" {
            ends.push((None, guarded));
            close(&mut blocks, &mut block_label, None);
        }
    }
    ends.push((None, false));
    let n = blocks.len();
    let index = |l: &str| block_label.iter().position(|b| b.as_deref() == Some(l));
    let succ: Vec<Vec<usize>> = (0..n)
        .map(|b| {
            let mut out = Vec::new();
            if let Some(t) = ends[b].0.as_deref().and_then(index) {
                out.push(t);
            }
            if ends[b].1 && b + 1 < n {
                out.push(b + 1);
            }
            out
        })
        .collect();
    // Only blocks reachable from an entry.
    let mut reached = vec![false; n];
    let mut work = entries;
    while let Some(b) = work.pop() {
        if !std::mem::replace(&mut reached[b], true) {
            work.extend(succ[b].iter().copied());
        }
    }
    let live: Vec<usize> = (0..n).filter(|&b| reached[b]).collect();
    let mut found = Vec::new();
    innermost(&succ, &live, &mut found);
    found
        .into_iter()
        .map(|mut nodes: Vec<usize>| {
            nodes.sort_unstable();
            nodes.iter().flat_map(|&b| blocks[b].clone()).collect()
        })
        .collect()
}

/// The cyclic components of the graph restricted to `nodes` that hold no cycle once their
/// headers are removed.
fn innermost(succ: &[Vec<usize>], nodes: &[usize], out: &mut Vec<Vec<usize>>) {
    for comp in components(succ, nodes) {
        let cyclic = comp.len() > 1 || succ[comp[0]].contains(&comp[0]);
        if !cyclic {
            continue;
        }
        let inside = |x: usize| comp.contains(&x);
        let mut headers: Vec<usize> =
            comp.iter().copied().filter(|&h| nodes.iter().any(|&p| !inside(p) && succ[p].contains(&h))).collect();
        if headers.is_empty() {
            // Entered from outside `nodes` only: its first block stands for the header.
            headers.extend(comp.iter().min());
        }
        let rest: Vec<usize> = comp.iter().copied().filter(|x| !headers.contains(x)).collect();
        let before = out.len();
        innermost(succ, &rest, out);
        if out.len() == before {
            out.push(comp);
        }
    }
}

/// Strongly connected components of the graph restricted to `nodes` (Tarjan).
fn components(succ: &[Vec<usize>], nodes: &[usize]) -> Vec<Vec<usize>> {
    struct T<'a> {
        succ: &'a [Vec<usize>],
        nodes: &'a [usize],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on: Vec<bool>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(t: &mut T<'_>, v: usize) {
        t.index[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        for &w in &t.succ[v] {
            if !t.nodes.contains(&w) {
                continue;
            }
            match t.index[w] {
                None => {
                    visit(t, w);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(i) if t.on[w] => t.low[v] = t.low[v].min(i),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            t.out.push(comp);
        }
    }
    let n = succ.len();
    let mut t = T { succ, nodes, index: vec![None; n], low: vec![0; n], stack: Vec::new(), on: vec![false; n], next: 0, out: Vec::new() };
    for &v in nodes {
        if t.index[v].is_none() {
            visit(&mut t, v);
        }
    }
    t.out
}

/// The entry functions of a PTX module: each name with its text (from `.entry` to the next).
pub fn entries(ptx: &str) -> Vec<(String, &str)> {
    let starts: Vec<usize> = ptx.match_indices(".entry ").map(|(i, _)| i).collect();
    starts
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let text = &ptx[i..starts.get(k + 1).copied().unwrap_or(ptx.len())];
            let name = text[".entry ".len()..].split(['(', ' ', '\n']).next().unwrap_or_default().to_string();
            (name, text)
        })
        .collect()
}

/// What one iteration of a loop does, counted on its PTX instructions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopStats {
    /// Instructions.
    pub instructions: usize,
    /// Loads from global memory (`ld.global*`, non-coherent included).
    pub global_loads: usize,
    /// Of those, through the non-coherent (read-only) path.
    pub nc_loads: usize,
    /// Stores to global memory.
    pub global_stores: usize,
    /// Atomic or reduction operations (`atom.*`, `red.*`).
    pub atomics: usize,
    /// Loads and stores of shared memory.
    pub shared_accesses: usize,
    /// Fused multiply-adds (`fma.*`).
    pub fmas: usize,
    /// Float multiplies not fused (`mul.*.f32`, `mul.*.f64`).
    pub float_muls: usize,
    /// The widest vector access, in elements (1 when none is vectorised).
    pub vector_width: usize,
}

impl LoopStats {
    /// Counts the instructions of one loop (as [`innermost_loops`] gives them).
    pub fn of(body: &[String]) -> LoopStats {
        let mut s = LoopStats { vector_width: 1, ..LoopStats::default() };
        for line in body {
            let words: Vec<&str> = line.split_whitespace().collect();
            let op = match words.first() {
                Some(w) if w.starts_with('@') => words.get(1).copied().unwrap_or_default(),
                Some(w) => *w,
                None => continue,
            };
            s.instructions += 1;
            let parts: Vec<&str> = op.split('.').collect();
            let has = |p: &str| parts.contains(&p);
            match parts[0] {
                "ld" | "ldu" if has("global") => {
                    s.global_loads += 1;
                    s.nc_loads += has("nc") as usize;
                }
                "st" if has("global") => s.global_stores += 1,
                "ld" | "st" if has("shared") => s.shared_accesses += 1,
                "atom" | "red" => s.atomics += 1,
                "fma" => s.fmas += 1,
                "mul" if has("f32") || has("f64") => s.float_muls += 1,
                _ => {}
            }
            for (p, w) in [("v2", 2), ("v4", 4), ("v8", 8)] {
                if has(p) && matches!(parts[0], "ld" | "st" | "ldu") {
                    s.vector_width = s.vector_width.max(w);
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::{entries, parse_report, LoopStats};

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

    #[test]
    fn innermost_loops_follow_the_control_flow_not_the_text_order() {
        // An outer loop (BB1..BB4) around an inner one (BB2, BB3) whose latch comes first.
        let ptx = "\
            mov.u32 %r1, 0;\n\
            $L1:\n\
            add.s32 %r1, %r1, 1;\n\
            bra.uni $L3;\n\
            $L2:\n\
            st.global.f32 [%rd1], %f1;\n\
            @%p1 bra $L3;\n\
            bra.uni $L4;\n\
            $L3:\n\
            ld.global.f32 %f1, [%rd2];\n\
            bra.uni $L2;\n\
            $L4:\n\
            @%p2 bra $L1;\n\
            ret;\n";
        let loops = super::innermost_loops(ptx);
        assert_eq!(loops.len(), 1, "{loops:?}");
        let body = loops[0].join("\n");
        assert!(body.contains("ld.global") && body.contains("st.global") && !body.contains("add.s32"), "{body}");
    }

    #[test]
    fn innermost_loops_of_every_kernel() {
        // The second kernel is reached from its own entry, not from the first one's.
        let ptx = "            .visible .entry k0(
            )
            {
            $L__BB0_1:
            add.s32 %r1, %r1, 1;
            @%p1 bra $L__BB0_1;
            ret;
            }
            .visible .entry k1(
            )
            {
            mov.u32 %r1, 0;
            $L__BB1_1:
            fma.rn.f32 %f1, %f2, %f3, %f1;
            @%p1 bra $L__BB1_1;
            ret;
            }
";
        let loops: Vec<String> = super::innermost_loops(ptx).iter().map(|l| l.join("\n")).collect();
        assert_eq!(loops.len(), 2, "{loops:?}");
        assert!(loops.iter().any(|l| l.contains("fma.rn.f32")), "{loops:?}");
    }

    #[test]
    fn loop_stats_count_memory_and_arithmetic() {
        let body: Vec<String> = [
            "ld.global.nc.f32 %f1, [%rd1];",
            "ld.global.v4.f32 {%f2, %f3, %f4, %f5}, [%rd2];",
            "@%p1 st.global.f32 [%rd3], %f1;",
            "fma.rn.f32 %f6, %f1, %f2, %f6;",
            "mul.rn.f32 %f7, %f1, %f2;",
            "atom.global.add.f32 %f8, [%rd3], %f7;",
            "ld.shared.f32 %f9, [%r1];",
            "add.s32 %r1, %r1, 1;",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let s = LoopStats::of(&body);
        assert_eq!(
            (s.instructions, s.global_loads, s.nc_loads, s.global_stores, s.atomics, s.shared_accesses, s.fmas, s.float_muls, s.vector_width),
            (8, 2, 1, 1, 1, 1, 1, 1, 4)
        );
    }

    #[test]
    fn entries_split_a_module() {
        let ptx = ".version 8.0\n.visible .entry a(\n)\n{\nret;\n}\n.visible .entry b(\n)\n{\nret;\n}\n";
        let e = entries(ptx);
        assert_eq!(e.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert!(e[0].1.starts_with(".entry a") && !e[0].1.contains("entry b"), "{e:?}");
    }
}
