//! `#[cube]` Rust rendering of the kernels of a program, with a launch helper, for users to
//! vendor into their own crate (it depends on `cubecl` alone).

use crate::lower::{BufRef, Builtin, Gen, LowerError, Walker};
use crate::plan::{KernelPlan, LaunchPlan, ProgramPlan};
use sparsec_ir::{BinOp, BufferId, DType, Expr, Func, Intrinsic, ParamKind, ThreadTag, UnOp};
use std::collections::HashMap;
use std::fmt::Write;

/// Why a program cannot be rendered.
#[derive(Debug, thiserror::Error)]
pub enum EmitError {
    /// The kernel body cannot be generated.
    #[error(transparent)]
    Lower(#[from] LowerError),
    /// A dtype without a `#[cube]` spelling.
    #[error("dtype {0} has no CubeCL Rust spelling here")]
    DType(DType),
}

/// The Rust type of a dtype in `#[cube]` code: the `.sptir` keyword is the Rust (and
/// CubeCL, for `f16`/`bf16`) type name.
pub fn rust_type(d: DType) -> &'static str {
    d.name()
}

struct TextGen<'a> {
    out: String,
    indent: usize,
    counter: usize,
    plan: &'a KernelPlan,
    allocs: HashMap<BufferId, String>,
}

type R<T> = Result<T, LowerError>;

impl TextGen<'_> {
    fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn fresh(&mut self, name: &str) -> String {
        self.counter += 1;
        format!("{name}_{}", self.counter)
    }

    fn buf_name(&self, b: BufRef) -> String {
        match b {
            BufRef::Arg(i) => self.plan.bufs[i].name.clone(),
            BufRef::Alloc(id) => self.allocs.get(&id).cloned().unwrap_or_else(|| "missing".into()),
        }
    }

    fn block(&mut self, f: &mut dyn FnMut(&mut Self) -> R<()>) -> R<()> {
        self.indent += 1;
        let r = f(self);
        self.indent -= 1;
        r
    }
}

fn float_lit(v: f64, d: DType) -> String {
    let t = rust_type(d);
    let body = match d {
        DType::F32 => {
            let x = v as f32;
            if x.is_finite() { format!("{x:?}") } else { return format!("{t}::{}", if x.is_nan() { "NAN" } else if x > 0.0 { "INFINITY" } else { "NEG_INFINITY" }) }
        }
        _ => {
            if v.is_finite() { format!("{v:?}") } else { return format!("{t}::{}", if v.is_nan() { "NAN" } else if v > 0.0 { "INFINITY" } else { "NEG_INFINITY" }) }
        }
    };
    match d {
        DType::F32 | DType::F64 => format!("{body}{t}"),
        _ => format!("{t}::cast_from({body}f32)"),
    }
}

