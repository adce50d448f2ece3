// Row scatter-add (ops::Ops::scatter_add_rows), the backward pass of gather_rows and of an
// embedding lookup. Geometry E over nrows * cols; repeated indices meet in an atomic add
// (OpenCL 1.2 has no float atomics: a compare-and-swap loop on the bits), so the order of the
// additions is not fixed (the CPU backend's is).
inline void rnn_atomic_add(volatile __global float* p, float v) {
    volatile __global uint* u = (volatile __global uint*)p;
    uint old = *u;
    while (1) {
        uint seen = atomic_cmpxchg(u, old, as_uint(as_float(old) + v));
        if (seen == old) break;
        old = seen;
    }
}

__kernel void scatter_add_rows(__global const float* s_base, ulong s_off,
                               __global const uint* i_base, ulong i_off, __global float* d_base,
                               ulong d_off, uint nrows, uint cols, uint dst_rows) {
    __global const float* src = s_base + s_off;
    __global const uint* idx = i_base + i_off;
    __global float* dst = d_base + d_off;
    ulong total = (ulong)nrows * cols;
    RNN_GRID_LOOP(i, total) {
        ulong r = i / cols;
        ulong c = i - r * cols;
        uint v = idx[r];
        if (rnn_valid_index(v, dst_rows)) rnn_atomic_add(dst + (ulong)v * cols + c, src[i]);
    }
}
