//! New names: the one rule for picking them (`base`, else `base_1`, `base_2`, ...) and the
//! sets of names a new one must avoid. Every pass and schedule primitive names through here;
//! [`closest`] finds the known name a user probably meant, and [`is_identifier`] says which
//! names the text format writes bare.

use crate::func::{walk_stmts, Func, StmtKind};
use std::collections::HashSet;

/// Words of the grammar that cannot be names.
pub const KEYWORDS: &[&str] = &[
    "func", "axis", "buffer", "sp_iter", "for", "in", "block", "if", "else", "while", "let", "init", "reads", "writes",
    "attrs", "true", "false", "stage", "as", "start",
];

/// Whether `s` prints as an identifier that parses back as a name: ASCII letters, digits and
/// `_`, not starting with a digit, not a keyword, and not a float word (`inf`, `nan`,
/// optionally with a float suffix), which reads as a literal.
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    let well_formed = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    let float_word = ["inf", "nan"]
        .iter()
        .any(|w| s.strip_prefix(w).is_some_and(|suffix| ["", "f16", "bf16", "f32", "f64"].contains(&suffix)));
    well_formed && !float_word && !KEYWORDS.contains(&s)
}

/// `base` unless `taken(base)`, else the first of `base_1`, `base_2`, ... that is free.
pub fn fresh_name(base: &str, taken: impl Fn(&str) -> bool) -> String {
    if !taken(base) {
        return base.to_string();
    }
    let mut k = 1u64;
    loop {
        let n = format!("{base}_{k}");
        if !taken(&n) {
            return n;
        }
        k += 1;
    }
}

/// [`fresh_name`] avoiding `taken`, which then holds the new name.
pub fn fresh_in(taken: &mut HashSet<String>, base: &str) -> String {
    let n = fresh_name(base, |x| taken.contains(x));
    taken.insert(n.clone());
    n
}

/// The function-wide names of `f`: its axes, buffers and parameters.
pub fn function_names(f: &Func) -> HashSet<String> {
    let mut names: HashSet<String> = f.axes.iter().map(|(_, a)| a.name.clone()).collect();
    names.extend(f.buffers.iter().map(|(_, b)| b.name.clone()));
    names.extend(f.params.iter().map(|p| p.name.clone()));
    names
}

/// The names of every block of `f`.
pub fn block_names(f: &Func) -> HashSet<String> {
    let mut names = HashSet::new();
    walk_stmts(&f.body, &mut |s| {
        if let StmtKind::Block(b) = &s.kind {
            names.insert(b.name.clone());
        }
    });
    names
}

/// The candidate closest to `name` by edit distance (letter case ignored, then counted), when it is close
/// enough to be a likely typo: at most a third of the longer name's letters (at least one)
/// differ. For "did you mean" hints.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = name.to_lowercase();
    candidates
        .into_iter()
        .map(|c| (edit_distance(&lower, &c.to_lowercase()), c))
        .filter(|&(d, c)| d <= (lower.chars().count().max(c.chars().count()) / 3).max(1))
        // Ties go to the candidate closer with case: `BB` suggests `B` before `b`.
        .min_by_key(|&(d, c)| (d, edit_distance(name, c)))
        .map(|(_, c)| c)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}
