// Layer normalization (ops::Ops::layer_norm_forward / layer_norm_backward), each one launch.

// Geometry W: a warp per row. Two passes over the row (mean, then the centred squares) keep the
// variance accurate for rows with a large mean.
extern "C" __global__ void layer_norm_forward(const float* x_base, u64 x_off, const float* w_base,
                                              u64 w_off, const float* b_base, u64 b_off,
                                              float* y_base, u64 y_off, float* st_base,
                                              u64 st_off, uint rows, uint cols, float eps) {
    const float* w = w_base + w_off;
    const float* b = b_base + b_off;
    float* stats = st_base + st_off;
    const uint lane = threadIdx.x % WARP_SIZE;
    const uint wid = threadIdx.x / WARP_SIZE;
    const uint warps = blockDim.x / WARP_SIZE;
    const float inv_n = 1.0f / (float)cols;
    for (u64 row = (u64)blockIdx.x * warps + wid; row < rows; row += (u64)gridDim.x * warps) {
        const float* x = x_base + x_off + row * cols;
        float* y = y_base + y_off + row * cols;
        float s = 0.0f;
        for (u64 c = lane; c < cols; c += WARP_SIZE) s += x[c];
        const float mean = warp_reduce_sum(s) * inv_n;
        float v = 0.0f;
        for (u64 c = lane; c < cols; c += WARP_SIZE) {
            const float d = x[c] - mean;
            v += d * d;
        }
        const float rstd = 1.0f / sqrtf(warp_reduce_sum(v) * inv_n + eps);
        for (u64 c = lane; c < cols; c += WARP_SIZE) y[c] = (x[c] - mean) * rstd * w[c] + b[c];
        if (lane == 0) {
            stats[2 * row] = mean;
            stats[2 * row + 1] = rstd;
        }
    }
}

// Geometry N (docs/kernel-abi.md): block `bx` owns rows `bx * chunk_rows ..` (at most
// chunk_rows of them). Its warps compute `dx` a row each; then its threads, a column each, sum
// `dy * xhat` and `dy` over the block's rows. With one block those sums are the result; with
// several each block stores them in `partials[bx * 2 * cols ..]` and the last block to arrive
// (geometry L) adds the blocks' sums in block order, so the result is deterministic.
extern "C" __global__ void layer_norm_backward(
    const float* dy_base, u64 dy_off, const float* x_base, u64 x_off, const float* w_base,
    u64 w_off, const float* st_base, u64 st_off, float* dx_base, u64 dx_off, float* dw_base,
    u64 dw_off, float* db_base, u64 db_off, float* part_base, u64 part_off, uint* ticket_base,
    u64 ticket_off, uint rows, uint cols, uint chunk_rows) {
    const float* dy = dy_base + dy_off;
    const float* x = x_base + x_off;
    const float* w = w_base + w_off;
    const float* stats = st_base + st_off;
    float* dx = dx_base + dx_off;
    float* dw = dw_base + dw_off;
    float* db = db_base + db_off;
    float* part = part_base + part_off;
    const uint lane = threadIdx.x % WARP_SIZE;
    const uint wid = threadIdx.x / WARP_SIZE;
    const uint warps = blockDim.x / WARP_SIZE;
    const u64 start = (u64)blockIdx.x * chunk_rows;
    const u64 end = min((u64)rows, start + chunk_rows);
    const float inv_n = 1.0f / (float)cols;
    for (u64 row = start + wid; row < end; row += warps) {
        const float mean = stats[2 * row], rstd = stats[2 * row + 1];
        const float* xr = x + row * cols;
        const float* dyr = dy + row * cols;
        float s1 = 0.0f, s2 = 0.0f;
        for (u64 c = lane; c < cols; c += WARP_SIZE) {
            const float g = dyr[c] * w[c];
            s1 += g;
            s2 += g * ((xr[c] - mean) * rstd);
        }
        const float m1 = warp_reduce_sum(s1) * inv_n;
        const float m2 = warp_reduce_sum(s2) * inv_n;
        float* dxr = dx + row * cols;
        for (u64 c = lane; c < cols; c += WARP_SIZE) {
            const float xhat = (xr[c] - mean) * rstd;
            dxr[c] = rstd * (dyr[c] * w[c] - m1 - xhat * m2);
        }
    }
    const bool single = gridDim.x == 1;
    for (u64 c = threadIdx.x; c < cols; c += blockDim.x) {
        float aw = 0.0f, ab = 0.0f;
        for (u64 row = start; row < end; ++row) {
            const float g = dy[row * cols + c];
            aw += g * ((x[row * cols + c] - stats[2 * row]) * stats[2 * row + 1]);
            ab += g;
        }
        if (single) {
            dw[c] = aw;
            db[c] = ab;
        } else {
            part[(u64)blockIdx.x * 2 * cols + c] = aw;
            part[(u64)blockIdx.x * 2 * cols + cols + c] = ab;
            __threadfence();
        }
    }
    if (single) return;
    if (!rnn_last_arrival(ticket_base + ticket_off, gridDim.x)) return;
    for (u64 c = threadIdx.x; c < cols; c += blockDim.x) {
        float aw = 0.0f, ab = 0.0f;
        for (uint j = 0; j < gridDim.x; ++j) {
            aw += rnn_load_coherent(part + (u64)j * 2 * cols + c);
            ab += rnn_load_coherent(part + (u64)j * 2 * cols + cols + c);
        }
        dw[c] = aw;
        db[c] = ab;
    }
}
