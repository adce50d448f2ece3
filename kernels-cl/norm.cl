// Layer normalization (ops::Ops::layer_norm_forward / layer_norm_backward), each one launch.
// Segments of 32 work-items play the CUDA warps; every work-item runs the same loop iterations
// and reaches every barrier (no early return: PoCL mis-compiles barriers after one).

// Geometry W: a segment per row, two passes over the row (mean, then the centred squares).
__kernel void layer_norm_forward(__global const float* x_base, ulong x_off,
                                 __global const float* w_base, ulong w_off,
                                 __global const float* b_base, ulong b_off, __global float* y_base,
                                 ulong y_off, __global float* st_base, ulong st_off, uint rows,
                                 uint cols, float eps) {
    __local float sh[RED_THREADS];
    __global const float* w = w_base + w_off;
    __global const float* b = b_base + b_off;
    __global float* stats = st_base + st_off;
    uint lid = get_local_id(0);
    uint lane = lid % SEG;
    uint seg = lid / SEG;
    float inv_n = 1.0f / (float)cols;
    RNN_SEG_ROW_LOOP(base, rows) {
        ulong row = base + seg;
        bool active = row < rows;
        __global const float* x = x_base + x_off + row * cols;
        __global float* y = y_base + y_off + row * cols;
        float s = 0.0f;
        if (active)
            for (ulong c = lane; c < cols; c += SEG) s += x[c];
        float mean = seg_sum(sh, s) * inv_n;
        float v = 0.0f;
        if (active)
            for (ulong c = lane; c < cols; c += SEG) {
                float d = x[c] - mean;
                v += d * d;
            }
        float rstd = 1.0f / sqrt(seg_sum(sh, v) * inv_n + eps);
        if (active) {
            for (ulong c = lane; c < cols; c += SEG) y[c] = (x[c] - mean) * rstd * w[c] + b[c];
            if (lane == 0) {
                stats[2 * row] = mean;
                stats[2 * row + 1] = rstd;
            }
        }
    }
}

// Geometry N: see kernels-cu/norm.cu. Every group takes a ticket (geometry L), also a single
// one, so that no work-item skips the barrier inside rnn_last_arrival.
__kernel void layer_norm_backward(__global const float* dy_base, ulong dy_off,
                                  __global const float* x_base, ulong x_off,
                                  __global const float* w_base, ulong w_off,
                                  __global const float* st_base, ulong st_off,
                                  __global float* dx_base, ulong dx_off, __global float* dw_base,
                                  ulong dw_off, __global float* db_base, ulong db_off,
                                  __global float* part_base, ulong part_off,
                                  __global uint* ticket_base, ulong ticket_off, uint rows,
                                  uint cols, uint chunk_rows) {
    __local float sh[RED_THREADS];
    __local uint flag;
    __global const float* dy = dy_base + dy_off;
    __global const float* x = x_base + x_off;
    __global const float* w = w_base + w_off;
    __global const float* stats = st_base + st_off;
    __global float* dx = dx_base + dx_off;
    __global float* dw = dw_base + dw_off;
    __global float* db = db_base + db_off;
    __global float* part = part_base + part_off;
    uint lid = get_local_id(0);
    uint lane = lid % SEG;
    uint seg = lid / SEG;
    uint groups = get_num_groups(0);
    ulong start = (ulong)get_group_id(0) * chunk_rows;
    ulong end = min((ulong)rows, start + chunk_rows);
    float inv_n = 1.0f / (float)cols;
    for (ulong base = start; base < end; base += RED_THREADS / SEG) {
        ulong row = base + seg;
        bool active = row < end;
        float mean = 0.0f, rstd = 0.0f, s1 = 0.0f, s2 = 0.0f;
        if (active) {
            mean = stats[2 * row];
            rstd = stats[2 * row + 1];
            for (ulong c = lane; c < cols; c += SEG) {
                float g = dy[row * cols + c] * w[c];
                s1 += g;
                s2 += g * ((x[row * cols + c] - mean) * rstd);
            }
        }
        float m1 = seg_sum(sh, s1) * inv_n;
        float m2 = seg_sum(sh, s2) * inv_n;
        if (active)
            for (ulong c = lane; c < cols; c += SEG) {
                float xhat = (x[row * cols + c] - mean) * rstd;
                dx[row * cols + c] = rstd * (dy[row * cols + c] * w[c] - m1 - xhat * m2);
            }
    }
    bool single = groups == 1u;
    for (ulong c = lid; c < cols; c += get_local_size(0)) {
        float aw = 0.0f, ab = 0.0f;
        for (ulong row = start; row < end; ++row) {
            float g = dy[row * cols + c];
            aw += g * ((x[row * cols + c] - stats[2 * row]) * stats[2 * row + 1]);
            ab += g;
        }
        if (single) {
            dw[c] = aw;
            db[c] = ab;
        } else {
            part[(ulong)get_group_id(0) * 2 * cols + c] = aw;
            part[(ulong)get_group_id(0) * 2 * cols + cols + c] = ab;
            mem_fence(CLK_GLOBAL_MEM_FENCE);
        }
    }
    bool last = rnn_last_arrival(ticket_base + ticket_off, groups, &flag);
    if (last && !single)
        for (ulong c = lid; c < cols; c += get_local_size(0)) {
            float aw = 0.0f, ab = 0.0f;
            for (uint j = 0; j < groups; ++j) {
                aw += rnn_load_coherent(part + (ulong)j * 2 * cols + c);
                ab += rnn_load_coherent(part + (ulong)j * 2 * cols + cols + c);
            }
            dw[c] = aw;
            db[c] = ab;
        }
}
