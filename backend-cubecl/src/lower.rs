//! The lowering of one kernel plan, written once over [`Gen`], a code generator with two
//! implementations: CubeCL expansion (kernels built at run time) and `#[cube]` Rust text.
//!
//! Mapping:
//! * a loop bound to `blockIdx.*`/`threadIdx.*` binds its variable to `min + CUBE_POS_*` /
//!   `min + UNIT_POS_*` and guards its body with `pos < extent` (the launch may be wider);
//!   one bound to `blockIdx.y`/`z` strides by its cube count when its extent exceeds
//!   [`crate::plan::MAX_CUBES_YZ`];
//! * other loops run serially; `while` becomes `loop { if !cond { break } ... }`;
//! * a block binds its iterators and runs `init` when every reduce iterator is 0;
//! * local allocations become local arrays, shared ones shared memory (cooperatively filled,
//!   then synchronised), both of a size known at compile time;
//! * when the kernel uses shared memory, `sync_cube` is placed before and after every
//!   statement in uniform control flow that holds thread-bound loops.

use crate::plan::{ArgSource, KernelPlan};
use sparsec_ir::{
    BinOp, Block, BufferId, DType, Expr, For, ForKind, Func, Intrinsic, IterKind, Layout, Scope, Stmt, StmtKind,
    Storage, ThreadTag, UnOp, VarId,
};
use std::collections::HashMap;

/// Why a kernel cannot be generated.
#[derive(Debug, thiserror::Error)]
pub enum LowerError {
    /// A construct or type the backend cannot express.
    #[error("unsupported by the CubeCL backend: {0}")]
    Unsupported(String),
}

type Result<T> = std::result::Result<T, LowerError>;

fn unsupported<T>(msg: impl Into<String>) -> Result<T> {
    Err(LowerError::Unsupported(msg.into()))
}

/// A GPU position builtin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// A thread tag's position.
    Tag(ThreadTag),
    /// Linear cube position (used for `blockIdx.x` when the grid spills into y).
    CubePos,
    /// Linear position over the whole launch.
    AbsolutePos,
}

/// Where a buffer access goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufRef {
    /// Kernel argument `i` (global memory).
    Arg(usize),
    /// A local or shared array allocated in the kernel.
    Alloc(BufferId),
}

