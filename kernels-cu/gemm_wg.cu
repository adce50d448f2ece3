// Warpgroup tensor-core SGEMM (geometry W, CUDA sm_90a only): row-major C = alpha op(A) op(B) +
// beta C with f32 accuracy, the sgemm_tc ABI (split k into `part` when gridDim.z > 1).
//
// Same numerics as gemm_tc.cu (3xTF32: hi*hi + hi*lo + lo*hi of TF32 parts, each 32-deep k-tile's
// products summed by the tensor cores and then added to the accumulator with an IEEE f32 add), but
// on Hopper's asynchronous warpgroup MMA (wgmma), which reads both operands straight from shared
// memory: mma.sync needs every fragment loaded into registers by every warp, which keeps
// sgemm_tc128 below cuBLAS's f32 GEMM, while this kernel passes it where its grid fills the GPU
// (docs/performance.md, GEMM).
//
// Block tile 128 x 128 x 32, 256 threads = 2 warpgroups, each 64 x 128 (m64n128k8). wgmma takes
// TF32 operands only K-major, so both tiles are stored [row][k] (row = m for A, n for B), 128
// bytes a row, in the 128-byte swizzle (16-byte chunk c of row r at c ^ (r % 8)): four tiles a
// stage (A hi, A lo, B hi, B lo, 16 KB each), two stages. Global -> registers -> split ->
// shared: while the tensor cores work on tile t, the threads store tile t + 1 (loaded during
// tile t - 1) into the other stage and issue the loads of tile t + 2.
// Operands whose k is contiguous in memory load 4-wide along k; the others load one float a
// thread along the contiguous dimension (a warp reads 128 contiguous bytes) and store 4 k of one
// row at once. Both store patterns are free of bank conflicts in the swizzled layout.
//
// Only built where NVRTC targets sm_90a (__CUDA_ARCH_FEAT_SM90_ALL); the host picks these kernels
// only then (src/backend/cuda/kernels.rs). Follows gemm_tc.cu in the translation unit and uses
// gemm_common.cuh's tc_out and tc_store_pair.

#if !defined(RNN_HIP) && defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)

#define WG_BM 128
#define WG_BN 128
#define WG_BK 32
#define WG_THREADS 256
#define WG_TILE_BYTES (128 * WG_BK * 4)
#define WG_STAGE_BYTES (4 * WG_TILE_BYTES)

// The 64 accumulator registers are named one by one: inline PTX has no register arrays.
__device__ __forceinline__ void wg_mma_n128(float* d, u64 a_desc, u64 b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
        "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
        "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
        "%64, %65, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),
          "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
          "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
          "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
          "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
          "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),
          "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
          "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(a_desc), "l"(b_desc), "r"(scale_d));
}

__device__ __forceinline__ unsigned wg_smem_addr(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

// Byte offset of (row, k) in a 128 x 32 K-major tile with the 128-byte swizzle.
__device__ __forceinline__ unsigned wg_swizzle(unsigned row, unsigned k) {
    return (row >> 3) * 1024u + (row & 7u) * 128u + (((k >> 2) ^ (row & 7u)) << 4) + (k & 3u) * 4u;
}

// Shared-memory matrix descriptor: start address, leading byte offset 16 (unused by swizzled
// K-major layouts), stride 1024 bytes between 8-row groups, 128-byte swizzle. Stepping k by 8
// adds 32 bytes to the start; the hardware applies the swizzle to the full address, which is
// why every tile starts on a 1024-byte boundary.
__device__ __forceinline__ u64 wg_desc(unsigned addr) {
    return (u64)((addr & 0x3FFFFu) >> 4) | ((u64)1 << 16) | ((u64)(1024 >> 4) << 32) |
           ((u64)1 << 62);
}

__device__ __forceinline__ void wg_split(float x, float& hi, float& lo) {
    unsigned h, l;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(h) : "f"(x));
    const float rest = x - __uint_as_float(h);
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(l) : "f"(rest));
    hi = __uint_as_float(h);
    lo = __uint_as_float(l);
}

