#!/usr/bin/env python3
"""CPU peers of `benches/cpu.rs`, driven over stdin/stdout one line at a time so that the bench
interleaves its own rounds with theirs in one run.

Commands (one per line; each answer is one JSON line):
  ping                                  -> {}
  info                                  -> {"mkl": version, "mkl_path": MKL_VERBOSE's code-path line}
  load NAME PATH                        -> {"rows", "cols", "nnz"}
  loadcsr NAME DIR                      -> the same, from DIR/{indptr,indices,data,shape}.npy
  spmm NAME FEAT THREADS                -> {"scipy", "mkl", "mkl_ie"} best call in seconds
  spmv NAME THREADS                     -> {"scipy", "mkl", "mkl_ie"}
  sddmm NAME FEAT                       -> {"numpy"} (gather both operands, multiply, sum)
  loaddense NAME PATH                   -> {"shape"}, a dense operand from a .npy file
  peer PEER OP OUT THREADS NAME...      -> {"seconds"}: the best call of PEER (scipy, mkl,
                                           mkl-ie, numpy) computing OP on the named operands
                                           (spmm A B, spmv A x, sddmm A X Y: A's pattern
                                           sampling X·Yᵀ), its result saved to OUT (.npy)
  quit
`sparsec bench --compare` runs this file too, with scipy (and numpy) alone if MKL is absent.
`mkl` is sparse_dot_mkl's `dot_product_mkl` (a handle per call, as its users see it); `mkl_ie`
is oneMKL's inspector-executor API called directly: the handle is created, hinted and
optimised once, and only `mkl_sparse_s_mm`/`_mv` is timed. scipy and numpy use one thread.
The matrix is read as scipy does (symmetric files expanded), in float32, duplicates summed.
"""
import ctypes, glob, json, os, sys, time
import numpy as np
import scipy.io, scipy.sparse as sp

BUDGET = float(os.environ.get("SPARSEC_PEER_BUDGET", "0.15"))  # seconds per measurement


def best(f, budget=BUDGET, least=3):
    """The fastest call of `f` within `budget` seconds (at least `least` calls)."""
    f()
    t_end, n, fastest = time.perf_counter() + budget, 0, float("inf")
    while n < least or time.perf_counter() < t_end:
        t = time.perf_counter()
        f()
        fastest = min(fastest, time.perf_counter() - t)
        n += 1
    return fastest


def load_mkl():
    import sparse_dot_mkl  # noqa: F401  (loads libmkl_rt the way its users get it)
    names = glob.glob(os.path.join(sys.prefix, "lib", "libmkl_rt.so*")) + ["libmkl_rt.so.2", "libmkl_rt.so"]
    for n in names:
        try:
            return ctypes.CDLL(n, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            pass
    raise OSError("libmkl_rt not found")


class Descr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("mode", ctypes.c_int), ("diag", ctypes.c_int)]


NON_TRANSPOSE, GENERAL, NON_UNIT, ROW_MAJOR = 10, 20, 50, 101
MKL_INT = ctypes.c_int  # mkl_rt's default LP64 interface
INT_NP = np.int32
GENERAL_DESCR = Descr(GENERAL, 0, NON_UNIT)
lib = None


def mkl():
    """oneMKL's runtime, loaded at its first use (scipy and numpy peers run without it)."""
    global lib
    if lib is None:
        lib = load_mkl()
        declare(lib)
    return lib


def declare(lib):
    lib.mkl_sparse_s_mm.argtypes = [ctypes.c_int, ctypes.c_float, ctypes.c_void_p, Descr, ctypes.c_int,
                                    ctypes.c_void_p, MKL_INT, MKL_INT, ctypes.c_float, ctypes.c_void_p, MKL_INT]
    lib.mkl_sparse_s_mv.argtypes = [ctypes.c_int, ctypes.c_float, ctypes.c_void_p, Descr,
                                    ctypes.c_void_p, ctypes.c_float, ctypes.c_void_p]
    lib.mkl_sparse_set_mm_hint.argtypes = [ctypes.c_void_p, ctypes.c_int, Descr, ctypes.c_int, MKL_INT, MKL_INT]
    lib.mkl_sparse_set_mv_hint.argtypes = [ctypes.c_void_p, ctypes.c_int, Descr, MKL_INT]
    lib.mkl_sparse_optimize.argtypes = [ctypes.c_void_p]
    lib.mkl_sparse_destroy.argtypes = [ctypes.c_void_p]
    lib.MKL_Set_Num_Threads.argtypes = [ctypes.c_int]


