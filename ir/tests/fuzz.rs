//! Property tests of the front end, the verifier and the printer on hostile input:
//!
//! * random bytes, random strings and random token soup never make `parse` panic;
//! * random mutations of the workload corpus and of built-in programs never make `parse`,
//!   `verify_func` or `print_func` panic;
//! * whatever parses and verifies prints to text that parses again, verifies, and prints the
//!   same (print → parse → print is stable).

use proptest::prelude::*;
use proptest::sample::Index;
use sparsec_ir::text::{parse, print_func, print_module};
use sparsec_ir::verify::{verify_func, verify_module};
use std::path::PathBuf;
use std::sync::OnceLock;

// ---- seed programs ------------------------------------------------------------------------

/// Programs of every stage, beside the corpus.
const BUILT_IN: &[&str] = &[
    r#"func csrmm(a: handle, b: handle, c: handle, indptr: handle, indices: handle, m: i32, n: i32, feat: i32, nnz: i32) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz, indptr, indices)
  axis J_detach = dense_fixed(n)
  axis K = dense_fixed(feat)
  buffer A = match_sparse_buffer(a, [I, J], f32)
  buffer B = match_sparse_buffer(b, [J_detach, K], f32)
  buffer C = match_sparse_buffer(c, [I, K], f32)
  sp_iter csrmm([I, J, K], "SRS") as [i, j, k] attrs(schedule = "row") {
    init {
      C[i, k] = 0.0
    }
    C[i, k] = C[i, k] + A[i, j] * B[j, k]
  }
}
"#,
    r#"func softmax(a: handle, b: handle, indptr: handle, indices: handle, n: i32, nnz: i32) {
  axis I = dense_fixed(n)
  axis J = sparse_variable(I, n, nnz, indptr, indices)
  buffer A = match_sparse_buffer(a, [I, J], f32)
  buffer B = match_sparse_buffer(b, [I, J], f32)
  buffer TMP = alloc_sparse_buffer([I], f32, global)
  sp_iter "soft-max"([I], "S") as [i] {
    sp_iter mx([J], "R") as [j] {
      init {
        TMP[i] = min_value(f32)
      }
      TMP[i] = max(TMP[i], A[i, j])
    }
    sp_iter div([J], "S") as [j] {
      B[i, j] = exp(A[i, j] - TMP[i]) / TMP[i]
    }
  }
}
"#,
    r#"func f(a: handle, indptr: handle, m: i32, nnz: i32) stage II attrs(global_symbol = "main", x = -1, y = 2.5) {
  axis I = dense_fixed(m)
  axis J = dense_variable(I, 100, nnz, indptr, idtype = i64, sorted = false)
  buffer A = match_sparse_buffer(a, [I, J], f32, default = -1.0)
  buffer J_indptr = match_sparse_buffer(indptr, [I], i64, extra_storage = 1)
  buffer T = alloc_buffer([4, m], f32, shared)
  for i in blockIdx.x(m) attrs(pragma = 1) {
    block "blk-0"(vi: spatial(m) = i) attrs(sparse = true) {
      reads(J_indptr[vi:vi + 2], A[vi, 0:100])
      writes(T[0, vi])
      init {
        T[0, vi] = 0.0
      }
      buffer low = alloc_buffer([1], i32, local)
      low[0] = -(1) - -2 * (3 + 4) // 2 % 5
      let x: i64 = cast(i64, low[0])
      while low[0] < 10 && !(low[0] == 3) || false {
        low[0] = low[0] + 1
      }
      if x > 1i64 {
        T[0, vi] = max(T[0, vi], exp(-inf))
      } else if x == 0i64 {
        T[0, vi] = select(true, 1.0, min_value(f32))
      } else {
        atomic_add(T[0, vi], pow(abs(-1.5e-7), 2.0))
      }
      for j in serial(4, start = 2) {
        T[j, vi] = T[j, vi] + cast(f32, j)
      }
    }
  }
}
"#,
    r#"func g(a: handle, c: handle, m: i32, n: i32) stage III {
  buffer A = match_buffer(a, [m * n], f32)
  buffer C = match_buffer(c, [m], f32)
  for bx in blockIdx.x(m) {
    for tx in threadIdx.x(n) {
      block red(vi: spatial(m) = bx, vj: reduce(n) = tx) {
        reads(A[vi * n + vj])
        writes(C[vi])
        init {
          C[vi] = 0.0
        }
        C[vi] = C[vi] + sqrt(A[vi * n + vj] * 1.0e-3f32)
      }
    }
  }
}
"#,
];

/// The corpus files and the built-in programs.
fn seeds() -> &'static [String] {
    static SEEDS: OnceLock<Vec<String>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/workloads"));
        let mut paths: Vec<PathBuf> =
            std::fs::read_dir(dir).map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
        paths.retain(|p| p.extension().is_some_and(|e| e == "sptir"));
        paths.sort();
        let mut v: Vec<String> = paths.iter().filter_map(|p| std::fs::read_to_string(p).ok()).collect();
        v.extend(BUILT_IN.iter().map(|s| s.to_string()));
        v
    })
}

