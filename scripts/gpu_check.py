#!/usr/bin/env python3
"""Runs sparsec's MLIR-emitted PTX on a GPU and compares it with cuSPARSE.

Usage: gpu_check.py DIR [--chip sm_90] [--data DATA_DIR] [--feat 32,128] [--reps 20]
                        [--rmat SCALE] [--csv FILE] [--peers gespmm_peer,...]

DIR holds what `cargo run -p sparsec-backend-mlir --example emit_gpu_check -- DIR` writes: for
each variant `<workload>_<variant>.<chip>.ptx` and its launch plan `<workload>_<variant>.json`
(parameters, host allocations, grid and block sizes as expressions over the scalars); the
plan's `func` says the workload (csrmm or sddmm). Needs CuPy, NumPy and SciPy; no Rust.

For every `.mtx` in DATA_DIR ($SPARSEC_DATA, default ../shared/data), for an R-MAT graph of
2^SCALE rows and 10 * 2^SCALE edges (a=0.57, b=c=0.19; `--rmat 0` skips it) and every feature
width, each variant's result is checked against a CuPy reference and timed beside cuSPARSE
(best of REPS, CUDA events around the
launches only, outputs preallocated, CUDA graphs of 10 calls so host launch costs drop out).
cuSPARSE's SpMM is called through CuPy's low-level bindings with row-major B and C (the
fastest of its CSR algorithms counts); its SDDMM, which CuPy does not bind, through
torch.sparse.sampled_addmm. SpMM also runs the GE-SpMM-shaped peer
`nvidia/peer/gespmm.cu`, compiled here with NVRTC, and its ablations (PEER_VARIANTS). Exit status 1 when any result differs.
"""
import argparse, csv, glob, json, os, sys
import numpy as np
import scipy.io, scipy.sparse as sp
import cupy as cp
import cupyx.scipy.sparse as csp
import cupyx.cusparse as cus

HERE = os.path.dirname(os.path.abspath(__file__))
# Segment lengths the row-segment SpMM runs with (examples/csrmm_segments.sptir).
SEGMENT_LENGTHS = (32, 256)
# cusparseSpMMAlg_t values (cusparse.h); CuPy names only some of them.
SPMM_ALGS = {"SPMM_ALG_DEFAULT": 0, "SPMM_CSR_ALG1": 4, "SPMM_CSR_ALG2": 6, "SPMM_CSR_ALG3": 12}
# The GE-SpMM-shaped peer and its ablations (macros of nvidia/peer/gespmm.cu): which of its
# techniques its speed comes from.
PEER_VARIANTS = {
    "gespmm_peer": (),
    "gespmm_coherent": ("SPARSEC_PEER_COHERENT",),
    "gespmm_nostage": ("SPARSEC_PEER_NO_STAGING",),
    "gespmm_rolled": ("SPARSEC_PEER_NO_UNROLL",),
}
DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "f16": np.float16, "bool": np.bool_}


def load_matrix(path):
    a = sp.csr_matrix(scipy.io.mmread(path)).astype(np.float32)
    a.sum_duplicates()
    a.sort_indices()
    return a


def rmat(scale, edge_factor=10, seed=0):
    """An R-MAT graph (Chakrabarti et al. 2004), duplicates merged, random values."""
    rng = np.random.default_rng(seed)
    n, e = 1 << scale, edge_factor << scale
    row = np.zeros(e, dtype=np.int64)
    col = np.zeros(e, dtype=np.int64)
    for bit in range(scale):
        r = rng.random(e)
        down = r >= 0.57 + 0.19  # quadrants c, d
        right = ((r >= 0.57) & (r < 0.57 + 0.19)) | (r >= 0.57 + 0.19 + 0.19)  # b, d
        row |= down.astype(np.int64) << bit
        col |= right.astype(np.int64) << bit
    a = sp.csr_matrix((rng.random(e, dtype=np.float32), (row, col)), shape=(n, n))
    a.sum_duplicates()
    a.sort_indices()
    return a


def agrees(got, want, bound):
    """Whether f32 `got` equals the f64 `want` within 1e-4 of the error bound `bound` (the
    same sum over absolute values): large or cancelling values (bcsstk13) leave f32 sums
    far from f64 in absolute terms, while a lost or repeated term still shows."""
    return bool(cp.all(cp.abs(got.ravel().astype(cp.float64) - want.ravel()) <= 1e-4 * bound.ravel()))


