//! Arithmetic simplification of integer index expressions: constant folding, identities
//! (`x * 1`, `x + 0`, ...) and re-association of constants in nested sums. Float arithmetic is
//! left alone so results stay bit-identical.

use sparsec_ir::expr::{BinOp, Expr};
use sparsec_ir::func::{Func, Stmt, VarId};
use std::collections::HashMap;
use sparsec_ir::value::Value;
use sparsec_ir::DType;

fn int(v: i64, d: DType) -> Expr {
    Expr::Int(wrap(v, d), d)
}

fn wrap(v: i64, d: DType) -> i64 {
    if d == DType::I32 {
        v as i32 as i64
    } else {
        v
    }
}

/// `a op b` at dtype `d`, by the semantic core; `None` for what cannot fold (a division by
/// zero, which must fail when it runs).
fn fold(op: BinOp, a: i64, b: i64, d: DType) -> Option<i64> {
    Value::binary(op, Value::from_i64(d, a), Value::from_i64(d, b)).ok()?.as_int()
}

/// Whether evaluating `e` cannot fail: literals, variables, `+ - *`, min/max and casts of such.
fn cannot_fail(e: &Expr) -> bool {
    match e {
        Expr::Int(..) | Expr::Float(..) | Expr::Bool(_) | Expr::Var(_) => true,
        Expr::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Min | BinOp::Max, a, b) => cannot_fail(a) && cannot_fail(b),
        Expr::Cast(_, a) => cannot_fail(a),
        _ => false,
    }
}

/// Whether `e` is an integer by its form (literals, casts to integers, arithmetic on them);
/// variables and loads are not known here.
fn is_int(e: &Expr) -> bool {
    match e {
        Expr::Int(..) => true,
        Expr::Cast(d, _) => d.is_int(),
        Expr::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Min | BinOp::Max, a, b) => is_int(a) || is_int(b),
        _ => false,
    }
}

/// Simplifies one expression node whose children are already simplified.
fn step(e: Expr) -> Expr {
    let Expr::Binary(op, a, b) = e else {
        return match e {
            Expr::Cast(d, inner) if d.is_int() => match *inner {
                Expr::Int(v, from) => Value::from_i64(from, v).cast(d).as_int().map_or_else(
                    || Expr::Cast(d, Box::new(Expr::Int(v, from))),
                    |v| int(v, d),
                ),
                other => Expr::Cast(d, Box::new(other)),
            },
            other => other,
        };
    };
    match (op, *a, *b) {
        (op, Expr::Int(x, d), Expr::Int(y, _)) if !op.is_comparison() && !op.is_logical() => match fold(op, x, y, d) {
            Some(v) => int(v, d),
            None => Expr::binary(op, Expr::Int(x, d), Expr::Int(y, d)),
        },
        // Identities on integers.
        (BinOp::Add, x, Expr::Int(0, _)) | (BinOp::Sub, x, Expr::Int(0, _)) => x,
        (BinOp::Add, Expr::Int(0, _), x) => x,
        (BinOp::Mul, x, Expr::Int(1, _)) | (BinOp::Mul, Expr::Int(1, _), x) => x,
        (BinOp::FloorDiv, x, Expr::Int(1, _)) | (BinOp::Div, x, Expr::Int(1, _)) => x,
        // x * 0 → 0 only when dropping x cannot drop an error (a division, a load).
        (BinOp::Mul, x, Expr::Int(0, d)) | (BinOp::Mul, Expr::Int(0, d), x) if cannot_fail(&x) => Expr::Int(0, d),
        (BinOp::FloorMod, x, Expr::Int(1, d)) if cannot_fail(&x) => Expr::Int(0, d),
        // Constants to the right: c + x → x + c.
        (BinOp::Add, Expr::Int(c, d), x) => step(Expr::binary(BinOp::Add, x, Expr::Int(c, d))),
        // (x + c1) + c2 → x + (c1 + c2); (x + c1) - c2 → x + (c1 - c2); (x - c1) + c2 likewise.
        (op @ (BinOp::Add | BinOp::Sub), Expr::Binary(inner @ (BinOp::Add | BinOp::Sub), x, c1), Expr::Int(c2, d))
            if matches!(*c1, Expr::Int(..)) =>
        {
            let c1 = c1.as_int().unwrap_or(0);
            let signed1 = if inner == BinOp::Add { c1 } else { c1.wrapping_neg() };
            let signed2 = if op == BinOp::Add { c2 } else { c2.wrapping_neg() };
            let c = wrap(signed1.wrapping_add(signed2), d);
            match c {
                0 => *x,
                // Not for the most negative value, whose negation does not fit.
                c if c < 0 && wrap(c.wrapping_neg(), d) == c.wrapping_neg() => Expr::binary(BinOp::Sub, *x, Expr::Int(c.wrapping_neg(), d)),
                c => Expr::binary(BinOp::Add, *x, Expr::Int(c, d)),
            }
        }
        // x + c with c < 0 → x - |c|.
        (BinOp::Add, x, Expr::Int(c, d)) if c < 0 && c != i64::MIN && wrap(-c, d) == -c => Expr::binary(BinOp::Sub, x, Expr::Int(-c, d)),
        // (x + y) - y → x: exact only on integers (wrapping), and only when y cannot fail.
        (BinOp::Sub, Expr::Binary(BinOp::Add, x, y), z) if *y == z && cannot_fail(&z) && (is_int(&x) || is_int(&z)) => *x,
        (op, a, b) => Expr::binary(op, a, b),
    }
}

/// Simplifies an expression bottom-up.
pub fn simplify_expr(e: Expr) -> Expr {
    e.map(&mut step)
}

/// Simplifies every expression of a statement list in place.
pub fn simplify_stmts(stmts: &mut [Stmt]) {
    for s in stmts {
        s.kind.map_exprs(&mut simplify_expr);
        for child in s.kind.child_lists_mut() {
            simplify_stmts(child);
        }
    }
}

/// Simplifies every expression of a function (body, axis lengths and buffer shapes).
pub fn simplify_func(f: &mut Func) {
    for (_, b) in f.buffers.iter_mut() {
        if let sparsec_ir::Layout::Dense(shape) = &mut b.layout {
            for e in shape.iter_mut() {
                *e = simplify_expr(std::mem::replace(e, Expr::Bool(false)));
            }
        }
    }
    simplify_stmts(&mut f.body);
}

/// `e` with every variable in `map` replaced, simplified when it changed.
pub fn substitute_simplified(e: Expr, map: &HashMap<VarId, Expr>) -> Expr {
    if !map.keys().any(|v| e.uses_var(*v)) {
        return e;
    }
    simplify_expr(e.substitute(map))
}

/// [`substitute_simplified`] on every expression of `stmts`, recursively.
pub fn substitute_stmts(stmts: &mut [Stmt], map: &HashMap<VarId, Expr>) {
    sparsec_ir::map_exprs_deep(stmts, &mut |e| substitute_simplified(e, map));
}

/// [`Func::affine_in`] with both parts simplified.
pub fn affine_in(g: &Func, e: &Expr, v: VarId) -> Option<(Expr, Expr)> {
    let (base, coef) = g.affine_in(e, v)?;
    Some((simplify_expr(base), simplify_expr(coef)))
}
