// bias_act_backward's variant with the upstream gradient formed as a product in the pass
// (bias_grad_common.cuh): a family of its own, built beside `bias_grad`.

// bias_act_backward with dy = g w (g rows x k, w k x cols, 0 < k <= 16) formed in the pass and
// never stored; dz always written. `a_base` is z for GELU and leaky ReLU, y otherwise.
extern "C" __global__ void bias_act_backward_product(
    const float* g_base, u64 g_off, const float* w_base, u64 w_off, const float* a_base, u64 a_off,
    float* dz_base, u64 dz_off, float* out_base, u64 out_off, float* part_base, u64 part_off,
    uint* ticket_base, u64 ticket_off, uint rows, uint cols, uint k, uint chunk_rows, uint act,
    uint quad, float act_param) {
    bab_body(nullptr, g_base + g_off, w_base + w_off, k, a_base + a_off, dz_base + dz_off,
             out_base + out_off, part_base + part_off, ticket_base + ticket_off, rows, cols,
             chunk_rows, act, 1, quad, act_param, 0.0f);
}