def check(status, what):
    if status != 0:
        raise RuntimeError(f"{what} returned status {status}")


class IeHandle:
    """An inspector-executor CSR handle over arrays kept alive with it."""

    def __init__(self, a, hint):
        self.keep = (a.indptr.astype(INT_NP), a.indices.astype(INT_NP), a.data.astype(np.float32))
        ptr, idx, val = self.keep
        self.h = ctypes.c_void_p()
        p = lambda x: x.ctypes.data_as(ctypes.c_void_p)
        check(mkl().mkl_sparse_s_create_csr(ctypes.byref(self.h), 0, MKL_INT(a.shape[0]), MKL_INT(a.shape[1]),
                                          p(ptr), ctypes.c_void_p(ptr.ctypes.data + 4), p(idx), p(val)), "create_csr")
        hint(self.h)
        check(mkl().mkl_sparse_optimize(self.h), "optimize")

    def __del__(self):
        if lib is not None:
            lib.mkl_sparse_destroy(self.h)


mats, handles = {}, {}


def threads(n):
    mkl().MKL_Set_Num_Threads(int(n))


def spmm(name, feat, nthreads):
    from sparse_dot_mkl import dot_product_mkl
    a = mats[name]
    b = np.random.default_rng(1).random((a.shape[1], feat), dtype=np.float32)
    c = np.zeros((a.shape[0], feat), dtype=np.float32)
    threads(nthreads)
    key = ("mm", name, feat, nthreads)  # optimised under the thread count it runs with
    if key not in handles:
        handles[key] = IeHandle(a, lambda h: check(mkl().mkl_sparse_set_mm_hint(
            h, NON_TRANSPOSE, GENERAL_DESCR, ROW_MAJOR, MKL_INT(feat), MKL_INT(1000)), "mm_hint"))
    h = handles[key].h
    ie = lambda: check(mkl().mkl_sparse_s_mm(NON_TRANSPOSE, 1.0, h, GENERAL_DESCR, ROW_MAJOR, b.ctypes.data,
                                            feat, feat, 0.0, c.ctypes.data, feat), "s_mm")
    out = {"scipy": best(lambda: a @ b), "mkl": best(lambda: dot_product_mkl(a, b)), "mkl_ie": best(ie)}
    return out


def spmv(name, nthreads):
    from sparse_dot_mkl import dot_product_mkl
    a = mats[name]
    x = np.random.default_rng(1).random(a.shape[1], dtype=np.float32)
    y = np.zeros(a.shape[0], dtype=np.float32)
    threads(nthreads)
    key = ("mv", name, nthreads)
    if key not in handles:
        handles[key] = IeHandle(a, lambda h: check(mkl().mkl_sparse_set_mv_hint(
            h, NON_TRANSPOSE, GENERAL_DESCR, MKL_INT(1000)), "mv_hint"))
    h = handles[key].h
    ie = lambda: check(mkl().mkl_sparse_s_mv(NON_TRANSPOSE, 1.0, h, GENERAL_DESCR, x.ctypes.data, 0.0, y.ctypes.data), "s_mv")
    return {"scipy": best(lambda: a @ x), "mkl": best(lambda: dot_product_mkl(a, x)), "mkl_ie": best(ie)}


def sddmm(name, feat):
    a = mats[name]
    rng = np.random.default_rng(1)
    x = rng.random((a.shape[0], feat), dtype=np.float32)
    y = rng.random((a.shape[1], feat), dtype=np.float32)
    rows = np.repeat(np.arange(a.shape[0], dtype=np.int64), np.diff(a.indptr))
    cols = a.indices.astype(np.int64)
    return {"numpy": best(lambda: (x[rows] * y[cols]).sum(axis=1))}


dense = {}