// Keeps the compiler from moving accumulator accesses across the asynchronous MMAs.
__device__ __forceinline__ void wg_pin(float* d) {
#pragma unroll
    for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// One operand's 128-row x 32-deep slab in registers, 16 floats a thread. K_CONTIG: element (r, k)
// at src[r * ld + k]; else at src[k * ld + r].
template <bool K_CONTIG>
struct WgSlab {
    float v[4][4];

    __device__ __forceinline__ void load(const float* __restrict__ src, uint ld, uint r0,
                                         uint r_lim, uint k0, uint k_lim, bool vec) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const uint q = threadIdx.x + WG_THREADS * j;
            if (K_CONTIG) {
                const uint r = r0 + (q >> 3), k = k0 + (q & 7u) * 4u;
                const bool row_in = r < r_lim;
                const float* p = src + (u64)r * ld + k;
                if (vec && row_in && k + 3 < k_lim) {
                    const float4 t = __ldg(reinterpret_cast<const float4*>(p));
                    v[j][0] = t.x;
                    v[j][1] = t.y;
                    v[j][2] = t.z;
                    v[j][3] = t.w;
                } else {
#pragma unroll
                    for (int i = 0; i < 4; ++i)
                        v[j][i] = (row_in && k + i < k_lim) ? __ldg(p + i) : 0.0f;
                }
            } else {
                const uint r = r0 + (q & 127u), k = k0 + (q >> 7) * 4u;
                const bool row_in = r < r_lim;
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    v[j][i] = (row_in && k + i < k_lim) ? __ldg(src + (u64)(k + i) * ld + r) : 0.0f;
            }
        }
    }

    __device__ __forceinline__ void store(char* hi_tile, char* lo_tile) const {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const uint q = threadIdx.x + WG_THREADS * j;
            const unsigned off =
                K_CONTIG ? wg_swizzle(q >> 3, (q & 7u) * 4u) : wg_swizzle(q & 127u, (q >> 7) * 4u);
            float h[4], l[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) wg_split(v[j][i], h[i], l[i]);
            *reinterpret_cast<float4*>(hi_tile + off) = make_float4(h[0], h[1], h[2], h[3]);
            *reinterpret_cast<float4*>(lo_tile + off) = make_float4(l[0], l[1], l[2], l[3]);
        }
    }
};

