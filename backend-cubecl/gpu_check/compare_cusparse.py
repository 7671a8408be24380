#!/usr/bin/env python3
"""Compares the CubeCL CUDA outputs written by `examples/cuda_check.rs` with cuSPARSE (CuPy).

    python3 compare_cusparse.py OUT_DIR

csrmm: C = A @ B with A in CSR (cupyx.scipy.sparse.csr_matrix, cuSPARSE SpMM).
sddmm: C = (A @ B^T) sampled on the sparsity of C (dense product, gathered at the nonzeros).
bsrmm: the BSR matrix is expanded to CSR on the host, then cuSPARSE SpMM.
Exit status 1 when any output differs by more than rtol 1e-4.
"""
import glob
import json
import sys

import cupy as cp
import cupyx.scipy.sparse as sp
import numpy as np


def csrmm(d):
    s, x = d["scalars"], d["inputs"]
    m, n, f = s["m"], s["n"], s["feat_size"]
    a = sp.csr_matrix((cp.asarray(x["a"], dtype=cp.float32), cp.asarray(x["indices"]), cp.asarray(x["indptr"])), shape=(m, n))
    b = cp.asarray(x["b"], dtype=cp.float32).reshape(n, f)
    return (a @ b).ravel()


def sddmm(d):
    s, x = d["scalars"], d["inputs"]
    m, n, f = s["m"], s["n"], s["feat_size"]
    a = cp.asarray(x["a"], dtype=cp.float32).reshape(m, f)
    b = cp.asarray(x["b"], dtype=cp.float32).reshape(n, f)
    indptr = np.asarray(x["indptr"])
    rows = cp.asarray(np.repeat(np.arange(m), np.diff(indptr)))
    cols = cp.asarray(x["indices"])
    return (a[rows] * b[cols]).sum(axis=1)


def bsrmm(d):
    s, x = d["scalars"], d["inputs"]
    nb, mb, blk, f = s["nb"], s["mb"], s["blk"], s["feat_size"]
    indptr, indices = np.asarray(x["indptr"]), np.asarray(x["indices"])
    vals = np.asarray(x["a"], dtype=np.float32).reshape(-1, blk, blk)
    rows, cols, data = [], [], []
    for i in range(nb):
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            for bi in range(blk):
                for bj in range(blk):
                    rows.append(i * blk + bi)
                    cols.append(j * blk + bj)
                    data.append(vals[p, bi, bj])
    a = sp.coo_matrix((cp.asarray(data, dtype=cp.float32), (cp.asarray(rows), cp.asarray(cols))), shape=(nb * blk, mb * blk)).tocsr()
    b = cp.asarray(x["b"], dtype=cp.float32).reshape(mb * blk, f)
    return (a @ b).ravel()


def main():
    bad = 0
    for path in sorted(glob.glob(f"{sys.argv[1]}/*.json")):
        d = json.load(open(path))
        want = cp.asnumpy({"csrmm": csrmm, "sddmm": sddmm, "bsrmm": bsrmm}[d["workload"]](d))
        got = np.asarray(d["cubecl"], dtype=np.float32)
        scale = max(1.0, float(np.abs(want).max(initial=0.0)))
        err = float(np.max(np.abs(got - want) / (np.abs(want) + 1e-2 * scale), initial=0.0))
        ok = np.allclose(got, want, rtol=1e-4, atol=1e-6 * scale)
        bad += not ok
        print(f"{d['workload']:6} {d['matrix']:16} {'ok ' if ok else 'BAD'} max rel err {err:.2e}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
