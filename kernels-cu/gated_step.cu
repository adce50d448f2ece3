// Fused LSTM and GRU time steps (geometry S, docs/kernel-abi.md): one launch per step and
// direction does the recurrent product AND the gate math. The products reuse the Elman step's
// tile machinery of rnn.cu (rs_tile_product; this file comes after it in the translation unit).
//
// A block of RS_THREADS threads owns an RS_BM x RS_BN tile (batch rows x hidden units) for ALL
// gates of those units, so the cell update stays in the thread that holds the sums:
//   forward:  one tile product per gate g, A = h_prev, W = gate g's H x H block of W_hh
//             (rows g*H ..), read transposed: thread t gets gate g of unit column t % 32 for
//             rows t / 32 + 4 i, the same positions for every gate;
//   backward: dh_prev = sum_g dgate_g(next step) W_g, one tile product per gate block of the
//             next step's gate gradient (A = its columns g*H .., rows G*H apart), summed.
// Gate order as in PyTorch: LSTM i, f, g, o; GRU r, z, n. Row b of a gate matrix holds the
// gate blocks side by side, each `hidden` wide.
//
// The backward steps carry a value per (row, unit) from step t+1 to step t in `carry`
// (`batch x hidden`): the LSTM's dc_t * f_t, the GRU's dh_t * z_t. With has_next == 0 (the last
// step) it is taken as zero and not read, and the next step's gradient is not read either;
// has_next == 2 (the LSTM's last step with a gradient reaching c_n from outside) reads `carry`
// but not the next step's gradient.

// The fused epilogues: thread (tr, tc) of a tile at (bm, bn) visits row bm + tr + 4 i, unit
// bn + tc, its products in acc[..][i] + acc[..][RS_ROWS + i].
#define GS_GATE_SUM(acc, i) ((acc)[i] + (acc)[RS_ROWS + (i)])

// gates = act(gates + h_prev W_hh^T + b_ih + b_hh) (sigmoid i, f, o; tanh g), written over the
// pre-activations x W_ih^T; c = f * c_prev + i * g; h = o * tanh(c).
extern "C" __global__ void __launch_bounds__(RS_THREADS)
    lstm_step_forward(float* gates_base, u64 gates_off, const float* h_prev_base, u64 h_prev_off,
                      const float* c_prev_base, u64 c_prev_off, const float* w_hh_base,
                      u64 w_hh_off, const float* b_ih_base, u64 b_ih_off, const float* b_hh_base,
                      u64 b_hh_off, float* c_base, u64 c_off, float* h_base, u64 h_off,
                      uint batch, uint hidden) {
    __shared__ float4 as4[2 * RS_A_STAGE / 4];
    __shared__ float4 ws4[2 * RS_W_STAGE / 4];
    float* gates = gates_base + gates_off;
    const float* h_prev = h_prev_base + h_prev_off;
    const float* c_prev = c_prev_base + c_prev_off;
    const float* W = w_hh_base + w_hh_off;
    const float* b_ih = b_ih_base + b_ih_off;
    const float* b_hh = b_hh_base + b_hh_off;
    float* c = c_base + c_off;
    float* h = h_base + h_off;
    const u64 H = hidden;
    const bool a_vec = ((u64)h_prev % 16 == 0) && (hidden % 4 == 0);
    // Gate blocks start g * H * H floats in: aligned whenever W is and hidden % 4 == 0.
    const bool w_vec = ((u64)W % 16 == 0) && (hidden % 4 == 0);
    const uint bn = blockIdx.x * RS_BN;
    const uint col = bn + threadIdx.x % RS_BN;
    const uint tr = threadIdx.x / RS_BN;
    float bias[4];
#pragma unroll
    for (int g = 0; g < 4; ++g) bias[g] = col < hidden ? b_ih[g * H + col] + b_hh[g * H + col] : 0.0f;
    const uint row_tiles = batch / RS_BM + (batch % RS_BM != 0);
    for (uint tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
        const uint bm = tile * RS_BM;
        float acc[4][2 * RS_ROWS];
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            rs_tile_product<true>(h_prev, W + g * H * H, batch, hidden, hidden, bm, bn, a_vec,
                                  w_vec, reinterpret_cast<float*>(as4),
                                  reinterpret_cast<float*>(ws4), acc[g]);
        }
        if (col >= hidden) continue;
#pragma unroll
        for (int i = 0; i < RS_ROWS; ++i) {
            const uint row = bm + tr + 4 * i;
            if (row < batch) {
                const u64 at = (u64)row * H + col;
                float* gr = gates + (u64)row * 4 * H + col;
                const float gi = rnn_sigmoid(GS_GATE_SUM(acc[0], i) + gr[0] + bias[0]);
                const float gf = rnn_sigmoid(GS_GATE_SUM(acc[1], i) + gr[H] + bias[1]);
                const float gg = tanhf(GS_GATE_SUM(acc[2], i) + gr[2 * H] + bias[2]);
                const float go = rnn_sigmoid(GS_GATE_SUM(acc[3], i) + gr[3 * H] + bias[3]);
                gr[0] = gi;
                gr[H] = gf;
                gr[2 * H] = gg;
                gr[3 * H] = go;
                const float ct = gf * c_prev[at] + gi * gg;
                c[at] = ct;
                h[at] = go * tanhf(ct);
            }
        }
    }
}