template <bool TA, bool TB>
__device__ __forceinline__ void sgemm_wg_body(const float* __restrict__ A,
                                              const float* __restrict__ B, float* __restrict__ C,
                                              float* __restrict__ part, uint m, uint n, uint k,
                                              uint k_chunk, float alpha, float beta, char* smem) {
    const uint bm = blockIdx.y * WG_BM, bn = blockIdx.x * WG_BN;
    const uint k0 = blockIdx.z * k_chunk;
    const uint k_end = min(k, k0 + k_chunk);
    const uint lda = TA ? m : k, ldb = TB ? k : n;
    const bool a_vec = ((u64)A % 16 == 0) && (lda % 4 == 0);
    const bool b_vec = ((u64)B % 16 == 0) && (ldb % 4 == 0);
    // A's k is contiguous unless it is transposed; B's only when it is.
    WgSlab<!TA> sa;
    WgSlab<TB> sb;
    const int wg = threadIdx.x / 128;
    const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;

    float acc[64], d[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;

    // Registers carry the tile after the one being multiplied: its global loads are issued one
    // whole iteration before they are stored, which hides their latency behind the MMAs.
    const uint ktiles = k_end > k0 ? (k_end - k0 + WG_BK - 1) / WG_BK : 0;
    if (ktiles > 0) {
        sa.load(A, lda, bm, m, k0, k_end, a_vec);
        sb.load(B, ldb, bn, n, k0, k_end, b_vec);
        sa.store(smem, smem + WG_TILE_BYTES);
        sb.store(smem + 2 * WG_TILE_BYTES, smem + 3 * WG_TILE_BYTES);
        // Generic-proxy stores must be visible to the MMA's asynchronous proxy.
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        if (ktiles > 1) {
            sa.load(A, lda, bm, m, k0 + WG_BK, k_end, a_vec);
            sb.load(B, ldb, bn, n, k0 + WG_BK, k_end, b_vec);
        }
    }
    __syncthreads();
    for (uint kt = 0; kt < ktiles; ++kt) {
        char* stage = smem + (kt & 1) * WG_STAGE_BYTES;
        const unsigned a_hi = wg_smem_addr(stage) + wg * (64 * 128), a_lo = a_hi + WG_TILE_BYTES;
        const unsigned b_hi = wg_smem_addr(stage + 2 * WG_TILE_BYTES), b_lo = b_hi + WG_TILE_BYTES;
        wg_pin(d);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        // Small products first; the first MMA of the tile overwrites d (scale-d = 0).
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            wg_mma_n128(d, wg_desc(a_lo + 32 * s), wg_desc(b_hi + 32 * s), s > 0);
            wg_mma_n128(d, wg_desc(a_hi + 32 * s), wg_desc(b_lo + 32 * s), 1);
        }
#pragma unroll
        for (int s = 0; s < 4; ++s)
            wg_mma_n128(d, wg_desc(a_hi + 32 * s), wg_desc(b_hi + 32 * s), 1);
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        wg_pin(d);
        if (kt + 1 < ktiles) {
            // The other stage was last read by the previous tile's MMAs, waited for below.
            char* next = smem + ((kt + 1) & 1) * WG_STAGE_BYTES;
            sa.store(next, next + WG_TILE_BYTES);
            sb.store(next + 2 * WG_TILE_BYTES, next + 3 * WG_TILE_BYTES);
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            if (kt + 2 < ktiles) {
                const uint kn = k0 + (kt + 2) * WG_BK;
                sa.load(A, lda, bm, m, kn, k_end, a_vec);
                sb.load(B, ldb, bn, n, kn, k_end, b_vec);
            }
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        wg_pin(d);
#pragma unroll
        for (int i = 0; i < 64; ++i) acc[i] += d[i];
        __syncthreads();
    }

    const TcOut o = tc_out(C, part, m, n, alpha, beta);
    // acc[4c + {0,1}]: row 16 warp + lane / 4, columns 8c + 2 (lane % 4) + {0,1}; {2,3}: row + 8.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const uint row = bm + wg * 64 + warp * 16 + lane / 4 + h * 8;
        if (row >= m) continue;
#pragma unroll
        for (int c = 0; c < 16; ++c) {
            const uint col = bn + c * 8 + (lane % 4) * 2;
            tc_store_pair(o.out + (u64)row * n + col, o.a_s * acc[4 * c + 2 * h],
                          o.a_s * acc[4 * c + 2 * h + 1], o.b_s, o.pair, col, n);
        }
    }
}

// Dynamic shared memory: two stages and the slack to align them to 1024 bytes
// (SGEMM_WG_SHARED_BYTES on the host).
extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
    sgemm_wg128(const float* a_base, u64 a_off, const float* b_base, u64 b_off, float* c_base,
                u64 c_off, float* part_base, u64 part_off, uint m, uint n, uint k, uint trans_a,
                uint trans_b, uint k_chunk, float alpha, float beta) {
    extern __shared__ __align__(1024) char wg_dynamic[];
    char* smem = wg_dynamic + ((1024u - (wg_smem_addr(wg_dynamic) & 1023u)) & 1023u);
    const float* A = a_base + a_off;
    const float* B = b_base + b_off;
    float* C = c_base + c_off;
    float* part = part_base + part_off;
    if (trans_a) {
        if (trans_b) {
            sgemm_wg_body<true, true>(A, B, C, part, m, n, k, k_chunk, alpha, beta, smem);
        } else {
            sgemm_wg_body<true, false>(A, B, C, part, m, n, k, k_chunk, alpha, beta, smem);
        }
    } else {
        if (trans_b) {
            sgemm_wg_body<false, true>(A, B, C, part, m, n, k, k_chunk, alpha, beta, smem);
        } else {
            sgemm_wg_body<false, false>(A, B, C, part, m, n, k, k_chunk, alpha, beta, smem);
        }
    }
}

#endif  // CUDA sm_90a
