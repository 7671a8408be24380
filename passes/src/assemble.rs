//! Sparse outputs: the two phases of a function with assembled axes (`pattern = union(..)`).
//!
//! An assembled axis's row pointer, coordinates and `nnz` are outputs of the run. Generated
//! code cannot size an array in the middle of a kernel, so a run takes two programs:
//!
//! * the **symbolic phase**, [`count_function`]: an ordinary Stage-I function that counts
//!   each row of the pattern into `indptr[r + 1]` by co-iterating the members; the run then
//!   takes the prefix sum, which gives `nnz` and the sizes of the coordinates and values;
//! * the **numeric phase**, the function itself: [`lower_sparse_iter`](crate::lower_sparse_iter)
//!   first adds [`fill_iterations`] (each coordinate of the pattern written at its position),
//!   and every access through the pattern's co-iteration takes the count of coordinates
//!   visited before it in the row as its position.
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

/// The symbolic phase of Stage-I `f`: a function `<name>_count` taking the parameters its
/// axes need (the assembled ones' row pointers among them, not their coordinates or
/// `nnz`) that stores the length of row `r` of each assembled axis at `indptr[r + 1]`
/// (`indptr[0]` is left alone). `None` when `f` assembles nothing.
pub fn count_function(f: &Func) -> Result<Option<Func>, PassError> {
    crate::verified_input("count_function", f)?;
    if f.stage != Stage::I {
        return Err(PassError::WrongStage { pass: "count_function", expected: Stage::I, found: f.stage });
    }
    let assembled = assembled_axes(f);
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
        let (Some(pt), Some(parent), Some(indptr)) = (&a.pattern, a.parent, a.indptr) else { continue };
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
            axes: vec![SpIterAxis::Axis(amap[&parent]), SpIterAxis::Merge { op: pt.op, axes: members }],
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
    let assembled = assembled_axes(f);
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
        let (Some(pt), Some(parent), Some(indices)) = (&a.pattern, a.parent, a.indices) else { continue };
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
            axes: vec![SpIterAxis::Axis(parent), SpIterAxis::Merge { op: pt.op, axes: pt.members.clone() }],
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
