// Row scatter-add (ops::Ops::scatter_add_rows), the backward pass of gather_rows and of an
// embedding lookup. Geometry E over nrows * cols; repeated indices meet in atomicAdd, so the
// order of the additions is not fixed (the CPU backend's is).
extern "C" __global__ void scatter_add_rows(const float* s_base, u64 s_off, const uint* i_base,
                                            u64 i_off, float* d_base, u64 d_off, uint nrows,
                                            uint cols, uint dst_rows) {
    const float* src = s_base + s_off;
    const uint* idx = i_base + i_off;
    float* dst = d_base + d_off;
    const u64 total = (u64)nrows * cols;
    RNN_GRID_LOOP(i, total) {
        const u64 r = i / cols;
        const u64 c = i - r * cols;
        const uint v = idx[r];
        if (rnn_valid_index(v, dst_rows)) atomicAdd(dst + (u64)v * cols + c, src[i]);
    }
}
