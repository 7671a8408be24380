//! Sparse outputs: the two phases of a function with assembled axes (`pattern = union(..)`,
//! `product(..)`).
//!
//! An assembled axis's row pointer, coordinates and `nnz` are outputs of the run. Generated
//! code cannot size an array in the middle of a kernel, so a run takes two phases:
//!
//! * the **symbolic phase**, [`symbolic_phases`]: for unions and intersections
//!   [`count_function`], an ordinary Stage-I function that counts each row of the pattern
//!   into `indptr[r + 1]` by co-iterating the members; for a product two Stage-III programs
//!   that count its rows and then write and sort its coordinates. The run takes the prefix
//!   sums between them, which give `nnz` and the sizes of the coordinates and values;
//! * the **numeric phase**, the function itself: for a union or intersection,
//!   [`lower_sparse_iter`](crate::lower_sparse_iter) first adds `fill_iterations` (each
//!   coordinate of the pattern written at its position), and every access through the
//!   pattern's co-iteration takes the count of coordinates visited before it in the row as
//!   its position; a product's coordinates are looked up.
//!
//! The interpreter computes the pattern itself (`sparsec_ir::args::assemble`), which is
//! what both phases are tested against.

use crate::build::{add, int, stmt, store};
use crate::PassError;
use sparsec_ir::{
    AttrValue, Axis, AxisId, AxisKind, Buffer, Expr, Func, Layout, ParamKind, SpIter, SpIterAxis, Span, Stage, Storage,
};
use std::collections::HashMap;

/// The assembled axes of `f`.
pub fn assembled_axes(f: &Func) -> Vec<AxisId> {
    f.axes.iter().filter(|(_, a)| a.pattern.is_some()).map(|(h, _)| h).collect()
}

/// The co-iteration that visits assembled axis `a`'s pattern (a union or intersection).
fn merge_of(f: &Func, a: AxisId) -> Option<sparsec_ir::MergeOp> {
    f.axes[a].pattern.as_ref().and_then(|pt| pt.op.merge())
}

