//! Statements and expressions of a Stage-III function to `scf`/`arith`/`math`/`memref` ops.
//!
//! The same translator serves the CPU and the GPU module; [`Target`] decides what thread-bound
//! loops and allocations become.

use crate::error::{MlirError, Result};
use crate::regtile::{Plan, Update};
use melior::ir::attribute::{FloatAttribute, IntegerAttribute, StringAttribute, TypeAttribute};
use melior::ir::operation::{OperationBuilder, OperationLike};
use melior::ir::r#type::{FunctionType, IntegerType, MemRefType};
use melior::ir::{
    Attribute, Block, BlockLike, BlockRef, Identifier, Location, Operation, Region, RegionLike, Type,
    Value, ValueLike,
};
use melior::Context;
use sparsec_ir::value::Value as Scalar;
use sparsec_ir::vector::{Access, Plan as VPlan, VExpr, VStmt, VStore};
use sparsec_ir::{
    BinOp, Block as IrBlock, BufferId, DType, Expr, For, ForKind, Func, Intrinsic, IterKind, Layout, Scope,
    Stmt, StmtKind, Storage, ThreadTag, UnOp,
};

/// Whether `stmts` allocate a buffer for which `which` holds.
pub(crate) fn allocates(func: &Func, stmts: &[Stmt], which: impl Fn(&sparsec_ir::Buffer) -> bool) -> bool {
    let mut found = false;
    sparsec_ir::walk_stmts(stmts, &mut |s| {
        if let StmtKind::Alloc(buf) = s.kind {
            found |= func.buffers.try_get(buf).is_none_or(&which);
        }
    });
    found
}

/// An SSA value; lifetimes are the context's (values live as long as the module).
pub(crate) type Val<'c> = Value<'c, 'c>;

/// What the translated code runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// Host code: thread-bound block loops and `parallel` loops become `scf.parallel`
    /// (when `parallel` is set), everything else `scf.for`.
    Cpu {
        /// Whether loops may become `scf.parallel`.
        parallel: bool,
    },
    /// A GPU kernel: thread-bound loops become guarded thread/block ids.
    Gpu,
}

/// Dynamic extent of a memref dimension (`ShapedType::kDynamic`).
pub(crate) const DYNAMIC: i64 = i64::MIN;

/// The `.sptir` text a function was parsed from: its statements' spans become MLIR
/// locations (`file:line:col`).
#[derive(Clone, Debug)]
pub struct Source {
    /// The file's name, as locations show it.
    pub name: String,
    /// The whole text.
    pub text: String,
}

/// Translator state for one function body.
pub(crate) struct Tr<'c, 'f> {
    pub ctx: &'c Context,
    pub func: &'f Func,
    pub loc: Location<'c>,
    /// Where the function's spans point, if known.
    pub source: Option<&'f Source>,
    pub target: Target,
    vars: Vec<Option<Val<'c>>>,
    bufs: Vec<Option<Val<'c>>>,
    /// GPU: the index-typed id of each thread tag (in `ThreadTag::ALL` order).
    tids: [Option<Val<'c>>; 6],
    /// Where constant-size allocations are hoisted: the function or kernel entry, or the
    /// body of the enclosing `scf.parallel`.
    entry: Option<melior::ir::BlockRef<'c, 'c>>,
    /// GPU: number of workgroup attributions added to the entry block.
    pub workgroup: usize,
    /// GPU code emulated on the CPU: no workgroup memory.
    pub emulated: bool,
    /// Inside a loop versioned on the assumptions of the vector forms within it: whether
    /// they hold (`None` elsewhere; each `vectorized` loop then tests its own).
    vectors: Option<bool>,
    /// GPU: the kernel's barriers (see `sparsec_ir::sync`); `None` on the CPU.
    pub sync: Option<KernelSync>,
    /// Phased GPU emulation: the number of units along `threadIdx.x`/`y`/`z`; each
    /// thread-bound loop runs them in turn.
    pub phase_units: [Option<Val<'c>>; 3],
    /// Depth of enclosing `scf.parallel` loops.
    par_depth: usize,
    /// Loads read once before the enclosing loops (see `hoist`).
    hoisted: Vec<(Expr, Val<'c>)>,
    /// Loop variables as the loop's `index` induction variable.
    var_index: Vec<Option<Val<'c>>>,
    /// Defining expressions of block iterators and `let`s.
    var_def: Vec<Option<Expr>>,
    /// CPU: the loop being built whose iterations prefetch its gathers, and how far ahead
    /// (`sparsec_ir::prefetch`).
    prefetch: Option<(sparsec_ir::VarId, i64)>,
    /// Loads clamp their index to their array (a prefetch's look-ahead).
    clamp_loads: bool,
    /// CPU: inside a copy of a nest made for prefetching (`Some(true)`: its annotated loops
    /// prefetch) or for not (`Some(false)`); `None` outside any.
    prefetching: Option<bool>,
    /// Inside a vector form's masked statement: the mask of its active lanes.
    vmask: Option<Val<'c>>,
}

/// The barrier state of a GPU kernel being translated.
pub(crate) struct KernelSync {
    /// Whether control flow here is the same in every unit of the block.
    pub uniform: bool,
    /// Which variables differ between units.
    pub uniformity: sparsec_ir::sync::Uniformity,
    /// Whether the kernel allocates shared memory.
    pub shared: bool,
    /// Emulation runs each thread-bound loop over all its units in turn, which orders them
    /// as the barriers would: no barrier is emitted.
    pub phased: bool,
    /// Whether a loop of the kernel runs the current list again (`sync::list_sync`).
    pub reruns: bool,
}

impl KernelSync {
    /// The state at the start of the kernel made of `stmts`.
    pub fn new(func: &Func, stmts: &[Stmt], phased: bool) -> Self {
        KernelSync {
            uniform: true,
            uniformity: sparsec_ir::sync::Uniformity::new(func),
            shared: sparsec_ir::sync::uses_shared(func, stmts),
            phased,
            reruns: false,
        }
    }
}

fn width(d: DType) -> u32 {
    match d {
        DType::Bool => 1,
        DType::F16 | DType::BF16 => 16,
        DType::I32 | DType::F32 => 32,
        DType::I64 | DType::F64 => 64,
    }
}

/// The distance a serial loop is annotated to prefetch at (`sparsec_ir::prefetch`), if any.
fn prefetch_distance(f: &For) -> Option<i64> {
    match f.attrs.get(sparsec_ir::prefetch::PREFETCH_DISTANCE_ATTR) {
        Some(sparsec_ir::AttrValue::Int(d)) if *d > 0 && f.kind == ForKind::Serial => Some(*d),
        _ => None,
    }
}

fn has_load(e: &Expr) -> bool {
    let mut found = false;
    e.walk(&mut |x| found |= matches!(x, Expr::Load(..) | Expr::AtomicAdd(..)));
    found
}

impl<'c, 'f> Tr<'c, 'f> {
    pub(crate) fn new(ctx: &'c Context, func: &'f Func, target: Target) -> Self {
        Tr {
            ctx,
            func,
            loc: Location::unknown(ctx),
            source: None,
            target,
            vars: vec![None; func.vars.len()],
            bufs: vec![None; func.buffers.len()],
            tids: [None; 6],
            entry: None,
            workgroup: 0,
            emulated: false,
            vectors: None,
            sync: None,
            phase_units: [None; 3],
            par_depth: 0,
            hoisted: Vec::new(),
            var_index: vec![None; func.vars.len()],
            var_def: vec![None; func.vars.len()],
            prefetch: None,
            clamp_loads: false,
            prefetching: None,
            vmask: None,
        }
    }

    // ---- types and constants --------------------------------------------------------------

    pub(crate) fn ty(&self, d: DType) -> Type<'c> {
        match d {
            DType::I32 => IntegerType::new(self.ctx, 32).into(),
            DType::I64 => IntegerType::new(self.ctx, 64).into(),
            DType::Bool => IntegerType::new(self.ctx, 1).into(),
            DType::F16 => Type::float16(self.ctx),
            DType::BF16 => Type::bfloat16(self.ctx),
            DType::F32 => Type::float32(self.ctx),
            DType::F64 => Type::float64(self.ctx),
        }
    }

    pub(crate) fn index(&self) -> Type<'c> {
        Type::index(self.ctx)
    }

    /// `memref<?xT>` in the default memory space.
    pub(crate) fn memref(&self, d: DType) -> Type<'c> {
        MemRefType::new(self.ty(d), &[DYNAMIC], None, None).into()
    }

