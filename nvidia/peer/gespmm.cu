// A GE-SpMM-shaped CSR SpMM, C = A * B (f32 values, i32 indices, B and C row-major with
// `feat` columns): the peer that `sparsec gpu-report --peer gespmm` reports beside sparsec's
// own kernel. It models the design of GE-SpMM (G. Huang, G. Dai, Y. Wang, H. Yang,
// "GE-SpMM: General-purpose Sparse Matrix-Matrix Multiplication on GPUs for Graph Neural
// Networks", SC'20; dgSPARSE-Lib): one warp per row, several rows per block; a row's column
// indices and values staged 32 at a time into shared memory by coalesced loads (CRC,
// coalesced row caching); each lane accumulating two feature columns 32 apart in registers
// (CWM, coarse-grained warp merging), reading B coalesced; C stored once. Written for sparsec
// (not taken from dgSPARSE-Lib). src/estimate.rs (`gespmm_trace`) transcribes its global
// memory accesses; keep the two in step.
//
// Launch: block (32, ROWS), grid (ceil(m / ROWS), ceil(feat / 64)).

#define ROWS 4

// Ablations that scripts/gpu-check times beside the peer (all off by default, and the
// default is what src/estimate.rs transcribes): SPARSEC_PEER_COHERENT drops `__restrict__`
// (so loads stay coherent, no `ld.global.nc`), SPARSEC_PEER_NO_STAGING reads each nonzero's
// column and value from global memory in the inner loop (no CRC), SPARSEC_PEER_NO_UNROLL
// keeps the inner loop rolled.
#ifdef SPARSEC_PEER_COHERENT
#define RESTRICT
#else
#define RESTRICT __restrict__
#endif

extern "C" __global__ void __launch_bounds__(32 * ROWS)
gespmm_csr_f32(int m, int feat, const int* RESTRICT indptr, const int* RESTRICT indices,
               const float* RESTRICT values, const float* RESTRICT b, float* RESTRICT c) {
#ifndef SPARSEC_PEER_NO_STAGING
    __shared__ int staged_col[ROWS][32];
    __shared__ float staged_val[ROWS][32];
#endif
    const int lane = threadIdx.x;
    const int slot = threadIdx.y;
    const int row = blockIdx.x * ROWS + slot;
    // The whole warp leaves together: `row` is the same for its 32 lanes.
    if (row >= m) return;
    const int col0 = blockIdx.y * 64 + lane;
    const int col1 = col0 + 32;
    const int begin = indptr[row];
    const int end = indptr[row + 1];
    float acc0 = 0.0f, acc1 = 0.0f;
    for (int base = begin; base < end; base += 32) {
#ifndef SPARSEC_PEER_NO_STAGING
        const int p = base + lane;
        if (p < end) {
            staged_col[slot][lane] = indices[p];
            staged_val[slot][lane] = values[p];
        }
        __syncwarp();
#endif
        const int count = min(32, end - base);
#ifdef SPARSEC_PEER_NO_UNROLL
#pragma unroll 1
#endif
        for (int k = 0; k < count; ++k) {
#ifdef SPARSEC_PEER_NO_STAGING
            const long long off = (long long)indices[base + k] * feat;
            const float v = values[base + k];
#else
            const long long off = (long long)staged_col[slot][k] * feat;
            const float v = staged_val[slot][k];
#endif
            if (col0 < feat) acc0 += v * b[off + col0];
            if (col1 < feat) acc1 += v * b[off + col1];
        }
        // The next chunk overwrites the staged entries.
        __syncwarp();
    }
    if (col0 < feat) c[(long long)row * feat + col0] = acc0;
    if (col1 < feat) c[(long long)row * feat + col1] = acc1;
}
