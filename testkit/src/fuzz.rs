//! Differential program fuzzer (issue #13): random valid Stage-I programs with matching random
//! inputs, run by the interpreter at Stage I, II and III (and by any backend added to the
//! [`Runner`]), with a shrinker that minimises a failing case.
//!
//! A [`Case`] is a program model ([`Prog`]) plus its input data ([`Data`]); both come from one
//! seed ([`generate`]). The program prints as `.sptir` ([`Prog::to_sptir`]), so a failure is
//! directly a reproducer file. Kinds follow the body: an iterator is `S` exactly when the
//! outputs of its `sp_iter` are indexed by it.

use crate::Rng;
use sparsec::interp::{self, Options};
use sparsec::ir::data::{Args, Array};
use sparsec::ir::{Func, Stage, Storage};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Value type of an expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// `f32`.
    F32,
    /// `i32`.
    I32,
    /// `bool`.
    Bool,
}

impl Ty {
    fn name(self) -> &'static str {
        match self {
            Ty::F32 => "f32",
            Ty::I32 => "i32",
            Ty::Bool => "bool",
        }
    }
}

/// Head of an expression node.
#[derive(Clone, Debug, PartialEq)]
pub enum Head {
    /// A literal, as printed.
    Lit(String),
    /// An iterator or scalar parameter.
    Var(String),
    /// A buffer element; the arguments are the indices.
    Load(String),
    /// A binary operator, printed infix and parenthesised.
    Bin(&'static str),
    /// A built-in call (`min`, `exp`, `select`, ...).
    Call(&'static str),
    /// `cast(<ty>, arg)`.
    Cast,
}

/// An expression tree.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// Operator or leaf.
    pub head: Head,
    /// Operands.
    pub args: Vec<Expr>,
    /// Result type.
    pub ty: Ty,
}

impl Expr {
    fn lit(s: &str, ty: Ty) -> Expr {
        Expr { head: Head::Lit(s.into()), args: vec![], ty }
    }

    fn var(s: &str) -> Expr {
        Expr { head: Head::Var(s.into()), args: vec![], ty: Ty::I32 }
    }

    fn print(&self, out: &mut String) {
        let list = |out: &mut String, args: &[Expr]| {
            for (k, a) in args.iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                a.print(out);
            }
        };
        match &self.head {
            Head::Lit(s) | Head::Var(s) => out.push_str(s),
            Head::Load(b) => {
                out.push_str(b);
                out.push('[');
                list(out, &self.args);
                out.push(']');
            }
            Head::Bin(op) => {
                out.push('(');
                self.args[0].print(out);
                out.push_str(&format!(" {op} "));
                self.args[1].print(out);
                out.push(')');
            }
            Head::Call(name) => {
                out.push_str(name);
                out.push('(');
                list(out, &self.args);
                out.push(')');
            }
            Head::Cast => {
                out.push_str(&format!("cast({}, ", self.ty.name()));
                self.args[0].print(out);
                out.push(')');
            }
        }
    }

    fn nodes(&self) -> usize {
        1 + if matches!(self.head, Head::Load(_)) { 0 } else { self.args.iter().map(Expr::nodes).sum() }
    }

    /// Node `n` in preorder, not descending into indices.
    fn nth_mut(&mut self, n: &mut usize) -> Option<&mut Expr> {
        if *n == 0 {
            return Some(self);
        }
        *n -= 1;
        if matches!(self.head, Head::Load(_)) {
            return None;
        }
        for a in &mut self.args {
            if let Some(e) = a.nth_mut(n) {
                return Some(e);
            }
        }
        None
    }
}

/// `buf[idx] = value`.
#[derive(Clone, Debug, PartialEq)]
pub struct Store {
    /// Buffer written.
    pub buf: String,
    /// Indices (iterators).
    pub idx: Vec<Expr>,
    /// Stored value.
    pub value: Expr,
}

/// A statement of an `sp_iter` body.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// A store.
    Store(Store),
    /// A nested sparse iteration.
    Iter(SpIter),
}

/// A sparse iteration.
#[derive(Clone, Debug, PartialEq)]
pub struct SpIter {
    /// Name.
    pub name: String,
    /// Axis list entries; an entry of several axes is a `fuse(...)`.
    pub axes: Vec<Vec<String>>,
    /// One `S`/`R` per iterator.
    pub kinds: String,
    /// Iterator names.
    pub vars: Vec<String>,
    /// `init` stores.
    pub init: Vec<Store>,
    /// Body.
    pub body: Vec<Item>,
}

/// Kind of a column axis (child of `I`, or the dense `JD`-like axis).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColKind {
    /// `dense_fixed(n)`, no parent.
    DenseFixed,
    /// `dense_variable(I, n, nnz, indptr)`.
    DenseVariable,
    /// `sparse_fixed(I, n, k, indices)` (ELL).
    SparseFixed,
    /// `sparse_variable(I, n, nnz, indptr, indices)` (CSR).
    SparseVariable,
    /// `sparse_variable(I, n, nnz, indptr, indices, pattern = union(Ja, Jb))` (or
    /// `intersect`): a sparse output the run assembles; no data of its own.
    Assembled {
        /// `union` rather than `intersect`.
        union: bool,
        /// The members `J<a>`, `J<b>` (CSR axes).
        a: usize,
        /// See `a`.
        b: usize,
    },
    /// `sparse_variable(JD, n, nnz, indptr, indices)`: the rows of a matrix whose rows are
    /// the coordinates of `JD` (`n` rows, not `m`), a product's second factor.
    RowsOfJd,
    /// `sparse_variable(I, n, nnz, indptr, indices, pattern = product(J<a>, J<b>))`: the
    /// pattern of a sparse product, which the run assembles; `J<a>` is a CSR axis of `I`,
    /// `J<b>` a [`ColKind::RowsOfJd`].
    Product {
        /// The first factor's column axis `J<a>`.
        a: usize,
        /// The second factor's column axis `J<b>`.
        b: usize,
    },
}

impl ColKind {
    /// The name in a reproducer's `cols=` list.
    fn name(self) -> String {
        match self {
            ColKind::Assembled { union, a, b } => format!("assembled:{}:{a}:{b}", if union { "union" } else { "intersect" }),
            ColKind::Product { a, b } => format!("product:{a}:{b}"),
            k => COL_NAMES.iter().find(|c| c.0 == k).expect("every plain kind").1.to_string(),
        }
    }

    fn parse(s: &str) -> Option<ColKind> {
        if let Some(rest) = s.strip_prefix("product:") {
            let (a, b) = rest.split_once(':')?;
            return Some(ColKind::Product { a: a.parse().ok()?, b: b.parse().ok()? });
        }
        if let Some(rest) = s.strip_prefix("assembled:") {
            let mut it = rest.split(':');
            let union = match it.next()? {
                "union" => true,
                "intersect" => false,
                _ => return None,
            };
            let (a, b) = (it.next()?.parse().ok()?, it.next()?.parse().ok()?);
            return Some(ColKind::Assembled { union, a, b });
        }
        COL_NAMES.iter().find(|x| x.1 == s).map(|x| x.0)
    }
}

/// A program model: fixed declarations (axes `I`, `J<t>`, `JD`, `K` and a buffer pool) and a
/// list of top-level sparse iterations.
#[derive(Clone, Debug, PartialEq)]
pub struct Prog {
    /// Column axes `J0, J1, ...` (all of length `n`, parent `I` unless dense-fixed).
    pub cols: Vec<ColKind>,
    /// `I` is a root `sparse_fixed(m, ki, rowsi)` (DCSR's rows) instead of `dense_fixed(m)`.
    pub sparse_rows: bool,
    /// That root `I` repeats rows (`unique = false`: COO's rows, one position per entry).
    pub coo_rows: bool,
    /// Buffers: name, axes, dtype, `default` option, allocated (not a parameter).
    pub bufs: Vec<Buf>,
    /// Top-level sparse iterations.
    pub iters: Vec<SpIter>,
}

/// A buffer of the pool.
#[derive(Clone, Debug, PartialEq)]
pub struct Buf {
    /// Name (the parameter is its lower-case name).
    pub name: String,
    /// Axes.
    pub axes: Vec<String>,
    /// Element type.
    pub ty: Ty,
    /// `default = v`, for sparse buffers.
    pub default: Option<String>,
    /// `alloc_sparse_buffer` instead of a parameter.
    pub alloc: bool,
}

impl Prog {
    /// The program as `.sptir` text (one function `fuzz`).
    pub fn to_sptir(&self) -> String {
        let mut params: Vec<String> = Vec::new();
        for b in self.bufs.iter().filter(|b| !b.alloc) {
            params.push(format!("{}: handle", b.name.to_lowercase()));
        }
        let mut axes = vec![match (self.sparse_rows, self.coo_rows) {
            (true, true) => "  axis I = sparse_fixed(m, ki, rowsi, unique = false)",
            (true, false) => "  axis I = sparse_fixed(m, ki, rowsi)",
            (false, _) => "  axis I = dense_fixed(m)",
        }
        .to_string()];
        let mut scalars = vec!["m: i32".to_string(), "n: i32".to_string(), "f: i32".to_string()];
        if self.sparse_rows {
            params.push("rowsi: handle".into());
            scalars.push("ki: i32".into());
        }
        // `JD` first where a column axis is one of its children.
        let jd_first = self.cols.contains(&ColKind::RowsOfJd);
        if jd_first {
            axes.push("  axis JD = dense_fixed(n)".into());
        }
        for (t, k) in self.cols.iter().enumerate() {
            let rhs = match k {
                ColKind::DenseFixed => "dense_fixed(n)".to_string(),
                ColKind::DenseVariable => format!("dense_variable(I, n, nnz{t}, indptr{t})"),
                ColKind::SparseFixed => format!("sparse_fixed(I, n, k{t}, indices{t})"),
                ColKind::SparseVariable => format!("sparse_variable(I, n, nnz{t}, indptr{t}, indices{t})"),
                ColKind::Assembled { union, a, b } => {
                    let op = if *union { "union" } else { "intersect" };
                    format!("sparse_variable(I, n, nnz{t}, indptr{t}, indices{t}, pattern = {op}(J{a}, J{b}))")
                }
                ColKind::RowsOfJd => format!("sparse_variable(JD, n, nnz{t}, indptr{t}, indices{t})"),
                ColKind::Product { a, b } => format!("sparse_variable(I, n, nnz{t}, indptr{t}, indices{t}, pattern = product(J{a}, J{b}))"),
            };
            axes.push(format!("  axis J{t} = {rhs}"));
            match k {
                ColKind::DenseFixed => {}
                ColKind::DenseVariable => {
                    params.push(format!("indptr{t}: handle"));
                    scalars.push(format!("nnz{t}: i32"));
                }
                ColKind::SparseFixed => {
                    params.push(format!("indices{t}: handle"));
                    scalars.push(format!("k{t}: i32"));
                }
                ColKind::SparseVariable | ColKind::Assembled { .. } | ColKind::RowsOfJd | ColKind::Product { .. } => {
                    params.push(format!("indptr{t}: handle"));
                    params.push(format!("indices{t}: handle"));
                    scalars.push(format!("nnz{t}: i32"));
                }
            }
        }
        if !jd_first {
            axes.push("  axis JD = dense_fixed(n)".into());
        }
        axes.push("  axis K = dense_fixed(f)".into());
        params.extend(scalars);
        let mut s = format!("func fuzz({}) {{\n", params.join(", "));
        for a in axes {
            s.push_str(&a);
            s.push('\n');
        }
        for b in &self.bufs {
            let opt = b.default.as_ref().map(|d| format!(", default = {d}")).unwrap_or_default();
            if b.alloc {
                s.push_str(&format!("  buffer {} = alloc_sparse_buffer([{}], {}, global)\n", b.name, b.axes.join(", "), b.ty.name()));
            } else {
                s.push_str(&format!(
                    "  buffer {} = match_sparse_buffer({}, [{}], {}{opt})\n",
                    b.name,
                    b.name.to_lowercase(),
                    b.axes.join(", "),
                    b.ty.name()
                ));
            }
        }
        for it in &self.iters {
            print_iter(it, 1, &mut s);
        }
        s.push_str("}\n");
        s
    }

    fn stores_mut(&mut self) -> Vec<&mut Store> {
        fn go<'a>(it: &'a mut SpIter, out: &mut Vec<&'a mut Store>) {
            out.extend(it.init.iter_mut());
            for item in &mut it.body {
                match item {
                    Item::Store(st) => out.push(st),
                    Item::Iter(inner) => go(inner, out),
                }
            }
        }
        let mut out = Vec::new();
        for it in &mut self.iters {
            go(it, &mut out);
        }
        out
    }
}

fn print_store(st: &Store, ind: &str, s: &mut String) {
    let mut idx = String::new();
    for (k, e) in st.idx.iter().enumerate() {
        if k > 0 {
            idx.push_str(", ");
        }
        e.print(&mut idx);
    }
    let mut v = String::new();
    st.value.print(&mut v);
    s.push_str(&format!("{ind}{}[{idx}] = {v}\n", st.buf));
}

fn print_iter(it: &SpIter, depth: usize, s: &mut String) {
    let ind = "  ".repeat(depth);
    let axes: Vec<String> =
        it.axes.iter().map(|g| if g.len() == 1 { g[0].clone() } else { format!("fuse({})", g.join(", ")) }).collect();
    s.push_str(&format!("{ind}sp_iter {}([{}], \"{}\") as [{}] {{\n", it.name, axes.join(", "), it.kinds, it.vars.join(", ")));
    if !it.init.is_empty() {
        s.push_str(&format!("{ind}  init {{\n"));
        for st in &it.init {
            print_store(st, &format!("{ind}    "), s);
        }
        s.push_str(&format!("{ind}  }}\n"));
    }
    for item in &it.body {
        match item {
            Item::Store(st) => print_store(st, &format!("{ind}  "), s),
            Item::Iter(inner) => print_iter(inner, depth + 1, s),
        }
    }
    s.push_str(&format!("{ind}}}\n"));
}

/// Input data of a case: dimensions, the stored coordinates of every row of every
/// non-dense-fixed column axis, and the seed of the array values.
#[derive(Clone, Debug, PartialEq)]
pub struct Data {
    /// Rows (extent of `I`).
    pub m: usize,
    /// Columns (length of every `J<t>` and of `JD`).
    pub n: usize,
    /// Extent of `K`.
    pub f: usize,
    /// Per column axis, per row (per stored row where `I` is sparse), the stored coordinates
    /// (empty for dense-fixed axes).
    pub rows: Vec<Vec<Vec<i32>>>,
    /// Where `I` is a root sparse axis: the rows it stores (ascending, below `m`).
    pub stored_rows: Option<Vec<i32>>,
    /// Seed of the buffer values.
    pub seed: u64,
    /// Whether the buffer values are all finite (else about 1 in 40 is a special value,
    /// inf, -inf, NaN, 0 or 1e30).
    pub finite: bool,
}

