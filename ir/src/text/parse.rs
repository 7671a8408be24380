//! Front end: `.sptir` text to [`Module`], with name resolution.

use crate::expr::{BinOp, Expr, Intrinsic, UnOp};
use crate::func::*;
use crate::span::{Location, SourceFile, Span};
use crate::types::*;
use pest::iterators::{Pair, Pairs};
use pest::pratt_parser::{Assoc, Op, PrattParser};
use pest::Parser as _;
use std::collections::HashMap;
use std::sync::OnceLock;

#[derive(pest_derive::Parser)]
#[grammar = "text/sptir.pest"]
struct SptirParser;

/// Deepest bracket nesting and expression depth accepted; deeper input is rejected
/// rather than risking the stack.
pub const MAX_NESTING: usize = 128;

/// A `.sptir` input that could not be turned into IR.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    /// The text does not follow the grammar.
    #[error("{rendered}")]
    Syntax {
        /// Where.
        location: Location,
        /// What was expected.
        message: String,
        /// `file:line:col: message`, the line and a caret.
        rendered: String,
    },
    /// The text parses but names or forms are wrong (unknown name, bad arguments).
    #[error("{rendered}")]
    Semantic {
        /// Where.
        location: Location,
        /// What is wrong.
        message: String,
        /// `file:line:col: message`, the line and a caret.
        rendered: String,
    },
}

impl ParseError {
    /// The bare message, without location.
    pub fn message(&self) -> &str {
        match self {
            ParseError::Syntax { message, .. } | ParseError::Semantic { message, .. } => message,
        }
    }

    /// Where the error is.
    pub fn location(&self) -> Location {
        match self {
            ParseError::Syntax { location, .. } | ParseError::Semantic { location, .. } => *location,
        }
    }
}

type PResult<T> = Result<T, (Span, String)>;

/// Parses a whole file. `name` is used in diagnostics.
pub fn parse(name: &str, text: &str) -> Result<Module, ParseError> {
    let src = SourceFile::new(name, text);
    let semantic = |(span, msg): (Span, String)| ParseError::Semantic {
        location: src.location(span.start as usize),
        rendered: src.render(span, &msg),
        message: msg,
    };
    check_nesting(text).map_err(semantic)?;
    let mut pairs = SptirParser::parse(Rule::file, text).map_err(|first| {
        // Parse again tracking literal tokens too, which finds where the input really goes
        // wrong (see `syntax_error`); only failing inputs pay for the tracking. The switch is
        // global, hence the lock.
        static DETAIL: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _guard = DETAIL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        pest::set_error_detail(true);
        let detailed = SptirParser::parse(Rule::file, text).err();
        pest::set_error_detail(false);
        syntax_error(&src, detailed.unwrap_or(first))
    })?;
    let file = pairs.next().expect("grammar: file");
    let mut module = Module::default();
    for p in file.into_inner() {
        if p.as_rule() == Rule::func {
            let f = FuncBuilder::new().build(p).map_err(semantic)?;
            if module.funcs.iter().any(|g| g.name == f.name) {
                return Err(semantic((f.span, format!("function `{}` is defined twice", f.name))));
            }
            module.funcs.push(f);
        }
    }
    Ok(module)
}

/// Parses text holding exactly one function.
pub fn parse_func(name: &str, text: &str) -> Result<Func, ParseError> {
    let mut m = parse(name, text)?;
    if m.funcs.len() != 1 {
        let src = SourceFile::new(name, text);
        let message = format!("expected exactly one function, found {}", m.funcs.len());
        return Err(ParseError::Semantic {
            location: src.location(0),
            rendered: src.render(Span::NONE, &message),
            message,
        });
    }
    Ok(m.funcs.remove(0))
}

