//! Data-driven tests of the parser and verifier, Cranelift-style: every
//! `tests/filetests/**/*.sptir` is a program whose expected diagnostics are written in the file
//! itself, as trailing comments:
//!
//! ```text
//! # test: verify
//! func f(...) { ... }
//! # error: 7:5: sp_iter `s`: the store to `B`[i // 2] may write one element ...
//! ```
//!
//! `# test: verify` parses the file and verifies every function; each `# error: LINE:COL:
//! MESSAGE` is one expected diagnostic, in order (none: the file must verify). Expectations
//! sit at the end, so rewriting them never moves a line they refer to:
//! `SPARSEC_BLESS=1 cargo test -p sparsec-ir --test filetests` rewrites them from the output.

use sparsec_ir::text::parse;
use sparsec_ir::verify::verify_module;
use sparsec_ir::SourceFile;
use std::path::{Path, PathBuf};

const EXPECT: &str = "# error: ";

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

/// The diagnostics of `text`: a parse error, or every verifier error, as `LINE:COL: MESSAGE`.
fn diagnostics(name: &str, text: &str) -> Vec<String> {
    let module = match parse(name, text) {
        Ok(m) => m,
        Err(e) => return vec![format!("{}: {}", e.location(), e.message())],
    };
    let src = SourceFile::new(name, text);
    let errors = verify_module(&module).err().unwrap_or_default();
    errors.iter().map(|e| format!("{}: {}", src.location(e.span.start as usize), e.kind)).collect()
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
        let Some(kind) = text.lines().find_map(|l| l.strip_prefix("# test: ")) else {
            failures.push(format!("{name}: no `# test:` line"));
            continue;
        };
        assert_eq!(kind.trim(), "verify", "{name}: unknown test kind");
        // The program is the file without its expectations.
        let program: String = text.lines().filter(|l| !l.starts_with(EXPECT)).map(|l| format!("{l}\n")).collect();
        let want: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix(EXPECT)).collect();
        let got = diagnostics(&name, &text);
        if bless {
            let mut out = program.trim_end().to_string() + "\n";
            got.iter().for_each(|d| out.push_str(&format!("{EXPECT}{d}\n")));
            std::fs::write(path, out).unwrap();
        } else if got != want {
            failures.push(format!("{name}:\n  want: {want:#?}\n  got:  {got:#?}"));
        }
    }
    assert!(failures.is_empty(), "{} of {} filetests differ (SPARSEC_BLESS=1 rewrites them):\n{}", failures.len(), paths.len(), failures.join("\n"));
}