#[test]
fn seeds_parse_verify_and_print_stably() {
    for src in seeds() {
        let m = parse("seed", src).unwrap_or_else(|e| panic!("{e}"));
        verify_module(&m).unwrap_or_else(|e| panic!("{e:?}\n{src}"));
        check_everything(src);
    }
}

/// Runs the whole front end on `src`; panics only on a real bug.
fn check_everything(src: &str) {
    let Ok(m) = parse("fuzz.sptir", src) else { return };
    let mut all_valid = true;
    for f in &m.funcs {
        let printed = print_func(f);
        if verify_func(f).is_err() {
            all_valid = false;
            continue;
        }
        // Valid IR prints to text that parses back to valid IR and prints the same.
        let again = parse("printed.sptir", &printed)
            .unwrap_or_else(|e| panic!("{e}\n--- printed:\n{printed}\n--- from:\n{src}"));
        assert_eq!(again.funcs.len(), 1);
        let g = &again.funcs[0];
        if let Err(e) = verify_func(g) {
            panic!("reparsed IR does not verify: {e:?}\n{printed}");
        }
        assert_eq!(print_func(g), printed, "printing is not stable for:\n{src}");
    }
    if all_valid {
        let printed = print_module(&m);
        let again = parse("printed.sptir", &printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
        assert_eq!(print_module(&again), printed);
    }
}

// ---- generators ---------------------------------------------------------------------------

/// Words and symbols of the language, to build token soup and insertions that get far into
/// the grammar.
const TOKENS: &[&str] = &[
    "func",
    "f",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "axis",
    "buffer",
    "sp_iter",
    "for",
    "in",
    "block",
    "if",
    "else",
    "while",
    "let",
    "init",
    "reads",
    "writes",
    "attrs",
    "as",
    "stage",
    "I",
    "II",
    "III",
    "=",
    ",",
    ":",
    "\"S\"",
    "\"SR\"",
    "\"",
    "dense_fixed",
    "dense_variable",
    "sparse_fixed",
    "sparse_variable",
    "match_sparse_buffer",
    "alloc_sparse_buffer",
    "match_buffer",
    "alloc_buffer",
    "i32",
    "i64",
    "f32",
    "f64",
    "bool",
    "handle",
    "J",
    "K",
    "i",
    "j",
    "k",
    "A",
    "B",
    "C",
    "m",
    "n",
    "0",
    "1",
    "-1",
    "2.5",
    "1e-7",
    "inf",
    "nan",
    "2147483648",
    "3i64",
    "1.0f16",
    "-",
    "+",
    "*",
    "/",
    "//",
    "%",
    "<",
    "<=",
    "==",
    "!=",
    "&&",
    "||",
    "!",
    "serial",
    "parallel",
    "blockIdx.x",
    "threadIdx.y",
    "spatial",
    "reduce",
    "fuse",
    "attach",
    "exp",
    "abs",
    "pow",
    "max",
    "min",
    "select",
    "cast",
    "max_value",
    "atomic_add",
    "idtype",
    "sorted",
    "true",
    "false",
    "start",
    "\n",
    "#c\n",
    "\\",
    "\t",
];

fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(TOKENS).prop_map(str::to_string),
        1 => any::<char>().prop_map(|c| c.to_string()),
    ]
}

/// One edit of a source text.
#[derive(Clone, Debug)]
enum Mutation {
    /// Delete up to `len` characters.
    Delete(Index, usize),
    /// Insert a token.
    Insert(Index, String),
    /// Replace one character.
    Replace(Index, char),
    /// Swap two lines.
    SwapLines(Index, Index),
    /// Duplicate a line.
    DuplicateLine(Index),
    /// Replace one name by another name of the text.
    ReplaceName(Index, Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), 1usize..12).prop_map(|(i, n)| Mutation::Delete(i, n)),
        (any::<Index>(), token()).prop_map(|(i, t)| Mutation::Insert(i, t)),
        (
            any::<Index>(),
            prop_oneof![
                any::<char>(),
                prop::sample::select(&['(', ')', '{', '}', '[', ']', ',', '"', '#', '-', '0', 'S', 'R'][..])
            ]
        )
            .prop_map(|(i, c)| Mutation::Replace(i, c)),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        any::<Index>().prop_map(Mutation::DuplicateLine),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::ReplaceName(a, b)),
    ]
}

