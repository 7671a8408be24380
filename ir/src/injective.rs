//! Which variables a tuple of integer index expressions determines.
//!
//! Used to prove that distinct iterations of some loops reach distinct points: a block's
//! spatial bindings (the verifier) and the indices of an access (the `parallel`/`bind`
//! checks of the schedules). The proof recognises the forms that schedules and lowering
//! produce and refuses everything else:
//!
//! * a variable (`i`), plus or minus an invariant offset (`i + 1`, `J_indptr[vi] + j`);
//! * mixed-radix sums `c * x + w`: every coefficient is at least the span of the terms below
//!   it (`i_0 * 4 + i_1` with `i_1` in `0..4`, as `split` makes), nested to any depth;
//! * digits of a determined source: `f // d`, `f // d % m` and `f % m` whose divisors chain
//!   (`1`, `m1`, `m1 * m2`, ...) up to the source's span or a digit without `%` (as `fuse`
//!   makes: `f // n` and `f % n` together give `f`);
//! * widening casts to `i64`.
//!
//! Integer arithmetic is assumed not to wrap, and loop extents non-negative.

use crate::expr::{BinOp, Expr};
use crate::func::VarId;
use crate::types::DType;

/// How the analysis treats a variable.
#[derive(Clone, Debug, PartialEq)]
pub enum Role {
    /// A variable of the map (a loop variable): its values lie in a window of `span`
    /// consecutive integers (`None`: unknown).
    Free(Option<Expr>),
    /// The same value at every point of the map (a parameter, an outer iterator).
    Fixed,
    /// May take any value at each point (a reduction iterator: points are compared over all
    /// of its values), and need not be determined. An expression of such variables may only
    /// be the highest digit of a mixed-radix sum (`GroupRows[go] * 4 + bi` determines `bi`,
    /// `perm[go] + bi` does not).
    Varying,
    /// Depends on the free variables in an unknown way: an expression using it is refused.
    Unknown,
}

/// One digit of a source expression: `(src // lower) % modulus`.
#[derive(Clone, Debug)]
struct Atom {
    src: Expr,
    lower: Expr,
    modulus: Option<Expr>,
}

/// An expression that determines its atoms, with the width of the window its values lie in.
struct Form {
    atoms: Vec<Atom>,
    span: Option<Expr>,
    /// Built of fixed and [`Role::Varying`] variables only, with at least one varying.
    varying: bool,
}

/// The analysis over one role function.
struct Analysis<'r> {
    role: &'r dyn Fn(VarId) -> Role,
}

/// The free variables whose values the tuple `exprs` determines. `Err(k)`: `exprs[k]` has
/// a form the analysis does not know, so nothing is proven for it.
pub fn determined(exprs: &[&Expr], role: &dyn Fn(VarId) -> Role) -> Result<Vec<VarId>, usize> {
    let a = Analysis { role };
    let mut atoms = Vec::new();
    for (k, e) in exprs.iter().enumerate() {
        atoms.extend(a.form(e).ok_or(k)?.atoms);
    }
    let mut known = Vec::new();
    let mut done: Vec<Expr> = Vec::new();
    loop {
        let mut progress = false;
        let mut k = 0;
        while k < atoms.len() {
            let src = atoms[k].src.clone();
            k += 1;
            if done.contains(&src) {
                continue;
            }
            let splits: Vec<&Atom> = atoms.iter().filter(|x| x.src == src).collect();
            let Some(form) = a.form(&src) else { continue };
            if !covers(&splits, form.span.as_ref()) {
                continue;
            }
            done.push(src.clone());
            progress = true;
            match src {
                Expr::Var(v) if matches!(role(v), Role::Free(_)) => known.push(v),
                _ => atoms.extend(form.atoms),
            }
        }
        if !progress {
            return Ok(known);
        }
    }
}

/// The free variables that the indices `idx` of an access determine, each index being a
/// coordinate of its own dimension: those the whole tuple determines or, when the tuple has
/// a form the analysis does not know, those some index determines alone.
pub fn determined_by_indices(idx: &[Expr], role: &dyn Fn(VarId) -> Role) -> Vec<VarId> {
    let all: Vec<&Expr> = idx.iter().collect();
    determined(&all, role).unwrap_or_else(|_| idx.iter().filter_map(|e| determined(&[e], role).ok()).flatten().collect())
}

/// Whether a free variable of `role` occurs in `e`.
pub fn uses_free(e: &Expr, role: &dyn Fn(VarId) -> Role) -> bool {
    let mut found = false;
    e.walk(&mut |x| {
        if let Expr::Var(v) = x {
            found |= role(*v) != Role::Fixed;
        }
    });
    found
}

