//! The [`Schedule`]: the function being scheduled, its trace, and the reference table.

use crate::error::ScheduleError;
use crate::primitives::Step;
use crate::trace::{Instruction, Trace};
use crate::tree::{self, Path};
use sparsec_ir::func::{Attrs, Func, StmtKind, VarId};
use sparsec_ir::verify::verify_func;
use sparsec_ir::Stage;

type Result<T> = std::result::Result<T, ScheduleError>;

macro_rules! rv_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(transparent)]
        pub struct $name(pub(crate) u32);

        impl $name {
            /// The reference's id, as recorded in traces.
            pub fn id(self) -> u32 {
                self.0
            }
        }
    };
}

rv_type!(
    /// A reference to a sparse iteration (Stage I), found by name.
    SpIterRv
);
rv_type!(
    /// A reference to one iterator of a sparse iteration (Stage I).
    IterRv
);
rv_type!(
    /// A reference to a block (Stage II/III), found by name.
    BlockRv
);
rv_type!(
    /// A reference to a `for` loop (Stage II/III), found by its loop variable.
    LoopRv
);

/// What an annotation is attached to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnnotTarget {
    /// A sparse iteration.
    SpIter(SpIterRv),
    /// A block.
    Block(BlockRv),
    /// A loop.
    Loop(LoopRv),
}

impl AnnotTarget {
    /// The reference's id, as recorded in traces.
    pub(crate) fn id(self) -> u32 {
        match self {
            AnnotTarget::SpIter(r) => r.0,
            AnnotTarget::Block(r) => r.0,
            AnnotTarget::Loop(r) => r.0,
        }
    }
}

impl From<SpIterRv> for AnnotTarget {
    fn from(r: SpIterRv) -> Self {
        AnnotTarget::SpIter(r)
    }
}
impl From<BlockRv> for AnnotTarget {
    fn from(r: BlockRv) -> Self {
        AnnotTarget::Block(r)
    }
}
impl From<LoopRv> for AnnotTarget {
    fn from(r: LoopRv) -> Self {
        AnnotTarget::Loop(r)
    }
}

/// What a reference id points to. Targets are looked up afresh on every use.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Target {
    /// A sparse iteration, by name.
    SpIter(String),
    /// An iterator: sparse iteration name and variable name.
    Iter { sp_iter: String, var: String },
    /// A block, by name.
    Block(String),
    /// A loop, by loop variable.
    Loop(VarId),
}

impl Target {
    fn kind(&self) -> &'static str {
        match self {
            Target::SpIter(_) => "sparse iteration",
            Target::Iter { .. } => "iterator",
            Target::Block(_) => "block",
            Target::Loop(_) => "loop",
        }
    }
}

/// A function being scheduled.
///
/// Every primitive works on a copy of the function and only installs it when the primitive
/// succeeded and the result verifies, so a failed primitive leaves the function (and the
/// trace) unchanged. Each successful call is appended to the [`Trace`].
#[derive(Clone, Debug)]
pub struct Schedule {
    pub(crate) func: Func,
    pub(crate) trace: Trace,
    pub(crate) rvs: Vec<Target>,
}

impl Schedule {
    /// Starts scheduling `func`, which must verify.
    pub fn new(func: Func) -> Result<Schedule> {
        verify_func(&func).map_err(ScheduleError::InvalidInput)?;
        Ok(Schedule { func, trace: Trace::default(), rvs: Vec::new() })
    }

    /// The function as scheduled so far.
    pub fn func(&self) -> &Func {
        &self.func
    }

    /// Gives up the schedule and returns the function.
    pub fn into_func(self) -> Func {
        self.func
    }

    /// The successful primitives applied so far.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// The function printed as `.sptir` text.
    pub fn text(&self) -> String {
        sparsec_ir::text::print_func(&self.func)
    }

    // ---- bookkeeping -----------------------------------------------------------------------

    /// Verifies `g` and installs it.
    pub(crate) fn commit(&mut self, primitive: &'static str, g: Func) -> Result<()> {
        verify_func(&g).map_err(|errors| ScheduleError::InvalidOutput { primitive, errors })?;
        self.func = g;
        Ok(())
    }

    /// Appends an instruction to the trace.
    pub(crate) fn record(&mut self, step: impl Into<Step>, outputs: Vec<u32>) {
        self.trace.insts.push(Instruction { step: step.into(), outputs });
    }

    /// A new reference id for `t`.
    pub(crate) fn new_rv(&mut self, t: Target) -> u32 {
        self.rvs.push(t);
        (self.rvs.len() - 1) as u32
    }

    /// The target of reference `rv`, checking its kind.
    pub(crate) fn target(&self, rv: u32, expected: &'static str) -> Result<&Target> {
        let t = self.rvs.get(rv as usize).ok_or(ScheduleError::StaleRef { rv, what: "an unknown reference".into() })?;
        if t.kind() != expected {
            return Err(ScheduleError::WrongRefKind { rv, expected });
        }
        Ok(t)
    }

    /// Fails unless the function is at Stage I.
    pub(crate) fn need_stage_i(&self, primitive: &'static str) -> Result<()> {
        if self.func.stage == Stage::I {
            Ok(())
        } else {
            Err(ScheduleError::WrongStage { primitive, stage: self.func.stage })
        }
    }

