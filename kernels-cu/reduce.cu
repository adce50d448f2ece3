// Row kernels (geometry R: one block per row, grid-stride over rows), column sums (C) and the
// two-pass reductions (P). The bias-activation backward is in bias_grad.cu.

// Row and column counters are 64-bit so that `+= stride` cannot wrap for sizes near 2^32.
#define RNN_ROW_LOOP(row, rows) \
    for (u64 row = blockIdx.x; row < (u64)(rows); row += gridDim.x)
#define RNN_COL_LOOP(c, cols) for (u64 c = threadIdx.x; c < (u64)(cols); c += blockDim.x)

// softmax (LOG false) or log_softmax (LOG true) of each row: one pass for the max, one for
// the sum of exp(x - max), one to write.
template <bool LOG>
__device__ __forceinline__ void softmax_rows(const float* x_base, u64 x_off, float* y_base,
                                             u64 y_off, uint rows, uint cols) {
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
        if (LOG) {
            const float lse = mx + logf(s);
            RNN_COL_LOOP(c, cols) y[c] = x[c] - lse;
        } else {
            const float inv = 1.0f / s;
            RNN_COL_LOOP(c, cols) y[c] = expf(x[c] - mx) * inv;
        }
    }
}

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
extern "C" __global__ void softmax(const float* x_base, u64 x_off, float* y_base, u64 y_off,
                                   uint rows, uint cols) {
    softmax_rows<false>(x_base, x_off, y_base, y_off, rows, cols);
}

extern "C" __global__ void log_softmax(const float* x_base, u64 x_off, float* y_base, u64 y_off,
                                       uint rows, uint cols) {
    softmax_rows<true>(x_base, x_off, y_base, y_off, rows, cols);
}
#endif

// Adds this block's partial `(a, b)` to the launch totals `totals[0] += sum a`,
// `totals[1] += sum b` (b only when `two`) through the last-arrival reduction (geometry L):
// partials go to `part[2 * block]`, and the last block sums them in block order. `a`/`b` are
// the block's values in thread 0.
__device__ __forceinline__ void rnn_add_totals(float a, float b, bool two, float* totals,
                                               float* part, uint* ticket) {
    __shared__ float sh[RNN_MAX_WARPS];
    if (threadIdx.x == 0) {
        part[2 * blockIdx.x] = a;
        part[2 * blockIdx.x + 1] = b;
        __threadfence();
    }
    if (!rnn_last_arrival(ticket, gridDim.x)) return;
    float sa = 0.0f, sb = 0.0f;
    for (uint j = threadIdx.x; j < gridDim.x; j += blockDim.x) {
        sa += rnn_load_coherent(part + 2 * j);
        sb += rnn_load_coherent(part + 2 * j + 1);
    }
    sa = block_reduce_sum(sa, sh);
    sb = block_reduce_sum(sb, sh);
    if (threadIdx.x == 0) {
        totals[0] += sa;
        if (two) totals[1] += sb;
    }
}

// Columns a lane of softmax_xent keeps in registers: rows of up to XENT_SLOTS warps' width of
// classes (128 on CUDA) are read from memory once and each exponential computed once; wider
// rows take three passes over the row (L1 hits after the first).
#define XENT_SLOTS 4