/// The counts of the union and intersection axes of Stage-I `f`: a function `<name>_count`
/// taking the parameters its axes need (those axes' row pointers among them, not their
/// coordinates or `nnz`) that stores the length of row `r` of each at `indptr[r + 1]`
/// (`indptr[0]` is left alone). `None` when `f` assembles no union or intersection.
pub fn count_function(f: &Func) -> Result<Option<Func>, PassError> {
    crate::verified_input("count_function", f)?;
    if f.stage != Stage::I {
        return Err(PassError::WrongStage { pass: "count_function", expected: Stage::I, found: f.stage });
    }
    let assembled: Vec<AxisId> = assembled_axes(f).into_iter().filter(|&a| merge_of(f, a).is_some()).collect();
    if assembled.is_empty() {
        return Ok(None);
    }
    let mut g = Func::new(format!("{}_count", f.name));
    g.vars = f.vars.clone();
    g.span = f.span;
    // Every axis but the assembled ones (the verifier gives those no children).
    let mut amap: HashMap<AxisId, AxisId> = HashMap::new();
    for (h, a) in f.axes.iter() {
        if a.pattern.is_none() {
            let parent = a.parent.map(|p| amap[&p]);
            amap.insert(h, g.axes.append(Axis { parent, ..a.clone() }));
        }
    }
    let mut taken = sparsec_ir::names::function_names(f);
    let mut body = Vec::new();
    for &h in &assembled {
        let a = &f.axes[h];
        let (Some(pt), Some(op), Some(parent), Some(indptr)) = (&a.pattern, merge_of(f, h), a.parent, a.indptr) else { continue };
        let len = f.axes[parent].length.clone();
        let rows_len = add(&g, len.clone(), int(1, f.expr_dtype(&len)));
        let rows = g.axes.append(Axis {
            name: sparsec_ir::names::fresh_in(&mut taken, &format!("{}_rows", a.name)),
            kind: AxisKind::DenseFixed,
            parent: None,
            length: rows_len,
            nnz: None,
            indptr: None,
            indices: None,
            idtype: a.idtype,
            sorted: true,
            unique: true,
            pattern: None,
            span: a.span,
        });
        let count = g.buffers.append(Buffer {
            name: sparsec_ir::names::fresh_in(&mut taken, &format!("{}_count", a.name)),
            dtype: a.idtype,
            layout: Layout::Sparse(vec![rows]),
            storage: Storage::Param(indptr),
            extra_storage: None,
            default: None,
            modes: None,
            span: a.span,
        });
        let (r, j) = (
            g.add_var(sparsec_ir::names::fresh_in(&mut taken, "r"), a.idtype),
            g.add_var(sparsec_ir::names::fresh_in(&mut taken, "j"), a.idtype),
        );
        let at = vec![add(&g, Expr::Var(r), int(1, a.idtype))];
        let members = pt.members.iter().map(|m| amap[m]).collect();
        body.push(stmt(sparsec_ir::StmtKind::SpIter(SpIter {
            name: sparsec_ir::names::fresh_in(&mut taken, &format!("count_{}", a.name)),
            axes: vec![SpIterAxis::Axis(amap[&parent]), SpIterAxis::Merge { op, axes: members }],
            kinds: "SR".into(),
            vars: vec![r, j],
            init: Some(vec![store(count, at.clone(), int(0, a.idtype))]),
            body: vec![store(count, at.clone(), add(&g, Expr::Load(count, at), int(1, a.idtype)))],
            attrs: Default::default(),
        })));
    }
    g.body = body;
    // The parameters the axes and buffers use, renumbered in order.
    let mut used = vec![false; f.params.len()];
    for (_, a) in g.axes.iter() {
        for p in [a.indptr, a.indices].into_iter().flatten() {
            used[p] = true;
        }
        for e in std::iter::once(&a.length).chain(&a.nnz) {
            e.walk(&mut |x| {
                if let Expr::Var(v) = x {
                    if let Some(p) = f.params.iter().position(|p| p.kind == ParamKind::Scalar(*v)) {
                        used[p] = true;
                    }
                }
            });
        }
    }
    for (_, b) in g.buffers.iter() {
        if let Storage::Param(p) = b.storage {
            used[p] = true;
        }
    }
    let mut pmap = HashMap::new();
    for (p, param) in f.params.iter().enumerate() {
        if used[p] {
            pmap.insert(p, g.params.len());
            g.params.push(param.clone());
        }
    }
    let remap = |p: &mut Option<usize>| *p = p.map(|x| pmap[&x]);
    for (_, a) in g.axes.iter_mut() {
        remap(&mut a.indptr);
        remap(&mut a.indices);
    }
    for (_, b) in g.buffers.iter_mut() {
        if let Storage::Param(p) = &mut b.storage {
            *p = pmap[p];
        }
    }
    g.attrs.insert("assembles".into(), AttrValue::Str(f.name.clone()));
    Ok(Some(g))
}

/// `f` with, first in its body, one sparse iteration per assembled axis that writes each
/// coordinate of its pattern at its position (`<axis>_coords[r, j] = j`, over the axis's
/// coordinate array), so the numeric phase fills the coordinates whatever the rest of the
/// program writes.
pub(crate) fn fill_iterations(f: &Func) -> Func {
    let assembled: Vec<AxisId> = assembled_axes(f).into_iter().filter(|&a| merge_of(f, a).is_some()).collect();
    if assembled.is_empty() {
        return f.clone();
    }
    let mut g = f.clone();
    let mut taken = sparsec_ir::names::function_names(f);
    sparsec_ir::walk_stmts(&f.body, &mut |s| {
        if let sparsec_ir::StmtKind::SpIter(it) = &s.kind {
            taken.insert(it.name.clone());
        }
    });
    taken.extend(f.vars.iter().map(|(_, v)| v.name.clone()));
    let mut fills = Vec::new();
    for &h in &assembled {
        let a = f.axes[h].clone();
        let (Some(pt), Some(op), Some(parent), Some(indices)) = (&a.pattern, merge_of(f, h), a.parent, a.indices) else { continue };
        let coords = g.buffers.append(Buffer {
            name: sparsec_ir::names::fresh_in(&mut taken, &format!("{}_coords", a.name)),
            dtype: a.idtype,
            layout: Layout::Sparse(vec![parent, h]),
            storage: Storage::Param(indices),
            extra_storage: None,
            default: None,
            modes: None,
            span: Span::NONE,
        });
        let (r, j) = (
            g.add_var(sparsec_ir::names::fresh_in(&mut taken, "r"), a.idtype),
            g.add_var(sparsec_ir::names::fresh_in(&mut taken, "j"), a.idtype),
        );
        fills.push(stmt(sparsec_ir::StmtKind::SpIter(SpIter {
            name: sparsec_ir::names::fresh_in(&mut taken, &format!("{}_fill", a.name)),
            axes: vec![SpIterAxis::Axis(parent), SpIterAxis::Merge { op, axes: pt.members.clone() }],
            kinds: "SS".into(),
            vars: vec![r, j],
            init: None,
            body: vec![store(coords, vec![Expr::Var(r), Expr::Var(j)], Expr::Var(j))],
            attrs: Default::default(),
        })));
    }
    fills.append(&mut g.body);
    g.body = fills;
    g
}

