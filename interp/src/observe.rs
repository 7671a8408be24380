//! Memory-access traces: an opt-in observer that sees every access the interpreter makes to
//! a global buffer, with the GPU unit (block and thread indices) that makes it.
//!
//! [`run_observed`](crate::run_observed) runs a function like [`run_with`](crate::run_with)
//! and calls the observer once per element read or written in a *global* buffer: one bound
//! to a parameter, or allocated with `global` scope (`shared` and `local` buffers are on-chip
//! and not reported). An `atomic_add` is one access of kind [`AccessKind::Atomic`] (its read
//! is not reported separately). Loads inside the indices of an access are reported before
//! it, in evaluation order. The observer is meant for Stage III, where every access is an
//! explicit load or store of a flat buffer; at Stages I and II the row pointers and
//! coordinates that sparse accesses walk internally are not reported.
//!
//! The unit of an access is the value of the innermost enclosing loops bound to
//! `blockIdx.x/y/z` and `threadIdx.x/y/z` at that moment (0 along a dimension no enclosing
//! loop is bound to, as a launch of extent 1 would have). The interpreter runs bound loops
//! one iteration after the other, so the accesses of one unit arrive in that unit's program
//! order, and those of different units one unit after the other.
//!
//! Sites are numbered once per run, before it starts: walking the function's statements in
//! order (nested lists after their statement), a `Store` statement is a site, then every
//! `load` and `atomic_add` expression of the statement in pre-order. An access's
//! [`Access::site`] is that number, so the same expression of the IR always has the same
//! site whatever the data. [`Access::depth`] is how many loads deep the address is: 1 plus
//! the largest depth of a load (of any buffer, on-chip ones included) inside the access's
//! indices; `B[J_indices[J_indptr[vi] + vj] * feat + vk]` has depth 3. Inside `unrolled`
//! loops each iteration is a copy of the code, so its accesses get sites of their own: the
//! site of the IR plus the number of sites times one more than the iteration's ordinal.
//! Inside a `vectorized` loop that runs as vectors (it has a vector form,
//! `sparsec_ir::vector::plan`, and its assumptions hold for the run's parameters), the
//! iterations are the lanes of one instruction: [`Access::lane`] is the iteration's ordinal.

use sparsec_ir::{Expr, Func, ForKind, Scope, Stmt, StmtKind, Storage, ThreadTag};
use std::collections::HashMap;

/// What an access does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessKind {
    /// A read.
    Load,
    /// A write.
    Store,
    /// An `atomic_add`: a read-modify-write, counted as a store by memory models.
    Atomic,
}

impl AccessKind {
    /// Whether the access writes memory (stores and atomics).
    pub fn writes(self) -> bool {
        matches!(self, AccessKind::Store | AccessKind::Atomic)
    }
}

/// One access to a global buffer, as the observer of
/// [`run_observed`](crate::run_observed) sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// Index in the function's body of the top-level statement being executed (each
    /// top-level statement with thread bindings is one GPU kernel).
    pub stmt: usize,
    /// The buffer: its index in the function's buffer arena (`BufferId::index`).
    pub buffer: usize,
    /// The element accessed: flat index into the buffer's storage.
    pub index: u64,
    /// Size of one element in bytes.
    pub bytes: u32,
    /// Load, store or atomic.
    pub kind: AccessKind,
    /// The static site: the number of the load, store or `atomic_add` in the IR (see the
    /// module documentation).
    pub site: u32,
    /// How many loads deep the address is (1 for an address that needs no load).
    pub depth: u32,
    /// `blockIdx.x`, `.y`, `.z` of the unit making the access.
    pub block: [i64; 3],
    /// `threadIdx.x`, `.y`, `.z` of the unit making the access.
    pub thread: [i64; 3],
    /// The lane of a vector instruction (module documentation); 0 outside vector loops. The
    /// lanes of one execution of a site are one instruction.
    pub lane: u32,
}

