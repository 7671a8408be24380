//! Back end: [`Module`] to canonical `.sptir` text.

use crate::expr::{Expr, Intrinsic, UnOp};
use crate::func::*;
use crate::types::*;
use std::fmt::Write;

/// Prints every function of a module, separated by blank lines.
pub fn print_module(m: &Module) -> String {
    m.funcs.iter().map(print_func).collect::<Vec<_>>().join("\n")
}

/// Prints one function in canonical form (ends with a newline).
pub fn print_func(f: &Func) -> String {
    let mut p = Printer { f, out: String::new(), indent: 0 };
    p.func();
    p.out
}

/// Prints one expression of `f`.
pub fn print_expr(f: &Func, e: &Expr) -> String {
    let p = Printer { f, out: String::new(), indent: 0 };
    p.expr(e, 0)
}

const KEYWORDS: &[&str] = &[
    "func", "axis", "buffer", "sp_iter", "for", "in", "block", "if", "else", "while", "let", "init", "reads",
    "writes", "attrs", "true", "false", "stage", "as", "start",
];

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
        && !KEYWORDS.contains(&s)
}

fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A name as an identifier when possible, else as a string.
fn name(s: &str) -> String {
    if is_ident(s) {
        s.to_string()
    } else {
        quote(s)
    }
}

fn float_text(v: f64) -> String {
    if v.is_nan() {
        "nan".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.to_string()
    } else {
        format!("{v:?}")
    }
}

fn attr_value(v: &AttrValue) -> String {
    match v {
        AttrValue::Bool(b) => b.to_string(),
        AttrValue::Int(i) => i.to_string(),
        AttrValue::Float(x) => float_text(*x),
        AttrValue::Str(s) => quote(s),
    }
}

struct Printer<'a> {
    f: &'a Func,
    out: String,
    indent: usize,
}

