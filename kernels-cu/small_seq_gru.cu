// The GRU entries of the block-local sequence kernels (small_seq.cu has the
// bodies): a module of their own, so a model builds only its cell's kernels.

// The entries, each body twice: `NAME` the entry, `W_GLOBAL` false (W_hh into shared memory)
// or true (`w_hh` is W_hh packed by bl_pack_w, read through the read-only L1 path).
#define BL_GRU_FORWARD(NAME, W_GLOBAL)                                                             \
    extern "C" __global__ void __launch_bounds__(1024) NAME(                                       \
        const float* gx_base, u64 gx_off, float* hs_base, u64 hs_off, const float* w_hh_base,      \
        u64 w_hh_off, const float* b_ih_base, u64 b_ih_off, const float* b_hh_base,                \
        u64 b_hh_off, float* cache_base, u64 cache_off, uint steps, uint batch, uint hidden) {     \
        bl_gru_forward<W_GLOBAL>(gx_base, gx_off, hs_base, hs_off, w_hh_base, w_hh_off,            \
            b_ih_base, b_ih_off, b_hh_base, b_hh_off, cache_base, cache_off, steps, batch,         \
            hidden);                                                                               \
    }
BL_GRU_FORWARD(gru_seq_forward_local, false)
BL_GRU_FORWARD(gru_seq_forward_l1, true)

#define BL_GRU_BACKWARD(NAME, W_GLOBAL)                                                            \
    extern "C" __global__ void __launch_bounds__(1024) NAME(                                       \
        const float* dh_base, u64 dh_off, const float* hs_base, u64 hs_off,                        \
        const float* cache_base, u64 cache_off, const float* w_hh_base, u64 w_hh_off,              \
        float* dgx_base, u64 dgx_off, float* dgh_base, u64 dgh_off, float* carry_base,             \
        u64 carry_off, uint steps, uint batch, uint hidden) {                                      \
        bl_gru_backward<W_GLOBAL>(dh_base, dh_off, hs_base, hs_off, cache_base, cache_off,         \
            w_hh_base, w_hh_off, dgx_base, dgx_off, dgh_base, dgh_off, carry_base, carry_off,      \
            steps, batch, hidden);                                                                 \
    }
BL_GRU_BACKWARD(gru_seq_backward_local, false)
BL_GRU_BACKWARD(gru_seq_backward_l1, true)
