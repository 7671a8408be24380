//! # sparsec-formats
//!
//! Sparse matrix storage for sparsec: containers, conversions, validation, Matrix Market
//! I/O, seeded generators, the shared data folder, and binding matrices to the axes and
//! buffers of a Stage-I [`sparsec_ir::Func`].
//!
//! ## Modules
//!
//! * [`scalar`] — the [`Index`] (`i32`, `i64`) and [`Value`] (`f32`, `f64`, `half::f16`)
//!   element traits.
//! * Containers, all generic over `<I: Index, V: Value>`, shapes stored explicitly, fields
//!   private and validated on construction (`try_new`):
//!   [`Coo`] ([`coo`]), [`Csr`] and [`Csc`] ([`csr`]), [`Bsr`] ([`bsr`], `b × b` blocks,
//!   row-major inside), [`Ell`] ([`ell`], `k` slots per row, scalar or blocked, documented
//!   padding), [`Dcsr`] ([`dcsr`], non-empty row list + CSR over them).
//! * [`compose`] — SparseTIR composable formats: padded BSR, ELL(k) and row padding,
//!   `hyb` (column-partitioned buckets), SR-BCRS, GroupCOO/BlockGroupCOO and N:M
//!   structured sparsity ([`ComposeError`]).
//! * [`convert`] — COO↔CSR↔CSC, CSR↔BSR(b), CSR↔ELL(k), BSR↔ELL(k), CSR↔DCSR,
//!   CSR↔dense, and `cast_index` between `i32` and `i64` ([`ConvertError`]).
//! * [`validate`] — [`validate::check_compressed`] and friends returning a
//!   [`validate::Report`] of hard errors ([`ValidateError`]) and warnings
//!   ([`ValidateWarning`]), each with its location; fixers are [`Csr::sort_indices`],
//!   [`Csr::sum_duplicates`] and [`Csr::eliminate_zeros`].
//! * [`mtx`] — Matrix Market coordinate reader ([`mtx::read_mtx_path`], [`mtx::parse_mtx`],
//!   ...) and writer ([`mtx::write_mtx`]), errors with line and column ([`MtxError`]).
//! * [`gen`] — seeded generators: uniform, R-MAT, banded, block-sparse and edge cases
//!   ([`GenError`]).
//! * [`data`] — [`data_dir`] and [`shared_matrices`] for the shared test matrices.
//! * [`bind`] — [`bind::Binder`] and `bind_*` functions producing
//!   [`sparsec_ir::data::Args`] ([`BindError`]).
//!
//! ## Example
//!
//! ```
//! use sparsec_formats::{mtx, Csr};
//! let text = "%%MatrixMarket matrix coordinate real general\n2 3 2\n1 3 5.0\n2 1 -1\n";
//! let a: Csr<i32, f32> = mtx::read_mtx_str(text).unwrap();
//! assert_eq!(a.indptr(), &[0, 1, 2]);
//! let bsr = a.to_bsr(2).unwrap();
//! assert_eq!(bsr.nnz_blocks(), 2);
//! ```

#![warn(missing_docs)]

pub mod bind;
pub mod bsr;
pub mod compose;
pub mod convert;
pub mod coo;
pub mod csr;
pub mod data;
pub mod dcsr;
pub mod ell;
pub mod gen;
pub mod mtx;
pub mod scalar;
pub mod tensor;
pub mod validate;

pub use bind::{
    bind_axis_csr, bind_block_group_coo, bind_bsr, bind_csr, bind_dense_variable, bind_ell, bind_group_coo, bind_hyb, bind_nm_2_4, bind_rcm, bind_row_segments, bind_sr_bcrs, BindError, Binder,
};
pub use bsr::Bsr;
pub use compose::ComposeError;
pub use convert::ConvertError;
pub use coo::Coo;
pub use csr::{Csc, Csr};
pub use data::{data_dir, shared_matrices};
pub use dcsr::Dcsr;
pub use ell::Ell;
pub use gen::GenError;
pub use mtx::MtxError;
pub use scalar::{Index, Value};
pub use tensor::{LevelKind, Tensor, TensorError};
pub use validate::{Report, ValidateError, ValidateOptions, ValidateWarning};
