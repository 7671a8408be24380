//! A one-line front end in TACO's index notation: `C(i,k) = A(i,j) * B(j,k)` with a format per
//! tensor becomes a Stage-I `.sptir` program, which then prints, lowers, schedules and runs
//! like a file (`sparsec einsum`).
//!
//! * The right side sums and multiplies tensor accesses and numbers (`+`, `-`, `*`,
//!   parentheses). An index that does not appear on the left is summed over.
//! * Formats: `dense` (the default), `csr` (2-D: dense rows, compressed columns), `csc` (2-D:
//!   stored by columns, `modes = [1, 0]`), `dcsr` (2-D: only the non-empty rows, a root sparse
//!   axis, then compressed columns) and `csf` (n-D: a dense first level, every other level
//!   compressed). Each sparse input has its own
//!   pattern; a sparse output shares the pattern of the first sparse input with its indices
//!   and format (`B(i,j) = A(i,j) * 2.5`), or has its own, on which it is computed (SDDMM).
//! * The loops walk one pattern: the output's, else the first sparse input's. Other sparse
//!   inputs are looked up (a binary search per access; zero where nothing is stored), which
//!   is exact: `C(i,k) = A(i,j) * B(j,k)` with both csr gives the dense product. Every term
//!   must have a factor on the walked pattern (unless the output owns it), since the loops
//!   skip what it does not store — except an element-wise expression of csr inputs into a
//!   csr output, which co-iterates them into an assembled pattern, their union or
//!   intersection (`C(i,j) = A(i,j) + B(i,j)`), and a product of two csr matrices into a csr
//!   output, SpGEMM (`C(i,k) = A(i,j) * B(j,k)`: the output's pattern is the product of
//!   theirs, assembled by the run). A csr output owns its pattern otherwise, and is computed
//!   on it (SDDMM; a masked product `C(i,k) = M(i,k) * A(i,j) * B(j,k)` walks `M`'s).
//! * Loop order: the walked pattern's levels first, then the other indices in the order
//!   they first appear (left side first); an index is spatial (`S`) when the left side names
//!   it, a reduction (`R`) otherwise.
//! * Names: tensor `A` is bound to handle `a`, its pattern to `indptr_a[_<index>]`,
//!   `indices_a[_<index>]` and `nnz_a[_<index>]` (the suffix per level of a csf tensor),
//!   index `j` has the extent `n_j`. A dense access along a walked compressed index uses a
//!   dense copy of that axis (`J_detach`), as the hand-written corpus does; a looked-up
//!   pattern's compressed axes are named after their index and tensor (`K_b`).

use sparsec_ir::text::ParseError;
use sparsec_ir::Func;
use std::collections::BTreeSet;
use std::fmt::Write;

/// A storage format of one tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Every level dense.
    Dense,
    /// Two levels: dense rows, compressed columns.
    Csr,
    /// A dense first level, every other level compressed (CSF without a compressed root).
    Csf,
    /// Two levels stored by columns: dense columns, compressed rows (`modes = [1, 0]`).
    Csc,
    /// Two levels: the non-empty rows (a root sparse axis), compressed columns.
    Dcsr,
    /// Coordinates per entry (any rank): a root level repeating the first index
    /// (`unique = false`), singletons below it. Walked entry by entry, never looked up.
    Coo,
}

impl std::str::FromStr for Format {
    type Err = EinsumError;

    fn from_str(s: &str) -> Result<Format, EinsumError> {
        match s {
            "dense" => Ok(Format::Dense),
            "csr" => Ok(Format::Csr),
            "csf" => Ok(Format::Csf),
            "csc" => Ok(Format::Csc),
            "dcsr" => Ok(Format::Dcsr),
            "coo" => Ok(Format::Coo),
            _ => Err(EinsumError::Format(format!("unknown format `{s}` (dense, csr, csc, dcsr, csf or coo)"))),
        }
    }
}

/// Why an expression cannot become a program.
#[derive(Debug, thiserror::Error)]
pub enum EinsumError {
    /// The expression does not parse.
    #[error("einsum: {message} at column {column}:\n  {text}\n  {caret}^")]
    Syntax {
        /// What is wrong.
        message: String,
        /// 1-based column.
        column: usize,
        /// The expression.
        text: String,
        /// Spaces up to the column.
        caret: String,
    },
    /// A format or a tensor's use of it is wrong.
    #[error("einsum: {0}")]
    Format(String),
    /// The expression names something inconsistently (a tensor with two arities, ...).
    #[error("einsum: {0}")]
    Invalid(String),
    /// The expression needs what sparsec does not lower yet.
    #[error("einsum: {0}")]
    Unsupported(String),
    /// The generated program failed to parse or verify (a bug of this module).
    #[error("einsum: the generated program is invalid: {0}")]
    Generated(String),
}

