//! Back end: [`Module`] to canonical `.sptir` text.

use crate::expr::{Expr, Intrinsic, UnOp};
use crate::func::*;
use crate::span::Span;
use crate::types::*;
use std::fmt::Write;

/// Prints every function of a module, separated by blank lines.
pub fn print_module(m: &Module) -> String {
    m.funcs.iter().map(print_func).collect::<Vec<_>>().join("\n")
}

/// Prints a module parsed from `source` in canonical form with the comments of `source` kept
/// (what `sparsec fmt` prints): a comment on a line of its own goes before the item that
/// follows it (a function, declaration or statement, at that item's indentation, or before
/// the closing brace of the statement it ends), a comment after code on the first line of an
/// item stays at the end of that line. Printing the result again gives it back.
pub fn print_module_with_comments(m: &Module, source: &str) -> String {
    let mut comments = Comments::of(source);
    let mut out = String::new();
    for (k, f) in m.funcs.iter().enumerate() {
        let mut p = Printer { f, out: String::new(), indent: 0, comments: Some(&mut comments) };
        p.func();
        if k > 0 {
            out.push('\n');
        }
        out.push_str(&p.out);
    }
    // What follows the last function.
    let mut p = Printer { f: &Func::new(""), out: String::new(), indent: 0, comments: Some(&mut comments) };
    p.flush_before(u32::MAX, false);
    out.push_str(&p.out);
    out
}

/// Prints one function in canonical form (ends with a newline).
pub fn print_func(f: &Func) -> String {
    let mut p = Printer { f, out: String::new(), indent: 0, comments: None };
    p.func();
    p.out
}

/// Prints one expression of `f`.
pub fn print_expr(f: &Func, e: &Expr) -> String {
    let p = Printer { f, out: String::new(), indent: 0, comments: None };
    p.expr(e, 0)
}

/// One `# ...` comment of a source text.
struct Comment {
    /// Byte offset of its `#`.
    start: u32,
    /// Byte offset of the start of its line.
    line_start: u32,
    /// The text from `#` to the end of the line, trailing blanks removed.
    text: String,
    /// Whether only blanks precede it on its line.
    own_line: bool,
    /// Printed already.
    used: bool,
}

/// The comments of a source text, in order (`#` inside a string literal starts none).
struct Comments {
    list: Vec<Comment>,
    source: String,
}

impl Comments {
    fn of(source: &str) -> Comments {
        let mut list = Vec::new();
        let (mut in_string, mut escaped, mut line_start) = (false, false, 0usize);
        let mut chars = source.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '\n' => {
                    line_start = i + 1;
                    in_string = false;
                }
                _ if in_string => {
                    if escaped {
                        escaped = false;
                    } else if c == '\\' {
                        escaped = true;
                    } else if c == '"' {
                        in_string = false;
                    }
                }
                '"' => in_string = true,
                '#' => {
                    let end = source[i..].find('\n').map_or(source.len(), |n| i + n);
                    let own_line = source[line_start..i].trim().is_empty();
                    list.push(Comment { start: i as u32, line_start: line_start as u32, text: source[i..end].trim_end().to_string(), own_line, used: false });
                    while chars.peek().is_some_and(|(j, _)| *j < end) {
                        chars.next();
                    }
                }
                _ => {}
            }
        }
        Comments { list, source: source.to_string() }
    }
}

fn is_ident(s: &str) -> bool {
    crate::names::is_identifier(s)
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
    /// The source's comments, when printing them back.
    comments: Option<&'a mut Comments>,
}