impl Gen for TextGen<'_> {
    type V = String;

    fn int(&mut self, v: i64, d: DType) -> R<String> {
        Ok(if v < 0 { format!("({v}{})", rust_type(d)) } else { format!("{v}{}", rust_type(d)) })
    }

    fn float(&mut self, v: f64, d: DType) -> R<String> {
        let s = float_lit(v, d);
        Ok(if v < 0.0 { format!("({s})") } else { s })
    }

    fn boolean(&mut self, v: bool) -> R<String> {
        Ok(v.to_string())
    }

    fn binary(&mut self, op: BinOp, a: String, b: String, d: DType) -> R<String> {
        let t = rust_type(d);
        Ok(match op {
            BinOp::FloorDiv if d.is_int() => format!("floor_div_{t}({a}, {b})"),
            BinOp::FloorMod if d.is_int() => format!("floor_mod_{t}({a}, {b})"),
            BinOp::FloorDiv => format!("{t}::floor({a} / {b})"),
            BinOp::FloorMod => format!("({a} - {t}::floor({a} / {b}) * {b})"),
            BinOp::Min => format!("min_{t}({a}, {b})"),
            BinOp::Max => format!("max_{t}({a}, {b})"),
            op => format!("({a} {} {b})", op.symbol().unwrap_or("?")),
        })
    }

    fn unary(&mut self, op: UnOp, a: String, _d: DType) -> R<String> {
        Ok(match op {
            UnOp::Neg => format!("(-{a})"),
            UnOp::Not => format!("(!{a})"),
        })
    }

    fn select(&mut self, c: String, a: String, b: String, _d: DType) -> R<String> {
        Ok(format!("select({c}, {a}, {b})"))
    }

    fn cast(&mut self, v: String, from: DType, to: DType) -> R<String> {
        Ok(match (from, to) {
            (_, DType::Bool) => format!("({v} != {})", if from.is_int() { format!("0{}", rust_type(from)) } else { float_lit(0.0, from) }),
            (DType::Bool, t) => {
                let (one, zero) = if t.is_int() { (format!("1{}", rust_type(t)), format!("0{}", rust_type(t))) } else { (float_lit(1.0, t), float_lit(0.0, t)) };
                format!("select({v}, {one}, {zero})")
            }
            (_, t) => format!("{}::cast_from({v})", rust_type(t)),
        })
    }

    fn call(&mut self, f: Intrinsic, args: Vec<String>, d: DType) -> R<String> {
        let t = rust_type(d);
        let a = args.first().cloned().unwrap_or_default();
        Ok(match f {
            Intrinsic::Exp => format!("{t}::exp({a})"),
            Intrinsic::Log => format!("{t}::ln({a})"),
            Intrinsic::Sqrt => format!("{t}::sqrt({a})"),
            Intrinsic::Abs => format!("{t}::abs({a})"),
            Intrinsic::Tanh => format!("{t}::tanh({a})"),
            Intrinsic::Sigmoid => format!("({one} / ({one} + {t}::exp(-{a})))", one = float_lit(1.0, d)),
            Intrinsic::Pow => format!("{t}::powf({a}, {})", args.get(1).cloned().unwrap_or_default()),
            Intrinsic::Floor => format!("{t}::floor({a})"),
            Intrinsic::Fma => format!("fma({a}, {}, {})", args.get(1).cloned().unwrap_or_default(), args.get(2).cloned().unwrap_or_default()),
            Intrinsic::Ceil => format!("{t}::ceil({a})"),
            Intrinsic::MaxValue(d) => max_lit(d),
            Intrinsic::MinValue(d) => min_lit(d),
        })
    }

    fn builtin(&mut self, b: Builtin, d: DType) -> R<String> {
        let name = match b {
            Builtin::Tag(ThreadTag::BlockIdxX) => "CUBE_POS_X",
            Builtin::Tag(ThreadTag::BlockIdxY) => "CUBE_POS_Y",
            Builtin::Tag(ThreadTag::BlockIdxZ) => "CUBE_POS_Z",
            Builtin::Tag(ThreadTag::ThreadIdxX) => "UNIT_POS_X",
            Builtin::Tag(ThreadTag::ThreadIdxY) => "UNIT_POS_Y",
            Builtin::Tag(ThreadTag::ThreadIdxZ) => "UNIT_POS_Z",
            Builtin::CubePos => "CUBE_POS",
            Builtin::AbsolutePos => "ABSOLUTE_POS",
        };
        Ok(format!("{}::cast_from({name})", rust_type(d)))
    }

    fn bind(&mut self, v: String, name: &str, d: DType) -> R<String> {
        let n = self.fresh(name);
        self.line(&format!("let {n}: {} = {v};", rust_type(d)));
        Ok(n)
    }

    fn load(&mut self, buf: BufRef, idx: String, _id: DType, _d: DType) -> R<String> {
        Ok(format!("{}[usize::cast_from({idx})]", self.buf_name(buf)))
    }

    fn store(&mut self, buf: BufRef, idx: String, _id: DType, v: String, _d: DType) -> R<()> {
        let n = self.buf_name(buf);
        self.line(&format!("{n}[usize::cast_from({idx})] = {v};"));
        Ok(())
    }

    fn atomic_add(&mut self, buf: BufRef, idx: String, _id: DType, v: String, d: DType) -> R<String> {
        let n = self.buf_name(buf);
        let t = self.fresh("old");
        self.line(&format!("let {t}: {} = {n}[usize::cast_from({idx})].fetch_add({v});", rust_type(d)));
        Ok(t)
    }

    fn atomic_load(&mut self, buf: BufRef, idx: String, _id: DType, d: DType) -> R<String> {
        let n = self.buf_name(buf);
        let t = self.fresh("cur");
        self.line(&format!("let {t}: {} = {n}[usize::cast_from({idx})].load();", rust_type(d)));
        Ok(t)
    }

    fn atomic_store(&mut self, buf: BufRef, idx: String, _id: DType, v: String, _d: DType) -> R<()> {
        let n = self.buf_name(buf);
        self.line(&format!("{n}[usize::cast_from({idx})].store({v});"));
        Ok(())
    }

    fn if_else(
        &mut self,
        c: String,
        then: &mut dyn FnMut(&mut Self) -> R<()>,
        otherwise: Option<&mut dyn FnMut(&mut Self) -> R<()>>,
    ) -> R<()> {
        self.line(&format!("if {c} {{"));
        self.block(then)?;
        if let Some(e) = otherwise {
            self.line("} else {");
            self.block(e)?;
        }
        self.line("}");
        Ok(())
    }

    fn for_range(
        &mut self,
        start: String,
        end: String,
        _d: DType,
        name: &str,
        body: &mut dyn FnMut(&mut Self, String) -> R<()>,
    ) -> R<()> {
        let n = self.fresh(name);
        self.line(&format!("for {n} in {start}..{end} {{"));
        self.indent += 1;
        let r = body(self, n);
        self.indent -= 1;
        self.line("}");
        r
    }

    fn infinite_loop(&mut self, body: &mut dyn FnMut(&mut Self) -> R<()>) -> R<()> {
        self.line("loop {");
        self.block(body)?;
        self.line("}");
        Ok(())
    }

    fn brk(&mut self) -> R<()> {
        self.line("break;");
        Ok(())
    }

    fn alloc(&mut self, buf: BufferId, name: &str, len: usize, d: DType, shared: bool) -> R<()> {
        let n = self.fresh(name);
        let t = rust_type(d);
        if shared {
            self.line(&format!("let mut {n} = Shared::<[{t}]>::new_slice({len}usize);"));
        } else {
            self.line(&format!("let mut {n} = Array::<{t}>::new({len}usize);"));
        }
        self.allocs.insert(buf, n);
        Ok(())
    }

    fn sync(&mut self) -> R<()> {
        self.line("sync_cube();");
        Ok(())
    }

    fn sync_storage(&mut self) -> R<()> {
        self.line("sync_storage();");
        Ok(())
    }

    fn cube_units(&mut self) -> R<String> {
        Ok("i32::cast_from(CUBE_DIM)".into())
    }

    fn unit_pos(&mut self) -> R<String> {
        Ok("i32::cast_from(UNIT_POS)".into())
    }
}

