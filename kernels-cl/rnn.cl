// Recurrent cell steps (gate order as in PyTorch), one work-item per (batch, hidden) element.

__kernel void rnn_cell_forward(__global const float* pre_base, ulong pre_off,
                               __global const float* bi_base, ulong bi_off,
                               __global const float* bh_base, ulong bh_off,
                               __global float* h_base, ulong h_off, uint batch, uint hidden,
                               uint act, float act_param) {
    __global const float* pre = pre_base + pre_off;
    __global const float* b_ih = bi_base + bi_off;
    __global const float* b_hh = bh_base + bh_off;
    __global float* h = h_base + h_off;
    uint n = batch * hidden;
    for (uint i = get_global_id(0); i < n; i += get_global_size(0)) {
        uint j = i % hidden;
        h[i] = act_forward(pre[i] + b_ih[j] + b_hh[j], act, act_param);
    }
}

__kernel void lstm_cell_forward(__global float* g_base, ulong g_off,
                                __global const float* cp_base, ulong cp_off,
                                __global float* c_base, ulong c_off, __global float* h_base,
                                ulong h_off, uint batch, uint hidden) {
    __global float* gates = g_base + g_off;
    __global const float* c_prev = cp_base + cp_off;
    __global float* c = c_base + c_off;
    __global float* h = h_base + h_off;
    uint n = batch * hidden;
    for (uint e = get_global_id(0); e < n; e += get_global_size(0)) {
        uint b = e / hidden;
        uint j = e - b * hidden;
        ulong base = (ulong)b * 4 * hidden + j;
        float ig = sigmoid_f(gates[base]);
        float fg = sigmoid_f(gates[base + hidden]);
        float gg = tanh(gates[base + 2 * hidden]);
        float og = sigmoid_f(gates[base + 3 * hidden]);
        gates[base] = ig;
        gates[base + hidden] = fg;
        gates[base + 2 * hidden] = gg;
        gates[base + 3 * hidden] = og;
        float cv = fg * c_prev[e] + ig * gg;
        c[e] = cv;
        h[e] = og * tanh(cv);
    }
}

__kernel void lstm_cell_backward(__global const float* g_base, ulong g_off,
                                 __global const float* cp_base, ulong cp_off,
                                 __global const float* c_base, ulong c_off,
                                 __global const float* dh_base, ulong dh_off,
                                 __global float* dc_base, ulong dc_off, __global float* dg_base,
                                 ulong dg_off, uint batch, uint hidden) {
    __global const float* gates = g_base + g_off;
    __global const float* c_prev = cp_base + cp_off;
    __global const float* c = c_base + c_off;
    __global const float* dh = dh_base + dh_off;
    __global float* dc = dc_base + dc_off;
    __global float* dgates = dg_base + dg_off;
    uint n = batch * hidden;
    for (uint e = get_global_id(0); e < n; e += get_global_size(0)) {
        uint b = e / hidden;
        uint j = e - b * hidden;
        ulong base = (ulong)b * 4 * hidden + j;
        float ig = gates[base];
        float fg = gates[base + hidden];
        float gg = gates[base + 2 * hidden];
        float og = gates[base + 3 * hidden];
        float tc = tanh(c[e]);
        float dhe = dh[e];
        float dct = dc[e] + dhe * og * (1.0f - tc * tc);
        dgates[base] = dct * gg * ig * (1.0f - ig);
        dgates[base + hidden] = dct * c_prev[e] * fg * (1.0f - fg);
        dgates[base + 2 * hidden] = dct * ig * (1.0f - gg * gg);
        dgates[base + 3 * hidden] = dhe * tc * og * (1.0f - og);
        dc[e] = dct * fg;
    }
}

__kernel void gru_cell_forward(__global const float* gx_base, ulong gx_off,
                               __global const float* gh_base, ulong gh_off,
                               __global const float* hp_base, ulong hp_off,
                               __global float* h_base, ulong h_off, __global float* k_base,
                               ulong k_off, uint batch, uint hidden) {
    __global const float* gx = gx_base + gx_off;
    __global const float* gh = gh_base + gh_off;
    __global const float* h_prev = hp_base + hp_off;
    __global float* h = h_base + h_off;
    __global float* cache = k_base + k_off;
    uint n = batch * hidden;
    for (uint e = get_global_id(0); e < n; e += get_global_size(0)) {
        uint b = e / hidden;
        uint j = e - b * hidden;
        ulong g3 = (ulong)b * 3 * hidden + j;
        ulong g4 = (ulong)b * 4 * hidden + j;
        float r = sigmoid_f(gx[g3] + gh[g3]);
        float z = sigmoid_f(gx[g3 + hidden] + gh[g3 + hidden]);
        float ghn = gh[g3 + 2 * hidden];
        float nn = tanh(gx[g3 + 2 * hidden] + r * ghn);
        h[e] = (1.0f - z) * nn + z * h_prev[e];
        cache[g4] = r;
        cache[g4 + hidden] = z;
        cache[g4 + 2 * hidden] = nn;
        cache[g4 + 3 * hidden] = ghn;
    }
}

__kernel void gru_cell_backward(__global const float* k_base, ulong k_off,
                                __global const float* hp_base, ulong hp_off,
                                __global const float* dh_base, ulong dh_off,
                                __global float* dgx_base, ulong dgx_off, __global float* dgh_base,
                                ulong dgh_off, __global float* dhp_base, ulong dhp_off, uint batch,
                                uint hidden) {
    __global const float* cache = k_base + k_off;
    __global const float* h_prev = hp_base + hp_off;
    __global const float* dh = dh_base + dh_off;
    __global float* dgx = dgx_base + dgx_off;
    __global float* dgh = dgh_base + dgh_off;
    __global float* dh_prev = dhp_base + dhp_off;
    uint n = batch * hidden;
    for (uint e = get_global_id(0); e < n; e += get_global_size(0)) {
        uint b = e / hidden;
        uint j = e - b * hidden;
        ulong g3 = (ulong)b * 3 * hidden + j;
        ulong g4 = (ulong)b * 4 * hidden + j;
        float r = cache[g4];
        float z = cache[g4 + hidden];
        float nn = cache[g4 + 2 * hidden];
        float ghn = cache[g4 + 3 * hidden];
        float d = dh[e];
        float dn = d * (1.0f - z) * (1.0f - nn * nn);
        float dz = d * (h_prev[e] - nn) * z * (1.0f - z);
        float dr = dn * ghn * r * (1.0f - r);
        dgx[g3] = dr;
        dgx[g3 + hidden] = dz;
        dgx[g3 + 2 * hidden] = dn;
        dgh[g3] = dr;
        dgh[g3 + hidden] = dz;
        dgh[g3 + 2 * hidden] = dn * r;
        dh_prev[e] = d * z;
    }
}