fn check_nesting(text: &str) -> PResult<()> {
    let mut depth = 0usize;
    let mut prefix_run = 0usize;
    let mut in_str = false;
    let mut escaped = false;
    let mut in_comment = false;
    let bytes = text.as_bytes();
    for (i, &c) in bytes.iter().enumerate() {
        if in_comment {
            in_comment = c != b'\n';
            continue;
        }
        if in_str {
            // `\"` does not end a string (nor `\` a line).
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else {
                in_str = c != b'"' && c != b'\n';
            }
            continue;
        }
        match c {
            b'"' => in_str = true,
            b'#' => in_comment = true,
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if c == b'-' || c == b'!' {
            prefix_run += 1;
        } else if !c.is_ascii_whitespace() {
            prefix_run = 0;
        }
        if depth > MAX_NESTING || prefix_run > MAX_NESTING {
            return Err((Span::new(i, i + 1), format!("nesting deeper than {MAX_NESTING} levels")));
        }
    }
    Ok(())
}

fn rule_name(r: &Rule) -> String {
    match r {
        Rule::EOI => "end of input",
        Rule::file => "a function",
        Rule::func => "`func`",
        Rule::ident => "an identifier",
        Rule::string => "a string",
        Rule::name => "a name",
        Rule::param_list | Rule::param => "a parameter `name: type`",
        Rule::stage_clause => "`stage`",
        Rule::stage_num => "a stage (I, II or III)",
        Rule::attrs_clause => "`attrs(...)`",
        Rule::attr => "an attribute `key = value`",
        Rule::attr_value => "an attribute value (bool, number or string)",
        Rule::axis_decl => "`axis`",
        Rule::buffer_decl => "`buffer`",
        Rule::arg_list | Rule::kwarg => "an argument",
        Rule::list => "a list `[...]`",
        Rule::sp_iter => "`sp_iter`",
        Rule::fuse_axis => "`fuse(...)`",
        Rule::attach_axis => "`attach(...)`",
        Rule::ident_list => "a list of names",
        Rule::init => "`init`",
        Rule::for_stmt => "`for`",
        Rule::for_kind => "a loop kind (serial, parallel, vectorized, unrolled, blockIdx.x, threadIdx.x, ...)",
        Rule::block_stmt => "`block`",
        Rule::block_iter => "a block iterator `v: spatial(extent) = binding`",
        Rule::iter_kind => "`spatial` or `reduce`",
        Rule::reads => "`reads(...)`",
        Rule::writes => "`writes(...)`",
        Rule::region | Rule::range => "a buffer region",
        Rule::if_stmt => "`if`",
        Rule::else_part => "`else`",
        Rule::while_stmt => "`while`",
        Rule::let_stmt => "`let`",
        Rule::store => "a store `buf[...] = value`",
        Rule::eval_stmt | Rule::call => "a call",
        Rule::expr | Rule::paren | Rule::load => "an expression",
        Rule::or | Rule::and | Rule::eq | Rule::ne | Rule::le | Rule::ge | Rule::lt | Rule::gt
        | Rule::add | Rule::sub | Rule::floordiv | Rule::mul | Rule::div | Rule::modulo => "an operator",
        Rule::neg | Rule::not => "a unary operator",
        Rule::float_lit | Rule::float_body | Rule::neg_float => "a float literal",
        Rule::int_lit | Rule::neg_int => "an integer literal",
        Rule::bool_lit => "`true` or `false`",
        Rule::keyword => "a keyword",
        _ => return format!("{r:?}"),
    }
    .to_string()
}

fn syntax_error(src: &SourceFile, e: pest::error::Error<Rule>) -> ParseError {
    let (mut start, mut end) = match e.location {
        pest::error::InputLocation::Pos(p) => (p, p + 1),
        pest::error::InputLocation::Span((a, b)) => (a, b.max(a + 1)),
    };
    let (mut names, negatives): (Vec<String>, Vec<String>) = match &e.variant {
        pest::error::ErrorVariant::ParsingError { positives, negatives } => {
            (positives.iter().map(rule_name).collect(), negatives.iter().map(rule_name).collect())
        }
        pest::error::ErrorVariant::CustomError { message } => (vec![message.clone()], vec![]),
    };
    // pest's own position only counts rules; the farthest attempt also counts literal tokens
    // (`,`, `)`, `as`, `{`), which is where the input actually goes wrong.
    if let Some(attempts) = e.parse_attempts() {
        let tokens: Vec<String> = attempts
            .expected_tokens()
            .into_iter()
            .map(|t| t.to_string())
            // Literal strings only: not whitespace or comments, built-ins or ranges (`a..z`).
            .filter(|t| {
                let range = t.chars().count() == 4 && t.chars().skip(1).take(2).all(|c| c == '.');
                // `_` only ever continues an identifier (or is a keyword's lookahead).
                !t.trim().is_empty() && !matches!(t.as_str(), "#" | "_" | "BUILTIN_RULE") && !range
            })
            .collect();
        if attempts.max_position > start && !tokens.is_empty() {
            (start, end) = (attempts.max_position, attempts.max_position + 1);
            names = tokens.iter().map(|t| format!("`{t}`")).collect();
        } else if attempts.max_position == start {
            // Where rules are expected too, only closing and separating punctuation adds to them.
            let punct = tokens.iter().filter(|t| matches!(t.as_str(), "{" | "}" | "(" | ")" | "[" | "]" | "," | ":" | "="));
            names.extend(punct.map(|t| format!("`{t}`")));
        }
    }
    // The token found: an identifier or number, a string's start, or one character.
    let rest = src.text.get(start..).unwrap_or("");
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
    let found = match rest.chars().next() {
        None => "end of input".to_string(),
        Some('\n' | '\r') => "end of line".to_string(),
        Some(c) if ident(c) => format!("`{}`", rest.chars().take_while(|&c| ident(c)).take(32).collect::<String>()),
        Some('"') => format!("`{}`", rest.chars().take_while(|&c| c != '\n').take(32).collect::<String>().trim_end()),
        Some(c) => format!("`{c}`"),
    };
    names.sort();
    names.dedup();
    let message = match (&e.variant, names.is_empty()) {
        (pest::error::ErrorVariant::CustomError { message }, _) => message.clone(),
        (_, true) => format!("unexpected {}, found {found}", negatives.join(" or ")),
        (_, false) => format!("expected {}, found {found}", names.join(" or ")),
    };
    let end = end.min(src.text.len()).max(start);
    ParseError::Syntax {
        location: src.location(start),
        rendered: src.render(Span::new(start, end.max(start + 1)), &message),
        message,
    }
}

fn span_of(p: &Pair<Rule>) -> Span {
    let s = p.as_span();
    Span::new(s.start(), s.end())
}

fn pratt() -> &'static PrattParser<Rule> {
    static P: OnceLock<PrattParser<Rule>> = OnceLock::new();
    P.get_or_init(|| {
        PrattParser::new()
            .op(Op::infix(Rule::or, Assoc::Left))
            .op(Op::infix(Rule::and, Assoc::Left))
            .op(Op::infix(Rule::eq, Assoc::Left)
                | Op::infix(Rule::ne, Assoc::Left)
                | Op::infix(Rule::lt, Assoc::Left)
                | Op::infix(Rule::le, Assoc::Left)
                | Op::infix(Rule::gt, Assoc::Left)
                | Op::infix(Rule::ge, Assoc::Left))
            .op(Op::infix(Rule::add, Assoc::Left) | Op::infix(Rule::sub, Assoc::Left))
            .op(Op::infix(Rule::mul, Assoc::Left)
                | Op::infix(Rule::div, Assoc::Left)
                | Op::infix(Rule::floordiv, Assoc::Left)
                | Op::infix(Rule::modulo, Assoc::Left))
            .op(Op::prefix(Rule::neg) | Op::prefix(Rule::not))
    })
}

/// Builds one function from its parse tree, resolving names.
struct FuncBuilder {
    func: Func,
    scopes: Vec<HashMap<String, VarId>>,
    axes: HashMap<String, AxisId>,
    buffers: HashMap<String, BufferId>,
    params: HashMap<String, ParamId>,
}

fn unquote(p: &Pair<Rule>) -> String {
    let s = p.as_str();
    if p.as_rule() == Rule::string || s.starts_with('"') {
        let inner = &s[1..s.len() - 1];
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some(o) => out.push(o),
                    None => {}
                }
            } else {
                out.push(c);
            }
        }
        out
    } else {
        s.to_string()
    }
}

fn name_of(p: Pair<Rule>) -> String {
    // `name` wraps either an ident or a string.
    match p.as_rule() {
        Rule::name => unquote(&p.into_inner().next().expect("grammar: name")),
        _ => unquote(&p),
    }
}

