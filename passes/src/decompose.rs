//! `decompose_format`: format decomposition (SparseTIR §3.2, `FormatRewriteRule`).
//!
//! A rule names a sparse buffer of the program (`A` over `[I, J]`), a Stage-I *format
//! function* declaring new axes and a new buffer for it (`A` over `[IO, JO, II, JI]` for
//! BSR), and two index maps between old and new coordinates. The pass imports the format's
//! declarations (renamed `<X>_<rule>`), adds a preprocess iteration per rewritten buffer
//! that copies the old buffer into the new one, and replaces every compute iteration that
//! reads a rewritten buffer by one zeroing iteration (the original `init`) followed by one
//! accumulating piece per rule, which iterates the new axes instead of the old ones.
//!
//! Index maps may read the format's buffers ([`IndexMap::parse_in`]); hyb's inverse map
//! `(io, jo) => (RowIndices[io], jo)` sends an ELL row back to its matrix row. Rules:
//! [`bsr_rule`], [`ell_rule`], [`padding_rule`], [`hyb_rules`], [`rcm_rule`] (csrmm) and
//! [`ell3d_rule`] (rgcn_hetero_forward).

use crate::build::{bin, Namer};
use sparsec_ir::expr::{BinOp, Expr};
use sparsec_ir::func::{
    AttrValue, Axis, AxisId, Buffer, BufferId, Func, Layout, Param, ParamKind, SpIter, SpIterAxis,
    Stmt, StmtKind, Storage, VarId,
};
use sparsec_ir::text::{parse_func, print_expr, print_func};
use sparsec_ir::verify::{verify_func, VerifyError};
use sparsec_ir::Stage;
use std::collections::HashMap;

/// Attribute that marks the preprocess iterations added by [`decompose_format`].
pub const PREPROCESS_ATTR: &str = "preprocess";

/// Why [`decompose_format`] or [`IndexMap::parse`] failed.
#[derive(Debug, thiserror::Error)]
pub enum DecomposeError {
    /// A rule rewrites a buffer that the function does not declare.
    #[error("rule `{rule}`: unknown buffer `{name}`")]
    UnknownBuffer {
        /// The rule.
        rule: String,
        /// The buffer name.
        name: String,
    },
    /// A rule names an axis that the function (or the rule's format) does not declare.
    #[error("rule `{rule}`: unknown axis `{name}`")]
    UnknownAxis {
        /// The rule.
        rule: String,
        /// The axis name.
        name: String,
    },
    /// A rewritten buffer is not laid out over exactly the rule's axes.
    #[error("rule `{rule}`: buffer `{buffer}` is not laid out over [{expected}]")]
    BufferAxes {
        /// The rule.
        rule: String,
        /// The buffer.
        buffer: String,
        /// The axes it should have, comma separated.
        expected: String,
    },
    /// The old axes do not appear contiguously, in order, in an iteration's axis list.
    #[error("rule `{rule}`: axes [{axes}] are not contiguous in the axis list of sp_iter `{sp_iter}`")]
    NotContiguous {
        /// The rule.
        rule: String,
        /// The iteration.
        sp_iter: String,
        /// The old axes, comma separated.
        axes: String,
    },
    /// An index map has the wrong number of parameters or results.
    #[error("rule `{rule}`: {map} has {found} {what}, expected {expected}")]
    ArityMismatch {
        /// The rule.
        rule: String,
        /// `idx_map` or `inv_idx_map`.
        map: &'static str,
        /// `parameters` or `results`.
        what: &'static str,
        /// The expected count.
        expected: usize,
        /// The count found.
        found: usize,
    },
    /// The rule's format function is unusable.
    #[error("rule `{rule}`: invalid format function: {message}")]
    InvalidFormat {
        /// The rule.
        rule: String,
        /// What is wrong.
        message: String,
    },
    /// An index map could not be parsed.
    #[error("invalid index map `{text}`: {message}")]
    InvalidMap {
        /// The text.
        text: String,
        /// What is wrong.
        message: String,
    },
    /// An imported name is already used by the function.
    #[error("rule `{rule}`: name `{name}` is already used")]
    NameClash {
        /// The rule.
        rule: String,
        /// The clashing name.
        name: String,
    },
    /// The program uses the rewritten buffer in a way the pass cannot rewrite.
    #[error("rule `{rule}`: {what} is not supported")]
    Unsupported {
        /// The rule.
        rule: String,
        /// What was met.
        what: String,
    },
    /// The input is not a Stage-I function.
    #[error("decompose_format expects a Stage I function, found Stage {0}")]
    WrongStage(Stage),
    /// The result does not verify: a bug in a rule or in the pass.
    #[error("decomposed function does not verify: {}", .0.first().map(|e| e.to_string()).unwrap_or_default())]
    InvalidOutput(Vec<VerifyError>),
}

/// An index map written as an IR lambda: `(i, j) => (i // 4, j // 4, i % 4, j % 4)`.
///
/// The parameters are `i32` variables; results are integer expressions over them.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexMap {
    /// Holds the parameter variables (as scalar parameters) for printing.
    func: Func,
    /// The parameters, in order.
    params: Vec<VarId>,
    /// The results, in order.
    results: Vec<Expr>,
}

/// Splits `s` at commas outside brackets.
fn split_top(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0i32);
    for c in s.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur).trim().to_string());
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() || !out.is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// Strips one pair of enclosing parentheses.
fn strip_parens(s: &str) -> Option<&str> {
    s.trim().strip_prefix('(')?.strip_suffix(')')
}

impl IndexMap {
    /// Parses `(p0, p1, ...) => (e0, e1, ...)`; the results are parsed by the `.sptir` parser.
    pub fn parse(text: &str) -> Result<IndexMap, DecomposeError> {
        Self::parse_with(text, None)
    }

    /// Parses a map whose results may read the buffers (and scalar parameters) declared by
    /// `scope`, a rule's format function: `(io, jo) => (RowIndices[io], jo)`.
    /// [`decompose_format`] remaps them, by name, to the imported declarations.
    pub fn parse_in(text: &str, scope: &Func) -> Result<IndexMap, DecomposeError> {
        Self::parse_with(text, Some(scope))
    }

    fn parse_with(text: &str, scope: Option<&Func>) -> Result<IndexMap, DecomposeError> {
        let err = |message: &str| DecomposeError::InvalidMap { text: text.to_string(), message: message.to_string() };
        let (lhs, rhs) = text.split_once("=>").ok_or_else(|| err("expected `(params) => (results)`"))?;
        let params = split_top(strip_parens(lhs).ok_or_else(|| err("parameters must be in parentheses"))?);
        let results = split_top(strip_parens(rhs).ok_or_else(|| err("results must be in parentheses"))?);
        if params.is_empty() || results.is_empty() {
            return Err(err("a map needs at least one parameter and one result"));
        }
        // The scope's parameters come first, then its declarations, then the results.
        let (mut header, mut decls) = (Vec::new(), String::new());
        if let Some(fmt) = scope {
            for p in &fmt.params {
                let ty = match p.kind {
                    ParamKind::Handle => "handle".to_string(),
                    ParamKind::Scalar(v) => fmt.vars[v].dtype.to_string(),
                };
                header.push(format!("{}: {ty}", p.name));
            }
            let printed = print_func(fmt);
            let inner = printed
                .split_once("{\n")
                .and_then(|(_, rest)| rest.trim_end().strip_suffix('}'))
                .ok_or_else(|| err("the scope does not print as a function"))?;
            decls = inner.to_string();
        }
        let offset = header.len();
        header.extend(params.iter().map(|p| format!("{p}: i32")));
        let mut src = format!("func map({}) {{\n{decls}", header.join(", "));
        for (k, r) in results.iter().enumerate() {
            src.push_str(&format!("  let __r{k} = {r}\n"));
        }
        src.push_str("}\n");
        let func = parse_func("index_map", &src).map_err(|e| err(&e.to_string()))?;
        let params = (offset..func.params.len())
            .map(|p| func.scalar_param_var(p).ok_or_else(|| err("bad parameter")))
            .collect::<Result<Vec<_>, _>>()?;
        let mut out = Vec::new();
        for s in &func.body {
            match &s.kind {
                StmtKind::Let { value, .. } => out.push(value.clone()),
                _ => return Err(err("unexpected statement")),
            }
        }
        for e in &out {
            if !func.expr_dtype(e).is_int() {
                return Err(err("results must be integers"));
            }
        }
        Ok(IndexMap { func, params, results: out })
    }

