//! New names: the one rule for picking them (`base`, else `base_1`, `base_2`, ...) and the
//! sets of names a new one must avoid. Every pass and schedule primitive names through here.

use crate::func::{walk_stmts, Func, StmtKind};
use std::collections::HashSet;

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