impl Data {
    /// A one-line description of the inputs.
    pub fn describe(&self, prog: &Prog) -> String {
        let mut s = format!("m = {}, n = {}, f = {}, value seed {:#x}", self.m, self.n, self.f, self.seed);
        if let Some(r) = &self.stored_rows {
            s.push_str(&format!("; I stores rows {r:?}"));
        }
        for (t, (k, rows)) in prog.cols.iter().zip(&self.rows).enumerate() {
            if *k != ColKind::DenseFixed {
                s.push_str(&format!("; J{t} ({k:?}) rows {rows:?}"));
            }
        }
        s
    }
}

const COL_NAMES: [(ColKind, &str); 5] = [
    (ColKind::RowsOfJd, "rows_of_jd"),
    (ColKind::DenseFixed, "dense_fixed"),
    (ColKind::DenseVariable, "dense_variable"),
    (ColKind::SparseFixed, "sparse_fixed"),
    (ColKind::SparseVariable, "sparse_variable"),
];

/// A reproducer file: `# fuzz-data` comment lines holding the column kinds and the data, then
/// the program.
pub fn to_reproducer(case: &Case) -> String {
    let d = &case.data;
    let cols: Vec<String> = case.prog.cols.iter().map(|k| k.name()).collect();
    let mut s = format!("# fuzz-data m={} n={} f={} seed={} cols={}", d.m, d.n, d.f, d.seed, cols.join(","));
    s.push_str(if d.finite { " finite=1\n" } else { "\n" });
    if let Some(r) = &d.stored_rows {
        s.push_str(&format!("# fuzz-stored-rows {}\n", r.iter().map(i32::to_string).collect::<Vec<_>>().join(",")));
    }
    for rows in &d.rows {
        let r: Vec<String> = rows.iter().map(|r| r.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")).collect();
        s.push_str(&format!("# fuzz-rows {}\n", r.join("|")));
    }
    s + &case.prog.to_sptir()
}

/// Reads the column kinds and data of a reproducer written by [`to_reproducer`].
pub fn parse_reproducer(text: &str) -> Result<(Vec<ColKind>, Data), String> {
    let head = text.lines().find_map(|l| l.strip_prefix("# fuzz-data ")).ok_or("no `# fuzz-data` line")?;
    let mut d = Data { m: 0, n: 0, f: 0, rows: vec![], stored_rows: None, seed: 0, finite: false };
    if let Some(l) = text.lines().find_map(|l| l.strip_prefix("# fuzz-stored-rows")) {
        let r = l.trim().split(',').filter(|x| !x.is_empty()).map(|x| x.parse::<i32>().map_err(|e| e.to_string()));
        d.stored_rows = Some(r.collect::<Result<_, _>>()?);
    }
    let mut cols = Vec::new();
    for kv in head.split_whitespace() {
        let (k, v) = kv.split_once('=').ok_or_else(|| format!("bad field {kv}"))?;
        let num = || v.parse::<u64>().map_err(|e| format!("{k}: {e}"));
        match k {
            "m" => d.m = num()? as usize,
            "n" => d.n = num()? as usize,
            "f" => d.f = num()? as usize,
            "seed" => d.seed = num()?,
            "finite" => d.finite = num()? != 0,
            "cols" => {
                for c in v.split(',') {
                    cols.push(ColKind::parse(c).ok_or_else(|| format!("unknown axis kind {c}"))?);
                }
            }
            _ => return Err(format!("unknown field {k}")),
        }
    }
    for (t, l) in text.lines().filter_map(|l| l.strip_prefix("# fuzz-rows")).enumerate() {
        let stored = match cols.get(t) {
            Some(ColKind::RowsOfJd) => d.n,
            _ => d.stored_rows.as_ref().map_or(d.m, Vec::len),
        };
        let rows = if stored == 0 { vec![] } else { l.trim().split('|').map(|r| r.split(',').filter(|x| !x.is_empty()).map(|x| x.parse::<i32>().map_err(|e| e.to_string())).collect::<Result<Vec<_>, _>>()).collect::<Result<Vec<_>, _>>()? };
        d.rows.push(rows);
    }
    if d.rows.len() != cols.len() {
        return Err(format!("{} `# fuzz-rows` lines for {} column axes", d.rows.len(), cols.len()));
    }
    Ok((cols, d))
}

/// A program and its inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// Seed it was generated from.
    pub seed: u64,
    /// The program.
    pub prog: Prog,
    /// Its inputs.
    pub data: Data,
}

// ---------------------------------------------------------------------------------------------
// Generation

/// Float literals (the order fixes what each seed generates).
const F32_LITS: &[&str] = &["0.0", "1.0", "-2.5", "0.5", "7.0", "1e30", "-1e30", "3.4e38", "1e-30", "inf", "-inf", "nan"];
/// The float literals without those that are or easily make inf or NaN.
const FINITE_F32_LITS: &[&str] = &["0.0", "1.0", "-2.5", "0.5", "7.0", "1e30", "-1e30", "1e-30"];
const I32_LITS: &[&str] = &["0", "1", "-1", "2", "3", "7", "-100", "65536", "2147483647", "-2147483648"];

/// What the generator may produce; constructs behind a flag have open bugs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenOptions {
    /// Reads of a `dense_variable` axis at a coordinate of another axis (a lookup).
    pub dense_variable_lookups: bool,
    /// `inf`, `-inf`, `nan` and `3.4e38` literals, and non-finite input values. Backends that
    /// refuse any non-finite value (cubecl on WGSL) test more with them off.
    pub non_finite: bool,
    /// Sometimes a root sparse `I` (DCSR's rows; drawn from a stream of its own, so a seed
    /// generated without it gives the same case with it off).
    pub sparse_rows: bool,
    /// Sometimes ELL rows padded with a repeated coordinate (as `formats` pads them; from the
    /// same stream of its own).
    pub padded_rows: bool,
    /// Sometimes an iterator over a CSR column axis becomes a co-iteration, `union` or
    /// `intersect` with another (a new one where the program has none; same stream).
    pub merges: bool,
    /// Sometimes a sparse product (Gustavson's SpGEMM) into an assembled output: a CSR axis
    /// of `I` times the rows of a matrix over `JD` (from a stream of its own).
    pub products: bool,
    /// Sometimes a root sparse `I` repeats rows (COO: `unique = false`, iterators over it
    /// reductions), where the program verifies so (from a stream of its own).
    pub coo_rows: bool,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions { dense_variable_lookups: true, non_finite: true, sparse_rows: true, padded_rows: true, merges: true, products: true, coo_rows: true }
    }
}

impl GenOptions {
    /// Every construct on, including those with open bugs (`tests/fuzz_open/`).
    pub fn all() -> Self {
        GenOptions { dense_variable_lookups: true, non_finite: true, sparse_rows: true, padded_rows: true, merges: true, products: true, coo_rows: true }
    }
}

struct Gen<'a> {
    opts: GenOptions,
    /// Generating a nested iteration (`nested_iter`).
    nested: bool,
    rng: &'a mut Rng,
    prog: Prog,
    counter: usize,
}

/// An iterator in scope: name and the axis it iterates.
#[derive(Clone)]
struct Scope {
    vars: Vec<(String, String)>,
    /// Buffers that may not be read (written by the current iteration).
    written: Vec<String>,
}