    /// Prints the map in the form [`IndexMap::parse`] reads.
    pub fn print(&self) -> String {
        let ps: Vec<&str> = self.params.iter().map(|v| self.func.vars[*v].name.as_str()).collect();
        let rs: Vec<String> = self.results.iter().map(|e| print_expr(&self.func, e)).collect();
        format!("({}) => ({})", ps.join(", "), rs.join(", "))
    }

    /// Number of parameters.
    pub fn arity(&self) -> usize {
        self.params.len()
    }

    /// Number of results.
    pub fn num_results(&self) -> usize {
        self.results.len()
    }

    /// The results with parameter `k` replaced by `args[k]` (missing arguments stay as is).
    pub fn apply(&self, args: Vec<Expr>) -> Vec<Expr> {
        let map: HashMap<VarId, Expr> = self.params.iter().copied().zip(args).collect();
        self.results
            .iter()
            .map(|e| {
                e.clone().map(&mut |x| match x {
                    Expr::Var(v) => map.get(&v).cloned().unwrap_or(Expr::Var(v)),
                    x => x,
                })
            })
            .collect()
    }
}

/// An [`IndexMap`] whose buffers and scalar parameters are remapped into the output function.
struct Mapped {
    map: IndexMap,
    /// Map-function buffer → output buffer.
    bufs: HashMap<BufferId, BufferId>,
    /// Map-function variable (a format scalar parameter) → output expression.
    vars: HashMap<VarId, Expr>,
}

impl Mapped {
    /// Resolves the buffers and variables that `map` reads (other than its parameters) by
    /// name in `fmt`, then through the import tables `bmap` / `vmap`.
    fn new(
        rule: &str,
        what: &str,
        map: &IndexMap,
        fmt: &Func,
        bmap: &HashMap<BufferId, BufferId>,
        vmap: &HashMap<VarId, Expr>,
    ) -> Result<Mapped, DecomposeError> {
        let err = |message: String| DecomposeError::InvalidMap { text: map.print(), message: format!("{what} of rule `{rule}`: {message}") };
        let (mut bufs, mut vars) = (HashMap::new(), HashMap::new());
        let mut missing = None;
        for e in &map.results {
            e.walk(&mut |x| match x {
                Expr::Load(b, _) | Expr::AtomicAdd(b, _, _) => {
                    let name = &map.func.buffers[*b].name;
                    match fmt.buffer_by_name(name).and_then(|fb| bmap.get(&fb)) {
                        Some(&gb) => {
                            bufs.insert(*b, gb);
                        }
                        None => missing = Some(format!("buffer `{name}` is not declared by the rule's format")),
                    }
                }
                Expr::Var(v) if !map.params.contains(v) => {
                    let name = &map.func.vars[*v].name;
                    match fmt.var_by_name(name).and_then(|fv| vmap.get(&fv)) {
                        Some(ge) => {
                            vars.insert(*v, ge.clone());
                        }
                        None => missing = Some(format!("variable `{name}` is not a parameter of the rule's format")),
                    }
                }
                _ => {}
            });
        }
        if let Some(m) = missing {
            return Err(err(m));
        }
        Ok(Mapped { map: map.clone(), bufs, vars })
    }

    /// The results with parameter `k` replaced by `args[k]`, in the output function.
    fn apply(&self, args: Vec<Expr>) -> Vec<Expr> {
        let params: HashMap<VarId, Expr> = self.map.params.iter().copied().zip(args).collect();
        // Bottom-up: substituted arguments are not visited again.
        self.map
            .results
            .iter()
            .map(|e| {
                e.clone().map(&mut |x| match x {
                    Expr::Var(v) => params.get(&v).or_else(|| self.vars.get(&v)).cloned().unwrap_or(Expr::Var(v)),
                    Expr::Load(b, idx) => Expr::Load(self.bufs.get(&b).copied().unwrap_or(b), idx),
                    x => x,
                })
            })
            .collect()
    }
}

/// A format rewrite rule: how one buffer is stored in a new format.
#[derive(Clone, Debug)]
pub struct FormatRewriteRule {
    /// Name, used as the suffix of imported names (`bsr_4`).
    pub name: String,
    /// Stage-I function declaring the new axes and, for each rewritten buffer, a buffer of
    /// the same name over `axes_after`.
    pub format: Func,
    /// Buffers rewritten, e.g. `["A"]`.
    pub buffers: Vec<String>,
    /// Old axes (names in the program), e.g. `["I", "J"]`.
    pub axes_before: Vec<String>,
    /// New axes (names in `format`), e.g. `["IO", "JO", "II", "JI"]`.
    pub axes_after: Vec<String>,
    /// Which new axes each old axis becomes; they inherit its `S`/`R` kind.
    pub axis_map: Vec<(String, Vec<String>)>,
    /// Old coordinates → new coordinates, used for accesses to a rewritten buffer at
    /// coordinates other than the iteration's own iterators. `None` where old coordinates do
    /// not determine new ones (hyb: a long row is split over several ELL rows); such
    /// accesses are then [`DecomposeError::Unsupported`].
    pub idx_map: Option<IndexMap>,
    /// New coordinates → old coordinates. It may read the format's buffers (parsed with
    /// [`IndexMap::parse_in`]): `(io, jo) => (RowIndices[io], jo)`.
    pub inv_idx_map: IndexMap,
    /// Scalar parameters of `format` that are lengths of old axes (`("m", "I")`): they are
    /// not imported, the program's length stands for them, so a coordinate of a new axis of
    /// that length needs no bounds guard (`rcm_rule`: a permutation of `I`'s rows).
    pub lengths: Vec<(String, String)>,
}

/// Builds a rule for buffer `A`; both maps are parsed in the scope of the format.
fn ready_rule(
    name: String,
    src: &str,
    axes_before: &[&str],
    axes_after: &[&str],
    axis_map: &[(&str, &[&str])],
    idx: Option<&str>,
    inv: &str,
) -> Result<FormatRewriteRule, DecomposeError> {
    let format = parse_func(&name, src)
        .map_err(|e| DecomposeError::InvalidFormat { rule: name.clone(), message: e.to_string() })?;
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Ok(FormatRewriteRule {
        buffers: vec!["A".into()],
        axes_before: strings(axes_before),
        axes_after: strings(axes_after),
        axis_map: axis_map.iter().map(|(o, n)| (o.to_string(), strings(n))).collect(),
        idx_map: idx.map(|t| IndexMap::parse_in(t, &format)).transpose()?,
        inv_idx_map: IndexMap::parse_in(inv, &format)?,
        format,
        name,
        lengths: Vec::new(),
    })
}

