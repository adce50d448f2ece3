// Fused LSTM and GRU time steps (geometry S): the same algorithm, names and arguments as
// kernels-cu/gated_step.cu. A group of RS_THREADS work-items owns an RS_BM x RS_BN tile (batch
// rows x hidden units) for ALL gates of those units and runs rnn.cl's rs_tile_product once per
// gate block (forward: A = h_prev, W = gate g's H x H block of W_hh, transposed; backward:
// A = gate block g of the next step's gate gradient, rows G*H apart, W = the same block), so the
// cell math stays with the work-item that holds the sums. The backward steps carry dc * f
// (LSTM) or dh * z (GRU) per (row, unit) in `carry`; with has_next == 0 neither it nor the next
// gradient is read, with has_next == 2 (LSTM) only `carry` is.

#define GS_GATE_SUM(acc, i) ((acc)[i] + (acc)[RS_ROWS + (i)])

__kernel __attribute__((reqd_work_group_size(RS_THREADS, 1, 1)))
void lstm_step_forward(__global float* g_base, ulong g_off, __global const float* hp_base,
                       ulong hp_off, __global const float* cp_base, ulong cp_off,
                       __global const float* w_base, ulong w_off,
                       __global const float* bi_base, ulong bi_off,
                       __global const float* bh_base, ulong bh_off, __global float* c_base,
                       ulong c_off, __global float* h_base, ulong h_off, uint batch,
                       uint hidden) {
    __local float As[2 * RS_A_STAGE];
    __local float Ws[2 * RS_W_STAGE];
    __global float* gates = g_base + g_off;
    __global const float* h_prev = hp_base + hp_off;
    __global const float* c_prev = cp_base + cp_off;
    __global const float* W = w_base + w_off;
    __global const float* b_ih = bi_base + bi_off;
    __global const float* b_hh = bh_base + bh_off;
    __global float* c = c_base + c_off;
    __global float* h = h_base + h_off;
    ulong H = hidden;
    uint bn = get_group_id(0) * RS_BN;
    uint col = bn + get_local_id(0) % RS_BN;
    uint tr = get_local_id(0) / RS_BN;
    float bias[4];
    for (int g = 0; g < 4; g++) bias[g] = col < hidden ? b_ih[g * H + col] + b_hh[g * H + col] : 0.0f;
    uint row_tiles = batch / RS_BM + (batch % RS_BM != 0);
    for (uint tile = get_group_id(1); tile < row_tiles; tile += get_num_groups(1)) {
        uint bm = tile * RS_BM;
        float acc[4][2 * RS_ROWS];
        for (int g = 0; g < 4; g++)
            rs_tile_product(h_prev, W + g * H * H, batch, hidden, hidden, bm, bn, 1, As, Ws,
                            acc[g]);
        if (col >= hidden) continue;
        for (int i = 0; i < RS_ROWS; i++) {
            uint row = bm + tr + 4 * i;
            if (row < batch) {
                ulong at = (ulong)row * H + col;
                __global float* gr = gates + (ulong)row * 4 * H + col;
                float gi = rnn_sigmoid(GS_GATE_SUM(acc[0], i) + gr[0] + bias[0]);
                float gf = rnn_sigmoid(GS_GATE_SUM(acc[1], i) + gr[H] + bias[1]);
                float gg = tanh(GS_GATE_SUM(acc[2], i) + gr[2 * H] + bias[2]);
                float go = rnn_sigmoid(GS_GATE_SUM(acc[3], i) + gr[3 * H] + bias[3]);
                gr[0] = gi;
                gr[H] = gf;
                gr[2 * H] = gg;
                gr[3 * H] = go;
                float ct = gf * c_prev[at] + gi * gg;
                c[at] = ct;
                h[at] = go * tanh(ct);
            }
        }
    }
}