/// One program of a symbolic phase.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    /// The program: Stage I (a union or intersection's counts), or Stage III as written
    /// (a product's counts and coordinates, which need a workspace).
    pub func: Func,
    /// Whether it counts rows into row pointers (run before the prefix sums); otherwise it
    /// writes coordinates (run after them).
    pub counts: bool,
}

/// How a product's symbolic programs spread the rows of its pattern over units of work (the
/// pass decides; a backend only says whether it is a GPU).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Units {
    /// Up to 32 chunks of rows under a `parallel` loop (the threads of a CPU; on a GPU one
    /// unit runs them all).
    Parallel,
    /// Many small chunks bound to `blockIdx.x × threadIdx.x`, up to `threads` a block.
    Gpu {
        /// Units per block at most.
        threads: i64,
    },
}

/// Every program of the symbolic phase of Stage-I `f`, in order: the counts of its union
/// and intersection axes ([`count_function`]), then for each product axis a program that
/// counts its rows and one that writes and sorts its coordinates (`product_phases`), their
/// rows spread over `units`.
pub fn symbolic_phases(f: &Func, units: Units) -> Result<Vec<Phase>, PassError> {
    let mut out: Vec<Phase> = count_function(f)?.into_iter().map(|func| Phase { func, counts: true }).collect();
    for a in assembled_axes(f) {
        if f.axes[a].pattern.as_ref().is_some_and(|pt| pt.op == sparsec_ir::PatternOp::Product) {
            out.extend(product_phases(f, a, units)?);
        }
    }
    Ok(out)
}