/// The text without `#` comments (the seeds have no `#` in strings).
fn strip_comments(text: &str) -> String {
    text.lines().map(|l| l.split('#').next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// Words of the language that are not names.
const RESERVED: &[&str] = &[
    "func",
    "axis",
    "buffer",
    "sp_iter",
    "for",
    "in",
    "block",
    "if",
    "else",
    "while",
    "let",
    "init",
    "reads",
    "writes",
    "attrs",
    "as",
    "stage",
    "start",
    "true",
    "false",
    "fuse",
    "attach",
    "dense_fixed",
    "dense_variable",
    "sparse_fixed",
    "sparse_variable",
    "match_sparse_buffer",
    "alloc_sparse_buffer",
    "match_buffer",
    "alloc_buffer",
    "i32",
    "i64",
    "f16",
    "bf16",
    "f32",
    "f64",
    "bool",
    "handle",
    "serial",
    "parallel",
    "vectorized",
    "unrolled",
    "spatial",
    "reduce",
    "idtype",
    "sorted",
    "global",
    "shared",
    "local",
    "exp",
    "log",
    "sqrt",
    "abs",
    "tanh",
    "sigmoid",
    "pow",
    "floor",
    "ceil",
    "min",
    "max",
    "select",
    "cast",
    "max_value",
    "min_value",
    "atomic_add",
    "blockIdx",
    "threadIdx",
    "x",
    "y",
    "z",
    "extra_storage",
    "default",
];

/// Byte ranges of the names (identifier-like words that are not reserved) of a text.
fn names(text: &str) -> Vec<(usize, usize)> {
    let mut ws = words(text);
    ws.retain(|&(s, e)| !RESERVED.contains(&&text[s..e]));
    ws
}

/// Byte ranges of identifier-like words.
fn words(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
        let w = c.is_ascii_alphanumeric() || c == '_';
        match (w, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    out
}

fn apply(text: &str, m: &Mutation) -> String {
    let chars: Vec<char> = text.chars().collect();
    let at = |i: &Index, extra: usize| i.index(chars.len() + extra);
    match m {
        Mutation::Delete(i, n) if !chars.is_empty() => {
            let s = at(i, 0);
            let e = (s + n).min(chars.len());
            chars[..s].iter().chain(&chars[e..]).collect()
        }
        Mutation::Insert(i, t) => {
            let s = at(i, 1);
            chars[..s].iter().collect::<String>() + t + &chars[s..].iter().collect::<String>()
        }
        Mutation::Replace(i, c) if !chars.is_empty() => {
            let mut v = chars.clone();
            v[at(i, 0)] = *c;
            v.into_iter().collect()
        }
        Mutation::SwapLines(a, b) => {
            let mut lines: Vec<&str> = text.lines().collect();
            if lines.is_empty() {
                return text.to_string();
            }
            let (x, y) = (a.index(lines.len()), b.index(lines.len()));
            lines.swap(x, y);
            lines.join("\n")
        }
        Mutation::DuplicateLine(a) => {
            let mut lines: Vec<&str> = text.lines().collect();
            if lines.is_empty() {
                return text.to_string();
            }
            let x = a.index(lines.len());
            lines.insert(x, lines[x]);
            lines.join("\n")
        }
        Mutation::ReplaceName(a, b) => {
            let ws = names(text);
            if ws.is_empty() {
                return text.to_string();
            }
            let (s, e) = ws[a.index(ws.len())];
            let (rs, re) = ws[b.index(ws.len())];
            format!("{}{}{}", &text[..s], &text[rs..re], &text[e..])
        }
        _ => text.to_string(),
    }
}

// ---- properties ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse("bytes", &text);
    }

    #[test]
    fn random_strings_never_panic(text in ".{0,256}") {
        let _ = parse("string", &text);
    }

    #[test]
    fn token_soup_never_panics(tokens in prop::collection::vec(token(), 0..96)) {
        check_everything(&tokens.join(" "));
    }

}

proptest! {
    // About one mutated program in ten still parses; these cases are what exercise the
    // verifier and the printer.
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn mutated_programs_never_panic(seed in any::<Index>(), edits in prop::collection::vec(mutation(), 1..6)) {
        let seeds = seeds();
        let mut text = seeds[seed.index(seeds.len())].clone();
        for m in &edits {
            text = apply(&text, m);
        }
        check_everything(&text);
    }

    #[test]
    fn renamed_programs_never_panic(seed in any::<Index>(), edits in prop::collection::vec((any::<Index>(), any::<Index>()), 1..4)) {
        // Renames often keep the text parseable, so they exercise the verifier. Comments
        // are dropped so that the renames hit code.
        let seeds = seeds();
        let mut text = strip_comments(&seeds[seed.index(seeds.len())]);
        for (a, b) in edits {
            text = apply(&text, &Mutation::ReplaceName(a, b));
        }
        check_everything(&text);
    }
}

// ---- regressions --------------------------------------------------------------------------

/// An escaped quote inside a name must not end the string for the nesting check, or deep
/// nesting later on the line escapes it.
#[test]
fn escaped_quote_does_not_hide_deep_nesting() {
    let n = 50_000;
    let src = format!(
        "func f() stage II {{\n  block \"a\\\"b\"(v: spatial({}1{}) = 0) {{\n  }}\n}}\n",
        "(".repeat(n),
        ")".repeat(n)
    );
    let e = parse("deep", &src).unwrap_err();
    assert!(e.message().contains("nesting deeper than"), "{e}");
}