fn max_lit(d: DType) -> String {
    match d {
        DType::I32 => "2147483647i32".into(),
        DType::I64 => "9223372036854775807i64".into(),
        DType::Bool => "true".into(),
        DType::F32 => float_lit(f32::MAX as f64, d),
        DType::F16 => float_lit(65504.0, d),
        DType::BF16 => float_lit(3.3895314e38, d),
        DType::F64 => float_lit(f64::MAX, d),
    }
}

fn min_lit(d: DType) -> String {
    match d {
        DType::I32 => "(-2147483648i32)".into(),
        DType::I64 => "(-9223372036854775808i64)".into(),
        DType::Bool => "false".into(),
        DType::F32 => format!("({})", float_lit(f32::MIN as f64, d)),
        DType::F16 => format!("({})", float_lit(-65504.0, d)),
        DType::BF16 => format!("({})", float_lit(-3.3895314e38, d)),
        DType::F64 => format!("({})", float_lit(f64::MIN, d)),
    }
}

const HELPERS: &str = r#"#[cube]
fn floor_div_i32(a: i32, b: i32) -> i32 {
    let q = a / b;
    let r = a - q * b;
    select(r != 0i32 && ((r < 0i32) != (b < 0i32)), q - 1i32, q)
}

#[cube]
fn floor_mod_i32(a: i32, b: i32) -> i32 {
    // Not `a % b`: CubeCL 0.11.3 simplifies `x % 1` to `x`.
    let r = a - (a / b) * b;
    select(r != 0i32 && ((r < 0i32) != (b < 0i32)), r + b, r)
}