/// A code generator. Values `V` are typed by the IR dtype the walker passes along.
pub trait Gen {
    /// A generated value.
    type V: Clone;
    /// Integer literal.
    fn int(&mut self, v: i64, d: DType) -> Result<Self::V>;
    /// Float literal.
    fn float(&mut self, v: f64, d: DType) -> Result<Self::V>;
    /// Boolean literal.
    fn boolean(&mut self, v: bool) -> Result<Self::V>;
    /// `a op b` for operands of dtype `d` (`FloorDiv`/`FloorMod` included; `And`/`Or` on bools).
    fn binary(&mut self, op: BinOp, a: Self::V, b: Self::V, d: DType) -> Result<Self::V>;
    /// `op a`.
    fn unary(&mut self, op: UnOp, a: Self::V, d: DType) -> Result<Self::V>;
    /// `select(c, a, b)`.
    fn select(&mut self, c: Self::V, a: Self::V, b: Self::V, d: DType) -> Result<Self::V>;
    /// Conversion.
    fn cast(&mut self, v: Self::V, from: DType, to: DType) -> Result<Self::V>;
    /// Intrinsic on operands of dtype `d`.
    fn call(&mut self, f: Intrinsic, args: Vec<Self::V>, d: DType) -> Result<Self::V>;
    /// A position builtin as an `i32`/`i64` of dtype `d`.
    fn builtin(&mut self, b: Builtin, d: DType) -> Result<Self::V>;
    /// Names a value (a `let`): later uses refer to it and it is evaluated here.
    fn bind(&mut self, v: Self::V, name: &str, d: DType) -> Result<Self::V>;
    /// `buf[idx]` (`idx` of integer dtype `id`).
    fn load(&mut self, buf: BufRef, idx: Self::V, id: DType, d: DType) -> Result<Self::V>;
    /// `buf[idx] = v`.
    fn store(&mut self, buf: BufRef, idx: Self::V, id: DType, v: Self::V, d: DType) -> Result<()>;
    /// Atomic add; yields the old value.
    fn atomic_add(&mut self, buf: BufRef, idx: Self::V, id: DType, v: Self::V, d: DType) -> Result<Self::V>;
    /// Atomic read of an element of an atomic buffer.
    fn atomic_load(&mut self, buf: BufRef, idx: Self::V, id: DType, d: DType) -> Result<Self::V>;
    /// Atomic write of an element of an atomic buffer.
    fn atomic_store(&mut self, buf: BufRef, idx: Self::V, id: DType, v: Self::V, d: DType) -> Result<()>;
    /// `if c { then } else { otherwise }`.
    fn if_else(
        &mut self,
        c: Self::V,
        then: &mut dyn FnMut(&mut Self) -> Result<()>,
        otherwise: Option<&mut dyn FnMut(&mut Self) -> Result<()>>,
    ) -> Result<()>;
    /// `for v in start..end { body(v) }` over integer dtype `d`.
    fn for_range(
        &mut self,
        start: Self::V,
        end: Self::V,
        d: DType,
        name: &str,
        body: &mut dyn FnMut(&mut Self, Self::V) -> Result<()>,
    ) -> Result<()>;
    /// `loop { body }`; the body leaves with [`Gen::brk`].
    fn infinite_loop(&mut self, body: &mut dyn FnMut(&mut Self) -> Result<()>) -> Result<()>;
    /// `break` out of the innermost [`Gen::infinite_loop`].
    fn brk(&mut self) -> Result<()>;
    /// Allocates a local (`shared == false`) or shared array of `len` elements.
    fn alloc(&mut self, buf: BufferId, name: &str, len: usize, d: DType, shared: bool) -> Result<()>;
    /// `sync_cube()`.
    fn sync(&mut self) -> Result<()>;
    /// `sync_storage()`: a cube barrier that also orders global memory.
    fn sync_storage(&mut self) -> Result<()>;
    /// Reports an integer divisor `b` (of dtype `d`) that is zero at run time, where the
    /// generator can (the IR makes that an error; GPUs give a value), and returns the divisor
    /// to divide by: a reporting generator substitutes 1 for 0, so that no shader compiler
    /// meets a division by a zero it folded (the run is an error anyway).
    fn check_divisor(&mut self, b: Self::V, _d: DType) -> Result<Self::V> {
        Ok(b)
    }
    /// Reports, where the generator must (targets that assume finite floats), a float value
    /// `v` of dtype `d` that is inf or NaN, and returns `v`.
    fn check_finite(&mut self, v: Self::V, _d: DType) -> Result<Self::V> {
        Ok(v)
    }
    /// Whether [`Gen::check_finite`] reports (then the walker also guards the operands of
    /// operations that turn finite operands into inf or NaN, see [`Gen::report_nonfinite`]).
    fn checks_finite(&self) -> bool {
        false
    }
    /// Reports that an operation is about to make inf or NaN of finite operands when `cond`
    /// holds. Checked on the operands, because a compiler that assumes finite floats may fold
    /// such an operation on a known operand (`x / 0.0`) into any value.
    fn report_nonfinite(&mut self, _cond: Self::V) -> Result<()> {
        Ok(())
    }
    /// Units per cube along x, y, z multiplied (for cooperative fills) as an `i32`.
    fn cube_units(&mut self) -> Result<Self::V>;
    /// Linear unit index within the cube as an `i32`.
    fn unit_pos(&mut self) -> Result<Self::V>;
}

/// Walks a kernel plan and drives a [`Gen`].
pub struct Walker<'f, G: Gen> {
    func: &'f Func,
    plan: &'f KernelPlan,
    vars: HashMap<VarId, G::V>,
    /// Whether `blockIdx.x` reads the linear cube position (grid spilled into y).
    pub spill_x: bool,
    /// Which variables may differ between the units of a cube.
    uniformity: sparsec_ir::sync::Uniformity,
    /// Whether a loop of the kernel runs the current list again (`sync::list_sync`).
    reruns: bool,
    /// Element counts of allocations whose shape depends on scalar parameters, fixed at launch.
    pub alloc_sizes: HashMap<BufferId, usize>,
}