impl Printer<'_> {
    fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    /// Prints the unprinted comments that start before byte `end`, each on a line of its
    /// own; with `indented_only`, only those that do not start their line at column 0 (a
    /// function's own, not the next one's).
    fn flush_before(&mut self, end: u32, indented_only: bool) {
        let Some(cs) = self.comments.as_deref_mut() else { return };
        let mut lines = Vec::new();
        for c in cs.list.iter_mut().filter(|c| !c.used && c.start < end && !(indented_only && c.start == c.line_start)) {
            c.used = true;
            lines.push(c.text.clone());
        }
        for l in lines {
            self.line(&l);
        }
    }

    /// Prints `text`, the first line of an item written at `span`: after the comments that
    /// precede it, and followed by a comment that ends the same source line.
    fn item(&mut self, span: Span, text: &str) {
        if !span.is_known() {
            self.line(text);
            return;
        }
        self.flush_before(span.start, false);
        // A comment on the line where the item starts, after it.
        let trailing = self.comments.as_deref_mut().and_then(|cs| {
            let c = cs.list.iter_mut().find(|c| !c.used && !c.own_line && c.line_start <= span.start && span.start <= c.start)?;
            c.used = true;
            Some(c.text.clone())
        });
        match trailing {
            Some(t) => self.line(&format!("{text}  {t}")),
            None => self.line(text),
        }
    }

    /// Prints the closing brace of an item written at `span`, after the comments inside it
    /// that are not printed yet (at the indentation of its body).
    fn close(&mut self, span: Span, text: &str) {
        if span.is_known() {
            self.indent += 1;
            self.flush_before(span.end, false);
            self.indent -= 1;
        }
        self.line(text);
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
        let header = format!("func {}({}){}{} {{", name(&f.name), params.join(", "), stage, self.attrs(&f.attrs));
        self.item(f.span, &header);
        self.indent += 1;
        for (_, a) in f.axes.iter() {
            let s = self.axis_decl(a);
            self.item(a.span, &s);
        }
        let stmt_allocated = f.stmt_allocated_buffers();
        for (h, b) in f.buffers.iter() {
            if !stmt_allocated.contains(&h) {
                let s = self.buffer_decl(b);
                self.item(b.span, &s);
            }
        }
        for s in &f.body {
            self.stmt(s);
        }
        // Comments at the end of the body; one at column 0 belongs to what follows.
        if f.span.is_known() {
            self.flush_before(f.span.end, true);
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
        if !a.unique {
            args.push("unique = false".to_string());
        }
        if let Some(pt) = &a.pattern {
            let members: Vec<&str> = pt.members.iter().map(|m| self.axis(*m)).collect();
            args.push(format!("pattern = {}({})", pt.op.name(), members.join(", ")));
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
        if let Some(m) = &b.modes {
            let _ = write!(s, ", modes = [{}]", m.iter().map(usize::to_string).collect::<Vec<_>>().join(", "));
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
                self.item(s.span, &line);
            }
            StmtKind::Evaluate(e) => {
                let line = self.expr(e, 0);
                self.item(s.span, &line);
            }
            StmtKind::Let { var, value } => {
                let v = self.f.vars.try_get(*var);
                let inferred = self.f.expr_dtype(value);
                let ty = match v {
                    Some(v) if v.dtype != inferred => format!(": {}", v.dtype),
                    _ => String::new(),
                };
                let line = format!("let {}{} = {}", self.var(*var), ty, self.expr(value, 0));
                self.item(s.span, &line);
            }
            StmtKind::Alloc(b) => {
                let line = match self.f.buffers.try_get(*b) {
                    Some(buf) => self.buffer_decl(buf),
                    None => "buffer <bad-buffer> = alloc_buffer([], i32)".to_string(),
                };
                self.item(s.span, &line);
            }
            StmtKind::If { cond, then_body, else_body } => {
                let line = format!("if {} {{", self.expr(cond, 0));
                self.item(s.span, &line);
                self.if_tail(s.span, then_body, else_body);
            }
            StmtKind::While { cond, body } => {
                let line = format!("while {} {{", self.expr(cond, 0));
                self.item(s.span, &line);
                self.stmts(body);
                self.close(s.span, "}");
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
                        SpIterAxis::Merge { op, axes } => {
                            format!("{}({})", op.name(), axes.iter().map(|a| self.axis(*a)).collect::<Vec<_>>().join(", "))
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
                self.item(s.span, &line);
                self.block_body(it.init.as_ref(), &it.body);
                self.close(s.span, "}");
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
                self.item(s.span, &line);
                self.stmts(&l.body);
                self.close(s.span, "}");
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
                self.item(s.span, &line);
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
                self.close(s.span, "}");
            }
        }
    }

    fn if_tail(&mut self, span: Span, then_body: &[Stmt], else_body: &[Stmt]) {
        self.stmts(then_body);
        // Comments at the end of the then-branch stay there (before `else`).
        let first = else_body.first().filter(|s| s.span.is_known()).map(|s| s.span.start as usize);
        let at_else = first.and_then(|f| {
            let cs = self.comments.as_deref()?;
            let in_comment = |p: usize| cs.list.iter().any(|c| (c.start as usize..c.start as usize + c.text.len()).contains(&p));
            cs.source.get(..f)?.rmatch_indices("else").map(|(p, _)| p).find(|&p| !in_comment(p))
        });
        if let Some(pos) = at_else {
            self.indent += 1;
            self.flush_before(pos as u32, false);
            self.indent -= 1;
        }
        if else_body.is_empty() {
            self.close(span, "}");
        } else if let [Stmt { kind: StmtKind::If { cond, then_body, else_body }, span: inner }] = else_body {
            let line = format!("}} else if {} {{", self.expr(cond, 0));
            self.line(&line);
            self.if_tail(if inner.is_known() { *inner } else { span }, then_body, else_body);
        } else {
            self.line("} else {");
            self.stmts(else_body);
            self.close(span, "}");
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