impl Gen<'_> {
    fn chance(&mut self, p: f64) -> bool {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    fn pick<T: Clone>(&mut self, v: &[T]) -> T {
        v[self.rng.below(v.len())].clone()
    }

    fn buf(&self, name: &str) -> &Buf {
        self.prog.bufs.iter().find(|b| b.name == name).expect("buffer of the pool")
    }

    fn col_kind(&self, axis: &str) -> Option<ColKind> {
        axis.strip_prefix('J').and_then(|t| t.parse::<usize>().ok()).map(|t| self.prog.cols[t])
    }

    /// Whether a variable over `var_axis` may index buffer axis `buf_axis` (lookups allowed
    /// when `read`).
    fn fits(&self, buf_axis: &str, var_axis: &str, read: bool) -> bool {
        if buf_axis == var_axis {
            return true;
        }
        // An ELL row may repeat a coordinate: its iterator stores only by position.
        if !read && self.col_kind(var_axis) == Some(ColKind::SparseFixed) {
            return false;
        }
        let col = |a: &str| a == "JD" || self.col_kind(a).is_some();
        match buf_axis {
            // A root sparse `I` is read at a column's coordinate by a lookup.
            "I" => read && self.prog.sparse_rows && col(var_axis),
            "K" => false,
            "JD" => col(var_axis),
            a => match self.col_kind(a) {
                Some(ColKind::DenseFixed) => col(var_axis),
                Some(ColKind::DenseVariable) => read && col(var_axis) && self.opts.dense_variable_lookups,
                Some(_) => read && col(var_axis),
                None => false,
            },
        }
    }

    /// Index tuples (by variable) for buffer `b` from the scope; sparse child axes must be
    /// indexed in the row of the `I` variable (always the case: only one `I` iterator).
    fn indexings(&self, b: &Buf, scope: &Scope, read: bool, distinct: bool) -> Vec<Vec<String>> {
        let mut out: Vec<Vec<String>> = vec![vec![]];
        for ax in &b.axes {
            let mut next = Vec::new();
            for pre in &out {
                for (v, va) in &scope.vars {
                    // Inside a nested iteration every buffer of the outer spatial `i` is read
                    // in its own row only (another row's is another spatial point's).
                    let temp = ax == "I" && va != "I" && (self.nested || b.name == "T" || b.name == "V");
                    if self.fits(ax, va, read) && !temp && !(distinct && pre.contains(v)) {
                        let mut p = pre.clone();
                        p.push(v.clone());
                        next.push(p);
                    }
                }
            }
            out = next;
        }
        out
    }

    fn leaf(&mut self, ty: Ty, scope: &Scope) -> Expr {
        let reads: Vec<(String, Vec<String>)> = self
            .prog
            .bufs
            .iter()
            .filter(|b| b.ty == ty && !scope.written.contains(&b.name) && !b.alloc)
            .flat_map(|b| self.indexings(b, scope, true, false).into_iter().map(|ix| (b.name.clone(), ix)))
            .collect();
        if !reads.is_empty() && self.chance(0.6) {
            let (b, ix) = self.pick(&reads);
            return Expr { head: Head::Load(b), args: ix.iter().map(|v| Expr::var(v)).collect(), ty };
        }
        match ty {
            Ty::F32 => {
                if self.chance(0.3) {
                    let i = self.leaf(Ty::I32, scope);
                    return Expr { head: Head::Cast, args: vec![i], ty };
                }
                if self.chance(0.1) {
                    let w = self.pick(&["max_value(f32)", "min_value(f32)"]);
                    return Expr::lit(w, ty);
                }
                let lits = if self.opts.non_finite { F32_LITS } else { FINITE_F32_LITS };
                let l = if self.chance(0.7) { self.pick(&F32_LITS[..5]) } else { self.pick(lits) };
                Expr::lit(l, ty)
            }
            Ty::I32 => {
                if !scope.vars.is_empty() && self.chance(0.4) {
                    let (v, _) = self.pick(&scope.vars);
                    return Expr::var(&v);
                }
                if self.chance(0.3) {
                    let p = self.pick(&["m", "n", "f"]);
                    return Expr::var(p);
                }
                let l = if self.chance(0.7) { self.pick(&I32_LITS[..6]) } else { self.pick(I32_LITS) };
                Expr::lit(l, ty)
            }
            Ty::Bool => self.expr(Ty::Bool, scope, 1),
        }
    }

    fn expr(&mut self, ty: Ty, scope: &Scope, depth: usize) -> Expr {
        if ty != Ty::Bool && (depth == 0 || self.chance(0.3)) {
            return self.leaf(ty, scope);
        }
        let d = depth.saturating_sub(1);
        let node = |head: Head, args: Vec<Expr>| Expr { head, args, ty };
        match ty {
            Ty::Bool => {
                if self.chance(0.8) {
                    let op = self.pick(&["<", "<=", "==", "!=", ">", ">="]);
                    let t = if self.chance(0.5) { Ty::F32 } else { Ty::I32 };
                    let (a, b) = (exact(self.expr(t, scope, d)), exact(self.expr(t, scope, d)));
                    node(Head::Bin(op), vec![a, b])
                } else {
                    let op = self.pick(&["&&", "||"]);
                    let (a, b) = (self.expr(Ty::Bool, scope, d), self.expr(Ty::Bool, scope, d));
                    node(Head::Bin(op), vec![a, b])
                }
            }
            Ty::F32 => match self.rng.below(10) {
                0..=3 => {
                    let op = self.pick(&["+", "-", "*", "/"]);
                    let (a, b) = (self.expr(ty, scope, d), self.expr(ty, scope, d));
                    node(Head::Bin(op), vec![a, b])
                }
                4 => {
                    let f = self.pick(&["min", "max", "pow", "fma"]);
                    let mut args = vec![self.expr(ty, scope, d), self.expr(ty, scope, d)];
                    if f == "fma" {
                        args.push(self.expr(ty, scope, d));
                    }
                    // A negative base makes `pow` discontinuous in its exponent.
                    if f == "pow" {
                        args[1] = exact(args[1].clone());
                    }
                    node(Head::Call(f), args)
                }
                5 | 6 => {
                    let f = self.pick(&["exp", "log", "sqrt", "abs", "tanh", "sigmoid", "floor", "ceil"]);
                    let a = self.expr(ty, scope, d);
                    let a = if matches!(f, "floor" | "ceil") { exact(a) } else { a };
                    node(Head::Call(f), vec![a])
                }
                7 => {
                    let c = self.expr(Ty::Bool, scope, d);
                    let (a, b) = (self.expr(ty, scope, d), self.expr(ty, scope, d));
                    node(Head::Call("select"), vec![c, a, b])
                }
                _ => {
                    let a = self.expr(Ty::I32, scope, d);
                    node(Head::Cast, vec![a])
                }
            },
            Ty::I32 => match self.rng.below(10) {
                0..=4 => {
                    let op = self.pick(&["+", "-", "*", "/", "//", "%"]);
                    let (a, b) = (self.expr(ty, scope, d), self.expr(ty, scope, d));
                    node(Head::Bin(op), vec![a, b])
                }
                5 => {
                    let f = self.pick(&["min", "max"]);
                    let (a, b) = (self.expr(ty, scope, d), self.expr(ty, scope, d));
                    node(Head::Call(f), vec![a, b])
                }
                6 => {
                    let a = self.expr(ty, scope, d);
                    node(Head::Call("abs"), vec![a])
                }
                7 => {
                    let c = self.expr(Ty::Bool, scope, d);
                    let (a, b) = (self.expr(ty, scope, d), self.expr(ty, scope, d));
                    node(Head::Call("select"), vec![c, a, b])
                }
                _ => {
                    let a = exact(self.expr(Ty::F32, scope, d));
                    node(Head::Cast, vec![a])
                }
            },
        }
    }

    fn fresh(&mut self, base: &str) -> String {
        self.counter += 1;
        format!("{base}_{}", self.counter)
    }

    /// Stores of a body writing `outs` (buffer, index variables); `reduce` when the iteration
    /// has reduction iterators. Returns (init, body).
    fn stores(&mut self, outs: &[(String, Vec<String>)], scope: &Scope, reduce: bool, spatial: &Scope) -> (Vec<Store>, Vec<Store>) {
        let mut init = Vec::new();
        let mut body = Vec::new();
        for (b, ix) in outs {
            let ty = self.buf(b).ty;
            let alloc = self.buf(b).alloc;
            let idx: Vec<Expr> = ix.iter().map(|v| Expr::var(v)).collect();
            let cur = Expr { head: Head::Load(b.clone()), args: idx.clone(), ty };
            if (reduce && self.chance(0.7)) || alloc || self.chance(0.1) {
                let value = if self.chance(0.5) { self.leaf(ty, &Scope { vars: vec![], written: vec![] }) } else { self.expr(ty, spatial, 1) };
                init.push(Store { buf: b.clone(), idx: idx.clone(), value });
            }
            for _ in 0..1 + self.rng.below(2) {
                let e = self.expr(ty, scope, 3);
                let value = if reduce || self.chance(0.3) {
                    match self.rng.below(6) {
                        0 => Expr { head: Head::Call("max"), args: vec![cur.clone(), e], ty },
                        1 => Expr { head: Head::Call("min"), args: vec![cur.clone(), e], ty },
                        2 => Expr { head: Head::Bin("*"), args: vec![cur.clone(), e], ty },
                        _ => Expr { head: Head::Bin("+"), args: vec![cur.clone(), e], ty },
                    }
                } else {
                    e
                };
                body.push(Store { buf: b.clone(), idx: idx.clone(), value });
            }
        }
        (init, body)
    }

    /// Chooses outputs among the pool for the iterators `vars` (with `outer` in scope), and
    /// the kinds they imply. `None` when nothing fits.
    fn outputs(&mut self, vars: &[(String, String)], outer: &Scope, allow_alloc: bool) -> Option<(Vec<(String, Vec<String>)>, String)> {
        let mut scope = outer.clone();
        scope.vars.extend(vars.iter().cloned());
        let mut cands: Vec<(String, Vec<String>)> = Vec::new();
        for b in &self.prog.bufs {
            if b.alloc && !allow_alloc {
                continue;
            }
            for ix in self.indexings(b, &scope, false, true) {
                // Outer variables are fixed; inner ones are spatial exactly when used.
                let kinds: String = vars.iter().map(|(v, _)| if ix.contains(v) { 'S' } else { 'R' }).collect();
                // A spatial iterator may not lie below a reduction one.
                let ok = vars.iter().zip(kinds.chars()).all(|((_, a), k)| {
                    k == 'R' || self.col_kind(a).is_none_or(|c| c == ColKind::DenseFixed) || {
                        vars.iter().zip(kinds.chars()).all(|((_, pa), pk)| pa != "I" || pk == 'S')
                    }
                });
                if ok {
                    cands.push((b.name.clone(), ix));
                }
            }
        }
        if cands.is_empty() {
            return None;
        }
        let first = self.pick(&cands);
        let kind_of = |ix: &Vec<String>| -> String { vars.iter().map(|(v, _)| if ix.contains(v) { 'S' } else { 'R' }).collect() };
        let kinds = kind_of(&first.1);
        let mut outs = vec![first.clone()];
        if self.chance(0.3) {
            let same: Vec<_> = cands.iter().filter(|c| c.0 != first.0 && kind_of(&c.1) == kinds).cloned().collect();
            if !same.is_empty() {
                outs.push(self.pick(&same));
            }
        }
        Some((outs, kinds))
    }

    fn col(&mut self) -> String {
        let t = self.rng.below(self.prog.cols.len());
        if self.chance(0.15) {
            "JD".into()
        } else {
            format!("J{t}")
        }
    }

    /// A flat (non-nested) sparse iteration over `I`, a column axis and/or `K`.
    fn flat_iter(&mut self) -> Option<SpIter> {
        let c = self.col();
        let mut axes: Vec<String> = match self.rng.below(6) {
            0 => vec!["I".into(), "K".into()],
            1 => vec!["I".into(), c],
            2 => vec!["K".into(), "I".into(), c],
            3 => vec!["I".into(), "K".into(), c],
            _ => vec!["I".into(), c, "K".into()],
        };
        if self.chance(0.05) {
            axes = vec!["I".into()];
        }
        let vars: Vec<(String, String)> = axes
            .iter()
            .map(|a| {
                let base = match a.as_str() {
                    "I" => "i",
                    "K" => "k",
                    _ => "j",
                };
                (self.fresh(base), a.clone())
            })
            .collect();
        let none = Scope { vars: vec![], written: vec![] };
        let (outs, kinds) = self.outputs(&vars, &none, false)?;
        let reduce = kinds.contains('R');
        let written: Vec<String> = outs.iter().map(|o| o.0.clone()).collect();
        let scope = Scope { vars: vars.clone(), written: written.clone() };
        let spatial = Scope {
            vars: vars.iter().zip(kinds.chars()).filter(|(_, k)| *k == 'S').map(|(v, _)| v.clone()).collect(),
            written,
        };
        let (init, body) = self.stores(&outs, &scope, reduce, &spatial);
        // fuse(I, J) when J is I's child, right after it, with the same kind.
        let mut groups: Vec<Vec<String>> = axes.iter().map(|a| vec![a.clone()]).collect();
        if let Some(p) = axes.iter().position(|a| a == "I") {
            let fusable = axes.get(p + 1).and_then(|a| self.col_kind(a)).is_some_and(|k| k != ColKind::DenseFixed);
            let kb = kinds.as_bytes();
            if fusable && kb[p] == kb[p + 1] && self.chance(0.3) {
                let j = groups.remove(p + 1);
                groups[p].extend(j);
            }
        }
        Some(SpIter {
            name: self.fresh("it"),
            axes: groups,
            kinds,
            vars: vars.into_iter().map(|v| v.0).collect(),
            init,
            body: body.into_iter().map(Item::Store).collect(),
        })
    }

    /// `sp_iter([I], "S")` around inner iterations over a column axis (sparse_softmax style):
    /// a reduction into a row temporary, then a spatial pass reading it.
    fn nested_iter(&mut self) -> Option<SpIter> {
        let i = self.fresh("i");
        let outer = Scope { vars: vec![(i.clone(), "I".into())], written: vec![] };
        let c = self.col();
        let mut body = Vec::new();
        let j = self.fresh("j");
        let tmp = self.pick(&["T", "V"]).to_string();
        let scope = Scope { vars: vec![(i.clone(), "I".into()), (j.clone(), c.clone())], written: vec![tmp.clone()] };
        let (init, red) = self.stores(&[(tmp.clone(), vec![i.clone()])], &scope, true, &Scope { vars: vec![(i.clone(), "I".into())], written: vec![tmp.clone()] });
        body.push(Item::Iter(SpIter {
            name: self.fresh("red"),
            axes: vec![vec![c.clone()]],
            kinds: "R".into(),
            vars: vec![j],
            init,
            body: red.into_iter().map(Item::Store).collect(),
        }));
        // Spatial pass: may read the temporary (now written).
        let j2 = self.fresh("j");
        let vars = vec![(j2.clone(), c.clone())];
        let (outs, kinds) = self.outputs(&vars, &outer, false)?;
        let written: Vec<String> = outs.iter().map(|o| o.0.clone()).filter(|b| *b != tmp).collect();
        // Every row writes its own outputs: an output that ignores the row iterator would be
        // a reduction over rows, which the verifier refuses for a spatial `i`.
        if outs.iter().any(|o| o.0 == tmp || !o.1.contains(&i)) {
            return None;
        }
        let mut sc = outer.clone();
        sc.vars.push((j2.clone(), c.clone()));
        sc.written = written.clone();
        // Reads of T are allowed here; mark it readable by un-allocating in the leaf filter.
        let (init2, st) = self.stores(&outs, &sc, kinds.contains('R'), &Scope { vars: outer.vars.clone(), written });
        let mut st: Vec<Item> = st.into_iter().map(Item::Store).collect();
        // Use the temporary in the first store.
        if let Some(Item::Store(s0)) = st.first_mut() {
            let ty = self.buf(&s0.buf).ty;
            let t = Expr { head: Head::Load(tmp.clone()), args: vec![Expr::var(&i)], ty: self.buf(&tmp).ty };
            let t = if t.ty == ty { t } else { Expr { head: Head::Cast, args: vec![t], ty } };
            let op = self.pick(&["+", "-", "*", "/"]);
            s0.value = Expr { head: Head::Bin(op), args: vec![s0.value.clone(), t], ty };
        }
        body.push(Item::Iter(SpIter {
            name: self.fresh("sp"),
            axes: vec![vec![c]],
            kinds,
            vars: vec![j2],
            init: init2,
            body: st,
        }));
        Some(SpIter { name: self.fresh("row"), axes: vec![vec!["I".into()]], kinds: "S".into(), vars: vec![i], init: vec![], body })
    }
}

fn gen_rows(rng: &mut Rng, kind: ColKind, m: usize, n: usize) -> Vec<Vec<i32>> {
    use sparsec::formats::gen;
    let to_rows = |c: sparsec::formats::Csr<i32, f32>| -> Vec<Vec<i32>> {
        (0..m).map(|r| c.indices()[c.indptr()[r] as usize..c.indptr()[r + 1] as usize].to_vec()).collect()
    };
    match kind {
        ColKind::DenseFixed | ColKind::Assembled { .. } | ColKind::Product { .. } => vec![],
        ColKind::RowsOfJd => gen_rows(rng, ColKind::SparseVariable, n, n),
        ColKind::SparseVariable => {
            let seed = rng.next_u64();
            let c = match rng.below(5) {
                0 if m > 0 => gen::single_full_row::<i32, f32>(m, n, rng.below(m), seed),
                1 => gen::with_empty_rows::<i32, f32>(m, n, seed),
                2 => gen::uniform::<i32, f32>(m, n, 0, seed),
                _ => {
                    let nnz = rng.below(m * n + 1);
                    gen::uniform::<i32, f32>(m, n, nnz, seed)
                }
            };
            to_rows(c.expect("generator parameters are in range"))
        }
        ColKind::SparseFixed => {
            let k = rng.below(n + 1);
            (0..m)
                .map(|_| {
                    let mut all: Vec<i32> = (0..n as i32).collect();
                    for x in 0..n {
                        let y = x + rng.below(n - x);
                        all.swap(x, y);
                    }
                    let mut r = all[..k].to_vec();
                    r.sort_unstable();
                    r
                })
                .collect()
        }
        ColKind::DenseVariable => {
            let long = if m > 0 && rng.below(4) == 0 { Some(rng.below(m)) } else { None };
            (0..m)
                .map(|r| {
                    let len = match long {
                        Some(l) => if l == r { n } else { 0 },
                        None => rng.below(n + 1),
                    };
                    (0..len as i32).collect()
                })
                .collect()
        }
    }
}

/// Generates the case of `seed` with the default options.
pub fn generate(seed: u64) -> Case {
    generate_with(seed, GenOptions::default())
}

/// Generates the case of `seed`: a program of one to three sparse iterations and its inputs.
pub fn generate_with(seed: u64, opts: GenOptions) -> Case {
    let mut rng = Rng::new(seed);
    let kinds = [ColKind::DenseFixed, ColKind::DenseVariable, ColKind::SparseFixed, ColKind::SparseVariable];
    let ncols = 1 + rng.below(2);
    let cols: Vec<ColKind> = (0..ncols).map(|_| kinds[rng.below(4)]).collect();
    let mut bufs = Vec::new();
    let ty = |rng: &mut Rng| if rng.below(4) == 0 { Ty::I32 } else { Ty::F32 };
    for (t, k) in cols.iter().enumerate() {
        let default = if *k != ColKind::DenseFixed && rng.below(3) == 0 { Some("1.5".to_string()) } else { None };
        let t0 = ty(&mut rng);
        let default = default.map(|d| if t0 == Ty::I32 { "3".into() } else { d });
        bufs.push(Buf { name: format!("A{t}"), axes: vec!["I".into(), format!("J{t}")], ty: t0, default, alloc: false });
        let t1 = ty(&mut rng);
        bufs.push(Buf { name: format!("B{t}"), axes: vec!["I".into(), format!("J{t}"), "K".into()], ty: t1, default: None, alloc: false });
    }
    for (name, axes) in [("X", vec!["I", "K"]), ("Y", vec!["JD", "K"]), ("V", vec!["I"]), ("W", vec!["JD"]), ("U", vec!["K"]), ("D", vec!["I", "JD"])] {
        let t = ty(&mut rng);
        bufs.push(Buf { name: name.into(), axes: axes.into_iter().map(String::from).collect(), ty: t, default: None, alloc: false });
    }
    bufs.push(Buf { name: "T".into(), axes: vec!["I".into()], ty: Ty::F32, default: None, alloc: true });
    let m = if rng.below(10) == 0 { 0 } else { 1 + rng.below(6) };
    let n = 1 + rng.below(6);
    let f = 1 + rng.below(3);
    // A root sparse `I` stores a random subset of the rows.
    let mut side = Rng::new(seed ^ 0x5ba5_e0f_1e55);
    let stored_rows: Option<Vec<i32>> = (opts.sparse_rows && side.below(4) == 0)
        .then(|| (0..m as i32).filter(|_| side.below(3) != 0).collect());
    let rows_of = stored_rows.as_ref().map_or(m, Vec::len);
    let mut rows: Vec<Vec<Vec<i32>>> = cols.iter().map(|&k| gen_rows(&mut rng, k, rows_of, n)).collect();
    // ELL rows padded as the binder pads them: the last slots repeat the row's last stored
    // coordinate (0 in an empty row), so a row may hold a coordinate twice.
    if opts.padded_rows && side.below(3) == 0 {
        for (k, rs) in cols.iter().zip(&mut rows) {
            if *k != ColKind::SparseFixed {
                continue;
            }
            for r in rs.iter_mut() {
                let pad = side.below(r.len() + 1);
                let keep = r.len() - pad;
                let last = if keep > 0 { r[keep - 1] } else { 0 };
                r[keep..].iter_mut().for_each(|x| *x = last);
            }
        }
    }
    let vseed = rng.next_u64();
    let sparse_rows = stored_rows.is_some();
    let mut g = Gen { opts: opts.clone(), nested: false, rng: &mut rng, prog: Prog { cols, sparse_rows, coo_rows: false, bufs, iters: vec![] }, counter: 0 };
    let count = 1 + g.rng.below(3);
    let mut tries = 0;
    while g.prog.iters.len() < count && tries < 20 {
        tries += 1;
        let it = if g.chance(0.25) {
            g.nested = true;
            let it = g.nested_iter();
            g.nested = false;
            it
        } else {
            g.flat_iter()
        };
        if let Some(it) = it {
            g.prog.iters.push(it);
        }
    }
    let mut prog = g.prog;
    if opts.merges && side.below(3) == 0 {
        co_iterate(&mut prog, &mut rows, &mut side, rows_of, n);
    }
    let mut own = Rng::new(seed ^ 0x2545_f491_4f6c_dd1d);
    if opts.products && !prog.sparse_rows && own.below(5) == 0 {
        multiply(&mut prog, &mut rows, &mut own, m, n);
    }
    let mut stored_rows = stored_rows;
    let mut coo = Rng::new(seed ^ 0x9e37_79b9_7f4a_7c15);
    if opts.coo_rows && prog.sparse_rows && coo.below(2) == 0 {
        repeat_rows(&mut prog, &mut rows, &mut stored_rows, &mut coo);
    }
    Case { seed, prog, data: Data { m, n, f, rows, stored_rows, seed: vseed, finite: !opts.non_finite } }
}