fn const_int(e: &Expr) -> Option<i64> {
    match e {
        Expr::Int(v, _) => Some(*v),
        Expr::Binary(op, a, b) => {
            let (a, b) = (const_int(a)?, const_int(b)?);
            match op {
                BinOp::Add => a.checked_add(b),
                BinOp::Sub => a.checked_sub(b),
                BinOp::Mul => a.checked_mul(b),
                BinOp::FloorDiv if b != 0 => Some(a.div_euclid(b) - if a.rem_euclid(b) != 0 && b < 0 { 1 } else { 0 }),
                BinOp::Min => Some(a.min(b)),
                BinOp::Max => Some(a.max(b)),
                _ => None,
            }
        }
        Expr::Cast(_, a) => const_int(a),
        _ => None,
    }
}

impl<'f, G: Gen> Walker<'f, G> {
    /// A walker over one kernel of `func`.
    pub fn new(func: &'f Func, plan: &'f KernelPlan) -> Self {
        Walker { func, plan, vars: HashMap::new(), spill_x: false, uniformity: sparsec_ir::sync::Uniformity::new(func), reruns: false, alloc_sizes: HashMap::new() }
    }

    /// Generates the kernel body.
    pub fn kernel(&mut self, g: &mut G) -> Result<()> {
        // Scalar parameters are kernel arguments, bound by the generator beforehand.
        let prelude = self.plan.prelude.clone();
        let stmt = self.plan.stmt.clone();
        let mut all = prelude;
        all.push(stmt);
        self.list(g, &all, true)
    }

    /// Binds a scalar parameter's variable to the value the generator made for it.
    pub fn bind_var(&mut self, v: VarId, val: G::V) {
        self.vars.insert(v, val);
    }

    fn dtype_of_var(&self, v: VarId) -> DType {
        self.func.vars.try_get(v).map_or(DType::I32, |x| x.dtype)
    }

    fn var_name(&self, v: VarId) -> String {
        self.func.vars.try_get(v).map_or_else(|| "v".into(), |x| crate::plan::sanitize(&x.name))
    }

    /// `var = min + pos; if pos < extent { body }`.
    fn bound_loop(&mut self, g: &mut G, f: &For, pos: G::V, d: DType, uniform: bool) -> Result<()> {
        let ext = self.expr(g, &f.extent)?;
        let ext = self.coerce(g, ext, self.func.expr_dtype(&f.extent), d)?;
        let min = self.expr(g, &f.min)?;
        let min = self.coerce(g, min, self.func.expr_dtype(&f.min), d)?;
        let cond = g.binary(BinOp::Lt, pos.clone(), ext, d)?;
        let v = f.var;
        let name = self.var_name(v);
        let body = f.body.clone();
        self.uniformity.bind(v, uniform);
        let r = g.if_else(
            cond,
            &mut |g| {
                let x = g.binary(BinOp::Add, min.clone(), pos.clone(), d)?;
                let x = g.bind(x, &name, d)?;
                self.vars.insert(v, x);
                self.list(g, &body, uniform)
            },
            None,
        );
        self.uniformity.unbind(v);
        r
    }

    fn coerce(&mut self, g: &mut G, v: G::V, from: DType, to: DType) -> Result<G::V> {
        if from == to {
            Ok(v)
        } else {
            g.cast(v, from, to)
        }
    }

    fn list(&mut self, g: &mut G, stmts: &[Stmt], uniform: bool) -> Result<()> {
        let saved = self.vars.clone();
        // Statements every unit runs redundantly (a serial init) beside thread-bound loops,
        // or thread-bound nests that exchange data through memory: a storage barrier between
        // them, which only control flow that every unit of the cube takes may hold.
        let plan = sparsec_ir::sync::list_sync(self.func, stmts, uniform, self.plan.uses_shared, self.reruns)
            .or_else(|e| unsupported(e.to_string()))?;
        let storage = matches!(plan, sparsec_ir::sync::ListSync::AroundThreadNests { storage: true });
        let barrier = |g: &mut G| if storage { g.sync_storage() } else { g.sync() };
        if plan.opens(stmts) {
            barrier(g)?;
        }
        for s in stmts {
            let sync = plan.fences(s);
            if sync {
                barrier(g)?;
            }
            self.stmt(g, s, uniform)?;
            if sync {
                barrier(g)?;
            }
        }
        self.vars = saved;
        Ok(())
    }

    fn uses_nonuniform(&self, e: &Expr) -> bool {
        !self.uniformity.expr(self.func, e)
    }