__kernel __attribute__((reqd_work_group_size(RS_THREADS, 1, 1)))
void lstm_step_backward(__global const float* dh_base, ulong dh_off,
                        __global const float* dn_base, ulong dn_off,
                        __global const float* w_base, ulong w_off,
                        __global const float* g_base, ulong g_off,
                        __global const float* cp_base, ulong cp_off,
                        __global const float* c_base, ulong c_off, __global float* k_base,
                        ulong k_off, __global float* dg_base, ulong dg_off, uint batch,
                        uint hidden, uint has_next) {
    __local float As[2 * RS_A_STAGE];
    __local float Ws[2 * RS_W_STAGE];
    __global const float* dh = dh_base + dh_off;
    __global const float* dnext = dn_base + dn_off;
    __global const float* W = w_base + w_off;
    __global const float* gates = g_base + g_off;
    __global const float* c_prev = cp_base + cp_off;
    __global const float* c = c_base + c_off;
    __global float* carry = k_base + k_off;
    __global float* dgates = dg_base + dg_off;
    ulong H = hidden;
    uint bn = get_group_id(0) * RS_BN;
    uint col = bn + get_local_id(0) % RS_BN;
    uint tr = get_local_id(0) / RS_BN;
    uint row_tiles = batch / RS_BM + (batch % RS_BM != 0);
    for (uint tile = get_group_id(1); tile < row_tiles; tile += get_num_groups(1)) {
        uint bm = tile * RS_BM;
        float acc[2 * RS_ROWS];
        for (int i = 0; i < 2 * RS_ROWS; i++) acc[i] = 0.0f;
        if (has_next == 1u) {
            for (int g = 0; g < 4; g++) {
                float part[2 * RS_ROWS];
                rs_tile_product(dnext + g * H, W + g * H * H, batch, hidden, 4 * hidden, bm, bn,
                                0, As, Ws, part);
                for (int i = 0; i < 2 * RS_ROWS; i++) acc[i] += part[i];
            }
        }
        if (col >= hidden) continue;
        for (int i = 0; i < RS_ROWS; i++) {
            uint row = bm + tr + 4 * i;
            if (row < batch) {
                ulong at = (ulong)row * H + col;
                ulong ga = (ulong)row * 4 * H + col;
                float gi = gates[ga];
                float gf = gates[ga + H];
                float gg = gates[ga + 2 * H];
                float go = gates[ga + 3 * H];
                float tc = tanh(c[at]);
                float dht = dh[at] + GS_GATE_SUM(acc, i);
                float dc = has_next ? carry[at] : 0.0f;
                RNN_LSTM_UNIT_BACKWARD(dgates, ga, H, dc, dht, tc, c_prev[at], gi, gf, gg, go, carry[at]);
            }
        }
    }
}

__kernel __attribute__((reqd_work_group_size(RS_THREADS, 1, 1)))
void gru_step_forward(__global const float* gx_base, ulong gx_off,
                      __global const float* hp_base, ulong hp_off,
                      __global const float* w_base, ulong w_off,
                      __global const float* bi_base, ulong bi_off,
                      __global const float* bh_base, ulong bh_off, __global float* h_base,
                      ulong h_off, __global float* k_base, ulong k_off, uint batch,
                      uint hidden) {
    __local float As[2 * RS_A_STAGE];
    __local float Ws[2 * RS_W_STAGE];
    __global const float* gx = gx_base + gx_off;
    __global const float* h_prev = hp_base + hp_off;
    __global const float* W = w_base + w_off;
    __global const float* b_ih = bi_base + bi_off;
    __global const float* b_hh = bh_base + bh_off;
    __global float* h = h_base + h_off;
    __global float* cache = k_base + k_off;
    ulong H = hidden;
    uint bn = get_group_id(0) * RS_BN;
    uint col = bn + get_local_id(0) % RS_BN;
    uint tr = get_local_id(0) / RS_BN;
    float bi[3], bh[3];
    for (int g = 0; g < 3; g++) {
        bi[g] = col < hidden ? b_ih[g * H + col] : 0.0f;
        bh[g] = col < hidden ? b_hh[g * H + col] : 0.0f;
    }
    uint row_tiles = batch / RS_BM + (batch % RS_BM != 0);
    for (uint tile = get_group_id(1); tile < row_tiles; tile += get_num_groups(1)) {
        uint bm = tile * RS_BM;
        float acc[3][2 * RS_ROWS];
        for (int g = 0; g < 3; g++)
            rs_tile_product(h_prev, W + g * H * H, batch, hidden, hidden, bm, bn, 1, As, Ws,
                            acc[g]);
        if (col >= hidden) continue;
        for (int i = 0; i < RS_ROWS; i++) {
            uint row = bm + tr + 4 * i;
            if (row < batch) {
                ulong at = (ulong)row * H + col;
                __global const float* xr = gx + (ulong)row * 3 * H + col;
                float ghr = GS_GATE_SUM(acc[0], i) + bh[0];
                float ghz = GS_GATE_SUM(acc[1], i) + bh[1];
                float ghn = GS_GATE_SUM(acc[2], i) + bh[2];
                float r = rnn_sigmoid((xr[0] + bi[0]) + ghr);
                float z = rnn_sigmoid((xr[H] + bi[1]) + ghz);
                float n = tanh((xr[2 * H] + bi[2]) + r * ghn);
                h[at] = (1.0f - z) * n + z * h_prev[at];
                __global float* kr = cache + (ulong)row * 4 * H + col;
                kr[0] = r;
                kr[H] = z;
                kr[2 * H] = n;
                kr[3 * H] = ghn;
            }
        }
    }
}