// One row of softmax_xent on one warp (see the kernel): its gradient stored, its loss and
// correctness returned in lane 0's `loss`/`correct`. CACHED (cols <= XENT_SLOTS * WARP_SIZE):
// lane l's columns l, l + WARP_SIZE, ... held in registers. Either way each lane visits its
// columns in the same order and computes the same values, so the results do not depend on it.
template <bool CACHED>
__device__ __forceinline__ void xent_row(const float* x, float* dx, uint cols, uint l,
                                         float grad_scale, uint lane, float& loss,
                                         float& correct) {
    const bool valid = rnn_valid_index(l, cols);
    const int label = valid ? (int)l : -1;
    float xv[XENT_SLOTS], ev[XENT_SLOTS];
    float mx = -RNN_INF;
    int arg = 0x7fffffff;
    if (CACHED) {
#pragma unroll
        for (uint j = 0; j < XENT_SLOTS; ++j) {
            const uint c = lane + j * WARP_SIZE;
            xv[j] = c < cols ? x[c] : 0.0f;
        }
#pragma unroll
        for (uint j = 0; j < XENT_SLOTS; ++j) {
            const uint c = lane + j * WARP_SIZE;
            if (c < cols && (xv[j] > mx || (xv[j] == mx && (int)c < arg))) {
                mx = xv[j];
                arg = (int)c;
            }
        }
    } else {
        for (u64 c = lane; c < cols; c += WARP_SIZE) {
            const float v = x[c];
            if (v > mx || (v == mx && (int)c < arg)) {
                mx = v;
                arg = (int)c;
            }
        }
    }
    warp_reduce_argmax(mx, arg);
    // The other classes' share is summed apart: p_label - 1 = -others / s, and a confident
    // row's loss is log1p(others). Both cancel when formed from p_label.
    float s = 0.0f, others = 0.0f;
    if (CACHED) {
#pragma unroll
        for (uint j = 0; j < XENT_SLOTS; ++j) {
            const uint c = lane + j * WARP_SIZE;
            ev[j] = c < cols ? expf(xv[j] - mx) : 0.0f;
            s += ev[j];
            others += ((int)c == label) ? 0.0f : ev[j];
        }
    } else {
        for (u64 c = lane; c < cols; c += WARP_SIZE) {
            const float e = expf(x[c] - mx);
            s += e;
            others += ((int)c == label) ? 0.0f : e;
        }
    }
    s = warp_reduce_sum(s);
    others = warp_reduce_sum(others);
    const float inv = 1.0f / s;
    if (CACHED) {
#pragma unroll
        for (uint j = 0; j < XENT_SLOTS; ++j) {
            const uint c = lane + j * WARP_SIZE;
            if (c < cols) dx[c] = grad_scale * (((int)c == label) ? -others : ev[j]) * inv;
        }
    } else {
        for (u64 c = lane; c < cols; c += WARP_SIZE)
            dx[c] = grad_scale * (((int)c == label) ? -others : expf(x[c] - mx)) * inv;
    }
    if (lane == 0) {
        loss = !valid            ? RNN_NAN
               : x[label] == mx ? log1pf(others)
                                : (mx + logf(s)) - x[label];
        correct = (valid && arg == label) ? 1.0f : 0.0f;
    }
}