/// A parsed call argument: positional or keyword.
enum Arg<'i> {
    Pos(Pair<'i, Rule>),
    Kw(String, Pair<'i, Rule>, Span),
}

impl FuncBuilder {
    fn new() -> Self {
        FuncBuilder {
            func: Func::new(""),
            scopes: vec![HashMap::new()],
            axes: HashMap::new(),
            buffers: HashMap::new(),
            params: HashMap::new(),
        }
    }

    fn build(mut self, p: Pair<Rule>) -> PResult<Func> {
        self.func.span = span_of(&p);
        let mut inner = p.into_inner();
        self.func.name = name_of(inner.next().expect("grammar: func name"));
        for item in inner {
            match item.as_rule() {
                Rule::param_list => {
                    for param in item.into_inner() {
                        self.param(param)?;
                    }
                }
                Rule::stage_clause => {
                    let s = item.into_inner().next().expect("grammar: stage");
                    self.func.stage = Stage::from_name(s.as_str()).expect("grammar: stage name");
                }
                Rule::attrs_clause => self.func.attrs = self.attrs(item)?,
                Rule::axis_decl => self.axis_decl(item)?,
                Rule::buffer_decl => {
                    self.buffer_decl(item)?;
                }
                _ => {
                    let s = self.stmt(item)?;
                    self.func.body.push(s);
                }
            }
        }
        Ok(self.func)
    }

    fn param(&mut self, p: Pair<Rule>) -> PResult<()> {
        let span = span_of(&p);
        let mut it = p.into_inner();
        let name = it.next().expect("grammar: param name").as_str().to_string();
        let ty = it.next().expect("grammar: param type");
        if self.params.contains_key(&name) {
            return Err((span, format!("parameter `{name}` is declared twice")));
        }
        let kind = if ty.as_str() == "handle" {
            ParamKind::Handle
        } else if let Some(d) = DType::from_name(ty.as_str()) {
            let v = self.func.add_var(name.clone(), d);
            self.scopes[0].insert(name.clone(), v);
            ParamKind::Scalar(v)
        } else {
            return Err((
                span_of(&ty),
                format!("expected a parameter type (handle, i32, i64, f16, bf16, f32, f64, bool), found `{}`", ty.as_str()),
            ));
        };
        self.params.insert(name.clone(), self.func.params.len());
        self.func.params.push(Param { name, kind, span });
        Ok(())
    }

    fn attrs(&mut self, p: Pair<Rule>) -> PResult<Attrs> {
        let mut attrs = Attrs::new();
        for a in p.into_inner() {
            let span = span_of(&a);
            let mut it = a.into_inner();
            let key = name_of(it.next().expect("grammar: attr key"));
            let v = it.next().expect("grammar: attr value").into_inner().next().expect("grammar: value");
            let value = match v.as_rule() {
                Rule::bool_lit => AttrValue::Bool(v.as_str() == "true"),
                Rule::neg_int => AttrValue::Int(
                    v.as_str().parse().map_err(|_| (span, "integer attribute out of range".to_string()))?,
                ),
                Rule::neg_float => AttrValue::Float(parse_float_text(v.as_str()).ok_or((span, "bad float".to_string()))?),
                _ => AttrValue::Str(unquote(&v)),
            };
            if attrs.insert(key.clone(), value).is_some() {
                return Err((span, format!("attribute `{key}` is given twice")));
            }
        }
        Ok(attrs)
    }

    // ---- names -------------------------------------------------------------------------

    fn lookup_var(&self, name: &str) -> Option<VarId> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    fn axis(&self, p: &Pair<Rule>) -> PResult<AxisId> {
        let name = p.as_str();
        self.axes.get(name).copied().ok_or_else(|| (span_of(p), format!("unknown axis `{name}`")))
    }

    fn buffer(&self, p: &Pair<Rule>) -> PResult<BufferId> {
        let name = p.as_str();
        self.buffers.get(name).copied().ok_or_else(|| (span_of(p), format!("unknown buffer `{name}`")))
    }

    fn handle_param(&self, p: &Pair<Rule>) -> PResult<ParamId> {
        let name = p.as_str();
        match self.params.get(name) {
            Some(&i) if self.func.params[i].kind == ParamKind::Handle => Ok(i),
            Some(_) => Err((span_of(p), format!("parameter `{name}` is a scalar, expected a handle"))),
            None => Err((span_of(p), format!("unknown handle parameter `{name}`"))),
        }
    }

    fn bind_var(&mut self, name: &str, dtype: DType) -> VarId {
        let v = self.func.add_var(name, dtype);
        self.scopes.last_mut().expect("scope").insert(name.to_string(), v);
        v
    }

    fn check_new_name(&self, p: &Pair<Rule>) -> PResult<String> {
        let name = p.as_str().to_string();
        if self.axes.contains_key(&name) || self.buffers.contains_key(&name) {
            return Err((span_of(p), format!("`{name}` is already declared")));
        }
        Ok(name)
    }

    // ---- arguments ---------------------------------------------------------------------

    fn args<'i>(&self, p: Pair<'i, Rule>) -> PResult<Vec<Arg<'i>>> {
        let mut out = Vec::new();
        let mut seen_kw = false;
        for a in p.into_inner() {
            let span = span_of(&a);
            if a.as_rule() == Rule::kwarg {
                let mut it = a.into_inner();
                let k = it.next().expect("grammar: kw").as_str().to_string();
                out.push(Arg::Kw(k, it.next().expect("grammar: kw value"), span));
                seen_kw = true;
            } else {
                if seen_kw {
                    return Err((span, "positional argument after keyword argument".to_string()));
                }
                out.push(Arg::Pos(a));
            }
        }
        Ok(out)
    }

    /// Splits arguments into positional ones (checked against `min..=max`) and keyword ones
    /// (checked against `allowed`).
    fn split_args<'i>(
        &self,
        what: &str,
        call_span: Span,
        args: Vec<Arg<'i>>,
        min: usize,
        max: usize,
        allowed: &[&str],
    ) -> PResult<(Vec<Pair<'i, Rule>>, HashMap<String, (Pair<'i, Rule>, Span)>)> {
        let mut pos = Vec::new();
        let mut kw = HashMap::new();
        for a in args {
            match a {
                Arg::Pos(p) => pos.push(p),
                Arg::Kw(k, v, s) => {
                    if !allowed.contains(&k.as_str()) {
                        let hint = if allowed.is_empty() { "none".to_string() } else { allowed.join(", ") };
                        return Err((s, format!("`{what}` takes no argument `{k}` (keyword arguments: {hint})")));
                    }
                    if kw.insert(k.clone(), (v, s)).is_some() {
                        return Err((s, format!("argument `{k}` is given twice")));
                    }
                }
            }
        }
        if pos.len() < min || pos.len() > max {
            let want = if min == max { format!("{min}") } else { format!("{min} to {max}") };
            return Err((call_span, format!("`{what}` expects {want} positional arguments, found {}", pos.len())));
        }
        Ok((pos, kw))
    }

    fn word<'i>(&self, p: &Pair<'i, Rule>) -> Option<&'i str> {
        // An argument that is a bare identifier (an `expr` holding one `ident`).
        let mut cur = p.clone();
        loop {
            match cur.as_rule() {
                Rule::ident => return Some(cur.as_str()),
                Rule::expr => {
                    let mut it = cur.clone().into_inner();
                    let first = it.next()?;
                    if it.next().is_some() {
                        return None;
                    }
                    cur = first;
                }
                _ => return None,
            }
        }
    }

    fn dtype_arg(&self, p: &Pair<Rule>) -> PResult<DType> {
        self.word(p)
            .and_then(DType::from_name)
            .ok_or_else(|| (span_of(p), format!("expected a dtype (i32, i64, f16, bf16, f32, f64, bool), found `{}`", p.as_str())))
    }

    fn scope_arg(&self, p: &Pair<Rule>) -> PResult<Scope> {
        self.word(p)
            .and_then(Scope::from_name)
            .ok_or_else(|| (span_of(p), format!("expected a scope (global, shared, local), found `{}`", p.as_str())))
    }

    fn bool_arg(&self, p: &Pair<Rule>) -> PResult<bool> {
        match self.expr(p.clone())? {
            Expr::Bool(b) => Ok(b),
            _ => Err((span_of(p), format!("expected `true` or `false`, found `{}`", p.as_str()))),
        }
    }

    /// `[1, 0]`: a list of mode numbers.
    fn modes_arg(&self, p: &Pair<Rule>) -> PResult<Vec<usize>> {
        self.list_items(p)?
            .into_iter()
            .map(|i| match self.expr(i.clone())? {
                Expr::Int(v, _) if v >= 0 => Ok(v as usize),
                _ => Err((span_of(&i), format!("expected a mode number (0, 1, ...), found `{}`", i.as_str()))),
            })
            .collect()
    }

    fn list_items<'i>(&self, p: &Pair<'i, Rule>) -> PResult<Vec<Pair<'i, Rule>>> {
        if p.as_rule() != Rule::list {
            return Err((span_of(p), format!("expected a list `[...]`, found `{}`", p.as_str())));
        }
        Ok(p.clone().into_inner().collect())
    }

    fn ident_arg<'i>(&self, p: &Pair<'i, Rule>, what: &str) -> PResult<Pair<'i, Rule>> {
        let mut cur = p.clone();
        loop {
            match cur.as_rule() {
                Rule::ident => return Ok(cur),
                Rule::expr => {
                    let mut it = cur.clone().into_inner();
                    match (it.next(), it.next()) {
                        (Some(first), None) => cur = first,
                        _ => break,
                    }
                }
                _ => break,
            }
        }
        Err((span_of(p), format!("expected {what}, found `{}`", p.as_str())))
    }

    // ---- declarations ------------------------------------------------------------------

    fn axis_decl(&mut self, p: Pair<Rule>) -> PResult<()> {
        let span = span_of(&p);
        let mut it = p.into_inner();
        let name_p = it.next().expect("grammar: axis name");
        let name = self.check_new_name(&name_p)?;
        let kind_p = it.next().expect("grammar: axis kind");
        let kind = match kind_p.as_str() {
            "dense_fixed" => AxisKind::DenseFixed,
            "dense_variable" => AxisKind::DenseVariable,
            "sparse_fixed" => AxisKind::SparseFixed,
            "sparse_variable" => AxisKind::SparseVariable,
            other => {
                return Err((
                    span_of(&kind_p),
                    format!("expected an axis kind (dense_fixed, dense_variable, sparse_fixed, sparse_variable), found `{other}`"),
                ))
            }
        };
        let args = self.args(it.next().expect("grammar: axis args"))?;
        let (min, n) = match kind {
            AxisKind::DenseFixed => (1, 1),
            AxisKind::DenseVariable => (4, 4),
            // Three arguments: a root axis (`sparse_fixed(len, nnz, indices)`).
            AxisKind::SparseFixed => (3, 4),
            AxisKind::SparseVariable => (5, 5),
        };
        let allowed: &[&str] = match kind {
            AxisKind::SparseVariable => &["idtype", "sorted", "pattern"],
            AxisKind::SparseFixed => &["idtype", "sorted", "unique"],
            _ => &["idtype", "sorted"],
        };
        let (pos, kw) = self.split_args(kind.name(), span, args, min, n, allowed)?;
        let pattern = kw.get("pattern").map(|(v, _)| self.pattern_arg(v)).transpose()?;
        let idtype = match kw.get("idtype") {
            Some((v, _)) => self.dtype_arg(v)?,
            None => DType::I32,
        };
        if !idtype.is_int() {
            return Err((span, format!("axis index dtype must be i32 or i64, found {idtype}")));
        }
        let sorted = match kw.get("sorted") {
            Some((v, _)) => self.bool_arg(v)?,
            None => true,
        };
        let unique = match kw.get("unique") {
            Some((v, _)) => self.bool_arg(v)?,
            None => true,
        };
        let mut axis = Axis {
            name: name.clone(),
            kind,
            parent: None,
            length: Expr::i32(0),
            nnz: None,
            indptr: None,
            indices: None,
            idtype,
            sorted,
            unique,
            pattern,
            span,
        };
        match kind {
            AxisKind::DenseFixed => axis.length = self.expr(pos[0].clone())?,
            _ => {
                // Without its parent argument (a root axis) every other argument moves up one.
                let at = |k: usize| &pos[k + pos.len() - n];
                if pos.len() == n {
                    axis.parent = Some(self.axis(&self.ident_arg(&pos[0], "a parent axis")?)?);
                }
                axis.length = self.expr(at(1).clone())?;
                axis.nnz = Some(self.expr(at(2).clone())?);
                match kind {
                    AxisKind::DenseVariable => axis.indptr = Some(self.handle_param(&self.ident_arg(at(3), "an indptr handle")?)?),
                    AxisKind::SparseFixed => axis.indices = Some(self.handle_param(&self.ident_arg(at(3), "an indices handle")?)?),
                    _ => {
                        axis.indptr = Some(self.handle_param(&self.ident_arg(at(3), "an indptr handle")?)?);
                        axis.indices = Some(self.handle_param(&self.ident_arg(at(4), "an indices handle")?)?);
                    }
                }
            }
        }
        let h = self.func.axes.append(axis);
        self.axes.insert(name, h);
        Ok(())
    }

    /// `union(JA, JB)` or `intersect(..)`: an assembled axis's pattern (axes declared before).
    fn pattern_arg(&self, p: &Pair<Rule>) -> PResult<AxisPattern> {
        let span = span_of(p);
        let bad = || (span, format!("expected `union(A, B, ..)`, `intersect(A, B, ..)` or `product(A, B)` of declared axes, found `{}`", p.as_str()));
        let mut cur = p.clone();
        while cur.as_rule() == Rule::expr {
            let mut it = cur.clone().into_inner();
            match (it.next(), it.next()) {
                (Some(first), None) => cur = first,
                _ => return Err(bad()),
            }
        }
        if cur.as_rule() != Rule::call {
            return Err(bad());
        }
        let mut it = cur.into_inner();
        let op = match it.next().map(|x| x.as_str().to_string()).as_deref() {
            Some("union") => PatternOp::Union,
            Some("intersect") => PatternOp::Intersect,
            Some("product") => PatternOp::Product,
            _ => return Err(bad()),
        };
        let args = self.args(it.next().ok_or_else(bad)?)?;
        let mut members = Vec::new();
        for a in args {
            let Arg::Pos(x) = a else { return Err(bad()) };
            members.push(self.axis(&self.ident_arg(&x, "an axis")?)?);
        }
        if members.len() < 2 || (op == PatternOp::Product && members.len() != 2) {
            return Err(bad());
        }
        Ok(AxisPattern { op, members })
    }

    /// Parses a `buffer` declaration; returns the handle and whether it is an allocation.
    fn buffer_decl(&mut self, p: Pair<Rule>) -> PResult<(BufferId, bool)> {
        let span = span_of(&p);
        let mut it = p.into_inner();
        let name_p = it.next().expect("grammar: buffer name");
        let name = self.check_new_name(&name_p)?;
        let kind_p = it.next().expect("grammar: buffer kind");
        let kind = kind_p.as_str().to_string();
        let args = self.args(it.next().expect("grammar: buffer args"))?;
        let allowed_kw: &[&str] = if kind == "match_sparse_buffer" { &["extra_storage", "default", "modes"] } else { &["extra_storage", "default"] };
        let (storage_param, layout, dtype, scope, kw) = match kind.as_str() {
            "match_sparse_buffer" | "match_buffer" => {
                let (pos, kw) = self.split_args(&kind, span, args, 3, 3, allowed_kw)?;
                let param = self.handle_param(&self.ident_arg(&pos[0], "a handle parameter")?)?;
                let layout = self.layout(&kind, &pos[1])?;
                let dtype = self.dtype_arg(&pos[2])?;
                (Some(param), layout, dtype, None, kw)
            }
            "alloc_sparse_buffer" | "alloc_buffer" => {
                let (pos, kw) = self.split_args(&kind, span, args, 2, 3, allowed_kw)?;
                let layout = self.layout(&kind, &pos[0])?;
                let dtype = self.dtype_arg(&pos[1])?;
                let scope = match pos.get(2) {
                    Some(s) => self.scope_arg(s)?,
                    None => Scope::Global,
                };
                (None, layout, dtype, Some(scope), kw)
            }
            other => {
                return Err((
                    span_of(&kind_p),
                    format!("expected match_sparse_buffer, alloc_sparse_buffer, match_buffer or alloc_buffer, found `{other}`"),
                ))
            }
        };
        let extra_storage = kw.get("extra_storage").map(|(v, _)| self.expr(v.clone())).transpose()?;
        let default = kw.get("default").map(|(v, _)| self.expr(v.clone())).transpose()?;
        let modes = kw.get("modes").map(|(v, _)| self.modes_arg(v)).transpose()?;
        let storage = match (storage_param, scope) {
            (Some(p), _) => Storage::Param(p),
            (None, s) => Storage::Alloc(s.unwrap_or(Scope::Global)),
        };
        let is_alloc = matches!(storage, Storage::Alloc(_));
        let h = self.func.buffers.append(Buffer { name: name.clone(), dtype, layout, storage, extra_storage, default, modes, span });
        self.buffers.insert(name, h);
        Ok((h, is_alloc))
    }

    fn layout(&self, kind: &str, p: &Pair<Rule>) -> PResult<Layout> {
        let items = self.list_items(p)?;
        if kind.contains("sparse") {
            let mut axes = Vec::new();
            for i in &items {
                axes.push(self.axis(&self.ident_arg(i, "an axis")?)?);
            }
            Ok(Layout::Sparse(axes))
        } else {
            Ok(Layout::Dense(items.into_iter().map(|i| self.expr(i)).collect::<PResult<_>>()?))
        }
    }

    // ---- statements --------------------------------------------------------------------

    fn body<'i>(&mut self, pairs: impl Iterator<Item = Pair<'i, Rule>>) -> PResult<Vec<Stmt>> {
        self.scopes.push(HashMap::new());
        let r = pairs.map(|p| self.stmt(p)).collect();
        self.scopes.pop();
        r
    }

    fn stmt(&mut self, p: Pair<Rule>) -> PResult<Stmt> {
        let span = span_of(&p);
        let kind = match p.as_rule() {
            Rule::store => {
                let mut it = p.into_inner();
                let buffer = self.buffer(&it.next().expect("grammar: store buffer"))?;
                let mut exprs: Vec<Expr> = it.map(|e| self.expr(e)).collect::<PResult<_>>()?;
                let value = exprs.pop().expect("grammar: store value");
                StmtKind::Store { buffer, indices: exprs, value }
            }
            Rule::eval_stmt => StmtKind::Evaluate(self.expr(p.into_inner().next().expect("grammar: call"))?),
            Rule::let_stmt => {
                let mut it = p.into_inner();
                let name = it.next().expect("grammar: let name");
                let mut next = it.next().expect("grammar: let value");
                let mut ty = None;
                if next.as_rule() == Rule::ident {
                    ty = Some(DType::from_name(next.as_str()).ok_or_else(|| {
                        (span_of(&next), format!("expected a dtype, found `{}`", next.as_str()))
                    })?);
                    next = it.next().expect("grammar: let value");
                }
                let value = self.expr(next)?;
                let dtype = ty.unwrap_or_else(|| self.func.expr_dtype(&value));
                let var = self.bind_var(name.as_str(), dtype);
                StmtKind::Let { var, value }
            }
            Rule::buffer_decl => {
                let (h, is_alloc) = self.buffer_decl(p)?;
                if !is_alloc {
                    return Err((span, "`match_*` buffers must be declared at function level".to_string()));
                }
                StmtKind::Alloc(h)
            }
            Rule::if_stmt => self.if_stmt(p)?,
            Rule::while_stmt => {
                let mut it = p.into_inner();
                let cond = self.expr(it.next().expect("grammar: while cond"))?;
                StmtKind::While { cond, body: self.body(it)? }
            }
            Rule::sp_iter => StmtKind::SpIter(self.sp_iter(p)?),
            Rule::for_stmt => StmtKind::For(self.for_stmt(p)?),
            Rule::block_stmt => StmtKind::Block(self.block(p)?),
            Rule::axis_decl => return Err((span, "axes must be declared at function level".to_string())),
            r => return Err((span, format!("unexpected {}", rule_name(&r)))),
        };
        Ok(Stmt { kind, span })
    }

    fn if_stmt(&mut self, p: Pair<Rule>) -> PResult<StmtKind> {
        let mut it = p.into_inner().peekable();
        let cond = self.expr(it.next().expect("grammar: if cond"))?;
        let mut then_pairs = Vec::new();
        let mut else_part = None;
        for q in it {
            if q.as_rule() == Rule::else_part {
                else_part = Some(q);
            } else {
                then_pairs.push(q);
            }
        }
        let then_body = self.body(then_pairs.into_iter())?;
        let else_body = match else_part {
            None => Vec::new(),
            Some(e) => {
                let inner: Vec<Pair<Rule>> = e.into_inner().collect();
                if inner.len() == 1 && inner[0].as_rule() == Rule::if_stmt {
                    let q = inner.into_iter().next().expect("checked");
                    let span = span_of(&q);
                    self.scopes.push(HashMap::new());
                    let k = self.if_stmt(q);
                    self.scopes.pop();
                    vec![Stmt { kind: k?, span }]
                } else {
                    self.body(inner.into_iter())?
                }
            }
        };
        Ok(StmtKind::If { cond, then_body, else_body })
    }

    fn init_and_body(&mut self, rest: Vec<Pair<Rule>>) -> PResult<(Option<Vec<Stmt>>, Vec<Stmt>)> {
        let mut init = None;
        let mut stmts = Vec::new();
        for q in rest {
            if q.as_rule() == Rule::init {
                init = Some(self.body(q.into_inner())?);
            } else {
                stmts.push(q);
            }
        }
        Ok((init, self.body(stmts.into_iter())?))
    }

    fn sp_iter(&mut self, p: Pair<Rule>) -> PResult<SpIter> {
        let span = span_of(&p);
        let mut it = p.into_inner();
        let name = name_of(it.next().expect("grammar: sp_iter name"));
        let mut axes = Vec::new();
        let mut kinds = None;
        let mut var_names = Vec::new();
        let mut attrs = Attrs::new();
        let mut rest = Vec::new();
        for q in it {
            match q.as_rule() {
                Rule::ident => axes.push(SpIterAxis::Axis(self.axis(&q)?)),
                Rule::fuse_axis => {
                    let g = q.into_inner().map(|a| self.axis(&a)).collect::<PResult<Vec<_>>>()?;
                    axes.push(SpIterAxis::Fuse(g));
                }
                Rule::merge_axis => {
                    let mut a = q.into_inner();
                    let op = match a.next().expect("grammar: merge op").as_str() {
                        "union" => MergeOp::Union,
                        _ => MergeOp::Intersect,
                    };
                    let members = a.map(|x| self.axis(&x)).collect::<PResult<Vec<_>>>()?;
                    axes.push(SpIterAxis::Merge { op, axes: members });
                }
                Rule::attach_axis => {
                    let mut a = q.into_inner();
                    let axis = self.axis(&a.next().expect("grammar: attach axis"))?;
                    let parent = self.axis(&a.next().expect("grammar: attach parent"))?;
                    axes.push(SpIterAxis::Attach { axis, parent });
                }
                Rule::string => kinds = Some(unquote(&q)),
                Rule::ident_list => var_names = q.into_inner().collect(),
                Rule::attrs_clause => attrs = self.attrs(q)?,
                _ => rest.push(q),
            }
        }
        let iter_axes: Vec<AxisId> = axes.iter().flat_map(|a| a.axes()).collect();
        if var_names.len() != iter_axes.len() {
            return Err((
                span,
                format!("sparse iteration `{name}` iterates {} axes but binds {} variables", iter_axes.len(), var_names.len()),
            ));
        }
        self.scopes.push(HashMap::new());
        let mut vars = Vec::new();
        for (vn, a) in var_names.iter().zip(&iter_axes) {
            if self.scopes.last().is_some_and(|s| s.contains_key(vn.as_str())) {
                self.scopes.pop();
                return Err((span_of(vn), format!("iterator `{}` is bound twice", vn.as_str())));
            }
            let dt = self.func.axes[*a].idtype;
            vars.push(self.bind_var(vn.as_str(), dt));
        }
        let r = self.init_and_body(rest);
        self.scopes.pop();
        let (init, body) = r?;
        Ok(SpIter { name, axes, kinds: kinds.unwrap_or_default(), vars, init, body, attrs })
    }

    fn for_stmt(&mut self, p: Pair<Rule>) -> PResult<For> {
        let mut it = p.into_inner();
        let var_p = it.next().expect("grammar: for var");
        let kind_p = it.next().expect("grammar: for kind");
        let kind = ForKind::from_name(kind_p.as_str()).expect("grammar: for kind");
        let extent = self.expr(it.next().expect("grammar: for extent"))?;
        let mut min = None;
        let mut attrs = Attrs::new();
        let mut rest = Vec::new();
        for q in it {
            match q.as_rule() {
                Rule::expr if min.is_none() && rest.is_empty() => min = Some(self.expr(q)?),
                Rule::attrs_clause => attrs = self.attrs(q)?,
                _ => rest.push(q),
            }
        }
        let dtype = self.func.expr_dtype(&extent);
        let min = min.unwrap_or(Expr::Int(0, if dtype.is_int() { dtype } else { DType::I32 }));
        self.scopes.push(HashMap::new());
        let var = self.bind_var(var_p.as_str(), dtype);
        let body = self.body(rest.into_iter());
        self.scopes.pop();
        Ok(For { var, min, extent, kind, body: body?, attrs })
    }

    fn block(&mut self, p: Pair<Rule>) -> PResult<Block> {
        let mut it = p.into_inner();
        let name = name_of(it.next().expect("grammar: block name"));
        let mut iters_p = Vec::new();
        let mut attrs = Attrs::new();
        let mut reads_p = None;
        let mut writes_p = None;
        let mut rest = Vec::new();
        for q in it {
            match q.as_rule() {
                Rule::block_iter => iters_p.push(q),
                Rule::attrs_clause => attrs = self.attrs(q)?,
                Rule::reads => reads_p = Some(q),
                Rule::writes => writes_p = Some(q),
                _ => rest.push(q),
            }
        }
        // Extents and bindings are evaluated outside the block's scope.
        let mut pending = Vec::new();
        for q in iters_p {
            let mut qi = q.into_inner();
            let v = qi.next().expect("grammar: iter var");
            let kind = match qi.next().expect("grammar: iter kind").as_str() {
                "reduce" => IterKind::Reduce,
                _ => IterKind::Spatial,
            };
            let extent = self.expr(qi.next().expect("grammar: iter extent"))?;
            let binding = self.expr(qi.next().expect("grammar: iter binding"))?;
            pending.push((v, kind, extent, binding));
        }
        self.scopes.push(HashMap::new());
        let mut iters = Vec::new();
        for (v, kind, extent, binding) in pending {
            if self.scopes.last().is_some_and(|s| s.contains_key(v.as_str())) {
                self.scopes.pop();
                return Err((span_of(&v), format!("block iterator `{}` is bound twice", v.as_str())));
            }
            let dt = self.func.expr_dtype(&binding);
            let var = self.bind_var(v.as_str(), dt);
            iters.push(BlockIter { var, kind, extent, binding });
        }
        let r = (|| -> PResult<_> {
            let reads = reads_p.map(|r| self.regions(r)).transpose()?.unwrap_or_default();
            let writes = writes_p.map(|r| self.regions(r)).transpose()?.unwrap_or_default();
            let (init, body) = self.init_and_body(rest)?;
            Ok((reads, writes, init, body))
        })();
        self.scopes.pop();
        let (reads, writes, init, body) = r?;
        Ok(Block { name, iters, reads, writes, init, body, attrs })
    }

    fn regions(&mut self, p: Pair<Rule>) -> PResult<Vec<Region>> {
        p.into_inner()
            .map(|r| {
                let mut it = r.into_inner();
                let buffer = self.buffer(&it.next().expect("grammar: region buffer"))?;
                let ranges = it
                    .map(|rr| {
                        let mut e = rr.into_inner();
                        let begin = self.expr(e.next().expect("grammar: range begin"))?;
                        let end = e.next().map(|x| self.expr(x)).transpose()?;
                        Ok(RegionRange { begin, end })
                    })
                    .collect::<PResult<_>>()?;
                Ok(Region { buffer, ranges })
            })
            .collect()
    }

    // ---- expressions -------------------------------------------------------------------

    fn expr(&self, p: Pair<Rule>) -> PResult<Expr> {
        match p.as_rule() {
            Rule::expr => self.expr_pairs(p.into_inner()).map(|(e, _)| e),
            _ => self.primary(p).map(|(e, _)| e),
        }
    }

    fn expr_pairs(&self, pairs: Pairs<Rule>) -> PResult<(Expr, usize)> {
        pratt()
            .map_primary(|p| self.primary(p))
            .map_prefix(|op, rhs| {
                let (rhs, d) = rhs?;
                let span = span_of(&op);
                let folded = match (op.as_rule(), &rhs) {
                    (Rule::neg, Expr::Int(v, t)) if !self.was_paren(&op) => Some(Expr::Int(v.wrapping_neg(), *t)),
                    (Rule::neg, Expr::Float(v, t)) if !self.was_paren(&op) => Some(Expr::Float(-v, *t)),
                    _ => None,
                };
                let e = folded.unwrap_or_else(|| {
                    Expr::Unary(if op.as_rule() == Rule::neg { UnOp::Neg } else { UnOp::Not }, Box::new(rhs))
                });
                depth_ok(e, d + 1, span)
            })
            .map_infix(|lhs, op, rhs| {
                let (lhs, dl) = lhs?;
                let (rhs, dr) = rhs?;
                let bop = match op.as_rule() {
                    Rule::or => BinOp::Or,
                    Rule::and => BinOp::And,
                    Rule::eq => BinOp::Eq,
                    Rule::ne => BinOp::Ne,
                    Rule::lt => BinOp::Lt,
                    Rule::le => BinOp::Le,
                    Rule::gt => BinOp::Gt,
                    Rule::ge => BinOp::Ge,
                    Rule::add => BinOp::Add,
                    Rule::sub => BinOp::Sub,
                    Rule::mul => BinOp::Mul,
                    Rule::div => BinOp::Div,
                    Rule::floordiv => BinOp::FloorDiv,
                    _ => BinOp::FloorMod,
                };
                depth_ok(Expr::binary(bop, lhs, rhs), dl.max(dr) + 1, span_of(&op))
            })
            .parse(pairs)
    }

    /// Whether the operand following this prefix operator is a parenthesised expression.
    fn was_paren(&self, op: &Pair<Rule>) -> bool {
        let rest = &op.get_input()[op.as_span().end()..];
        rest.trim_start().starts_with('(')
    }

    fn primary(&self, p: Pair<Rule>) -> PResult<(Expr, usize)> {
        let span = span_of(&p);
        let e = match p.as_rule() {
            Rule::int_lit => {
                let s = p.as_str();
                let (digits, dt) = match s.strip_suffix("i64") {
                    Some(d) => (d, DType::I64),
                    None => (s.strip_suffix("i32").unwrap_or(s), DType::I32),
                };
                let v: i64 = digits.parse().map_err(|_| (span, format!("integer literal `{s}` is out of range")))?;
                if dt == DType::I32 && v > i32::MAX as i64 + 1 {
                    return Err((span, format!("integer literal `{s}` does not fit in i32 (write `{digits}i64`)")));
                }
                Expr::Int(v, dt)
            }
            Rule::float_lit => {
                let s = p.as_str();
                let (body, dt) = ["bf16", "f16", "f32", "f64"]
                    .iter()
                    .find_map(|suf| s.strip_suffix(suf).map(|b| (b, DType::from_name(suf).expect("dtype"))))
                    .unwrap_or((s, DType::F32));
                let v = parse_float_text(body).ok_or_else(|| (span, format!("bad float literal `{s}`")))?;
                Expr::Float(v, dt)
            }
            Rule::bool_lit => Expr::Bool(p.as_str() == "true"),
            Rule::ident => {
                let name = p.as_str();
                match self.lookup_var(name) {
                    Some(v) => Expr::Var(v),
                    None => {
                        let hint = if self.buffers.contains_key(name) {
                            " (it is a buffer: index it as `buf[...]`)"
                        } else if self.axes.contains_key(name) {
                            " (it is an axis, not a value)"
                        } else if self.params.contains_key(name) {
                            " (handle parameters are not values)"
                        } else {
                            ""
                        };
                        return Err((span, format!("unknown variable `{name}`{hint}")));
                    }
                }
            }
            Rule::paren => return self.expr_pairs(p.into_inner().next().expect("grammar: paren").into_inner()),
            Rule::expr => return self.expr_pairs(p.into_inner()),
            Rule::load => {
                let mut it = p.into_inner();
                let buffer = self.buffer(&it.next().expect("grammar: load buffer"))?;
                let idx = it.map(|e| self.expr(e)).collect::<PResult<Vec<_>>>()?;
                Expr::Load(buffer, idx)
            }
            Rule::call => return self.call(p),
            r => return Err((span, format!("unexpected {}", rule_name(&r)))),
        };
        Ok((e, 1))
    }

    fn call(&self, p: Pair<Rule>) -> PResult<(Expr, usize)> {
        let span = span_of(&p);
        let mut it = p.into_inner();
        let fname = it.next().expect("grammar: call name").as_str().to_string();
        let args = self.args(it.next().expect("grammar: call args"))?;
        let (pos, _) = self.split_args(&fname, span, args, 0, usize::MAX, &[])?;
        let want = |n: usize| -> PResult<()> {
            if pos.len() == n {
                Ok(())
            } else {
                Err((span, format!("`{fname}` expects {n} arguments, found {}", pos.len())))
            }
        };
        let exprs = |pos: &[Pair<Rule>]| -> PResult<Vec<Expr>> { pos.iter().map(|a| self.expr(a.clone())).collect() };
        let e = match fname.as_str() {
            "min" | "max" => {
                want(2)?;
                let mut v = exprs(&pos)?;
                let b = v.pop().expect("2 args");
                let a = v.pop().expect("2 args");
                Expr::binary(if fname == "min" { BinOp::Min } else { BinOp::Max }, a, b)
            }
            "select" => {
                want(3)?;
                let mut v = exprs(&pos)?.into_iter();
                let (c, a, b) = (v.next().expect("3"), v.next().expect("3"), v.next().expect("3"));
                Expr::Select(Box::new(c), Box::new(a), Box::new(b))
            }
            "cast" => {
                want(2)?;
                let d = self.dtype_arg(&pos[0])?;
                Expr::Cast(d, Box::new(self.expr(pos[1].clone())?))
            }
            "max_value" | "min_value" => {
                want(1)?;
                let d = self.dtype_arg(&pos[0])?;
                Expr::Call(if fname == "max_value" { Intrinsic::MaxValue(d) } else { Intrinsic::MinValue(d) }, vec![])
            }
            "atomic_add" => {
                want(2)?;
                let target = self.expr(pos[0].clone())?;
                let Expr::Load(b, idx) = target else {
                    return Err((span_of(&pos[0]), "`atomic_add` expects a buffer element `buf[...]` first".to_string()));
                };
                Expr::AtomicAdd(b, idx, Box::new(self.expr(pos[1].clone())?))
            }
            name => match Intrinsic::from_name(name) {
                Some(i) => {
                    want(i.arity())?;
                    Expr::Call(i, exprs(&pos)?)
                }
                None => {
                    return Err((
                        span,
                        format!("unknown function `{name}` (known: exp, log, sqrt, abs, tanh, sigmoid, pow, floor, ceil, fma, min, max, select, cast, max_value, min_value, atomic_add)"),
                    ))
                }
            },
        };
        let depth = expr_depth(&e);
        depth_ok(e, depth, span)
    }
}

fn expr_depth(e: &Expr) -> usize {
    1 + e.children().into_iter().map(expr_depth).max().unwrap_or(0)
}

fn depth_ok(e: Expr, depth: usize, span: Span) -> PResult<(Expr, usize)> {
    if depth > MAX_NESTING {
        Err((span, format!("expression nested deeper than {MAX_NESTING} levels")))
    } else {
        Ok((e, depth))
    }
}

fn parse_float_text(s: &str) -> Option<f64> {
    match s.trim_start_matches('-') {
        "inf" => Some(if s.starts_with('-') { f64::NEG_INFINITY } else { f64::INFINITY }),
        "nan" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}
