// Row kernels (geometry R: one block per row, grid-stride over rows), column sums (C) and the
// two-pass reductions (P).

// Row and column counters are 64-bit so that `+= stride` cannot wrap for sizes near 2^32.
#define RNN_ROW_LOOP(row, rows) \
    for (u64 row = blockIdx.x; row < (u64)(rows); row += gridDim.x)
#define RNN_COL_LOOP(c, cols) for (u64 c = threadIdx.x; c < (u64)(cols); c += blockDim.x)

extern "C" __global__ void softmax(const float* x_base, u64 x_off, float* y_base, u64 y_off,
                                   uint rows, uint cols) {
    __shared__ float sh[RNN_MAX_WARPS];
    RNN_ROW_LOOP(row, rows) {
        const float* x = x_base + x_off + (u64)row * cols;
        float* y = y_base + y_off + (u64)row * cols;
        float mx = -RNN_INF;
        RNN_COL_LOOP(c, cols) mx = fmaxf(mx, x[c]);
        mx = block_reduce_max(mx, sh);
        float s = 0.0f;
        RNN_COL_LOOP(c, cols) s += expf(x[c] - mx);
        s = block_reduce_sum(s, sh);
        const float inv = 1.0f / s;
        RNN_COL_LOOP(c, cols) y[c] = expf(x[c] - mx) * inv;
    }
}

extern "C" __global__ void log_softmax(const float* x_base, u64 x_off, float* y_base, u64 y_off,
                                       uint rows, uint cols) {
    __shared__ float sh[RNN_MAX_WARPS];
    RNN_ROW_LOOP(row, rows) {
        const float* x = x_base + x_off + (u64)row * cols;
        float* y = y_base + y_off + (u64)row * cols;
        float mx = -RNN_INF;
        RNN_COL_LOOP(c, cols) mx = fmaxf(mx, x[c]);
        mx = block_reduce_max(mx, sh);
        float s = 0.0f;
        RNN_COL_LOOP(c, cols) s += expf(x[c] - mx);
        s = block_reduce_sum(s, sh);
        const float lse = mx + logf(s);
        RNN_COL_LOOP(c, cols) y[c] = x[c] - lse;
    }
}

// Loss, correctness and gradient in one pass. dlogits never overlaps logits (the host rejects
// that), so no barrier is needed between reading the label's logit and writing gradients.
extern "C" __global__ void softmax_xent(const float* logits_base, u64 logits_off,
                                        const float* labels_base, u64 labels_off,
                                        float* dlogits_base, u64 dlogits_off,
                                        float* row_loss_base, u64 row_loss_off,
                                        float* row_correct_base, u64 row_correct_off, uint rows,
                                        uint cols, float grad_scale) {
    __shared__ float sh[RNN_MAX_WARPS];
    __shared__ int shi[RNN_MAX_WARPS];
    const float* labels = labels_base + labels_off;
    float* row_loss = row_loss_base + row_loss_off;
    float* row_correct = row_correct_base + row_correct_off;
    RNN_ROW_LOOP(row, rows) {
        const float* x = logits_base + logits_off + (u64)row * cols;
        float* dx = dlogits_base + dlogits_off + (u64)row * cols;
        const float lf = labels[row];
        const bool valid = rnn_valid_index(lf, cols);
        const int label = valid ? (int)lf : -1;
        float mx = -RNN_INF;
        int arg = 0x7fffffff;
        RNN_COL_LOOP(c, cols) {
            const float v = x[c];
            if (v > mx || (v == mx && (int)c < arg)) {
                mx = v;
                arg = (int)c;
            }
        }
        arg = block_reduce_argmax(mx, arg, sh, shi);
        mx = block_reduce_max(mx, sh);
        float s = 0.0f;
        RNN_COL_LOOP(c, cols) s += expf(x[c] - mx);
        s = block_reduce_sum(s, sh);
        const float x_label = valid ? x[label] : 0.0f;
        const float inv = 1.0f / s;
        RNN_COL_LOOP(c, cols) {
            const float p = expf(x[c] - mx) * inv;
            const float t = ((int)c == label) ? 1.0f : 0.0f;
            dx[c] = grad_scale * (p - t);
        }
        if (threadIdx.x == 0) {
            row_loss[row] = valid ? (mx + logf(s)) - x_label : RNN_NAN;
            row_correct[row] = (valid && arg == label) ? 1.0f : 0.0f;
        }
    }
}

