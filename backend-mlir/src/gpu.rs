//! The GPU module: kernels in a `gpu.module`, a host `func.func` that launches them, and PTX
//! through the NVVM pipeline.
//!
//! Every top-level statement that contains thread-bound loops is one kernel. Its grid takes,
//! per tag, the largest extent of the loops bound to it (at least 1); a loop bound to a tag
//! runs its body when the id is below its own extent, with the variable `min + id`. Code of
//! the statement outside the thread-bound loops runs in every thread. A run of consecutive
//! top-level statements without thread bindings becomes a kernel launched on a 1 × 1 grid.
//! Function-level allocations are allocated by the host (`gpu.alloc`, filled with
//! `gpu.memset`) and passed to every kernel after the parameters.

use crate::abi::{signature, AbiParam, ArgKind};
use crate::context::{new_context, run_pipeline, verify};
use crate::error::{MlirError, Result};
use crate::translate::{Source, Target, Tr, Val};
use melior::ir::attribute::IntegerAttribute;
use melior::ir::operation::OperationMutLike;
use melior::ir::r#type::IntegerType;
use melior::ir::{Attribute, Block, BlockLike, Location, Module, Type};
use melior::Context;
use sparsec_ir::text::print_expr;
use sparsec_ir::{BufferId, DType, Expr, ForKind, Func, ParamKind, Stage, Stmt, StmtKind, Storage, ThreadTag};

/// Most blocks along `y` or `z` a launch asks for: a loop bound to either with a larger
/// extent strides over the grid.
pub const MAX_GRID_YZ: u32 = 65_535;

/// One kernel launch of the host function, for running the PTX elsewhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelLaunch {
    /// Name of the kernel (`.entry` in the PTX).
    pub name: String,
    /// Grid size (`blockIdx` x, y, z) as expressions over the scalar parameters, in Python
    /// syntax (`max(1, (m + 31) // 32)`).
    pub grid: [String; 3],
    /// Block size (`threadIdx` x, y, z), same form.
    pub block: [String; 3],
}

/// A buffer the host allocates and passes to every kernel after the parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceAlloc {
    /// Buffer name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Number of elements, as an expression over the scalar parameters.
    pub len: String,
    /// Initial value of every element.
    pub default: String,
}

/// What a GPU run of a function needs: the parameters, the host allocations and the launches
/// in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuPlan {
    /// Function name.
    pub func: String,
    /// The calling convention.
    pub params: Vec<AbiParam>,
    /// Function-level allocations, passed after the parameters.
    pub allocs: Vec<DeviceAlloc>,
    /// Kernel launches in program order.
    pub launches: Vec<KernelLaunch>,
    /// Width of the kernels' `index` type, and so of each buffer's offset, size and stride
    /// parameters ([`index_bits`]).
    pub index_bits: u32,
}

impl GpuPlan {
    /// The plan as JSON (read by `scripts/gpu_check.py`).
    pub fn to_json(&self) -> String {
        let q = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
        let params: Vec<String> = self
            .params
            .iter()
            .map(|p| {
                let (kind, d) = match p.kind {
                    ArgKind::Buffer(d) => ("buffer", d),
                    ArgKind::Scalar(d) => ("scalar", d),
                };
                format!("{{\"name\": {}, \"kind\": \"{kind}\", \"dtype\": \"{d}\"}}", q(&p.name))
            })
            .collect();
        let allocs: Vec<String> = self
            .allocs
            .iter()
            .map(|a| {
                format!(
                    "{{\"name\": {}, \"dtype\": \"{}\", \"len\": {}, \"default\": {}}}",
                    q(&a.name),
                    a.dtype,
                    q(&a.len),
                    q(&a.default)
                )
            })
            .collect();
        let dims = |d: &[String; 3]| format!("[{}]", d.iter().map(|s| q(s)).collect::<Vec<_>>().join(", "));
        let launches: Vec<String> = self
            .launches
            .iter()
            .map(|l| format!("{{\"name\": {}, \"grid\": {}, \"block\": {}}}", q(&l.name), dims(&l.grid), dims(&l.block)))
            .collect();
        format!(
            "{{\n  \"func\": {},\n  \"index_bits\": {},\n  \"params\": [{}],\n  \"allocs\": [{}],\n  \"launches\": [\n    {}\n  ]\n}}\n",
            q(&self.func),
            self.index_bits,
            params.join(", "),
            allocs.join(", "),
            launches.join(",\n    ")
        )
    }
}

