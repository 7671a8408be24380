//! Data-driven tests, Cranelift-style: every `tests/filetests/**/*.sptir` is a program whose
//! first `# test:` line says what to run and whose expected output sits at the end of the
//! file, as comments:
//!
//! * `# test: verify` — parse and verify; each `# error: LINE:COL: MESSAGE` is one expected
//!   diagnostic, in order (none: the file must verify).
//! * `# test: lower 2` or `# test: lower 3` — lower every function to Stage II or III; the
//!   `#| ` lines are the printed IR (or one `# error: ...` line if lowering refuses).
//! * `# test: schedule` — replay the trace of the file's `# trace: ` lines (one JSON
//!   instruction each, as `Trace::to_json` writes them) on its one function; the `#| ` lines
//!   are the scheduled IR, or one `# error: ...` line is the primitive's refusal.
//!
//! Expectations sit at the end, so rewriting them never moves a line they refer to:
//! `SPARSEC_BLESS=1 cargo test --test filetests` rewrites them from the output. A new case is
//! a new file.

use sparsec::ir::text::{parse, print_func};
use sparsec::ir::verify::verify_module;
use sparsec::ir::{SourceFile, Stage};
use sparsec::passes::PassManager;
use std::path::{Path, PathBuf};

/// Prefixes of expectation lines.
const ERROR: &str = "# error: ";
const IR: &str = "#| ";
/// Prefix of a trace instruction (input, not expectation).
const TRACE: &str = "# trace: ";

/// Every `.sptir` under `dir`, sorted.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).expect("filetests directory").map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|e| e == "sptir") {
            out.push(p);
        }
    }
}

/// A parse error, or every verifier error, as `# error: LINE:COL: MESSAGE` lines.
fn diagnostics(name: &str, text: &str) -> Result<sparsec::ir::Module, Vec<String>> {
    let module = parse(name, text).map_err(|e| vec![format!("{ERROR}{}: {}", e.location(), e.message())])?;
    let src = SourceFile::new(name, text);
    match verify_module(&module) {
        Ok(()) => Ok(module),
        Err(errors) => {
            // Every verifier error of a parsed file points at text (the caret has a width).
            for e in &errors {
                assert!(e.span.end > e.span.start, "{name}: empty span for `{}`", e.kind);
            }
            Err(errors.iter().map(|e| format!("{ERROR}{}: {}", src.location(e.span.start as usize), e.kind)).collect())
        }
    }
}

/// The expectation lines `test` produces for the file `text`.
fn run(test: &str, name: &str, text: &str) -> Result<Vec<String>, String> {
    let words: Vec<&str> = test.split_whitespace().collect();
    match words.as_slice() {
        ["verify"] => Ok(diagnostics(name, text).err().unwrap_or_default()),
        ["lower", n] => {
            let stage = match *n {
                "2" => Stage::II,
                "3" => Stage::III,
                _ => return Err(format!("lower to stage {n}: 2 or 3")),
            };
            let module = match diagnostics(name, text) {
                Ok(m) => m,
                Err(d) => return Ok(d),
            };
            let mut out = Vec::new();
            for f in &module.funcs {
                match PassManager::lowering_to(stage).run(f) {
                    Ok(g) => out.extend(print_func(&g).lines().map(|l| format!("{IR}{l}"))),
                    Err(e) => out.push(format!("{ERROR}{e}")),
                }
            }
            Ok(out)
        }
        ["schedule"] => {
            let module = match diagnostics(name, text) {
                Ok(m) => m,
                Err(d) => return Ok(d),
            };
            let [f] = module.funcs.as_slice() else { return Err("a schedule test holds one function".into()) };
            let mut trace = sparsec::schedule::Trace::default();
            for (k, line) in text.lines().filter_map(|l| l.strip_prefix(TRACE)).enumerate() {
                trace.insts.push(serde_json::from_str(line).map_err(|e| format!("trace line {}: {e}", k + 1))?);
            }
            Ok(match trace.replay(f) {
                Ok(sch) => print_func(sch.func()).lines().map(|l| format!("{IR}{l}")).collect(),
                Err(e) => vec![format!("{ERROR}{e}")],
            })
        }
        _ => Err(format!("unknown test `{test}`")),
    }
}

#[test]
fn filetests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let mut paths = Vec::new();
    files(&root, &mut paths);
    assert!(!paths.is_empty(), "no filetests under {}", root.display());
    let bless = std::env::var_os("SPARSEC_BLESS").is_some();
    let mut failures = Vec::new();
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap();
        let name = path.strip_prefix(&root).unwrap().display().to_string();
        let Some(test) = text.lines().find_map(|l| l.strip_prefix("# test: ")) else {
            failures.push(format!("{name}: no `# test:` line"));
            continue;
        };
        let expectation = |l: &str| l.starts_with(ERROR) || l.starts_with(IR) || l == IR.trim_end();
        let want: Vec<&str> = text.lines().filter(|l| expectation(l)).collect();
        // The program without its expectations (an error at the end of the input stays put).
        let program: String = text.lines().filter(|l| !expectation(l)).map(|l| format!("{l}\n")).collect();
        let got = match run(test, &name, &program) {
            Ok(g) => g,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let got: Vec<String> = got.into_iter().map(|l| l.trim_end().to_string()).collect();
        if bless {
            let mut out = program.trim_end().to_string() + "\n";
            got.iter().for_each(|d| out.push_str(&format!("{d}\n")));
            std::fs::write(path, out).unwrap();
        } else if got != want {
            let first = (0..got.len().max(want.len())).find(|&k| got.get(k).map(String::as_str) != want.get(k).copied());
            let k = first.unwrap_or(0);
            failures.push(format!(
                "{name}: expectation line {} differs\n  want: {:?}\n  got:  {:?}",
                k + 1,
                want.get(k),
                got.get(k)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} filetests differ (SPARSEC_BLESS=1 rewrites them):\n{}",
        failures.len(),
        paths.len(),
        failures.join("\n")
    );
}
