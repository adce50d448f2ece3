// Warpgroup tensor-core SGEMM on NVIDIA's OpenCL (geometry T, the tickets after `part` as in
// gemm_tc.cl): row-major C = alpha op(A) op(B) + beta C with f32 accuracy, on Hopper's
// asynchronous warpgroup MMA (wgmma), built only with RNN_CL_NV_WGMMA defined
// (src/backend/opencl/sm90a.rs: NVIDIA's OpenCL platform on a compute capability 9.0 GPU).
//
// The numerics of kernels-cu/gemm_wg.cu (3xTF32: lo*hi + hi*lo + hi*hi of TF32 parts, each
// k-tile's three products summed by the tensor cores, then added to the accumulator with an
// IEEE f32 add), in a shape that fits OpenCL: a work-group has at most 48 KB of static local
// memory and no dynamic opt-in, where the CUDA kernel takes 128 KB. Block tile 64 x 64 x 16,
// 128 work-items = 1 warpgroup (m64n64k8, two k-steps a tile). wgmma takes TF32 operands
// K-major only, so both tiles are stored [row][k], 64 bytes a row, in the 64-byte swizzle
// (16-byte chunk c of row r at c ^ ((r / 2) % 4)): four tiles of 4 KB a stage (A hi, A lo, B hi,
// B lo), two stages, 32 KB. Global -> registers -> split -> local memory: while the tensor cores
// work on tile t, the work-items store tile t + 1 (loaded during tile t - 1) into the other
// stage and issue the loads of tile t + 2. Four groups an SM hide each other's waits (a
// k-tile's loads, the MMAs, the barrier).
//
// NVIDIA's OpenCL compiler emits PTX for `.target sm_90`, where wgmma does not exist. Every
// instruction only sm_90a has is therefore written behind the marker WGL_SM90A, a PTX comment:
// the program builds for sm_90 with those lines inert, and the host (sm90a.rs) strips the
// marker, retargets the PTX to sm_90a and builds that as the program binary. The kernel never
// runs from the first build. A split grid adds its own k splits, as gemm_tc.cl's do
// (tcl_add_splits), so it follows gemm_tc.cl in the translation unit.

#ifdef RNN_CL_NV_WGMMA

// Must equal sm90a.rs's MARKER.
#define WGL_SM90A "//@sm_90a "
#define WGL_BM 64
#define WGL_BN 64
#define WGL_BK 16
#define WGL_THREADS 128
#define WGL_A_BYTES (WGL_BM * WGL_BK * 4)
#define WGL_B_BYTES (WGL_BN * WGL_BK * 4)
// A hi, A lo, B hi, B lo; a multiple of 512 bytes, so every tile keeps the swizzle's alignment.
#define WGL_STAGE_BYTES (2 * WGL_A_BYTES + 2 * WGL_B_BYTES)

// d (+)= A B for one warpgroup: a 64 x 64 accumulator tile, 32 floats a work-item, named one by
// one (inline PTX has no register arrays). scale_d = 0 overwrites d.
#define WGL_MMA(d, a_desc, b_desc, scale_d)                                                     \
    __asm__ volatile(                                                                          \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" WGL_SM90A                                 \
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "                                 \
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"                               \
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "                    \
        "%32, %33, p, 1, 1;\n}\n"                                                              \
        : "+f"((d)[0]), "+f"((d)[1]), "+f"((d)[2]), "+f"((d)[3]), "+f"((d)[4]),                \
          "+f"((d)[5]), "+f"((d)[6]), "+f"((d)[7]), "+f"((d)[8]), "+f"((d)[9]),                \
          "+f"((d)[10]), "+f"((d)[11]), "+f"((d)[12]), "+f"((d)[13]), "+f"((d)[14]),           \
          "+f"((d)[15]), "+f"((d)[16]), "+f"((d)[17]), "+f"((d)[18]), "+f"((d)[19]),           \
          "+f"((d)[20]), "+f"((d)[21]), "+f"((d)[22]), "+f"((d)[23]), "+f"((d)[24]),           \
          "+f"((d)[25]), "+f"((d)[26]), "+f"((d)[27]), "+f"((d)[28]), "+f"((d)[29]),           \
          "+f"((d)[30]), "+f"((d)[31])                                                         \
        : "l"(a_desc), "l"(b_desc), "r"(scale_d))