    fn stmt(&mut self, g: &mut G, s: &Stmt, uniform: bool) -> Result<()> {
        match &s.kind {
            StmtKind::Store { buffer, indices, value } => {
                let v = self.expr(g, value)?;
                let (r, idx, id) = self.address(g, *buffer, indices)?;
                let d = self.func.buffers[*buffer].dtype;
                if self.is_atomic(*buffer) {
                    return g.atomic_store(r, idx, id, v, d);
                }
                if d == DType::Bool {
                    // An allocated bool buffer is kept as i32 (see `stored`).
                    let v = g.cast(v, DType::Bool, DType::I32)?;
                    return g.store(r, idx, id, v, DType::I32);
                }
                g.store(r, idx, id, v, d)
            }
            StmtKind::SpIter(_) => unsupported("sparse iterations must be lowered before the CubeCL backend"),
            StmtKind::For(f) => self.for_loop(g, f, uniform),
            StmtKind::Block(b) => self.block(g, b, uniform),
            StmtKind::If { cond, then_body, else_body } => {
                let c = self.expr(g, cond)?;
                let inner_uniform = uniform && !self.uses_nonuniform(cond);
                let (t, e) = (then_body.clone(), else_body.clone());
                if e.is_empty() {
                    g.if_else(c, &mut |g| self.list(g, &t, inner_uniform), None)
                } else {
                    // Two closures borrow `self` in turn.
                    let me: *mut Self = self;
                    g.if_else(
                        c,
                        // SAFETY: the generator calls the two closures one after the other, never
                        // both at once, so the two mutable borrows of the walker do not overlap.
                        &mut |g| unsafe { (*me).list(g, &t, inner_uniform) },
                        Some(&mut |g| unsafe { (*me).list(g, &e, inner_uniform) }),
                    )
                }
            }
            StmtKind::While { cond, body } => {
                let cond = cond.clone();
                let body = body.clone();
                let inner_uniform = uniform && !self.uses_nonuniform(&cond);
                let reruns = std::mem::replace(&mut self.reruns, true);
                let r = g.infinite_loop(&mut |g| {
                    let c = self.expr(g, &cond)?;
                    let not_c = g.unary(UnOp::Not, c, DType::Bool)?;
                    g.if_else(not_c, &mut |g| g.brk(), None)?;
                    self.list(g, &body, inner_uniform)
                });
                self.reruns = reruns;
                r
            }
            StmtKind::Let { var, value } => {
                let v = self.expr(g, value)?;
                let d = self.dtype_of_var(*var);
                let name = self.var_name(*var);
                let v = g.bind(v, &name, d)?;
                self.uniformity.bind(*var, !self.uses_nonuniform(value));
                self.vars.insert(*var, v);
                Ok(())
            }
            StmtKind::Alloc(b) => self.alloc(g, *b, uniform),
            StmtKind::Evaluate(e) => {
                self.expr(g, e)?;
                Ok(())
            }
        }
    }