/// BSR with `b × b` blocks for a csrmm-style `A[I, J]`: parameters `a, indptr, indices`
/// (block rows) and `nb, mb, nnzb`; `(i, j) => (i // b, j // b, i % b, j % b)`.
pub fn bsr_rule(b: i64) -> Result<FormatRewriteRule, DecomposeError> {
    let src = format!(
        "func bsr_{b}(a: handle, indptr: handle, indices: handle, nb: i32, mb: i32, nnzb: i32) {{\n  \
         axis IO = dense_fixed(nb)\n  axis JO = sparse_variable(IO, mb, nnzb, indptr, indices)\n  \
         axis II = dense_fixed({b})\n  axis JI = dense_fixed({b})\n  \
         buffer A = match_sparse_buffer(a, [IO, JO, II, JI], f32)\n}}\n"
    );
    ready_rule(
        format!("bsr_{b}"),
        &src,
        &["I", "J"],
        &["IO", "JO", "II", "JI"],
        &[("I", &["IO", "II"]), ("J", &["JO", "JI"])],
        Some(&format!("(i, j) => (i // {b}, j // {b}, i % {b}, j % {b})")),
        &format!("(io, jo, ii, ji) => (io * {b} + ii, jo * {b} + ji)"),
    )
}

/// ELL with `k` slots per row for a csrmm-style `A[I, J]`: parameters `a, indices, m, n`;
/// identity maps. Padding slots must hold a column `>= ` the program's `n` (bind the
/// format's `n` one larger): they are skipped by the guards.
pub fn ell_rule(k: i64) -> Result<FormatRewriteRule, DecomposeError> {
    let src = format!(
        "func ell_{k}(a: handle, indices: handle, m: i32, n: i32) {{\n  \
         axis IO = dense_fixed(m)\n  axis JO = sparse_fixed(IO, n, {k}, indices)\n  \
         buffer A = match_sparse_buffer(a, [IO, JO], f32)\n}}\n"
    );
    identity_rule(format!("ell_{k}"), &src)
}

/// Rows padded to multiples of `k` (as `compose::pad_rows_to_multiple`) for a csrmm-style
/// `A[I, J]`: parameters `a, indptr, indices, m, n, nnz`; identity maps. As for
/// [`ell_rule`], padding entries must hold a column `>=` the program's `n`.
pub fn padding_rule(k: i64) -> Result<FormatRewriteRule, DecomposeError> {
    let src = format!(
        "func padding_{k}(a: handle, indptr: handle, indices: handle, m: i32, n: i32, nnz: i32) {{\n  \
         axis IO = dense_fixed(m)\n  axis JO = sparse_variable(IO, n, nnz, indptr, indices)\n  \
         buffer A = match_sparse_buffer(a, [IO, JO], f32)\n}}\n"
    );
    identity_rule(format!("padding_{k}"), &src)
}

fn identity_rule(name: String, src: &str) -> Result<FormatRewriteRule, DecomposeError> {
    ready_rule(
        name,
        src,
        &["I", "J"],
        &["IO", "JO"],
        &[("I", &["IO"]), ("J", &["JO"])],
        Some("(i, j) => (i, j)"),
        "(io, jo) => (io, jo)",
    )
}

/// The rules of SparseTIR's `column_part_hyb` format for a csrmm-style `A[I, J]`: one
/// ELL-like rule per (column part `p`, bucket `b`), named `hyb_<p>_<b>`, of width
/// `bucket_widths[b]`, e.g. `hyb_rules(1, &[1, 2, 4, 8])` for `compose::Hyb` with
/// `bucket_log = 3`.
///
/// Each format has parameters `a, row_indices, indices, rows, n`: `IO = dense_fixed(rows)`
/// enumerates the bucket's ELL rows, `JO = sparse_fixed(IO, n, width, indices)` holds global
/// column coordinates, `RowIndices = match_sparse_buffer(row_indices, [IO], i32)` the matrix
/// row of each ELL row (a long row is split over several ELL rows of the widest bucket, so
/// the pieces accumulate). The inverse map is `(io, jo) => (RowIndices[io], jo)`; there is
/// no `idx_map` (a matrix row may have several ELL rows).
///
/// **Padding.** A padding slot must hold column `n` (one past the program's last column)
/// and the format's `n` must be bound to at least `n + 1` (and at least the width); the
/// guard `jo < n` that the pass adds for the column coordinate then skips padding slots,
/// both when copying and when computing. (Padding that repeats a real column, as
/// `compose::Hyb` stores it, would copy and add that entry twice under coordinate reads.)
pub fn hyb_rules(num_col_parts: usize, bucket_widths: &[i64]) -> Result<Vec<FormatRewriteRule>, DecomposeError> {
    let bad = |message: String| DecomposeError::InvalidFormat { rule: "hyb".into(), message };
    if num_col_parts == 0 {
        return Err(bad("num_col_parts must be positive".into()));
    }
    if bucket_widths.is_empty() {
        return Err(bad("at least one bucket width is needed".into()));
    }
    if let Some(w) = bucket_widths.iter().find(|&&w| w <= 0 || w > i64::from(i32::MAX)) {
        return Err(bad(format!("bucket width {w} is not a positive i32")));
    }
    let mut rules = Vec::new();
    for p in 0..num_col_parts {
        for (b, w) in bucket_widths.iter().enumerate() {
            let name = format!("hyb_{p}_{b}");
            let src = format!(
                "func {name}(a: handle, row_indices: handle, indices: handle, rows: i32, n: i32) {{\n  \
                 axis IO = dense_fixed(rows)\n  axis JO = sparse_fixed(IO, n, {w}, indices)\n  \
                 buffer A = match_sparse_buffer(a, [IO, JO], f32)\n  \
                 buffer RowIndices = match_sparse_buffer(row_indices, [IO], i32)\n}}\n"
            );
            rules.push(ready_rule(
                name,
                &src,
                &["I", "J"],
                &["IO", "JO"],
                &[("I", &["IO"]), ("J", &["JO"])],
                None,
                "(io, jo) => (RowIndices[io], jo)",
            )?);
        }
    }
    Ok(rules)
}

/// Row segments (`formats::compose::RowSegments`) for a csrmm-style `A[I, J]`, named
/// `row_segments`: parameters `a, seg_ptr, seg_row, indices, nseg, n, nnz`;
/// `IO = dense_fixed(nseg)` enumerates the segments, `JO = sparse_variable(IO, n, nnz,
/// seg_ptr, indices)` holds each segment's entries (the CSR's column indices, in their order),
/// `RowIndices = match_sparse_buffer(seg_row, [IO], i32)` the row of each segment. Segments of
/// one row accumulate into it, so, as for hyb, there is no `idx_map`; the inverse map is
/// `(io, jo) => (RowIndices[io], jo)`. The GPU default then sums a segment in registers and
/// adds it once per feature (docs/gpu-estimate.md, "Row segments").
pub fn row_segments_rule() -> Result<FormatRewriteRule, DecomposeError> {
    let src = "func row_segments(a: handle, seg_ptr: handle, seg_row: handle, indices: handle, nseg: i32, n: i32, nnz: i32) {\n  \
               axis IO = dense_fixed(nseg)\n  axis JO = sparse_variable(IO, n, nnz, seg_ptr, indices)\n  \
               buffer A = match_sparse_buffer(a, [IO, JO], f32)\n  \
               buffer RowIndices = match_sparse_buffer(seg_row, [IO], i32)\n}\n";
    ready_rule(
        "row_segments".into(),
        src,
        &["I", "J"],
        &["IO", "JO"],
        &[("I", &["IO"]), ("J", &["JO"])],
        None,
        "(io, jo) => (RowIndices[io], jo)",
    )
}

