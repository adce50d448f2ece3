// Row-wise kernels (one group of 256 per row, rows strided by the number of groups), column
// sums, and the two-pass whole-buffer reductions. All trees in local memory, no atomics.

// Row and column counters are 64-bit so that `+= stride` cannot wrap for sizes near 2^32.
#define RNN_ROW_LOOP(row, rows) \
    for (ulong row = get_group_id(0); row < (ulong)(rows); row += get_num_groups(0))
#define RNN_COL_LOOP(c, cols) for (ulong c = lid; c < (ulong)(cols); c += RED_THREADS)

__kernel void softmax(__global const float* x_base, ulong x_off, __global float* y_base,
                      ulong y_off, uint rows, uint cols) {
    __local float sh[RED_THREADS];
    uint lid = get_local_id(0);
    RNN_ROW_LOOP(row, rows) {
        __global const float* x = x_base + x_off + (ulong)row * cols;
        __global float* y = y_base + y_off + (ulong)row * cols;
        float mx = -INFINITY;
        RNN_COL_LOOP(c, cols) mx = fmax(mx, x[c]);
        mx = group_max(sh, mx);
        float s = 0.0f;
        RNN_COL_LOOP(c, cols) s += exp(x[c] - mx);
        s = group_sum(sh, s);
        float inv = 1.0f / s;
        RNN_COL_LOOP(c, cols) y[c] = exp(x[c] - mx) * inv;
    }
}

__kernel void log_softmax(__global const float* x_base, ulong x_off, __global float* y_base,
                          ulong y_off, uint rows, uint cols) {
    __local float sh[RED_THREADS];
    uint lid = get_local_id(0);
    RNN_ROW_LOOP(row, rows) {
        __global const float* x = x_base + x_off + (ulong)row * cols;
        __global float* y = y_base + y_off + (ulong)row * cols;
        float mx = -INFINITY;
        RNN_COL_LOOP(c, cols) mx = fmax(mx, x[c]);
        mx = group_max(sh, mx);
        float s = 0.0f;
        RNN_COL_LOOP(c, cols) s += exp(x[c] - mx);
        s = group_sum(sh, s);
        float lse = mx + log(s);
        RNN_COL_LOOP(c, cols) y[c] = x[c] - lse;
    }
}

