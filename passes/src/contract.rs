//! `contract`: floating-point `a * b + c` becomes `fma(a, b, c)`.
//!
//! Rewrites `a * b + c` and `c + a * b` of dtype f32 or f64 everywhere in the function (the
//! left operand first when both are products), so the sum is rounded once instead of twice,
//! as `nvcc --fmad=true` or `-ffp-contract=fast` do. The fused value is the exact product
//! plus `c`, rounded: it is never less accurate than the unfused one, and differs from it only
//! by rounding, or where `a * b` alone overflows. f16 and bf16 are left alone. Expressions are
//! rebuilt bottom-up, so `a * b + c * d + e` becomes `fma(a, b, c * d) + e`.
//!
//! Accumulations stay recognisable: [`crate::accumulation`] reads `X = fma(a, b, X)` as
//! adding `a * b` to `X`.

use crate::PassError;
use sparsec_ir::expr::{BinOp, Expr, Intrinsic};
use sparsec_ir::func::{map_exprs_deep, Func};
use sparsec_ir::verify::Verified;
use sparsec_ir::DType;

/// Contracts the float multiply-adds of `f` (any stage) into `fma`.
pub fn contract(f: &Func) -> Result<Func, PassError> {
    run(crate::verified_input("contract", f)?)
}

/// [`contract`] on verified input (the pass manager's entry).
pub(crate) fn run(f: Verified<'_>) -> Result<Func, PassError> {
    let mut out = f.func().clone();
    let mut body = std::mem::take(&mut out.body);
    map_exprs_deep(&mut body, &mut |e| e.map(&mut |x| fuse(&out, x)));
    out.body = body;
    Ok(out)
}

fn fuse(f: &Func, e: Expr) -> Expr {
    let Expr::Binary(BinOp::Add, x, y) = e else { return e };
    if !matches!(f.expr_dtype(&x), DType::F32 | DType::F64) {
        return Expr::Binary(BinOp::Add, x, y);
    }
    match (*x, *y) {
        (Expr::Binary(BinOp::Mul, a, b), c) | (c, Expr::Binary(BinOp::Mul, a, b)) => {
            Expr::Call(Intrinsic::Fma, vec![*a, *b, c])
        }
        (x, y) => Expr::binary(BinOp::Add, x, y),
    }
}
