//! Declarations: parameters, axes and buffers.

use super::{is_name, Verifier, VerifyErrorKind as K};
use crate::expr::Expr;
use crate::func::{Axis, AxisId, Buffer, Layout, ParamId, ParamKind, Storage};
use crate::types::{AxisKind, Stage};
use std::collections::{HashMap, HashSet};

impl<'f> Verifier<'f> {
    /// Parameter names are unique; scalar parameters bind their (namesake) variables.
    pub(super) fn params(&mut self) {
        let f = self.f;
        let mut seen = HashSet::new();
        for p in &f.params {
            self.span = p.span;
            let fresh = seen.insert(p.name.as_str());
            if !fresh {
                self.err(K::DuplicateParam { name: p.name.clone() });
            }
            // A scalar parameter's name is checked as its variable's.
            if p.kind == ParamKind::Handle && !is_name(&p.name) {
                self.err(K::BadName { what: "parameter", name: p.name.clone() });
            }
            if let ParamKind::Scalar(v) = p.kind {
                if let Some(var) = f.vars.try_get(v) {
                    if var.name != p.name {
                        self.err(K::ParamVarName { param: p.name.clone(), var: var.name.clone() });
                    }
                }
                // A duplicate parameter is reported once, not again as shadowing.
                self.bind_checked(v, None, fresh);
            }
        }
        self.span = f.span;
    }

    /// Axis names, parents, per-kind fields, their types and the stage.
    pub(super) fn axes(&mut self) -> HashMap<&'f str, &'static str> {
        let f = self.f;
        let mut names: HashMap<&'f str, &'static str> = HashMap::new();
        for (h, a) in f.axes.iter() {
            self.span = a.span;
            if !is_name(&a.name) {
                self.err(K::BadName { what: "axis", name: a.name.clone() });
            }
            if names.insert(a.name.as_str(), "an axis").is_some() {
                self.err(K::NameClash { name: a.name.clone(), first: "an axis", second: "an axis" });
            }
            match (a.kind, a.parent) {
                // A root sparse-fixed axis stores a set of coordinates (a sparse vector, DCSR's rows).
                (AxisKind::DenseFixed | AxisKind::SparseFixed, None) => {}
                (AxisKind::DenseFixed, Some(p)) => {
                    self.err(K::UnexpectedAxisParent { axis: a.name.clone(), parent: self.axis_name(p) })
                }
                (kind, None) => self.err(K::MissingAxisParent { axis: a.name.clone(), kind }),
                (_, Some(p)) if !f.axes.contains(p) => self.dangling("axis", p, f.axes.len()),
                (_, Some(p)) if p >= h => {
                    self.err(K::AxisParentAfter { axis: a.name.clone(), parent: self.axis_name(p) })
                }
                (_, Some(_)) => {}
            }
            let (nnz, indptr, indices) = match a.kind {
                AxisKind::DenseFixed => (false, false, false),
                AxisKind::DenseVariable => (true, true, false),
                AxisKind::SparseFixed => (true, false, true),
                AxisKind::SparseVariable => (true, true, true),
            };
            self.axis_field(a, "nnz", a.nnz.is_some(), nnz);
            self.axis_field(a, "indptr", a.indptr.is_some(), indptr);
            self.axis_field(a, "indices", a.indices.is_some(), indices);
            for (field, p) in [("indptr", a.indptr), ("indices", a.indices)] {
                if let Some(p) = p {
                    if let Some(param) = self.scalar_param(p) {
                        self.err(K::AxisArrayNotHandle { axis: a.name.clone(), field, param });
                    }
                }
            }
            self.axis_expr(a, "length", &a.length);
            if let Some(n) = &a.nnz {
                self.axis_expr(a, "nnz", n);
            }
            if !a.idtype.is_int() {
                self.err(K::AxisIdType { axis: a.name.clone(), found: a.idtype });
            }
            if let Some(p) = a.parent.and_then(|p| f.axes.try_get(p)) {
                if p.pattern.is_some() {
                    let why = format!("`{}` lies below it; an assembled axis has no children", a.name);
                    self.err(K::AssembledAxis { axis: p.name.clone(), why });
                }
            }
            if a.pattern.is_some() {
                self.assembled_axis(h, a);
            }
            if !a.unique && (a.kind != AxisKind::SparseFixed || a.parent.is_some()) {
                let what = if a.kind == AxisKind::SparseFixed { "one with a parent".to_string() } else { format!("a {} axis", a.kind.name()) };
                self.err(K::NonUniqueAxis { axis: a.name.clone(), what });
            }
        }
        names
    }

