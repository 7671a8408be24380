#!/usr/bin/env python3
"""Runs sparsec's MLIR-emitted PTX on a GPU and compares it with cuSPARSE.

Usage: gpu_check.py DIR [--chip sm_80] [--data DATA_DIR] [--feat 32,128] [--reps 20]

DIR holds what `cargo run -p sparsec-backend-mlir --example emit_gpu_check -- DIR` writes:
`csrmm.<chip>.ptx`, `sddmm.<chip>.ptx` and their launch plans `csrmm.json`, `sddmm.json`
(parameters, host allocations, grid and block sizes as expressions over the scalars).
Needs CuPy, NumPy and SciPy; no Rust. For every `.mtx` in DATA_DIR ($SPARSEC_DATA, default
../shared/data) and every feature width it checks the result against cuSPARSE (SpMM through
cupyx.scipy.sparse, SDDMM through cupyx.cusparse.sddmm) and prints both times (best of REPS).
"""
import argparse, glob, json, os, sys
import numpy as np
import scipy.io, scipy.sparse as sp
import cupy as cp
import cupyx.scipy.sparse as csp

DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "f16": np.float16, "bool": np.bool_}


def load_matrix(path):
    a = sp.csr_matrix(scipy.io.mmread(path)).astype(np.float32)
    a.sum_duplicates()
    a.sort_indices()
    return a


def kernel_args(plan, arrays, scalars):
    """Flattens the calling convention: a buffer is (ptr, ptr, offset, size, stride), the
    last three as integers of the plan's `index_bits`."""
    idx = np.int32 if plan.get("index_bits", 64) == 32 else np.int64
    args = []
    for p in plan["params"]:
        if p["kind"] == "buffer":
            a = arrays[p["name"]]
            args += [a, a, idx(0), idx(a.size), idx(1)]
        else:
            args.append(DTYPES[p["dtype"]](scalars[p["name"]]))
    env = {"max": max, "min": min, **scalars}
    for al in plan["allocs"]:
        n = int(eval(al["len"], {}, env))
        buf = cp.full(max(n, 1), float(eval(al["default"], {}, env)), dtype=DTYPES[al["dtype"]])
        args += [buf, buf, idx(0), idx(n), idx(1)]
    return args


def launches(module, plan, scalars):
    env = {"max": max, "min": min, **scalars}
    out = []
    for l in plan["launches"]:
        grid = tuple(int(eval(e, {}, env)) for e in l["grid"])
        block = tuple(int(eval(e, {}, env)) for e in l["block"])
        out.append((module.get_function(l["name"]), grid, block))
    return out


def best_ms(f, reps):
    f()
    cp.cuda.Device().synchronize()
    best = float("inf")
    for _ in range(reps):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        f()
        stop.record()
        stop.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(start, stop))
    return best


def run(dirname, name, chip, arrays, scalars, reps):
    plan = json.load(open(os.path.join(dirname, f"{name}.json")))
    module = cp.RawModule(path=os.path.join(dirname, f"{name}.{chip}.ptx"))
    args = kernel_args(plan, arrays, scalars)
    ks = launches(module, plan, scalars)

    def go():
        for k, grid, block in ks:
            k(grid, block, tuple(args))

    return best_ms(go, reps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--chip", default=None)
    ap.add_argument("--data", default=os.environ.get("SPARSEC_DATA", "../shared/data"))
    ap.add_argument("--feat", default="32,128")
    ap.add_argument("--reps", type=int, default=20)
    o = ap.parse_args()
    if o.chip is None:
        o.chip = "sm_90" if int(cp.cuda.Device().compute_capability) >= 90 else "sm_80"
    rng = np.random.default_rng(0)
    failures = 0
    print(f"{'matrix':16s} {'feat':>4s} {'kernel':6s} {'sparsec ms':>10s} {'cuSPARSE ms':>11s} {'ratio':>6s}  check")
    for path in sorted(glob.glob(os.path.join(o.data, "*.mtx"))):
        a = load_matrix(path)
        m, n = a.shape
        mname = os.path.basename(path)[:-4]
        ga = csp.csr_matrix(a)
        for feat in [int(x) for x in o.feat.split(",")]:
            scalars = {"m": m, "n": n, "feat_size": feat, "nnz": a.nnz}
            indptr = cp.asarray(a.indptr.astype(np.int32))
            indices = cp.asarray(a.indices.astype(np.int32))
            # SpMM: C = A @ B.
            b = cp.asarray(rng.random((n, feat), dtype=np.float32))
            c = cp.zeros(m * feat, dtype=np.float32)
            arrays = {"a": cp.asarray(a.data), "b": b.ravel(), "c": c, "indptr": indptr, "indices": indices}
            t = run(o.dir, "csrmm", o.chip, arrays, scalars, o.reps)
            want = ga @ b
            t_ref = best_ms(lambda: ga @ b, o.reps)
            ok = bool(cp.allclose(c.reshape(m, feat), want, rtol=1e-4, atol=1e-4))
            failures += not ok
            print(f"{mname:16s} {feat:4d} {'spmm':6s} {t:10.3f} {t_ref:11.3f} {t / t_ref:6.2f}  {'ok' if ok else 'MISMATCH'}")
            # SDDMM: C[ij] = <A_i, B_j> on the pattern.
            x = cp.asarray(rng.random((m, feat), dtype=np.float32))
            y = cp.asarray(rng.random((n, feat), dtype=np.float32))
            out = cp.zeros(a.nnz, dtype=np.float32)
            arrays = {"a": x.ravel(), "b": y.ravel(), "c": out, "indptr": indptr, "indices": indices}
            t = run(o.dir, "sddmm", o.chip, arrays, scalars, o.reps)
            rows = cp.asarray(np.repeat(np.arange(m, dtype=np.int32), np.diff(a.indptr)))
            want = (x[rows] * y[indices]).sum(axis=1)
            try:
                import cupyx.cusparse as cus
                pattern = csp.csr_matrix((cp.ones(a.nnz, dtype=np.float32), indices, indptr), shape=(m, n))
                yt = cp.ascontiguousarray(y.T)
                t_ref = best_ms(lambda: cus.sddmm(x, yt, pattern, alpha=1.0, beta=0.0), o.reps)
                ref = "cuSPARSE"
            except Exception as e:  # older CuPy without the generic SDDMM
                t_ref = best_ms(lambda: (x[rows] * y[indices]).sum(axis=1), o.reps)
                ref = f"cupy gather ({type(e).__name__})"
            ok = bool(cp.allclose(out, want, rtol=1e-4, atol=1e-4))
            failures += not ok
            print(f"{mname:16s} {feat:4d} {'sddmm':6s} {t:10.3f} {t_ref:11.3f} {t / t_ref:6.2f}  {'ok' if ok else 'MISMATCH'} vs {ref}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