impl Analysis<'_> {
    /// The same value at every point: no free or unknown variable, no atomic.
    fn invariant(&self, e: &Expr) -> bool {
        let mut ok = true;
        e.walk(&mut |x| match x {
            Expr::Var(v) => ok &= (self.role)(*v) == Role::Fixed,
            Expr::AtomicAdd(..) => ok = false,
            _ => {}
        });
        ok
    }

    /// Only fixed and varying variables, at least one varying, no atomic.
    fn varying_only(&self, e: &Expr) -> bool {
        let (mut ok, mut any) = (true, false);
        e.walk(&mut |x| match x {
            Expr::Var(v) => match (self.role)(*v) {
                Role::Fixed => {}
                Role::Varying => any = true,
                _ => ok = false,
            },
            Expr::AtomicAdd(..) => ok = false,
            _ => {}
        });
        ok && any
    }

    fn form(&self, e: &Expr) -> Option<Form> {
        if self.invariant(e) {
            return Some(Form { atoms: vec![], span: Some(Expr::i32(1)), varying: false });
        }
        if self.varying_only(e) {
            return Some(Form { atoms: vec![], span: None, varying: true });
        }
        match e {
            Expr::Var(v) => match (self.role)(*v) {
                Role::Free(span) => {
                    Some(Form { atoms: vec![atom(e.clone(), Expr::i32(1), None)], span, varying: false })
                }
                _ => None,
            },
            Expr::Cast(DType::I64, x) => self.form(x),
            Expr::Binary(BinOp::FloorDiv, x, d) if self.invariant(d) => {
                Some(Form { atoms: vec![atom((**x).clone(), (**d).clone(), None)], span: None, varying: false })
            }
            // A negative modulus is refused: its digits lie in `m + 1..=0`.
            Expr::Binary(BinOp::FloorMod, x, m) if self.invariant(m) && m.literal_value().is_none_or(|v| v > 0) => {
                let a = match &**x {
                    Expr::Binary(BinOp::FloorDiv, y, d) if self.invariant(d) => {
                        atom((**y).clone(), (**d).clone(), Some((**m).clone()))
                    }
                    _ => atom((**x).clone(), Expr::i32(1), Some((**m).clone())),
                };
                Some(Form { atoms: vec![a], span: Some((**m).clone()), varying: false })
            }
            Expr::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul, ..) => self.sum(e),
            _ => None,
        }
    }

    /// `e` as a sum of `coefficient * form` terms plus invariant offsets.
    fn terms(&self, e: &Expr, out: &mut Vec<(Expr, Form)>) -> Option<()> {
        if self.invariant(e) {
            return Some(());
        }
        match e {
            Expr::Binary(BinOp::Add, a, b) => {
                self.terms(a, out)?;
                self.terms(b, out)
            }
            Expr::Binary(BinOp::Sub, a, b) if self.invariant(b) => self.terms(a, out),
            Expr::Binary(BinOp::Mul, c, x) | Expr::Binary(BinOp::Mul, x, c) if self.invariant(c) => {
                out.push(((**c).clone(), self.form(x)?));
                Some(())
            }
            Expr::Binary(BinOp::Sub | BinOp::Mul, ..) => None,
            _ => {
                out.push((Expr::i32(1), self.form(e)?));
                Some(())
            }
        }
    }

    /// A mixed-radix sum: every coefficient covers the span of the terms below it.
    fn sum(&self, e: &Expr) -> Option<Form> {
        let mut terms = Vec::new();
        self.terms(e, &mut terms)?;
        // Coefficient 1 first, then constants ascending (narrower spans first among equal
        // ones: `k_1 + k_2` with `k_2` in `0..1`, as a split by 1 makes), then symbolic ones
        // in order; a varying term (at most one) is the highest digit.
        terms.sort_by_key(|(c, f)| {
            let width = f.span.as_ref().and_then(Expr::literal_value).unwrap_or(i64::MAX);
            match (f.varying, c.literal_value()) {
                (true, _) => (2, 0, 0),
                (false, Some(v)) => (0, v, width),
                (false, None) => (1, 0, 0),
            }
        });
        if terms.iter().filter(|(_, f)| f.varying).count() > 1 {
            return None;
        }
        let mut atoms = Vec::new();
        let mut span: Option<Expr> = None;
        for (k, (c, f)) in terms.into_iter().enumerate() {
            match (k, c.literal_value()) {
                (0, Some(v)) if v > 0 => {}
                (0, _) => return None,
                // Symbolic coefficients only where they equal the span below (never 0 then,
                // unless some loop below is empty).
                _ => {
                    if !span.as_ref().is_some_and(|s| le(s, &c)) {
                        return None;
                    }
                }
            }
            span = f.span.map(|s| mul(&c, &s));
            atoms.extend(f.atoms);
        }
        Some(Form { atoms, span, varying: false })
    }
}

fn atom(src: Expr, lower: Expr, modulus: Option<Expr>) -> Atom {
    Atom { src, lower, modulus }
}