/// One kernel: a range of top-level statements and the extents bound to each tag.
pub(crate) struct KernelSpec<'f> {
    pub stmts: &'f [Stmt],
    pub dims: [Vec<&'f Expr>; 6],
}

fn tag_pos(t: ThreadTag) -> usize {
    ThreadTag::ALL.iter().position(|x| *x == t).unwrap_or(0)
}

/// Checks that a launch extent can be computed on the host from the scalar parameters.
fn host_expr(func: &Func, e: &Expr) -> Result<()> {
    let mut bad = None;
    e.walk(&mut |x| match x {
        Expr::Load(..) | Expr::AtomicAdd(..) => bad = Some("reads a buffer".to_string()),
        Expr::Var(v) => {
            let is_param = func.params.iter().any(|p| p.kind == ParamKind::Scalar(*v));
            if !is_param {
                let name = func.vars.try_get(*v).map_or("?", |x| x.name.as_str());
                bad = Some(format!("uses `{name}`, which is not a scalar parameter"));
            }
        }
        _ => {}
    });
    match bad {
        None => Ok(()),
        Some(why) => Err(MlirError::unsupported(format!(
            "the extent `{}` of a thread-bound loop {why}; launch sizes must depend on scalar parameters only",
            print_expr(func, e)
        ))),
    }
}

fn collect_dims<'f>(func: &'f Func, list: &'f [Stmt], active: &mut Vec<ThreadTag>, dims: &mut [Vec<&'f Expr>; 6]) -> Result<()> {
    for s in list {
        if let StmtKind::For(f) = &s.kind {
            if let ForKind::Thread(tag) = f.kind {
                if active.contains(&tag) {
                    return Err(MlirError::unsupported(format!("`{}` loops nested in each other", tag.name())));
                }
                host_expr(func, &f.extent)?;
                dims[tag_pos(tag)].push(&f.extent);
                active.push(tag);
                let r = collect_dims(func, &f.body, active, dims);
                active.pop();
                r?;
                continue;
            }
        }
        for child in s.kind.child_lists() {
            collect_dims(func, child, active, dims)?;
        }
    }
    Ok(())
}

pub(crate) fn kernel_specs(func: &Func) -> Result<Vec<KernelSpec<'_>>> {
    let mut out = Vec::new();
    for r in sparsec_ir::kernel_ranges(func) {
        let stmts = &func.body[r];
        let mut dims: [Vec<&Expr>; 6] = Default::default();
        collect_dims(func, stmts, &mut Vec::new(), &mut dims)?;
        if !dims.iter().all(Vec::is_empty) {
            let s = &stmts[0];
            if let Some(r) = sparsec_ir::repeated_update(func, s) {
                return Err(MlirError::unsupported(format!("kernel {} is not supported: {r}", out.len())));
            }
            if let Some(r) = sparsec_ir::scope_across_units(func, s) {
                return Err(MlirError::unsupported(format!("kernel {} is not supported: {r}", out.len())));
            }
        }
        out.push(KernelSpec { stmts, dims });
    }
    Ok(out)
}

/// Buffers allocated once per call (function-level `alloc_buffer`).
pub(crate) fn function_allocs(func: &Func) -> Vec<BufferId> {
    let stmt_level = func.stmt_allocated_buffers();
    func.buffers
        .iter()
        .filter(|(h, b)| matches!(b.storage, Storage::Alloc(_)) && !stmt_level.contains(h))
        .map(|(h, _)| h)
        .collect()
}

/// The MLIR type of a parameter.
pub(crate) fn arg_type<'c>(tr: &Tr<'c, '_>, kind: ArgKind) -> Type<'c> {
    match kind {
        ArgKind::Buffer(d) => tr.memref(d),
        ArgKind::Scalar(d) => tr.ty(d),
    }
}