type R<T> = Result<T, EinsumError>;

/// One tensor access: `A(i, j)`.
#[derive(Clone, Debug, PartialEq)]
struct Access {
    tensor: String,
    indices: Vec<String>,
}

/// The right side.
#[derive(Clone, Debug, PartialEq)]
enum Term {
    Access(Access),
    Number(f64),
    Binary(char, Box<Term>, Box<Term>),
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn err<T>(&self, message: impl Into<String>) -> R<T> {
        let column = self.text[..self.pos].chars().count() + 1;
        Err(EinsumError::Syntax { message: message.into(), column, text: self.text.to_string(), caret: " ".repeat(column - 1) })
    }

    fn skip(&mut self) {
        while self.text[self.pos..].starts_with(char::is_whitespace) {
            self.pos += self.text[self.pos..].chars().next().map_or(1, char::len_utf8);
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.skip();
        self.text[self.pos..].chars().next()
    }

    fn eat(&mut self, c: char) -> R<()> {
        match self.peek() {
            Some(x) if x == c => {
                self.pos += c.len_utf8();
                Ok(())
            }
            Some(x) => self.err(format!("expected `{c}`, found `{x}`")),
            None => self.err(format!("expected `{c}`, found the end")),
        }
    }

    fn ident(&mut self) -> R<String> {
        self.skip();
        let rest = &self.text[self.pos..];
        let len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        if len == 0 || rest.starts_with(|c: char| c.is_ascii_digit()) {
            return self.err("expected a name");
        }
        self.pos += len;
        Ok(rest[..len].to_string())
    }

    fn access(&mut self) -> R<Access> {
        let tensor = self.ident()?;
        self.eat('(')?;
        let mut indices = Vec::new();
        if self.peek() != Some(')') {
            loop {
                indices.push(self.ident()?);
                if self.peek() != Some(',') {
                    break;
                }
                self.eat(',')?;
            }
        }
        self.eat(')')?;
        Ok(Access { tensor, indices })
    }

    fn factor(&mut self) -> R<Term> {
        match self.peek() {
            Some('(') => {
                self.eat('(')?;
                let t = self.sum()?;
                self.eat(')')?;
                Ok(t)
            }
            Some(c) if c.is_ascii_digit() || c == '.' => {
                let rest = &self.text[self.pos..];
                let len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E')).unwrap_or(rest.len());
                let v: f64 = match rest[..len].parse() {
                    Ok(v) => v,
                    Err(_) => return self.err(format!("`{}` is not a number", &rest[..len])),
                };
                self.pos += len;
                Ok(Term::Number(v))
            }
            Some('-') => {
                self.eat('-')?;
                let t = self.factor()?;
                Ok(Term::Binary('*', Box::new(Term::Number(-1.0)), Box::new(t)))
            }
            Some(_) => Ok(Term::Access(self.access()?)),
            None => self.err("expected a tensor or a number, found the end"),
        }
    }

    fn product(&mut self) -> R<Term> {
        let mut t = self.factor()?;
        while self.peek() == Some('*') {
            self.eat('*')?;
            t = Term::Binary('*', Box::new(t), Box::new(self.factor()?));
        }
        Ok(t)
    }

    fn sum(&mut self) -> R<Term> {
        let mut t = self.product()?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.eat(op)?;
            t = Term::Binary(op, Box::new(t), Box::new(self.product()?));
        }
        Ok(t)
    }
}

fn accesses<'t>(t: &'t Term, out: &mut Vec<&'t Access>) {
    match t {
        Term::Access(a) => out.push(a),
        Term::Number(_) => {}
        Term::Binary(_, a, b) => {
            accesses(a, out);
            accesses(b, out);
        }
    }
}

/// The axis of index `i`: its name in upper case, `_ax` added where a tensor has that name.
fn axis_name(i: &str, tensors: &[(String, usize, Format)]) -> String {
    let base = i.to_uppercase();
    if tensors.iter().any(|t| t.0 == base) {
        format!("{base}_ax")
    } else {
        base
    }
}