/// Makes the root sparse `I` of `prog` repeat rows (COO) where the program verifies with every
/// iterator over `I` a reduction: each stored row becomes one to three positions, which repeat
/// its columns' rows too (whole coordinates repeated, which add up).
fn repeat_rows(prog: &mut Prog, rows: &mut [Vec<Vec<i32>>], stored_rows: &mut Option<Vec<i32>>, rng: &mut Rng) {
    fn reduce_rows(it: &mut SpIter) {
        let mut k = 0;
        let mut kinds: Vec<char> = it.kinds.chars().collect();
        for entry in &it.axes {
            for axis in entry {
                if axis == "I" {
                    if let Some(c) = kinds.get_mut(k) {
                        *c = 'R';
                    }
                }
                k += 1;
            }
        }
        it.kinds = kinds.into_iter().collect();
        for item in &mut it.body {
            if let Item::Iter(inner) = item {
                reduce_rows(inner);
            }
        }
    }
    let Some(stored) = stored_rows.as_mut() else { return };
    let mut coo = prog.clone();
    coo.coo_rows = true;
    coo.iters.iter_mut().for_each(reduce_rows);
    let verifies = sparsec::ir::text::parse_func("coo.sptir", &coo.to_sptir()).is_ok_and(|f| sparsec::ir::verify::verify_func(&f).is_ok());
    if !verifies {
        return;
    }
    *prog = coo;
    let times: Vec<usize> = stored.iter().map(|_| 1 + rng.below(3)).collect();
    let repeat = |v: &[Vec<i32>]| v.iter().zip(&times).flat_map(|(r, &t)| std::iter::repeat_n(r.clone(), t)).collect::<Vec<_>>();
    *stored = stored.iter().zip(&times).flat_map(|(&r, &t)| std::iter::repeat_n(r, t)).collect();
    for col in rows.iter_mut() {
        // Dense-fixed columns hold no rows.
        if col.len() == times.len() {
            *col = repeat(col);
        }
    }
}

/// Turns one iterator over a CSR column axis `J<t>` (an entry of its own) into a
/// co-iteration of `J<t>` with another CSR axis, added (with rows from `side`) where the
/// program has none. A union only where no store takes the iterator as a coordinate of a
/// sparse dimension (which a union's coordinate may be absent from); an intersection anywhere.
fn co_iterate(prog: &mut Prog, rows: &mut Vec<Vec<Vec<i32>>>, side: &mut Rng, rows_of: usize, n: usize) {
    /// Visits every single-axis entry over a CSR axis: (iteration, entry index, variable).
    fn entries(it: &mut SpIter, cols: &[ColKind], f: &mut dyn FnMut(&mut SpIter, usize, String)) {
        for e in 0..it.axes.len() {
            let csr = it.axes[e].len() == 1
                && it.axes[e][0].strip_prefix('J').and_then(|t| t.parse::<usize>().ok()).is_some_and(|t| cols[t] == ColKind::SparseVariable);
            if csr {
                let k: usize = it.axes[..e].iter().map(Vec::len).sum();
                let var = it.vars[k].clone();
                f(it, e, var);
            }
        }
        for item in &mut it.body {
            if let Item::Iter(inner) = item {
                entries(inner, cols, f);
            }
        }
    }
    /// Whether a store of `it` (nested ones too) indexes a sparse column dimension by `var`.
    fn sparse_store(it: &SpIter, var: &str, bufs: &[Buf], cols: &[ColKind]) -> bool {
        let sparse = |axis: &str| axis.strip_prefix('J').and_then(|t| t.parse::<usize>().ok()).is_some_and(|t| cols[t] != ColKind::DenseFixed);
        let hit = |s: &Store| {
            let axes = bufs.iter().find(|b| b.name == s.buf).map(|b| b.axes.clone()).unwrap_or_default();
            s.idx.iter().zip(&axes).any(|(e, a)| e.head == Head::Var(var.to_string()) && sparse(a))
        };
        it.init.iter().any(hit)
            || it.body.iter().any(|item| match item {
                Item::Store(s) => hit(s),
                Item::Iter(inner) => sparse_store(inner, var, bufs, cols),
            })
    }
    let cols = prog.cols.clone();
    let mut count = 0;
    for it in &mut prog.iters {
        entries(it, &cols, &mut |_, _, _| count += 1);
    }
    if count == 0 {
        return;
    }
    let pick = side.below(count);
    let others: Vec<usize> = (0..cols.len()).filter(|&t| cols[t] == ColKind::SparseVariable).collect();
    let partner_of = |own: usize, side: &mut Rng, prog_cols: &mut Vec<ColKind>, rows: &mut Vec<Vec<Vec<i32>>>| {
        match others.iter().copied().filter(|&u| u != own).collect::<Vec<_>>() {
            o if !o.is_empty() && side.below(2) == 0 => o[side.below(o.len())],
            _ => {
                prog_cols.push(ColKind::SparseVariable);
                rows.push(gen_rows(side, ColKind::SparseVariable, rows_of, n));
                prog_cols.len() - 1
            }
        }
    };
    let (bufs, mut new_cols) = (prog.bufs.clone(), prog.cols.clone());
    let mut seen = 0;
    let mut merged = None;
    for it in &mut prog.iters {
        entries(it, &cols, &mut |it, e, var| {
            if seen == pick {
                let own: usize = it.axes[e][0][1..].parse().unwrap_or(0);
                let other = partner_of(own, side, &mut new_cols, rows);
                let union = !sparse_store(it, &var, &bufs, &cols) && side.below(2) == 0;
                let op = if union { "union" } else { "intersect" };
                it.axes[e] = vec![format!("{op}(J{own}, J{other})")];
                merged = Some((union, own, other));
            }
            seen += 1;
        });
    }
    prog.cols = new_cols;
    // Half the time, a sparse output over the same pattern, written by an iteration of its own.
    if let Some((union, a, b)) = merged.filter(|_| !prog.sparse_rows && side.below(2) == 0) {
        assemble(prog, rows, union, a, b);
    }
}

/// Adds a sparse output `P<t>` over a new axis `J<t>` assembled from `op(J<a>, J<b>)`, and a
/// last iteration over that co-iteration writing it from the pool's buffers over `I`, the
/// members and `JD`.
fn assemble(prog: &mut Prog, rows: &mut Vec<Vec<Vec<i32>>>, union: bool, a: usize, b: usize) {
    let t = prog.cols.len();
    prog.cols.push(ColKind::Assembled { union, a, b });
    // Empty rows (as a reproducer reads them back): the run computes the pattern.
    let m = rows.get(a).map_or(0, Vec::len);
    rows.push(vec![vec![]; m]);
    let (i, j) = (format!("pi{t}"), format!("pj{t}"));
    let mut value = Expr::lit("0.5", Ty::F32);
    for buf in prog.bufs.iter().filter(|x| x.ty == Ty::F32 && !x.alloc) {
        let idx = match buf.axes.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
            ["I", x] if *x == format!("J{a}") || *x == format!("J{b}") => vec![Expr::var(&i), Expr::var(&j)],
            ["I"] => vec![Expr::var(&i)],
            ["JD"] => vec![Expr::var(&j)],
            _ => continue,
        };
        let load = Expr { head: Head::Load(buf.name.clone()), args: idx, ty: Ty::F32 };
        value = Expr { head: Head::Bin("+"), args: vec![value, load], ty: Ty::F32 };
    }
    let name = format!("P{t}");
    prog.bufs.push(Buf { name: name.clone(), axes: vec!["I".into(), format!("J{t}")], ty: Ty::F32, default: None, alloc: false });
    let op = if union { "union" } else { "intersect" };
    prog.iters.push(SpIter {
        name: format!("assemble{t}"),
        axes: vec![vec!["I".into()], vec![format!("{op}(J{a}, J{b})")]],
        kinds: "SS".into(),
        vars: vec![i.clone(), j.clone()],
        init: vec![],
        body: vec![Item::Store(Store { buf: name, idx: vec![Expr::var(&i), Expr::var(&j)], value })],
    });
}

/// Adds a sparse product `P<t> = A · Q<b>` over a new assembled axis `J<t>` of pattern
/// `product(J<a>, J<b>)`: `J<a>` a CSR axis of `I` (a new one where the program has none),
/// `J<b>` new rows over `JD`, and a last iteration `[I, J<a>, attach(J<b>, J<a>)]` adding
/// `left * Q<b>[j, k]` at `P<t>[i, k]`, `left` a pool value at `(i, j)`, `j`, `i` or a literal.
fn multiply(prog: &mut Prog, rows: &mut Vec<Vec<Vec<i32>>>, rng: &mut Rng, m: usize, n: usize) {
    let csr: Vec<usize> = (0..prog.cols.len()).filter(|&t| prog.cols[t] == ColKind::SparseVariable).collect();
    let a = match csr.as_slice() {
        [] => {
            prog.cols.push(ColKind::SparseVariable);
            rows.push(gen_rows(rng, ColKind::SparseVariable, m, n));
            prog.cols.len() - 1
        }
        c => c[rng.below(c.len())],
    };
    prog.cols.push(ColKind::RowsOfJd);
    rows.push(gen_rows(rng, ColKind::RowsOfJd, m, n));
    let b = prog.cols.len() - 1;
    prog.bufs.push(Buf { name: format!("Q{b}"), axes: vec!["JD".into(), format!("J{b}")], ty: Ty::F32, default: None, alloc: false });
    prog.cols.push(ColKind::Product { a, b });
    rows.push(vec![vec![]; m]);
    let t = prog.cols.len() - 1;
    let out = format!("P{t}");
    prog.bufs.push(Buf { name: out.clone(), axes: vec!["I".into(), format!("J{t}")], ty: Ty::F32, default: None, alloc: false });
    let (i, j, k) = (format!("pi{t}"), format!("pj{t}"), format!("pk{t}"));
    let load = |buf: &str, idx: &[&str]| Expr { head: Head::Load(buf.into()), args: idx.iter().map(|v| Expr::var(v)).collect(), ty: Ty::F32 };
    // The left factor: an f32 parameter over `[I, J<a>]`, `[JD]` or `[I]`, or a literal.
    let mut lefts = vec![Expr::lit("0.5", Ty::F32)];
    for buf in prog.bufs.iter().filter(|x| x.ty == Ty::F32 && !x.alloc) {
        match buf.axes.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
            ["I", x] if *x == format!("J{a}") => lefts.push(load(&buf.name, &[&i, &j])),
            ["JD"] => lefts.push(load(&buf.name, &[&j])),
            ["I"] => lefts.push(load(&buf.name, &[&i])),
            _ => {}
        }
    }
    let left = lefts[rng.below(lefts.len())].clone();
    let product = Expr { head: Head::Bin("*"), args: vec![left, load(&format!("Q{b}"), &[&j, &k])], ty: Ty::F32 };
    let value = Expr { head: Head::Bin("+"), args: vec![load(&out, &[&i, &k]), product], ty: Ty::F32 };
    prog.iters.push(SpIter {
        name: format!("product{t}"),
        axes: vec![vec!["I".into()], vec![format!("J{a}")], vec![format!("attach(J{b}, J{a})")]],
        kinds: "SRS".into(),
        vars: vec![i.clone(), j, k.clone()],
        init: vec![],
        body: vec![Item::Store(Store { buf: out, idx: vec![Expr::var(&i), Expr::var(&k)], value })],
    });
}

/// Transcendental intrinsics: correctly rounded by the interpreter, within a few ulp on GPUs
/// (WGSL's `tanh(16.0)` may be `0.99999994`), so compared with a tolerance; and `fma`, which
/// WGSL lets an implementation round twice.
const INEXACT_CALLS: &[&str] = &["exp", "log", "sqrt", "tanh", "sigmoid", "pow", "fma"];

/// `e` with its transcendental calls replaced by their first operand: what a discontinuous
/// operation (a cast to an integer, a comparison, `floor`) consumes, which would turn an ulp
/// of legitimate difference into a different integer or branch.
fn exact(e: Expr) -> Expr {
    match e.head {
        Head::Call(f) if INEXACT_CALLS.contains(&f) => {
            e.args.into_iter().next().map(exact).unwrap_or_else(|| Expr::lit("1.0", Ty::F32))
        }
        head => Expr { head, args: e.args.into_iter().map(exact).collect(), ty: e.ty },
    }
}

// ---------------------------------------------------------------------------------------------
// Inputs

fn i32s(v: impl IntoIterator<Item = usize>) -> Array {
    Array::I32(v.into_iter().map(|x| x as i32).collect())
}

/// Runs `f3`, lowered from `f1`, on `backend` as `sparsec run` does (`sparsec::backend::run`,
/// with `f1` as the loaded file): as `--checked` code where the argument checks cannot prove
/// `f1`'s accesses in range. Returns whether it ran checked, and the result.
pub fn run_as_cli(backend: &dyn sparsec::backend::Backend, f1: &Func, f3: &Func, args: &Args) -> (bool, Result<Args, String>) {
    run_as_cli_with(backend, f1, f3, &sparsec::driver::Plan::Plain, args)
}

/// [`run_as_cli`] with `f3` lowered by `plan` (which also lowers a sparse output's symbolic
/// phase, `sparsec::assembly`).
pub fn run_as_cli_with(
    backend: &dyn sparsec::backend::Backend,
    f1: &Func,
    f3: &Func,
    plan: &sparsec::driver::Plan,
    args: &Args,
) -> (bool, Result<Args, String>) {
    let loaded = match sparsec::driver::load_text("fuzz.sptir", sparsec::ir::text::print_func(f1)) {
        Ok(l) => l,
        Err(e) => return (false, Err(e.to_string())),
    };
    // The interpreter checks every index itself (the CLI's `--checked` is for generated code).
    let checked = !backend.checks_indices() && sparsec::ir::args::check_accesses(f1, args).is_err();
    (checked, sparsec::backend::run(backend, &loaded, f1, f3, plan, args, checked).map_err(|e| e.to_string()))
}