/// Binds the entry-block arguments: scalars to their variables, handles to their buffers.
pub(crate) fn bind_params<'c>(tr: &mut Tr<'c, '_>, func: &Func, args: &[Val<'c>]) -> Result<()> {
    for (p, param) in func.params.iter().enumerate() {
        let v = *args.get(p).ok_or_else(|| MlirError::internal("missing entry argument"))?;
        match param.kind {
            ParamKind::Scalar(var) => tr.bind_var(var, v),
            ParamKind::Handle => {
                for (h, b) in func.buffers.iter() {
                    if b.storage == Storage::Param(p) {
                        tr.bind_buf(h, v);
                    }
                }
            }
        }
    }
    Ok(())
}

pub(crate) fn check_stage(func: &Func) -> Result<()> {
    if func.stage != Stage::III {
        return Err(MlirError::NotStageIII { func: func.name.clone(), stage: func.stage });
    }
    Ok(())
}

fn kernel_name(func: &Func, k: usize) -> String {
    format!("{}_kernel{k}", func.name)
}

fn module_name(func: &Func) -> String {
    format!("{}_kernels", func.name)
}

/// Builds and verifies the GPU module of a Stage-III function.
pub(crate) fn gpu_module<'c, 'f>(ctx: &'c Context, func: &'f Func, source: Option<&'f Source>) -> Result<GpuModule<'c>> {
    check_stage(func)?;
    let sig = signature(func)?;
    let specs = kernel_specs(func)?;
    let allocs = function_allocs(func);
    let loc = Location::unknown(ctx);
    let mut module = Module::new(loc);
    module.as_operation_mut().set_attribute("gpu.container_module", Attribute::unit(ctx));

    let host = Tr::new(ctx, func, Target::Cpu { parallel: false });
    let mut inputs: Vec<Type<'c>> = sig.iter().map(|p| arg_type(&host, p.kind)).collect();
    let param_count = inputs.len();
    for &b in &allocs {
        let d = func.buffers.try_get(b).map(|x| x.dtype).unwrap_or(DType::F32);
        inputs.push(host.memref(d));
    }

    // Kernels.
    let gpu_block = Block::new(&[]);
    let mut read_only = Vec::with_capacity(specs.len());
    for (k, spec) in specs.iter().enumerate() {
        read_only.push((kernel_name(func, k), read_only_pointer_args(func, &sig, spec.stmts, &allocs)));
        let mut tr = Tr::new(ctx, func, Target::Gpu);
        tr.source = source;
        let region = tr.region(&inputs, |t, b, args| {
            let mut ids: [Option<Val<'c>>; 6] = [None; 6];
            for (i, tag) in ThreadTag::ALL.iter().enumerate() {
                if spec.dims[i].is_empty() {
                    continue;
                }
                let name = if tag.is_block() { "gpu.block_id" } else { "gpu.thread_id" };
                let dim = ["x", "y", "z"][i % 3];
                let attr = t.attr(&format!("#gpu<dim {dim}>"))?;
                ids[i] = Some(t.emit1(b, name, &[], t.index(), &[("dimension", attr)])?);
            }
            t.set_gpu_ids(ids);
            t.set_entry(b);
            t.sync = Some(crate::translate::KernelSync::new(func, spec.stmts, false));
            bind_params(t, func, &args)?;
            for (j, &buf) in allocs.iter().enumerate() {
                t.bind_buf(buf, args[param_count + j]);
            }
            t.stmts(b, spec.stmts)?;
            t.emit(b, "gpu.return", &[], &[], &[]).map(drop)
        })?;
        let mut extra: Vec<(&str, Attribute<'c>)> = vec![("gpu.kernel", Attribute::unit(ctx))];
        let i64t = IntegerType::new(ctx, 64).into();
        if tr.workgroup > 0 {
            extra.push(("workgroup_attributions", IntegerAttribute::new(i64t, tr.workgroup as i64).into()));
        }
        let op = tr.function_op("gpu.func", &kernel_name(func, k), &inputs, region, &extra)?;
        gpu_block.append_operation(op);
    }
    let gpu_region = melior::ir::Region::new();
    {
        use melior::ir::RegionLike;
        gpu_region.append_block(gpu_block);
    }
    let sym = melior::ir::attribute::StringAttribute::new(ctx, &module_name(func));
    let gpu_mod = host.build("gpu.module", &[], &[], &[("sym_name", sym.into())], vec![gpu_region])?;
    module.body().append_operation(gpu_mod);

    // Host function.
    let mut host = Tr::new(ctx, func, Target::Cpu { parallel: false });
    host.source = source;
    let host_inputs: Vec<Type<'c>> = inputs[..param_count].to_vec();
    let region = host.region(&host_inputs, |t, b, args| {
        bind_params(t, func, &args)?;
        let mut operands: Vec<Val<'c>> = args.clone();
        let mut device = Vec::new();
        for &buf in &allocs {
            let decl = func.buffers.try_get(buf).ok_or_else(|| MlirError::internal("unknown buffer"))?;
            let n = t.buffer_size(b, buf)?;
            let seg = t.attr("array<i32: 0, 1, 0>")?;
            let m = t.emit1(b, "gpu.alloc", &[n], t.memref(decl.dtype), &[("operandSegmentSizes", seg)])?;
            let v = match &decl.default {
                Some(e) => t.expr(b, e)?,
                None => t.expr(b, &zero_of(decl.dtype))?,
            };
            t.emit(b, "gpu.memset", &[m, v], &[], &[])?;
            operands.push(m);
            device.push(m);
        }
        for (k, spec) in specs.iter().enumerate() {
            let sizes = launch_sizes(t, b, spec)?;
            let n = operands.len() as i32;
            let seg = t.attr(&format!("array<i32: 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, {n}, 0>"))?;
            let kernel = t.attr(&format!("@{}::@{}", module_name(func), kernel_name(func, k)))?;
            let mut ops = sizes;
            ops.extend_from_slice(&operands);
            t.emit(b, "gpu.launch_func", &ops, &[], &[("kernel", kernel), ("operandSegmentSizes", seg)])?;
        }
        for m in device {
            t.emit(b, "gpu.dealloc", &[m], &[], &[])?;
        }
        t.emit(b, "func.return", &[], &[], &[]).map(drop)
    })?;
    let f = host.function_op("func.func", &func.name, &host_inputs, region, &[])?;
    module.body().append_operation(f);
    verify(ctx, &module)?;
    Ok(GpuModule { module, read_only })
}

/// A GPU module and, per kernel (by name), the LLVM arguments of the kernel that point at
/// memory it never writes ([`read_only_pointer_args`]).
pub(crate) struct GpuModule<'c> {
    /// The module: kernels in a `gpu.module` and the host function.
    pub module: Module<'c>,
    /// Kernel name and its read-only pointer arguments, numbered as after `convert-gpu-to-nvvm`.
    pub read_only: Vec<(String, Vec<usize>)>,
}

/// The aligned-pointer arguments of a kernel (numbered after `convert-gpu-to-nvvm` expands
/// each `memref<?xT>` input into allocated pointer, aligned pointer, offset, size and stride;
/// loads go through the aligned one) whose memory the kernel's statements `stmts` never write: neither a store nor an `atomic_add`
/// reaches any buffer over that parameter or function-level allocation. Distinct parameters
/// never share memory (each binds its own array, as in the interpreter), so loads through
/// them see one value for the whole kernel and may take the read-only path.
fn read_only_pointer_args(func: &Func, sig: &[AbiParam], stmts: &[Stmt], allocs: &[BufferId]) -> Vec<usize> {
    let mut written = vec![false; sig.len() + allocs.len()];
    for b in sparsec_ir::written_buffers(stmts) {
        match func.buffers.try_get(b).map(|x| x.storage) {
            Some(Storage::Param(p)) if p < sig.len() => written[p] = true,
            _ => {
                if let Some(j) = allocs.iter().position(|a| *a == b) {
                    written[sig.len() + j] = true;
                }
            }
        }
    }
    let buffer = |i: usize| i >= sig.len() || matches!(sig[i].kind, ArgKind::Buffer(_));
    let mut out = Vec::new();
    let mut arg = 0;
    for (i, w) in written.iter().enumerate() {
        if buffer(i) {
            if !w {
                out.push(arg + 1);
            }
            arg += 5;
        } else {
            arg += 1;
        }
    }
    out
}

/// Declares `llvm.noalias` and `llvm.readonly` the read-only pointer arguments
/// ([`GpuModule::read_only`]) of each kernel of the lowered `gpu.module`: NVPTX then loads
/// through them on the read-only, non-coherent path (`ld.global.nc`), whatever the loads
/// became after LLVM's optimisations (which drop `!invariant.load` where they split vector
/// loads). A kernel that already has argument attributes is left alone.
fn mark_read_only_args(ctx: &Context, module: &Module, read_only: &[(String, Vec<usize>)]) -> Result<()> {
    use melior::ir::attribute::StringAttribute;
    use melior::ir::operation::OperationLike;
    use melior::ir::RegionLike;
    let mut top = module.body().first_operation();
    while let Some(gpu_mod) = top {
        top = gpu_mod.next_in_block();
        if gpu_mod.name().as_string_ref().as_str() != Ok("gpu.module") {
            continue;
        }
        let Some(body) = gpu_mod.region(0).ok().and_then(|r| r.first_block()) else { continue };
        let mut next = body.first_operation_mut();
        while let Some(mut kernel) = next {
            let sym = kernel.attribute("sym_name").ok().and_then(|a| StringAttribute::try_from(a).ok()).map(|a| a.value().to_owned());
            let entry_args = kernel.region(0).ok().and_then(|r| r.first_block()).map(|b| b.argument_count());
            let found = read_only.iter().find(|(k, _)| Some(k) == sym.as_ref());
            if let (Some((_, args)), Some(n), false) = (found, entry_args, kernel.has_attribute("arg_attrs")) {
                let dicts: Vec<&str> = (0..n).map(|i| if args.contains(&i) { "{llvm.noalias, llvm.readonly}" } else { "{}" }).collect();
                let text = format!("[{}]", dicts.join(", "));
                let attr = Attribute::parse(ctx, &text).ok_or_else(|| MlirError::internal(format!("argument attributes `{text}` do not parse")))?;
                kernel.set_attribute("arg_attrs", attr);
            }
            next = kernel.next_in_block_mut();
        }
    }
    Ok(())
}

/// The launch size of each tag (`ThreadTag::ALL` order), computed on the host: the largest
/// extent bound to it, at least 1.
pub(crate) fn launch_sizes<'c>(t: &mut Tr<'c, '_>, b: &Block<'c>, spec: &KernelSpec<'_>) -> Result<Vec<Val<'c>>> {
    let mut sizes = Vec::with_capacity(6);
    for (k, dims) in spec.dims.iter().enumerate() {
        let mut acc = t.cint(b, 1, DType::I64)?;
        for e in dims {
            let v = t.expr(b, e)?;
            let from = t.func.expr_dtype(e);
            let v = t.cast(b, v, from, DType::I64)?;
            acc = t.emit1(b, "arith.maxsi", &[acc, v], t.ty(DType::I64), &[])?;
        }
        if (k == 1 || k == 2) && !dims.is_empty() {
            // As the launch plan: loops bound to y or z stride past the cap.
            let cap = t.cint(b, MAX_GRID_YZ as i64, DType::I64)?;
            acc = t.emit1(b, "arith.minsi", &[acc, cap], t.ty(DType::I64), &[])?;
        }
        sizes.push(t.to_index(b, acc)?);
    }
    Ok(sizes)
}

fn zero_of(d: DType) -> Expr {
    match d {
        d if d.is_int() => Expr::Int(0, d),
        DType::Bool => Expr::Bool(false),
        d => Expr::Float(0.0, d),
    }
}

/// The launch plan of the GPU module of `func` (the same kernels [`emit_ptx`] compiles).
pub fn gpu_plan(func: &Func) -> Result<GpuPlan> {
    check_stage(func)?;
    let params = signature(func)?;
    let specs = kernel_specs(func)?;
    let mut allocs = Vec::new();
    for b in function_allocs(func) {
        let decl = func.buffers.try_get(b).ok_or_else(|| MlirError::internal("unknown buffer"))?;
        let sparsec_ir::Layout::Dense(shape) = &decl.layout else {
            return Err(MlirError::unsupported(format!("sparse buffer `{}` at Stage III", decl.name)));
        };
        let mut len: Vec<String> = shape.iter().map(|e| format!("({})", print_expr(func, e))).collect();
        if len.is_empty() {
            len.push("1".into());
        }
        let mut len = len.join(" * ");
        if let Some(e) = &decl.extra_storage {
            len = format!("{len} + ({})", print_expr(func, e));
        }
        let default = decl.default.as_ref().map_or_else(|| "0".to_string(), |e| print_expr(func, e));
        allocs.push(DeviceAlloc { name: decl.name.clone(), dtype: decl.dtype, len, default });
    }
    let dim = |dims: &Vec<&Expr>| {
        let mut parts = vec!["1".to_string()];
        parts.extend(dims.iter().map(|e| print_expr(func, e)));
        if parts.len() == 1 {
            "1".to_string()
        } else {
            format!("max({})", parts.join(", "))
        }
    };
    // Loops bound to y or z stride past the grid limit (see `translate`).
    let capped = |dims: &Vec<&Expr>| match dim(dims) {
        one if one == "1" => one,
        d => format!("min({d}, {MAX_GRID_YZ})"),
    };
    let launches = specs
        .iter()
        .enumerate()
        .map(|(k, s)| KernelLaunch {
            name: kernel_name(func, k),
            grid: [dim(&s.dims[0]), capped(&s.dims[1]), capped(&s.dims[2])],
            block: [dim(&s.dims[3]), dim(&s.dims[4]), dim(&s.dims[5])],
        })
        .collect();
    Ok(GpuPlan { func: func.name.clone(), params, allocs, launches, index_bits: index_bits(func) })
}

/// The GPU module of a Stage-III function as MLIR text: a `gpu.module` with one `gpu.func`
/// per kernel and a host `func.func` that launches them (see the module docs for the
/// mapping). The module is verified.
pub fn emit_mlir(func: &Func) -> Result<String> {
    let ctx = new_context();
    let module = gpu_module(&ctx, func, None)?.module;
    Ok(module.as_operation().to_string())
}

/// [`emit_mlir`] with locations: each operation made for a statement of `func` carries that
/// statement's place in `source` (`loc("file.sptir":line:col)`), printed in MLIR's pretty
/// debug form (`#loc` aliases at the end).
pub fn emit_mlir_located(func: &Func, source: &Source) -> Result<String> {
    let ctx = new_context();
    let module = gpu_module(&ctx, func, Some(source))?.module;
    let flags = melior::ir::operation::OperationPrintingFlags::new().enable_debug_info(true, false);
    use melior::ir::operation::OperationLike as _;
    module.as_operation().to_string_with_flags(flags).map_err(MlirError::internal)
}

/// The width of the kernels' `index` type for `func`: 32 when every integer of the function
/// (variables, buffer elements) is an `i32`, so every index it computes is an `i32` already
/// and wider arithmetic buys nothing; 64 otherwise. Addresses stay 64-bit (`mul.wide`).
pub fn index_bits(func: &Func) -> u32 {
    let wide = func.vars.iter().any(|(_, v)| v.dtype == DType::I64) || func.buffers.iter().any(|(_, b)| b.dtype == DType::I64);
    if wide {
        64
    } else {
        32
    }
}

/// The NVVM pipeline run by [`emit_ptx`] for `chip` (linking `sparsec_nvidia::libdevice`
/// when found), with an `index` type of `index_bits` bits on the device.
pub fn ptx_pipeline(chip: &str, index_bits: u32) -> String {
    let [to_llvm, to_ptx] = ptx_pipelines(chip, index_bits);
    format!("{}, {}", to_llvm.trim_end_matches(')'), to_ptx.trim_start_matches("builtin.module("))
}

/// [`ptx_pipeline`] in its two parts: to the LLVM dialect, and from there to PTX. Between
/// them [`emit_ptx`] marks the pointers to read-only memory ([`mark_read_only_args`]).
fn ptx_pipelines(chip: &str, index_bits: u32) -> [String; 2] {
    let link = sparsec_nvidia::libdevice().map_or_else(String::new, |l| format!(" l={}", l.display()));
    [
        format!(
            "builtin.module(nvvm-attach-target{{chip={chip} O=3{link}}}, gpu.module(convert-scf-to-cf, \
             convert-gpu-to-nvvm{{index-bitwidth={index_bits}}}, canonicalize, cse, reconcile-unrealized-casts))"
        ),
        "builtin.module(gpu-module-to-binary{format=isa})".to_string(),
    ]
}

/// PTX of the kernels of a Stage-III function for an NVIDIA chip (`sm_80`, `sm_90`, ...),
/// through the NVVM pipeline run in-process; no GPU is needed. Kernel parameters follow
/// [`crate::signature`], each `memref<?xT>` expanded to five PTX parameters (allocated
/// pointer, aligned pointer, offset, size, stride; the last three of [`index_bits`] bits),
/// then the function-level allocations.
pub fn emit_ptx(func: &Func, chip: &str) -> Result<String> {
    // `sm_<version>` with an optional `a`/`f` feature suffix (sm_90a); NVVM knows sm_20 and up.
    let version = chip.strip_prefix("sm_").map(|n| n.strip_suffix(['a', 'f']).unwrap_or(n));
    let valid = version.and_then(|v| v.parse::<u32>().ok()).is_some_and(|v| (20..=200).contains(&v));
    if !valid {
        return Err(MlirError::unsupported(format!("chip `{chip}` (expected sm_80, sm_90, ...)")));
    }
    let ctx = new_context();
    let GpuModule { mut module, read_only } = gpu_module(&ctx, func, None)?;
    let [to_llvm, to_ptx] = ptx_pipelines(chip, index_bits(func));
    run_pipeline(&ctx, &mut module, &to_llvm)?;
    mark_read_only_args(&ctx, &module, &read_only)?;
    run_pipeline(&ctx, &mut module, &to_ptx)?;
    let text = module.as_operation().to_string();
    let ptx = text
        .lines()
        .filter(|l| l.trim_start().starts_with("gpu.binary"))
        .filter_map(longest_string_literal)
        .collect::<Vec<_>>();
    let ptx = match ptx.len() {
        1 => ptx.into_iter().next().unwrap_or_default(),
        n => return Err(MlirError::internal(format!("expected one gpu.binary with PTX, found {n}"))),
    };
    // Without libdevice, a math call stays an unresolved `.extern` that no driver can load.
    if let Some(name) = ptx.lines().find(|l| l.starts_with(".extern .func")).and_then(|l| l.split_whitespace().last()) {
        return Err(MlirError::unsupported(format!(
            "the PTX calls `{name}` from CUDA's libdevice, which was not found: install it with \
             `pip install nvidia-cuda-nvcc-cu12` (scripts/install-deps does), or set CUDA_HOME"
        )));
    }
    Ok(ptx)
}

/// The longest string literal of a printed MLIR line, unescaped (`\\`, `\XX` hex).
fn longest_string_literal(line: &str) -> Option<String> {
    let bytes = line.as_bytes();
    let mut best: Option<Vec<u8>> = None;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'"' {
            i += 1;
            continue;
        }
        let mut s = Vec::new();
        i += 1;
        while i < bytes.len() && bytes[i] != b'"' {
            if bytes[i] == b'\\' && i + 1 < bytes.len() {
                if bytes[i + 1] == b'\\' {
                    s.push(b'\\');
                    i += 2;
                    continue;
                }
                let hex = line.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok());
                if let Some(h) = hex {
                    s.push(h);
                    i += 3;
                    continue;
                }
            }
            s.push(bytes[i]);
            i += 1;
        }
        i += 1;
        if best.as_ref().is_none_or(|b| s.len() > b.len()) {
            best = Some(s);
        }
    }
    best.map(|b| String::from_utf8_lossy(&b).into_owned())
}