// The local-memory window address of p (NVIDIA's OpenCL keeps __local pointers as such).
TCL_INLINE uint wgl_addr(__local const void* p) { return (uint)(size_t)p; }

// Byte offset of the 16-byte chunk (row, k / 4) in a K-major tile of 16-deep rows, 64-byte
// swizzle.
TCL_INLINE uint wgl_swizzle(uint row, uint kc) {
    return row * 64u + (((kc ^ (row >> 1)) & 3u) << 4);
}

// Shared-memory matrix descriptor: start address, leading byte offset 16 (unused by swizzled
// K-major layouts), 512 bytes between 8-row groups, 64-byte swizzle. Stepping k by 8 adds 32
// bytes to the start; the hardware applies the swizzle to the full address, which is why every
// tile starts on a 512-byte boundary.
TCL_INLINE ulong wgl_desc(uint addr) {
    return (ulong)((addr & 0x3FFFFu) >> 4) | ((ulong)1 << 16) | ((ulong)(512 >> 4) << 32) |
           ((ulong)2 << 62);
}

// Keeps the compiler from moving accumulator accesses across the asynchronous MMAs.
TCL_INLINE void wgl_pin(float* d) {
#pragma unroll
    for (uint i = 0; i < 32; ++i) __asm__ volatile("" : "+f"(d[i])::"memory");
}

// Chunk q (4 consecutive k of one row) of a 64 x 16 slab at rows r0, k kb, zero outside
// (r_lim, k_lim). K_CONTIG: element (r, k) at src[r * ld + k] (chunk q is row q / 4, k-chunk
// q % 4, one float4 load); else at src[k * ld + r] (row q % 64, k-chunk q / 64: a warp reads 32
// consecutive rows of one k).
TCL_INLINE float4 wgl_fetch(__global const float* src, uint ld, uint r0, uint r_lim, uint kb,
                            uint k_lim, uint q, bool vec, const bool K_CONTIG) {
    if (K_CONTIG) return sg_load4(src, r0 + q / 4, r_lim, kb + (q % 4) * 4, k_lim, ld, vec);
    const uint r = r0 + q % 64, k = kb + (q / 64) * 4;
    float4 v = (float4)(0.0f);
    if (r < r_lim) {
        if (k < k_lim) v.x = src[(ulong)k * ld + r];
        if (k + 1 < k_lim) v.y = src[(ulong)(k + 1) * ld + r];
        if (k + 2 < k_lim) v.z = src[(ulong)(k + 2) * ld + r];
        if (k + 3 < k_lim) v.w = src[(ulong)(k + 3) * ld + r];
    }
    return v;
}

// Chunk q of wgl_fetch's slab, split into TF32 (hi, lo), into the hi and lo tiles.
TCL_INLINE void wgl_put(__local char* hi, __local char* lo, uint q, float4 v,
                        const bool K_CONTIG) {
    const uint off = K_CONTIG ? wgl_swizzle(q / 4, q % 4) : wgl_swizzle(q % 64, q / 64);
    const uint2 x = tcl_split(v.x), y = tcl_split(v.y), z = tcl_split(v.z), w = tcl_split(v.w);
    *(__local uint4*)(hi + off) = (uint4)(x.x, y.x, z.x, w.x);
    *(__local uint4*)(lo + off) = (uint4)(x.y, y.y, z.y, w.y);
}