/// The format of tensor `t` (dense where `--format` does not name it).
fn format_of(tensors: &[(String, usize, Format)], t: &str) -> Format {
    tensors.iter().find(|x| x.0 == t).map_or(Format::Dense, |x| x.2)
}

/// `t` as `.sptir` text, accesses printed by `index`, parenthesised where `prec` needs.
fn term_text(t: &Term, index: &dyn Fn(&Access) -> String, prec: u8) -> String {
    match t {
        Term::Access(a) => index(a),
        Term::Number(v) if v.fract() == 0.0 && v.abs() < 1e15 => format!("{v:.1}"),
        Term::Number(v) => format!("{v:?}"),
        Term::Binary(op, a, b) => {
            let p = if *op == '*' { 2 } else { 1 };
            let s = format!("{} {op} {}", term_text(a, index, p), term_text(b, index, p + 1));
            if p < prec {
                format!("({s})")
            } else {
                s
            }
        }
    }
}

/// The levels of a tensor in `format`, `true` where compressed.
fn levels(format: Format, rank: usize) -> Vec<bool> {
    match format {
        Format::Dense => vec![false; rank],
        Format::Csr | Format::Csc | Format::Csf => (0..rank).map(|d| d > 0).collect(),
        Format::Dcsr | Format::Coo => vec![true; rank],
    }
}

/// Swaps the two indices of every access to a tensor in `csc` (its levels store the columns
/// first), in place.
fn store_by_columns(t: &mut Term, csc: &[String]) {
    match t {
        Term::Access(a) if csc.contains(&a.tensor) && a.indices.len() == 2 => a.indices.swap(0, 1),
        Term::Access(_) | Term::Number(_) => {}
        Term::Binary(_, a, b) => {
            store_by_columns(a, csc);
            store_by_columns(b, csc);
        }
    }
}