// dh_t = dh + dgates_next W_hh (4H wide, no product when has_next == 0); dc_t = carry + dh_t o
// (1 - tanh^2 c); dgates from the activated gates; carry = dc_t * f for the step before.
extern "C" __global__ void __launch_bounds__(RS_THREADS)
    lstm_step_backward(const float* dh_base, u64 dh_off, const float* dnext_base, u64 dnext_off,
                       const float* w_hh_base, u64 w_hh_off, const float* gates_base,
                       u64 gates_off, const float* c_prev_base, u64 c_prev_off,
                       const float* c_base, u64 c_off, float* carry_base, u64 carry_off,
                       float* dgates_base, u64 dgates_off, uint batch, uint hidden,
                       uint has_next) {
    __shared__ float4 as4[2 * RS_A_STAGE / 4];
    __shared__ float4 ws4[2 * RS_W_STAGE / 4];
    const float* dh = dh_base + dh_off;
    const float* dnext = dnext_base + dnext_off;
    const float* W = w_hh_base + w_hh_off;
    const float* gates = gates_base + gates_off;
    const float* c_prev = c_prev_base + c_prev_off;
    const float* c = c_base + c_off;
    float* carry = carry_base + carry_off;
    float* dgates = dgates_base + dgates_off;
    const u64 H = hidden;
    // The gate blocks of dnext start g * H floats into its 4H-wide rows.
    const bool a_vec = ((u64)dnext % 16 == 0) && (hidden % 4 == 0);
    const bool w_vec = ((u64)W % 16 == 0) && (hidden % 4 == 0);
    const uint bn = blockIdx.x * RS_BN;
    const uint col = bn + threadIdx.x % RS_BN;
    const uint tr = threadIdx.x / RS_BN;
    const uint row_tiles = batch / RS_BM + (batch % RS_BM != 0);
    for (uint tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
        const uint bm = tile * RS_BM;
        float acc[2 * RS_ROWS];
#pragma unroll
        for (int i = 0; i < 2 * RS_ROWS; ++i) acc[i] = 0.0f;
        if (has_next == 1u) {
#pragma unroll
            for (int g = 0; g < 4; ++g) {
                float part[2 * RS_ROWS];
                rs_tile_product<false>(dnext + g * H, W + g * H * H, batch, hidden, 4 * hidden,
                                       bm, bn, a_vec, w_vec, reinterpret_cast<float*>(as4),
                                       reinterpret_cast<float*>(ws4), part);
#pragma unroll
                for (int i = 0; i < 2 * RS_ROWS; ++i) acc[i] += part[i];
            }
        }
        if (col >= hidden) continue;
#pragma unroll
        for (int i = 0; i < RS_ROWS; ++i) {
            const uint row = bm + tr + 4 * i;
            if (row < batch) {
                const u64 at = (u64)row * H + col;
                const u64 ga = (u64)row * 4 * H + col;
                const float gi = gates[ga];
                const float gf = gates[ga + H];
                const float gg = gates[ga + 2 * H];
                const float go = gates[ga + 3 * H];
                const float tc = tanhf(c[at]);
                const float dht = dh[at] + GS_GATE_SUM(acc, i);
                const float dc = has_next ? carry[at] : 0.0f;
                RNN_LSTM_UNIT_BACKWARD(dgates, ga, H, dc, dht, tc, c_prev[at], gi, gf, gg, go, carry[at]);
            }
        }
    }
}

