// Variable-length sequences (ops::SequenceMaskOps): the lengths' row layout, row scaling, and
// the weights of a loss over the valid rows only.

// Geometry E over steps * batch, time-major rows t * batch + b. Lengths are clamped into
// 1..=steps. `last` is written by the threads of step 0.
extern "C" __global__ void length_layout(const uint* len_base, u64 len_off, float* mask_base,
                                         u64 mask_off, uint* rev_base, u64 rev_off,
                                         uint* last_base, u64 last_off, uint steps, uint batch) {
    const uint* lengths = len_base + len_off;
    float* mask = mask_base + mask_off;
    uint* rev = rev_base + rev_off;
    uint* last = last_base + last_off;
    const u64 total = (u64)steps * batch;
    RNN_GRID_LOOP(i, total) {
        const u64 t = i / batch;
        const u64 b = i - t * batch;
        const u64 len = min(max(lengths[b], 1u), steps);
        const bool valid = t < len;
        mask[i] = valid ? 1.0f : 0.0f;
        rev[i] = (uint)(valid ? (len - 1 - t) * batch + b : i);
        if (t == 0) last[b] = (uint)((len - 1) * batch + b);
    }
}

// Geometry E over rows * cols: x[r,:] *= w[r]; a row of weight 0 becomes exactly 0.
extern "C" __global__ void scale_rows(float* x_base, u64 x_off, const float* w_base, u64 w_off,
                                      uint rows, uint cols) {
    float* x = x_base + x_off;
    const float* w = w_base + w_off;
    const u64 total = (u64)rows * cols;
    RNN_GRID_LOOP(i, total) {
        const float wr = w[i / cols];
        x[i] = (wr == 0.0f) ? 0.0f : wr * x[i];
    }
}

// One block: count the valid rows (label not `ignore` when `labels` is given, flag 1; mask not
// 0, flag 2), then weigh each valid row by rows / count and, with totals (flag 4), add the
// weighted row losses (and, flag 8, correct flags) to totals. Counts are float sums of ones,
// exact below 2^24 rows. Without labels, `labels` is any valid address, never read.
__device__ void loss_weights_body(const float* row_loss, const float* row_correct,
                                  const float* mask, float* weights, float* totals,
                                  const uint* labels, uint rows, uint flags, uint ignore) {
    __shared__ float sh[RNN_MAX_WARPS];
    const bool use_labels = (flags & 1u) != 0, use_mask = (flags & 2u) != 0;
    float count = 0.0f;
    for (u64 r = threadIdx.x; r < rows; r += blockDim.x) {
        const bool valid = (!use_labels || labels[r] != ignore) && (!use_mask || mask[r] != 0.0f);
        count += valid ? 1.0f : 0.0f;
    }
    count = block_reduce_sum(count, sh);
    const float w = count > 0.0f ? (float)rows / count : 0.0f;
    float loss = 0.0f, correct = 0.0f;
    for (u64 r = threadIdx.x; r < rows; r += blockDim.x) {
        const bool valid = (!use_labels || labels[r] != ignore) && (!use_mask || mask[r] != 0.0f);
        const float wr = valid ? w : 0.0f;
        weights[r] = wr;
        if (valid && (flags & 4u)) {
            loss += wr * row_loss[r];
            if (flags & 8u) correct += wr * row_correct[r];
        }
    }
    loss = block_reduce_sum(loss, sh);
    correct = block_reduce_sum(correct, sh);
    if (threadIdx.x == 0 && (flags & 4u)) {
        totals[0] += loss;
        if (flags & 8u) totals[1] += correct;
    }
}

extern "C" __global__ void loss_weights(const float* loss_base, u64 loss_off,
                                        const float* correct_base, u64 correct_off,
                                        const float* mask_base, u64 mask_off, float* w_base,
                                        u64 w_off, float* totals_base, u64 totals_off, uint rows,
                                        uint flags) {
    loss_weights_body(loss_base + loss_off, correct_base + correct_off, mask_base + mask_off,
                      w_base + w_off, totals_base + totals_off,
                      (const uint*)(mask_base + mask_off), rows, flags & ~1u, 0u);
}

extern "C" __global__ void loss_weights_labels(const float* loss_base, u64 loss_off,
                                               const float* correct_base, u64 correct_off,
                                               const float* mask_base, u64 mask_off,
                                               float* w_base, u64 w_off, float* totals_base,
                                               u64 totals_off, const uint* labels_base,
                                               u64 labels_off, uint rows, uint flags,
                                               uint ignore) {
    loss_weights_body(loss_base + loss_off, correct_base + correct_off, mask_base + mask_off,
                      w_base + w_off, totals_base + totals_off, labels_base + labels_off, rows,
                      flags, ignore);
}