    fn alloc(&mut self, g: &mut G, b: BufferId, uniform: bool) -> Result<()> {
        let buf = &self.func.buffers[b];
        let scope = match buf.storage {
            Storage::Alloc(s) => s,
            Storage::Param(_) => return unsupported(format!("buffer `{}` is a parameter and cannot be allocated", buf.name)),
        };
        let len = match &buf.layout {
            _ if self.alloc_sizes.contains_key(&b) => self.alloc_sizes[&b] as i64,
            Layout::Dense(shape) => {
                let mut n: i64 = 1;
                for e in shape {
                    let Some(x) = const_int(e) else {
                        return unsupported(format!(
                            "{} buffer `{}` needs a size known at compile time",
                            scope.name(),
                            buf.name
                        ));
                    };
                    n = n.saturating_mul(x.max(0));
                }
                n
            }
            Layout::Sparse(_) => return unsupported(format!("buffer `{}` is not flat", buf.name)),
        };
        if len > 1 << 16 {
            return unsupported(format!("{} buffer `{}` is too large ({len} elements)", scope.name(), buf.name));
        }
        let len = len.max(1) as usize;
        let name = crate::plan::sanitize(&buf.name);
        let default = buf.default.clone();
        let d = buf.dtype;
        match scope {
            Scope::Global => unsupported(format!(
                "global buffer `{}` allocated inside a kernel is not supported; allocate it at function level",
                buf.name
            )),
            Scope::Local => {
                g.alloc(b, &name, len, stored(d), false)?;
                let dv = self.default_value(g, default.as_ref(), d)?;
                let (dv, d) = if d == DType::Bool { (g.cast(dv, d, DType::I32)?, DType::I32) } else { (dv, d) };
                let zero = g.int(0, DType::I32)?;
                let n = g.int(len as i64, DType::I32)?;
                g.for_range(zero, n, DType::I32, &format!("{name}_i"), &mut |g, i| {
                    g.store(BufRef::Alloc(b), i, DType::I32, dv.clone(), d)
                })
            }
            Scope::Shared => {
                if !uniform {
                    return unsupported(format!(
                        "shared buffer `{}` is allocated in thread-dependent control flow, which is not supported",
                        buf.name
                    ));
                }
                g.alloc(b, &name, len, stored(d), true)?;
                let dv = self.default_value(g, default.as_ref(), d)?;
                let (dv, d) = if d == DType::Bool { (g.cast(dv, d, DType::I32)?, DType::I32) } else { (dv, d) };
                // Cooperative fill: unit u fills u, u + units, ...
                let start = g.unit_pos()?;
                let step = g.cube_units()?;
                let n = g.int(len as i64, DType::I32)?;
                let zero = g.int(0, DType::I32)?;
                let trips = g.binary(BinOp::Add, n.clone(), step.clone(), DType::I32)?;
                let one = g.int(1, DType::I32)?;
                let trips = g.binary(BinOp::Sub, trips, one, DType::I32)?;
                let trips = g.binary(BinOp::Div, trips, step.clone(), DType::I32)?;
                g.for_range(zero, trips, DType::I32, &format!("{name}_t"), &mut |g, t| {
                    let off = g.binary(BinOp::Mul, t, step.clone(), DType::I32)?;
                    let idx = g.binary(BinOp::Add, off, start.clone(), DType::I32)?;
                    let c = g.binary(BinOp::Lt, idx.clone(), n.clone(), DType::I32)?;
                    g.if_else(c, &mut |g| g.store(BufRef::Alloc(b), idx.clone(), DType::I32, dv.clone(), d), None)
                })?;
                g.sync()
            }
        }
    }

    fn default_value(&mut self, g: &mut G, e: Option<&Expr>, d: DType) -> Result<G::V> {
        match e {
            Some(e) => {
                let v = self.expr(g, e)?;
                let from = self.func.expr_dtype(e);
                self.coerce(g, v, from, d)
            }
            None => zero(g, d),
        }
    }

    fn for_loop(&mut self, g: &mut G, f: &For, uniform: bool) -> Result<()> {
        let d = self.dtype_of_var(f.var);
        if matches!(f.kind, ForKind::Thread(ThreadTag::BlockIdxY | ThreadTag::BlockIdxZ)) {
            return self.strided_loop(g, f, d, uniform);
        }
        match f.kind {
            ForKind::Thread(t) => {
                let b = if t == ThreadTag::BlockIdxX && self.spill_x { Builtin::CubePos } else { Builtin::Tag(t) };
                let pos = g.builtin(b, d)?;
                // A block index is the same for every unit of a cube.
                let inner_uniform = uniform && self.uniformity.loop_body(self.func, f.kind, &f.min, &f.extent);
                self.bound_loop(g, f, pos, d, inner_uniform)
            }
            ForKind::Serial | ForKind::Parallel | ForKind::Vectorized | ForKind::Unrolled => {
                let min = self.expr(g, &f.min)?;
                let min = self.coerce(g, min, self.func.expr_dtype(&f.min), d)?;
                let ext = self.expr(g, &f.extent)?;
                let ext = self.coerce(g, ext, self.func.expr_dtype(&f.extent), d)?;
                let end = g.binary(BinOp::Add, min.clone(), ext, d)?;
                let inner_uniform = uniform && self.uniformity.loop_body(self.func, f.kind, &f.min, &f.extent);
                let v = f.var;
                let name = self.var_name(v);
                let body = f.body.clone();
                let reruns = std::mem::replace(&mut self.reruns, true);
                let r = g.for_range(min, end, d, &name, &mut |g, x| {
                    self.vars.insert(v, x);
                    self.list(g, &body, inner_uniform)
                });
                self.reruns = reruns;
                r
            }
        }
    }