// gh = h_prev W_hh^T + b_hh; r = σ(gx_r + b_ih_r + gh_r), z = σ(gx_z + b_ih_z + gh_z),
// n = tanh(gx_n + b_ih_n + r gh_n), h = (1 - z) n + z h_prev; cache = [r, z, n, gh_n] (4H wide).
extern "C" __global__ void __launch_bounds__(RS_THREADS)
    gru_step_forward(const float* gx_base, u64 gx_off, const float* h_prev_base, u64 h_prev_off,
                     const float* w_hh_base, u64 w_hh_off, const float* b_ih_base, u64 b_ih_off,
                     const float* b_hh_base, u64 b_hh_off, float* h_base, u64 h_off,
                     float* cache_base, u64 cache_off, uint batch, uint hidden) {
    __shared__ float4 as4[2 * RS_A_STAGE / 4];
    __shared__ float4 ws4[2 * RS_W_STAGE / 4];
    const float* gx = gx_base + gx_off;
    const float* h_prev = h_prev_base + h_prev_off;
    const float* W = w_hh_base + w_hh_off;
    const float* b_ih = b_ih_base + b_ih_off;
    const float* b_hh = b_hh_base + b_hh_off;
    float* h = h_base + h_off;
    float* cache = cache_base + cache_off;
    const u64 H = hidden;
    const bool a_vec = ((u64)h_prev % 16 == 0) && (hidden % 4 == 0);
    const bool w_vec = ((u64)W % 16 == 0) && (hidden % 4 == 0);
    const uint bn = blockIdx.x * RS_BN;
    const uint col = bn + threadIdx.x % RS_BN;
    const uint tr = threadIdx.x / RS_BN;
    float bi[3], bh[3];
#pragma unroll
    for (int g = 0; g < 3; ++g) {
        bi[g] = col < hidden ? b_ih[g * H + col] : 0.0f;
        bh[g] = col < hidden ? b_hh[g * H + col] : 0.0f;
    }
    const uint row_tiles = batch / RS_BM + (batch % RS_BM != 0);
    for (uint tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
        const uint bm = tile * RS_BM;
        float acc[3][2 * RS_ROWS];
#pragma unroll
        for (int g = 0; g < 3; ++g) {
            rs_tile_product<true>(h_prev, W + g * H * H, batch, hidden, hidden, bm, bn, a_vec,
                                  w_vec, reinterpret_cast<float*>(as4),
                                  reinterpret_cast<float*>(ws4), acc[g]);
        }
        if (col >= hidden) continue;
#pragma unroll
        for (int i = 0; i < RS_ROWS; ++i) {
            const uint row = bm + tr + 4 * i;
            if (row < batch) {
                const u64 at = (u64)row * H + col;
                const float* xr = gx + (u64)row * 3 * H + col;
                const float ghr = GS_GATE_SUM(acc[0], i) + bh[0];
                const float ghz = GS_GATE_SUM(acc[1], i) + bh[1];
                const float ghn = GS_GATE_SUM(acc[2], i) + bh[2];
                const float r = rnn_sigmoid((xr[0] + bi[0]) + ghr);
                const float z = rnn_sigmoid((xr[H] + bi[1]) + ghz);
                const float n = tanhf((xr[2 * H] + bi[2]) + r * ghn);
                h[at] = (1.0f - z) * n + z * h_prev[at];
                float* kr = cache + (u64)row * 4 * H + col;
                kr[0] = r;
                kr[H] = z;
                kr[2 * H] = n;
                kr[3 * H] = ghn;
            }
        }
    }
}