// Loss, correctness and gradient in one pass, one warp per row (geometry W: rows are mostly
// narrow, 10 or 96 classes, so a block per row would leave most threads idle). dlogits never
// overlaps logits (the host rejects that). With `with_totals`, the summed loss and correct
// count of all rows are also added to totals[0] and totals[1] (geometry L).
extern "C" __global__ void softmax_xent(const float* logits_base, u64 logits_off,
                                        const uint* labels_base, u64 labels_off,
                                        float* dlogits_base, u64 dlogits_off,
                                        float* row_loss_base, u64 row_loss_off,
                                        float* row_correct_base, u64 row_correct_off,
                                        float* totals_base, u64 totals_off, float* part_base,
                                        u64 part_off, uint* ticket_base, u64 ticket_off,
                                        uint rows, uint cols, float grad_scale,
                                        uint with_totals) {
    __shared__ float sh_loss[RNN_MAX_WARPS];
    __shared__ float sh_correct[RNN_MAX_WARPS];
    const uint* labels = labels_base + labels_off;
    float* row_loss = row_loss_base + row_loss_off;
    float* row_correct = row_correct_base + row_correct_off;
    const uint lane = threadIdx.x % WARP_SIZE;
    const uint wid = threadIdx.x / WARP_SIZE;
    const uint warps = blockDim.x / WARP_SIZE;
    const bool cached = cols <= XENT_SLOTS * WARP_SIZE;
    float my_loss = 0.0f, my_correct = 0.0f;
    for (u64 row = (u64)blockIdx.x * warps + wid; row < rows; row += (u64)gridDim.x * warps) {
        const float* x = logits_base + logits_off + row * cols;
        float* dx = dlogits_base + dlogits_off + row * cols;
        float loss = 0.0f, correct = 0.0f;
        if (cached) {
            xent_row<true>(x, dx, cols, labels[row], grad_scale, lane, loss, correct);
        } else {
            xent_row<false>(x, dx, cols, labels[row], grad_scale, lane, loss, correct);
        }
        if (lane == 0) {
            row_loss[row] = loss;
            row_correct[row] = correct;
            my_loss += loss;
            my_correct += correct;
        }
    }
    if (!with_totals) return;
    if (lane == 0) {
        sh_loss[wid] = my_loss;
        sh_correct[wid] = my_correct;
    }
    __syncthreads();
    float a = 0.0f, b = 0.0f;
    if (threadIdx.x == 0)
        for (uint w = 0; w < warps; ++w) {
            a += sh_loss[w];
            b += sh_correct[w];
        }
    rnn_add_totals(a, b, true, totals_base + totals_off, part_base + part_off,
                   ticket_base + ticket_off);
}

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
// Mean squared error, one warp per row (geometry W); with `with_totals`, the summed row losses
// are added to totals[0] (geometry L).
extern "C" __global__ void mse(const float* pred_base, u64 pred_off, const float* target_base,
                               u64 target_off, float* dpred_base, u64 dpred_off,
                               float* row_loss_base, u64 row_loss_off, float* totals_base,
                               u64 totals_off, float* part_base, u64 part_off,
                               uint* ticket_base, u64 ticket_off, uint rows, uint cols,
                               float grad_scale, uint with_totals) {
    __shared__ float sh_loss[RNN_MAX_WARPS];
    float* row_loss = row_loss_base + row_loss_off;
    const float inv_cols = 1.0f / (float)cols;
    const uint lane = threadIdx.x % WARP_SIZE;
    const uint wid = threadIdx.x / WARP_SIZE;
    const uint warps = blockDim.x / WARP_SIZE;
    float my_loss = 0.0f;
    for (u64 row = (u64)blockIdx.x * warps + wid; row < rows; row += (u64)gridDim.x * warps) {
        const float* p = pred_base + pred_off + row * cols;
        const float* t = target_base + target_off + row * cols;
        float* dp = dpred_base + dpred_off + row * cols;
        float s = 0.0f;
        for (u64 c = lane; c < cols; c += WARP_SIZE) {
            const float d = p[c] - t[c];
            s += d * d;
            dp[c] = grad_scale * 2.0f * d * inv_cols;
        }
        s = warp_reduce_sum(s);
        if (lane == 0) {
            row_loss[row] = s * inv_cols;
            my_loss += s * inv_cols;
        }
    }
    if (!with_totals) return;
    if (lane == 0) sh_loss[wid] = my_loss;
    __syncthreads();
    float a = 0.0f;
    if (threadIdx.x == 0)
        for (uint w = 0; w < warps; ++w) a += sh_loss[w];
    rnn_add_totals(a, 0.0f, false, totals_base + totals_off, part_base + part_off,
                   ticket_base + ticket_off);
}
#endif

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
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
#endif

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

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
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
#endif

extern "C" __global__ void clip_final(const float* partial_base, u64 partial_off,
                                      float* norm_base, u64 norm_off, uint g) {
    __shared__ float sh[RNN_MAX_WARPS];
    const float* partial = partial_base + partial_off;
    float s = 0.0f;
    RNN_COL_LOOP(j, g) s += partial[j];
    s = block_reduce_sum(s, sh);
    if (threadIdx.x == 0) norm_base[norm_off] = sqrtf(s);
}