    /// A loop bound to `blockIdx.y` or `z`: cube `y` of `Y = min(extent, MAX_CUBES_YZ)` runs
    /// iterations `y, y + Y, ...` (one when the extent fits the grid).
    fn strided_loop(&mut self, g: &mut G, f: &For, d: DType, uniform: bool) -> Result<()> {
        let ForKind::Thread(tag) = f.kind else { return unsupported("a strided loop must be bound to a cube index") };
        let min = self.expr(g, &f.min)?;
        let min = self.coerce(g, min, self.func.expr_dtype(&f.min), d)?;
        let ext = self.expr(g, &f.extent)?;
        let ext = self.coerce(g, ext, self.func.expr_dtype(&f.extent), d)?;
        let cap = g.int(crate::plan::MAX_CUBES_YZ, d)?;
        let cubes = g.binary(BinOp::Min, ext.clone(), cap, d)?;
        let y = g.builtin(Builtin::Tag(tag), d)?;
        let inside = g.binary(BinOp::Lt, y.clone(), ext.clone(), d)?;
        let v = f.var;
        let name = self.var_name(v);
        let body = f.body.clone();
        g.if_else(
            inside,
            &mut |g| {
                // ceil((ext - y) / cubes) iterations, all positive here.
                let left = g.binary(BinOp::Sub, ext.clone(), y.clone(), d)?;
                let one = g.int(1, d)?;
                let t = g.binary(BinOp::Add, left, cubes.clone(), d)?;
                let t = g.binary(BinOp::Sub, t, one, d)?;
                let trips = g.binary(BinOp::Div, t, cubes.clone(), d)?;
                let zero = g.int(0, d)?;
                g.for_range(zero, trips, d, &format!("{name}_t"), &mut |g, k| {
                    let off = g.binary(BinOp::Mul, k, cubes.clone(), d)?;
                    let x = g.binary(BinOp::Add, y.clone(), off, d)?;
                    let x = g.binary(BinOp::Add, min.clone(), x, d)?;
                    let x = g.bind(x, &name, d)?;
                    self.vars.insert(v, x);
                    self.list(g, &body, uniform)
                })
            },
            None,
        )
    }

    fn block(&mut self, g: &mut G, b: &Block, uniform: bool) -> Result<()> {
        let saved = self.vars.clone();
        let mut reduce_vals = Vec::new();
        let mut bound = Vec::new();
        for it in &b.iters {
            let v = self.expr(g, &it.binding)?;
            let d = self.dtype_of_var(it.var);
            let v = self.coerce(g, v, self.func.expr_dtype(&it.binding), d)?;
            let name = self.var_name(it.var);
            let v = g.bind(v, &name, d)?;
            if it.kind == IterKind::Reduce {
                reduce_vals.push((v.clone(), d));
            }
            self.uniformity.bind(it.var, !self.uses_nonuniform(&it.binding));
            bound.push((it.var, v));
        }
        for (var, v) in bound {
            self.vars.insert(var, v);
        }
        if let Some(init) = &b.init {
            let init = init.clone();
            if reduce_vals.is_empty() {
                self.list(g, &init, uniform)?;
            } else {
                let mut cond: Option<G::V> = None;
                for (v, d) in reduce_vals {
                    let z = zero(g, d)?;
                    let c = g.binary(BinOp::Eq, v, z, d)?;
                    cond = Some(match cond {
                        None => c,
                        Some(p) => g.binary(BinOp::And, p, c, DType::Bool)?,
                    });
                }
                let c = cond.unwrap_or(g.boolean(true)?);
                g.if_else(c, &mut |g| self.list(g, &init, false), None)?;
            }
        }
        let body = b.body.clone();
        self.list(g, &body, uniform)?;
        self.vars = saved;
        Ok(())
    }

    fn is_atomic(&self, b: BufferId) -> bool {
        match self.arg_index(b) {
            Some(i) => self.plan.bufs[i].atomic,
            None => false,
        }
    }

    fn arg_index(&self, b: BufferId) -> Option<usize> {
        let buf = &self.func.buffers[b];
        let src = match buf.storage {
            Storage::Param(p) => ArgSource::Param(p),
            Storage::Alloc(Scope::Global) => ArgSource::Global(b),
            Storage::Alloc(_) => return None,
        };
        self.plan.bufs.iter().position(|k| k.source == src)
    }