    /// An assembled axis: a sorted sparse-variable axis below a root dense-fixed one (so its
    /// row pointer has `length + 1` entries the symbolic phase can count), its `nnz` a
    /// scalar parameter the run sets, its members co-iterable axes declared before it with
    /// its parent, length and index type.
    fn assembled_axis(&mut self, h: AxisId, a: &'f Axis) {
        let f = self.f;
        let Some(pt) = &a.pattern else { return };
        let mut why = Vec::new();
        if a.kind != AxisKind::SparseVariable || !a.sorted {
            why.push("only a sorted sparse_variable axis is assembled".to_string());
        }
        match a.parent.and_then(|p| f.axes.try_get(p)) {
            Some(p) if p.kind == AxisKind::DenseFixed && p.parent.is_none() => {}
            Some(p) => why.push(format!("its parent `{}` is not a root dense_fixed axis", p.name)),
            None => {}
        }
        let nnz_param = match &a.nnz {
            Some(Expr::Var(v)) => f.params.iter().any(|p| p.kind == ParamKind::Scalar(*v)),
            _ => false,
        };
        if !nnz_param {
            why.push("its nnz must be a scalar parameter, which the run sets".to_string());
        }
        let product = pt.op == crate::func::PatternOp::Product;
        if pt.members.len() < 2 || (product && pt.members.len() != 2) {
            why.push(format!("{}(..) needs {} members", pt.op.name(), if product { "two" } else { "two or more" }));
        }
        for (k, &m) in pt.members.iter().enumerate() {
            let Some(x) = f.axes.try_get(m) else {
                self.dangling("axis", m, f.axes.len());
                continue;
            };
            // A product's second member is the right factor's column axis: its rows are the
            // first member's coordinates (a root dense axis of the first member's length).
            let right = product && k == 1;
            let first_len = pt.members.first().and_then(|x| f.axes.try_get(*x)).map(|x| &x.length);
            let bad = if m >= h {
                Some("it is declared after".to_string())
            } else if pt.members[..k].contains(&m) {
                Some("it is named twice".to_string())
            } else if x.kind != AxisKind::SparseVariable || !x.sorted || x.pattern.is_some() {
                Some("members are sorted sparse_variable axes given by the caller".to_string())
            } else if right {
                match x.parent.and_then(|p| f.axes.try_get(p)) {
                    Some(p) if p.kind == AxisKind::DenseFixed && p.parent.is_none() && Some(&p.length) == first_len => {
                        (x.length != a.length).then(|| "its length differs".to_string())
                    }
                    _ => Some(format!("its parent is not a root dense_fixed axis of the length of `{}`", self.axis_name(pt.members[0]))),
                }
            } else if x.parent != a.parent {
                Some("its parent differs".to_string())
            } else if x.length != a.length && !product {
                Some("its length differs".to_string())
            } else if x.idtype != a.idtype {
                Some(format!("its index type is {}, not {}", x.idtype, a.idtype))
            } else {
                None
            };
            if let Some(b) = bad {
                why.push(format!("member `{}`: {b}", x.name));
            }
        }
        for w in why {
            self.err(K::AssembledAxis { axis: a.name.clone(), why: w });
        }
    }

    fn axis_field(&mut self, a: &Axis, field: &'static str, present: bool, wanted: bool) {
        match (present, wanted) {
            (false, true) => self.err(K::AxisFieldMissing { axis: a.name.clone(), kind: a.kind, field }),
            (true, false) => self.err(K::AxisFieldUnexpected { axis: a.name.clone(), kind: a.kind, field }),
            _ => {}
        }
    }

    /// Length and nnz: integer expressions over scalar parameters and literals.
    fn axis_expr(&mut self, a: &Axis, field: &'static str, e: &'f Expr) {
        let mut culprit = None;
        e.walk(&mut |x| {
            if culprit.is_some() {
                return;
            }
            culprit = match x {
                // Only scalar parameters are in scope while declarations are checked.
                Expr::Var(v) if self.var_in_scope.get(v.index()).is_some_and(|&n| n == 0) => {
                    Some(format!("variable `{}`", self.var_name(*v)))
                }
                Expr::Load(b, _) => Some(format!("a load from `{}`", self.buffer_name(*b))),
                Expr::AtomicAdd(b, _, _) => Some(format!("an atomic_add on `{}`", self.buffer_name(*b))),
                _ => None,
            };
        });
        if let Some(culprit) = culprit {
            self.err(K::AxisExprNotParamExpr { axis: a.name.clone(), field, culprit });
        } else if let Some(t) = self.expr(e) {
            if !t.is_int() {
                self.err(K::AxisExprNotInt { axis: a.name.clone(), field, found: t });
            }
        }
    }