/// The observer and what it needs during a run.
pub(crate) struct Observer<'o> {
    sink: &'o mut dyn FnMut(&Access),
    /// Site number and depth by the address of the `Expr` (loads, atomics) or `Stmt`
    /// (stores) in the IR.
    sites: HashMap<usize, (u32, u32)>,
    /// Element size of each buffer when it is global, `None` otherwise.
    global: Vec<Option<u32>>,
    /// Current values of the loops bound to blockIdx.xyz, threadIdx.xyz.
    pub(crate) unit: [i64; 6],
    /// The top-level statement being executed.
    pub(crate) stmt: usize,
    /// The iterations of the enclosing `unrolled` loops, outermost first.
    pub(crate) unrolled: Vec<u32>,
    /// The iteration of the enclosing loop that runs as vectors, if any.
    pub(crate) lane: Option<u32>,
    /// Per `vectorized` loop (by address): its width and the parameters its vector form
    /// assumes to be multiples of it, when it has one.
    pub(crate) vector_forms: HashMap<usize, Option<(i64, Vec<sparsec_ir::VarId>)>>,
}

impl<'o> Observer<'o> {
    /// Numbers the sites of `func` and records which buffers are global.
    pub(crate) fn new(func: &Func, sink: &'o mut dyn FnMut(&Access)) -> Observer<'o> {
        let global = func
            .buffers
            .iter()
            .map(|(_, b)| match b.storage {
                Storage::Param(_) | Storage::Alloc(Scope::Global) => Some(b.dtype.size_bytes() as u32),
                Storage::Alloc(_) => None,
            })
            .collect();
        let mut sites = HashMap::new();
        sparsec_ir::walk_stmts(&func.body, &mut |s: &Stmt| {
            if let StmtKind::Store { indices, .. } = &s.kind {
                let n = sites.len() as u32;
                sites.insert(s as *const Stmt as usize, (n, 1 + indices.iter().map(load_depth).max().unwrap_or(0)));
            }
            for e in s.kind.exprs() {
                e.walk(&mut |x: &Expr| {
                    if let Expr::Load(_, idx) | Expr::AtomicAdd(_, idx, _) = x {
                        let n = sites.len() as u32;
                        sites.entry(x as *const Expr as usize).or_insert((n, 1 + idx.iter().map(load_depth).max().unwrap_or(0)));
                    }
                });
            }
        });
        Observer { sink, sites, global, unit: [0; 6], stmt: 0, unrolled: Vec::new(), lane: None, vector_forms: HashMap::new() }
    }

    /// Reports an access of element `index` of buffer `buffer` by the IR node at `node`
    /// (the load or atomic expression, or the store statement) when the buffer is global.
    pub(crate) fn access(&mut self, node: usize, buffer: usize, index: usize, kind: AccessKind, indices: &[Expr]) {
        let Some(Some(bytes)) = self.global.get(buffer).copied() else { return };
        let next = self.sites.len() as u32;
        // Nodes outside the function's body (none in practice) are numbered when first seen.
        let (site, depth) =
            *self.sites.entry(node).or_insert_with(|| (next, 1 + indices.iter().map(load_depth).max().unwrap_or(0)));
        // A copy of the code per unrolled iteration (ordinals of nested loops mixed in).
        let copy = self.unrolled.iter().fold(0u32, |c, &i| c.wrapping_mul(31).wrapping_add(i + 1));
        let site = site.wrapping_add((self.sites.len() as u32).wrapping_mul(copy));
        let u = self.unit;
        (self.sink)(&Access {
            stmt: self.stmt,
            buffer,
            index: index as u64,
            bytes,
            kind,
            site,
            depth,
            block: [u[0], u[1], u[2]],
            thread: [u[3], u[4], u[5]],
            lane: self.lane.unwrap_or(0),
        });
    }
}

/// The position of a thread tag in [`Observer::unit`], for a loop bound to it.
pub(crate) fn unit_slot(kind: ForKind) -> Option<usize> {
    let ForKind::Thread(tag) = kind else { return None };
    Some(match tag {
        ThreadTag::BlockIdxX => 0,
        ThreadTag::BlockIdxY => 1,
        ThreadTag::BlockIdxZ => 2,
        ThreadTag::ThreadIdxX => 3,
        ThreadTag::ThreadIdxY => 4,
        ThreadTag::ThreadIdxZ => 5,
    })
}

/// The largest load depth inside `e`: 0 without loads, else 1 plus that of the deepest
/// load's indices.
fn load_depth(e: &Expr) -> u32 {
    match e {
        Expr::Load(_, idx) | Expr::AtomicAdd(_, idx, _) => 1 + idx.iter().map(load_depth).max().unwrap_or(0),
        _ => e.children().into_iter().map(load_depth).max().unwrap_or(0),
    }
}