/// Whether the digits `splits` of one source give all of it: their divisors chain from 1,
/// each the product of the ones below, up to a digit without `%` or to the source's span.
fn covers(splits: &[&Atom], span: Option<&Expr>) -> bool {
    let mut left: Vec<&Atom> = splits.to_vec();
    let mut cur = Expr::i32(1);
    while let Some(k) = left.iter().position(|a| same(&a.lower, &cur)) {
        let a = left.swap_remove(k);
        let Some(m) = &a.modulus else { return true };
        cur = mul(&cur, m);
        if span.is_some_and(|s| le(s, &cur)) {
            return true;
        }
    }
    false
}


/// `a * b`, folding constants and ones.
fn mul(a: &Expr, b: &Expr) -> Expr {
    match (a.literal_value(), b.literal_value()) {
        (Some(1), _) => b.clone(),
        (_, Some(1)) => a.clone(),
        (Some(x), Some(y)) if x.checked_mul(y).is_some() => Expr::i32(x * y),
        _ => Expr::binary(BinOp::Mul, a.clone(), b.clone()),
    }
}

/// The factors of a product, constants multiplied into one.
fn factors(e: &Expr, out: &mut Vec<Expr>, k: &mut i64) {
    match e {
        Expr::Binary(BinOp::Mul, a, b) => {
            factors(a, out, k);
            factors(b, out, k);
        }
        _ => match e.literal_value() {
            Some(v) => *k = k.saturating_mul(v),
            None => out.push(e.clone()),
        },
    }
}

/// Equal values, up to constant folding and the order of factors.
fn same(a: &Expr, b: &Expr) -> bool {
    if a == b {
        return true;
    }
    let (mut fa, mut fb, mut ka, mut kb) = (Vec::new(), Vec::new(), 1, 1);
    factors(a, &mut fa, &mut ka);
    factors(b, &mut fb, &mut kb);
    if ka != kb || fa.len() != fb.len() {
        return false;
    }
    for x in fa {
        match fb.iter().position(|y| *y == x) {
            Some(k) => {
                fb.swap_remove(k);
            }
            None => return false,
        }
    }
    true
}

/// `a <= b`, where provable.
fn le(a: &Expr, b: &Expr) -> bool {
    match (a.literal_value(), b.literal_value()) {
        (Some(x), Some(y)) => x <= y,
        _ => same(a, b),
    }
}

/// Whether accesses at indices `r` and `w` reach the same element only at the same values
/// of the `keep` variables: they are one expression up to renaming free variables (other
/// than `keep`) of equal span, and that expression determines every `keep` variable.
pub fn same_point(r: &[Expr], w: &[Expr], keep: &[VarId], roles: &dyn Fn(VarId) -> Role) -> bool {
    let renamable = |x: VarId, y: VarId| {
        let free = |v: VarId| !keep.contains(&v) && matches!(roles(v), Role::Free(Some(_)));
        free(x) && free(y) && roles(x) == roles(y)
    };
    if !alike(r, w, &renamable) {
        return false;
    }
    let exprs: Vec<&Expr> = r.iter().collect();
    determined(&exprs, roles).is_ok_and(|known| keep.iter().all(|s| known.contains(s)))
}

/// Whether `r` and `w` are one expression up to a consistent renaming of variables, where
/// `renamable(x, y)` allows `x` in `r` to stand for `y` in `w`.
pub fn alike(r: &[Expr], w: &[Expr], renamable: &dyn Fn(VarId, VarId) -> bool) -> bool {
    let mut renamed = Vec::new();
    r.len() == w.len() && r.iter().zip(w).all(|(a, b)| alpha_eq(a, b, renamable, &mut renamed))
}

/// Structural equality up to the renaming so far (`renamed`), extended where allowed.
fn alpha_eq(a: &Expr, b: &Expr, renamable: &dyn Fn(VarId, VarId) -> bool, renamed: &mut Vec<(VarId, VarId)>) -> bool {
    match (a, b) {
        (Expr::Var(x), Expr::Var(y)) => {
            if let Some((_, to)) = renamed.iter().find(|(from, _)| from == x) {
                return to == y;
            }
            if x == y {
                return true;
            }
            let ok = renamable(*x, *y) && !renamed.iter().any(|(_, to)| to == y);
            if ok {
                renamed.push((*x, *y));
            }
            ok
        }
        (Expr::Binary(o, a1, a2), Expr::Binary(p, b1, b2)) => {
            o == p && alpha_eq(a1, b1, renamable, renamed) && alpha_eq(a2, b2, renamable, renamed)
        }
        (Expr::Unary(o, x), Expr::Unary(p, y)) => o == p && alpha_eq(x, y, renamable, renamed),
        (Expr::Cast(s, x), Expr::Cast(t, y)) => s == t && alpha_eq(x, y, renamable, renamed),
        (Expr::Load(p, xs), Expr::Load(q, ys)) => {
            p == q && xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| alpha_eq(x, y, renamable, renamed))
        }
        _ => a == b && !matches!(a, Expr::Select(..) | Expr::Call(..) | Expr::AtomicAdd(..)),
    }
}