/// CSR with its rows stored in another order (`formats::compose::ReorderedRows`, reverse
/// Cuthill–McKee) for a csrmm-style `A[I, J]`, named `rcm`: parameters `a, rows, indptr,
/// indices, nnz` (`m` and `n` stand for the program's lengths of `I` and `J`, so nothing is
/// guarded); `IO = sparse_fixed(m, m, rows, sorted = false)` lists every row once, in the new
/// order (a root sparse axis: its coordinate is the matrix row, so a row stays one spatial
/// point and the piece keeps the program's init), `JO = sparse_variable(IO, n, nnz, indptr,
/// indices)`; the inverse map is the identity on coordinates. There is no forward map: a
/// coordinate has no position in an unsorted axis without a search.
pub fn rcm_rule() -> Result<FormatRewriteRule, DecomposeError> {
    let src = "func rcm(a: handle, rows: handle, indptr: handle, indices: handle, m: i32, n: i32, nnz: i32) {\n  \
               axis IO = sparse_fixed(m, m, rows, sorted = false)\n  \
               axis JO = sparse_variable(IO, n, nnz, indptr, indices)\n  \
               buffer A = match_sparse_buffer(a, [IO, JO], f32)\n}\n";
    let mut rule = ready_rule("rcm".into(), src, &["I", "J"], &["IO", "JO"], &[("I", &["IO"]), ("J", &["JO"])], None, "(io, jo) => (io, jo)")?;
    rule.lengths = vec![("m".into(), "I".into()), ("n".into(), "J".into())];
    Ok(rule)
}

/// ELL3D with `k` slots per (relation, row) for rgcn_hetero_forward's `A[R, I, J]`, named
/// `ell3d_<k>`: parameters `a, indptr_i, indices_i, indices_j, num_rels, m, n, nnz_i`;
/// `RO = dense_fixed(num_rels)`, `IO = sparse_variable(RO, m, nnz_i, indptr_i, indices_i)`
/// (each relation's rows, as the program's `I`), `JO = sparse_fixed(IO, n, k, indices_j)`;
/// identity maps. Rows longer than `k` cannot be stored. As for [`ell_rule`], padding slots
/// must hold column `n` with the format's `n` bound to at least `n + 1` (and `k`).
pub fn ell3d_rule(k: i64) -> Result<FormatRewriteRule, DecomposeError> {
    let src = format!(
        "func ell3d_{k}(a: handle, indptr_i: handle, indices_i: handle, indices_j: handle, num_rels: i32, m: i32, n: i32, nnz_i: i32) {{\n  \
         axis RO = dense_fixed(num_rels)\n  axis IO = sparse_variable(RO, m, nnz_i, indptr_i, indices_i)\n  \
         axis JO = sparse_fixed(IO, n, {k}, indices_j)\n  \
         buffer A = match_sparse_buffer(a, [RO, IO, JO], f32)\n}}\n"
    );
    ready_rule(
        format!("ell3d_{k}"),
        &src,
        &["R", "I", "J"],
        &["RO", "IO", "JO"],
        &[("R", &["RO"]), ("I", &["IO"]), ("J", &["JO"])],
        Some("(r, i, j) => (r, i, j)"),
        "(ro, io, jo) => (ro, io, jo)",
    )
}

/// What a checked rule resolves to in the output function.
struct Resolved {
    name: String,
    /// (old buffer, new buffer) pairs.
    buffers: Vec<(BufferId, BufferId)>,
    before: Vec<AxisId>,
    after: Vec<AxisId>,
    /// For each new axis, the index of the old axis it comes from.
    origin: Vec<usize>,
    idx_map: Option<Mapped>,
    inv_idx_map: Mapped,
}

/// Rewrites the buffers named by `rules` into their new formats (see the module docs).
pub fn decompose_format(f: &Func, rules: &[FormatRewriteRule]) -> Result<Func, DecomposeError> {
    if f.stage != Stage::I {
        return Err(DecomposeError::WrongStage(f.stage));
    }
    let mut g = f.clone();
    let mut resolved = Vec::new();
    for rule in rules {
        resolved.push(import_rule(&mut g, f, rule)?);
    }
    let mut namer = Namer::for_func(&g);
    let mut pre = Vec::new();
    for r in &resolved {
        for &(old, new) in &r.buffers {
            pre.push(preprocess(&mut g, &mut namer, r, old, new));
        }
    }
    let mut body = pre;
    for s in f.body.clone() {
        match &s.kind {
            StmtKind::SpIter(it) => {
                let used: Vec<&Resolved> = resolved.iter().filter(|r| reads_any(&s, r)).collect();
                if used.is_empty() {
                    body.push(s);
                    continue;
                }
                // One piece that visits every spatial point once keeps the init (no zeroing
                // pass over the output, and a register tile can start from its constant).
                if let ([r], Some(init)) = (&used[..], &it.init) {
                    if visits_each_point_once(&g, it, r)? {
                        body.push(piece(&mut g, &mut namer, it, r, Some(init))?);
                        continue;
                    }
                }
                if let Some(init) = &it.init {
                    body.push(zeroing(&mut g, it, init, used[0])?);
                }
                for r in used {
                    body.push(piece(&mut g, &mut namer, it, r, None)?);
                }
            }
            _ => body.push(s),
        }
    }
    g.body = body;
    verify_func(&g).map_err(DecomposeError::InvalidOutput)?;
    Ok(g)
}

/// Whether `s` reads one of the rule's old buffers.
fn reads_any(s: &Stmt, r: &Resolved) -> bool {
    let mut found = false;
    sparsec_ir::walk_stmts(std::slice::from_ref(s), &mut |st| {
        for e in st.kind.exprs() {
            e.walk(&mut |x| {
                if let Expr::Load(b, _) | Expr::AtomicAdd(b, _, _) = x {
                    found |= r.buffers.iter().any(|(o, _)| o == b);
                }
            });
        }
        if let StmtKind::Store { buffer, .. } = &st.kind {
            found |= r.buffers.iter().any(|(o, _)| o == buffer);
        }
    });
    found
}