def segments(indptr, max_len):
    """formats::compose::RowSegments: each row cut into segments of at most `max_len`
    entries; (segment pointer into the CSR arrays, row of each segment), as int32."""
    lens = np.diff(indptr)
    count = (lens + max_len - 1) // max_len
    seg_row = np.repeat(np.arange(len(lens), dtype=np.int64), count)
    first = np.repeat(indptr[:-1] - np.concatenate(([0], np.cumsum(count)[:-1])) * max_len, count)
    ends = np.minimum(first + (np.arange(len(seg_row)) + 1) * max_len, indptr[1:][seg_row])
    return np.concatenate(([0], ends)).astype(np.int32), seg_row.astype(np.int32)


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


NO_GRAPH = []  # capture failures seen (the first is printed)


def gpu_ms(f, reps, batch=10):
    """Milliseconds of GPU time per call of `f`: `batch` calls captured into a CUDA graph
    (so host-side launch costs drop out), the graph timed with events, best of `reps`.
    Falls back to `batch` calls launched back to back when capture fails."""
    f()
    cp.cuda.Device().synchronize()
    s = cp.cuda.Stream(non_blocking=True)
    run = None
    try:
        with s:
            s.begin_capture()
            try:
                for _ in range(batch):
                    f()
            finally:
                g = s.end_capture()
        g.upload(s)
        run = lambda: g.launch(s)
    except Exception as e:  # noqa: BLE001 - any capture failure falls back
        if not NO_GRAPH:
            print(f"  (no CUDA graph: {type(e).__name__}: {e}; timing {batch} launches back to back)", flush=True)
        NO_GRAPH.append(e)
        def run():
            with s:
                for _ in range(batch):
                    f()
    run()
    s.synchronize()
    best = float("inf")
    for _ in range(reps):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record(s)
        run()
        stop.record(s)
        stop.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(start, stop) / batch)
    return best


class CuSparse:
    """cuSPARSE's generic SpMM with descriptors made once (row-major dense operands, as
    sparsec's), called on the current stream, through CuPy's low-level bindings."""

    def __init__(self):
        from cupy_backends.cuda.libs import cusparse as L
        from cupy._core._dtype import to_cuda_dtype
        self.L, self.f32 = L, to_cuda_dtype(np.dtype(np.float32))
        self.handle = cp.cuda.device.get_cusparse_handle()
        self.alpha = np.array(1, np.float32)
        self.beta = np.array(0, np.float32)
        self.keep = []

    def csr(self, m, n, nnz, indptr, indices, values):
        L = self.L
        return L.createCsr(m, n, nnz, indptr.data.ptr, indices.data.ptr, values.data.ptr,
                           L.CUSPARSE_INDEX_32I, L.CUSPARSE_INDEX_32I, L.CUSPARSE_INDEX_BASE_ZERO, self.f32)

    def dense(self, rows, cols, a, order_row=True):
        L = self.L
        ld = cols if order_row else rows
        return L.createDnMat(rows, cols, ld, a.data.ptr, self.f32, L.CUSPARSE_ORDER_ROW if order_row else L.CUSPARSE_ORDER_COL)

    def _call(self, size_fn, fn, alg, *desc):
        L, h = self.L, self.handle
        op = L.CUSPARSE_OPERATION_NON_TRANSPOSE
        a, b, c = desc
        size = size_fn(h, op, op, self.alpha.ctypes.data, a, b, self.beta.ctypes.data, c, self.f32, alg)
        buf = cp.empty(max(size, 1), cp.int8)
        self.keep.append(buf)

        def go():  # spMM binds the handle to the current stream itself
            fn(h, op, op, self.alpha.ctypes.data, a, b, self.beta.ctypes.data, c, self.f32, alg, buf.data.ptr)
        return go

    def spmm(self, m, n, feat, indptr, indices, values, b, c, alg):
        L = self.L
        return self._call(L.spMM_bufferSize, L.spMM, alg, self.csr(m, n, int(values.size), indptr, indices, values),
                          self.dense(n, feat, b), self.dense(m, feat, c))