impl Printer<'_> {
    fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn var(&self, v: VarId) -> &str {
        self.f.vars.try_get(v).map_or("<bad-var>", |v| v.name.as_str())
    }

    fn axis(&self, a: AxisId) -> &str {
        self.f.axes.try_get(a).map_or("<bad-axis>", |a| a.name.as_str())
    }

    fn buffer(&self, b: BufferId) -> &str {
        self.f.buffers.try_get(b).map_or("<bad-buffer>", |b| b.name.as_str())
    }

    fn param(&self, p: ParamId) -> &str {
        self.f.params.get(p).map_or("<bad-param>", |p| p.name.as_str())
    }

    fn attrs(&self, a: &Attrs) -> String {
        if a.is_empty() {
            return String::new();
        }
        let items: Vec<String> = a.iter().map(|(k, v)| format!("{} = {}", name(k), attr_value(v))).collect();
        format!(" attrs({})", items.join(", "))
    }

    fn func(&mut self) {
        let f = self.f;
        let params: Vec<String> = f
            .params
            .iter()
            .map(|p| match p.kind {
                ParamKind::Handle => format!("{}: handle", p.name),
                ParamKind::Scalar(v) => format!("{}: {}", p.name, f.vars.try_get(v).map_or(DType::I32, |v| v.dtype)),
            })
            .collect();
        let stage = if f.stage == Stage::I { String::new() } else { format!(" stage {}", f.stage) };
        self.line(&format!("func {}({}){}{} {{", name(&f.name), params.join(", "), stage, self.attrs(&f.attrs)));
        self.indent += 1;
        for (_, a) in f.axes.iter() {
            let s = self.axis_decl(a);
            self.line(&s);
        }
        let stmt_allocated = f.stmt_allocated_buffers();
        for (h, b) in f.buffers.iter() {
            if !stmt_allocated.contains(&h) {
                let s = self.buffer_decl(b);
                self.line(&s);
            }
        }
        for s in &f.body {
            self.stmt(s);
        }
        self.indent -= 1;
        self.line("}");
    }

    fn axis_decl(&self, a: &Axis) -> String {
        let mut args = Vec::new();
        if let Some(p) = a.parent {
            args.push(self.axis(p).to_string());
        }
        args.push(self.expr(&a.length, 0));
        if let Some(n) = &a.nnz {
            args.push(self.expr(n, 0));
        }
        if let Some(p) = a.indptr {
            args.push(self.param(p).to_string());
        }
        if let Some(p) = a.indices {
            args.push(self.param(p).to_string());
        }
        if a.idtype != DType::I32 {
            args.push(format!("idtype = {}", a.idtype));
        }
        if !a.sorted {
            args.push("sorted = false".to_string());
        }
        format!("axis {} = {}({})", a.name, a.kind.name(), args.join(", "))
    }

    fn buffer_decl(&self, b: &Buffer) -> String {
        let layout = match &b.layout {
            Layout::Sparse(axes) => axes.iter().map(|a| self.axis(*a)).collect::<Vec<_>>().join(", "),
            Layout::Dense(shape) => shape.iter().map(|e| self.expr(e, 0)).collect::<Vec<_>>().join(", "),
        };
        let sparse = matches!(b.layout, Layout::Sparse(_));
        let mut s = match b.storage {
            Storage::Param(p) => format!(
                "{}({}, [{}], {}",
                if sparse { "match_sparse_buffer" } else { "match_buffer" },
                self.param(p),
                layout,
                b.dtype
            ),
            Storage::Alloc(scope) => format!(
                "{}([{}], {}, {}",
                if sparse { "alloc_sparse_buffer" } else { "alloc_buffer" },
                layout,
                b.dtype,
                scope.name()
            ),
        };
        if let Some(e) = &b.extra_storage {
            let _ = write!(s, ", extra_storage = {}", self.expr(e, 0));
        }
        if let Some(e) = &b.default {
            let _ = write!(s, ", default = {}", self.expr(e, 0));
        }
        format!("buffer {} = {})", b.name, s)
    }

    fn block_body(&mut self, init: Option<&Vec<Stmt>>, body: &[Stmt]) {
        self.indent += 1;
        if let Some(init) = init {
            self.line("init {");
            self.indent += 1;
            for s in init {
                self.stmt(s);
            }
            self.indent -= 1;
            self.line("}");
        }
        for s in body {
            self.stmt(s);
        }
        self.indent -= 1;
    }

    fn stmts(&mut self, body: &[Stmt]) {
        self.block_body(None, body);
    }

    fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Store { buffer, indices, value } => {
                let idx = self.exprs(indices);
                let line = format!("{}[{}] = {}", self.buffer(*buffer), idx, self.expr(value, 0));
                self.line(&line);
            }
            StmtKind::Evaluate(e) => {
                let line = self.expr(e, 0);
                self.line(&line);
            }
            StmtKind::Let { var, value } => {
                let v = self.f.vars.try_get(*var);
                let inferred = self.f.expr_dtype(value);
                let ty = match v {
                    Some(v) if v.dtype != inferred => format!(": {}", v.dtype),
                    _ => String::new(),
                };
                let line = format!("let {}{} = {}", self.var(*var), ty, self.expr(value, 0));
                self.line(&line);
            }
            StmtKind::Alloc(b) => {
                let line = match self.f.buffers.try_get(*b) {
                    Some(buf) => self.buffer_decl(buf),
                    None => "buffer <bad-buffer> = alloc_buffer([], i32)".to_string(),
                };
                self.line(&line);
            }
            StmtKind::If { cond, then_body, else_body } => {
                let line = format!("if {} {{", self.expr(cond, 0));
                self.line(&line);
                self.if_tail(then_body, else_body);
            }
            StmtKind::While { cond, body } => {
                let line = format!("while {} {{", self.expr(cond, 0));
                self.line(&line);
                self.stmts(body);
                self.line("}");
            }
            StmtKind::SpIter(it) => {
                let axes: Vec<String> = it
                    .axes
                    .iter()
                    .map(|a| match a {
                        SpIterAxis::Axis(a) => self.axis(*a).to_string(),
                        SpIterAxis::Fuse(g) => {
                            format!("fuse({})", g.iter().map(|a| self.axis(*a)).collect::<Vec<_>>().join(", "))
                        }
                        SpIterAxis::Attach { axis, parent } => {
                            format!("attach({}, {})", self.axis(*axis), self.axis(*parent))
                        }
                    })
                    .collect();
                let vars: Vec<&str> = it.vars.iter().map(|v| self.var(*v)).collect();
                let line = format!(
                    "sp_iter {}([{}], {}) as [{}]{} {{",
                    name(&it.name),
                    axes.join(", "),
                    quote(&it.kinds),
                    vars.join(", "),
                    self.attrs(&it.attrs)
                );
                self.line(&line);
                self.block_body(it.init.as_ref(), &it.body);
                self.line("}");
            }
            StmtKind::For(l) => {
                let start = match &l.min {
                    Expr::Int(0, _) => String::new(),
                    m => format!(", start = {}", self.expr(m, 0)),
                };
                let line = format!(
                    "for {} in {}({}{}){} {{",
                    self.var(l.var),
                    l.kind.name(),
                    self.expr(&l.extent, 0),
                    start,
                    self.attrs(&l.attrs)
                );
                self.line(&line);
                self.stmts(&l.body);
                self.line("}");
            }
            StmtKind::Block(b) => {
                let iters: Vec<String> = b
                    .iters
                    .iter()
                    .map(|it| {
                        format!(
                            "{}: {}({}) = {}",
                            self.var(it.var),
                            it.kind.keyword(),
                            self.expr(&it.extent, 0),
                            self.expr(&it.binding, 0)
                        )
                    })
                    .collect();
                let line = format!("block {}({}){} {{", name(&b.name), iters.join(", "), self.attrs(&b.attrs));
                self.line(&line);
                self.indent += 1;
                if !b.reads.is_empty() {
                    let r = format!("reads({})", self.regions(&b.reads));
                    self.line(&r);
                }
                if !b.writes.is_empty() {
                    let w = format!("writes({})", self.regions(&b.writes));
                    self.line(&w);
                }
                self.indent -= 1;
                self.block_body(b.init.as_ref(), &b.body);
                self.line("}");
            }
        }
    }

    fn if_tail(&mut self, then_body: &[Stmt], else_body: &[Stmt]) {
        self.stmts(then_body);
        if else_body.is_empty() {
            self.line("}");
        } else if let [Stmt { kind: StmtKind::If { cond, then_body, else_body }, .. }] = else_body {
            let line = format!("}} else if {} {{", self.expr(cond, 0));
            self.line(&line);
            self.if_tail(then_body, else_body);
        } else {
            self.line("} else {");
            self.stmts(else_body);
            self.line("}");
        }
    }

    fn regions(&self, rs: &[Region]) -> String {
        rs.iter()
            .map(|r| {
                let ranges: Vec<String> = r
                    .ranges
                    .iter()
                    .map(|rr| match &rr.end {
                        None => self.expr(&rr.begin, 0),
                        Some(e) => format!("{}:{}", self.expr(&rr.begin, 0), self.expr(e, 0)),
                    })
                    .collect();
                format!("{}[{}]", self.buffer(r.buffer), ranges.join(", "))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn exprs(&self, es: &[Expr]) -> String {
        es.iter().map(|e| self.expr(e, 0)).collect::<Vec<_>>().join(", ")
    }

    /// Prints `e`, parenthesised when its precedence is below `min_prec`.
    fn expr(&self, e: &Expr, min_prec: u8) -> String {
        const UNARY: u8 = 6;
        let (s, prec) = match e {
            Expr::Int(v, d) => {
                let suffix = if *d == DType::I64 { "i64" } else { "" };
                (format!("{v}{suffix}"), if *v < 0 { UNARY } else { 9 })
            }
            Expr::Float(v, d) => {
                let suffix = if *d == DType::F32 { "" } else { d.name() };
                (format!("{}{}", float_text(*v), suffix), if v.is_sign_negative() && !v.is_nan() { UNARY } else { 9 })
            }
            Expr::Bool(b) => (b.to_string(), 9),
            Expr::Var(v) => (self.var(*v).to_string(), 9),
            Expr::Binary(op, a, b) => match op.symbol() {
                Some(sym) => {
                    let p = op.precedence();
                    (format!("{} {} {}", self.expr(a, p), sym, self.expr(b, p + 1)), p)
                }
                None => {
                    let fname = if *op == crate::expr::BinOp::Min { "min" } else { "max" };
                    (format!("{fname}({}, {})", self.expr(a, 0), self.expr(b, 0)), 9)
                }
            },
            Expr::Unary(op, a) => {
                let sym = if *op == UnOp::Neg { "-" } else { "!" };
                let inner = match **a {
                    // Keep `-(1)` apart from the literal `-1`.
                    Expr::Int(..) | Expr::Float(..) => format!("({})", self.expr(a, 0)),
                    _ => self.expr(a, UNARY),
                };
                (format!("{sym}{inner}"), UNARY)
            }
            Expr::Select(c, a, b) => {
                (format!("select({}, {}, {})", self.expr(c, 0), self.expr(a, 0), self.expr(b, 0)), 9)
            }
            Expr::Cast(d, a) => (format!("cast({}, {})", d, self.expr(a, 0)), 9),
            Expr::Call(i, args) => match i {
                Intrinsic::MaxValue(d) | Intrinsic::MinValue(d) => (format!("{}({})", i.name(), d), 9),
                _ => (format!("{}({})", i.name(), self.exprs(args)), 9),
            },
            Expr::Load(b, idx) => (format!("{}[{}]", self.buffer(*b), self.exprs(idx)), 9),
            Expr::AtomicAdd(b, idx, v) => {
                (format!("atomic_add({}[{}], {})", self.buffer(*b), self.exprs(idx), self.expr(v, 0)), 9)
            }
        };
        if prec < min_prec {
            format!("({s})")
        } else {
            s
        }
    }
}
