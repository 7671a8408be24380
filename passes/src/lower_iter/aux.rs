//! Auxiliary buffers: the `indptr` and `indices` arrays of the iterated axes become sparse
//! buffers (`J_indptr` over the parent chain with one extra element, `J_indices` over the
//! parent chain and a dense twin `J_dense`), so that Stage II reads them in position space.

use super::Lowerer;
use sparsec_ir::func::{Axis, AxisId, Buffer, BufferId, Layout, Storage};
use sparsec_ir::{AxisKind, Expr, Span};
use std::collections::HashMap;

/// The auxiliary axes and buffers created so far, per Stage-I axis.
#[derive(Default)]
pub struct Aux {
    dense_twin: HashMap<AxisId, AxisId>,
    indptr: HashMap<AxisId, BufferId>,
    indices: HashMap<AxisId, BufferId>,
    flat_indptr: HashMap<AxisId, BufferId>,
}

impl Lowerer<'_> {
    /// The dense axis with the same positions as `a` (`a` itself when it is dense).
    pub(super) fn dense_twin(&mut self, a: AxisId) -> AxisId {
        let axis = self.out.axes[a].clone();
        if !axis.kind.is_sparse() {
            return a;
        }
        if let Some(&t) = self.aux.dense_twin.get(&a) {
            return t;
        }
        let name = self.namer.global(&format!("{}_dense", axis.name));
        let twin = match axis.kind {
            // Rows of an unsorted axis may repeat a coordinate, so they can be longer than
            // the axis: their positions are bounded by `nnz` only.
            AxisKind::SparseVariable => Axis {
                name,
                kind: AxisKind::DenseVariable,
                length: if axis.sorted { axis.length.clone() } else { axis.nnz.clone().unwrap_or_else(|| axis.length.clone()) },
                indices: None,
                pattern: None,
                unique: true,
                span: Span::NONE,
                ..axis
            },
            // Positions are distinct even where coordinates repeat.
            _ => Axis {
                name,
                kind: AxisKind::DenseFixed,
                parent: None,
                length: axis.nnz.clone().unwrap_or(Expr::i32(0)),
                nnz: None,
                indptr: None,
                indices: None,
                pattern: None,
                unique: true,
                span: Span::NONE,
                ..axis
            },
        };
        let t = self.out.axes.append(twin);
        self.aux.dense_twin.insert(a, t);
        t
    }

    /// The axes from the root down to `a` (positions index them like the dense twins).
    fn dense_chain(&mut self, a: AxisId) -> Vec<AxisId> {
        let mut chain = vec![a];
        while let Some(p) = self.out.axes[*chain.last().expect("non-empty")].parent {
            chain.push(p);
        }
        chain.reverse();
        chain
    }

    /// `X_indptr`: the row pointers of variable axis `a`, over the chain of its parent.
    pub(super) fn indptr_buffer(&mut self, a: AxisId) -> BufferId {
        if let Some(&b) = self.aux.indptr.get(&a) {
            return b;
        }
        let axis = self.out.axes[a].clone();
        let parent = axis.parent.expect("verified: variable axes have a parent");
        let layout = Layout::Sparse(self.dense_chain(parent));
        let b = self.out.buffers.append(Buffer {
            name: self.namer.global(&format!("{}_indptr", axis.name)),
            dtype: axis.idtype,
            layout,
            storage: Storage::Param(axis.indptr.expect("verified: variable axes have indptr")),
            extra_storage: Some(Expr::Int(1, axis.idtype)),
            default: None,
            modes: None,
            span: Span::NONE,
        });
        self.aux.indptr.insert(a, b);
        b
    }

    /// `X_indices`: the coordinates of sparse axis `a`, over its parent chain and its dense twin.
    pub(super) fn indices_buffer(&mut self, a: AxisId) -> BufferId {
        if let Some(&b) = self.aux.indices.get(&a) {
            return b;
        }
        let axis = self.out.axes[a].clone();
        let mut axes = match axis.parent {
            Some(p) => self.dense_chain(p),
            None => Vec::new(),
        };
        axes.push(self.dense_twin(a));
        let b = self.out.buffers.append(Buffer {
            name: self.namer.global(&format!("{}_indices", axis.name)),
            dtype: axis.idtype,
            layout: Layout::Sparse(axes),
            storage: Storage::Param(axis.indices.expect("verified: sparse axes have indices")),
            extra_storage: None,
            default: None,
            modes: None,
            span: Span::NONE,
        });
        self.aux.indices.insert(a, b);
        b
    }

    /// `X_indptr_flat`: variable axis `a`'s row pointers as one dense array, for recovering
    /// rows of fused iterations below the first level.
    pub(super) fn flat_indptr_buffer(&mut self, a: AxisId, parent_size: Expr) -> BufferId {
        if let Some(&b) = self.aux.flat_indptr.get(&a) {
            return b;
        }
        let axis = self.out.axes[a].clone();
        let len = super::super::build::add(&self.out, parent_size, Expr::Int(1, axis.idtype));
        let b = self.out.buffers.append(Buffer {
            name: self.namer.global(&format!("{}_indptr_flat", axis.name)),
            dtype: axis.idtype,
            layout: Layout::Dense(vec![len]),
            storage: Storage::Param(axis.indptr.expect("verified: variable axes have indptr")),
            extra_storage: None,
            default: None,
            modes: None,
            span: Span::NONE,
        });
        self.aux.flat_indptr.insert(a, b);
        b
    }
}
