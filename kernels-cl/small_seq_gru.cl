// The GRU entries of the block-local sequence kernels (small_seq.cl has the
// bodies): a module of their own, so a model builds only its cell's kernels.

// The entries, each body twice: `NAME` the entry, `W_GLOBAL` 0 (W_hh into local memory) or 1
// (`w_hh` is W_hh packed by bl_pack_w, read through the L1 cache).
#define BL_GRU_FORWARD(NAME, W_GLOBAL)                                                          \
    __kernel void NAME(__global const float* gx_base, ulong gx_off, __global float* hs_base,  \
                       ulong hs_off, __global const float* w_hh_base, ulong w_hh_off,         \
                       __global const float* b_ih_base, ulong b_ih_off,                       \
                       __global const float* b_hh_base, ulong b_hh_off,                       \
                       __global float* cache_base, ulong cache_off, uint steps, uint batch,   \
                       uint hidden, __local float* smem) {                                    \
        bl_gru_forward(gx_base + gx_off, hs_base + hs_off, w_hh_base + w_hh_off,              \
                       b_ih_base + b_ih_off, b_hh_base + b_hh_off, cache_base + cache_off,    \
                       steps, batch, hidden, smem, W_GLOBAL);                                  \
    }
BL_GRU_FORWARD(gru_seq_forward_local, 0)
BL_GRU_FORWARD(gru_seq_forward_l1, 1)

#define BL_GRU_BACKWARD(NAME, W_GLOBAL)                                                         \
    __kernel void NAME(__global const float* dh_base, ulong dh_off,                           \
                       __global const float* hs_base, ulong hs_off,                           \
                       __global const float* cache_base, ulong cache_off,                     \
                       __global const float* w_hh_base, ulong w_hh_off,                       \
                       __global float* dgx_base, ulong dgx_off, __global float* dgh_base,     \
                       ulong dgh_off, __global float* carry_base, ulong carry_off,            \
                       uint steps, uint batch, uint hidden, __local float* smem) {            \
        bl_gru_backward(dh_base + dh_off, hs_base + hs_off, cache_base + cache_off,           \
                        w_hh_base + w_hh_off, dgx_base + dgx_off, dgh_base + dgh_off,         \
                        carry_base + carry_off, steps, batch, hidden, smem, W_GLOBAL);        \
    }
BL_GRU_BACKWARD(gru_seq_backward_local, 0)
BL_GRU_BACKWARD(gru_seq_backward_l1, 1)
