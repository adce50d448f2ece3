// The backward of bias_act_forward (geometry C): the bias gradient and the pre-activation
// gradient in one pass (bias_grad_common.cuh). A family of its own so that NVRTC builds it
// beside `reduce` and `bias_grad_product` rather than after them.

// Three blocks an SM (at most 85 registers), as when each activation had a loop of its own:
// around the out-of-line activation call the compiler would otherwise take 94 registers (two
// blocks).
extern "C" __global__ void __launch_bounds__(256, 3)
bias_act_backward(const float* dy_base, u64 dy_off, const float* z_base, u64 z_off,
                  const float* y_base, u64 y_off, float* dz_base, u64 dz_off, float* out_base,
                  u64 out_off, float* part_base, u64 part_off, uint* ticket_base,
                  u64 ticket_off, uint rows, uint cols, uint chunk_rows, uint act,
                  uint write_dz, uint quad, float act_param, float beta) {
    const float* act_in = (act == ACT_GELU || act == ACT_LEAKY) ? z_base + z_off : y_base + y_off;
    bab_body(dy_base + dy_off, nullptr, nullptr, 0, act_in, dz_base + dz_off, out_base + out_off,
             part_base + part_off, ticket_base + ticket_off, rows, cols, chunk_rows, act,
             write_dz, quad, act_param, beta);
}