/// The arguments of `func` (the parsed program of `case`): index arrays and scalars from the
/// data, every buffer parameter filled with random values of the right length.
pub fn build_args(func: &Func, cols: &[ColKind], d: &Data) -> Result<Args, String> {
    let mut args = Args::new();
    args.int("m", d.m as i64).int("n", d.n as i64).int("f", d.f as i64);
    if let Some(r) = &d.stored_rows {
        args.int("ki", r.len() as i64);
        args.array("rowsi", Array::I32(r.clone()));
    }
    for (t, (k, rows)) in cols.iter().zip(&d.rows).enumerate() {
        let mut indptr = vec![0usize];
        for r in rows {
            indptr.push(indptr.last().unwrap() + r.len());
        }
        let indices = Array::I32(rows.iter().flatten().copied().collect());
        match k {
            ColKind::DenseFixed => {}
            ColKind::DenseVariable => {
                args.int(format!("nnz{t}"), *indptr.last().unwrap() as i64);
                args.array(format!("indptr{t}"), i32s(indptr));
            }
            ColKind::SparseFixed => {
                args.int(format!("k{t}"), rows.first().map_or(0, |r| r.len()) as i64);
                args.array(format!("indices{t}"), indices);
            }
            ColKind::SparseVariable | ColKind::RowsOfJd => {
                args.int(format!("nnz{t}"), *indptr.last().unwrap() as i64);
                args.array(format!("indptr{t}"), i32s(indptr));
                args.array(format!("indices{t}"), indices);
            }
            // The run assembles it, and the buffers over it.
            ColKind::Assembled { .. } | ColKind::Product { .. } => {}
        }
    }
    let mut rng = Rng::new(d.seed);
    for (b, buf) in func.buffers.iter() {
        let Storage::Param(p) = buf.storage else { continue };
        if sparsec::ir::args::over_assembled(func, b) {
            continue;
        }
        let len = sparsec::ir::args::buffer_len(func, b, &args).map_err(|e| format!("length of `{}`: {e}", buf.name))?;
        let special = |rng: &mut Rng| rng.below(40) == 0;
        let a = match buf.dtype {
            sparsec::ir::DType::I32 => Array::I32(
                (0..len)
                    .map(|_| {
                        if special(&mut rng) {
                            [i32::MAX, i32::MIN, 65536, 0][rng.below(4)]
                        } else {
                            rng.below(11) as i32 - 5
                        }
                    })
                    .collect(),
            ),
            _ => Array::F32(
                (0..len)
                    .map(|_| {
                        if special(&mut rng) {
                            let specials = [0.0, 1e30, f32::INFINITY, f32::NEG_INFINITY, f32::NAN];
                            specials[rng.below(if d.finite { 2 } else { 5 })]
                        } else {
                            rng.f32() * 4.0
                        }
                    })
                    .collect(),
            ),
        };
        args.array(func.params[p].name.clone(), a);
    }
    Ok(args)
}

// ---------------------------------------------------------------------------------------------
// Running and comparing

/// A further execution of the Stage-III function (a backend): returns every array.
pub type Backend<'a> = Box<dyn Fn(&Func, &Args) -> Result<Args, String> + 'a>;

/// A backend given the Stage-I function too (to check the arguments against it, or to
/// schedule and lower it itself), then the Stage-III function.
pub type StagedBackend<'a> = Box<dyn Fn(&Func, &Func, &Args) -> Result<Args, String> + 'a>;

/// What one case gave.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Every execution succeeded with the same arrays.
    Agree,
    /// Every execution failed (first message).
    AllFailed(String),
    /// The passes refused a construct (`PassError::Unsupported`): not a bug.
    Unsupported(String),
    /// The generated program or its inputs were refused (parse, verify, sizes): a generator
    /// bug unless the refusal is itself wrong.
    Rejected(String),
    /// A disagreement, a compiler-bug pass error or a panic.
    Failure(String),
}

impl Outcome {
    /// Whether this is a [`Outcome::Failure`].
    pub fn is_failure(&self) -> bool {
        matches!(self, Outcome::Failure(_))
    }

    /// For a failure, its message without numbers and quoted names: two failures with the
    /// same key are taken to be the same bug (the shrinker keeps the key).
    pub fn key(&self) -> Option<String> {
        let Outcome::Failure(msg) = self else { return None };
        let mut out = String::new();
        let mut quoted = false;
        for ch in msg.chars() {
            match ch {
                '`' => {
                    quoted = !quoted;
                    out.push('`');
                }
                _ if quoted || ch.is_ascii_digit() => {}
                _ => out.push(ch),
            }
        }
        Some(out)
    }
}

/// Runs cases through the interpreter at every stage and through the added backends.
pub struct Runner<'a> {
    /// Named backends run on the Stage-III function.
    pub backends: Vec<(String, Backend<'a>)>,
    /// Named backends given the Stage-I and the Stage-III function.
    pub staged_backends: Vec<(String, StagedBackend<'a>)>,
    /// Interpreter fuel per run.
    pub max_steps: u64,
    /// f32 relative tolerance.
    pub rtol: f32,
}

impl Default for Runner<'_> {
    fn default() -> Self {
        Runner { backends: Vec::new(), staged_backends: Vec::new(), max_steps: 1 << 22, rtol: 1e-4 }
    }
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

fn close(a: f32, b: f32, rtol: f32, scale: f32) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a.is_infinite() || b.is_infinite() {
        return a == b;
    }
    (a - b).abs() <= rtol * a.abs().max(b.abs()) + rtol * 1e-3 * scale
}

/// Whether `f` casts a float to an integer: then integer results inherit the float
/// tolerance (a transcendental or a division one ulp off truncates to another integer).
fn casts_float_to_int(f: &Func) -> bool {
    let mut found = false;
    sparsec::ir::walk_stmts(&f.body, &mut |st| {
        for e in st.kind.exprs() {
            e.walk(&mut |x| {
                if let sparsec::ir::Expr::Cast(d, a) = x {
                    found |= d.is_int() && f.expr_dtype(a).is_float();
                }
            });
        }
    });
    found
}

/// `f` with every f32 (buffers, variables, literals, casts) widened to f64: the same program
/// nearly without rounding error.
fn widened(f: &Func) -> Func {
    use sparsec::ir::{DType, Expr as E, Intrinsic};
    let wide = |d: DType| if d == DType::F32 { DType::F64 } else { d };
    let mut g = f.clone();
    for (_, b) in g.buffers.iter_mut() {
        b.dtype = wide(b.dtype);
    }
    for (_, v) in g.vars.iter_mut() {
        v.dtype = wide(v.dtype);
    }
    let mut widen = |e: E| {
        e.map(&mut |x| match x {
            E::Float(v, DType::F32) => E::Float(v, DType::F64),
            E::Cast(DType::F32, a) => E::Cast(DType::F64, a),
            E::Call(Intrinsic::MaxValue(DType::F32), _) => E::Float(f32::MAX as f64, DType::F64),
            E::Call(Intrinsic::MinValue(DType::F32), _) => E::Float(f32::MIN as f64, DType::F64),
            x => x,
        })
    };
    for (_, b) in g.buffers.iter_mut() {
        b.default = b.default.take().map(&mut widen);
    }
    sparsec::ir::func::map_exprs_deep(&mut g.body, &mut widen);
    g
}

/// `args` with f32 arrays as f64 ones, for [`widened`].
fn widened_args(args: &Args) -> Args {
    let mut out = args.clone();
    for a in out.arrays.values_mut() {
        if let Array::F32(v) = a {
            *a = Array::F64(v.iter().map(|&x| x as f64).collect());
        }
    }
    out
}

/// `f` (already [`widened`]) with the result of every transcendental call and float division
/// moved by the most error sparsec allows it (docs/language.md, "Accuracy": WGSL's bounds, the loosest
/// target's), up when `up(k)` for the `k`-th call in walk order and down otherwise.
fn perturbed(f: &Func, up: &dyn Fn(usize) -> bool) -> Func {
    use sparsec::ir::{BinOp as B, DType, Expr as E, Intrinsic as I};
    const ULP: f64 = f32::EPSILON as f64;
    let c = |v: f64| E::Float(v, DType::F64);
    let bin = |op, a: E, b: E| E::binary(op, a, b);
    let abs = |a: E| E::Call(I::Abs, vec![a]);
    let mul = move |a: E, b: E| bin(B::Mul, a, b);
    let add = move |a: E, b: E| bin(B::Add, a, b);
    // The largest error of `log2(|x|)`: absolute 2^-21 on [0.5, 2], else 3 ulp.
    let log2_err = move |x: &E| {
        let ax = abs(x.clone());
        let near_one = bin(B::And, bin(B::Ge, ax.clone(), c(0.5)), bin(B::Le, ax.clone(), c(2.0)));
        let rel = mul(abs(mul(E::Call(I::Log, vec![ax]), c(std::f64::consts::LOG2_E))), c(3.0 * ULP));
        E::Select(Box::new(near_one), Box::new(c(2f64.powi(-21))), Box::new(rel))
    };
    let mut k = 0;
    let mut g = f.clone();
    let func = f;
    let mut move_result = |e: E| {
        e.map(&mut |x| {
            let float_div = matches!(&x, E::Binary(B::Div, ..)) && func.expr_dtype(&x).is_float();
            let (f, args) = match &x {
                E::Call(f, args) => (Some(*f), args.clone()),
                _ if float_div => (None, Vec::new()),
                _ => return x,
            };
            let a = args.first().cloned().unwrap_or_else(|| c(0.0));
            let r = x.clone();
            let Some(f) = f else {
                // WGSL divides floats within 2.5 ulp.
                let sign = if up(k) { 1.0 } else { -1.0 };
                k += 1;
                return add(r.clone(), mul(c(sign), mul(abs(r), c(2.5 * ULP))));
            };
            let bound = match f {
                I::Exp => mul(abs(r.clone()), mul(add(c(3.0), mul(c(2.0), abs(a))), c(ULP))),
                I::Log => log2_err(&a),
                I::Sqrt => mul(abs(r.clone()), c(3.0 * ULP)),
                // sinh / cosh, each from two `exp`s: relative, and absolute near 0.
                I::Tanh => add(mul(abs(r.clone()), mul(add(c(6.0), mul(c(4.0), abs(a))), c(ULP))), c(8.0 * ULP)),
                I::Sigmoid => mul(abs(r.clone()), mul(add(c(6.0), mul(c(2.0), abs(a))), c(ULP))),
                // exp2(y * log2(x)): exp2's error at z = y * log2(x), and log2's through z.
                I::Pow => {
                    let y = args.get(1).cloned().unwrap_or_else(|| c(1.0));
                    let z = abs(mul(y.clone(), mul(E::Call(I::Log, vec![abs(a.clone())]), c(std::f64::consts::LOG2_E))));
                    let exp2 = mul(add(c(3.0), mul(c(2.0), z.clone())), c(ULP));
                    let through = mul(c(std::f64::consts::LN_2), add(mul(abs(y), log2_err(&a)), mul(z, c(ULP))));
                    mul(abs(r.clone()), add(exp2, through))
                }
                _ => return x,
            };
            let sign = if up(k) { 1.0 } else { -1.0 };
            k += 1;
            // A bound that is NaN (`log2` of 0 times a zero exponent) moves nothing.
            let bound = E::Select(Box::new(bin(B::Eq, bound.clone(), bound.clone())), Box::new(bound), Box::new(c(0.0)));
            add(r, mul(c(sign), bound))
        })
    };
    for (_, b) in g.buffers.iter_mut() {
        b.default = b.default.take().map(&mut move_result);
    }
    sparsec::ir::func::map_exprs_deep(&mut g.body, &mut move_result);
    g
}

/// Whether every f32 result in `got` that misses `want` lies within what the allowed error of
/// transcendental calls can move it to: between the least and the largest of the f64 run
/// `exact` and the [`perturbed`] runs `runs`, up to four times `want`'s rounding error (NaN
/// or inf only where one of those runs has it). Where the program casts floats to integers
/// (`inexact_ints`), an i32 result may likewise be any value between those runs' and
/// `want`'s (a cast of `pow(..)` near 1 is 0 or 1). Other arrays compare as usual.
fn within_accuracy(want: &Args, exact: &Args, runs: &[Args], got: &Args, rtol: f32, inexact_ints: bool) -> bool {
    let mut rest = (Args::new(), Args::new());
    for (name, w) in &want.arrays {
        if let (true, Array::I32(w), Some(Array::I32(x)), Some(Array::I32(g))) = (inexact_ints, w, exact.arrays.get(name), got.arrays.get(name)) {
            let others = same_arrays(runs, name, x.len(), |a| match a {
                Array::I32(v) => Some(v),
                _ => None,
            });
            if w.len() != x.len() || w.len() != g.len() {
                return false;
            }
            let between = (0..w.len()).all(|i| {
                let vals = [w[i], x[i]].into_iter().chain(others.iter().map(|v| v[i]));
                let (lo, hi) = vals.fold((i32::MAX, i32::MIN), |(l, h), v| (l.min(v), h.max(v)));
                (lo..=hi).contains(&g[i])
            });
            if !between {
                return false;
            }
            continue;
        }
        let (Some(Array::F64(x)), Some(g)) = (exact.arrays.get(name), got.arrays.get(name)) else {
            rest.0.array(name.clone(), w.clone());
            rest.1.array(name.clone(), got.arrays.get(name).cloned().unwrap_or_else(|| w.clone()));
            continue;
        };
        let (Array::F32(w), Array::F32(g)) = (w, g) else { return false };
        let others = same_arrays(runs, name, x.len(), |a| match a {
            Array::F64(v) => Some(v),
            _ => None,
        });
        if w.len() != x.len() || w.len() != g.len() {
            return false;
        }
        let err = w.iter().zip(x).filter(|(a, b)| a.is_finite() && b.is_finite()).fold(0f64, |m, (&a, &b)| m.max((a as f64 - b).abs()));
        let scale = w.iter().filter(|v| v.is_finite()).fold(1f32, |m, v| m.max(v.abs()));
        let ok = (0..w.len()).all(|i| {
            let c = g[i];
            if close(c, w[i], rtol, scale) {
                return true;
            }
            let vals: Vec<f64> = std::iter::once(x[i]).chain(others.iter().map(|v| v[i])).collect();
            if c.is_nan() {
                return vals.iter().any(|v| v.is_nan());
            }
            if c.is_infinite() {
                return vals.iter().any(|v| v.signum() == c.signum() as f64 && v.abs() >= f32::MAX as f64);
            }
            let finite: Vec<f64> = vals.into_iter().filter(|v| v.is_finite()).collect();
            let (Some(lo), Some(hi)) = (finite.iter().copied().reduce(f64::min), finite.iter().copied().reduce(f64::max)) else {
                return false;
            };
            let slack = 4.0 * err + rtol as f64 * (lo.abs().max(hi.abs()) + 1e-3 * scale as f64);
            (lo - slack..=hi + slack).contains(&(c as f64))
        });
        if !ok {
            return false;
        }
    }
    compare(&rest.0, &rest.1, rtol, inexact_ints).is_none()
}

/// Array `name` of each run in `runs` that holds it as `pick` reads it, with `len` elements.
fn same_arrays<'a, T>(runs: &'a [Args], name: &str, len: usize, pick: impl Fn(&'a Array) -> Option<&'a Vec<T>>) -> Vec<&'a Vec<T>> {
    runs.iter().filter_map(|r| r.arrays.get(name).and_then(&pick)).filter(|v| v.len() == len).collect()
}

/// Whether `got` is as close to the f64 run `exact` as the f32 reference `want` is, up to a
/// factor: an element of an f32 output array passes the usual comparison with `want`, or is
/// within four times the largest rounding error of `want` in that array from `exact` (a sum
/// that cancels terms near 2^31 is off by units in any order); other arrays compare as usual.
fn within_rounding(want: &Args, exact: &Args, got: &Args, rtol: f32, inexact_ints: bool) -> bool {
    let mut rest = (Args::new(), Args::new());
    for (name, w) in &want.arrays {
        let (Some(x), Some(g)) = (exact.arrays.get(name), got.arrays.get(name)) else { return false };
        let (Array::F32(w), Array::F64(x), Array::F32(g)) = (w, x, g) else {
            rest.0.array(name.clone(), w.clone());
            rest.1.array(name.clone(), g.clone());
            continue;
        };
        if w.len() != x.len() || w.len() != g.len() {
            return false;
        }
        let err = w.iter().zip(x).filter(|(a, b)| a.is_finite() && b.is_finite()).fold(0f64, |m, (&a, &b)| m.max((a as f64 - b).abs()));
        let scale = w.iter().filter(|v| v.is_finite()).fold(1f32, |m, v| m.max(v.abs()));
        let ok = w.iter().zip(x).zip(g).all(|((&a, &b), &c)| {
            close(c, a, rtol, scale) || (c.is_finite() && b.is_finite() && (c as f64 - b).abs() <= 4.0 * err)
        });
        if !ok {
            return false;
        }
    }
    compare(&rest.0, &rest.1, rtol, inexact_ints).is_none()
}

