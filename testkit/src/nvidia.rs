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
}