#[cube]
fn min_i32(a: i32, b: i32) -> i32 {
    select(a < b, a, b)
}

#[cube]
fn max_i32(a: i32, b: i32) -> i32 {
    select(a > b, a, b)
}

#[cube]
fn min_f32(a: f32, b: f32) -> f32 {
    select(a < b, a, b)
}

#[cube]
fn max_f32(a: f32, b: f32) -> f32 {
    select(a > b, a, b)
}
"#;

/// Host-side Rust for an extent expression over the launch helper's scalar arguments.
fn host_expr(func: &Func, e: &Expr) -> String {
    match e {
        Expr::Int(v, _) => format!("({v}i64)"),
        Expr::Var(v) => func.vars.try_get(*v).map_or_else(|| "0i64".into(), |x| format!("({} as i64)", crate::plan::sanitize(&x.name))),
        Expr::Cast(_, a) => host_expr(func, a),
        Expr::Binary(op, a, b) => {
            let (a, b) = (host_expr(func, a), host_expr(func, b));
            match op {
                BinOp::FloorDiv => format!("{a}.div_euclid({b}.max(1))"),
                BinOp::FloorMod => format!("{a}.rem_euclid({b}.max(1))"),
                BinOp::Div => format!("({a} / {b}.max(1))"),
                BinOp::Min => format!("{a}.min({b})"),
                BinOp::Max => format!("{a}.max({b})"),
                op => format!("({a} {} {b})", op.symbol().unwrap_or("+")),
            }
        }
        _ => "1i64".into(),
    }
}

fn launch_dims(func: &Func, k: &KernelPlan) -> (String, String) {
    match &k.launch {
        LaunchPlan::Single => ("CubeCount::Static(1, 1, 1)".into(), "CubeDim::new_1d(1)".into()),
        LaunchPlan::Threads { extents } => {
            // Loops bound to y or z stride past the grid limit (see `lower`).
            let cap = crate::plan::MAX_CUBES_YZ;
            let m: Vec<String> = extents
                .iter()
                .enumerate()
                .map(|(i, list)| {
                    if list.is_empty() {
                        "1".into()
                    } else {
                        let parts: Vec<String> = list.iter().map(|e| host_expr(func, e)).collect();
                        let d = format!("dim([{}].into_iter().max().unwrap_or(1))", parts.join(", "));
                        if i == 1 || i == 2 { format!("{d}.min({cap})") } else { d }
                    }
                })
                .collect();
            (
                format!("CubeCount::Static({}, {}, {})", m[0], m[1], m[2]),
                format!("CubeDim::new_3d({}, {}, {})", m[3], m[4], m[5]),
            )
        }
    }
}

/// Renders every kernel of `plan` and a launch helper as `#[cube]` Rust.
pub fn render(plan: &ProgramPlan) -> Result<String, EmitError> {
    render_with(plan, &HashMap::new())
}