/// Checks `rule` against `f` and imports its format's declarations into `g`.
fn import_rule(g: &mut Func, f: &Func, rule: &FormatRewriteRule) -> Result<Resolved, DecomposeError> {
    let rn = rule.name.clone();
    let fmt = &rule.format;
    verify_func(fmt).map_err(|errs| DecomposeError::InvalidFormat {
        rule: rn.clone(),
        message: errs.first().map(|e| e.to_string()).unwrap_or_default(),
    })?;
    if fmt.stage != Stage::I || !fmt.body.is_empty() {
        let message = "must be a Stage I function with declarations only".to_string();
        return Err(DecomposeError::InvalidFormat { rule: rn, message });
    }
    let unknown_axis = |name: &str| DecomposeError::UnknownAxis { rule: rn.clone(), name: name.to_string() };
    let before = rule
        .axes_before
        .iter()
        .map(|n| f.axis_by_name(n).ok_or_else(|| unknown_axis(n)))
        .collect::<Result<Vec<_>, _>>()?;
    let after_fmt = rule
        .axes_after
        .iter()
        .map(|n| fmt.axis_by_name(n).ok_or_else(|| unknown_axis(n)))
        .collect::<Result<Vec<_>, _>>()?;
    // axis_map: every new axis comes from exactly one old axis.
    let mut origin = vec![usize::MAX; after_fmt.len()];
    for (old, news) in &rule.axis_map {
        let o = rule.axes_before.iter().position(|n| n == old).ok_or_else(|| unknown_axis(old))?;
        for n in news {
            let p = rule.axes_after.iter().position(|x| x == n).ok_or_else(|| unknown_axis(n))?;
            origin[p] = o;
        }
    }
    if let Some(p) = origin.iter().position(|&o| o == usize::MAX) {
        return Err(DecomposeError::InvalidFormat {
            rule: rn,
            message: format!("axis_map does not map any old axis to `{}`", rule.axes_after[p]),
        });
    }
    let arity = |map: &'static str, what: &'static str, expected: usize, found: usize| {
        if expected == found {
            Ok(())
        } else {
            Err(DecomposeError::ArityMismatch { rule: rn.clone(), map, what, expected, found })
        }
    };
    if let Some(m) = &rule.idx_map {
        arity("idx_map", "parameters", before.len(), m.arity())?;
        arity("idx_map", "results", after_fmt.len(), m.num_results())?;
    }
    arity("inv_idx_map", "parameters", after_fmt.len(), rule.inv_idx_map.arity())?;
    arity("inv_idx_map", "results", before.len(), rule.inv_idx_map.num_results())?;

    let mut old_bufs = Vec::new();
    for b in &rule.buffers {
        let ob = f.buffer_by_name(b).ok_or_else(|| DecomposeError::UnknownBuffer { rule: rn.clone(), name: b.clone() })?;
        let names = |l: &[String]| l.join(", ");
        if f.buffers[ob].axes() != before.as_slice() {
            return Err(DecomposeError::BufferAxes { rule: rn, buffer: b.clone(), expected: names(&rule.axes_before) });
        }
        let fb = fmt.buffer_by_name(b).ok_or_else(|| DecomposeError::InvalidFormat {
            rule: rn.clone(),
            message: format!("no buffer `{b}` declared"),
        })?;
        if fmt.buffers[fb].axes() != after_fmt.as_slice() {
            return Err(DecomposeError::BufferAxes { rule: rn, buffer: b.clone(), expected: names(&rule.axes_after) });
        }
        old_bufs.push((ob, fb));
    }

    // Import: names get the `_<rule>` suffix.
    let clash = |g: &Func, n: &str| {
        g.param_index(n).is_some() || g.axis_by_name(n).is_some() || g.buffer_by_name(n).is_some() || g.var_by_name(n).is_some()
    };
    let mut pmap = HashMap::new();
    let mut vmap: HashMap<VarId, Expr> = HashMap::new();
    for (param, axis) in &rule.lengths {
        let v = fmt.var_by_name(param).filter(|v| fmt.params.iter().any(|p| p.kind == ParamKind::Scalar(*v)));
        let v = v.ok_or_else(|| DecomposeError::InvalidFormat { rule: rn.clone(), message: format!("`{param}` is not a scalar parameter") })?;
        let a = before
            .iter()
            .zip(&rule.axes_before)
            .find(|(_, n)| *n == axis)
            .map(|(a, _)| *a)
            .ok_or_else(|| unknown_axis(axis))?;
        vmap.insert(v, f.axes[a].length.clone());
    }
    for (pi, p) in fmt.params.iter().enumerate() {
        if matches!(p.kind, ParamKind::Scalar(v) if vmap.contains_key(&v)) {
            continue;
        }
        let name = format!("{}_{}", p.name, rn);
        if clash(g, &name) {
            return Err(DecomposeError::NameClash { rule: rn, name });
        }
        let kind = match p.kind {
            ParamKind::Handle => ParamKind::Handle,
            ParamKind::Scalar(v) => {
                let nv = g.add_var(name.clone(), fmt.vars[v].dtype);
                vmap.insert(v, Expr::Var(nv));
                ParamKind::Scalar(nv)
            }
        };
        pmap.insert(pi, g.params.len());
        g.params.push(Param { name, kind, span: p.span });
    }
    let sub = |e: &Expr| e.clone().substitute(&vmap);
    let mut amap = HashMap::new();
    for (h, a) in fmt.axes.iter() {
        let name = format!("{}_{}", a.name, rn);
        if clash(g, &name) {
            return Err(DecomposeError::NameClash { rule: rn, name });
        }
        let na = Axis {
            name,
            kind: a.kind,
            parent: a.parent.and_then(|p| amap.get(&p).copied()),
            length: sub(&a.length),
            nnz: a.nnz.as_ref().map(sub),
            indptr: a.indptr.and_then(|p| pmap.get(&p).copied()),
            indices: a.indices.and_then(|p| pmap.get(&p).copied()),
            idtype: a.idtype,
            sorted: a.sorted,
            unique: a.unique,
            pattern: a.pattern.as_ref().map(|pt| sparsec_ir::AxisPattern {
                op: pt.op,
                members: pt.members.iter().filter_map(|m| amap.get(m).copied()).collect(),
            }),
            span: a.span,
        };
        amap.insert(h, g.axes.append(na));
    }
    let mut bmap = HashMap::new();
    for (h, b) in fmt.buffers.iter() {
        let name = format!("{}_{}", b.name, rn);
        if clash(g, &name) {
            return Err(DecomposeError::NameClash { rule: rn, name });
        }
        let layout = match &b.layout {
            Layout::Sparse(ax) => Layout::Sparse(ax.iter().filter_map(|a| amap.get(a).copied()).collect()),
            Layout::Dense(sh) => Layout::Dense(sh.iter().map(sub).collect()),
        };
        let storage = match b.storage {
            Storage::Param(p) => Storage::Param(pmap.get(&p).copied().unwrap_or(p)),
            s => s,
        };
        let nb = Buffer {
            name,
            dtype: b.dtype,
            layout,
            storage,
            extra_storage: b.extra_storage.as_ref().map(sub),
            default: b.default.as_ref().map(sub),
            modes: b.modes.clone(),
            span: b.span,
        };
        bmap.insert(h, g.buffers.append(nb));
    }
    Ok(Resolved {
        buffers: old_bufs.into_iter().filter_map(|(o, fb)| Some((o, *bmap.get(&fb)?))).collect(),
        after: after_fmt.iter().filter_map(|a| amap.get(a).copied()).collect(),
        before,
        origin,
        idx_map: match &rule.idx_map {
            Some(m) => Some(Mapped::new(&rn, "idx_map", m, fmt, &bmap, &vmap)?),
            None => None,
        },
        inv_idx_map: Mapped::new(&rn, "inv_idx_map", &rule.inv_idx_map, fmt, &bmap, &vmap)?,
        name: rn,
    })
}

/// Lowercase base name of an iterator over axis `name` of rule `rule` (`IO_bsr_4` → `io`).
fn iter_base(name: &str, rule: &str) -> String {
    name.strip_suffix(&format!("_{rule}")).unwrap_or(name).to_lowercase()
}

/// Fresh iterator variables over the rule's new axes.
fn new_iters(g: &mut Func, namer: &mut Namer, r: &Resolved) -> Vec<VarId> {
    r.after
        .iter()
        .map(|&a| {
            let base = iter_base(&g.axes[a].name, &r.name);
            let name = namer.var(&base);
            let d = g.axes[a].idtype;
            g.add_var(name, d)
        })
        .collect()
}