extern "C" __global__ void mse(const float* pred_base, u64 pred_off, const float* target_base,
                               u64 target_off, float* dpred_base, u64 dpred_off,
                               float* row_loss_base, u64 row_loss_off, uint rows, uint cols,
                               float grad_scale) {
    __shared__ float sh[RNN_MAX_WARPS];
    float* row_loss = row_loss_base + row_loss_off;
    const float inv_cols = 1.0f / (float)cols;
    RNN_ROW_LOOP(row, rows) {
        const float* p = pred_base + pred_off + (u64)row * cols;
        const float* t = target_base + target_off + (u64)row * cols;
        float* dp = dpred_base + dpred_off + (u64)row * cols;
        float s = 0.0f;
        RNN_COL_LOOP(c, cols) {
            const float d = p[c] - t[c];
            s += d * d;
            dp[c] = grad_scale * 2.0f * d * inv_cols;
        }
        s = block_reduce_sum(s, sh);
        if (threadIdx.x == 0) row_loss[row] = s * inv_cols;
    }
}

// Column sums with block (32, 8): threadIdx.x picks a column, threadIdx.y strides over rows.
extern "C" __global__ void sum_rows(const float* x_base, u64 x_off, float* out_base, u64 out_off,
                                    uint rows, uint cols, float beta) {
    __shared__ float part[8][33];
    const float* x = x_base + x_off;
    float* out = out_base + out_off;
    for (u64 c0 = (u64)blockIdx.x * 32; c0 < cols; c0 += (u64)gridDim.x * 32) {
        const u64 col = c0 + threadIdx.x;
        float s = 0.0f;
        if (col < cols)
            for (u64 r = threadIdx.y; r < rows; r += blockDim.y) s += x[r * cols + col];
        part[threadIdx.y][threadIdx.x] = s;
        __syncthreads();
        if (threadIdx.y == 0 && col < cols) {
            float t = 0.0f;
            for (uint j = 0; j < blockDim.y; ++j) t += part[j][threadIdx.x];
            out[col] = (beta == 0.0f) ? t : beta * out[col] + t;
        }
        __syncthreads();
    }
}

extern "C" __global__ void sum_cols(const float* x_base, u64 x_off, float* out_base, u64 out_off,
                                    uint rows, uint cols, float beta) {
    __shared__ float sh[RNN_MAX_WARPS];
    float* out = out_base + out_off;
    RNN_ROW_LOOP(row, rows) {
        const float* x = x_base + x_off + (u64)row * cols;
        float s = 0.0f;
        RNN_COL_LOOP(c, cols) s += x[c];
        s = block_reduce_sum(s, sh);
        if (threadIdx.x == 0) out[row] = (beta == 0.0f) ? s : beta * out[row] + s;
    }
}

extern "C" __global__ void sum_partial(const float* x_base, u64 x_off, float* partial_base,
                                       u64 partial_off, uint n, uint square) {
    __shared__ float sh[RNN_MAX_WARPS];
    const float* x = x_base + x_off;
    float s = 0.0f;
    RNN_GRID_LOOP(i, n) {
        const float v = x[i];
        s += square ? v * v : v;
    }
    s = block_reduce_sum(s, sh);
    if (threadIdx.x == 0) partial_base[partial_off + blockIdx.x] = s;
}

extern "C" __global__ void sum_final(const float* partial_base, u64 partial_off, float* out_base,
                                     u64 out_off, uint g, float beta) {
    __shared__ float sh[RNN_MAX_WARPS];
    const float* partial = partial_base + partial_off;
    float s = 0.0f;
    RNN_COL_LOOP(j, g) s += partial[j];
    s = block_reduce_sum(s, sh);
    if (threadIdx.x == 0) {
        float* out = out_base + out_off;
        out[0] = (beta == 0.0f) ? s : beta * out[0] + s;
    }
}

extern "C" __global__ void clip_final(const float* partial_base, u64 partial_off,
                                      float* norm_base, u64 norm_off, uint g) {
    __shared__ float sh[RNN_MAX_WARPS];
    const float* partial = partial_base + partial_off;
    float s = 0.0f;
    RNN_COL_LOOP(j, g) s += partial[j];
    s = block_reduce_sum(s, sh);
    if (threadIdx.x == 0) norm_base[norm_off] = sqrtf(s);
}