/// The shadows of one float buffer or `let` in [`shadowed`]: its terms' magnitudes and its
/// roundings.
type ShadowPair<T> = (T, T);

/// Per float parameter of [`shadowed`]'s function: its name and its two shadows' names.
type ShadowNames = Vec<(String, String, String)>;

/// How [`shadowed`] maps the buffers and `let`s of the widened function to their shadows.
struct Shadows {
    bufs: std::collections::HashMap<sparsec::ir::BufferId, ShadowPair<sparsec::ir::BufferId>>,
    vars: std::collections::HashMap<sparsec::ir::VarId, ShadowPair<sparsec::ir::VarId>>,
    /// Per float parameter's buffer, the largest magnitude shadow stored to each element
    /// over the run (`<name>__peak`).
    peaks: std::collections::HashMap<sparsec::ir::BufferId, sparsec::ir::BufferId>,
}

impl Shadows {
    /// The sum of the magnitudes of the terms the float expression `e` is made of.
    fn mag(&self, f: &Func, e: &sparsec::ir::Expr) -> sparsec::ir::Expr {
        use sparsec::ir::{BinOp as B, DType, Expr as E, Intrinsic as I, UnOp};
        let abs = |x: E| E::Call(I::Abs, vec![x]);
        match e {
            E::Float(v, _) => E::Float(v.abs(), DType::F64),
            E::Var(v) => self.vars.get(v).map_or_else(|| abs(e.clone()), |s| E::Var(s.0)),
            E::Load(b, idx) => self.bufs.get(b).map_or_else(|| abs(e.clone()), |s| E::Load(s.0, idx.clone())),
            E::Binary(op @ (B::Add | B::Sub | B::Mul), a, b) => {
                E::binary(if *op == B::Mul { B::Mul } else { B::Add }, self.mag(f, a), self.mag(f, b))
            }
            // The divisor's value, not its magnitude, scales the dividend's terms.
            E::Binary(B::Div, a, b) => E::Select(
                Box::new(E::binary(B::Eq, (**b).clone(), E::Float(0.0, DType::F64))),
                Box::new(abs(e.clone())),
                Box::new(E::binary(B::Div, self.mag(f, a), abs((**b).clone()))),
            ),
            E::Binary(B::Min | B::Max, a, b) => E::binary(B::Max, self.mag(f, a), self.mag(f, b)),
            E::Unary(UnOp::Neg, a) => self.mag(f, a),
            E::Call(I::Abs, a) if a.len() == 1 => self.mag(f, &a[0]),
            E::Call(I::Fma, a) if a.len() == 3 => E::binary(B::Add, E::binary(B::Mul, self.mag(f, &a[0]), self.mag(f, &a[1])), self.mag(f, &a[2])),
            E::Select(c, a, b) => E::Select(c.clone(), Box::new(self.mag(f, a)), Box::new(self.mag(f, b))),
            E::Cast(_, a) if f.expr_dtype(a).is_float() => self.mag(f, a),
            // Other functions: their result alone (no reassociation across them).
            _ => abs(e.clone()),
        }
    }

    /// How many roundings make the float expression `e` (an `fma` counts its unfused two).
    fn rounds(&self, f: &Func, e: &sparsec::ir::Expr) -> sparsec::ir::Expr {
        use sparsec::ir::{BinOp as B, DType, Expr as E, Intrinsic as I, UnOp};
        let c = |v: f64| E::Float(v, DType::F64);
        let sum = |xs: Vec<E>, k: f64| xs.into_iter().fold(c(k), |s, x| E::binary(B::Add, s, x));
        match e {
            E::Float(..) | E::Call(I::MaxValue(_) | I::MinValue(_), _) => c(0.0),
            E::Var(v) => self.vars.get(v).map_or_else(|| c(0.0), |s| E::Var(s.1)),
            E::Load(b, idx) => self.bufs.get(b).map_or_else(|| c(0.0), |s| E::Load(s.1, idx.clone())),
            E::Binary(B::Add | B::Sub | B::Mul | B::Div, a, b) => sum(vec![self.rounds(f, a), self.rounds(f, b)], 1.0),
            E::Binary(B::Min | B::Max, a, b) => E::binary(B::Max, self.rounds(f, a), self.rounds(f, b)),
            E::Unary(UnOp::Neg, a) => self.rounds(f, a),
            E::Call(I::Abs, a) if a.len() == 1 => self.rounds(f, &a[0]),
            E::Call(I::Fma, a) if a.len() == 3 => sum(a.iter().map(|x| self.rounds(f, x)).collect(), 2.0),
            E::Select(cnd, a, b) => E::Select(cnd.clone(), Box::new(self.rounds(f, a)), Box::new(self.rounds(f, b))),
            E::Cast(_, a) if f.expr_dtype(a).is_float() => self.rounds(f, a),
            _ => c(1.0),
        }
    }

    /// Adds the shadow statements to `list` and its nested lists: each float store and `let`
    /// is followed by its two shadows (computed before it, from the values it reads), each
    /// allocation of a float buffer by its shadows'.
    fn add_to(&self, base: &Func, vars: &mut sparsec::ir::Arena<sparsec::ir::Var>, list: &mut Vec<sparsec::ir::Stmt>) {
        use sparsec::ir::{DType, Expr as E, Stmt, StmtKind as K, Var};
        for mut s in std::mem::take(list) {
            for l in s.kind.child_lists_mut() {
                self.add_to(base, vars, l);
            }
            let let_ = |var, value| Stmt::new(K::Let { var, value });
            match &s.kind {
                K::Store { buffer, indices, value } if self.bufs.contains_key(buffer) => {
                    let (m, n) = self.bufs[buffer];
                    let k = vars.len();
                    let tm = vars.append(Var { name: format!("__mag{k}"), dtype: DType::F64 });
                    let tn = vars.append(Var { name: format!("__rounds{k}"), dtype: DType::F64 });
                    list.push(let_(tm, self.mag(base, value)));
                    list.push(let_(tn, self.rounds(base, value)));
                    let idx = indices.clone();
                    let peak = self.peaks.get(buffer).copied();
                    list.push(s);
                    list.push(Stmt::new(K::Store { buffer: m, indices: idx.clone(), value: E::Var(tm) }));
                    list.push(Stmt::new(K::Store { buffer: n, indices: idx.clone(), value: E::Var(tn) }));
                    if let Some(p) = peak {
                        let most = E::binary(sparsec::ir::BinOp::Max, E::Load(p, idx.clone()), E::Var(tm));
                        list.push(Stmt::new(K::Store { buffer: p, indices: idx, value: most }));
                    }
                }
                K::Let { var, value } if self.vars.contains_key(var) => {
                    let (m, n) = self.vars[var];
                    let (vm, vn) = (self.mag(base, value), self.rounds(base, value));
                    list.push(s);
                    list.push(let_(m, vm));
                    list.push(let_(n, vn));
                }
                K::Alloc(b) if self.bufs.contains_key(b) => {
                    let (m, n) = self.bufs[b];
                    list.push(s);
                    list.push(Stmt::new(K::Alloc(m)));
                    list.push(Stmt::new(K::Alloc(n)));
                }
                _ => list.push(s),
            }
        }
    }
}

/// Stage I in f64 ([`widened`]) with two shadows beside every float buffer and `let`: the
/// sum of the magnitudes of the terms its value is made of, and how many roundings make it.
/// Any order of evaluating the same `+ - *` (a parallel reduction, atomics, a shader compiler
/// that reassociates, as Mesa's does with constants) lands within `γ(n)·Σ|terms|` of the
/// exact value (Higham, *Accuracy and Stability of Numerical Algorithms*, ch. 3–4). Returns
/// the function and, per float parameter, its name and its two shadows' names.
fn shadowed(f: &Func) -> (Func, ShadowNames) {
    use sparsec::ir::{Buffer, DType, Param, ParamKind, Var};
    let mut g = widened(f);
    let base = g.clone();
    let mut sh = Shadows { bufs: Default::default(), vars: Default::default(), peaks: Default::default() };
    for (h, v) in base.vars.iter() {
        if v.dtype.is_float() && base.params.iter().all(|p| p.kind != sparsec::ir::ParamKind::Scalar(h)) {
            let m = g.vars.append(Var { name: format!("{}__mag", v.name), dtype: DType::F64 });
            let n = g.vars.append(Var { name: format!("{}__rounds", v.name), dtype: DType::F64 });
            sh.vars.insert(h, (m, n));
        }
    }
    let mut params: std::collections::HashMap<usize, (usize, usize, usize)> = Default::default();
    let mut names = Vec::new();
    for (h, b) in base.buffers.iter().filter(|(_, b)| b.dtype.is_float()) {
        // The two shadow parameters of a float parameter, shared by the buffers over it.
        let storage = match b.storage {
            Storage::Param(p) => {
                let (m, n, k) = *params.entry(p).or_insert_with(|| {
                    let name = &base.params[p].name;
                    let (m, n) = (format!("{name}__mag"), format!("{name}__rounds"));
                    for s in [&m, &n, &peak_name(name)] {
                        g.params.push(Param { name: s.clone(), kind: ParamKind::Handle, span: base.params[p].span });
                    }
                    names.push((name.clone(), m, n));
                    (g.params.len() - 3, g.params.len() - 2, g.params.len() - 1)
                });
                let k = Buffer { name: format!("{}__peak", b.name), dtype: DType::F64, storage: Storage::Param(k), default: None, ..b.clone() };
                sh.peaks.insert(h, g.buffers.append(k));
                (Storage::Param(m), Storage::Param(n))
            }
            s => (s, s),
        };
        let m = Buffer { name: format!("{}__mag", b.name), dtype: DType::F64, storage: storage.0, default: b.default.as_ref().map(|d| sh.mag(&base, d)), ..b.clone() };
        let n = Buffer { name: format!("{}__rounds", b.name), dtype: DType::F64, storage: storage.1, default: b.default.as_ref().map(|d| sh.rounds(&base, d)), ..b.clone() };
        let ids = (g.buffers.append(m), g.buffers.append(n));
        sh.bufs.insert(h, ids);
    }
    let mut body = std::mem::take(&mut g.body);
    sh.add_to(&base, &mut g.vars, &mut body);
    g.body = body;
    (g, names)
}

/// `args` ([`widened_args`]) with the shadows [`shadowed`] names: magnitudes of the inputs,
/// no roundings.
fn shadowed_args(args: &Args, names: &[(String, String, String)]) -> Args {
    let mut out = widened_args(args);
    for (name, m, n) in names {
        if let Some(Array::F64(v)) = out.arrays.get(name).cloned() {
            out.array(m.clone(), Array::F64(v.iter().map(|x| x.abs()).collect()));
            out.array(peak_name(name), Array::F64(v.iter().map(|x| x.abs()).collect()));
            out.array(n.clone(), Array::F64(vec![0.0; v.len()]));
        }
    }
    out
}

/// The third shadow of float parameter `name` in a [`shadowed`] function: per element, the
/// largest magnitude shadow stored to it over the run (whether some order of its terms may
/// have overflowed on the way, even where a later store replaced the value).
fn peak_name(name: &str) -> String {
    format!("{name}__peak")
}

/// The least real that rounds to infinity in f32 (round to nearest): its largest value plus
/// half an ulp, `2^128 - 2^103`.
const F32_OVERFLOW: f64 = 340282356779733661637539395458142568448.0;

/// Whether every f32 result in `got` that misses `want` lies within the rounding error of
/// *some* order of evaluating its `+ - *`: at most `γ(n+1)·Σ|terms|` (plus f64's own and an
/// absolute subnormal step per rounding) from the [`shadowed`] run's value, with `n` and
/// `Σ|terms|` its shadows, or is the infinity (or NaN) of an order whose partial sum
/// overflows. Where some value's terms can overflow in some order (a parameter's peak
/// shadow) and the program casts floats to integers (`inexact_ints`), the order decides
/// which infinity or NaN a cast saturates (`-inf + (big + big)` is NaN where `(-inf + big) +
/// big` is `-inf`: 0 against `i32::MIN`), and anything computed from that integer follows:
/// no result is order-independent, and every one is accepted (fuzz seed 1795896706526).
/// Other arrays compare as usual.
fn within_reassociation(want: &Args, shadow: &Args, names: &[(String, String, String)], got: &Args, rtol: f32, inexact_ints: bool) -> bool {
    let gamma = |n: f64, u: f64| if n * u < 0.5 { n * u / (1.0 - n * u) } else { f64::INFINITY };
    let overflows = names.iter().any(|(name, ..)| matches!(shadow.arrays.get(&peak_name(name)), Some(Array::F64(p)) if p.iter().any(|x| x.is_nan() || *x >= F32_OVERFLOW)));
    if inexact_ints && overflows {
        return true;
    }
    let mut rest = (Args::new(), Args::new());
    for (name, w) in &want.arrays {
        let shadows = names.iter().find(|s| &s.0 == name).and_then(|(_, m, n)| Some((shadow.arrays.get(m)?, shadow.arrays.get(n)?)));
        let (Some((Array::F64(m), Array::F64(n))), Some(Array::F64(x)), Array::F32(w), Some(Array::F32(g))) =
            (shadows, shadow.arrays.get(name), w, got.arrays.get(name))
        else {
            rest.0.array(name.clone(), w.clone());
            rest.1.array(name.clone(), got.arrays.get(name).cloned().unwrap_or_else(|| w.clone()));
            continue;
        };
        if [x.len(), m.len(), n.len(), g.len()].iter().any(|&l| l != w.len()) {
            return false;
        }
        let scale = w.iter().filter(|v| v.is_finite()).fold(1f32, |s, v| s.max(v.abs()));
        let ok = (0..w.len()).all(|i| {
            if close(g[i], w[i], rtol, scale) {
                return true;
            }
            let rounds = n[i] + 1.0;
            if !g[i].is_finite() {
                // Some order overflows when the positive (or negative) terms alone, summed
                // first, pass f32's largest value: exactly, they sum to `(Σ|terms| ± value) / 2`
                // (rounding up on the way is not counted). Both overflowing gives `inf - inf`.
                let over = |part: f64| part >= F32_OVERFLOW;
                let (pos, neg) = (over((m[i] + x[i]) / 2.0), over((m[i] - x[i]) / 2.0));
                return x[i].is_finite() && if g[i].is_nan() { pos && neg } else if g[i] > 0.0 { pos } else { neg };
            }
            let slack = (gamma(rounds, f32::EPSILON as f64 / 2.0) + gamma(rounds, f64::EPSILON / 2.0)) * m[i] + rounds * f32::from_bits(1) as f64;
            g[i].is_finite() && x[i].is_finite() && slack.is_finite() && (g[i] as f64 - x[i]).abs() <= slack
        });
        if !ok {
            return false;
        }
    }
    compare(&rest.0, &rest.1, rtol, inexact_ints).is_none()
}