/// The new iterators of spatial origin whose values the inverse-mapped original coordinates
/// `inv` tell apart, whatever the reduction iterators are (see [`sparsec_ir::injective`]):
/// the outermost iterator found not determined becomes a reduction, which may let others be
/// determined (`GroupRows[go] * 4 + bi` determines `bi` once `go` varies), and so on.
fn told_apart(g: &Func, r: &Resolved, inv: &[Expr], iters: &[VarId], spatial: &[bool]) -> Vec<VarId> {
    use sparsec_ir::injective::{determined_by_indices, Role};
    let mut reduce: Vec<bool> = spatial.iter().map(|s| !s).collect();
    loop {
        let role = |v: VarId| match iters.iter().position(|x| *x == v) {
            Some(p) if reduce[p] => Role::Varying,
            Some(p) => Role::Free(Some(g.axes[r.after[p]].length.clone())),
            None => Role::Fixed,
        };
        let known = determined_by_indices(inv, &role);
        // One at a time, outermost first: the outer iterator's lookup may be what hid the others.
        match (0..iters.len()).find(|&p| !reduce[p] && !known.contains(&iters[p])) {
            Some(p) => reduce[p] = true,
            None => return known,
        }
    }
}

/// `inv < len(old axis)` for each inverse-mapped coordinate that is not plainly an
/// iterator over a new axis of the same length; `None` when nothing needs a guard.
fn guard(g: &Func, r: &Resolved, inv: &[Expr], iters: &[VarId]) -> Option<Expr> {
    let mut cond: Option<Expr> = None;
    for (k, e) in inv.iter().enumerate() {
        let old = &g.axes[r.before[k]];
        let same = match e {
            Expr::Var(v) => iters.iter().position(|x| x == v).is_some_and(|p| g.axes[r.after[p]].length == old.length),
            _ => false,
        };
        if same {
            continue;
        }
        let c = bin(g, BinOp::Lt, e.clone(), old.length.clone());
        cond = Some(match cond {
            None => c,
            Some(prev) => Expr::binary(BinOp::And, prev, c),
        });
    }
    cond
}

fn wrap(cond: Option<Expr>, body: Vec<Stmt>) -> Vec<Stmt> {
    match cond {
        None => body,
        Some(cond) => vec![Stmt::new(StmtKind::If { cond, then_body: body, else_body: vec![] })],
    }
}

/// `rewrite_<buf>_<rule>`: copies the old buffer into the new one.
fn preprocess(g: &mut Func, namer: &mut Namer, r: &Resolved, old: BufferId, new: BufferId) -> Stmt {
    namer.push();
    let iters = new_iters(g, namer, r);
    namer.pop();
    let vars: Vec<Expr> = iters.iter().map(|v| Expr::Var(*v)).collect();
    let inv = r.inv_idx_map.apply(vars.clone());
    let copy = Stmt::new(StmtKind::Store { buffer: new, indices: vars, value: Expr::Load(old, inv.clone()) });
    let body = wrap(guard(g, r, &inv, &iters), vec![copy]);
    let mut attrs = sparsec_ir::Attrs::new();
    attrs.insert(PREPROCESS_ATTR.to_string(), AttrValue::Bool(true));
    Stmt::new(StmtKind::SpIter(SpIter {
        name: format!("rewrite_{}_{}", g.buffers[old].name, r.name),
        axes: r.after.iter().map(|&a| SpIterAxis::Axis(a)).collect(),
        kinds: "S".repeat(r.after.len()),
        vars: iters,
        init: None,
        body,
        attrs,
    }))
}

/// Copies statements, substituting variables and rewriting accesses to old buffers.
struct Copier<'r> {
    vars: HashMap<VarId, Expr>,
    /// Old buffer → (new buffer, old iterators, new iterators) for a piece.
    rule: Option<(&'r Resolved, Vec<VarId>, Vec<VarId>)>,
}

impl Copier<'_> {
    fn err(&self, what: &str) -> DecomposeError {
        let rule = self.rule.as_ref().map_or_else(String::new, |(r, _, _)| r.name.clone());
        DecomposeError::Unsupported { rule, what: what.to_string() }
    }

    fn new_buf(&self, b: BufferId) -> Option<BufferId> {
        let (r, _, _) = self.rule.as_ref()?;
        r.buffers.iter().find(|(o, _)| *o == b).map(|(_, n)| *n)
    }

    fn expr(&self, e: &Expr) -> Result<Expr, DecomposeError> {
        let rec = |x: &Expr| self.expr(x);
        let all = |xs: &[Expr]| xs.iter().map(rec).collect::<Result<Vec<_>, _>>();
        Ok(match e {
            Expr::Load(b, idx) => match (self.new_buf(*b), &self.rule) {
                (Some(nb), Some((r, old_it, new_it))) => {
                    let direct = idx.len() == old_it.len()
                        && idx.iter().zip(old_it).all(|(x, v)| matches!(x, Expr::Var(y) if y == v));
                    if direct {
                        Expr::Load(nb, new_it.iter().map(|v| Expr::Var(*v)).collect())
                    } else {
                        let m = r.idx_map.as_ref().ok_or_else(|| {
                            self.err("an access to a rewritten buffer at other coordinates than the iterators (the rule has no idx_map)")
                        })?;
                        Expr::Load(nb, m.apply(all(idx)?))
                    }
                }
                _ => Expr::Load(*b, all(idx)?),
            },
            Expr::AtomicAdd(b, idx, v) => {
                if self.new_buf(*b).is_some() {
                    return Err(self.err("an atomic_add to a rewritten buffer"));
                }
                Expr::AtomicAdd(*b, all(idx)?, Box::new(rec(v)?))
            }
            Expr::Var(v) => self.vars.get(v).cloned().unwrap_or(Expr::Var(*v)),
            Expr::Int(..) | Expr::Float(..) | Expr::Bool(_) => e.clone(),
            Expr::Binary(op, a, b) => Expr::Binary(*op, Box::new(rec(a)?), Box::new(rec(b)?)),
            Expr::Unary(op, a) => Expr::Unary(*op, Box::new(rec(a)?)),
            Expr::Cast(d, a) => Expr::Cast(*d, Box::new(rec(a)?)),
            Expr::Select(c, a, b) => Expr::Select(Box::new(rec(c)?), Box::new(rec(a)?), Box::new(rec(b)?)),
            Expr::Call(i, args) => Expr::Call(*i, all(args)?),
        })
    }

    /// A fresh copy of binder `v` (every variable is bound once).
    fn rebind(&mut self, g: &mut Func, v: VarId) -> VarId {
        let var = g.vars[v].clone();
        let nv = g.add_var(var.name, var.dtype);
        self.vars.insert(v, Expr::Var(nv));
        nv
    }

    fn stmts(&mut self, g: &mut Func, ss: &[Stmt]) -> Result<Vec<Stmt>, DecomposeError> {
        ss.iter().map(|s| self.stmt(g, s)).collect()
    }

    fn stmt(&mut self, g: &mut Func, s: &Stmt) -> Result<Stmt, DecomposeError> {
        let kind = match &s.kind {
            StmtKind::Store { buffer, indices, value } => {
                if self.new_buf(*buffer).is_some() {
                    return Err(self.err("a store to a rewritten buffer"));
                }
                let indices = indices.iter().map(|x| self.expr(x)).collect::<Result<Vec<_>, _>>()?;
                StmtKind::Store { buffer: *buffer, indices, value: self.expr(value)? }
            }
            StmtKind::Let { var, value } => {
                let value = self.expr(value)?;
                StmtKind::Let { var: self.rebind(g, *var), value }
            }
            StmtKind::If { cond, then_body, else_body } => StmtKind::If {
                cond: self.expr(cond)?,
                then_body: self.stmts(g, then_body)?,
                else_body: self.stmts(g, else_body)?,
            },
            StmtKind::While { cond, body } => StmtKind::While { cond: self.expr(cond)?, body: self.stmts(g, body)? },
            StmtKind::Evaluate(e) => StmtKind::Evaluate(self.expr(e)?),
            StmtKind::SpIter(it) => {
                if let Some((r, _, _)) = &self.rule {
                    if it.axes.iter().flat_map(|a| a.members()).any(|a| r.before.contains(&a)) {
                        return Err(self.err("a nested sp_iter over a decomposed axis"));
                    }
                }
                let vars = it.vars.iter().map(|v| self.rebind(g, *v)).collect();
                let init = match &it.init {
                    Some(i) => Some(self.stmts(g, i)?),
                    None => None,
                };
                StmtKind::SpIter(SpIter { vars, init, body: self.stmts(g, &it.body)?, ..it.clone() })
            }
            StmtKind::Alloc(_) => return Err(self.err("an allocation inside a decomposed sp_iter")),
            StmtKind::For(_) | StmtKind::Block(_) => return Err(self.err("a loop or block at Stage I")),
        };
        Ok(Stmt { kind, span: s.span })
    }
}