    pub(crate) fn attr(&self, s: &str) -> Result<Attribute<'c>> {
        Attribute::parse(self.ctx, s).ok_or_else(|| MlirError::internal(format!("bad attribute `{s}`")))
    }

    /// Builds an operation from its parts.
    pub(crate) fn build(
        &self,
        name: &str,
        operands: &[Val<'c>],
        results: &[Type<'c>],
        attrs: &[(&str, Attribute<'c>)],
        regions: Vec<Region<'c>>,
    ) -> Result<Operation<'c>> {
        let attrs: Vec<_> = attrs.iter().map(|(n, a)| (Identifier::new(self.ctx, n), *a)).collect();
        OperationBuilder::new(name, self.loc)
            .add_operands(operands)
            .add_results(results)
            .add_attributes(&attrs)
            .add_regions_vec(regions)
            .build()
            .map_err(|e| MlirError::internal(format!("cannot build `{name}`: {e}")))
    }

    /// Appends an operation without regions and returns its first result, if any.
    pub(crate) fn emit(
        &self,
        b: &Block<'c>,
        name: &str,
        operands: &[Val<'c>],
        results: &[Type<'c>],
        attrs: &[(&str, Attribute<'c>)],
    ) -> Result<Option<Val<'c>>> {
        let op = self.build(name, operands, results, attrs, Vec::new())?;
        let op = b.append_operation(op);
        Ok(match op.result_count() {
            0 => None,
            _ => Some(op.result(0).map_err(MlirError::internal)?.into()),
        })
    }

    /// Appends an operation with exactly one result.
    pub(crate) fn emit1(
        &self,
        b: &Block<'c>,
        name: &str,
        operands: &[Val<'c>],
        result: Type<'c>,
        attrs: &[(&str, Attribute<'c>)],
    ) -> Result<Val<'c>> {
        self.emit(b, name, operands, &[result], attrs)?
            .ok_or_else(|| MlirError::internal(format!("`{name}` has no result")))
    }

    pub(crate) fn cint(&self, b: &Block<'c>, v: i64, d: DType) -> Result<Val<'c>> {
        let t = self.ty(d);
        self.emit1(b, "arith.constant", &[], t, &[("value", IntegerAttribute::new(t, v).into())])
    }

    pub(crate) fn cidx(&self, b: &Block<'c>, v: i64) -> Result<Val<'c>> {
        let t = self.index();
        self.emit1(b, "arith.constant", &[], t, &[("value", IntegerAttribute::new(t, v).into())])
    }

    fn cfloat(&self, b: &Block<'c>, v: f64, d: DType) -> Result<Val<'c>> {
        let t = self.ty(d);
        self.emit1(b, "arith.constant", &[], t, &[("value", FloatAttribute::new(self.ctx, t, v).into())])
    }

    /// A constant of any dtype from an `f64`, converted as `Value::from_f64` does (Rust's
    /// `as`: ints saturate, NaN is 0; bools test non-zero).
    fn constant(&self, b: &Block<'c>, v: f64, d: DType) -> Result<Val<'c>> {
        self.value(b, Scalar::from_f64(d, v))
    }

    /// A constant holding exactly `v`.
    fn value(&self, b: &Block<'c>, v: Scalar) -> Result<Val<'c>> {
        match v {
            Scalar::I32(x) => self.cint(b, x as i64, DType::I32),
            Scalar::I64(x) => self.cint(b, x, DType::I64),
            Scalar::Bool(x) => self.cint(b, x as i64, DType::Bool),
            Scalar::F16(x) | Scalar::BF16(x) | Scalar::F32(x) => self.cfloat(b, x as f64, v.dtype()),
            Scalar::F64(x) => self.cfloat(b, x, DType::F64),
        }
    }

    pub(crate) fn to_index(&self, b: &Block<'c>, v: Val<'c>) -> Result<Val<'c>> {
        if v.r#type() == self.index() {
            return Ok(v);
        }
        self.emit1(b, "arith.index_cast", &[v], self.index(), &[])
    }

    fn index_to(&self, b: &Block<'c>, v: Val<'c>, d: DType) -> Result<Val<'c>> {
        if !d.is_int() {
            return Err(MlirError::unsupported(format!("a loop variable of type {d}")));
        }
        self.emit1(b, "arith.index_cast", &[v], self.ty(d), &[])
    }

    fn cmpi(&self, b: &Block<'c>, pred: i64, x: Val<'c>, y: Val<'c>) -> Result<Val<'c>> {
        let i64t = IntegerType::new(self.ctx, 64).into();
        let bt = self.ty(DType::Bool);
        self.emit1(b, "arith.cmpi", &[x, y], bt, &[("predicate", IntegerAttribute::new(i64t, pred).into())])
    }

    fn cmpf(&self, b: &Block<'c>, pred: i64, x: Val<'c>, y: Val<'c>) -> Result<Val<'c>> {
        let i64t = IntegerType::new(self.ctx, 64).into();
        let bt = self.ty(DType::Bool);
        self.emit1(b, "arith.cmpf", &[x, y], bt, &[("predicate", IntegerAttribute::new(i64t, pred).into())])
    }

    // ---- regions --------------------------------------------------------------------------

    /// A one-block region whose block has arguments of `args`; `f` fills it (including the
    /// terminator).
    pub(crate) fn region(
        &mut self,
        args: &[Type<'c>],
        f: impl FnOnce(&mut Self, &Block<'c>, Vec<Val<'c>>) -> Result<()>,
    ) -> Result<Region<'c>> {
        let block = Block::new(&args.iter().map(|t| (*t, self.loc)).collect::<Vec<_>>());
        let mut vals = Vec::with_capacity(args.len());
        for i in 0..args.len() {
            vals.push(block.argument(i).map_err(MlirError::internal)?.into());
        }
        f(self, &block, vals)?;
        let region = Region::new();
        region.append_block(block);
        Ok(region)
    }

    fn yield_(&self, b: &Block<'c>, vals: &[Val<'c>]) -> Result<()> {
        self.emit(b, "scf.yield", vals, &[], &[]).map(drop)
    }

    /// `scf.if` with one result per type in `results`; each arm returns its values.
    fn if_values(
        &mut self,
        b: &Block<'c>,
        cond: Val<'c>,
        results: &[Type<'c>],
        then: impl FnOnce(&mut Self, &Block<'c>) -> Result<Vec<Val<'c>>>,
        els: impl FnOnce(&mut Self, &Block<'c>) -> Result<Vec<Val<'c>>>,
    ) -> Result<Vec<Val<'c>>> {
        let r1 = self.region(&[], |t, blk, _| {
            let v = then(t, blk)?;
            t.yield_(blk, &v)
        })?;
        let r2 = self.region(&[], |t, blk, _| {
            let v = els(t, blk)?;
            t.yield_(blk, &v)
        })?;
        let op = b.append_operation(self.build("scf.if", &[cond], results, &[], vec![r1, r2])?);
        (0..results.len()).map(|i| Ok(op.result(i).map_err(MlirError::internal)?.into())).collect()
    }

    // ---- expressions ----------------------------------------------------------------------

    /// Binds a variable (parameters, loop variables, block iterators, `let`s).
    pub(crate) fn bind_var(&mut self, v: sparsec_ir::VarId, val: Val<'c>) {
        if let Some(slot) = self.vars.get_mut(v.index()) {
            *slot = Some(val);
        }
    }

    /// Binds a buffer to its memref.
    pub(crate) fn bind_buf(&mut self, buf: BufferId, val: Val<'c>) {
        if let Some(slot) = self.bufs.get_mut(buf.index()) {
            *slot = Some(val);
        }
    }

    /// Sets the GPU thread ids (in `ThreadTag::ALL` order).
    pub(crate) fn set_gpu_ids(&mut self, ids: [Option<Val<'c>>; 6]) {
        self.tids = ids;
    }

    /// Sets the block where constant-size allocations are hoisted (function or kernel entry).
    pub(crate) fn set_entry(&mut self, b: &Block<'c>) {
        self.entry = Some(unsafe { BlockRef::from_raw(b.to_raw()) });
    }

    fn var_name(&self, v: sparsec_ir::VarId) -> String {
        self.func.vars.try_get(v).map_or_else(|| format!("{v:?}"), |x| x.name.clone())
    }

    fn buf_val(&self, buf: BufferId) -> Result<Val<'c>> {
        self.bufs.get(buf.index()).copied().flatten().ok_or_else(|| {
            let name = self.func.buffers.try_get(buf).map_or_else(|| format!("{buf:?}"), |x| x.name.clone());
            MlirError::unsupported(format!("buffer `{name}` is used outside its allocation"))
        })
    }

    fn buf_dtype(&self, buf: BufferId) -> Result<DType> {
        self.func.buffers.try_get(buf).map(|b| b.dtype).ok_or_else(|| MlirError::internal("unknown buffer"))
    }

    /// The flat `index` of an access (row-major over the buffer's shape).
    fn flat_index(&mut self, b: &Block<'c>, buf: BufferId, indices: &[Expr]) -> Result<Val<'c>> {
        let decl = self.func.buffers.try_get(buf).ok_or_else(|| MlirError::internal("unknown buffer"))?;
        let shape = match &decl.layout {
            Layout::Dense(s) => s.clone(),
            Layout::Sparse(_) => {
                return Err(MlirError::unsupported(format!("sparse buffer `{}` at Stage III", decl.name)))
            }
        };
        if indices.len() != shape.len() || indices.is_empty() {
            return Err(MlirError::unsupported(format!(
                "access to `{}` with {} indices for {} dimensions",
                decl.name,
                indices.len(),
                shape.len()
            )));
        }
        let mut acc = self.index_expr(b, &indices[0], 0)?;
        for (d, e) in indices.iter().enumerate().skip(1) {
            let dim = self.index_expr(b, &shape[d], 0)?;
            let i = self.index_expr(b, e, 0)?;
            let it = self.index();
            let m = self.emit1(b, "arith.muli", &[acc, dim], it, &[])?;
            acc = self.emit1(b, "arith.addi", &[m, i], it, &[])?;
        }
        Ok(acc)
    }

    /// An integer index expression computed in `index` (64-bit) arithmetic from the loops'
    /// induction variables, so that LLVM sees affine addresses (a 32-bit computation
    /// sign-extended at the end hides them and blocks vectorisation). Indices of in-bounds
    /// accesses never overflow 32 bits, where both agree.
    fn index_expr(&mut self, b: &Block<'c>, e: &Expr, depth: usize) -> Result<Val<'c>> {
        let it = self.index();
        let d = self.func.expr_dtype(e);
        if depth < 16 && d.is_int() {
            match e {
                Expr::Int(v, _) => return self.cidx(b, *v),
                Expr::Var(v) if self.vars.get(v.index()).copied().flatten().is_some() => {
                    if let Some(iv) = self.var_index.get(v.index()).copied().flatten() {
                        return Ok(iv);
                    }
                    // Pure definitions only: a load may read a different value here.
                    if let Some(def) = self.var_def.get(v.index()).cloned().flatten().filter(|d| !has_load(d)) {
                        return self.index_expr(b, &def, depth + 1);
                    }
                }
                Expr::Binary(op @ (BinOp::Add | BinOp::Sub | BinOp::Mul), x, y) => {
                    let x = self.index_expr(b, x, depth + 1)?;
                    let y = self.index_expr(b, y, depth + 1)?;
                    let name = match op {
                        BinOp::Add => "arith.addi",
                        BinOp::Sub => "arith.subi",
                        _ => "arith.muli",
                    };
                    return self.emit1(b, name, &[x, y], it, &[]);
                }
                _ => {}
            }
        }
        let v = self.expr(b, e)?;
        self.to_index(b, v)
    }

    /// Translates an expression.
    pub(crate) fn expr(&mut self, b: &Block<'c>, e: &Expr) -> Result<Val<'c>> {
        match e {
            Expr::Int(v, d) => self.value(b, Scalar::from_i64(*d, *v)),
            Expr::Float(v, d) => self.value(b, Scalar::from_f64(*d, *v)),
            Expr::Bool(v) => self.cint(b, *v as i64, DType::Bool),
            Expr::Var(v) => self
                .vars
                .get(v.index())
                .copied()
                .flatten()
                .ok_or_else(|| MlirError::unsupported(format!("variable `{}` used outside its scope", self.var_name(*v)))),
            Expr::Binary(op, x, y) => self.binary(b, *op, x, y),
            Expr::Unary(op, x) => {
                let d = self.func.expr_dtype(x);
                let v = self.expr(b, x)?;
                match (op, d) {
                    (UnOp::Neg, d) if d.is_float() => self.emit1(b, "arith.negf", &[v], self.ty(d), &[]),
                    (UnOp::Neg, d) if d.is_int() => {
                        let z = self.cint(b, 0, d)?;
                        self.emit1(b, "arith.subi", &[z, v], self.ty(d), &[])
                    }
                    (UnOp::Not, DType::Bool) => {
                        let t = self.cint(b, 1, DType::Bool)?;
                        self.emit1(b, "arith.xori", &[v, t], self.ty(DType::Bool), &[])
                    }
                    (op, d) => Err(MlirError::unsupported(format!("unary {op:?} on {d}"))),
                }
            }
            Expr::Select(c, x, y) => {
                let d = self.func.expr_dtype(x);
                let c = self.expr(b, c)?;
                let x = self.expr(b, x)?;
                let y = self.expr(b, y)?;
                self.emit1(b, "arith.select", &[c, x, y], self.ty(d), &[])
            }
            Expr::Cast(to, x) => {
                let from = self.func.expr_dtype(x);
                let v = self.expr(b, x)?;
                self.cast(b, v, from, *to)
            }
            Expr::Call(f, args) => self.call(b, *f, args),
            Expr::Load(buf, idx) => {
                if let Some((_, v)) = self.hoisted.iter().rev().find(|(k, _)| k == e) {
                    return Ok(*v);
                }
                let m = self.buf_val(*buf)?;
                let d = self.buf_dtype(*buf)?;
                let mut i = self.flat_index(b, *buf, idx)?;
                if self.clamp_loads {
                    i = self.clamped(b, m, i)?;
                }
                self.emit1(b, "memref.load", &[m, i], self.ty(d), &[])
            }
            Expr::AtomicAdd(buf, idx, v) => {
                let m = self.buf_val(*buf)?;
                let d = self.buf_dtype(*buf)?;
                let i = self.flat_index(b, *buf, idx)?;
                let x = self.expr(b, v)?;
                // arith::AtomicRMWKind: addf = 0, addi = 1.
                let kind = match d {
                    d if d.is_float() => 0,
                    DType::I32 | DType::I64 => 1,
                    d => return Err(MlirError::unsupported(format!("atomic_add on {d}"))),
                };
                let i64t = IntegerType::new(self.ctx, 64).into();
                self.emit1(
                    b,
                    "memref.atomic_rmw",
                    &[x, m, i],
                    self.ty(d),
                    &[("kind", IntegerAttribute::new(i64t, kind).into())],
                )
            }
        }
    }

    fn binary(&mut self, b: &Block<'c>, op: BinOp, x: &Expr, y: &Expr) -> Result<Val<'c>> {
        let d = self.func.expr_dtype(x);
        if matches!(op, BinOp::And | BinOp::Or) {
            let a = self.expr(b, x)?;
            let bt = self.ty(DType::Bool);
            if !has_load(y) {
                let c = self.expr(b, y)?;
                let name = if op == BinOp::And { "arith.andi" } else { "arith.ori" };
                return self.emit1(b, name, &[a, c], bt, &[]);
            }
            // Short-circuit: the right operand may load out of bounds when the left decides.
            let and = op == BinOp::And;
            let rhs = |t: &mut Self, blk: &Block<'c>| Ok(vec![t.expr(blk, y)?]);
            let fixed = move |t: &mut Self, blk: &Block<'c>| Ok(vec![t.cint(blk, (!and) as i64, DType::Bool)?]);
            let r = if and {
                self.if_values(b, a, &[bt], rhs, fixed)?
            } else {
                self.if_values(b, a, &[bt], fixed, rhs)?
            };
            return r.into_iter().next().ok_or_else(|| MlirError::internal("scf.if lost its result"));
        }
        let a = self.expr(b, x)?;
        let c = self.expr(b, y)?;
        let t = self.ty(d);
        let bt = self.ty(DType::Bool);
        if d.is_float() {
            // arith::CmpFPredicate: oeq 1, ogt 2, oge 3, olt 4, ole 5, une 13.
            let cmp = |p| (p, ());
            let pred = match op {
                BinOp::Eq => Some(cmp(1)),
                BinOp::Gt => Some(cmp(2)),
                BinOp::Ge => Some(cmp(3)),
                BinOp::Lt => Some(cmp(4)),
                BinOp::Le => Some(cmp(5)),
                BinOp::Ne => Some(cmp(13)),
                _ => None,
            };
            if let Some((p, ())) = pred {
                return self.cmpf(b, p, a, c);
            }
            return match op {
                BinOp::Add => self.emit1(b, "arith.addf", &[a, c], t, &[]),
                BinOp::Sub => self.emit1(b, "arith.subf", &[a, c], t, &[]),
                BinOp::Mul => self.emit1(b, "arith.mulf", &[a, c], t, &[]),
                BinOp::Div => self.emit1(b, "arith.divf", &[a, c], t, &[]),
                // `ir::value`'s compare and select (`minnumf` leaves the sign of equal zeros
                // open and becomes a libdevice call on the GPU).
                BinOp::Min | BinOp::Max => {
                    let pred = if op == BinOp::Min { 4 } else { 2 };
                    let pick_a = self.cmpf(b, pred, a, c)?;
                    // arith::CmpFPredicate uno = 14.
                    let c_nan = self.cmpf(b, 14, c, c)?;
                    let take_a = self.emit1(b, "arith.ori", &[pick_a, c_nan], bt, &[])?;
                    self.emit1(b, "arith.select", &[take_a, a, c], t, &[])
                }
                BinOp::FloorDiv => {
                    let q = self.emit1(b, "arith.divf", &[a, c], t, &[])?;
                    self.emit1(b, "math.floor", &[q], t, &[])
                }
                BinOp::FloorMod => {
                    let r = self.emit1(b, "arith.remf", &[a, c], t, &[])?;
                    let z = self.cfloat(b, 0.0, d)?;
                    let nz = self.cmpf(b, 13, r, z)?;
                    let rneg = self.cmpf(b, 4, r, z)?;
                    let cneg = self.cmpf(b, 4, c, z)?;
                    let differ = self.emit1(b, "arith.xori", &[rneg, cneg], bt, &[])?;
                    let adj = self.emit1(b, "arith.andi", &[nz, differ], bt, &[])?;
                    let sum = self.emit1(b, "arith.addf", &[r, c], t, &[])?;
                    self.emit1(b, "arith.select", &[adj, sum, r], t, &[])
                }
                op => Err(MlirError::unsupported(format!("{op:?} on {d}"))),
            };
        }
        // Integers and bools. arith::CmpIPredicate: eq 0, ne 1, slt 2, sle 3, sgt 4, sge 5,
        // ult 6, ule 7, ugt 8, uge 9; bools compare unsigned (`false < true`; signed, an
        // `i1` true is -1).
        let u = if d == DType::Bool { 4 } else { 0 };
        let pred = match op {
            BinOp::Eq => Some(0),
            BinOp::Ne => Some(1),
            BinOp::Lt => Some(2 + u),
            BinOp::Le => Some(3 + u),
            BinOp::Gt => Some(4 + u),
            BinOp::Ge => Some(5 + u),
            _ => None,
        };
        if let Some(p) = pred {
            return self.cmpi(b, p, a, c);
        }
        if !d.is_int() {
            return Err(MlirError::unsupported(format!("{op:?} on {d}")));
        }
        match op {
            BinOp::Add => self.emit1(b, "arith.addi", &[a, c], t, &[]),
            BinOp::Sub => self.emit1(b, "arith.subi", &[a, c], t, &[]),
            BinOp::Mul => self.emit1(b, "arith.muli", &[a, c], t, &[]),
            BinOp::Min => self.emit1(b, "arith.minsi", &[a, c], t, &[]),
            BinOp::Max => self.emit1(b, "arith.maxsi", &[a, c], t, &[]),
            BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod => {
                let plain = matches!(y, Expr::Int(v, _) if *v != 0 && *v != -1);
                let (q, r) = if plain {
                    (self.emit1(b, "arith.divsi", &[a, c], t, &[])?, self.emit1(b, "arith.remsi", &[a, c], t, &[])?)
                } else {
                    self.wrapping_divrem(b, a, c, d)?
                };
                if op == BinOp::Div {
                    return Ok(q);
                }
                let z = self.cint(b, 0, d)?;
                let nz = self.cmpi(b, 1, r, z)?;
                let rneg = self.cmpi(b, 2, r, z)?;
                let cneg = self.cmpi(b, 2, c, z)?;
                let differ = self.emit1(b, "arith.xori", &[rneg, cneg], bt, &[])?;
                let adj = self.emit1(b, "arith.andi", &[nz, differ], bt, &[])?;
                if op == BinOp::FloorDiv {
                    let one = self.cint(b, 1, d)?;
                    let q1 = self.emit1(b, "arith.subi", &[q, one], t, &[])?;
                    self.emit1(b, "arith.select", &[adj, q1, q], t, &[])
                } else {
                    let sum = self.emit1(b, "arith.addi", &[r, c], t, &[])?;
                    self.emit1(b, "arith.select", &[adj, sum, r], t, &[])
                }
            }
            op => Err(MlirError::unsupported(format!("{op:?} on {d}"))),
        }
    }

    /// Truncating quotient and remainder as Rust's `wrapping_div`/`wrapping_rem`: `MIN / -1`
    /// is `MIN` and `MIN % -1` is 0 (`divsi`/`remsi` are undefined there and trap on x86).
    /// A zero divisor is refused before compiled code runs (`sparsec_ir::args`); here it
    /// gives `(a, 0)` instead of trapping. Literal divisors other than 0 and -1 skip this.
    fn wrapping_divrem(&self, b: &Block<'c>, a: Val<'c>, c: Val<'c>, d: DType) -> Result<(Val<'c>, Val<'c>)> {
        let t = self.ty(d);
        let bt = self.ty(DType::Bool);
        let z = self.cint(b, 0, d)?;
        let one = self.cint(b, 1, d)?;
        let m1 = self.cint(b, -1, d)?;
        let is_m1 = self.cmpi(b, 0, c, m1)?;
        let is_0 = self.cmpi(b, 0, c, z)?;
        let bad = self.emit1(b, "arith.ori", &[is_m1, is_0], bt, &[])?;
        let safe = self.emit1(b, "arith.select", &[bad, one, c], t, &[])?;
        let q = self.emit1(b, "arith.divsi", &[a, safe], t, &[])?;
        let r = self.emit1(b, "arith.remsi", &[a, safe], t, &[])?;
        let neg = self.emit1(b, "arith.subi", &[z, a], t, &[])?;
        let q = self.emit1(b, "arith.select", &[is_m1, neg, q], t, &[])?;
        Ok((q, r))
    }

    /// Float to integer as Rust's `as`: saturating, NaN to 0 (`fptosi` alone is poison
    /// out of range).
    fn float_to_int(&self, b: &Block<'c>, v: Val<'c>, from: DType, to: DType) -> Result<Val<'c>> {
        let (v, from) = match from {
            DType::F16 | DType::BF16 => (self.emit1(b, "arith.extf", &[v], self.ty(DType::F32), &[])?, DType::F32),
            _ => (v, from),
        };
        let t = self.ty(to);
        let bits = width(to) as i32;
        let (min, max) = if to == DType::I32 { (i32::MIN as i64, i32::MAX as i64) } else { (i64::MIN, i64::MAX) };
        let r = self.emit1(b, "arith.fptosi", &[v], t, &[])?;
        // 2^(bits-1) and -2^(bits-1) are exact in f32 and f64.
        let hi = self.cfloat(b, 2f64.powi(bits - 1), from)?;
        let lo = self.cfloat(b, -(2f64.powi(bits - 1)), from)?;
        // arith::CmpFPredicate oge 3, olt 4, uno 14.
        let above = self.cmpf(b, 3, v, hi)?;
        let below = self.cmpf(b, 4, v, lo)?;
        let nan = self.cmpf(b, 14, v, v)?;
        let (cmax, cmin, z) = (self.cint(b, max, to)?, self.cint(b, min, to)?, self.cint(b, 0, to)?);
        let r = self.emit1(b, "arith.select", &[above, cmax, r], t, &[])?;
        let r = self.emit1(b, "arith.select", &[below, cmin, r], t, &[])?;
        self.emit1(b, "arith.select", &[nan, z, r], t, &[])
    }

    /// Converts `v` from `from` to `to` like Rust's `as` (`x != 0` for bools).
    pub(crate) fn cast(&self, b: &Block<'c>, v: Val<'c>, from: DType, to: DType) -> Result<Val<'c>> {
        if from == to {
            return Ok(v);
        }
        let t = self.ty(to);
        match (from, to) {
            (DType::Bool, to) if to.is_int() => self.emit1(b, "arith.extui", &[v], t, &[]),
            (DType::Bool, _) => self.emit1(b, "arith.uitofp", &[v], t, &[]),
            (from, DType::Bool) if from.is_int() => {
                let z = self.cint(b, 0, from)?;
                self.cmpi(b, 1, v, z)
            }
            (from, DType::Bool) => {
                let z = self.cfloat(b, 0.0, from)?;
                self.cmpf(b, 13, v, z)
            }
            (from, to) if from.is_int() && to.is_int() => {
                let name = if width(to) > width(from) { "arith.extsi" } else { "arith.trunci" };
                self.emit1(b, name, &[v], t, &[])
            }
            (from, to) if from.is_int() => {
                let _ = to;
                self.emit1(b, "arith.sitofp", &[v], t, &[])
            }
            (from, to) if to.is_int() => self.float_to_int(b, v, from, to),
            (from, to) if width(from) == width(to) => {
                // f16 <-> bf16 through f32.
                let w = self.emit1(b, "arith.extf", &[v], self.ty(DType::F32), &[])?;
                self.emit1(b, "arith.truncf", &[w], t, &[])
            }
            (from, to) => {
                let name = if width(to) > width(from) { "arith.extf" } else { "arith.truncf" };
                self.emit1(b, name, &[v], t, &[])
            }
        }
    }

    fn call(&mut self, b: &Block<'c>, f: Intrinsic, args: &[Expr]) -> Result<Val<'c>> {
        let extreme = |d: DType, max: bool| -> f64 {
            let v = match d {
                DType::I32 => i32::MAX as f64,
                DType::I64 => 0.0,
                DType::F16 => 65504.0,
                DType::BF16 => 3.3895313892515355e38,
                DType::F32 => f32::MAX as f64,
                DType::F64 => f64::MAX,
                DType::Bool => 1.0,
            };
            match (d, max) {
                (DType::I32, false) => i32::MIN as f64,
                (DType::Bool, false) => 0.0,
                (_, true) => v,
                (_, false) => -v,
            }
        };
        match f {
            Intrinsic::MaxValue(DType::I64) => return self.cint(b, i64::MAX, DType::I64),
            Intrinsic::MinValue(DType::I64) => return self.cint(b, i64::MIN, DType::I64),
            Intrinsic::MaxValue(d) => return self.constant(b, extreme(d, true), d),
            Intrinsic::MinValue(d) => return self.constant(b, extreme(d, false), d),
            _ => {}
        }
        if args.len() != f.arity() {
            return Err(MlirError::unsupported(format!("`{}` with {} operands", f.name(), args.len())));
        }
        let d = self.func.expr_dtype(&args[0]);
        let x = self.expr(b, &args[0])?;
        let t = self.ty(d);
        if d.is_int() {
            return match f {
                Intrinsic::Floor | Intrinsic::Ceil => Ok(x),
                Intrinsic::Abs => self.emit1(b, "math.absi", &[x], t, &[]),
                f => Err(MlirError::unsupported(format!("`{}` on {d}", f.name()))),
            };
        }
        if !d.is_float() {
            return Err(MlirError::unsupported(format!("`{}` on {d}", f.name())));
        }
        let name = match f {
            Intrinsic::Exp => "math.exp",
            Intrinsic::Log => "math.log",
            Intrinsic::Sqrt => "math.sqrt",
            Intrinsic::Abs => "math.absf",
            Intrinsic::Tanh => "math.tanh",
            Intrinsic::Floor => "math.floor",
            Intrinsic::Ceil => "math.ceil",
            Intrinsic::Pow => {
                let y = self.expr(b, &args[1])?;
                return self.emit1(b, "math.powf", &[x, y], t, &[]);
            }
            Intrinsic::Fma => {
                let y = self.expr(b, &args[1])?;
                let z = self.expr(b, &args[2])?;
                return self.emit1(b, "math.fma", &[x, y, z], t, &[]);
            }
            Intrinsic::Sigmoid => {
                let n = self.emit1(b, "arith.negf", &[x], t, &[])?;
                let e = self.emit1(b, "math.exp", &[n], t, &[])?;
                let one = self.cfloat(b, 1.0, d)?;
                let s = self.emit1(b, "arith.addf", &[one, e], t, &[])?;
                return self.emit1(b, "arith.divf", &[one, s], t, &[]);
            }
            Intrinsic::MaxValue(_) | Intrinsic::MinValue(_) => {
                return Err(MlirError::internal("max_value/min_value reached the operand path"))
            }
        };
        self.emit1(b, name, &[x], t, &[])
    }

    // ---- statements -----------------------------------------------------------------------

    /// Translates a statement list; `let`s and allocations end with it.
    pub(crate) fn stmts(&mut self, b: &Block<'c>, list: &'f [Stmt]) -> Result<()> {
        let saved = (self.vars.clone(), self.bufs.clone());
        let r = self.stmts_inner(b, list);
        (self.vars, self.bufs) = saved;
        r
    }

    fn stmts_inner(&mut self, b: &Block<'c>, list: &'f [Stmt]) -> Result<()> {
        let mut heap = Vec::new();
        let fences = match &self.sync {
            Some(k) => sparsec_ir::sync::list_sync(self.func, list, k.uniform, k.shared, k.reruns)
                .map_err(|e| MlirError::unsupported(e.to_string()))?,
            None => sparsec_ir::sync::ListSync::None,
        };
        let barrier = fences != sparsec_ir::sync::ListSync::None && self.sync.as_ref().is_some_and(|k| !k.phased);
        if barrier && fences.opens(list) {
            self.emit(b, "gpu.barrier", &[], &[], &[])?;
        }
        let mut i = 0;
        while i < list.len() {
            let s = &list[i];
            i += 1;
            if barrier && fences.fences(s) {
                self.emit(b, "gpu.barrier", &[], &[], &[])?;
                self.stmt(b, s)?;
                self.emit(b, "gpu.barrier", &[], &[], &[])?;
                continue;
            }
            if let StmtKind::Alloc(buf) = &s.kind {
                if let Some(m) = self.alloc_stmt(b, *buf)? {
                    heap.push(m);
                }
                continue;
            }
            // A constant store that starts the next loop's register tiles (see `regtile`).
            if let (Target::Cpu { .. }, Some(Stmt { kind: StmtKind::For(next), .. })) = (self.target, list.get(i)) {
                let fused = crate::regtile::plan(self.func, next).and_then(|p| crate::regtile::init_of(self.func, s, &p));
                if let Some(v) = fused {
                    self.for_loop(b, next, Some((s, v)))?;
                    i += 1;
                    continue;
                }
            }
            self.stmt(b, s)?;
        }
        for m in heap.into_iter().rev() {
            self.emit(b, "memref.dealloc", &[m], &[], &[])?;
        }
        Ok(())
    }

    /// Number of elements of a buffer (shape product plus extra storage), as `index`.
    pub(crate) fn buffer_size(&mut self, b: &Block<'c>, buf: BufferId) -> Result<Val<'c>> {
        let decl = self.func.buffers.try_get(buf).ok_or_else(|| MlirError::internal("unknown buffer"))?;
        let Layout::Dense(shape) = &decl.layout else {
            return Err(MlirError::unsupported(format!("sparse buffer `{}` at Stage III", decl.name)));
        };
        let it = self.index();
        let mut acc = self.cidx(b, 1)?;
        for d in shape {
            let v = self.expr(b, d)?;
            let v = self.to_index(b, v)?;
            acc = self.emit1(b, "arith.muli", &[acc, v], it, &[])?;
        }
        if let Some(e) = &decl.extra_storage {
            let v = self.expr(b, e)?;
            let v = self.to_index(b, v)?;
            acc = self.emit1(b, "arith.addi", &[acc, v], it, &[])?;
        }
        Ok(acc)
    }

    /// The constant element count of a buffer, if its shape is literal.
    fn const_size(&self, buf: BufferId) -> Option<i64> {
        let decl = self.func.buffers.try_get(buf)?;
        let Layout::Dense(shape) = &decl.layout else { return None };
        let mut n = 1i64;
        for d in shape {
            n = n.checked_mul(d.as_int()?)?;
        }
        match &decl.extra_storage {
            Some(e) => n.checked_add(e.as_int()?),
            None => Some(n),
        }
    }

    /// Stores the buffer's default into `m[0..n]`.
    pub(crate) fn fill(&mut self, b: &Block<'c>, buf: BufferId, m: Val<'c>, n: Val<'c>) -> Result<()> {
        let decl = self.func.buffers.try_get(buf).ok_or_else(|| MlirError::internal("unknown buffer"))?;
        let v = match &decl.default {
            Some(e) => self.expr(b, e)?,
            None => self.constant(b, 0.0, decl.dtype)?,
        };
        let zero = self.cidx(b, 0)?;
        let one = self.cidx(b, 1)?;
        let it = self.index();
        let region = self.region(&[it], |t, blk, iv| {
            t.emit(blk, "memref.store", &[v, m, iv[0]], &[], &[])?;
            t.yield_(blk, &[])
        })?;
        b.append_operation(self.build("scf.for", &[zero, n, one], &[], &[], vec![region])?);
        Ok(())
    }

    /// A statement-level allocation, filled with the default. A constant-size local buffer
    /// is a static `memref.alloca` hoisted to the entry of the function, kernel or parallel
    /// loop body (only the fill runs in place); on the CPU a variable-size one is a heap
    /// `memref.alloc`, returned so that the list frees it at its end.
    fn alloc_stmt(&mut self, b: &Block<'c>, buf: BufferId) -> Result<Option<Val<'c>>> {
        let decl = self.func.buffers.try_get(buf).ok_or_else(|| MlirError::internal("unknown buffer"))?;
        let Storage::Alloc(scope) = decl.storage else {
            return Err(MlirError::unsupported(format!("`alloc` of parameter buffer `{}`", decl.name)));
        };
        let dtype = decl.dtype;
        let entry = self.entry.ok_or_else(|| MlirError::internal("no entry block for allocations"))?;
        let Some(n) = self.const_size(buf) else {
            if self.target == Target::Gpu {
                return Err(MlirError::unsupported(format!("GPU allocation `{}` needs a constant size", decl.name)));
            }
            let n = self.buffer_size(b, buf)?;
            let seg = self.attr("array<i32: 1, 0>")?;
            let m = self.emit1(b, "memref.alloc", &[n], self.memref(dtype), &[("operandSegmentSizes", seg)])?;
            self.fill(b, buf, m, n)?;
            self.bind_buf(buf, m);
            return Ok(Some(m));
        };
        let phased = self.sync.as_ref().is_some_and(|k| k.phased);
        if scope == Scope::Shared && self.target == Target::Gpu && !phased {
            if self.emulated {
                return Err(MlirError::unsupported(format!("shared buffer `{}` in GPU emulation", decl.name)));
            }
            let space = self.attr("#gpu.address_space<workgroup>")?;
            let t: Type<'c> = MemRefType::new(self.ty(dtype), &[n], None, Some(space)).into();
            // Workgroup attributions follow the kernel arguments; they are not filled
            // (threads would race), so shared memory starts undefined.
            let m: Val<'c> = entry.add_argument(t, self.loc);
            self.workgroup += 1;
            self.bind_buf(buf, m);
            return Ok(None);
        }
        let t: Type<'c> = MemRefType::new(self.ty(dtype), &[n], None, None).into();
        let seg0 = self.attr("array<i32: 0, 0>")?;
        let op = self.build("memref.alloca", &[], &[t], &[("operandSegmentSizes", seg0)], Vec::new())?;
        let op = entry.insert_operation(0, op);
        let m: Val<'c> = op.result(0).map_err(MlirError::internal)?.into();
        let nv = self.cidx(b, n)?;
        self.fill(b, buf, m, nv)?;
        self.bind_buf(buf, m);
        Ok(None)
    }

    fn stmt(&mut self, b: &Block<'c>, s: &'f Stmt) -> Result<()> {
        // The operations of a statement with a span carry its place in the source.
        let outer = self.loc;
        if let Some(src) = self.source.filter(|_| s.span.is_known()) {
            let at = sparsec_ir::span::SourceFile::new(&src.name, &src.text).location(s.span.start as usize);
            self.loc = Location::new(self.ctx, &src.name, at.line, at.col);
        }
        let done = self.stmt_kind(b, s);
        self.loc = outer;
        done
    }

    fn stmt_kind(&mut self, b: &Block<'c>, s: &'f Stmt) -> Result<()> {
        match &s.kind {
            StmtKind::Store { buffer, indices, value } => {
                let v = self.expr(b, value)?;
                let m = self.buf_val(*buffer)?;
                let i = self.flat_index(b, *buffer, indices)?;
                self.emit(b, "memref.store", &[v, m, i], &[], &[]).map(drop)
            }
            StmtKind::SpIter(it) => {
                Err(MlirError::unsupported(format!("sparse iteration `{}` (lower to Stage III first)", it.name)))
            }
            StmtKind::For(f) => self.for_loop(b, f, None),
            StmtKind::Block(blk) => self.block(b, blk),
            StmtKind::If { cond, then_body, else_body } => {
                let c = self.expr(b, cond)?;
                let u = self.is_uniform(cond);
                let r1 = self.narrowed(u, |t| {
                    t.region(&[], |t, blk, _| {
                        t.stmts(blk, then_body)?;
                        t.yield_(blk, &[])
                    })
                })?;
                let r2 = if else_body.is_empty() {
                    Region::new()
                } else {
                    self.narrowed(u, |t| {
                        t.region(&[], |t, blk, _| {
                            t.stmts(blk, else_body)?;
                            t.yield_(blk, &[])
                        })
                    })?
                };
                b.append_operation(self.build("scf.if", &[c], &[], &[], vec![r1, r2])?);
                Ok(())
            }
            StmtKind::While { cond, body } => {
                let before = self.region(&[], |t, blk, _| {
                    let c = t.expr(blk, cond)?;
                    t.emit(blk, "scf.condition", &[c], &[], &[]).map(drop)
                })?;
                let u = self.is_uniform(cond);
                let after = self.rerun(true, |t| {
                    t.narrowed(u, |t| {
                        t.region(&[], |t, blk, _| {
                            t.stmts(blk, body)?;
                            t.yield_(blk, &[])
                        })
                    })
                })?;
                b.append_operation(self.build("scf.while", &[], &[], &[], vec![before, after])?);
                Ok(())
            }
            StmtKind::Let { var, value } => {
                let v = self.expr(b, value)?;
                if let Some(slot) = self.var_def.get_mut(var.index()) {
                    *slot = Some(value.clone());
                }
                self.bind_uniform(*var, value);
                self.bind_var(*var, v);
                Ok(())
            }
            StmtKind::Alloc(buf) => self.alloc_stmt(b, *buf).map(drop),
            StmtKind::Evaluate(e) => self.expr(b, e).map(drop),
        }
    }

    /// Whether `e` is the same in every unit of a GPU block (always on the CPU).
    fn is_uniform(&self, e: &Expr) -> bool {
        self.sync.as_ref().is_none_or(|k| k.uniformity.expr(self.func, e))
    }

    /// Records whether `var`, bound to `value`, is the same in every unit of a GPU block.
    fn bind_uniform(&mut self, var: sparsec_ir::VarId, value: &Expr) {
        let u = self.is_uniform(value);
        if let Some(k) = &mut self.sync {
            k.uniformity.bind(var, u);
        }
    }

    /// Runs `f` where control flow is uniform only if it was and `also` holds.
    fn narrowed<R>(&mut self, also: bool, f: impl FnOnce(&mut Self) -> R) -> R {
        let saved = self.sync.as_ref().map(|k| k.uniform);
        if let Some(k) = &mut self.sync {
            k.uniform &= also;
        }
        let r = f(self);
        if let (Some(k), Some(u)) = (&mut self.sync, saved) {
            k.uniform = u;
        }
        r
    }

    /// A loop; `init` is a statement just before it whose constant starts its register tiles
    /// (`regtile::init_of`), run here only when the loop has no iteration.
    fn for_loop(&mut self, b: &Block<'c>, f: &'f For, init: Option<(&'f Stmt, &'f Expr)>) -> Result<()> {
        if self.prefetching.is_none() && matches!(self.target, Target::Cpu { .. }) {
            if let Some(big) = self.prefetch_condition(b, f)? {
                // Two copies of the whole nest, one branch a call: the one whose annotated
                // loops prefetch runs where a gathered array is large.
                return self.two_copies(b, big, |t, blk, on| {
                    t.prefetching = Some(on);
                    let r = t.for_loop(blk, f, init);
                    t.prefetching = None;
                    r
                });
            }
        }
        if self.vectors.is_none() && matches!(f.kind, ForKind::Serial | ForKind::Vectorized) {
            let need = sparsec_ir::vector::assumptions(self.func, f);
            let shared = |d: &sparsec_ir::Buffer| d.storage != Storage::Alloc(Scope::Local);
            if !need.is_empty() && !allocates(self.func, &f.body, shared) {
                // One test of the vector forms' assumptions for the whole loop (the outermost
                // serial or vectorized one), and two copies.
                let c = self.multiples(b, &need)?;
                return self.two_copies(b, c, |t, blk, holds| {
                    t.vectors = Some(holds);
                    let r = t.for_loop_versioned(blk, f, init);
                    t.vectors = None;
                    r
                });
            }
        }
        self.for_loop_versioned(b, f, init)
    }

    /// `scf.if cond { body(true) } else { body(false) }`: two versions of what `body` emits.
    fn two_copies(&mut self, b: &Block<'c>, cond: Val<'c>, body: impl Fn(&mut Self, &Block<'c>, bool) -> Result<()>) -> Result<()> {
        let copy = |t: &mut Self, on: bool| {
            t.region(&[], |t, blk, _| {
                body(t, blk, on)?;
                t.yield_(blk, &[])
            })
        };
        let (yes, no) = (copy(self, true)?, copy(self, false)?);
        b.append_operation(self.build("scf.if", &[cond], &[], &[], vec![yes, no])?);
        Ok(())
    }

    /// Whether each parameter is a multiple of its width.
    fn multiples(&mut self, b: &Block<'c>, need: &std::collections::BTreeSet<(sparsec_ir::VarId, i64)>) -> Result<Val<'c>> {
        let mut cond: Option<Val<'c>> = None;
        for &(v, w) in need {
            let d = self.func.vars.try_get(v).map(|x| x.dtype).ok_or_else(|| MlirError::internal("unknown parameter"))?;
            let x = self.expr(b, &Expr::Var(v))?;
            let w = self.cint(b, w, d)?;
            let r = self.emit1(b, "arith.remsi", &[x, w], self.ty(d), &[])?;
            let z = self.cint(b, 0, d)?;
            let is = self.cmpi(b, 0, r, z)?;
            cond = Some(match cond {
                None => is,
                Some(c) => self.emit1(b, "arith.andi", &[c, is], self.ty(DType::Bool), &[])?,
            });
        }
        match cond {
            Some(c) => Ok(c),
            None => self.constant(b, 1.0, DType::Bool),
        }
    }

    fn for_loop_versioned(&mut self, b: &Block<'c>, f: &'f For, init: Option<(&'f Stmt, &'f Expr)>) -> Result<()> {
        let Some(k) = &mut self.sync else { return self.for_loop_inner(b, f, init) };
        let u = k.uniformity.loop_body(self.func, f.kind, &f.min, &f.extent);
        k.uniformity.bind(f.var, u);
        let r = self.rerun(sparsec_ir::sync::loop_reruns(f.kind), |t| t.narrowed(u, |t| t.for_loop_inner(b, f, init)));
        if let Some(k) = &mut self.sync {
            k.uniformity.unbind(f.var);
        }
        r
    }

    /// Runs `f` where the current list is run again by a loop if it was or `again` holds.
    fn rerun<R>(&mut self, again: bool, f: impl FnOnce(&mut Self) -> R) -> R {
        let saved = self.sync.as_ref().map(|k| k.reruns);
        if let Some(k) = &mut self.sync {
            k.reruns |= again;
        }
        let r = f(self);
        if let (Some(k), Some(x)) = (&mut self.sync, saved) {
            k.reruns = x;
        }
        r
    }

    fn for_loop_inner(&mut self, b: &Block<'c>, f: &'f For, init: Option<(&'f Stmt, &'f Expr)>) -> Result<()> {
        let dtype = self.func.vars.try_get(f.var).map(|v| v.dtype).ok_or_else(|| MlirError::internal("unknown loop variable"))?;
        if !dtype.is_int() {
            return Err(MlirError::unsupported(format!("loop variable `{}` of type {dtype}", self.var_name(f.var))));
        }
        let min = self.expr(b, &f.min)?;
        let ext = self.expr(b, &f.extent)?;
        if let (Target::Gpu, ForKind::Thread(tag @ (ThreadTag::BlockIdxY | ThreadTag::BlockIdxZ))) = (self.target, f.kind) {
            // Grid-stride: the launch caps y and z at 65,535 blocks (`gpu::MAX_GRID_YZ`), so
            // block `y` runs iterations `y, y + S, ...` with `S = max(min(extent, 65535), 1)`
            // (the launch has at least `S` blocks along the tag).
            let pos = ThreadTag::ALL.iter().position(|t| *t == tag).unwrap_or(0);
            let id = self.tids[pos].ok_or_else(|| MlirError::internal("thread id missing"))?;
            let zero = self.cint(b, 0, dtype)?;
            let ext = self.emit1(b, "arith.maxsi", &[ext, zero], self.ty(dtype), &[])?;
            let it = self.index();
            let first = self.to_index(b, min)?;
            let n = self.to_index(b, ext)?;
            let ub = self.emit1(b, "arith.addi", &[first, n], it, &[])?;
            let lb = self.emit1(b, "arith.addi", &[first, id], it, &[])?;
            let cap = self.cidx(b, crate::gpu::MAX_GRID_YZ as i64)?;
            let one = self.cidx(b, 1)?;
            let step = self.emit1(b, "arith.minsi", &[n, cap], it, &[])?;
            let step = self.emit1(b, "arith.maxsi", &[step, one], it, &[])?;
            return self.loop_op(b, f, dtype, false, [lb, ub, step]);
        }
        if let (Target::Gpu, ForKind::Thread(tag)) = (self.target, f.kind) {
            let pos = ThreadTag::ALL.iter().position(|t| *t == tag).unwrap_or(0);
            if let (None, Some(Some(units))) = (self.tids[pos], pos.checked_sub(3).map(|p| self.phase_units[p])) {
                // Phased emulation: every unit of the block in turn.
                let zero = self.cidx(b, 0)?;
                let one = self.cidx(b, 1)?;
                let it = self.index();
                let region = self.region(&[it], |t, blk, iv| {
                    t.tids[pos] = Some(iv[0]);
                    let r = t.for_loop_inner(blk, f, None);
                    t.tids[pos] = None;
                    r?;
                    t.yield_(blk, &[])
                })?;
                b.append_operation(self.build("scf.for", &[zero, units, one], &[], &[], vec![region])?);
                return Ok(());
            }
            let id = self.tids[pos].ok_or_else(|| MlirError::internal("thread id missing"))?;
            let id = self.index_to(b, id, dtype)?;
            let inside = self.cmpi(b, 2, id, ext)?;
            let var = f.var;
            let region = self.region(&[], |t, blk, _| {
                let v = t.emit1(blk, "arith.addi", &[min, id], t.ty(dtype), &[])?;
                t.bind_var(var, v);
                t.stmts(blk, &f.body)?;
                t.yield_(blk, &[])
            })?;
            b.append_operation(self.build("scf.if", &[inside], &[], &[], vec![region, Region::new()])?);
            return Ok(());
        }
        if f.kind == ForKind::Vectorized {
            if let Some(p) = sparsec_ir::vector::plan(self.func, f) {
                return self.vector_loop(b, f, &p, init, [min, ext]);
            }
        }
        self.plain_loop(b, f, init, dtype, [min, ext])
    }

    /// The loop as written: `scf.for`, or `scf.parallel` where the target runs it in parallel.
    fn plain_loop(&mut self, b: &Block<'c>, f: &'f For, init: Option<(&'f Stmt, &'f Expr)>, dtype: DType, [min, ext]: [Val<'c>; 2]) -> Result<()> {
        // Trip count max(extent, 0) so that `scf.parallel` never sees a negative range.
        let zero = self.cint(b, 0, dtype)?;
        let ext = self.emit1(b, "arith.maxsi", &[ext, zero], self.ty(dtype), &[])?;
        let lb = self.to_index(b, min)?;
        let n = self.to_index(b, ext)?;
        let it = self.index();
        let ub = self.emit1(b, "arith.addi", &[lb, n], it, &[])?;
        let step = self.cidx(b, 1)?;
        let parallel = match (self.target, f.kind) {
            (Target::Cpu { parallel: true }, ForKind::Parallel) => self.par_depth == 0,
            (Target::Cpu { parallel: true }, ForKind::Thread(t)) => t.is_block() && self.par_depth == 0,
            _ => false,
        };
        let hoist = match self.target {
            Target::Cpu { .. } if !parallel => crate::hoist::invariant_loads(self.func, f),
            _ => Vec::new(),
        };
        let tiled = match self.target {
            Target::Cpu { .. } if !parallel => crate::regtile::plan(self.func, f),
            _ => None,
        };
        if let (None, Some((s, _))) = (&tiled, init) {
            // Not tiled after all: the statement runs first, as written.
            self.stmt(b, s)?;
        }
        let init = if tiled.is_some() { init } else { None };
        let bounds = [lb, ub, step];
        let ahead = match self.prefetching {
            Some(true) if !parallel => prefetch_distance(f).filter(|_| !self.gathers_of(f, tiled.as_ref()).is_empty()),
            _ => None,
        };
        let saved = self.prefetch;
        self.prefetch = ahead.map(|d| (f.var, d));
        let r = self.loop_copy(b, f, dtype, parallel, bounds, &hoist, tiled.as_ref(), init);
        self.prefetch = saved;
        r
    }

    /// The loop of [`Self::plain_loop`] with its hoisted loads and register tiles.
    #[allow(clippy::too_many_arguments)]
    fn loop_copy(
        &mut self,
        b: &Block<'c>,
        f: &'f For,
        dtype: DType,
        parallel: bool,
        [lb, ub, step]: [Val<'c>; 3],
        hoist: &[crate::hoist::Hoisted],
        tiled: Option<&Plan<'f>>,
        init: Option<(&'f Stmt, &'f Expr)>,
    ) -> Result<()> {
        if hoist.is_empty() && tiled.is_none() {
            return self.loop_op(b, f, dtype, parallel, [lb, ub, step]);
        }
        // Invariant loads run once, when the loop runs at least once.
        let runs = self.cmpi(b, 2, lb, ub)?;
        let region = self.region(&[], |t, blk, _| {
            let depth = t.hoisted.len();
            for h in hoist {
                let v = t.expr(blk, &h.outside)?;
                t.hoisted.push((h.key.clone(), v));
            }
            let r = match tiled {
                Some(p) => t.reg_tiled(blk, f, p, dtype, lb, ub, init.map(|x| x.1)),
                None => t.loop_op(blk, f, dtype, parallel, [lb, ub, step]),
            };
            t.hoisted.truncate(depth);
            r?;
            t.yield_(blk, &[])
        })?;
        let els = match init {
            Some((s, _)) => self.region(&[], |t, blk, _| {
                t.stmt(blk, s)?;
                t.yield_(blk, &[])
            })?,
            None => Region::new(),
        };
        b.append_operation(self.build("scf.if", &[runs], &[], &[], vec![region, els])?);
        Ok(())
    }

    /// Whether a call prefetches in the annotated loops (`sparsec_ir::prefetch`) of the nest
    /// `f` (itself included): some gathered array of one of them holds at least its
    /// `prefetch_min_bytes`. `None` where no annotated loop inside gathers.
    fn prefetch_condition(&mut self, b: &Block<'c>, f: &'f For) -> Result<Option<Val<'c>>> {
        fn collect<'f>(stmts: &'f [Stmt], out: &mut Vec<&'f For>) {
            for s in stmts {
                if let StmtKind::For(l) = &s.kind {
                    out.push(l);
                }
                for c in s.kind.child_lists() {
                    collect(c, out);
                }
            }
        }
        let mut loops: Vec<&'f For> = vec![f];
        collect(&f.body, &mut loops);
        let mut big: Option<Val<'c>> = None;
        for l in loops {
            if l.kind != ForKind::Serial || prefetch_distance(l).is_none() {
                continue;
            }
            let min = match l.attrs.get(sparsec_ir::prefetch::PREFETCH_MIN_BYTES_ATTR) {
                Some(sparsec_ir::AttrValue::Int(n)) => *n,
                _ => 0,
            };
            let tiled = crate::regtile::plan(self.func, l);
            let mut bufs: Vec<BufferId> = Vec::new();
            for e in self.gathers_of(l, tiled.as_ref()) {
                // The arrays a call passes: an allocation inside the nest is not made yet.
                let param = |b: &BufferId| self.func.buffers.try_get(*b).is_some_and(|x| matches!(x.storage, Storage::Param(_)));
                if let Expr::Load(buf, _) = e {
                    if param(buf) && !bufs.contains(buf) {
                        bufs.push(*buf);
                    }
                }
            }
            for buf in bufs {
                let m = self.buf_val(buf)?;
                let zero = self.cidx(b, 0)?;
                let it = self.index();
                let n = self.emit1(b, "memref.dim", &[m, zero], it, &[])?;
                let size = self.cidx(b, self.buf_dtype(buf)?.size_bytes() as i64)?;
                let bytes = self.emit1(b, "arith.muli", &[n, size], it, &[])?;
                let least = self.cidx(b, min)?;
                // sge
                let is = self.cmpi(b, 5, bytes, least)?;
                big = Some(match big {
                    None => is,
                    Some(c) => self.emit1(b, "arith.ori", &[c, is], self.ty(DType::Bool), &[])?,
                });
            }
        }
        Ok(big)
    }

    /// The gathers of loop `f` that a copy of it prefetches: those of its register tile's
    /// update, or of its body.
    fn gathers_of(&self, f: &'f For, tiled: Option<&Plan<'f>>) -> Vec<&'f Expr> {
        match tiled {
            Some(p) => {
                let mut out = Vec::new();
                let exprs: Vec<&'f Expr> = match p.update {
                    Update::Add { rhs, .. } => vec![rhs],
                    Update::Fma { a, b } => vec![a, b],
                };
                for e in exprs {
                    e.walk(&mut |x| {
                        if sparsec_ir::prefetch::is_gather(x, &p.jvars) && !out.contains(&x) {
                            out.push(x);
                        }
                    });
                }
                out
            }
            None => sparsec_ir::prefetch::gathers(&f.body, f.var).into_iter().map(|g| g.load).collect(),
        }
    }

    /// Prefetches, `d` iterations of loop `f` ahead of the one at index `iv`, what the
    /// gather `load` reads: the loop variable, then `scope` (the definitions in scope at
    /// the load), are bound at the later iteration, with every read clamped to its array.
    /// The bindings in force are restored afterwards.
    fn prefetch_at(&mut self, b: &Block<'c>, f: &'f For, iv: Val<'c>, d: i64, load: &Expr, scope: &[sparsec_ir::prefetch::Binding<'_>]) -> Result<()> {
        let Expr::Load(buf, idx) = load else { return Ok(()) };
        let saved = (self.vars.clone(), self.var_index.clone(), self.var_def.clone());
        let r = (|| {
            self.clamp_loads = true;
            self.bind_ahead(b, f, iv, d)?;
            for s in scope {
                let v = self.expr(b, s.value)?;
                if let Some(slot) = self.var_def.get_mut(s.var.index()) {
                    *slot = Some(s.value.clone());
                }
                self.bind_var(s.var, v);
            }
            self.prefetch_load(b, *buf, idx)
        })();
        self.clamp_loads = false;
        (self.vars, self.var_index, self.var_def) = saved;
        r
    }

    /// Binds loop `f`'s variable at `d` iterations after the one at index `iv`.
    fn bind_ahead(&mut self, b: &Block<'c>, f: &'f For, iv: Val<'c>, d: i64) -> Result<()> {
        let dtype = self.func.vars.try_get(f.var).map(|v| v.dtype).ok_or_else(|| MlirError::internal("unknown loop variable"))?;
        let dist = self.cidx(b, d)?;
        let at = self.emit1(b, "arith.addi", &[iv, dist], self.index(), &[])?;
        let v = self.index_to(b, at, dtype)?;
        self.bind_var(f.var, v);
        if let Some(slot) = self.var_index.get_mut(f.var.index()) {
            *slot = Some(at);
        }
        Ok(())
    }

    /// `memref.prefetch` of `buf[idx]` under the bindings in force (reads clamped: see
    /// [`Self::prefetch_at`]).
    fn prefetch_load(&mut self, b: &Block<'c>, buf: BufferId, idx: &[Expr]) -> Result<()> {
        let m = self.buf_val(buf)?;
        // Reads inside the index are clamped; the address itself needs no clamp (a prefetch
        // never faults, and a gather's index is in range where its reads are).
        let i = self.flat_index(b, buf, idx)?;
        let (no, yes, hint) = (self.attr("false")?, self.attr("true")?, self.attr("3 : i32")?);
        self.emit(b, "memref.prefetch", &[m, i], &[], &[("isWrite", no), ("localityHint", hint), ("isDataCache", yes)]).map(drop)
    }

    /// `i` clamped to the elements of the one-dimensional memref `m` (which has at least one).
    fn clamped(&mut self, b: &Block<'c>, m: Val<'c>, i: Val<'c>) -> Result<Val<'c>> {
        let it = self.index();
        let zero = self.cidx(b, 0)?;
        let one = self.cidx(b, 1)?;
        let n = self.emit1(b, "memref.dim", &[m, zero], it, &[])?;
        let last = self.emit1(b, "arith.subi", &[n, one], it, &[])?;
        let i = self.emit1(b, "arith.minsi", &[i, last], it, &[])?;
        self.emit1(b, "arith.maxsi", &[i, zero], it, &[])
    }

    /// `body` in an `scf.execute_region` whose block is the entry of its allocations,
    /// between a save and a restore of the stack pointer: the allocations are released when
    /// the body ends (one GPU unit, one parallel iteration), so the stack does not grow with
    /// the iterations. (`memref.alloca_scope` would do it, but `convert-scf-to-cf` splits its
    /// region into blocks before it is lowered.)
    pub(crate) fn alloca_scope(&mut self, b: &Block<'c>, body: impl FnOnce(&mut Self, &Block<'c>) -> Result<()>) -> Result<()> {
        let ptr = Type::parse(self.ctx, "!llvm.ptr").ok_or_else(|| MlirError::internal("pointer type"))?;
        let saved = self.emit1(b, "llvm.intr.stacksave", &[], ptr, &[])?;
        let outer = self.entry;
        let region = self.region(&[], |t, blk, _| {
            t.set_entry(blk);
            body(t, blk)?;
            t.yield_(blk, &[])
        });
        self.entry = outer;
        b.append_operation(self.build("scf.execute_region", &[], &[], &[], vec![region?])?);
        self.emit(b, "llvm.intr.stackrestore", &[saved], &[], &[]).map(drop)
    }

    /// A `vectorized` loop in its vector form (`ir::vector`), except in the copy of a
    /// versioned loop (`for_loop`) where its assumptions fail.
    fn vector_loop(&mut self, b: &Block<'c>, f: &'f For, p: &VPlan<'_>, init: Option<(&'f Stmt, &'f Expr)>, [min, ext]: [Val<'c>; 2]) -> Result<()> {
        if self.vectors == Some(false) {
            let dtype = self.func.vars.try_get(f.var).map(|v| v.dtype).ok_or_else(|| MlirError::internal("unknown loop variable"))?;
            return self.plain_loop(b, f, init, dtype, [min, ext]);
        }
        let saved = (self.vars.clone(), self.var_index.clone(), self.var_def.clone());
        self.bind_var(f.var, min);
        let at = self.to_index(b, min)?;
        if let Some(slot) = self.var_index.get_mut(f.var.index()) {
            *slot = Some(at);
        }
        let r = self.vstmts(b, &p.body, p.width);
        (self.vars, self.var_index, self.var_def) = saved;
        r
    }

    fn vstmts(&mut self, b: &Block<'c>, list: &[VStmt<'_>], w: i64) -> Result<()> {
        for s in list {
            match s {
                VStmt::If { cond, then } => {
                    let c = self.expr(b, cond)?;
                    let u = self.is_uniform(cond);
                    let r = self.narrowed(u, |t| {
                        t.region(&[], |t, blk, _| {
                            t.vstmts(blk, then, w)?;
                            t.yield_(blk, &[])
                        })
                    })?;
                    b.append_operation(self.build("scf.if", &[c], &[], &[], vec![r, Region::new()])?);
                }
                VStmt::Masked { first, bound, then } => {
                    let (f, n) = (self.index_expr(b, first, 0)?, self.index_expr(b, bound, 0)?);
                    let u = self.is_uniform(&Expr::binary(BinOp::Lt, first.clone(), bound.clone()));
                    let it = self.index();
                    // All lanes active (`first + w <= bound`): the body as it is; some: under
                    // the mask of the lanes `l < bound - first`.
                    let wv = self.cidx(b, w)?;
                    let last = self.emit1(b, "arith.addi", &[f, wv], it, &[])?;
                    let all = self.cmpi(b, 3, last, n)?;
                    let (full, part) = self.narrowed(u, |t| -> Result<_> {
                        let full = t.region(&[], |t, blk, _| {
                            t.vstmts(blk, then, w)?;
                            t.yield_(blk, &[])
                        })?;
                        let part = t.region(&[], |t, blk, _| {
                            let some = t.cmpi(blk, 2, f, n)?;
                            let r = t.region(&[], |t, blk, _| {
                                let count = t.emit1(blk, "arith.subi", &[n, f], it, &[])?;
                                let mt = t.mask_type(w)?;
                                let mut mask = t.emit1(blk, "vector.create_mask", &[count], mt, &[])?;
                                if let Some(outer) = t.vmask {
                                    mask = t.emit1(blk, "arith.andi", &[outer, mask], mt, &[])?;
                                }
                                let saved = t.vmask.replace(mask);
                                let r = t.vstmts(blk, then, w);
                                t.vmask = saved;
                                r?;
                                t.yield_(blk, &[])
                            })?;
                            blk.append_operation(t.build("scf.if", &[some], &[], &[], vec![r, Region::new()])?);
                            t.yield_(blk, &[])
                        })?;
                        Ok((full, part))
                    })?;
                    b.append_operation(self.build("scf.if", &[all], &[], &[], vec![full, part])?);
                }
                VStmt::Store(st) => self.vstore(b, st, w)?,
                VStmt::Block { block, stores } => {
                    for it in &block.iters {
                        self.bind_iter(b, it)?;
                    }
                    for st in stores {
                        self.vstore(b, st, w)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn vstore(&mut self, b: &Block<'c>, st: &VStore, w: i64) -> Result<()> {
        let d = self.buf_dtype(st.at.buffer)?;
        let vt = self.vector_type(w, d)?;
        let mut v = self.vvalue(b, &st.value, vt, d, w)?;
        let (m, at, attrs) = self.vaccess(b, &st.at, d, w)?;
        match self.vmask {
            // A function's own small array: a whole-vector update, which LLVM keeps in
            // registers (a masked store would keep the array in memory).
            Some(mk) if self.whole_local(&st.at, w) => {
                let old = self.emit1(b, "vector.load", &[m, at], vt, &[])?;
                v = self.emit1(b, "arith.select", &[mk, v, old], vt, &[])?;
            }
            Some(mk) => return self.emit(b, "vector.maskedstore", &[m, at, mk, v], &[], &attrs).map(drop),
            None => {}
        }
        self.emit(b, "vector.store", &[v, m, at], &[], &attrs).map(drop)
    }

    /// Whether every lane of access `a` lies inside a function-allocated array of literal
    /// size, so that reading all `w` lanes is in bounds whatever the mask.
    fn whole_local(&self, a: &Access, w: i64) -> bool {
        let Some(decl) = self.func.buffers.try_get(a.buffer) else { return false };
        let (Storage::Alloc(_), Layout::Dense(shape)) = (&decl.storage, &decl.layout) else { return false };
        let [n] = shape.as_slice() else { return false };
        matches!((n.literal_value(), a.first.literal_value()), (Some(n), Some(c)) if c >= 0 && c + w <= n)
    }

    /// `vector<w x d>`.
    fn vector_type(&self, w: impl std::fmt::Display, d: DType) -> Result<Type<'c>> {
        Type::parse(self.ctx, &format!("vector<{w}x{}>", self.ty(d))).ok_or_else(|| MlirError::internal("vector type"))
    }

    /// `vector<w x i1>`, a mask of `w` lanes.
    fn mask_type(&self, w: impl std::fmt::Display) -> Result<Type<'c>> {
        self.vector_type(w, DType::Bool)
    }

    /// A vector load of `w` lanes at `a`: under a mask only the active lanes are read
    /// (the others are zero) unless the whole vector lies in a local array.
    fn vload_at(&mut self, b: &Block<'c>, a: &Access, vt: Type<'c>, d: DType, w: i64) -> Result<Val<'c>> {
        let (m, at, attrs) = self.vaccess(b, a, d, w)?;
        match self.vmask {
            Some(mk) if !self.whole_local(a, w) => {
                let zero = self.attr(&format!("dense<{}> : {vt}", if d.is_int() { "0" } else { "0.0" }))?;
                let pass = self.emit1(b, "arith.constant", &[], vt, &[("value", zero)])?;
                self.emit1(b, "vector.maskedload", &[m, at, mk, pass], vt, &attrs)
            }
            _ => self.emit1(b, "vector.load", &[m, at], vt, &attrs),
        }
    }

    /// The lanes of a gather's integer index (`VExpr::Gather`) and their type.
    fn vint(&mut self, b: &Block<'c>, e: &VExpr, w: i64) -> Result<(Val<'c>, DType)> {
        let vty = |t: &Self, d: DType| t.vector_type(w, d);
        Ok(match e {
            VExpr::Splat(x) => {
                let d = self.func.expr_dtype(x);
                let s = self.expr(b, x)?;
                (self.emit1(b, "vector.broadcast", &[s], vty(self, d)?, &[])?, d)
            }
            VExpr::Load(a) => {
                let d = self.buf_dtype(a.buffer)?;
                (self.vload_at(b, a, vty(self, d)?, d, w)?, d)
            }
            VExpr::Binary(op, x, y) => {
                let ((x, dx), (y, dy)) = (self.vint(b, x, w)?, self.vint(b, y, w)?);
                let d = if width(dy) > width(dx) { dy } else { dx };
                let (x, y) = (self.vcast(b, x, dx, d, w)?, self.vcast(b, y, dy, d, w)?);
                let name = match op {
                    BinOp::Add => "arith.addi",
                    BinOp::Sub => "arith.subi",
                    BinOp::Mul => "arith.muli",
                    _ => return Err(MlirError::internal("vector index operator")),
                };
                (self.emit1(b, name, &[x, y], vty(self, d)?, &[])?, d)
            }
            VExpr::Cast(to, x) => {
                let (x, from) = self.vint(b, x, w)?;
                (self.vcast(b, x, from, *to, w)?, *to)
            }
            _ => return Err(MlirError::internal("vector index expression")),
        })
    }

    /// Integer lanes `v` of type `from` as `to`.
    fn vcast(&self, b: &Block<'c>, v: Val<'c>, from: DType, to: DType, w: i64) -> Result<Val<'c>> {
        if width(from) == width(to) {
            return Ok(v);
        }
        let t = self.vector_type(w, to)?;
        self.emit1(b, if width(to) > width(from) { "arith.extsi" } else { "arith.trunci" }, &[v], t, &[])
    }

    /// The memref, first lane's index and attributes (the alignment, when proven, in GPU
    /// memory; not in emulation or on the CPU) of an access.
    #[allow(clippy::type_complexity)]
    fn vaccess(&mut self, b: &Block<'c>, a: &Access, d: DType, w: i64) -> Result<(Val<'c>, Val<'c>, Vec<(&'static str, Attribute<'c>)>)> {
        let m = self.buf_val(a.buffer)?;
        let at = self.flat_index(b, a.buffer, std::slice::from_ref(&a.index))?;
        let global = matches!(self.func.buffers.try_get(a.buffer).map(|x| &x.storage), Some(Storage::Param(_)));
        let mut attrs = Vec::new();
        // Host arrays are aligned to their element only.
        if a.aligned && global && self.target == Target::Gpu && !self.emulated {
            attrs.push(("alignment", self.attr(&format!("{} : i64", w * d.size_bytes() as i64))?));
        }
        Ok((m, at, attrs))
    }

    fn vvalue(&mut self, b: &Block<'c>, e: &VExpr, vt: Type<'c>, d: DType, w: i64) -> Result<Val<'c>> {
        Ok(match e {
            VExpr::Splat(x) => {
                let s = self.expr(b, x)?;
                self.emit1(b, "vector.broadcast", &[s], vt, &[])?
            }
            VExpr::Load(a) => self.vload_at(b, a, vt, d, w)?,
            VExpr::Gather { buffer, index } => {
                let (mut idx, id) = self.vint(b, index, w)?;
                let m = self.buf_val(*buffer)?;
                let (mt, it) = (self.mask_type(w)?, self.vector_type(w, id)?);
                if let Some(mk) = self.vmask {
                    // Inactive lanes read element 0 instead: an active lane's element is in
                    // bounds, so the array has one, and an unmasked gather has no branches.
                    let zero = self.attr(&format!("dense<0> : {it}"))?;
                    let zero = self.emit1(b, "arith.constant", &[], it, &[("value", zero)])?;
                    idx = self.emit1(b, "arith.select", &[mk, idx, zero], it, &[])?;
                }
                let zero = self.attr(&format!("dense<0.0> : {vt}"))?;
                let mut v = self.emit1(b, "arith.constant", &[], vt, &[("value", zero)])?;
                if matches!(self.target, Target::Cpu { .. }) && !crate::cpu::host_has_fast_gather() {
                    // One load per lane at its extracted index: LLVM would scalarise a
                    // gather here too, through a vector of 64-bit addresses.
                    let et = self.ty(d);
                    for l in 0..w {
                        let pos = self.attr(&format!("array<i64: {l}>"))?;
                        let i = self.emit1(b, "vector.extract", &[idx], self.ty(id), &[("static_position", pos)])?;
                        let i = self.to_index(b, i)?;
                        let x = self.emit1(b, "memref.load", &[m, i], et, &[])?;
                        v = self.emit1(b, "vector.insert", &[x, v], vt, &[("static_position", pos)])?;
                    }
                    v
                } else {
                    let all = self.attr(&format!("dense<true> : {mt}"))?;
                    let mask = self.emit1(b, "arith.constant", &[], mt, &[("value", all)])?;
                    let c0 = self.cidx(b, 0)?;
                    self.emit1(b, "vector.gather", &[m, c0, idx, mask, v], vt, &[])?
                }
            }
            VExpr::Cast(..) => return Err(MlirError::internal("vector cast of floats")),
            VExpr::Binary(op, x, y) => {
                let (x, y) = (self.vvalue(b, x, vt, d, w)?, self.vvalue(b, y, vt, d, w)?);
                let name = match op {
                    BinOp::Add => "arith.addf",
                    BinOp::Sub => "arith.subf",
                    BinOp::Mul => "arith.mulf",
                    BinOp::Div => "arith.divf",
                    _ => return Err(MlirError::internal("vector operator")),
                };
                self.emit1(b, name, &[x, y], vt, &[])?
            }
            VExpr::Neg(x) => {
                let x = self.vvalue(b, x, vt, d, w)?;
                self.emit1(b, "arith.negf", &[x], vt, &[])?
            }
            VExpr::Fma(x, y, z) => {
                let (x, y, z) = (self.vvalue(b, x, vt, d, w)?, self.vvalue(b, y, vt, d, w)?, self.vvalue(b, z, vt, d, w)?);
                self.emit1(b, "math.fma", &[x, y, z], vt, &[])?
            }
        })
    }

    /// A loop nest recognised by `regtile`, its loops swapped: for each tile of `k` the
    /// accumulators are loaded once, updated over `j` (`lb..ub`, at least one iteration) in
    /// registers and stored once. Tiles of 8, 4 and 2 vectors, then single vectors, then one
    /// masked vector for the last lanes.
    #[allow(clippy::too_many_arguments)]
    fn reg_tiled(&mut self, b: &Block<'c>, f: &'f For, p: &Plan<'f>, jd: DType, lb: Val<'c>, ub: Val<'c>, init: Option<&'f Expr>) -> Result<()> {
        let saved = (self.vars.clone(), self.var_index.clone(), self.var_def.clone());
        let r = self.reg_tiled_inner(b, f, p, jd, lb, ub, init);
        (self.vars, self.var_index, self.var_def) = saved;
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn reg_tiled_inner(&mut self, b: &Block<'c>, f: &'f For, p: &Plan<'f>, jd: DType, lb: Val<'c>, ub: Val<'c>, init: Option<&'f Expr>) -> Result<()> {
        let kf = p.kloop;
        let kd = self.func.vars.try_get(kf.var).map(|v| v.dtype).ok_or_else(|| MlirError::internal("unknown loop variable"))?;
        let it = self.index();
        let kmin = self.expr(b, &kf.min)?;
        let kext = self.expr(b, &kf.extent)?;
        let zero = self.cint(b, 0, kd)?;
        let kext = self.emit1(b, "arith.maxsi", &[kext, zero], self.ty(kd), &[])?;
        let klb = self.to_index(b, kmin)?;
        let n = self.to_index(b, kext)?;
        let kub = self.emit1(b, "arith.addi", &[klb, n], it, &[])?;
        // The host's widest vectors (512-bit with AVX-512).
        let vl = crate::cpu::host_vector_bytes() / if p.dtype == DType::F64 { 8 } else { 4 };
        let mut start = klb;
        for u in [8, 4, 2, 1] {
            let step = self.cidx(b, (vl * u) as i64)?;
            let q = self.emit1(b, "arith.divui", &[n, step], it, &[])?;
            let m = self.emit1(b, "arith.muli", &[q, step], it, &[])?;
            let end = self.emit1(b, "arith.addi", &[klb, m], it, &[])?;
            let region = self.region(&[it], |t, blk, iv| {
                t.tile(blk, f, p, jd, [lb, ub], iv[0], vl, u, None, init)?;
                t.yield_(blk, &[])
            })?;
            b.append_operation(self.build("scf.for", &[start, end, step], &[], &[], vec![region])?);
            start = end;
        }
        // The last `< vl` lanes: one masked vector.
        let left = self.cmpi(b, 2, start, kub)?;
        let region = self.region(&[], |t, blk, _| {
            let count = t.emit1(blk, "arith.subi", &[kub, start], it, &[])?;
            let mt = t.mask_type(vl)?;
            let mask = t.emit1(blk, "vector.create_mask", &[count], mt, &[])?;
            t.tile(blk, f, p, jd, [lb, ub], start, vl, 1, Some(mask), init)?;
            t.yield_(blk, &[])
        })?;
        b.append_operation(self.build("scf.if", &[left], &[], &[], vec![region, Region::new()])?);
        Ok(())
    }

    /// One tile: `u` accumulators of `w` lanes from `k0`, loaded or set to `init`; with a
    /// mask, only its lanes are read and written.
    #[allow(clippy::too_many_arguments)]
    fn tile(&mut self, b: &Block<'c>, f: &'f For, p: &Plan<'f>, jd: DType, [lb, ub]: [Val<'c>; 2], k0: Val<'c>, w: usize, u: usize, mask: Option<Val<'c>>, init: Option<&'f Expr>) -> Result<()> {
        let it = self.index();
        let vt = if w > 1 {
            self.vector_type(w, if p.dtype == DType::F64 { DType::F64 } else { DType::F32 })?
        } else {
            self.ty(p.dtype)
        };
        let x = self.buf_val(p.buffer)?;
        let kt = |t: &Self, blk: &Block<'c>, i: usize| -> Result<Val<'c>> {
            if i == 0 {
                return Ok(k0);
            }
            let off = t.cidx(blk, (i * w) as i64)?;
            t.emit1(blk, "arith.addi", &[k0, off], t.index(), &[])
        };
        let mut accs = Vec::with_capacity(u);
        if let Some(e) = init {
            let s = self.expr(b, e)?;
            let v = if w > 1 { self.emit1(b, "vector.broadcast", &[s], vt, &[])? } else { s };
            accs = vec![v; u];
        }
        for i in (0..u).filter(|_| init.is_none()) {
            let k = kt(self, b, i)?;
            self.bind_k(b, p, k, false)?;
            let at = self.flat_index(b, p.buffer, p.indices)?;
            accs.push(self.vload(b, x, at, vt, w, mask)?);
        }
        let types = vec![vt; u];
        let mut args = vec![it];
        args.extend(types.iter().copied());
        let region = self.region(&args, |t, jb, a| {
            if let Some((_, d)) = t.prefetch.filter(|(v, _)| *v == f.var) {
                // What the gathers read `d` nonzeros ahead, a line per accumulator.
                let loads = t.gathers_of(f, Some(p));
                let saved = (t.vars.clone(), t.var_index.clone(), t.var_def.clone());
                t.clamp_loads = true;
                let r = (|| {
                    t.bind_ahead(jb, f, a[0], d)?;
                    for i in 0..u {
                        let k = kt(t, jb, i)?;
                        t.bind_k(jb, p, k, true)?;
                        for l in loads.iter().filter(|l| i == 0 || p.on_k(l)) {
                            if let Expr::Load(buf, idx) = l {
                                t.prefetch_load(jb, *buf, idx)?;
                            }
                        }
                    }
                    Ok(())
                })();
                t.clamp_loads = false;
                (t.vars, t.var_index, t.var_def) = saved;
                r?;
            }
            let jv = t.index_to(jb, a[0], jd)?;
            t.bind_var(f.var, jv);
            if let Some(slot) = t.var_index.get_mut(f.var.index()) {
                *slot = Some(a[0]);
            }
            let mut outs = Vec::with_capacity(u);
            for i in 0..u {
                let k = kt(t, jb, i)?;
                t.bind_k(jb, p, k, true)?;
                outs.push(match p.update {
                    Update::Add { rhs, acc_left } => {
                        let r = t.vexpr(jb, p, rhs, vt, w, mask)?;
                        let (l, rr) = if acc_left { (a[1 + i], r) } else { (r, a[1 + i]) };
                        t.emit1(jb, "arith.addf", &[l, rr], vt, &[])?
                    }
                    Update::Fma { a: x, b: y } => {
                        let x = t.vexpr(jb, p, x, vt, w, mask)?;
                        let y = t.vexpr(jb, p, y, vt, w, mask)?;
                        t.emit1(jb, "math.fma", &[x, y, a[1 + i]], vt, &[])?
                    }
                });
            }
            t.yield_(jb, &outs)
        })?;
        let one = self.cidx(b, 1)?;
        let mut operands = vec![lb, ub, one];
        operands.extend(accs);
        let op = b.append_operation(self.build("scf.for", &operands, &types, &[], vec![region])?);
        for i in 0..u {
            let v: Val<'c> = op.result(i).map_err(MlirError::internal)?.into();
            let k = kt(self, b, i)?;
            self.bind_k(b, p, k, false)?;
            let at = self.flat_index(b, p.buffer, p.indices)?;
            match mask {
                Some(mk) => self.emit(b, "vector.maskedstore", &[x, at, mk, v], &[], &[])?,
                None if w > 1 => self.emit(b, "vector.store", &[v, x, at], &[], &[])?,
                None => self.emit(b, "memref.store", &[v, x, at], &[], &[])?,
            };
        }
        Ok(())
    }

    /// Binds `k` (and the block iterators; those that need `j` only when `with_j`) at `k`.
    fn bind_k(&mut self, b: &Block<'c>, p: &Plan<'f>, k: Val<'c>, with_j: bool) -> Result<()> {
        let kvar = p.kloop.var;
        let kd = self.func.vars.try_get(kvar).map(|v| v.dtype).ok_or_else(|| MlirError::internal("unknown loop variable"))?;
        let v = self.index_to(b, k, kd)?;
        self.bind_var(kvar, v);
        if let Some(slot) = self.var_index.get_mut(kvar.index()) {
            *slot = Some(k);
        }
        for iter in &p.block.iters {
            if !with_j && p.jvars.contains(&iter.var) {
                continue;
            }
            let v = self.expr(b, &iter.binding)?;
            if let Some(slot) = self.var_def.get_mut(iter.var.index()) {
                *slot = Some(iter.binding.clone());
            }
            self.bind_var(iter.var, v);
        }
        Ok(())
    }

    fn vload(&self, b: &Block<'c>, m: Val<'c>, at: Val<'c>, vt: Type<'c>, w: usize, mask: Option<Val<'c>>) -> Result<Val<'c>> {
        if let Some(mk) = mask {
            // Lanes outside the mask are not read; they are zero.
            let zero = self.attr(&format!("dense<0.0> : {vt}"))?;
            let pass = self.emit1(b, "arith.constant", &[], vt, &[("value", zero)])?;
            return self.emit1(b, "vector.maskedload", &[m, at, mk, pass], vt, &[]);
        }
        let name = if w > 1 { "vector.load" } else { "memref.load" };
        self.emit1(b, name, &[m, at], vt, &[])
    }

    /// `e` on `w` consecutive values of `k` (a vector when `w > 1`).
    fn vexpr(&mut self, b: &Block<'c>, p: &Plan<'f>, e: &Expr, vt: Type<'c>, w: usize, mask: Option<Val<'c>>) -> Result<Val<'c>> {
        if !p.on_k(e) {
            let s = self.expr(b, e)?;
            return if w > 1 { self.emit1(b, "vector.broadcast", &[s], vt, &[]) } else { Ok(s) };
        }
        match e {
            Expr::Load(buf, idx) => {
                let m = self.buf_val(*buf)?;
                let at = self.flat_index(b, *buf, idx)?;
                self.vload(b, m, at, vt, w, mask)
            }
            Expr::Binary(op, x, y) => {
                let name = match op {
                    BinOp::Add => "arith.addf",
                    BinOp::Sub => "arith.subf",
                    BinOp::Mul => "arith.mulf",
                    BinOp::Div => "arith.divf",
                    _ => return Err(MlirError::internal("register tile: unexpected operator")),
                };
                let l = self.vexpr(b, p, x, vt, w, mask)?;
                let r = self.vexpr(b, p, y, vt, w, mask)?;
                self.emit1(b, name, &[l, r], vt, &[])
            }
            Expr::Call(Intrinsic::Fma, args) => {
                let mut v = Vec::with_capacity(args.len());
                for x in args {
                    v.push(self.vexpr(b, p, x, vt, w, mask)?);
                }
                self.emit1(b, "math.fma", &v, vt, &[])
            }
            _ => Err(MlirError::internal("register tile: unexpected expression")),
        }
    }

    /// Emits `scf.for` or `scf.parallel` over `lb..ub` with the loop's body. A parallel
    /// loop is `scf.if (ub - lb > 1) { scf.parallel } else { scf.for }`: one iteration (a
    /// light nest that the schedule left as one chunk) runs on the calling thread, without
    /// waking the thread team.
    fn loop_op(&mut self, b: &Block<'c>, f: &'f For, dtype: DType, parallel: bool, bounds: [Val<'c>; 3]) -> Result<()> {
        if !parallel {
            return self.loop_op_as(b, f, dtype, false, bounds);
        }
        let [lb, ub, _] = bounds;
        let it = self.index();
        let trip = self.emit1(b, "arith.subi", &[ub, lb], it, &[])?;
        let one = self.cidx(b, 1)?;
        let several = self.cmpi(b, 4, trip, one)?;
        let on_team = self.region(&[], |t, blk, _| {
            t.loop_op_as(blk, f, dtype, true, bounds)?;
            t.yield_(blk, &[])
        })?;
        let here = self.region(&[], |t, blk, _| {
            t.loop_op_as(blk, f, dtype, false, bounds)?;
            t.yield_(blk, &[])
        })?;
        b.append_operation(self.build("scf.if", &[several], &[], &[], vec![on_team, here])?);
        Ok(())
    }

    /// [`Self::loop_op`] as one `scf.parallel` or `scf.for`.
    fn loop_op_as(&mut self, b: &Block<'c>, f: &'f For, dtype: DType, parallel: bool, [lb, ub, step]: [Val<'c>; 3]) -> Result<()> {
        let it = self.index();
        let var = f.var;
        self.par_depth += parallel as usize;
        let outer_entry = self.entry;
        let region = self.region(&[it], |t, blk, iv| {
            let v = t.index_to(blk, iv[0], dtype)?;
            t.bind_var(var, v);
            if let Some(slot) = t.var_index.get_mut(var.index()) {
                *slot = Some(iv[0]);
            }
            if let Some((_, d)) = t.prefetch.filter(|(v, _)| *v == var) {
                for g in sparsec_ir::prefetch::gathers(&f.body, var) {
                    t.prefetch_at(blk, f, iv[0], d, g.load, &g.scope)?;
                }
            }
            if parallel && allocates(self.func, &f.body, |_| true) {
                // Each parallel iteration gets its own hoisted allocations.
                t.alloca_scope(blk, |t, inner| t.stmts(inner, &f.body))?;
            } else {
                t.stmts(blk, &f.body)?;
            }
            if parallel {
                t.emit(blk, "scf.reduce", &[], &[], &[]).map(drop)
            } else {
                t.yield_(blk, &[])
            }
        });
        self.par_depth -= parallel as usize;
        self.entry = outer_entry;
        let region = region?;
        let op = if parallel {
            let seg = self.attr("array<i32: 1, 1, 1, 0>")?;
            self.build("scf.parallel", &[lb, ub, step], &[], &[("operandSegmentSizes", seg)], vec![region])?
        } else {
            let unroll = match f.attrs.get(sparsec_ir::UNROLL_FACTOR_ATTR) {
                Some(sparsec_ir::AttrValue::Int(n)) if *n > 1 => {
                    Some(self.attr(&format!("#llvm.loop_annotation<unroll = #llvm.loop_unroll<count = {n} : i32>>"))?)
                }
                Some(sparsec_ir::AttrValue::Int(1)) => Some(self.attr("#llvm.loop_annotation<unroll = #llvm.loop_unroll<disable = true>>")?),
                _ => None,
            };
            let attrs: Vec<(&str, Attribute<'c>)> = unroll.into_iter().map(|a| ("loop_annotation", a)).collect();
            self.build("scf.for", &[lb, ub, step], &[], &attrs, vec![region])?
        };
        b.append_operation(op);
        Ok(())
    }

    /// Binds a block iterator to its binding's value (returned).
    fn bind_iter(&mut self, b: &Block<'c>, it: &sparsec_ir::BlockIter) -> Result<Val<'c>> {
        let v = self.expr(b, &it.binding)?;
        if let Some(slot) = self.var_def.get_mut(it.var.index()) {
            *slot = Some(it.binding.clone());
        }
        self.bind_uniform(it.var, &it.binding);
        self.bind_var(it.var, v);
        Ok(v)
    }

    fn block(&mut self, b: &Block<'c>, blk: &'f IrBlock) -> Result<()> {
        let mut reduce_zero: Option<Val<'c>> = None;
        for it in &blk.iters {
            let v = self.bind_iter(b, it)?;
            if it.kind == IterKind::Reduce {
                let d = self.func.expr_dtype(&it.binding);
                let z = self.constant(b, 0.0, d)?;
                let is0 = if d.is_int() { self.cmpi(b, 0, v, z)? } else { self.cmpf(b, 1, v, z)? };
                reduce_zero = Some(match reduce_zero {
                    None => is0,
                    Some(acc) => self.emit1(b, "arith.andi", &[acc, is0], self.ty(DType::Bool), &[])?,
                });
            }
        }
        if let Some(init) = &blk.init {
            match reduce_zero {
                None => self.stmts(b, init)?,
                Some(c) => {
                    let region = self.narrowed(false, |t| {
                        t.region(&[], |t, ib, _| {
                            t.stmts(ib, init)?;
                            t.yield_(ib, &[])
                        })
                    })?;
                    b.append_operation(self.build("scf.if", &[c], &[], &[], vec![region, Region::new()])?);
                }
            }
        }
        self.stmts(b, &blk.body)
    }

    /// A `func.func`-like operation (`func.func` or `gpu.func`) with this body region.
    pub(crate) fn function_op(
        &self,
        op: &str,
        name: &str,
        inputs: &[Type<'c>],
        region: Region<'c>,
        extra: &[(&str, Attribute<'c>)],
    ) -> Result<Operation<'c>> {
        let fty = FunctionType::new(self.ctx, inputs, &[]);
        let mut attrs: Vec<(&str, Attribute<'c>)> = vec![
            ("sym_name", StringAttribute::new(self.ctx, name).into()),
            ("function_type", TypeAttribute::new(fty.into()).into()),
        ];
        attrs.extend_from_slice(extra);
        self.build(op, &[], &[], &attrs, vec![region])
    }
}