__kernel void softmax_xent(__global const float* x_base, ulong x_off,
                           __global const float* l_base, ulong l_off, __global float* d_base,
                           ulong d_off, __global float* loss_base, ulong loss_off,
                           __global float* corr_base, ulong corr_off, uint rows, uint cols,
                           float grad_scale) {
    __local float sh[RED_THREADS];
    __local uint shi[RED_THREADS];
    uint lid = get_local_id(0);
    RNN_ROW_LOOP(row, rows) {
        __global const float* x = x_base + x_off + (ulong)row * cols;
        __global float* d = d_base + d_off + (ulong)row * cols;
        float lf = l_base[l_off + row];
        int label = rnn_valid_index(lf, cols) ? (int)lf : -1;

        // Arg-max with the lowest index winning ties (each work-item scans increasing c).
        float mx = -INFINITY;
        uint mi = 0xffffffffu;
        RNN_COL_LOOP(c, cols) {
            float v = x[c];
            if (v > mx || mi == 0xffffffffu) { mx = v; mi = c; }
        }
        sh[lid] = mx;
        shi[lid] = mi;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint s = RED_THREADS / 2; s > 0; s >>= 1) {
            if (lid < s) {
                float v2 = sh[lid + s];
                uint i2 = shi[lid + s];
                if (i2 != 0xffffffffu &&
                    (shi[lid] == 0xffffffffu || v2 > sh[lid] || (v2 == sh[lid] && i2 < shi[lid]))) {
                    sh[lid] = v2;
                    shi[lid] = i2;
                }
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        mx = sh[0];
        uint arg = shi[0];
        barrier(CLK_LOCAL_MEM_FENCE);

        float s = 0.0f;
        RNN_COL_LOOP(c, cols) s += exp(x[c] - mx);
        s = group_sum(sh, s);
        float inv = 1.0f / s;
        RNN_COL_LOOP(c, cols) {
            float p = exp(x[c] - mx) * inv;
            d[c] = grad_scale * (p - ((int)c == label ? 1.0f : 0.0f));
        }
        if (lid == 0) {
            loss_base[loss_off + row] = label >= 0 ? (mx + log(s) - x[label]) : NAN;
            corr_base[corr_off + row] = (label >= 0 && arg == (uint)label) ? 1.0f : 0.0f;
        }
    }
}

__kernel void mse(__global const float* p_base, ulong p_off, __global const float* t_base,
                  ulong t_off, __global float* d_base, ulong d_off, __global float* loss_base,
                  ulong loss_off, uint rows, uint cols, float grad_scale) {
    __local float sh[RED_THREADS];
    uint lid = get_local_id(0);
    float inv_cols = 1.0f / (float)cols;
    RNN_ROW_LOOP(row, rows) {
        ulong base = (ulong)row * cols;
        __global const float* p = p_base + p_off + base;
        __global const float* t = t_base + t_off + base;
        __global float* d = d_base + d_off + base;
        float s = 0.0f;
        RNN_COL_LOOP(c, cols) {
            float diff = p[c] - t[c];
            s += diff * diff;
            d[c] = grad_scale * 2.0f * diff * inv_cols;
        }
        s = group_sum(sh, s);
        if (lid == 0) loss_base[loss_off + row] = s * inv_cols;
    }
}

// Column sums: group (32, 8); x picks a column of a 32-column chunk, y strides over rows.
__kernel void sum_rows(__global const float* x_base, ulong x_off, __global float* o_base,
                       ulong o_off, uint rows, uint cols, float beta) {
    __local float sh[8][33];
    __global const float* x = x_base + x_off;
    __global float* out = o_base + o_off;
    uint lx = get_local_id(0);
    uint ly = get_local_id(1);
    for (ulong chunk = get_group_id(0); chunk * 32 < cols; chunk += get_num_groups(0)) {
        ulong c = chunk * 32 + lx;
        float s = 0.0f;
        if (c < cols)
            for (ulong r = ly; r < rows; r += 8) s += x[r * cols + c];
        sh[ly][lx] = s;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (ly == 0 && c < cols) {
            float t = 0.0f;
            for (uint j = 0; j < 8; j++) t += sh[j][lx];
            out[c] = beta != 0.0f ? beta * out[c] + t : t;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

__kernel void sum_cols(__global const float* x_base, ulong x_off, __global float* o_base,
                       ulong o_off, uint rows, uint cols, float beta) {
    __local float sh[RED_THREADS];
    uint lid = get_local_id(0);
    __global float* out = o_base + o_off;
    RNN_ROW_LOOP(row, rows) {
        __global const float* x = x_base + x_off + (ulong)row * cols;
        float s = 0.0f;
        RNN_COL_LOOP(c, cols) s += x[c];
        s = group_sum(sh, s);
        if (lid == 0) out[row] = beta != 0.0f ? beta * out[row] + s : s;
    }
}

__kernel void sum_partial(__global const float* x_base, ulong x_off, __global float* p_base,
                          ulong p_off, uint n, uint square) {
    __local float sh[RED_THREADS];
    __global const float* x = x_base + x_off;
    float s = 0.0f;
    RNN_GRID_LOOP(i, n) {
        float v = x[i];
        s += square ? v * v : v;
    }
    s = group_sum(sh, s);
    if (get_local_id(0) == 0) p_base[p_off + get_group_id(0)] = s;
}

__kernel void sum_final(__global const float* p_base, ulong p_off, __global float* o_base,
                        ulong o_off, uint g, float beta) {
    __local float sh[RED_THREADS];
    __global const float* partial = p_base + p_off;
    float s = 0.0f;
    for (ulong j = get_local_id(0); j < g; j += RED_THREADS) s += partial[j];
    s = group_sum(sh, s);
    if (get_local_id(0) == 0) {
        __global float* out = o_base + o_off;
        out[0] = beta != 0.0f ? beta * out[0] + s : s;
    }
}

__kernel void clip_final(__global const float* p_base, ulong p_off, __global float* n_base,
                         ulong n_off, uint g) {
    __local float sh[RED_THREADS];
    __global const float* partial = p_base + p_off;
    float s = 0.0f;
    for (ulong j = get_local_id(0); j < g; j += RED_THREADS) s += partial[j];
    s = group_sum(sh, s);
    if (get_local_id(0) == 0) n_base[n_off] = sqrt(s);
}