fn compare(want: &Args, got: &Args, rtol: f32, inexact_ints: bool) -> Option<String> {
    for (name, w) in &want.arrays {
        let Some(g) = got.arrays.get(name) else { return Some(format!("array `{name}` missing")) };
        match (w, g) {
            (Array::I32(w), Array::I32(g)) if inexact_ints && w.len() == g.len() => {
                let near = |a: i32, b: i32| (a as f64 - b as f64).abs() <= rtol as f64 * (a as f64).abs().max((b as f64).abs());
                if let Some(i) = (0..w.len()).find(|&i| !near(g[i], w[i])) {
                    return Some(format!("`{name}`[{i}]: got {}, want {}", g[i], w[i]));
                }
            }
            (Array::F32(w), Array::F32(g)) if w.len() == g.len() => {
                let scale = w.iter().filter(|x| x.is_finite()).fold(1f32, |m, x| m.max(x.abs()));
                if let Some(i) = (0..w.len()).find(|&i| !close(g[i], w[i], rtol, scale)) {
                    return Some(format!("`{name}`[{i}]: got {}, want {}", g[i], w[i]));
                }
            }
            _ if w != g => return Some(format!("`{name}`: got {g:?}, want {w:?}")),
            _ => {}
        }
    }
    None
}

impl Runner<'_> {
    /// Runs one case.
    pub fn check(&self, case: &Case) -> Outcome {
        self.check_text(&case.prog.to_sptir(), &case.prog.cols, &case.data)
    }

    /// Runs a program given as text, with the column axes it declares and its data.
    pub fn check_text(&self, text: &str, cols: &[ColKind], data: &Data) -> Outcome {
        let f1 = match sparsec::ir::text::parse_func("fuzz.sptir", text) {
            Ok(f) => f,
            Err(e) => return Outcome::Rejected(format!("parse: {e}")),
        };
        if let Err(errs) = sparsec::ir::verify::verify_func(&f1) {
            return Outcome::Rejected(format!("verify: {}", errs.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; ")));
        }
        let args = match build_args(&f1, cols, data) {
            Ok(a) => a,
            Err(e) => return Outcome::Rejected(format!("inputs: {e}")),
        };
        match catch_unwind(AssertUnwindSafe(|| self.run_all(&f1, &args))) {
            Ok(o) => o,
            Err(p) => Outcome::Failure(format!("panic: {}", panic_text(p))),
        }
    }

    /// Runs a verified Stage-I function on its arguments: every stage on the interpreter
    /// and every backend, compared with Stage I under the fuzzer's rules.
    pub fn check_func(&self, f1: &Func, args: &Args) -> Outcome {
        match catch_unwind(AssertUnwindSafe(|| self.run_all(f1, args))) {
            Ok(o) => o,
            Err(p) => Outcome::Failure(format!("panic: {}", panic_text(p))),
        }
    }

    fn run_all(&self, f1: &Func, args: &Args) -> Outcome {
        use sparsec::passes::{PassError, PassManager};
        let stages = match PassManager::lowering_to(Stage::III).run_all(f1) {
            Ok(s) => s,
            Err(e @ PassError::Unsupported { .. }) => return Outcome::Unsupported(e.to_string()),
            Err(e) => return Outcome::Failure(format!("lowering: {e}")),
        };
        let opts = Options { max_steps: self.max_steps, ..Options::default() };
        let mut runs: Vec<(String, Result<Args, String>)> = Vec::new();
        // A sparse output's lowered stages run after their symbolic phase, as the CLI runs them.
        let assembles = !sparsec::assembly::missing(f1, args).is_empty();
        for f in std::iter::once(f1).chain(&stages) {
            let r = catch_unwind(AssertUnwindSafe(|| match assembles && f.stage != Stage::I {
                true => run_as_cli(&sparsec::backend::Interp, f1, f, args).1,
                false => interp::run_with(f, args, &opts).map_err(|e| e.to_string()),
            }));
            let r = match r {
                Ok(r) => r,
                Err(p) => return Outcome::Failure(format!("panic in the interpreter at Stage {}: {}", f.stage, panic_text(p))),
            };
            runs.push((format!("interp Stage {}", f.stage), r));
        }
        let last = stages.last().expect("two stages");
        for (name, b) in &self.backends {
            let r = catch_unwind(AssertUnwindSafe(|| b(last, args)));
            match r {
                Ok(r) => runs.push((name.clone(), r)),
                Err(p) => return Outcome::Failure(format!("panic in {name}: {}", panic_text(p))),
            }
        }
        for (name, b) in &self.staged_backends {
            match catch_unwind(AssertUnwindSafe(|| b(f1, last, args))) {
                Ok(r) => runs.push((name.clone(), r)),
                Err(p) => return Outcome::Failure(format!("panic in {name}: {}", panic_text(p))),
            }
        }
        let errs: Vec<&(String, Result<Args, String>)> = runs.iter().filter(|r| r.1.is_err()).collect();
        if errs.len() == runs.len() {
            return Outcome::AllFailed(runs[0].1.clone().err().unwrap_or_default());
        }
        if let Some((name, Err(e))) = errs.first().map(|r| (&r.0, &r.1)) {
            let ok: Vec<&str> = runs.iter().filter(|r| r.1.is_ok()).map(|r| r.0.as_str()).collect();
            return Outcome::Failure(format!("{name} fails ({e}) but {} succeed(s)", ok.join(", ")));
        }
        let want = runs[0].1.as_ref().expect("all ok");
        let inexact_ints = casts_float_to_int(f1);
        // A schedule with `contract` (the default ones end with it) means Stage I with its
        // multiply-adds fused: where rounding or an overflow of `a * b` alone differs, that
        // program is the reference.
        let mut fused: Option<Option<Args>> = None;
        // Stage I in f64, for results that differ by the rounding of an ill-conditioned sum.
        let mut wide: Option<Option<Args>> = None;
        // Stage I in f64 with transcendental results at the ends of their allowed error.
        let mut bounds: Option<Vec<Args>> = None;
        // Stage I in f64 with the magnitudes and roundings of every value beside it.
        let mut reordered: Option<(Option<Args>, ShadowNames)> = None;
        for (name, r) in &runs[1..] {
            let got = r.as_ref().expect("all ok");
            if let Some(d) = compare(want, got, self.rtol, inexact_ints) {
                let reference = fused.get_or_insert_with(|| {
                    let g = sparsec::passes::contract(f1).ok().filter(|g| g != f1)?;
                    interp::run_with(&g, args, &opts).ok()
                });
                if reference.as_ref().is_some_and(|w| compare(w, got, self.rtol, inexact_ints).is_none()) {
                    continue;
                }
                let exact = wide.get_or_insert_with(|| interp::run_with(&widened(f1), &widened_args(args), &opts).ok());
                if exact.as_ref().is_some_and(|w| within_rounding(want, w, got, self.rtol, inexact_ints)) {
                    continue;
                }
                // Transcendental calls within their allowed error: every result moved up, every
                // one down, and alternately (a difference of two calls).
                let moved = bounds.get_or_insert_with(|| {
                    let wide = widened(f1);
                    let ups: [&dyn Fn(usize) -> bool; 4] = [&|_| true, &|_| false, &|k| k % 2 == 0, &|k| k % 2 == 1];
                    ups.iter().filter_map(|up| interp::run_with(&perturbed(&wide, *up), &widened_args(args), &opts).ok()).collect()
                });
                if exact.as_ref().is_some_and(|w| within_accuracy(want, w, moved, got, self.rtol, inexact_ints)) {
                    continue;
                }
                // `+ - *` evaluated in another order (docs/language.md, "Accuracy").
                let (shadow, names) = reordered.get_or_insert_with(|| {
                    let (g, names) = shadowed(f1);
                    let opts = Options { max_steps: 4 * opts.max_steps, ..opts };
                    (interp::run_with(&g, &shadowed_args(args, &names), &opts).ok(), names)
                });
                if shadow.as_ref().is_some_and(|s| within_reassociation(want, s, names, got, self.rtol, inexact_ints)) {
                    continue;
                }
                return Outcome::Failure(format!("{name} differs from interp Stage I: {d}"));
            }
        }
        Outcome::Agree
    }

    /// Shrinks a failing case while it keeps failing (at most `budget` checks); returns the
    /// smallest case found.
    pub fn minimise(&self, case: &Case, budget: usize) -> Case {
        let mut best = case.clone();
        let key = self.check(case).key();
        let mut spent = 0;
        'outer: loop {
            for cand in shrinks(&best) {
                if spent >= budget {
                    break 'outer;
                }
                spent += 1;
                let o = self.check(&cand);
                if o.is_failure() && o.key() == key {
                    best = cand;
                    continue 'outer;
                }
            }
            break;
        }
        best
    }
}

// ---------------------------------------------------------------------------------------------
// Shrinking

fn iter_at<'a>(p: &'a mut Prog, path: &[usize]) -> &'a mut SpIter {
    let mut it = &mut p.iters[path[0]];
    for &l in &path[1..] {
        it = match &mut it.body[l] {
            Item::Iter(inner) => inner,
            Item::Store(_) => unreachable!("paths lead to iterations"),
        };
    }
    it
}

fn all_paths(p: &Prog) -> Vec<Vec<usize>> {
    fn go(it: &SpIter, pre: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        out.push(pre.clone());
        for (l, item) in it.body.iter().enumerate() {
            if let Item::Iter(inner) = item {
                pre.push(l);
                go(inner, pre, out);
                pre.pop();
            }
        }
    }
    let mut out = Vec::new();
    for (k, it) in p.iters.iter().enumerate() {
        go(it, &mut vec![k], &mut out);
    }
    out
}

