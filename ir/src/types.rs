//! Scalar types and the small enums shared by all stages.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Scalar data type of a value, buffer element or index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE single precision.
    F32,
    /// IEEE double precision.
    F64,
    /// Boolean.
    Bool,
}

impl DType {
    /// Every dtype, in a fixed order.
    pub const ALL: [DType; 7] =
        [DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64, DType::Bool];

    /// Whether this is an integer type.
    pub fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// Size of one element in bytes (bool counts as one byte).
    pub fn size_bytes(self) -> usize {
        match self {
            DType::Bool => 1,
            DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    /// The keyword used in `.sptir` text.
    pub fn name(self) -> &'static str {
        match self {
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::Bool => "bool",
        }
    }

    /// Parses a dtype keyword.
    pub fn from_name(s: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == s)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The four kinds of sparse axis: dense or sparse, fixed or variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AxisKind {
    /// Every coordinate `0..length` is stored; no parent.
    DenseFixed,
    /// Coordinates `0..len(row)`, row lengths from `indptr`.
    DenseVariable,
    /// A fixed number of stored coordinates per row, listed in `indices` (ELL).
    SparseFixed,
    /// A variable number of stored coordinates per row (CSR): `indptr` and `indices`.
    SparseVariable,
}

impl AxisKind {
    /// Keyword in `.sptir`.
    pub fn name(self) -> &'static str {
        match self {
            AxisKind::DenseFixed => "dense_fixed",
            AxisKind::DenseVariable => "dense_variable",
            AxisKind::SparseFixed => "sparse_fixed",
            AxisKind::SparseVariable => "sparse_variable",
        }
    }

    /// Whether coordinates are looked up in an `indices` array.
    pub fn is_sparse(self) -> bool {
        matches!(self, AxisKind::SparseFixed | AxisKind::SparseVariable)
    }

    /// Whether row lengths come from an `indptr` array.
    pub fn is_variable(self) -> bool {
        matches!(self, AxisKind::DenseVariable | AxisKind::SparseVariable)
    }
}

/// Memory scope of an allocated buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Scope {
    /// Device global memory.
    Global,
    /// Memory shared by the threads of one block (workgroup).
    Shared,
    /// Per-thread private memory.
    Local,
}

impl Scope {
    /// Keyword in `.sptir`.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::Shared => "shared",
            Scope::Local => "local",
        }
    }

    /// Parses a scope keyword.
    pub fn from_name(s: &str) -> Option<Scope> {
        [Scope::Global, Scope::Shared, Scope::Local].into_iter().find(|x| x.name() == s)
    }
}

/// Whether an iterator is spatial (`S`) or a reduction (`R`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IterKind {
    /// Spatial: distinct iterations write distinct outputs.
    Spatial,
    /// Reduction: iterations accumulate into the same output.
    Reduce,
}

impl IterKind {
    /// The letter used in kind strings (`S` or `R`).
    pub fn letter(self) -> char {
        match self {
            IterKind::Spatial => 'S',
            IterKind::Reduce => 'R',
        }
    }

    /// Parses a kind letter.
    pub fn from_letter(c: char) -> Option<IterKind> {
        match c {
            'S' => Some(IterKind::Spatial),
            'R' => Some(IterKind::Reduce),
            _ => None,
        }
    }

    /// Keyword used for block iterators (`spatial` / `reduce`).
    pub fn keyword(self) -> &'static str {
        match self {
            IterKind::Spatial => "spatial",
            IterKind::Reduce => "reduce",
        }
    }
}

/// A GPU thread index a loop may be bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ThreadTag {
    /// `blockIdx.x`
    BlockIdxX,
    /// `blockIdx.y`
    BlockIdxY,
    /// `blockIdx.z`
    BlockIdxZ,
    /// `threadIdx.x`
    ThreadIdxX,
    /// `threadIdx.y`
    ThreadIdxY,
    /// `threadIdx.z`
    ThreadIdxZ,
}

impl ThreadTag {
    /// All tags.
    pub const ALL: [ThreadTag; 6] = [
        ThreadTag::BlockIdxX,
        ThreadTag::BlockIdxY,
        ThreadTag::BlockIdxZ,
        ThreadTag::ThreadIdxX,
        ThreadTag::ThreadIdxY,
        ThreadTag::ThreadIdxZ,
    ];

    /// The tag as written in CUDA and in `.sptir` (`blockIdx.x`).
    pub fn name(self) -> &'static str {
        match self {
            ThreadTag::BlockIdxX => "blockIdx.x",
            ThreadTag::BlockIdxY => "blockIdx.y",
            ThreadTag::BlockIdxZ => "blockIdx.z",
            ThreadTag::ThreadIdxX => "threadIdx.x",
            ThreadTag::ThreadIdxY => "threadIdx.y",
            ThreadTag::ThreadIdxZ => "threadIdx.z",
        }
    }

    /// Parses a tag.
    pub fn from_name(s: &str) -> Option<ThreadTag> {
        ThreadTag::ALL.into_iter().find(|t| t.name() == s)
    }

    /// Whether this indexes blocks (as opposed to threads within a block).
    pub fn is_block(self) -> bool {
        matches!(self, ThreadTag::BlockIdxX | ThreadTag::BlockIdxY | ThreadTag::BlockIdxZ)
    }
}

/// How a `for` loop runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ForKind {
    /// In order, one iteration at a time.
    Serial,
    /// Iterations may run on different CPU threads.
    Parallel,
    /// Iterations form SIMD lanes.
    Vectorized,
    /// The loop is fully unrolled.
    Unrolled,
    /// Each iteration is one GPU block or thread.
    Thread(ThreadTag),
}

impl ForKind {
    /// Keyword in `.sptir` (`serial`, `parallel`, ..., or the thread tag).
    pub fn name(self) -> &'static str {
        match self {
            ForKind::Serial => "serial",
            ForKind::Parallel => "parallel",
            ForKind::Vectorized => "vectorized",
            ForKind::Unrolled => "unrolled",
            ForKind::Thread(t) => t.name(),
        }
    }

    /// Parses a loop-kind keyword or thread tag.
    pub fn from_name(s: &str) -> Option<ForKind> {
        match s {
            "serial" => Some(ForKind::Serial),
            "parallel" => Some(ForKind::Parallel),
            "vectorized" => Some(ForKind::Vectorized),
            "unrolled" => Some(ForKind::Unrolled),
            _ => ThreadTag::from_name(s).map(ForKind::Thread),
        }
    }
}

/// The three stages of the IR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Stage {
    /// Coordinate space: axes, sparse buffers and sparse iterations.
    I,
    /// Position space: loops and blocks over sparse buffers.
    II,
    /// Flat 1-D buffers, loops, blocks and thread bindings.
    III,
}

impl Stage {
    /// Roman numeral used in `.sptir`.
    pub fn name(self) -> &'static str {
        match self {
            Stage::I => "I",
            Stage::II => "II",
            Stage::III => "III",
        }
    }

    /// Parses `I`, `II` or `III`.
    pub fn from_name(s: &str) -> Option<Stage> {
        match s {
            "I" => Some(Stage::I),
            "II" => Some(Stage::II),
            "III" => Some(Stage::III),
            _ => None,
        }
    }

    /// The stage as a number 1..=3.
    pub fn number(self) -> u8 {
        match self {
            Stage::I => 1,
            Stage::II => 2,
            Stage::III => 3,
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