/// The `.sptir` text of a Stage-I function `name` computing `expr` with the tensors' formats
/// (unnamed tensors are dense). The text parses and verifies.
pub fn program(name: &str, expr: &str, formats: &[(String, Format)]) -> R<String> {
    let mut p = Parser { text: expr, pos: 0 };
    let mut out = Term::Access(p.access()?);
    p.eat('=')?;
    let mut rhs = p.sum()?;
    if let Some(c) = p.peek() {
        return p.err(format!("unexpected `{c}` after the expression"));
    }
    // A csc tensor is accessed, and walked, in its storage order (columns first).
    let csc: Vec<String> = formats.iter().filter(|f| f.1 == Format::Csc).map(|f| f.0.clone()).collect();
    store_by_columns(&mut out, &csc);
    store_by_columns(&mut rhs, &csc);
    let Term::Access(out) = out else { unreachable!("parsed as an access") };
    let mut all = vec![&out];
    accesses(&rhs, &mut all);
    // Names the program will declare: the function, each tensor and its handle, each index.
    let ident = sparsec_ir::names::is_identifier;
    if !ident(name) {
        return Err(EinsumError::Invalid(format!("the function name `{name}` is not an identifier")));
    }
    for a in &all {
        if !ident(&a.tensor) || !ident(&a.tensor.to_lowercase()) {
            return Err(EinsumError::Invalid(format!("tensor `{}` cannot be a name in .sptir (a keyword?)", a.tensor)));
        }
        if let Some(i) = a.indices.iter().find(|i| !ident(i)) {
            return Err(EinsumError::Invalid(format!("index `{i}` cannot be a name in .sptir (a keyword?)")));
        }
    }
    // Each tensor: one arity and one format.
    let mut tensors: Vec<(String, usize, Format)> = Vec::new();
    for a in &all {
        let distinct: BTreeSet<&String> = a.indices.iter().collect();
        if distinct.len() != a.indices.len() {
            return Err(EinsumError::Unsupported(format!("`{}` repeats an index (diagonals are not supported)", a.tensor)));
        }
        match tensors.iter().find(|t| t.0 == a.tensor) {
            Some(t) if t.1 != a.indices.len() => {
                return Err(EinsumError::Invalid(format!("`{}` has {} indices in one place and {} in another", a.tensor, t.1, a.indices.len())))
            }
            Some(_) => {}
            None => {
                let f = formats.iter().find(|(n, _)| *n == a.tensor).map_or(Format::Dense, |x| x.1);
                tensors.push((a.tensor.clone(), a.indices.len(), f));
            }
        }
    }
    for (n, _) in formats {
        if !tensors.iter().any(|t| t.0 == *n) {
            return Err(EinsumError::Format(format!("--format names `{n}`, which the expression does not use")));
        }
    }
    if all[1..].iter().any(|a| a.tensor == out.tensor) {
        return Err(EinsumError::Unsupported(format!("`{}` is both written and read", out.tensor)));
    }
    for (n, rank, f) in &tensors {
        match (f, rank) {
            (Format::Csr | Format::Csc | Format::Dcsr, r) if *r != 2 => {
                return Err(EinsumError::Format(format!("`{n}` has {r} indices; {} takes 2", format!("{f:?}").to_lowercase())))
            }
            (Format::Csf, r) if *r < 2 => return Err(EinsumError::Format(format!("`{n}` has {r} indices; csf takes 2 or more"))),
            _ => {}
        }
        if tensors.iter().any(|t| t.0 != *n && t.0.to_lowercase() == n.to_lowercase()) {
            return Err(EinsumError::Invalid(format!("tensor names `{n}` and another differ only in case")));
        }
    }
    if let Some(text) = assembled(name, expr, &out, &rhs, &tensors)? {
        check(&text)?;
        return Ok(text);
    }
    if let Some(text) = product(name, expr, &out, &rhs, &tensors) {
        check(&text)?;
        return Ok(text);
    }
    // Patterns: each sparse input has its own; a sparse output shares the first sparse input's
    // with its indices and format, or has its own (written on a given pattern, as SDDMM).
    let format_of = |t: &str| format_of(&tensors, t);
    let access_of = |t: &str| all.iter().find(|a| a.tensor == t).copied().expect("every tensor is accessed");
    let sparse_inputs: Vec<&str> = tensors.iter().filter(|t| t.2 != Format::Dense && t.0 != out.tensor).map(|t| t.0.as_str()).collect();
    let out_owner: Option<&str> = (format_of(&out.tensor) != Format::Dense).then(|| {
        sparse_inputs
            .iter()
            .copied()
            .find(|t| access_of(t).indices == out.indices && format_of(t) == format_of(&out.tensor))
            .unwrap_or(out.tensor.as_str())
    });
    let owner_of = |t: &str| -> Option<String> {
        if t == out.tensor {
            out_owner.map(str::to_string)
        } else {
            (format_of(t) != Format::Dense).then(|| t.to_string())
        }
    };
    // The pattern the loops walk: the output's, else the first sparse input's; the other
    // sparse inputs are looked up (a binary search per access, zero where nothing is stored).
    let driver: Option<&str> = out_owner.or_else(|| sparse_inputs.first().copied());
    let levels_of = |t: &str| {
        let a = access_of(t);
        a.indices.iter().cloned().zip(levels(format_of(t), a.indices.len())).collect::<Vec<(String, bool)>>()
    };
    let compressed: Vec<String> = driver.map_or_else(Vec::new, |d| levels_of(d).into_iter().filter(|x| x.1).map(|x| x.0).collect());
    // A coo tensor names no entry by a coordinate (its rows repeat): it is walked, an input,
    // and the output is dense.
    if let Some((t, ..)) = tensors.iter().find(|t| t.2 == Format::Coo && (Some(t.0.as_str()) != driver || t.0 == out.tensor || format_of(&out.tensor) != Format::Dense)) {
        return Err(EinsumError::Unsupported(format!(
            "`{t}` in coo is walked entry by entry and never looked up: it must be the only sparse operand, read into a dense output"
        )));
    }
    let coo = driver.is_some_and(|d| format_of(d) == Format::Coo);
    // The loops visit only the walked pattern's entries, so the right side must be zero off
    // it (a factor on it in every term) — unless the output owns the pattern and is only
    // written there (SDDMM's sampling).
    if let Some(d) = driver.filter(|d| *d != out.tensor) {
        fn zero_off(t: &Term, on: &dyn Fn(&str) -> bool) -> bool {
            match t {
                Term::Access(a) => on(&a.tensor),
                Term::Number(_) => false,
                Term::Binary('*', x, y) => zero_off(x, on) || zero_off(y, on),
                Term::Binary(_, x, y) => zero_off(x, on) && zero_off(y, on),
            }
        }
        if !zero_off(&rhs, &|t| owner_of(t).as_deref() == Some(d)) {
            return Err(EinsumError::Unsupported(format!(
                "a term has no factor of `{d}`, so it would be computed only where `{d}` stores entries: \
                 a sum over other patterns (sparse add) needs co-iteration, which is not supported yet"
            )));
        }
    }
    // Loop order: the walked pattern's levels, then the other indices by first appearance.
    let mut order: Vec<String> = driver.map_or_else(Vec::new, |d| access_of(d).indices.clone());
    for a in &all {
        for i in &a.indices {
            if !order.contains(i) {
                order.push(i.clone());
            }
        }
    }
    let axis_of = |i: &str| axis_name(i, &tensors);
    // A dense use of index `i`: its dense axis, or a dense copy of a walked compressed level.
    let dense_axis = |i: &str| if compressed.iter().any(|c| c == i) { format!("{}_detach", axis_of(i)) } else { axis_of(i) };
    // Parameters, axes and buffers.
    let mut params: Vec<String> = tensors.iter().map(|t| format!("{}: handle", t.0.to_lowercase())).collect();
    let mut scalars: Vec<String> = order.iter().map(|i| format!("n_{i}: i32")).collect();
    let mut axes = String::new();
    for i in &order {
        if !compressed.contains(i) {
            let _ = writeln!(axes, "  axis {} = dense_fixed(n_{i})", axis_of(i));
        }
    }
    for i in &compressed {
        let dense_use = tensors.iter().any(|t| owner_of(&t.0).as_deref() != driver && access_of(&t.0).indices.iter().any(|x| x == i) && {
            // A lookup pattern's root, or a dense tensor.
            owner_of(&t.0).is_none() || levels_of(&t.0).first().is_some_and(|x| x.0 == *i)
        });
        if dense_use {
            let _ = writeln!(axes, "  axis {}_detach = dense_fixed(n_{i})", axis_of(i));
        }
    }
    // The axes of each pattern (the walked one's compressed levels take the indices' names).
    let mut pattern_axes: Vec<(String, Vec<String>)> = Vec::new();
    let mut owners: Vec<&str> = driver.into_iter().collect();
    owners.extend(sparse_inputs.iter().copied().filter(|t| Some(*t) != driver));
    for p in owners {
        let h = p.to_lowercase();
        let lv = levels_of(p);
        let many = lv.iter().filter(|x| x.1).count() > 1;
        let mut names = Vec::new();
        for (d, (i, c)) in lv.iter().enumerate() {
            if !c {
                names.push(if Some(p) == driver { axis_of(i) } else { dense_axis(i) });
                continue;
            }
            let s = if many { format!("_{i}") } else { String::new() };
            let name = if Some(p) == driver { axis_of(i) } else { format!("{}_{h}", axis_of(i)) };
            if format_of(p) == Format::Coo {
                // One position per entry: the first index repeated, the others singletons.
                params.push(format!("indices_{h}{s}: handle"));
                if d == 0 {
                    scalars.push(format!("nnz_{h}: i32"));
                    let _ = writeln!(axes, "  axis {name} = sparse_fixed(n_{i}, nnz_{h}, indices_{h}{s}, unique = false)");
                } else {
                    let _ = writeln!(axes, "  axis {name} = sparse_fixed({}, n_{i}, 1, indices_{h}{s})", names[d - 1]);
                }
            } else if d == 0 {
                // A compressed first level is a root axis: its stored coordinates, no row pointers.
                params.push(format!("indices_{h}{s}: handle"));
                scalars.push(format!("nnz_{h}{s}: i32"));
                let _ = writeln!(axes, "  axis {name} = sparse_fixed(n_{i}, nnz_{h}{s}, indices_{h}{s})");
            } else {
                params.push(format!("indptr_{h}{s}: handle"));
                params.push(format!("indices_{h}{s}: handle"));
                scalars.push(format!("nnz_{h}{s}: i32"));
                let _ = writeln!(axes, "  axis {name} = sparse_variable({}, n_{i}, nnz_{h}{s}, indptr_{h}{s}, indices_{h}{s})", names[d - 1]);
            }
            names.push(name);
        }
        pattern_axes.push((p.to_string(), names));
    }
    let mut buffers = String::new();
    for (n, _, f) in &tensors {
        let a = access_of(n);
        let dims: Vec<String> = match owner_of(n).and_then(|o| pattern_axes.iter().find(|x| x.0 == o)) {
            Some((_, names)) => names.clone(),
            None => a.indices.iter().map(|i| dense_axis(i)).collect(),
        };
        let modes = if *f == Format::Csc { ", modes = [1, 0]" } else { "" };
        let _ = writeln!(buffers, "  buffer {n} = match_sparse_buffer({}, [{}], f32{modes})", n.to_lowercase(), dims.join(", "));
    }
    let index = |a: &Access| format!("{}[{}]", a.tensor, a.indices.join(", "));
    let value = term_text(&rhs, &index, 0);
    // Iterators over a coo tensor's levels reduce (its coordinates repeat) and scatter.
    let kinds: String = order.iter().map(|i| if out.indices.contains(i) && !(coo && compressed.contains(i)) { 'S' } else { 'R' }).collect();
    let iters: Vec<String> = order.iter().map(|i| axis_of(i)).collect();
    let lhs = index(&out);
    let sum = if matches!(rhs, Term::Binary('+' | '-', ..)) { format!("({value})") } else { value.clone() };
    // A dense output written on an input's pattern: where the loops do not reach it (no
    // reduction to initialise it, or a compressed index on the left), it is zeroed first.
    let walked_input = driver.is_some_and(|d| d != out.tensor) && format_of(&out.tensor) == Format::Dense;
    let zero_first = walked_input && (coo || !kinds.contains('R') || out.indices.iter().any(|i| compressed.contains(i)));
    let mut iterations = String::new();
    if zero_first {
        let zero_axes: Vec<String> = out.indices.iter().map(|i| dense_axis(i)).collect();
        let _ = write!(
            iterations,
            "  sp_iter {name}_zero([{}], \"{}\") as [{}] {{\n    {lhs} = 0.0\n  }}\n",
            zero_axes.join(", "),
            "S".repeat(out.indices.len()),
            out.indices.join(", ")
        );
    }
    let body = match (kinds.contains('R'), zero_first) {
        (true, false) => format!("    init {{\n      {lhs} = 0.0\n    }}\n    {lhs} = {lhs} + {sum}\n"),
        (true, true) => format!("    {lhs} = {lhs} + {sum}\n"),
        (false, _) => format!("    {lhs} = {value}\n"),
    };
    let _ = write!(iterations, "  sp_iter {name}([{}], \"{kinds}\") as [{}] {{\n{body}  }}\n", iters.join(", "), order.join(", "));
    params.extend(scalars);
    let text = format!("# {expr}\nfunc {name}({}) {{\n{axes}{buffers}{iterations}}}\n", params.join(", "));
    check(&text)?;
    Ok(text)
}