    /// The name of parameter `p` if it is a scalar; reports an out-of-range index.
    fn scalar_param(&mut self, p: ParamId) -> Option<String> {
        match self.f.params.get(p) {
            None => {
                self.err(K::DanglingHandle { what: "parameter", index: p, len: self.f.params.len() });
                None
            }
            Some(param) => matches!(param.kind, ParamKind::Scalar(_)).then(|| param.name.clone()),
        }
    }

    /// Buffer names; function-level buffers are checked (with only parameters in scope) and
    /// made usable everywhere. Statement-allocated ones are checked at their `Alloc`.
    pub(super) fn buffers(&mut self, mut names: HashMap<&'f str, &'static str>) {
        let f = self.f;
        for (h, b) in f.buffers.iter() {
            self.span = b.span;
            if !is_name(&b.name) {
                self.err(K::BadName { what: "buffer", name: b.name.clone() });
            }
            if let Some(first) = names.insert(b.name.as_str(), "a buffer") {
                self.err(K::NameClash { name: b.name.clone(), first, second: "a buffer" });
            }
            if !self.stmt_alloc[h.index()] {
                self.buffer_decl(b);
                self.buffer_in_scope[h.index()] = 1;
            }
        }
        self.span = f.span;
    }

    /// Layout (storage rule, shape types), storage, `extra_storage` and `default` of one
    /// buffer, with the variables currently in scope.
    pub(super) fn buffer_decl(&mut self, b: &'f Buffer) {
        let f = self.f;
        match &b.layout {
            Layout::Sparse(axes) => {
                if f.stage == Stage::III {
                    self.err(K::SparseBufferAtStageIII { buffer: b.name.clone() });
                }
                for (k, &a) in axes.iter().enumerate() {
                    let Some(axis) = f.axes.try_get(a) else {
                        self.dangling("axis", a, f.axes.len());
                        continue;
                    };
                    let Some(parent) = axis.parent else { continue };
                    let prev = k.checked_sub(1).map(|j| axes[j]);
                    if prev != Some(parent) {
                        let found = match prev {
                            None => "it comes first".to_string(),
                            Some(q) => format!("it follows `{}`", self.axis_name(q)),
                        };
                        self.err(K::BufferAxisOrder {
                            buffer: b.name.clone(),
                            axis: axis.name.clone(),
                            parent: self.axis_name(parent),
                            found,
                        });
                    }
                }
            }
            Layout::Dense(shape) => {
                for (dim, e) in shape.iter().enumerate() {
                    if let Some(t) = self.expr(e) {
                        if !t.is_int() {
                            self.err(K::BufferShapeNotInt { buffer: b.name.clone(), dim, found: t });
                        }
                    }
                }
            }
        }
        if let Some(m) = &b.modes {
            let n = b.axes().len();
            let mut seen = vec![false; n];
            let problem = if !matches!(b.layout, Layout::Sparse(_)) || !matches!(b.storage, Storage::Param(_)) {
                Some("apply only to sparse buffers bound to a parameter".to_string())
            } else if m.len() != n || m.iter().any(|&k| k >= n || std::mem::replace(&mut seen[k], true)) {
                Some(format!("must be a permutation of 0..{n}, one mode per axis"))
            } else {
                None
            };
            if let Some(problem) = problem {
                self.err(K::BadModes { buffer: b.name.clone(), modes: m.clone(), problem });
            }
        }
        if let Storage::Param(p) = b.storage {
            if let Some(param) = self.scalar_param(p) {
                self.err(K::BufferStorageNotHandle { buffer: b.name.clone(), param });
            }
            // A handle an axis reads as indptr or indices holds the axis's index dtype.
            for (_, a) in f.axes.iter() {
                for (field, q) in [("indptr", a.indptr), ("indices", a.indices)] {
                    if q == Some(p) && a.idtype != b.dtype {
                        self.err(K::BufferAxisArrayDType {
                            buffer: b.name.clone(),
                            axis: a.name.clone(),
                            field,
                            expected: a.idtype,
                            found: b.dtype,
                        });
                    }
                }
            }
        }
        if let Some(e) = &b.extra_storage {
            if let Some(t) = self.expr(e) {
                if !t.is_int() {
                    self.err(K::BufferExtraStorageNotInt { buffer: b.name.clone(), found: t });
                }
            }
        }
        if let Some(e) = &b.default {
            if let Some(t) = self.expr(e) {
                if t != b.dtype {
                    self.err(K::BufferDefaultDType { buffer: b.name.clone(), expected: b.dtype, found: t });
                }
            }
        }
    }
}