__kernel __attribute__((reqd_work_group_size(RS_THREADS, 1, 1)))
void gru_step_backward(__global const float* dh_base, ulong dh_off,
                       __global const float* dn_base, ulong dn_off,
                       __global const float* w_base, ulong w_off,
                       __global const float* k_base, ulong k_off,
                       __global const float* hp_base, ulong hp_off, __global float* cr_base,
                       ulong cr_off, __global float* dgx_base, ulong dgx_off,
                       __global float* dgh_base, ulong dgh_off, uint batch, uint hidden,
                       uint has_next) {
    __local float As[2 * RS_A_STAGE];
    __local float Ws[2 * RS_W_STAGE];
    __global const float* dh = dh_base + dh_off;
    __global const float* dnext = dn_base + dn_off;
    __global const float* W = w_base + w_off;
    __global const float* cache = k_base + k_off;
    __global const float* h_prev = hp_base + hp_off;
    __global float* carry = cr_base + cr_off;
    __global float* dgx = dgx_base + dgx_off;
    __global float* dgh = dgh_base + dgh_off;
    ulong H = hidden;
    uint bn = get_group_id(0) * RS_BN;
    uint col = bn + get_local_id(0) % RS_BN;
    uint tr = get_local_id(0) / RS_BN;
    uint row_tiles = batch / RS_BM + (batch % RS_BM != 0);
    for (uint tile = get_group_id(1); tile < row_tiles; tile += get_num_groups(1)) {
        uint bm = tile * RS_BM;
        float acc[2 * RS_ROWS];
        for (int i = 0; i < 2 * RS_ROWS; i++) acc[i] = 0.0f;
        if (has_next) {
            for (int g = 0; g < 3; g++) {
                float part[2 * RS_ROWS];
                rs_tile_product(dnext + g * H, W + g * H * H, batch, hidden, 3 * hidden, bm, bn,
                                0, As, Ws, part);
                for (int i = 0; i < 2 * RS_ROWS; i++) acc[i] += part[i];
            }
        }
        if (col >= hidden) continue;
        for (int i = 0; i < RS_ROWS; i++) {
            uint row = bm + tr + 4 * i;
            if (row < batch) {
                ulong at = (ulong)row * H + col;
                __global const float* kr = cache + (ulong)row * 4 * H + col;
                float r = kr[0];
                float z = kr[H];
                float n = kr[2 * H];
                float ghn = kr[3 * H];
                float d = (dh[at] + GS_GATE_SUM(acc, i)) + (has_next ? carry[at] : 0.0f);
                ulong g3 = (ulong)row * 3 * H + col;
                RNN_GRU_UNIT_BACKWARD(dgx, dgh, g3, H, d, r, z, n, ghn, h_prev[at], carry[at]);
            }
        }
    }
}