// The block tile of group (x, y) summed over k in [k0, k_end), as tcl_body's (unsplit: C =
// alpha sum + beta C; split: the raw sum into part[z], and the tile's last group adds the
// splits into C). TA, TB are literals at the call site (sgemm_wg64, TCL_TRANSPOSES).
TCL_INLINE void wgl_body(__global const float* restrict A, __global const float* restrict B,
                         __global float* restrict C, __global float* restrict part,
                         __global uint* tickets, uint m, uint n, uint k, uint k0, uint k_end,
                         float alpha, float beta, __local char* smem, __local uint* flag,
                         const bool TA, const bool TB) {
    const uint bm = get_group_id(1) * WGL_BM, bn = get_group_id(0) * WGL_BN;
    const uint lda = TA ? m : k, ldb = TB ? k : n;
    const bool a_vec = ((ulong)A % 16 == 0) && (lda % 4 == 0);
    const bool b_vec = ((ulong)B % 16 == 0) && (ldb % 4 == 0);
    const uint tid = get_local_id(0);
    const uint warp = tid / 32, lane = tid % 32;

    float acc[32], d[32];
#pragma unroll
    for (uint i = 0; i < 32; ++i) acc[i] = 0.0f;

    // Chunks tid and tid + 128 of each operand's slab. A's k is contiguous unless it is
    // transposed; B's only when it is.
    float4 ra0, ra1, rb0, rb1;
    const uint ktiles = k_end > k0 ? (k_end - k0 + WGL_BK - 1) / WGL_BK : 0;
#define WGL_FETCH(KB)                                                                          \
    do {                                                                                       \
        ra0 = wgl_fetch(A, lda, bm, m, (KB), k_end, tid, a_vec, !TA);                          \
        ra1 = wgl_fetch(A, lda, bm, m, (KB), k_end, tid + WGL_THREADS, a_vec, !TA);            \
        rb0 = wgl_fetch(B, ldb, bn, n, (KB), k_end, tid, b_vec, TB);                           \
        rb1 = wgl_fetch(B, ldb, bn, n, (KB), k_end, tid + WGL_THREADS, b_vec, TB);             \
    } while (0)
#define WGL_PUT(STAGE)                                                                         \
    do {                                                                                       \
        __local char* s_ = (STAGE);                                                            \
        wgl_put(s_, s_ + WGL_A_BYTES, tid, ra0, !TA);                                          \
        wgl_put(s_, s_ + WGL_A_BYTES, tid + WGL_THREADS, ra1, !TA);                            \
        wgl_put(s_ + 2 * WGL_A_BYTES, s_ + 2 * WGL_A_BYTES + WGL_B_BYTES, tid, rb0, TB);       \
        wgl_put(s_ + 2 * WGL_A_BYTES, s_ + 2 * WGL_A_BYTES + WGL_B_BYTES, tid + WGL_THREADS,   \
                rb1, TB);                                                                      \
        /* Generic-proxy stores must be visible to the MMA's asynchronous proxy. */            \
        __asm__ volatile("fence.proxy.async.shared::cta;" ::: "memory");                       \
    } while (0)
    // Registers carry the tile after the one being multiplied: its global loads are issued one
    // whole iteration before they are stored, which hides their latency behind the MMAs.
    if (ktiles > 0) {
        WGL_FETCH(k0);
        WGL_PUT(smem);
        if (ktiles > 1) WGL_FETCH(k0 + WGL_BK);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint kt = 0; kt < ktiles; ++kt) {
        __local char* stage = smem + (kt & 1) * WGL_STAGE_BYTES;
        const uint a_hi = wgl_addr(stage), a_lo = a_hi + WGL_A_BYTES;
        const uint b_hi = a_hi + 2 * WGL_A_BYTES, b_lo = b_hi + WGL_B_BYTES;
        wgl_pin(d);
        __asm__ volatile(WGL_SM90A "wgmma.fence.sync.aligned;" ::: "memory");
        // Small products first; the first overwrites d. Each k-step of 8 is 32 bytes along the
        // swizzled rows.
        WGL_MMA(d, wgl_desc(a_lo), wgl_desc(b_hi), 0);
        WGL_MMA(d, wgl_desc(a_hi), wgl_desc(b_lo), 1);
        WGL_MMA(d, wgl_desc(a_lo + 32), wgl_desc(b_hi + 32), 1);
        WGL_MMA(d, wgl_desc(a_hi + 32), wgl_desc(b_lo + 32), 1);
        WGL_MMA(d, wgl_desc(a_hi), wgl_desc(b_hi), 1);
        WGL_MMA(d, wgl_desc(a_hi + 32), wgl_desc(b_hi + 32), 1);
        __asm__ volatile(WGL_SM90A "wgmma.commit_group.sync.aligned;" ::: "memory");
        wgl_pin(d);
        if (kt + 1 < ktiles) {
            // The other stage was last read by the previous tile's MMAs, waited for below.
            WGL_PUT(smem + ((kt + 1) & 1) * WGL_STAGE_BYTES);
            if (kt + 2 < ktiles) WGL_FETCH(k0 + (kt + 2) * WGL_BK);
        }
        __asm__ volatile(WGL_SM90A "wgmma.wait_group.sync.aligned 0;" ::: "memory");
        wgl_pin(d);
#pragma unroll
        for (uint i = 0; i < 32; ++i) acc[i] += d[i];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#undef WGL_FETCH
#undef WGL_PUT

    // acc[4c + q] is tcl_store_tile's v[0][c][q] for the warp's 16 rows and 8 column tiles c:
    // two halves of 4 column tiles, 32 columns apart.
    const uint row0 = bm + warp * 16, g = lane / 4, t = lane % 4;
    float(*half0)[TCL_MAX_T][4] = (float(*)[TCL_MAX_T][4])acc;
    float(*half1)[TCL_MAX_T][4] = (float(*)[TCL_MAX_T][4])(acc + 16);
    const uint splits = get_num_groups(2);
    const uint z = get_group_id(2);
    if (splits == 1) {
        tcl_store_tile(C, half0, alpha, beta, m, n, row0, bn, g, t, 1, 4);
        tcl_store_tile(C, half1, alpha, beta, m, n, row0, bn + 32, g, t, 1, 4);
        return;
    }
    __global float* pz = part + z * ((ulong)m * n);
    tcl_store_tile(pz, half0, 1.0f, 0.0f, m, n, row0, bn, g, t, 1, 4);
    tcl_store_tile(pz, half1, 1.0f, 0.0f, m, n, row0, bn + 32, g, t, 1, 4);
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    const uint tile = get_group_id(1) * get_num_groups(0) + get_group_id(0);
    if (!rnn_last_arrival(tickets + tile, splits, flag)) return;
    tcl_add_splits(C, part, half0, z, splits, alpha, beta, m, n, row0, bn, g, t, 1, 4);
    tcl_add_splits(C, part, half1, z, splits, alpha, beta, m, n, row0, bn + 32, g, t, 1, 4);
}

// The `T` arguments plus the tickets, as gemm_tc.cl's entries. Two stages and the slack to put
// them on a 512-byte boundary.
__kernel __attribute__((reqd_work_group_size(WGL_THREADS, 1, 1))) void sgemm_wg64(
    __global const float* restrict a_base, ulong a_off, __global const float* restrict b_base,
    ulong b_off, __global float* restrict c_base, ulong c_off, __global float* restrict part_base,
    ulong part_off, __global uint* ticket_base, ulong ticket_off, uint m, uint n, uint k,
    uint trans_a, uint trans_b, uint k_chunk, float alpha, float beta) {
    __local float4 smem4[(2 * WGL_STAGE_BYTES + 512) / 16];
    __local uint flag;
    __local char* raw = (__local char*)smem4;
    __local char* smem = raw + ((512u - (wgl_addr(raw) & 511u)) & 511u);
    const uint k0 = (uint)min((ulong)get_group_id(2) * k_chunk, (ulong)k);
    const uint k1 = (uint)min((ulong)k0 + k_chunk, (ulong)k);
    __global const float* A = a_base + a_off;
    __global const float* B = b_base + b_off;
    __global float* C = c_base + c_off;
    __global float* part = part_base + part_off;
    __global uint* tickets = ticket_base + ticket_off;
#define WGL_BODY(TA, TB)                                                                       \
    wgl_body(A, B, C, part, tickets, m, n, k, k0, k1, alpha, beta, smem, &flag, TA, TB)
    TCL_TRANSPOSES(WGL_BODY, trans_a, trans_b)
#undef WGL_BODY
}

#endif  // RNN_CL_NV_WGMMA