    /// Fails unless the function is at Stage II or III.
    pub(crate) fn need_loop_stage(&self, primitive: &'static str) -> Result<()> {
        if self.func.stage == Stage::I {
            Err(ScheduleError::WrongStage { primitive, stage: Stage::I })
        } else {
            Ok(())
        }
    }

    /// Paths of the sparse iterations called `name` in `f`.
    pub(crate) fn sp_iter_paths(f: &Func, name: &str) -> Vec<Path> {
        tree::find_all(&f.body, &|s| matches!(&s.kind, StmtKind::SpIter(it) if it.name == name))
    }

    /// Paths of the blocks called `name` in `f`.
    pub(crate) fn block_paths(f: &Func, name: &str) -> Vec<Path> {
        tree::find_all(&f.body, &|s| matches!(&s.kind, StmtKind::Block(b) if b.name == name))
    }

    /// Path of the sparse iteration `rv` points to.
    pub(crate) fn sp_iter_path(&self, f: &Func, rv: u32) -> Result<Path> {
        let Target::SpIter(name) = self.target(rv, "sparse iteration")? else { return Err(wrong_kind(rv)) };
        let paths = Self::sp_iter_paths(f, name);
        match paths.len() {
            1 => Ok(paths.into_iter().next().unwrap_or_default()),
            0 => Err(ScheduleError::StaleRef { rv, what: format!("sparse iteration `{name}`") }),
            _ => Err(ScheduleError::AmbiguousName { what: "sparse iteration", name: name.clone() }),
        }
    }

    /// Path of the block `rv` points to.
    pub(crate) fn block_path(&self, f: &Func, rv: u32) -> Result<Path> {
        let Target::Block(name) = self.target(rv, "block")? else { return Err(wrong_kind(rv)) };
        let paths = Self::block_paths(f, name);
        match paths.len() {
            1 => Ok(paths.into_iter().next().unwrap_or_default()),
            0 => Err(ScheduleError::StaleRef { rv, what: format!("block `{name}`") }),
            _ => Err(ScheduleError::AmbiguousName { what: "block", name: name.clone() }),
        }
    }

    /// Path of the loop `rv` points to, and its variable.
    pub(crate) fn loop_path(&self, f: &Func, rv: u32) -> Result<(Path, VarId)> {
        let Target::Loop(v) = self.target(rv, "loop")? else { return Err(wrong_kind(rv)) };
        let v = *v;
        let paths = tree::find_all(&f.body, &|s| tree::is_loop_over(s, v));
        match paths.into_iter().next() {
            Some(p) => Ok((p, v)),
            None => {
                let name = f.vars.try_get(v).map_or_else(|| format!("#{}", v.index()), |x| x.name.clone());
                Err(ScheduleError::StaleRef { rv, what: format!("loop `{name}`") })
            }
        }
    }

    /// The variable of the loop `rv` points to.
    pub(crate) fn loop_var(&self, lp: LoopRv) -> Result<VarId> {
        Ok(self.loop_path(&self.func, lp.0)?.1)
    }

    /// Name of a variable of the current function.
    pub(crate) fn var_name(f: &Func, v: VarId) -> String {
        f.vars.try_get(v).map_or_else(|| format!("#{}", v.index()), |x| x.name.clone())
    }

    /// The attributes of the object `rv` points to in `g`, and its name.
    pub(crate) fn attrs_mut<'g>(&self, g: &'g mut Func, rv: u32) -> Result<(&'g mut Attrs, String)> {
        let kind = self.rvs.get(rv as usize).map(Target::kind).unwrap_or("loop");
        let (path, what) = match kind {
            "sparse iteration" => (self.sp_iter_path(g, rv)?, "sparse iteration"),
            "block" => (self.block_path(g, rv)?, "block"),
            "iterator" => return Err(ScheduleError::WrongRefKind { rv, expected: "sparse iteration, block or loop" }),
            _ => (self.loop_path(g, rv)?.0, "loop"),
        };
        let names: Vec<String> = g.vars.iter().map(|(_, v)| v.name.clone()).collect();
        let s = tree::get_mut(&mut g.body, &path).ok_or_else(|| stale(rv, what))?;
        match &mut s.kind {
            StmtKind::SpIter(it) => Ok((&mut it.attrs, it.name.clone())),
            StmtKind::Block(b) => Ok((&mut b.attrs, b.name.clone())),
            StmtKind::For(l) => {
                let n = names.get(l.var.index()).cloned().unwrap_or_default();
                Ok((&mut l.attrs, n))
            }
            _ => Err(stale(rv, what)),
        }
    }
}

/// A stale-reference error without a precise name.
pub(crate) fn stale(rv: u32, what: &str) -> ScheduleError {
    ScheduleError::StaleRef { rv, what: what.to_string() }
}

/// The error for a target of an unexpected kind (checked by [`Schedule::target`] already).
fn wrong_kind(rv: u32) -> ScheduleError {
    ScheduleError::WrongRefKind { rv, expected: "matching" }
}