// dh_t = dh + dgh_next W_hh (3H wide, no product when has_next == 0) + carry; from the cache:
// dn = dh_t (1 - z)(1 - n^2), dz = dh_t (h_prev - n) z (1 - z), dr = dn gh_n r (1 - r);
// dgx = [dr, dz, dn], dgh = [dr, dz, dn r], carry = dh_t z for the step before.
extern "C" __global__ void __launch_bounds__(RS_THREADS)
    gru_step_backward(const float* dh_base, u64 dh_off, const float* dnext_base, u64 dnext_off,
                      const float* w_hh_base, u64 w_hh_off, const float* cache_base,
                      u64 cache_off, const float* h_prev_base, u64 h_prev_off,
                      float* carry_base, u64 carry_off, float* dgx_base, u64 dgx_off,
                      float* dgh_base, u64 dgh_off, uint batch, uint hidden, uint has_next) {
    __shared__ float4 as4[2 * RS_A_STAGE / 4];
    __shared__ float4 ws4[2 * RS_W_STAGE / 4];
    const float* dh = dh_base + dh_off;
    const float* dnext = dnext_base + dnext_off;
    const float* W = w_hh_base + w_hh_off;
    const float* cache = cache_base + cache_off;
    const float* h_prev = h_prev_base + h_prev_off;
    float* carry = carry_base + carry_off;
    float* dgx = dgx_base + dgx_off;
    float* dgh = dgh_base + dgh_off;
    const u64 H = hidden;
    const bool a_vec = ((u64)dnext % 16 == 0) && (hidden % 4 == 0);
    const bool w_vec = ((u64)W % 16 == 0) && (hidden % 4 == 0);
    const uint bn = blockIdx.x * RS_BN;
    const uint col = bn + threadIdx.x % RS_BN;
    const uint tr = threadIdx.x / RS_BN;
    const uint row_tiles = batch / RS_BM + (batch % RS_BM != 0);
    for (uint tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
        const uint bm = tile * RS_BM;
        float acc[2 * RS_ROWS];
#pragma unroll
        for (int i = 0; i < 2 * RS_ROWS; ++i) acc[i] = 0.0f;
        if (has_next) {
#pragma unroll
            for (int g = 0; g < 3; ++g) {
                float part[2 * RS_ROWS];
                rs_tile_product<false>(dnext + g * H, W + g * H * H, batch, hidden, 3 * hidden,
                                       bm, bn, a_vec, w_vec, reinterpret_cast<float*>(as4),
                                       reinterpret_cast<float*>(ws4), part);
#pragma unroll
                for (int i = 0; i < 2 * RS_ROWS; ++i) acc[i] += part[i];
            }
        }
        if (col >= hidden) continue;
#pragma unroll
        for (int i = 0; i < RS_ROWS; ++i) {
            const uint row = bm + tr + 4 * i;
            if (row < batch) {
                const u64 at = (u64)row * H + col;
                const float* kr = cache + (u64)row * 4 * H + col;
                const float r = kr[0];
                const float z = kr[H];
                const float n = kr[2 * H];
                const float ghn = kr[3 * H];
                const float d = (dh[at] + GS_GATE_SUM(acc, i)) + (has_next ? carry[at] : 0.0f);
                const u64 g3 = (u64)row * 3 * H + col;
                RNN_GRU_UNIT_BACKWARD(dgx, dgh, g3, H, d, r, z, n, ghn, h_prev[at], carry[at]);
            }
        }
    }
}