def peer(name, op, out, nthreads, names):
    """The best call of peer `name` computing `op` on the named operands; the result of one
    more call is saved to `out`."""
    if op in ("spmm", "spmv"):
        a, b = mats[names[0]], np.ascontiguousarray(dense[names[1]], dtype=np.float32)
        if name == "scipy":
            f = lambda: a @ b
        elif name == "mkl":
            from sparse_dot_mkl import dot_product_mkl
            threads(nthreads)
            f = lambda: dot_product_mkl(a, b)
        elif name == "mkl-ie":
            threads(nthreads)
            m = mkl()
            if op == "spmm":
                feat = b.shape[1]
                c = np.zeros((a.shape[0], feat), dtype=np.float32)
                h = IeHandle(a, lambda h: check(m.mkl_sparse_set_mm_hint(
                    h, NON_TRANSPOSE, GENERAL_DESCR, ROW_MAJOR, MKL_INT(feat), MKL_INT(1000)), "mm_hint"))
                call = lambda: check(m.mkl_sparse_s_mm(NON_TRANSPOSE, 1.0, h.h, GENERAL_DESCR, ROW_MAJOR, b.ctypes.data,
                                                         feat, feat, 0.0, c.ctypes.data, feat), "s_mm")
            else:
                c = np.zeros(a.shape[0], dtype=np.float32)
                h = IeHandle(a, lambda h: check(m.mkl_sparse_set_mv_hint(
                    h, NON_TRANSPOSE, GENERAL_DESCR, MKL_INT(1000)), "mv_hint"))
                call = lambda: check(m.mkl_sparse_s_mv(NON_TRANSPOSE, 1.0, h.h, GENERAL_DESCR, b.ctypes.data, 0.0, c.ctypes.data), "s_mv")
            f = lambda: (call(), c)[1]
        else:
            raise ValueError(f"{name} does not compute {op} (scipy, mkl, mkl-ie do)")
    elif op == "sddmm":
        if name != "numpy":
            raise ValueError(f"{name} does not compute sddmm (numpy does: gather and sum)")
        a = mats[names[0]]
        x, y = dense[names[1]], dense[names[2]]
        rows = np.repeat(np.arange(a.shape[0], dtype=np.int64), np.diff(a.indptr))
        cols = a.indices.astype(np.int64)
        f = lambda: (x[rows] * y[cols]).sum(axis=1)
    else:
        raise ValueError(f"unknown operation {op}")
    seconds = best(f)
    np.save(out, np.asarray(f(), dtype=np.float32))
    return {"seconds": seconds}


def info():
    import subprocess
    code = ("import numpy as np, scipy.sparse as sp\n"
            "from sparse_dot_mkl import dot_product_mkl\n"
            "a = sp.random(64, 64, density=0.1, format='csr', dtype=np.float32)\n"
            "dot_product_mkl(a, np.ones((64, 8), dtype=np.float32))\n")
    env = dict(os.environ, MKL_VERBOSE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout
    line = next((l for l in out.splitlines() if l.startswith("MKL_VERBOSE") and "Version" not in l and "oneMKL" in l), "")
    if not line:
        line = next((l for l in out.splitlines() if l.startswith("MKL_VERBOSE")), "(MKL_VERBOSE printed nothing)")
    ver = ctypes.create_string_buffer(256)
    mkl().mkl_get_version_string(ver, 256)
    return {"mkl": ver.value.decode().strip(), "mkl_path": line.strip()}


def main():
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        try:
            if cmd[0] == "quit":
                break
            if cmd[0] == "ping":
                out = {}
            elif cmd[0] == "info":
                out = info()
            elif cmd[0] == "load":
                a = sp.csr_matrix(scipy.io.mmread(cmd[2])).astype(np.float32)
                a.sum_duplicates()
                a.sort_indices()
                mats[cmd[1]] = a
                out = {"rows": a.shape[0], "cols": a.shape[1], "nnz": int(a.nnz)}
            elif cmd[0] == "loadcsr":
                d = lambda f: np.load(os.path.join(cmd[2], f + ".npy"))
                a = sp.csr_matrix((d("data"), d("indices"), d("indptr")), shape=tuple(d("shape")))
                mats[cmd[1]] = a
                out = {"rows": a.shape[0], "cols": a.shape[1], "nnz": int(a.nnz)}
            elif cmd[0] == "loaddense":
                dense[cmd[1]] = np.load(cmd[2])
                out = {"shape": list(dense[cmd[1]].shape)}
            elif cmd[0] == "peer":
                out = peer(cmd[1], cmd[2], cmd[3], int(cmd[4]), cmd[5:])
            elif cmd[0] == "spmm":
                out = spmm(cmd[1], int(cmd[2]), int(cmd[3]))
            elif cmd[0] == "spmv":
                out = spmv(cmd[1], int(cmd[2]))
            elif cmd[0] == "sddmm":
                out = sddmm(cmd[1], int(cmd[2]))
            else:
                out = {"error": f"unknown command {cmd[0]}"}
        except Exception as e:  # reported to the bench, which prints it
            out = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
