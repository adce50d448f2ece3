// Recurrent cell steps (geometry E over batch*hidden). Gate blocks follow PyTorch: LSTM i, f, g, o;
// GRU r, z, n. Row b of a gate matrix holds the blocks side by side, each `hidden` wide.

extern "C" __global__ void rnn_cell_forward(const float* pre_base, u64 pre_off,
                                            const float* b_ih_base, u64 b_ih_off,
                                            const float* b_hh_base, u64 b_hh_off,
                                            float* h_base, u64 h_off, uint batch, uint hidden,
                                            uint act, float act_param) {
    const float* pre = pre_base + pre_off;
    const float* b_ih = b_ih_base + b_ih_off;
    const float* b_hh = b_hh_base + b_hh_off;
    float* h = h_base + h_off;
    const u64 n = (u64)batch * hidden;
    RNN_GRID_LOOP(i, n) {
        const uint j = (uint)(i % hidden);
        h[i] = act_apply(pre[i] + b_ih[j] + b_hh[j], act, act_param);
    }
}

extern "C" __global__ void lstm_cell_forward(float* gates_base, u64 gates_off,
                                             const float* c_prev_base, u64 c_prev_off,
                                             float* c_base, u64 c_off, float* h_base, u64 h_off,
                                             uint batch, uint hidden) {
    float* gates = gates_base + gates_off;
    const float* c_prev = c_prev_base + c_prev_off;
    float* c = c_base + c_off;
    float* h = h_base + h_off;
    const u64 n = (u64)batch * hidden;
    RNN_GRID_LOOP(i, n) {
        const u64 b = i / hidden;
        const u64 j = i - b * hidden;
        float* g = gates + b * 4 * hidden + j;
        const float gi = sigmoidf_(g[0]);
        const float gf = sigmoidf_(g[hidden]);
        const float gg = tanhf(g[2 * (u64)hidden]);
        const float go = sigmoidf_(g[3 * (u64)hidden]);
        g[0] = gi;
        g[hidden] = gf;
        g[2 * (u64)hidden] = gg;
        g[3 * (u64)hidden] = go;
        const float ct = gf * c_prev[i] + gi * gg;
        c[i] = ct;
        h[i] = go * tanhf(ct);
    }
}

extern "C" __global__ void lstm_cell_backward(const float* gates_base, u64 gates_off,
                                              const float* c_prev_base, u64 c_prev_off,
                                              const float* c_base, u64 c_off,
                                              const float* dh_base, u64 dh_off, float* dc_base,
                                              u64 dc_off, float* dgates_base, u64 dgates_off,
                                              uint batch, uint hidden) {
    const float* gates = gates_base + gates_off;
    const float* c_prev = c_prev_base + c_prev_off;
    const float* c = c_base + c_off;
    const float* dh = dh_base + dh_off;
    float* dc = dc_base + dc_off;
    float* dgates = dgates_base + dgates_off;
    const u64 n = (u64)batch * hidden;
    RNN_GRID_LOOP(i, n) {
        const u64 b = i / hidden;
        const u64 j = i - b * hidden;
        const u64 base = b * 4 * hidden + j;
        const float gi = gates[base];
        const float gf = gates[base + hidden];
        const float gg = gates[base + 2 * (u64)hidden];
        const float go = gates[base + 3 * (u64)hidden];
        const float tc = tanhf(c[i]);
        const float dhi = dh[i];
        const float dct = dc[i] + dhi * go * (1.0f - tc * tc);
        dgates[base] = dct * gg * gi * (1.0f - gi);
        dgates[base + hidden] = dct * c_prev[i] * gf * (1.0f - gf);
        dgates[base + 2 * (u64)hidden] = dct * gi * (1.0f - gg * gg);
        dgates[base + 3 * (u64)hidden] = dhi * tc * go * (1.0f - go);
        dc[i] = dct * gf;
    }
}

extern "C" __global__ void gru_cell_forward(const float* gx_base, u64 gx_off, const float* gh_base,
                                            u64 gh_off, const float* h_prev_base, u64 h_prev_off,
                                            float* h_base, u64 h_off, float* cache_base,
                                            u64 cache_off, uint batch, uint hidden) {
    const float* gx = gx_base + gx_off;
    const float* gh = gh_base + gh_off;
    const float* h_prev = h_prev_base + h_prev_off;
    float* h = h_base + h_off;
    float* cache = cache_base + cache_off;
    const u64 n = (u64)batch * hidden;
    const u64 H = hidden;
    RNN_GRID_LOOP(i, n) {
        const u64 b = i / hidden;
        const u64 j = i - b * hidden;
        const u64 g3 = b * 3 * H + j;
        const float r = sigmoidf_(gx[g3] + gh[g3]);
        const float z = sigmoidf_(gx[g3 + H] + gh[g3 + H]);
        const float ghn = gh[g3 + 2 * H];
        const float nn = tanhf(gx[g3 + 2 * H] + r * ghn);
        const float hp = h_prev[i];
        h[i] = (1.0f - z) * nn + z * hp;
        const u64 g4 = b * 4 * H + j;
        cache[g4] = r;
        cache[g4 + H] = z;
        cache[g4 + 2 * H] = nn;
        cache[g4 + 3 * H] = ghn;
    }
}

extern "C" __global__ void gru_cell_backward(const float* cache_base, u64 cache_off,
                                             const float* h_prev_base, u64 h_prev_off,
                                             const float* dh_base, u64 dh_off, float* dgx_base,
                                             u64 dgx_off, float* dgh_base, u64 dgh_off,
                                             float* dh_prev_base, u64 dh_prev_off, uint batch,
                                             uint hidden) {
    const float* cache = cache_base + cache_off;
    const float* h_prev = h_prev_base + h_prev_off;
    const float* dh = dh_base + dh_off;
    float* dgx = dgx_base + dgx_off;
    float* dgh = dgh_base + dgh_off;
    float* dh_prev = dh_prev_base + dh_prev_off;
    const u64 n = (u64)batch * hidden;
    const u64 H = hidden;
    RNN_GRID_LOOP(i, n) {
        const u64 b = i / hidden;
        const u64 j = i - b * hidden;
        const u64 g4 = b * 4 * H + j;
        const float r = cache[g4];
        const float z = cache[g4 + H];
        const float nn = cache[g4 + 2 * H];
        const float ghn = cache[g4 + 3 * H];
        const float d = dh[i];
        const float dn = d * (1.0f - z) * (1.0f - nn * nn);
        const float dz = d * (h_prev[i] - nn) * z * (1.0f - z);
        const float dr = dn * ghn * r * (1.0f - r);
        const u64 g3 = b * 3 * H + j;
        dgx[g3] = dr;
        dgx[g3 + H] = dz;
        dgx[g3 + 2 * H] = dn;
        dgh[g3] = dr;
        dgh[g3 + H] = dz;
        dgh[g3 + 2 * H] = dn * r;
        dh_prev[i] = d * z;
    }
}