    /// Flat index of an access: Stage-III buffers take one index; row-major otherwise.
    fn address(&mut self, g: &mut G, b: BufferId, indices: &[Expr]) -> Result<(BufRef, G::V, DType)> {
        let buf = &self.func.buffers[b];
        let r = match self.arg_index(b) {
            Some(i) => BufRef::Arg(i),
            None => BufRef::Alloc(b),
        };
        let shape = match &buf.layout {
            Layout::Dense(s) => s.clone(),
            Layout::Sparse(_) => return unsupported(format!("buffer `{}` is still sparse", buf.name)),
        };
        if indices.len() != shape.len() && indices.len() != 1 {
            return unsupported(format!("access to `{}` takes {} indices", buf.name, shape.len()));
        }
        let id = indices.first().map_or(DType::I32, |e| self.func.expr_dtype(e));
        let mut flat: Option<G::V> = None;
        for (k, e) in indices.iter().enumerate() {
            let x = self.expr(g, e)?;
            let x = self.coerce(g, x, self.func.expr_dtype(e), id)?;
            flat = Some(match flat {
                None => x,
                Some(f) => {
                    let dim = self.expr(g, &shape[k])?;
                    let dim = self.coerce(g, dim, self.func.expr_dtype(&shape[k]), id)?;
                    let m = g.binary(BinOp::Mul, f, dim, id)?;
                    g.binary(BinOp::Add, m, x, id)?
                }
            });
        }
        let flat = match flat {
            Some(f) => f,
            None => g.int(0, id)?,
        };
        Ok((r, flat, id))
    }

    /// Generates an expression. Every float it computes passes [`Gen::check_finite`]: the
    /// first inf or NaN of an evaluation is a leaf or the result of an operation on finite
    /// operands, so checking those (not variables, nor choices between checked values) sees it.
    pub fn expr(&mut self, g: &mut G, e: &Expr) -> Result<G::V> {
        let v = self.expr_unchecked(g, e)?;
        let computed = match e {
            Expr::Var(_) | Expr::Select(..) | Expr::Int(..) | Expr::Bool(_) => false,
            Expr::Float(x, _) => !x.is_finite(),
            Expr::Binary(BinOp::Min | BinOp::Max, ..) | Expr::Unary(..) => false,
            Expr::Call(Intrinsic::Abs | Intrinsic::MaxValue(_) | Intrinsic::MinValue(_), _) => false,
            _ => true,
        };
        let d = self.func.expr_dtype(e);
        if computed && d.is_float() {
            g.check_finite(v, d)
        } else {
            Ok(v)
        }
    }

    fn expr_unchecked(&mut self, g: &mut G, e: &Expr) -> Result<G::V> {
        match e {
            Expr::Int(v, d) => g.int(*v, *d),
            Expr::Float(v, d) => g.float(*v, *d),
            Expr::Bool(b) => g.boolean(*b),
            Expr::Var(v) => match self.vars.get(v) {
                Some(x) => Ok(x.clone()),
                None => unsupported(format!("variable `{}` is used where it is not bound", self.var_name(*v))),
            },
            Expr::Binary(op, a, b) => {
                let d = self.func.expr_dtype(a);
                if d.is_int() && matches!(op, BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod) && const_int(b) == Some(0) {
                    // CubeCL would fold it and panic in its compiler thread.
                    return unsupported("integer division by a constant zero");
                }
                let x = self.expr(g, a)?;
                let y = self.expr(g, b)?;
                let y = if d.is_int() && matches!(op, BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod) && const_int(b).is_none() {
                    g.check_divisor(y, d)?
                } else {
                    y
                };
                if d.is_float() && g.checks_finite() && matches!(op, BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod) {
                    let zero = below_normal(g, y.clone(), d)?;
                    g.report_nonfinite(zero)?;
                }
                g.binary(*op, x, y, d)
            }
            Expr::Unary(op, a) => {
                let d = self.func.expr_dtype(a);
                let x = self.expr(g, a)?;
                g.unary(*op, x, d)
            }
            Expr::Select(c, a, b) => {
                let d = self.func.expr_dtype(a);
                let c = self.expr(g, c)?;
                let x = self.expr(g, a)?;
                let y = self.expr(g, b)?;
                g.select(c, x, y, d)
            }
            Expr::Cast(to, a) => {
                let from = self.func.expr_dtype(a);
                let x = self.expr(g, a)?;
                self.coerce(g, x, from, *to)
            }
            Expr::Call(f, args) => {
                let d = match f {
                    Intrinsic::MaxValue(d) | Intrinsic::MinValue(d) => *d,
                    _ => args.first().map_or(DType::F32, |a| self.func.expr_dtype(a)),
                };
                let mut vals = Vec::new();
                for a in args {
                    vals.push(self.expr(g, a)?);
                }
                if g.checks_finite() {
                    guard_domain(g, *f, &vals, d)?;
                }
                g.call(*f, vals, d)
            }
            Expr::Load(b, idx) => {
                let d = self.func.buffers[*b].dtype;
                let (r, i, id) = self.address(g, *b, idx)?;
                if self.is_atomic(*b) {
                    return g.atomic_load(r, i, id, d);
                }
                if d == DType::Bool {
                    let x = g.load(r, i, id, DType::I32)?;
                    return g.cast(x, DType::I32, DType::Bool);
                }
                g.load(r, i, id, d)
            }
            Expr::AtomicAdd(b, idx, v) => {
                let d = self.func.buffers[*b].dtype;
                let val = self.expr(g, v)?;
                let (r, i, id) = self.address(g, *b, idx)?;
                if !matches!(r, BufRef::Arg(_)) {
                    return unsupported(format!(
                        "atomic_add into local or shared buffer `{}`",
                        self.func.buffers[*b].name
                    ));
                }
                g.atomic_add(r, i, id, val, d)
            }
        }
    }
}

