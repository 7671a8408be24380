//! Emitted sources.

use super::common::workload;
use sparsec_backend_cubecl::emit_cubecl;

/// Prints the rendering of `$SPARSEC_SHOW` (debugging aid).
#[test]
#[ignore]
fn show() {
    let name = std::env::var("SPARSEC_SHOW").unwrap_or_else(|_| "csrmm".into());
    println!("{}", emit_cubecl(&workload(&name)).unwrap());
}

/// Prints the WGSL of `$SPARSEC_SHOW` (debugging aid).
#[test]
#[ignore]
fn show_wgsl() {
    let name = std::env::var("SPARSEC_SHOW").unwrap_or_else(|_| "csrmm".into());
    println!("{}", sparsec_backend_cubecl::emit_wgsl(&workload(&name)).unwrap());
}
