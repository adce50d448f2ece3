// Shared helpers of the OpenCL op set. Buffers arrive as (base, element offset) pairs; sizes
// are uint. See docs/kernel-abi.md for every entry point and its launch geometry.

// Grid-stride loops use 64-bit counters so that `i += get_global_size(0)` cannot wrap for n
// near 2^32 (which would loop forever).
#define RNN_GRID_LOOP(i, n) for (ulong i = get_global_id(0); i < (ulong)(n); i += get_global_size(0))

#define RED_THREADS 256

// Tree sum over the 256 work-items of a group; every work-item gets the result. The trailing
// barrier lets the caller reuse `sh` straight away.
inline float group_sum(__local float* sh, float v) {
    uint lid = get_local_id(0);
    sh[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = RED_THREADS / 2; s > 0; s >>= 1) {
        if (lid < s) sh[lid] += sh[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = sh[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

inline float group_max(__local float* sh, float v) {
    uint lid = get_local_id(0);
    sh[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = RED_THREADS / 2; s > 0; s >>= 1) {
        if (lid < s) sh[lid] = fmax(sh[lid], sh[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = sh[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

// Segments of 32 work-items (geometry W: a segment per row, 8 rows per group of 256). Every
// work-item of the group must call these (they contain barriers); each gets its own segment's
// result. The trailing barrier lets the caller reuse `sh` straight away.
#define SEG 32

inline float seg_sum(__local float* sh, float v) {
    uint lid = get_local_id(0);
    uint lane = lid % SEG;
    sh[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = SEG / 2; s > 0; s >>= 1) {
        if (lane < s) sh[lid] += sh[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = sh[lid - lane];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

// Arg-max over the segment; equal values keep the lower index, and index 0xffffffff marks "no
// element" (a lane with no column).
inline void seg_argmax(__local float* sh, __local uint* shi, float* v, uint* idx) {
    uint lid = get_local_id(0);
    uint lane = lid % SEG;
    sh[lid] = *v;
    shi[lid] = *idx;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = SEG / 2; s > 0; s >>= 1) {
        if (lane < s) {
            float v2 = sh[lid + s];
            uint i2 = shi[lid + s];
            if (i2 != 0xffffffffu &&
                (shi[lid] == 0xffffffffu || v2 > sh[lid] || (v2 == sh[lid] && i2 < shi[lid]))) {
                sh[lid] = v2;
                shi[lid] = i2;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    *v = sh[lid - lane];
    *idx = shi[lid - lane];
    barrier(CLK_LOCAL_MEM_FENCE);
}

// Loads of data other work-groups wrote during this launch (see rnn_last_arrival).
inline float rnn_load_coherent(__global const float* p) {
    return *(volatile __global const float*)p;
}

// The "last group" step of a deterministic one-launch grid reduction (geometry L of
// docs/kernel-abi.md): every group first stores its partials, each storing work-item then
// executing mem_fence(CLK_GLOBAL_MEM_FENCE); then all work-items call this. Work-item (0, 0)
// takes a ticket from `ticket` (0 between launches); the group that takes the last one gets
// true, resets the counter, and may read every partial with rnn_load_coherent, in a fixed
// order. `flag` is one __local uint of the calling kernel. All work-items of every group must
// reach it, with no return before it (PoCL mis-compiles barriers after an early return).
inline bool rnn_last_arrival(__global uint* ticket, uint arrivals, __local uint* flag) {
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    if (get_local_id(0) == 0 && get_local_id(1) == 0) {
        uint last = atomic_inc((volatile __global uint*)ticket) == arrivals - 1u;
        if (last) atomic_xchg((volatile __global uint*)ticket, 0u);
        *flag = last;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    bool last = *flag != 0u;
    if (last) mem_fence(CLK_GLOBAL_MEM_FENCE);
    return last;
}

// Adds this group's partial (a, b), held by work-item 0, to totals[0] (and totals[1] when
// `two`) through rnn_last_arrival, when `enabled`; partials at part[2 * group]. Every group
// runs every step (no early return: PoCL mis-compiles barriers after one), `enabled` only
// gates the final write.
inline void rnn_add_totals(float a, float b, bool two, bool enabled, __global float* totals,
                           __global float* part, __global uint* ticket, __local float* sh,
                           __local uint* flag) {
    uint lid = get_local_id(0);
    uint gid = get_group_id(0);
    uint groups = get_num_groups(0);
    if (lid == 0) {
        part[2 * gid] = a;
        part[2 * gid + 1] = b;
        mem_fence(CLK_GLOBAL_MEM_FENCE);
    }
    bool last = rnn_last_arrival(ticket, groups, flag);
    float sa = 0.0f, sb = 0.0f;
    if (last)
        for (uint j = lid; j < groups; j += RED_THREADS) {
            sa += rnn_load_coherent(part + 2 * j);
            sb += rnn_load_coherent(part + 2 * j + 1);
        }
    sa = group_sum(sh, sa);
    sb = group_sum(sh, sb);
    if (enabled && last && lid == 0) {
        totals[0] += sa;
        if (two) totals[1] += sb;
    }
}
