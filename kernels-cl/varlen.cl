// Variable-length sequences (ops::SequenceMaskOps): the lengths' row layout, row scaling, and
// the weights of a loss over the valid rows only. The same kernels as kernels-cu/varlen.cu.

__kernel void length_layout(__global const uint* len_base, ulong len_off,
                            __global float* mask_base, ulong mask_off, __global uint* rev_base,
                            ulong rev_off, __global uint* last_base, ulong last_off, uint steps,
                            uint batch) {
    __global const uint* lengths = len_base + len_off;
    __global float* mask = mask_base + mask_off;
    __global uint* rev = rev_base + rev_off;
    __global uint* last = last_base + last_off;
    ulong total = (ulong)steps * batch;
    RNN_GRID_LOOP(i, total) {
        ulong t = i / batch;
        ulong b = i - t * batch;
        ulong len = min(max(lengths[b], 1u), steps);
        bool valid = t < len;
        mask[i] = valid ? 1.0f : 0.0f;
        rev[i] = (uint)(valid ? (len - 1 - t) * batch + b : i);
        if (t == 0) last[b] = (uint)((len - 1) * batch + b);
    }
}

__kernel void scale_rows(__global float* x_base, ulong x_off, __global const float* w_base,
                         ulong w_off, uint rows, uint cols) {
    __global float* x = x_base + x_off;
    __global const float* w = w_base + w_off;
    ulong total = (ulong)rows * cols;
    RNN_GRID_LOOP(i, total) {
        float wr = w[i / cols];
        x[i] = (wr == 0.0f) ? 0.0f : wr * x[i];
    }
}

inline bool loss_row_valid(__global const uint* labels, __global const float* mask, ulong r,
                           uint flags, uint ignore) {
    return ((flags & 1u) == 0 || labels[r] != ignore) && ((flags & 2u) == 0 || mask[r] != 0.0f);
}

// One group of RED_THREADS work-items; see kernels-cu/varlen.cu. Without labels (flag 1 off)
// `labels` is any valid address, never read: a null one lets the compiler assume the load
// away or hoist it.
inline void loss_weights_body(__global const float* row_loss, __global const float* row_correct,
                              __global const float* mask, __global float* weights,
                              __global float* totals, __global const uint* labels, uint rows,
                              uint flags, uint ignore, __local float* sh) {
    uint lid = get_local_id(0);
    float count = 0.0f;
    for (ulong r = lid; r < rows; r += RED_THREADS)
        count += loss_row_valid(labels, mask, r, flags, ignore) ? 1.0f : 0.0f;
    count = group_sum(sh, count);
    float w = count > 0.0f ? (float)rows / count : 0.0f;
    float loss = 0.0f, correct = 0.0f;
    for (ulong r = lid; r < rows; r += RED_THREADS) {
        bool valid = loss_row_valid(labels, mask, r, flags, ignore);
        float wr = valid ? w : 0.0f;
        weights[r] = wr;
        if (valid && (flags & 4u)) {
            loss += wr * row_loss[r];
            if (flags & 8u) correct += wr * row_correct[r];
        }
    }
    // Every work-item reaches every barrier: the sums run with or without totals.
    loss = group_sum(sh, loss);
    correct = group_sum(sh, correct);
    if (lid == 0 && (flags & 4u)) {
        totals[0] += loss;
        if (flags & 8u) totals[1] += correct;
    }
}

__kernel void loss_weights(__global const float* loss_base, ulong loss_off,
                           __global const float* correct_base, ulong correct_off,
                           __global const float* mask_base, ulong mask_off,
                           __global float* w_base, ulong w_off, __global float* totals_base,
                           ulong totals_off, uint rows, uint flags) {
    __local float sh[RED_THREADS];
    loss_weights_body(loss_base + loss_off, correct_base + correct_off, mask_base + mask_off,
                      w_base + w_off, totals_base + totals_off,
                      (__global const uint*)(mask_base + mask_off), rows, flags & ~1u, 0u, sh);
}

__kernel void loss_weights_labels(__global const float* loss_base, ulong loss_off,
                                  __global const float* correct_base, ulong correct_off,
                                  __global const float* mask_base, ulong mask_off,
                                  __global float* w_base, ulong w_off,
                                  __global float* totals_base, ulong totals_off,
                                  __global const uint* labels_base, ulong labels_off, uint rows,
                                  uint flags, uint ignore) {
    __local float sh[RED_THREADS];
    loss_weights_body(loss_base + loss_off, correct_base + correct_off, mask_base + mask_off,
                      w_base + w_off, totals_base + totals_off, labels_base + labels_off, rows,
                      flags, ignore, sh);
}