/// The original `init`, once, over the spatial iterators of `it`.
fn zeroing(g: &mut Func, it: &SpIter, init: &[Stmt], r: &Resolved) -> Result<Stmt, DecomposeError> {
    let unsupported = |what: &str| DecomposeError::Unsupported { rule: r.name.clone(), what: what.to_string() };
    let kinds: Vec<char> = it.kinds.chars().collect();
    let mut c = Copier { vars: HashMap::new(), rule: None };
    let (mut axes, mut vars) = (Vec::new(), Vec::new());
    let mut k = 0;
    for entry in &it.axes {
        let n = entry.axes().len();
        let ks = &kinds[k..(k + n).min(kinds.len())];
        if ks.iter().all(|&x| x == 'S') {
            if !matches!(entry, SpIterAxis::Axis(_)) {
                return Err(unsupported("a spatial fuse/attach entry with an init"));
            }
            axes.push(entry.clone());
            for &v in &it.vars[k..k + n] {
                vars.push(c.rebind(g, v));
            }
        } else if ks.contains(&'S') {
            return Err(unsupported("an entry mixing spatial and reduction iterators"));
        }
        k += n;
    }
    let body = c.stmts(g, init)?;
    Ok(Stmt::new(StmtKind::SpIter(SpIter {
        name: format!("{}_init", it.name),
        kinds: "S".repeat(vars.len()),
        axes,
        vars,
        init: None,
        body,
        attrs: it.attrs.clone(),
    })))
}

/// Whether new axis `a` lists every coordinate of old axis `old` exactly once: a
/// `dense_fixed` axis of the same length, or a root `sparse_fixed` axis of unique coordinates
/// with as many as the length (`ir::args` refuses a coordinate stored twice).
fn covers(g: &Func, a: AxisId, old: AxisId) -> bool {
    use sparsec_ir::AxisKind;
    let (n, o) = (&g.axes[a], &g.axes[old]);
    n.length == o.length
        && (n.kind == AxisKind::DenseFixed && n.parent.is_none() && o.parent.is_none()
            || n.kind == AxisKind::SparseFixed && n.parent.is_none() && n.unique && n.nnz.as_ref() == Some(&n.length))
}

/// Where the rule's old axes sit in `it`: the entry index of the first and the iterator index
/// of the first; and for each new axis whether it comes from a spatial iterator.
fn rule_span(g: &Func, it: &SpIter, r: &Resolved) -> Result<(usize, usize, Vec<bool>), DecomposeError> {
    let names = |ids: &[AxisId]| ids.iter().map(|a| g.axes[*a].name.clone()).collect::<Vec<_>>().join(", ");
    let not_contiguous =
        || DecomposeError::NotContiguous { rule: r.name.clone(), sp_iter: it.name.clone(), axes: names(&r.before) };
    let n = r.before.len();
    let start = (0..it.axes.len().saturating_sub(n - 1))
        .find(|&p| (0..n).all(|q| it.axes[p + q] == SpIterAxis::Axis(r.before[q])))
        .ok_or_else(not_contiguous)?;
    // With plain axes before `start`, entry index = iterator index up to `start`.
    let var_start: usize = it.axes[..start].iter().map(|a| a.axes().len()).sum();
    let kinds: Vec<char> = it.kinds.chars().collect();
    let spatial = r.origin.iter().map(|&o| kinds.get(var_start + o) != Some(&'R')).collect();
    Ok((start, var_start, spatial))
}

/// Whether a piece of the rule visits each spatial point of `it`'s old axes once and needs
/// no guard: every old coordinate is plainly one new iterator over an axis of its length,
/// and each spatial one's new axis [`covers`] the old one.
fn visits_each_point_once(g: &Func, it: &SpIter, r: &Resolved) -> Result<bool, DecomposeError> {
    let (_, _, spatial) = rule_span(g, it, r)?;
    // Probe the inverse map with distinct placeholders for the new iterators.
    let probe: Vec<Expr> = (0..r.after.len()).map(|p| Expr::Int(-1 - p as i64, sparsec_ir::DType::I32)).collect();
    let inv = r.inv_idx_map.apply(probe.clone());
    let plain = |k: usize| probe.iter().position(|x| *x == inv[k]);
    let unguarded = (0..r.before.len())
        .all(|k| plain(k).is_some_and(|p| g.axes[r.after[p]].length == g.axes[r.before[k]].length));
    Ok(unguarded
        && (0..r.after.len()).all(|p| {
            !spatial[p]
                || plain(r.origin[p]) == Some(p)
                    && r.origin.iter().filter(|&&o| o == r.origin[p]).count() == 1
                    && covers(g, r.after[p], r.before[r.origin[p]])
        }))
}

/// One accumulating piece of `it` in the rule's format, with `init` (`it`'s, rewritten) where
/// the piece visits each spatial point once ([`visits_each_point_once`]).
fn piece(g: &mut Func, namer: &mut Namer, it: &SpIter, r: &Resolved, init: Option<&[Stmt]>) -> Result<Stmt, DecomposeError> {
    let (start, var_start, spatial) = rule_span(g, it, r)?;
    let n = r.before.len();
    let kinds: Vec<char> = it.kinds.chars().collect();
    namer.push();
    for (k, v) in it.vars.iter().enumerate() {
        if !(var_start..var_start + n).contains(&k) {
            namer.var(&g.vars[*v].name);
        }
    }
    let iters = new_iters(g, namer, r);
    namer.pop();
    let mut c = Copier { vars: HashMap::new(), rule: None };
    let inv = r.inv_idx_map.apply(iters.iter().map(|v| Expr::Var(*v)).collect());
    let (mut axes, mut vars, mut ks) = (Vec::new(), Vec::new(), String::new());
    let told = told_apart(g, r, &inv, &iters, &spatial);
    let mut k = 0;
    for (e, entry) in it.axes.iter().enumerate() {
        if e == start {
            for (p, &a) in r.after.iter().enumerate() {
                axes.push(SpIterAxis::Axis(a));
                vars.push(iters[p]);
                // Spatial only where the original coordinates tell its values apart: a row
                // looked up through `RowIndices` may repeat (hyb splits long rows), so its
                // iterator accumulates into shared points and is a reduction.
                let kind = kinds.get(var_start + r.origin[p]).copied().unwrap_or('S');
                ks.push(if told.contains(&iters[p]) { kind } else { 'R' });
            }
        }
        let cnt = entry.axes().len();
        if (start..start + n).contains(&e) {
            c.vars.insert(it.vars[k], inv[e - start].clone());
        } else {
            axes.push(entry.clone());
            for q in 0..cnt {
                vars.push(c.rebind(g, it.vars[k + q]));
                ks.push(kinds.get(k + q).copied().unwrap_or('S'));
            }
        }
        k += cnt;
    }
    let old_iters: Vec<VarId> = it.vars[var_start..var_start + n].to_vec();
    c.rule = Some((r, old_iters, iters.clone()));
    let init = init.map(|s| c.stmts(g, s)).transpose()?;
    let body = c.stmts(g, &it.body)?;
    let body = wrap(guard(g, r, &inv, &iters), body);
    Ok(Stmt::new(StmtKind::SpIter(SpIter {
        name: format!("{}_{}", it.name, r.name),
        axes,
        kinds: ks,
        vars,
        init,
        body,
        attrs: it.attrs.clone(),
    })))
}

