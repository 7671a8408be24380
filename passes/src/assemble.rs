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

/// Every program of the symbolic phase of Stage-I `f`, in order: the counts of its union
/// and intersection axes ([`count_function`]), then for each product axis a program that
/// counts its rows and one that writes and sorts its coordinates (`product_phases`).
pub fn symbolic_phases(f: &Func) -> Result<Vec<Phase>, PassError> {
    let mut out: Vec<Phase> = count_function(f)?.into_iter().map(|func| Phase { func, counts: true }).collect();
    for a in assembled_axes(f) {
        if f.axes[a].pattern.as_ref().is_some_and(|pt| pt.op == sparsec_ir::PatternOp::Product) {
            out.extend(product_phases(f, a)?);
        }
    }
    Ok(out)
}

/// The two Stage-III programs of product axis `a` (`pattern = product(JA, KB)`), Gustavson's
/// symbolic SpGEMM. Rows run in chunks balanced by A's nonzeros under a `parallel` loop, one
/// after another within a chunk, and each chunk has its own row of every workspace (a mark
/// per coordinate holding the last row that saw it, so nothing is cleared between rows):
/// the first counts the distinct coordinates of each row into `indptr[r + 1]`; the second
/// collects them and sorts each row: each of B's rows (sorted) adds a sorted run, and
/// bottom-up merges of the runs between two scratch rows of `p` sort the row (`O(k log r)`
/// for `k` columns from `r` rows), which is then copied out from `indptr[r]` on.
fn product_phases(f: &Func, a: AxisId) -> Result<Vec<Phase>, PassError> {
    // Most chunks of rows, and least nonzeros of A per chunk (about 2 µs of a row's work).
    const CHUNKS: i64 = 32;
    const GRAIN: i64 = 1024;
    // The chunks' workspaces stay within this many times the input arrays.
    const WORKSPACES: i64 = 4;
    // Closes a row, its chunk's block and loop, and the function.
    const CLOSE: &str = "  }\n  }\n  }\n}\n";
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
    // Chunks of rows balanced by A's nonzeros: at most CHUNKS, of at least GRAIN of them,
    // and no more than keep their workspaces (the fill's three of `p` and one of `n + 1`)
    // within WORKSPACES times the inputs and their sizes within the index type; from the
    // scalar parameters alone, which size the workspaces.
    let i64 = |x: &str| format!("cast(i64, {x})");
    let per_chunk = format!("max(3i64 * {} + {} + 1i64, 1i64)", i64(&p), i64(&n));
    let chunks = format!(
        "cast({t}, max(1i64, min(min({CHUNKS}i64, {} // {GRAIN}i64), min({WORKSPACES}i64 * ({} + {}), {}) // {per_chunk})))",
        i64(&nnz_a),
        i64(&nnz_a),
        i64(&nnz_b),
        if t == sparsec_ir::DType::I64 { "9223372036854775807i64" } else { "2147483647i64" },
    );
    // Chunk `vp`'s row of workspace `buf` at `x`.
    let ws = |buf: &str, x: &str| format!("{buf}[vp, {x}]");
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
        s.push_str(&format!(
            "  buffer sym_bounds = alloc_buffer([{}], {t}, global)\n  let sym_total = {} - {}\n  let sym_chunks = {chunks}\n",
            CHUNKS + 1,
            i64(&format!("sym_ap[{m}]")),
            i64("sym_ap[0]"),
        ));
        s.push_str(&format!("  buffer sym_mark = alloc_buffer([{chunks}, {p}], {t}, global)\n"));
        if fill {
            for b in ["sym_t1", "sym_t2"] {
                s.push_str(&format!("  buffer {b} = alloc_buffer([{chunks}, {p}], {t}, global)\n"));
            }
            s.push_str(&format!("  buffer sym_run = alloc_buffer([{chunks}, {n} + {}], {t}, global)\n", lit(1)));
        }
        s.push_str(&format!(
            "  sym_bounds[0] = {zero}\n  for sym_c in serial(sym_chunks - {one}) {{\n    buffer sym_low = alloc_buffer([1], {t}, local)\n    buffer sym_high = alloc_buffer([1], {t}, local)\n    sym_low[0] = {zero}\n    sym_high[0] = {m}\n    while sym_low[0] < sym_high[0] {{\n      let sym_mid = sym_low[0] + (sym_high[0] - sym_low[0]) // {two}\n      if {} - {} < cast(i64, sym_c + {one}) * sym_total // cast(i64, sym_chunks) {{\n        sym_low[0] = sym_mid + {one}\n      }} else {{\n        sym_high[0] = sym_mid\n      }}\n    }}\n    sym_bounds[sym_c + {one}] = min({m}, max(sym_bounds[sym_c], sym_low[0]))\n  }}\n  sym_bounds[sym_chunks] = {m}\n",
            i64("sym_ap[sym_mid]"),
            i64("sym_ap[0]"),
            zero = lit(0),
            one = lit(1),
            two = lit(2),
        ));
        // Each chunk has its own workspaces; its rows run in order.
        s.push_str(&format!(
            "  for sym_p in parallel(sym_chunks) {{\n  block sym_chunk(vp: spatial(sym_chunks) = sym_p) {{\n"
        ));
        s.push_str(&format!(
            "  for sym_r in serial(sym_bounds[vp + {one}] - sym_bounds[vp]) {{\n    let i = sym_bounds[vp] + sym_r\n    buffer sym_len = alloc_buffer([1], {t}, local)\n    sym_len[0] = {zero}\n",
            one = lit(1),
            zero = lit(0)
        ));
        s
    };
    let mark = ws("sym_mark", "k");
    let seen = format!("        if {mark} != i + {one} {{\n          {mark} = i + {one}\n", one = lit(1));
    let count = format!(
        "{}{}    sym_cp[i + {one}] = sym_len[0]\n{CLOSE}",
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
        "{}    let base = sym_cp[i]\n{}    let len = sym_len[0]\n{}{CLOSE}",
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