/// Where the pattern of an element-wise expression's entries comes from.
#[derive(Clone, Debug, PartialEq)]
enum Support {
    /// Every coordinate (a dense operand or a number).
    All,
    /// The coordinates of these csr tensors, combined by union or intersection.
    Set(sparsec_ir::MergeOp, Vec<String>),
}

/// The support of `t`: a product is zero off either factor's, a sum off both; `None` where
/// the result is neither a union nor an intersection of patterns (`A * B + E`).
fn support(t: &Term, sparse: &dyn Fn(&str) -> bool) -> Option<Support> {
    use sparsec_ir::MergeOp::{Intersect, Union};
    Some(match t {
        Term::Access(a) if sparse(&a.tensor) => Support::Set(Union, vec![a.tensor.clone()]),
        Term::Access(_) | Term::Number(_) => Support::All,
        Term::Binary(op, x, y) => {
            let (x, y) = (support(x, sparse)?, support(y, sparse)?);
            let want = if *op == '*' { Intersect } else { Union };
            match (x, y) {
                (Support::All, s) | (s, Support::All) if want == Intersect => s,
                (Support::All, _) | (_, Support::All) => Support::All,
                (Support::Set(o1, mut a), Support::Set(o2, b)) => {
                    // One member is either operation; else the operations must agree.
                    if (a.len() > 1 && o1 != want) || (b.len() > 1 && o2 != want) {
                        return None;
                    }
                    for t in b {
                        if !a.contains(&t) {
                            a.push(t);
                        }
                    }
                    Support::Set(if a.len() > 1 { want } else { o1 }, a)
                }
            }
        }
    })
}