fn is_preprocess(s: &Stmt) -> bool {
    matches!(&s.kind, StmtKind::SpIter(it) if it.attrs.get(PREPROCESS_ATTR) == Some(&AttrValue::Bool(true)))
}

/// The preprocess part of a decomposed function: only the iterations marked
/// `preprocess = true` (same parameters and declarations).
pub fn extract_preprocess(f: &Func) -> Func {
    let mut g = f.clone();
    g.body.retain(is_preprocess);
    g
}

/// The compute part of a decomposed function: everything but the preprocess iterations.
pub fn remove_preprocess(f: &Func) -> Func {
    let mut g = f.clone();
    g.body.retain(|s| !is_preprocess(s));
    g
}

/// GroupCOO (Insum) with groups of `g` entries for csrmm's `A[I, J]`, named `group_coo_<g>`:
/// parameters `a, group_rows, indices, groups, n`; `GO = dense_fixed(groups)`,
/// `GI = sparse_fixed(GO, n, g, indices)`, `GroupRows` over `[GO]`; inverse map
/// `(go, gi) => (GroupRows[go], gi)` (no forward map: a row's entries span several groups).
/// Padding slots must hold column `n`, with the format's `n` bound one larger.
pub fn group_coo_rule(g: i64) -> Result<FormatRewriteRule, DecomposeError> {
    let src = format!(
        "func group_coo_{g}(a: handle, group_rows: handle, indices: handle, groups: i32, n: i32) {{\n  \
         axis GO = dense_fixed(groups)\n  axis GI = sparse_fixed(GO, n, {g}, indices)\n  \
         buffer A = match_sparse_buffer(a, [GO, GI], f32)\n  \
         buffer GroupRows = match_sparse_buffer(group_rows, [GO], i32)\n}}\n"
    );
    ready_rule(
        format!("group_coo_{g}"),
        &src,
        &["I", "J"],
        &["GO", "GI"],
        &[("I", &["GO"]), ("J", &["GI"])],
        None,
        "(go, gi) => (GroupRows[go], gi)",
    )
}

/// BlockGroupCOO (Insum) over `b × b` blocks in groups of `g`, named `block_group_coo_<b>_<g>`:
/// parameters `a, group_rows, block_cols, groups, nbc`; `GO = dense_fixed(groups)`,
/// `GI = sparse_fixed(GO, nbc, g, block_cols)`, `BI = BJ = dense_fixed(b)`; inverse map
/// `(go, gi, bi, bj) => (GroupRows[go] * b + bi, gi * b + bj)`. Padding slots must hold
/// block column `nbc`, with the format's `nbc` bound one larger.
pub fn block_group_coo_rule(b: i64, g: i64) -> Result<FormatRewriteRule, DecomposeError> {
    let src = format!(
        "func block_group_coo_{b}_{g}(a: handle, group_rows: handle, block_cols: handle, groups: i32, nbc: i32) {{\n  \
         axis GO = dense_fixed(groups)\n  axis GI = sparse_fixed(GO, nbc, {g}, block_cols)\n  \
         axis BI = dense_fixed({b})\n  axis BJ = dense_fixed({b})\n  \
         buffer A = match_sparse_buffer(a, [GO, GI, BI, BJ], f32)\n  \
         buffer GroupRows = match_sparse_buffer(group_rows, [GO], i32)\n}}\n"
    );
    ready_rule(
        format!("block_group_coo_{b}_{g}"),
        &src,
        &["I", "J"],
        &["GO", "GI", "BI", "BJ"],
        &[("I", &["GO", "BI"]), ("J", &["GI", "BJ"])],
        None,
        &format!("(go, gi, bi, bj) => (GroupRows[go] * {b} + bi, gi * {b} + bj)"),
    )
}

/// SR-BCRS `condense(t, g)` for csrmm's `A[I, J]`, named `sr_bcrs_<t>_<g>`: parameters
/// `a, tile_ptr, col_indices, tiles, groups, max_groups`; `TO = dense_fixed(tiles)` (tiles of
/// `t` rows), `Q = dense_variable(TO, max_groups, groups, tile_ptr)` (column groups of a tile),
/// `R = dense_fixed(t)`, `S = dense_fixed(g)`; values over `[TO, Q, R, S]`, columns in
/// `ColIndices` over `[TO, Q, S]`; inverse map `(to, q, r, s) => (to * t + r, ColIndices[to, q, s])`.
/// Padding slots must hold column `n`.
pub fn sr_bcrs_rule(t: i64, g: i64) -> Result<FormatRewriteRule, DecomposeError> {
    let src = format!(
        "func sr_bcrs_{t}_{g}(a: handle, tile_ptr: handle, col_indices: handle, tiles: i32, groups: i32, max_groups: i32) {{\n  \
         axis TO = dense_fixed(tiles)\n  axis Q = dense_variable(TO, max_groups, groups, tile_ptr)\n  \
         axis R = dense_fixed({t})\n  axis S = dense_fixed({g})\n  \
         buffer A = match_sparse_buffer(a, [TO, Q, R, S], f32)\n  \
         buffer ColIndices = match_sparse_buffer(col_indices, [TO, Q, S], i32)\n}}\n"
    );
    ready_rule(
        format!("sr_bcrs_{t}_{g}"),
        &src,
        &["I", "J"],
        &["TO", "Q", "R", "S"],
        &[("I", &["TO", "R"]), ("J", &["Q", "S"])],
        None,
        &format!("(to, q, r, s) => (to * {t} + r, ColIndices[to, q, s])"),
    )
}

/// 2:4 structured sparsity along the reduction axis of csrmm's `A[I, J]`, named `nm_2_4`:
/// parameters `a, meta, rows, groups`; values over `[IO, G, S]` (`IO = dense_fixed(rows)`,
/// `G = dense_fixed(groups)` groups of 4 columns, `S = dense_fixed(2)` kept slots), metadata
/// `Meta` over `[IO, G]` holding `idx_lo | idx_hi << 2` per group as in PTX `mma.sp`; inverse
/// map `(io, g, s) => (io, g * 4 + select(s == 0, Meta[io, g] % 4, Meta[io, g] // 4))`.
pub fn nm_2_4_rule() -> Result<FormatRewriteRule, DecomposeError> {
    let src = "func nm_2_4(a: handle, meta: handle, rows: i32, groups: i32) {\n  \
               axis IO = dense_fixed(rows)\n  axis G = dense_fixed(groups)\n  axis S = dense_fixed(2)\n  \
               buffer A = match_sparse_buffer(a, [IO, G, S], f32)\n  \
               buffer Meta = match_sparse_buffer(meta, [IO, G], i32)\n}\n";
    ready_rule(
        "nm_2_4".to_string(),
        src,
        &["I", "J"],
        &["IO", "G", "S"],
        &[("I", &["IO"]), ("J", &["G", "S"])],
        None,
        "(io, g, s) => (io, g * 4 + select(s == 0, Meta[io, g] % 4, Meta[io, g] // 4))",
    )
}