/// The two Stage-III programs of product axis `a` (`pattern = product(JA, KB)`), Gustavson's
/// symbolic SpGEMM. Rows run in chunks balanced by A's nonzeros, each chunk in a unit of
/// its own (`units`), one row after another within a chunk; each chunk finds its rows by
/// two binary searches over A's row pointer and has its own row of the mark workspace (a
/// mark per coordinate holding the last row that saw it, so nothing is cleared between
/// rows). The first counts the distinct coordinates of each row into `indptr[r + 1]`; the
/// second collects them and sorts each row: each of B's rows (sorted) adds a sorted run, and
/// bottom-up merges of the runs between the chunk's two scratch rows of `p` sort the row
/// (`O(k log r)` for `k` columns from `r` rows), which is then copied out from `indptr[r]`
/// on.
fn product_phases(f: &Func, a: AxisId, units: Units) -> Result<Vec<Phase>, PassError> {
    // CPU: most chunks of rows, and least nonzeros of A per chunk (about 2 µs of a row's
    // work); the workspaces stay within this many times the input arrays.
    const CHUNKS: i64 = 32;
    const GRAIN: i64 = 1024;
    const WORKSPACES: i64 = 4;
    // GPU: least nonzeros of A per unit; the workspaces stay within this many times the
    // inputs, or this many elements where that is more (the units a GPU needs busy).
    const GPU_GRAIN: i64 = 16;
    const GPU_WORKSPACES: i64 = 16;
    const GPU_WORKSPACE_FLOOR: i64 = 1 << 24;
    let ax = &f.axes[a];
    let bad = |what: &str| PassError::Internal(format!("product axis `{}`: {what}", ax.name));
    let pt = ax.pattern.as_ref().ok_or_else(|| bad("no pattern"))?;
    let (ja, kb) = (&f.axes[pt.members[0]], &f.axes[pt.members[1]]);
    let rows_axis = &f.axes[ax.parent.ok_or_else(|| bad("no parent"))?];
    let param = |p: Option<usize>| p.map(|p| f.params[p].name.clone()).ok_or_else(|| bad("an array is missing"));
    let (ap, ai, bp, bi, cp, ci) = (param(ja.indptr)?, param(ja.indices)?, param(kb.indptr)?, param(kb.indices)?, param(ax.indptr)?, param(ax.indices)?);
    let e = |x: &Expr| sparsec_ir::text::print_expr(f, x);
    let t = ax.idtype;
    // Literals and casts of the index type.
    let lit = |x: i64| if t == sparsec_ir::DType::I64 { format!("{x}i64") } else { x.to_string() };
    let m = format!("cast({t}, {})", e(&rows_axis.length));
    let n = format!("cast({t}, {})", e(&ja.length));
    let p = format!("cast({t}, {})", e(&ax.length));
    let nnz = |x: &sparsec_ir::Axis| x.nnz.as_ref().map(|v| format!("cast({t}, {})", e(v))).ok_or_else(|| bad("no nnz"));
    let (nnz_a, nnz_b, nnz_c) = (nnz(ja)?, nnz(kb)?, nnz(ax)?);
    // Parameters: the arrays, and every scalar parameter but the assembled axes' nnz (which the
    // count comes before) — the fill takes this axis's nnz too.
    let computed = sparsec_ir::args::assembled_nnz(f);
    let own_nnz = match &ax.nnz {
        Some(Expr::Var(v)) => Some(*v),
        _ => None,
    };
    let scalars = |fill: bool| -> Vec<String> {
        f.params
            .iter()
            .filter_map(|q| match q.kind {
                ParamKind::Scalar(v) if !computed.contains(&v) || (fill && Some(v) == own_nnz) => {
                    Some(format!("{}: {}", q.name, f.vars[v].dtype))
                }
                _ => None,
            })
            .collect()
    };
    // The walk over row `i`'s products: `k` bound, `body` run for each (indented 8).
    // `pre` runs before each of B's rows (indented 6).
    let walk = |pre: &str, body: &str| {
        format!(
            "    for q in serial(sym_ap[i + {one}] - sym_ap[i]) {{\n      let j = sym_ai[sym_ap[i] + q]\n{pre}      for w in serial(sym_bp[j + {one}] - sym_bp[j]) {{\n        let k = sym_bi[sym_bp[j] + w]\n{body}      }}\n    }}\n",
            one = lit(1)
        )
    };
    // Chunks balanced by A's nonzeros, as many as the units allow and no more than keep
    // their workspaces (the count's mark of `p`; the fill's mark and two scratch rows of `p`
    // and runs of `n + 1`) within a multiple of the inputs and their sizes within the index
    // type; from the scalar parameters alone, which size the workspaces and the launch. The
    // chunks, and on a GPU the units of a block and the blocks.
    let i64 = |x: &str| format!("cast(i64, {x})");
    let limit = if t == sparsec_ir::DType::I64 { "9223372036854775807i64" } else { "2147483647i64" };
    let inputs = format!("({} + {})", i64(&nnz_a), i64(&nnz_b));
    let layout = |fill: bool| {
        let per_chunk = if fill {
            format!("max(3i64 * {} + {} + 1i64, 1i64)", i64(&p), i64(&n))
        } else {
            format!("max({}, 1i64)", i64(&p))
        };
        let room = |budget: String| format!("min({budget}, {limit}) // {per_chunk}");
        match units {
            Units::Parallel => (
                format!("cast({t}, max(1i64, min(min({CHUNKS}i64, {} // {GRAIN}i64), {})))", i64(&nnz_a), room(format!("{WORKSPACES}i64 * {inputs}"))),
                None,
            ),
            Units::Gpu { threads } => {
                let threads = threads.max(2);
                // Two units at least: lavapipe cut the loops of this kernel short when it was
                // launched on a single unit (a 1×1 matrix).
                let wanted = format!("max(2i64, min(({} + {}i64) // {GPU_GRAIN}i64, {}))", i64(&nnz_a), GPU_GRAIN - 1, room(format!("max({GPU_WORKSPACES}i64 * {inputs}, {GPU_WORKSPACE_FLOOR}i64)")));
                let block = format!("min({threads}i64, {wanted})");
                let blocks = format!("({wanted}) // ({block})");
                (format!("cast({t}, ({blocks}) * ({block}))"), Some((format!("cast({t}, {block})"), format!("cast({t}, {blocks})"))))
            }
        }
    };
    // Chunk `vp`'s row of workspace `buf` at `x`.
    let ws = |buf: &str, x: &str| format!("{buf}[vp, {x}]");
    // The first row whose nonzeros of A before it reach `target` (an i64), as `name`.
    let search = |name: &str, target: &str| {
        format!(
            "    buffer {name}_low = alloc_buffer([1], {t}, local)\n    buffer {name}_high = alloc_buffer([1], {t}, local)\n    {name}_low[0] = {zero}\n    {name}_high[0] = {m}\n    while {name}_low[0] < {name}_high[0] {{\n      let {name}_mid = {name}_low[0] + ({name}_high[0] - {name}_low[0]) // {two}\n      if {} - {} < {target} {{\n        {name}_low[0] = {name}_mid + {one}\n      }} else {{\n        {name}_high[0] = {name}_mid\n      }}\n    }}\n    let {name} = {name}_low[0]\n",
            i64(&format!("sym_ap[{name}_mid]")),
            i64("sym_ap[0]"),
            zero = lit(0),
            one = lit(1),
            two = lit(2),
        )
    };
    let head = |fill: bool| {
        let mut params = vec![ap.clone(), ai.clone(), bp.clone(), bi.clone(), cp.clone()];
        if fill {
            params.push(ci.clone());
        }
        let params: Vec<String> = params.iter().map(|x| format!("{x}: handle")).chain(scalars(fill)).collect();
        let mut s = format!(
            "func {}_{}_{}({}) stage III {{\n",
            f.name,
            if fill { "fill" } else { "count" },
            ax.name,
            params.join(", ")
        );
        for (b, h, len) in [("sym_ap", &ap, format!("{m} + {}", lit(1))), ("sym_ai", &ai, nnz_a.clone()), ("sym_bp", &bp, format!("{n} + {}", lit(1))), ("sym_bi", &bi, nnz_b.clone()), ("sym_cp", &cp, format!("{m} + {}", lit(1)))] {
            s.push_str(&format!("  buffer {b} = match_buffer({h}, [{len}], {t})\n"));
        }
        if fill {
            s.push_str(&format!("  buffer sym_ci = match_buffer({ci}, [{nnz_c}], {t})\n"));
        }
        let (chunks, launch) = layout(fill);
        s.push_str(&format!("  buffer sym_mark = alloc_buffer([{chunks}, {p}], {t}, global)\n"));
        if fill {
            for b in ["sym_t1", "sym_t2"] {
                s.push_str(&format!("  buffer {b} = alloc_buffer([{chunks}, {p}], {t}, global)\n"));
            }
            s.push_str(&format!("  buffer sym_run = alloc_buffer([{chunks}, {n} + {}], {t}, global)\n", lit(1)));
        }
        // The row total and the chunks, before the chunks' loop on a CPU; on a GPU in each
        // unit (a kernel takes no value computed outside it).
        let lets = format!("  let sym_total = {} - {}\n  let sym_chunks = {chunks}\n", i64(&format!("sym_ap[{m}]")), i64("sym_ap[0]"));
        // Each chunk has its own workspaces; its rows run in order.
        match &launch {
            None => {
                s.push_str(&lets);
                s.push_str("  for sym_p in parallel(sym_chunks) {\n  block sym_chunk(vp: spatial(sym_chunks) = sym_p) {\n");
            }
            Some((block, blocks)) => {
                s.push_str(&format!(
                    "  for sym_b in blockIdx.x({blocks}) {{\n  for sym_t in threadIdx.x({block}) {{\n  block sym_chunk(vp: spatial({chunks}) = sym_b * {block} + sym_t) {{\n"
                ));
                s.push_str(&lets);
            }
        }
        s.push_str(&search("sym_lo", "cast(i64, vp) * sym_total // cast(i64, sym_chunks)"));
        s.push_str(&search("sym_end", &format!("cast(i64, vp + {}) * sym_total // cast(i64, sym_chunks)", lit(1))));
        s.push_str(&format!(
            "    let sym_hi = select(vp == sym_chunks - {one}, {m}, sym_end)\n  for sym_r in serial(sym_hi - sym_lo) {{\n    let i = sym_lo + sym_r\n    buffer sym_len = alloc_buffer([1], {t}, local)\n    sym_len[0] = {zero}\n",
            one = lit(1),
            zero = lit(0)
        ));
        s
    };
    // Closes a row, its chunk's block and loops, and the function.
    let close = if units != Units::Parallel { "  }\n  }\n  }\n  }\n}\n" } else { "  }\n  }\n  }\n}\n" };
    let mark = ws("sym_mark", "k");
    let seen = format!("        if {mark} != i + {one} {{\n          {mark} = i + {one}\n", one = lit(1));
    let count = format!(
        "{}{}    sym_cp[i + {one}] = sym_len[0]\n{close}",
        head(false),
        walk("", &format!("{seen}          sym_len[0] = sym_len[0] + {one}\n        }}\n", one = lit(1))),
        one = lit(1)
    );
    // Merges runs `lo..mid` and `mid..hi` of `src` into `dst`, without branches (selects: the
    // side taken is data, so a branch would mispredict half the time); reads are clamped into
    // `lo..hi`.
    let merge = |src: &dyn Fn(&str) -> String, dst: &dyn Fn(&str) -> String, tag: &str| {
        format!(
            "          buffer sym_a{tag} = alloc_buffer([1], {t}, local)\n          buffer sym_b{tag} = alloc_buffer([1], {t}, local)\n          sym_a{tag}[0] = lo\n          sym_b{tag}[0] = mid\n          for o{tag} in serial(hi - lo) {{\n            let va{tag} = {}\n            let vb{tag} = {}\n            let ta{tag} = select(sym_a{tag}[0] < mid, select(sym_b{tag}[0] < hi, va{tag} < vb{tag}, true), false)\n            {} = select(ta{tag}, va{tag}, vb{tag})\n            sym_a{tag}[0] = sym_a{tag}[0] + select(ta{tag}, {one}, {zero})\n            sym_b{tag}[0] = sym_b{tag}[0] + select(ta{tag}, {zero}, {one})\n          }}\n",
            src(&format!("min(sym_a{tag}[0], hi - {})", lit(1))),
            src(&format!("min(sym_b{tag}[0], hi - {})", lit(1))),
            dst(&format!("lo + o{tag}")),
            one = lit(1),
            zero = lit(0),
        )
    };
    let row = |x: &str| ws("sym_t1", x);
    let tmp = |x: &str| ws("sym_t2", x);
    let run = |x: &str| ws("sym_run", x);
    // B's rows are sorted (the verifier requires it of a product's members), so each adds a
    // sorted run (its columns not seen before, in order) starting at `sym_run[q]`; bottom-up
    // merges of the runs, `O(k log r)` for `k` columns from `r` rows, alternate between the
    // chunk's scratch rows `sym_t1` and `sym_t2` (an empty run merges like any other).
    let merges = format!(
        "    let nr = sym_ap[i + {one}] - sym_ap[i]\n    buffer sym_w = alloc_buffer([1], {t}, local)\n    buffer sym_par = alloc_buffer([1], {t}, local)\n    sym_w[0] = {one}\n    sym_par[0] = {zero}\n    while sym_w[0] < nr {{\n      let w = sym_w[0]\n      let w2 = w + min(w, nr - w)\n      for g in serial((nr - {one}) / w2 + {one}) {{\n        let r0 = g * w2\n        let lo = {}\n        let mid = select(r0 + min(w, nr - r0) < nr, {}, len)\n        let hi = select(r0 + min(w2, nr - r0) < nr, {}, len)\n        if sym_par[0] == {zero} {{\n{}        }} else {{\n{}        }}\n      }}\n      sym_par[0] = {one} - sym_par[0]\n      sym_w[0] = w2\n    }}\n    if sym_par[0] == {one} {{\n      for x in serial(len) {{\n        sym_ci[base + x] = {}\n      }}\n    }} else {{\n      for x in serial(len) {{\n        sym_ci[base + x] = {}\n      }}\n    }}\n",
        run("r0"),
        run(&format!("min(r0 + min(w, nr - r0), nr - {})", lit(1))),
        run(&format!("min(r0 + min(w2, nr - r0), nr - {})", lit(1))),
        merge(&row, &tmp, "1"),
        merge(&tmp, &row, "2"),
        tmp("x"),
        row("x"),
        one = lit(1),
        zero = lit(0),
    );
    let fill = format!(
        "{}    let base = sym_cp[i]\n{}    let len = sym_len[0]\n{}{close}",
        head(true),
        walk(
            &format!("      {} = sym_len[0]\n", run("q")),
            &format!("{seen}          {} = k\n          sym_len[0] = sym_len[0] + {one}\n        }}\n", row("sym_len[0]"), one = lit(1))
        ),
        merges,
    );
    let parse = |text: &str, counts: bool| -> Result<Phase, PassError> {
        let func = sparsec_ir::text::parse_func("symbolic.sptir", text).map_err(|e| bad(&format!("{e}\n{text}")))?;
        crate::verified_input("product_phases", &func).map_err(|e| bad(&format!("{e}\n{text}")))?;
        Ok(Phase { func, counts })
    };
    Ok(vec![parse(&count, true)?, parse(&fill, false)?])
}