/// An element-wise expression over two or more csr tensors into a csr output
/// (`C(i,j) = A(i,j) + B(i,j)`): the output's pattern is the union or intersection of theirs,
/// assembled by the run, and the loops co-iterate it. `None` where the expression is not of
/// that kind.
fn assembled(name: &str, expr: &str, out: &Access, rhs: &Term, tensors: &[(String, usize, Format)]) -> R<Option<String>> {
    let format_of = |t: &str| format_of(tensors, t);
    let mut all = Vec::new();
    accesses(rhs, &mut all);
    let sparse: Vec<&str> = tensors.iter().filter(|t| t.2 != Format::Dense && t.0 != out.tensor).map(|t| t.0.as_str()).collect();
    let elementwise = format_of(&out.tensor) == Format::Csr
        && out.indices.len() == 2
        && sparse.len() >= 2
        && all.iter().all(|a| a.indices == out.indices && matches!(format_of(&a.tensor), Format::Csr | Format::Dense));
    if !elementwise {
        return Ok(None);
    }
    let (o, members) = match support(rhs, &|t| sparse.contains(&t)) {
        Some(Support::Set(o, m)) if m.len() > 1 => (o, m),
        Some(Support::Set(..)) => return Ok(None),
        Some(Support::All) => {
            return Err(EinsumError::Unsupported(format!("`{}` would be dense: a term is nonzero off every pattern", out.tensor)))
        }
        None => {
            return Err(EinsumError::Unsupported(format!(
                "the pattern of `{}` would mix unions and intersections of patterns, which sparsec does not assemble yet",
                out.tensor
            )))
        }
    };
    let (i, j) = (&out.indices[0], &out.indices[1]);
    let axis_of = |i: &str| axis_name(i, tensors);
    let (ai, aj) = (axis_of(i), axis_of(j));
    let mut params: Vec<String> = tensors.iter().map(|t| format!("{}: handle", t.0.to_lowercase())).collect();
    let mut scalars = vec![format!("n_{i}: i32"), format!("n_{j}: i32")];
    let mut axes = format!("  axis {ai} = dense_fixed(n_{i})\n");
    let mut merged = Vec::new();
    for t in members.iter().map(String::as_str).chain(std::iter::once(out.tensor.as_str())) {
        let h = t.to_lowercase();
        params.push(format!("indptr_{h}: handle"));
        params.push(format!("indices_{h}: handle"));
        scalars.push(format!("nnz_{h}: i32"));
        if t == out.tensor {
            let pattern = format!("{}({})", o.name(), merged.join(", "));
            let _ = writeln!(axes, "  axis {aj} = sparse_variable({ai}, n_{j}, nnz_{h}, indptr_{h}, indices_{h}, pattern = {pattern})");
        } else {
            let _ = writeln!(axes, "  axis {aj}_{h} = sparse_variable({ai}, n_{j}, nnz_{h}, indptr_{h}, indices_{h})");
            merged.push(format!("{aj}_{h}"));
        }
    }
    if tensors.iter().any(|t| t.2 == Format::Dense) {
        let _ = writeln!(axes, "  axis {aj}_detach = dense_fixed(n_{j})");
    }
    let mut buffers = String::new();
    for (n, _, f) in tensors {
        let col = match (n == &out.tensor, f) {
            (true, _) => aj.clone(),
            (false, Format::Dense) => format!("{aj}_detach"),
            (false, _) => format!("{aj}_{}", n.to_lowercase()),
        };
        let _ = writeln!(buffers, "  buffer {n} = match_sparse_buffer({}, [{ai}, {col}], f32)", n.to_lowercase());
    }
    let index = |a: &Access| format!("{}[{}]", a.tensor, a.indices.join(", "));
    params.extend(scalars);
    let text = format!(
        "# {expr}\nfunc {name}({}) {{\n{axes}{buffers}  sp_iter {name}([{ai}, {}({})], \"SS\") as [{i}, {j}] {{\n    {} = {}\n  }}\n}}\n",
        params.join(", "),
        o.name(),
        merged.join(", "),
        index(out),
        term_text(rhs, &index, 0)
    );
    Ok(Some(text))
}