/// [`render`] with the sizes of allocations whose shape depends on scalars.
pub fn render_with(plan: &ProgramPlan, alloc_sizes: &HashMap<BufferId, usize>) -> Result<String, EmitError> {
    let func = &plan.func;
    let mut out = String::new();
    let _ = writeln!(out, "//! Generated by sparsec's CubeCL backend from `{}`. Do not edit.", func.name);
    let _ = writeln!(out, "#![allow(unused, clippy::all)]\n");
    let _ = writeln!(out, "use cubecl::prelude::*;\nuse cubecl::server::Handle;\n");
    out.push_str(HELPERS);
    for k in &plan.kernels {
        for b in &k.bufs {
            if b.dtype != DType::F32 && b.dtype != DType::I32 && b.dtype != DType::F64 && b.dtype != DType::I64 {
                return Err(EmitError::DType(b.dtype));
            }
        }
        let mut params: Vec<String> = k
            .bufs
            .iter()
            .map(|b| {
                let t = rust_type(b.dtype);
                if b.atomic { format!("{}: &[Atomic<{t}>]", b.name) } else { format!("{}: &mut [{t}]", b.name) }
            })
            .collect();
        for (p, v) in &k.scalars {
            let _ = p;
            let var = &func.vars[*v];
            params.push(format!("{}: {}", crate::plan::sanitize(&var.name), rust_type(var.dtype)));
        }
        let _ = writeln!(out, "\n/// Kernel {} of `{}`.", k.name, func.name);
        let _ = writeln!(out, "#[cube(launch)]\npub fn {}({}) {{", k.name, params.join(", "));
        let mut g = TextGen { out: String::new(), indent: 1, counter: 0, plan: k, allocs: HashMap::new() };
        let mut w = Walker::new(func, k);
        w.alloc_sizes = alloc_sizes.clone();
        for (_, v) in &k.scalars {
            let name = crate::plan::sanitize(&func.vars[*v].name);
            w.bind_var(*v, name);
        }
        w.kernel(&mut g)?;
        out.push_str(&g.out);
        out.push_str("}\n");
    }
    // Launch helper.
    let mut args = vec!["client: &Client".to_string()];
    for p in &func.params {
        match p.kind {
            ParamKind::Handle => args.push(format!("{}: &Handle", crate::plan::sanitize(&p.name))),
            ParamKind::Scalar(v) => {
                let n = crate::plan::sanitize(&p.name);
                args.push(format!("{n}: {}", rust_type(func.vars[v].dtype)));
            }
        }
    }
    for g in &plan.globals {
        let n = crate::plan::sanitize(&func.buffers[*g].name);
        args.push(format!("{n}: &Handle"));
    }
    let _ = writeln!(
        out,
        "\n/// Launches the kernels of `{}` in order. Handles hold the arrays of the handle parameters\n/// (and function-level global buffers), each of the parameter's element type; `lens` gives\n/// their lengths in elements, in the same order.",
        func.name
    );
    let _ = writeln!(out, "#[allow(clippy::too_many_arguments)]\npub fn launch({}, lens: &[usize]) {{", args.join(", "));
    let _ = writeln!(out, "    let dim = |x: i64| -> u32 {{ x.clamp(1, u32::MAX as i64) as u32 }};");
    // Index of every handle in `lens`.
    let mut handle_names: Vec<String> = func.params.iter().filter(|p| p.kind == ParamKind::Handle).map(|p| crate::plan::sanitize(&p.name)).collect();
    handle_names.extend(plan.globals.iter().map(|g| crate::plan::sanitize(&func.buffers[*g].name)));
    for k in &plan.kernels {
        let (count, dim) = launch_dims(func, k);
        let mut call = vec!["client".to_string(), count, dim];
        for b in &k.bufs {
            let pos = handle_names.iter().position(|h| *h == b.name).unwrap_or(0);
            call.push(format!("unsafe {{ BufferArg::from_raw_parts({}.clone(), lens[{pos}]) }}", b.name));
        }
        for (_, v) in &k.scalars {
            call.push(crate::plan::sanitize(&func.vars[*v].name));
        }
        let _ = writeln!(out, "    {}::launch({});", k.name, call.join(", "));
    }
    out.push_str("}\n");
    Ok(out)
}