class Variant:
    def __init__(self, dirname, name, chip):
        self.name = name
        self.plan = json.load(open(os.path.join(dirname, f"{name}.json")))
        self.workload = self.plan["func"]
        self.module = cp.RawModule(path=os.path.join(dirname, f"{name}.{chip}.ptx"))

    def launcher(self, arrays, scalars):
        args = tuple(kernel_args(self.plan, arrays, scalars))
        env = {"max": max, "min": min, **scalars}
        ks = []
        for l in self.plan["launches"]:
            grid = tuple(int(eval(e, {}, env)) for e in l["grid"])
            block = tuple(int(eval(e, {}, env)) for e in l["block"])
            ks.append((self.module.get_function(l["name"]), grid, block))

        def go():
            for k, grid, block in ks:
                k(grid, block, args)

        return go


def torch_ms(f, reps, batch=10):
    """Milliseconds per call of the torch callable `f`: a CUDA graph of `batch` calls (torch
    captures cuSPARSE calls, CuPy does not), timed with events, best of `reps`; back-to-back
    calls if capture fails. Returns (ms, how)."""
    import torch
    how = "CUDA graph"
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                f()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(batch):
                f()
        run = g.replay
    except Exception as e:  # noqa: BLE001
        how = f"{batch} back-to-back calls ({type(e).__name__})"
        def run():
            for _ in range(batch):
                f()
    run()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        best = min(best, start.elapsed_time(stop) / batch)
    return best, how


def torch_csr(a, values=None):
    import torch
    dev = torch.device("cuda")
    vals = torch.ones(a.nnz, device=dev) if values is None else torch.from_dlpack(values)
    return torch.sparse_csr_tensor(torch.as_tensor(a.indptr.astype(np.int64), device=dev),
                                   torch.as_tensor(a.indices.astype(np.int64), device=dev), vals, size=a.shape)


def torch_spmm_ms(a, values, b, want, bound, reps):
    """cuSPARSE's SpMM through torch (CSR @ row-major dense): (ms, how); checks the result."""
    import torch
    csr, bs = torch_csr(a, values), torch.from_dlpack(b)
    f = lambda: torch.sparse.mm(csr, bs)
    if not agrees(cp.from_dlpack(f().contiguous()), want, bound):
        raise RuntimeError("torch.sparse.mm disagrees with the f64 product")
    t, how = torch_ms(f, reps)
    return t, f"torch.sparse.mm (cuSPARSE SpMM), {how}"


def torch_sddmm_ms(a, x, y, want, reps):
    """cuSPARSE's SDDMM through torch.sparse.sampled_addmm (CSR pattern, X, Y^T): (ms, how);
    checks the result against `want`."""
    import torch
    pattern, xs, yt = torch_csr(a), torch.from_dlpack(x), torch.from_dlpack(y).t()
    f = lambda: torch.sparse.sampled_addmm(pattern, xs, yt, beta=0.0, alpha=1.0)
    if not agrees(cp.from_dlpack(f().values().contiguous()), want, want):
        raise RuntimeError("torch.sparse.sampled_addmm disagrees with the f64 sum")
    t, how = torch_ms(f, reps)
    return t, f"torch.sparse.sampled_addmm (cuSPARSE SDDMM), {how}"