/// Candidate shrinks of a case, biggest steps first.
fn shrinks(c: &Case) -> Vec<Case> {
    let mut out = Vec::new();
    let with = |f: &dyn Fn(&mut Case) -> bool| -> Option<Case> {
        let mut c2 = c.clone();
        f(&mut c2).then_some(c2)
    };
    // Drop top-level iterations.
    for k in 0..c.prog.iters.len() {
        if c.prog.iters.len() > 1 {
            out.extend(with(&|c2| {
                c2.prog.iters.remove(k);
                true
            }));
        }
    }
    // Drop body items and inits.
    for path in all_paths(&c.prog) {
        let it = iter_at(&mut c.prog.clone(), &path).clone();
        for l in 0..it.body.len() {
            if it.body.len() > 1 {
                out.extend(with(&|c2| {
                    iter_at(&mut c2.prog, &path).body.remove(l);
                    true
                }));
            }
        }
        for l in 0..it.init.len() {
            out.extend(with(&|c2| {
                iter_at(&mut c2.prog, &path).init.remove(l);
                true
            }));
        }
    }
    // Data: rows, columns, features, coordinates.
    let d = &c.data;
    if d.m > 0 {
        out.extend(with(&|c2| {
            c2.data.m -= 1;
            let m = c2.data.m;
            let keep = match &mut c2.data.stored_rows {
                Some(s) => {
                    s.retain(|&r| (r as usize) < m);
                    s.len()
                }
                None => m,
            };
            for (k, r) in c2.prog.cols.iter().zip(&mut c2.data.rows) {
                if *k != ColKind::RowsOfJd {
                    r.truncate(keep);
                }
            }
            true
        }));
    }
    // A stored row of a sparse `I`, and its column rows.
    for r in 0..d.stored_rows.as_ref().map_or(0, Vec::len) {
        out.extend(with(&|c2| {
            c2.data.stored_rows.as_mut().expect("sparse rows").remove(r);
            for (k, rows) in c2.prog.cols.iter().zip(&mut c2.data.rows) {
                if *k != ColKind::RowsOfJd && r < rows.len() {
                    rows.remove(r);
                }
            }
            true
        }));
    }
    if d.f > 1 {
        out.extend(with(&|c2| {
            c2.data.f -= 1;
            true
        }));
    }
    if d.n > 1 {
        out.extend(with(&|c2| {
            c2.data.n -= 1;
            let n = c2.data.n as i32;
            for (k, rows) in c2.prog.cols.iter().zip(&mut c2.data.rows) {
                for r in rows.iter_mut() {
                    r.retain(|&x| x < n);
                }
                if *k == ColKind::SparseFixed {
                    let kk = rows.iter().map(Vec::len).min().unwrap_or(0);
                    rows.iter_mut().for_each(|r| r.truncate(kk));
                }
                // `JD`'s rows are the columns.
                if *k == ColKind::RowsOfJd {
                    rows.truncate(c2.data.n);
                }
            }
            true
        }));
    }
    for t in 0..d.rows.len() {
        for r in 0..d.rows[t].len() {
            for x in 0..d.rows[t][r].len() {
                out.extend(with(&|c2| {
                    let kind = c2.prog.cols[t];
                    let row = &mut c2.data.rows[t][r];
                    match kind {
                        ColKind::SparseVariable | ColKind::RowsOfJd => {
                            row.remove(x);
                            true
                        }
                        ColKind::DenseVariable if x + 1 == row.len() => {
                            row.pop();
                            true
                        }
                        _ => false,
                    }
                }));
            }
        }
    }
    // Expressions: replace a node by an operand of its type, or by a literal.
    let count: Vec<usize> = c.prog.clone().stores_mut().iter().map(|s| s.value.nodes()).collect();
    for (s, &nodes) in count.iter().enumerate() {
        for n in 0..nodes {
            let mut probe = c.prog.clone();
            let mut k = n;
            let node = probe.stores_mut()[s].value.nth_mut(&mut k).expect("node in range").clone();
            let mut repl: Vec<Expr> = node.args.iter().filter(|a| a.ty == node.ty && !matches!(node.head, Head::Load(_))).cloned().collect();
            let lit = match node.ty {
                Ty::F32 => "1.0",
                Ty::I32 => "1",
                Ty::Bool => "true",
            };
            if node.head != Head::Lit(lit.into()) {
                repl.push(Expr::lit(lit, node.ty));
            }
            for r in repl {
                out.extend(with(&|c2| {
                    let mut k = n;
                    *c2.prog.stores_mut()[s].value.nth_mut(&mut k).expect("node in range") = r.clone();
                    true
                }));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{generate, parse_reproducer, perturbed, shadowed, shadowed_args, to_reproducer, widened, widened_args, within_accuracy, within_reassociation, within_rounding, Args, Array, ColKind};
    use sparsec::interp;

    fn args(name: &str, a: Array) -> Args {
        let mut x = Args::new();
        x.array(name, a);
        x
    }

    #[test]
    fn the_generator_makes_sparse_outputs_that_verify_and_round_trip() {
        let (mut found, mut products) = (0, 0);
        for seed in 0..3000 {
            let case = generate(seed);
            if !case.prog.cols.iter().any(|k| matches!(k, ColKind::Assembled { .. } | ColKind::Product { .. })) {
                continue;
            }
            found += 1;
            products += usize::from(case.prog.cols.iter().any(|k| matches!(k, ColKind::Product { .. })));
            let text = to_reproducer(&case);
            let f = sparsec::ir::text::parse_func("t.sptir", &text).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}"));
            assert!(!sparsec::passes::assemble::assembled_axes(&f).is_empty(), "seed {seed}");
            let (cols, data) = parse_reproducer(&text).unwrap();
            assert_eq!(cols, case.prog.cols, "seed {seed}");
            for (t, k) in cols.iter().enumerate().filter(|(_, k)| **k != ColKind::DenseFixed) {
                assert_eq!(data.rows[t], case.data.rows[t], "seed {seed}: rows of J{t} ({k:?})");
            }
        }
        assert!(found >= 30 && products >= 30, "{found} sparse outputs, {products} products, in 3000 seeds");
    }

    /// Generated products run: at every stage on the interpreter their output agrees, and
    /// few of them fail everywhere (a pool value that is NaN or out of range, as elsewhere).
    #[test]
    fn generated_products_run_and_agree_at_every_stage() {
        let runner = super::Runner::default();
        let (mut agree, mut failed) = (0, 0);
        for seed in 0..1500 {
            let case = generate(seed);
            if !case.prog.cols.iter().any(|k| matches!(k, ColKind::Product { .. })) {
                continue;
            }
            match runner.check(&case) {
                super::Outcome::Agree => agree += 1,
                super::Outcome::AllFailed(_) => failed += 1,
                o => panic!("seed {seed}: {o:?}\n{}", to_reproducer(&case)),
            }
        }
        assert!(agree >= 100 && failed * 3 <= agree, "{agree} products agree, {failed} fail everywhere");
    }

    #[test]
    fn rounding_of_an_ill_conditioned_result_is_accepted_and_nothing_more() {
        // Stage I in f32 is off from f64 by up to 10 (terms near 2^31 cancel).
        let want = args("v", Array::F32(vec![-7.0, -7.0]));
        let exact = args("v", Array::F64(vec![-7.0, -17.0]));
        assert!(within_rounding(&want, &exact, &args("v", Array::F32(vec![-6.0, -11.0])), 1e-4, false));
        assert!(!within_rounding(&want, &exact, &args("v", Array::F32(vec![-6.0, 30.0])), 1e-4, false));
        // A well-conditioned result admits no more than the usual tolerance.
        let want = args("v", Array::F32(vec![1.0]));
        let exact = args("v", Array::F64(vec![1.0]));
        assert!(!within_rounding(&want, &exact, &args("v", Array::F32(vec![1.01])), 1e-4, false));
        // Other arrays must compare as usual.
        let want = args("i", Array::I32(vec![3]));
        assert!(!within_rounding(&want, &want.clone(), &args("i", Array::I32(vec![4])), 1e-4, false));
    }

    #[test]
    fn sums_evaluated_in_another_order_may_move_by_their_rounding_bound_and_nothing_more() {
        // `(7 + MAX) + MIN` is 0 in order and 7 reassociated as `7 + (MAX + MIN)` (Mesa does
        // this on lavapipe: cubecl fuzz seed 1795782298901); `Z` sums well-conditioned terms.
        let src = "func p(y: handle, z: handle, a: handle, n: i32) {
  axis I = dense_fixed(n)
  axis J = dense_fixed(3)
  buffer Y = match_sparse_buffer(y, [I], f32)
  buffer Z = match_sparse_buffer(z, [I], f32)
  buffer A = match_sparse_buffer(a, [I, J], f32)
  sp_iter t([I], \"S\") as [i] {
    Y[i] = 7.0
    Y[i] = Y[i] + max_value(f32)
    Y[i] = Y[i] + min_value(f32)
  }
  sp_iter s([I, J], \"SR\") as [i, j] {
    init {
      Z[i] = 0.0
    }
    Z[i] = Z[i] + A[i, j] / 3.0 - 1.0
  }
}";
        let f = sparsec::ir::text::parse_func("p.sptir", src).unwrap_or_else(|e| panic!("{e}"));
        let mut a = Args::new();
        a.array("y", Array::F32(vec![0.0])).array("z", Array::F32(vec![0.0])).array("a", Array::F32(vec![1.0, 2.0, 4.0])).int("n", 1);
        let opts = interp::Options::default();
        let want = interp::run_with(&f, &a, &opts).unwrap();
        let (g, names) = shadowed(&f);
        let shadow = interp::run_with(&g, &shadowed_args(&a, &names), &opts).unwrap();
        let got = |y: f32, z: f32| {
            let mut g = want.clone();
            g.array("y", Array::F32(vec![y])).array("z", Array::F32(vec![z]));
            g
        };
        let z = match &want.arrays["z"] { Array::F32(v) => v[0], _ => unreachable!() };
        assert!((z - (7.0 / 3.0 - 3.0)).abs() < 1e-6);
        assert_eq!(want.arrays["y"], Array::F32(vec![0.0]));
        assert!(within_reassociation(&want, &shadow, &names, &got(7.0, z), 1e-4, false), "MAX and MIN cancel");
        assert!(within_reassociation(&want, &shadow, &names, &got(0.0, z + 4.0 * f32::EPSILON), 1e-4, false));
        assert!(!within_reassociation(&want, &shadow, &names, &got(0.0, z + 0.01), 1e-4, false), "a term off");
        assert!(!within_reassociation(&want, &shadow, &names, &got(f32::INFINITY, z), 1e-4, false), "no order overflows");
        assert!(!within_reassociation(&want, &shadow, &names, &got(f32::NEG_INFINITY, z), 1e-4, false), "no order overflows");
        assert!(!within_reassociation(&want, &shadow, &names, &got(f32::NAN, z), 1e-4, false), "no order overflows");
        // Other arrays compare as usual.
        let mut a2 = want.clone();
        a2.array("i", Array::I32(vec![3]));
        let mut g2 = a2.clone();
        g2.array("i", Array::I32(vec![4]));
        assert!(!within_reassociation(&a2, &shadow, &names, &g2, 1e-4, false));
    }

    #[test]
    fn a_partial_sum_that_overflows_in_another_order_may_give_infinity() {
        // `(MIN + 3.4e38) + 3.4e38` is finite in order; summed as `MIN + (3.4e38 + 3.4e38)`
        // (an rfactor's partial sums: fuzz seed 1795822831211) it is +inf. -inf and NaN need
        // negative terms that overflow too; a term off is still wrong.
        let src = "func p(v: handle, w: handle, n: i32) {
  axis I = dense_fixed(n)
  axis J = dense_fixed(2)
  buffer V = match_sparse_buffer(v, [I], f32)
  buffer W = match_sparse_buffer(w, [J], f32)
  sp_iter s([I, J], \"SR\") as [i, j] {
    init {
      V[i] = min_value(f32)
    }
    V[i] = V[i] + (3.4e38 + W[j])
  }
}";
        let f = sparsec::ir::text::parse_func("p.sptir", src).unwrap_or_else(|e| panic!("{e}"));
        let mut a = Args::new();
        a.array("v", Array::F32(vec![0.0])).array("w", Array::F32(vec![0.5, -0.5])).int("n", 1);
        let opts = interp::Options::default();
        let want = interp::run_with(&f, &a, &opts).unwrap();
        let v = match &want.arrays["v"] { Array::F32(v) => v[0], _ => unreachable!() };
        assert!(v.is_finite() && v > 3e38, "{v}");
        let (g, names) = shadowed(&f);
        let shadow = interp::run_with(&g, &shadowed_args(&a, &names), &opts).unwrap();
        let got = |x: f32| {
            let mut g = want.clone();
            g.array("v", Array::F32(vec![x]));
            g
        };
        assert!(within_reassociation(&want, &shadow, &names, &got(f32::INFINITY), 1e-4, false), "+inf in another order");
        assert!(!within_reassociation(&want, &shadow, &names, &got(f32::NEG_INFINITY), 1e-4, false), "-inf in none");
        assert!(!within_reassociation(&want, &shadow, &names, &got(f32::NAN), 1e-4, false), "NaN in none");
        assert!(!within_reassociation(&want, &shadow, &names, &got(v / 2.0), 1e-4, false), "a term off");
        // Where the program casts floats to integers, which infinity or NaN a cast saturates
        // depends on the order, and so does all that follows: anything is accepted. Without
        // such casts integers stay exact.
        let ints = |x: i32| {
            let mut g = want.clone();
            g.array("k", Array::I32(vec![x, 5]));
            g
        };
        let stage1 = ints(i32::MIN);
        assert!(within_reassociation(&stage1, &shadow, &names, &ints(0), 1e-4, true), "NaN cast");
        assert!(!within_reassociation(&stage1, &shadow, &names, &ints(0), 1e-4, false), "no float cast to an integer");
    }

    #[test]
    fn transcendental_results_may_move_by_their_allowed_error_and_nothing_more() {
        // `pow(u, 1) - u` is 0 exactly, and a few ulps of `u` where `pow` rounds (WGSL: it is
        // `exp2(log2(u))`); `log(tanh(7))` squared is off by percents where `tanh` is an ulp off.
        let src = "func p(x: handle, y: handle, u: handle, n: i32) {
  axis I = dense_fixed(n)
  buffer X = match_sparse_buffer(x, [I], f32)
  buffer Y = match_sparse_buffer(y, [I], f32)
  buffer U = match_sparse_buffer(u, [I], f32)
  sp_iter s([I], \"S\") as [i] {
    X[i] = pow(U[i], 1.0) - U[i]
    Y[i] = log(tanh(7.0)) * log(tanh(7.0)) * 1e30
  }
}";
        let f = sparsec::ir::text::parse_func("p.sptir", src).unwrap_or_else(|e| panic!("{e}"));
        let mut a = Args::new();
        a.array("x", Array::F32(vec![0.0])).array("y", Array::F32(vec![0.0])).array("u", Array::F32(vec![1.75])).int("n", 1);
        let opts = interp::Options::default();
        let want = interp::run_with(&f, &a, &opts).unwrap();
        let exact = interp::run_with(&widened(&f), &widened_args(&a), &opts).unwrap();
        let ups: [&dyn Fn(usize) -> bool; 2] = [&|_| true, &|_| false];
        let runs: Vec<Args> = ups.iter().map(|up| interp::run_with(&perturbed(&widened(&f), *up), &widened_args(&a), &opts).unwrap()).collect();
        let got = |x: f32, y: f32| {
            let mut g = want.clone();
            g.array("x", Array::F32(vec![x])).array("y", Array::F32(vec![y]));
            g
        };
        let w = match &want.arrays["y"] { Array::F32(v) => v[0], _ => unreachable!() };
        assert!(within_accuracy(&want, &exact, &runs, &got(4.0 * 1.75 * f32::EPSILON, w * 1.03), 1e-4, false));
        assert!(!within_accuracy(&want, &exact, &runs, &got(0.01, w), 1e-4, false), "pow off by far more than its error");
        assert!(!within_accuracy(&want, &exact, &runs, &got(0.0, -w), 1e-4, false), "a sign no error allows");
    }

    #[test]
    fn integer_casts_of_transcendental_results_may_take_the_values_their_error_allows() {
        // `pow(0.5 / exp(7), 2.9e-9)` is 0.99999998: 1.0 in f32, just below 1 in f64, and
        // either side of 1 within `pow`'s error; its cast to i32, summed over 6 rows, is 6
        // on Stage I in f32 and 0 in f64 (cubecl fuzz seed 1795782298646).
        let src = "func c(u: handle, v: handle, n: i32) {
  axis I = dense_fixed(n)
  axis O = dense_fixed(1)
  buffer U = match_sparse_buffer(u, [O], i32)
  buffer V = match_sparse_buffer(v, [I], f32)
  sp_iter p([I], \"S\") as [i] {
    V[i] = pow(0.5 / exp(7.0), 2.9e-9)
  }
  sp_iter s([O, I], \"SR\") as [o, i] {
    init {
      U[o] = 0
    }
    U[o] = U[o] + cast(i32, V[i])
  }
}";
        let f = sparsec::ir::text::parse_func("c.sptir", src).unwrap_or_else(|e| panic!("{e}"));
        let mut a = Args::new();
        a.array("u", Array::I32(vec![0])).array("v", Array::F32(vec![0.0; 6])).int("n", 6);
        let opts = interp::Options::default();
        let want = interp::run_with(&f, &a, &opts).unwrap();
        let exact = interp::run_with(&widened(&f), &widened_args(&a), &opts).unwrap();
        let ups: [&dyn Fn(usize) -> bool; 2] = [&|_| true, &|_| false];
        let runs: Vec<Args> = ups.iter().map(|up| interp::run_with(&perturbed(&widened(&f), *up), &widened_args(&a), &opts).unwrap()).collect();
        assert_eq!(want.arrays["u"], Array::I32(vec![6]), "f32 rounds the power to 1");
        let got = |u: i32| {
            let mut g = want.clone();
            g.array("u", Array::I32(vec![u]));
            g
        };
        assert!(within_accuracy(&want, &exact, &runs, &got(0), 1e-4, true), "the power just below 1 on the device");
        assert!(within_accuracy(&want, &exact, &runs, &got(6), 1e-4, true));
        assert!(!within_accuracy(&want, &exact, &runs, &got(7), 1e-4, true), "no error makes a cast 7 / 6");
        assert!(!within_accuracy(&want, &exact, &runs, &got(-1), 1e-4, true), "nor negative");
        assert!(!within_accuracy(&want, &exact, &runs, &got(0), 1e-4, false), "a program without casts to integers compares exactly");
    }

    #[test]
    fn float_quotients_may_move_by_two_and_a_half_ulp() {
        // 1.75 / 3 magnified: 2.5 ulp of the quotient (about 1.7e-7) become about 1.7, beyond
        // what rounding alone explains (four times the f32 result's error, about 1.3).
        let src = "func d(x: handle, u: handle, n: i32) {
  axis I = dense_fixed(n)
  buffer X = match_sparse_buffer(x, [I], f32)
  buffer U = match_sparse_buffer(u, [I], f32)
  sp_iter s([I], \"S\") as [i] {
    X[i] = (U[i] / 3.0 - 0.5833333) * 1e7
  }
}";
        let f = sparsec::ir::text::parse_func("d.sptir", src).unwrap_or_else(|e| panic!("{e}"));
        let mut a = Args::new();
        a.array("x", Array::F32(vec![0.0])).array("u", Array::F32(vec![1.75])).int("n", 1);
        let opts = interp::Options::default();
        let want = interp::run_with(&f, &a, &opts).unwrap();
        let exact = interp::run_with(&widened(&f), &widened_args(&a), &opts).unwrap();
        let ups: [&dyn Fn(usize) -> bool; 2] = [&|_| true, &|_| false];
        let runs: Vec<Args> = ups.iter().map(|up| interp::run_with(&perturbed(&widened(&f), *up), &widened_args(&a), &opts).unwrap()).collect();
        let w = match &want.arrays["x"] { Array::F32(v) => v[0], _ => unreachable!() };
        let got = |x: f32| {
            let mut g = want.clone();
            g.array("x", Array::F32(vec![x]));
            g
        };
        assert!(within_accuracy(&want, &exact, &runs, &got(w + 2.5), 1e-4, false), "two ulp of the quotient");
        assert!(!within_accuracy(&want, &exact, &runs, &got(w + 5.0), 1e-4, false), "beyond 2.5 ulp");
    }
}