/// The factors of a product (`None` where `t` holds a sum).
fn factors<'t>(t: &'t Term, out: &mut Vec<&'t Term>) -> Option<()> {
    match t {
        Term::Binary('*', x, y) => {
            factors(x, out)?;
            factors(y, out)
        }
        Term::Binary(..) => None,
        t => {
            out.push(t);
            Some(())
        }
    }
}

/// A product of two csr matrices into a csr output, `C(i,k) = A(i,j) * B(j,k)` (times
/// numbers): Gustavson's SpGEMM, the output's pattern the product of theirs
/// (`pattern = product(J_a, K_b)`), assembled by the run; the loops walk row `i` of A and,
/// for each of its entries `j`, row `j` of B. `None` where the expression is not of that kind.
fn product(name: &str, expr: &str, out: &Access, rhs: &Term, tensors: &[(String, usize, Format)]) -> Option<String> {
    let format_of = |t: &str| format_of(tensors, t);
    if format_of(&out.tensor) != Format::Csr || out.indices.len() != 2 {
        return None;
    }
    let mut fs = Vec::new();
    factors(rhs, &mut fs)?;
    let acc: Vec<&Access> = fs.iter().filter_map(|f| if let Term::Access(a) = f { Some(a) } else { None }).collect();
    let [x, y] = acc[..] else { return None };
    let (i, k) = (&out.indices[0], &out.indices[1]);
    // A(i, j) and B(j, k), in either order, both csr, j summed over.
    let (a, b) = if x.indices[0] == *i { (x, y) } else { (y, x) };
    let j = a.indices.get(1)?;
    let shaped = a.indices[0] == *i && b.indices == [j.clone(), k.clone()] && j != i && j != k && a.tensor != b.tensor;
    if !shaped || format_of(&a.tensor) != Format::Csr || format_of(&b.tensor) != Format::Csr {
        return None;
    }
    let axis_of = |x: &str| axis_name(x, tensors);
    let (ai, aj, ak) = (axis_of(i), axis_of(j), axis_of(k));
    let (ha, hb, hc) = (a.tensor.to_lowercase(), b.tensor.to_lowercase(), out.tensor.to_lowercase());
    let mut params: Vec<String> = tensors.iter().map(|t| format!("{}: handle", t.0.to_lowercase())).collect();
    for h in [&ha, &hb, &hc] {
        params.push(format!("indptr_{h}: handle"));
        params.push(format!("indices_{h}: handle"));
    }
    params.extend([i, j, k].iter().map(|x| format!("n_{x}: i32")));
    params.extend([&ha, &hb, &hc].iter().map(|h| format!("nnz_{h}: i32")));
    let (ja, kb) = (format!("{aj}_{ha}"), format!("{ak}_{hb}"));
    let text = format!(
        "# {expr}\nfunc {name}({params}) {{\n  \
         axis {ai} = dense_fixed(n_{i})\n  \
         axis {ja} = sparse_variable({ai}, n_{j}, nnz_{ha}, indptr_{ha}, indices_{ha})\n  \
         axis {aj} = dense_fixed(n_{j})\n  \
         axis {kb} = sparse_variable({aj}, n_{k}, nnz_{hb}, indptr_{hb}, indices_{hb})\n  \
         axis {ak} = sparse_variable({ai}, n_{k}, nnz_{hc}, indptr_{hc}, indices_{hc}, pattern = product({ja}, {kb}))\n  \
         buffer {ta} = match_sparse_buffer({ha}, [{ai}, {ja}], f32)\n  \
         buffer {tb} = match_sparse_buffer({hb}, [{aj}, {kb}], f32)\n  \
         buffer {tc} = match_sparse_buffer({hc}, [{ai}, {ak}], f32)\n  \
         sp_iter {name}([{ai}, {ja}, attach({kb}, {ja})], \"SRS\") as [{i}, {j}, {k}] {{\n    \
         {tc}[{i}, {k}] = {tc}[{i}, {k}] + {}\n  }}\n}}\n",
        term_text(rhs, &|x: &Access| format!("{}[{}]", x.tensor, x.indices.join(", ")), 1),
        params = params.join(", "),
        ta = a.tensor,
        tb = b.tensor,
        tc = out.tensor,
    );
    Some(text)
}

/// Parses and verifies a generated program.
fn check(text: &str) -> R<Func> {
    let f = sparsec_ir::text::parse_func("einsum.sptir", text).map_err(|e: ParseError| EinsumError::Generated(format!("{e}\n{text}")))?;
    sparsec_ir::verify::verify_func(&f).map_err(|errs| {
        EinsumError::Generated(format!("{}\n{text}", errs.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; ")))
    })?;
    Ok(f)
}

/// [`program`], parsed and verified: the Stage-I function (the Rust entry point).
pub fn func(name: &str, expr: &str, formats: &[(String, Format)]) -> R<Func> {
    check(&program(name, expr, formats)?)
}