/// `|x|` below the smallest normal float of `d`: zero, or a subnormal that WGSL lets a
/// compiler flush to zero (so a divisor or a `log` operand there may yield anything).
fn below_normal<G: Gen>(g: &mut G, x: G::V, d: DType) -> Result<G::V> {
    let min = match d {
        DType::F64 => f64::MIN_POSITIVE,
        DType::F16 => 6.103_515_6e-5,
        _ => f32::MIN_POSITIVE as f64,
    };
    let a = g.call(Intrinsic::Abs, vec![x], d)?;
    let m = g.float(min, d)?;
    g.binary(BinOp::Lt, a, m, d)
}

/// Reports the finite operands on which intrinsic `f` yields inf or NaN, or whose result
/// WGSL leaves undefined: `log` of x <= 0 or subnormal, `sqrt` of x < 0, `exp` past the
/// largest finite result, `pow` of 0 (or a subnormal) to a negative power or of a negative
/// base to a non-integral one.
fn guard_domain<G: Gen>(g: &mut G, f: Intrinsic, vals: &[G::V], d: DType) -> Result<()> {
    let Some(x) = vals.first().cloned() else { return Ok(()) };
    let zero = g.float(0.0, d)?;
    let cond = match f {
        Intrinsic::Log => {
            let neg = g.binary(BinOp::Le, x.clone(), zero, d)?;
            let tiny = below_normal(g, x, d)?;
            g.binary(BinOp::Or, neg, tiny, DType::Bool)?
        }
        Intrinsic::Sqrt => g.binary(BinOp::Lt, x, zero, d)?,
        Intrinsic::Exp => {
            let max = match d {
                DType::F64 => f64::MAX.ln(),
                DType::F16 => 65504f64.ln(),
                _ => (f32::MAX as f64).ln(),
            };
            let m = g.float(max, d)?;
            g.binary(BinOp::Gt, x, m, d)?
        }
        Intrinsic::Pow => {
            let Some(y) = vals.get(1).cloned() else { return Ok(()) };
            let base_zero = below_normal(g, x.clone(), d)?;
            let exp_neg = g.binary(BinOp::Lt, y.clone(), zero.clone(), d)?;
            let a = g.binary(BinOp::And, base_zero, exp_neg, DType::Bool)?;
            let base_neg = g.binary(BinOp::Lt, x, zero, d)?;
            let fl = g.call(Intrinsic::Floor, vec![y.clone()], d)?;
            let frac = g.binary(BinOp::Ne, fl, y, d)?;
            let b = g.binary(BinOp::And, base_neg, frac, DType::Bool)?;
            g.binary(BinOp::Or, a, b, DType::Bool)?
        }
        _ => return Ok(()),
    };
    g.report_nonfinite(cond)
}

/// The element type an allocated buffer of dtype `d` is kept in: GPU arrays hold no bool, so
/// a bool buffer (the checks of `--checked` code keep conditions in one) is an i32 one, 0 or 1.
fn stored(d: DType) -> DType {
    if d == DType::Bool {
        DType::I32
    } else {
        d
    }
}

fn zero<G: Gen>(g: &mut G, d: DType) -> Result<G::V> {
    match d {
        DType::Bool => g.boolean(false),
        d if d.is_int() => g.int(0, d),
        d => g.float(0.0, d),
    }
}