def gespmm(module, m, feat, indptr, indices, values, b, c):
    k = module.get_function("gespmm_csr_f32")
    grid, block = ((m + 3) // 4, (feat + 63) // 64), (32, 4)
    args = (np.int32(m), np.int32(feat), indptr, indices, values, b, c)
    return lambda: k(grid, block, args)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--chip", default=None)
    ap.add_argument("--data", default=os.environ.get("SPARSEC_DATA", "../shared/data"))
    ap.add_argument("--feat", default="32,128")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rmat", type=int, default=20)
    ap.add_argument("--csv", default=None)
    ap.add_argument("--peers", default=",".join(PEER_VARIANTS), help="peer variants to run (comma-separated)")
    o = ap.parse_args()
    dev = cp.cuda.Device()
    if o.chip is None:
        o.chip = "sm_90" if int(dev.compute_capability) >= 90 else "sm_80"
    print(f"device: {cp.cuda.runtime.getDeviceProperties(dev.id)['name'].decode()}, chip {o.chip}, "
          f"CUDA runtime {cp.cuda.runtime.runtimeGetVersion()}, driver {cp.cuda.runtime.driverGetVersion()}")
    failures = 0
    variants = []
    for p in sorted(glob.glob(os.path.join(o.dir, "*.json"))):
        try:
            variants.append(Variant(o.dir, os.path.basename(p)[:-5], o.chip))
        except Exception as e:  # noqa: BLE001
            print(f"{p}: cannot load: {type(e).__name__}: {e}")
            failures += 1
    print("variants:", ", ".join(f"{v.name} ({v.workload})" for v in variants))
    # The peer and its ablations (nvidia/peer/gespmm.cu): name -> compiled module.
    peers = {}
    source = open(os.path.join(HERE, "..", "nvidia", "peer", "gespmm.cu")).read()
    for pname, defines in PEER_VARIANTS.items():
        if pname not in o.peers.split(","):
            continue
        try:
            mod = cp.RawModule(code=source, options=("-std=c++17", *(f"-D{d}" for d in defines)))
            mod.get_function("gespmm_csr_f32")
            peers[pname] = mod
        except Exception as e:  # noqa: BLE001
            print(f"GE-SpMM peer {pname}: cannot compile: {type(e).__name__}: {e}")
            failures += pname == "gespmm_peer"
    matrices = [(os.path.basename(p)[:-4], lambda p=p: load_matrix(p)) for p in sorted(glob.glob(os.path.join(o.data, "*.mtx")))]
    if o.rmat:
        matrices.append((f"rmat{o.rmat}", lambda: rmat(o.rmat)))
    rng = np.random.default_rng(0)
    rows_out = []
    print(f"{'matrix':16s} {'rows':>8s} {'nnz':>9s} {'feat':>4s} {'kernel':14s} {'ms':>9s} {'cuSPARSE':>9s} {'ratio':>6s}  check")

    def measure(mname, a, feat, kernel, t_ref, go, check):
        """Times `go` and checks its result; a failure to launch counts as a mismatch."""
        nonlocal failures
        try:
            t = gpu_ms(go(), o.reps)
            report(mname, a, feat, kernel, t, t_ref, check())
        except Exception as e:  # noqa: BLE001
            print(f"{mname:16s} {feat:4d} {kernel:14s} FAILED: {type(e).__name__}: {e}", flush=True)
            failures += 1

    def report(mname, a, feat, kernel, t, t_ref, ok):
        nonlocal failures
        failures += not ok
        print(f"{mname:16s} {a.shape[0]:8d} {a.nnz:9d} {feat:4d} {kernel:14s} {t:9.4f} {t_ref:9.4f} {t / t_ref:6.2f}  {'ok' if ok else 'MISMATCH'}",
              flush=True)
        rows_out.append({"matrix": mname, "rows": a.shape[0], "nnz": a.nnz, "feat": feat, "kernel": kernel,
                         "ms": t, "cusparse_ms": t_ref, "ratio": t / t_ref, "ok": ok})

    try:
        lib = CuSparse()
    except Exception as e:  # noqa: BLE001
        print(f"low-level cuSPARSE bindings unavailable ({type(e).__name__}: {e}); using cupyx.cusparse wrappers")
        lib = None
    for mname, load in matrices:
        a = load()
        m, n = a.shape
        lens = np.diff(a.indptr)
        print(f"{mname}: {m} x {n}, {a.nnz} nonzeros; row length mean {lens.mean():.1f}, max {lens.max()}, "
              f"coefficient of variation {lens.std() / max(lens.mean(), 1e-9):.2f}", flush=True)
        ga = csp.csr_matrix(a)
        indptr = cp.asarray(a.indptr.astype(np.int32))
        indices = cp.asarray(a.indices.astype(np.int32))
        values = cp.asarray(a.data)
        for feat in [int(x) for x in o.feat.split(",")]:
            scalars = {"m": m, "n": n, "feat_size": feat, "nnz": a.nnz}
            # SpMM: C = A @ B.
            b = cp.asarray(rng.random((n, feat), dtype=np.float32))
            a64 = csp.csr_matrix((values.astype(cp.float64), indices, indptr), shape=(m, n))
            want = a64 @ b.astype(cp.float64)
            bound = abs(a64) @ b.astype(cp.float64)
            t_ref, how = float("inf"), ""
            try:
                t_ref, how = torch_spmm_ms(a, values, b, want, bound, o.reps)
            except Exception as e:  # noqa: BLE001
                print(f"  torch SpMM: {type(e).__name__}: {e}")
            t_ll, how_ll = float("inf"), ""
            if lib is not None:
                for alg, code in SPMM_ALGS.items():
                    try:
                        ref = cp.zeros((m, feat), dtype=np.float32)
                        f = lib.spmm(m, n, feat, indptr, indices, values, b, ref, code)
                        t = gpu_ms(f, o.reps)
                        if not agrees(ref, want, bound):
                            print(f"  cuSPARSE {alg} disagrees with the f64 product; not counted")
                        elif t < t_ll:
                            t_ll, how_ll = t, alg
                    except Exception as e:  # noqa: BLE001
                        print(f"  cuSPARSE {alg}: {type(e).__name__}: {e}")
            if how_ll:
                print(f"  cuSPARSE SpMM called directly, {how_ll}, back-to-back launches: {t_ll:.4f} ms")
            if not how and how_ll:
                t_ref, how = t_ll, f"cuSPARSE {how_ll}, back-to-back launches (host costs included)"
            if not how:
                bf = cp.asfortranarray(b)
                ref = cp.zeros((m, feat), dtype=np.float32, order="F")
                t_ref, how = gpu_ms(lambda: cus.spmm(ga, bf, c=ref), o.reps), "cupyx.cusparse.spmm (column-major)"
            print(f"  cuSPARSE SpMM: {how}")
            c = cp.zeros(m * feat, dtype=np.float32)
            spmm_ok = lambda: agrees(c, want, bound)
            for v in (v for v in variants if v.workload == "csrmm"):
                c.fill(0)
                measure(mname, a, feat, v.name, t_ref,
                        lambda: v.launcher({"a": values, "b": b.ravel(), "c": c, "indptr": indptr, "indices": indices}, scalars), spmm_ok)
            for v in (v for v in variants if v.workload == "csrmm_segments"):
                for max_len in SEGMENT_LENGTHS:
                    seg_ptr, seg_row = segments(a.indptr, max_len)
                    seg = dict(scalars, nseg=len(seg_row))
                    arrays = {"a": values, "b": b.ravel(), "c": c, "indices": indices,
                              "seg_ptr": cp.asarray(seg_ptr), "seg_row": cp.asarray(seg_row)}
                    c.fill(0)
                    measure(mname, a, feat, f"csrmm_seg{max_len}", t_ref, lambda: v.launcher(arrays, seg), spmm_ok)
            for pname, peer in peers.items():
                c.fill(0)
                measure(mname, a, feat, pname, t_ref, lambda: gespmm(peer, m, feat, indptr, indices, values, b, c), spmm_ok)
            # SDDMM: C[ij] = <X_i, Y_j> on the pattern.
            x = cp.asarray(rng.random((m, feat), dtype=np.float32))
            y = cp.asarray(rng.random((n, feat), dtype=np.float32))
            rows = cp.asarray(np.repeat(np.arange(m, dtype=np.int32), np.diff(a.indptr)))
            want = (x[rows].astype(cp.float64) * y[indices]).sum(axis=1)
            bound = want  # every term is positive (uniform [0, 1) inputs)
            try:
                t_ref, how = torch_sddmm_ms(a, x, y, want, o.reps)
            except Exception as e:  # noqa: BLE001
                print(f"  torch SDDMM: {type(e).__name__}: {e}")
                t_ref, how = gpu_ms(lambda: (x[rows] * y[indices]).sum(axis=1), o.reps), "CuPy gather and sum (not cuSPARSE)"
            print(f"  cuSPARSE SDDMM: {how}")
            out = cp.zeros(a.nnz, dtype=np.float32)
            for v in (v for v in variants if v.workload == "sddmm"):
                out.fill(0)
                measure(mname, a, feat, v.name, t_ref,
                        lambda: v.launcher({"a": x.ravel(), "b": y.ravel(), "c": out, "indptr": indptr, "indices": indices}, scalars),
                        lambda: agrees(out, want, bound))
        if lib is not None:
            lib.keep.clear()
        cp.get_default_memory_pool().free_all_blocks()
    if o.csv and rows_out:
        with open(o.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows_out[0]))
            w.writeheader()
            w.writerows(rows_out)
    print(f"{failures} mismatches")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
