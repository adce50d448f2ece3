// Row-wise kernels (one group of 256 per row, rows strided by the number of groups), column
// sums, and the two-pass whole-buffer reductions. All trees in local memory, no atomics.

// Row and column counters are 64-bit so that `+= stride` cannot wrap for sizes near 2^32.
#define RNN_ROW_LOOP(row, rows) \
    for (ulong row = get_group_id(0); row < (ulong)(rows); row += get_num_groups(0))
#define RNN_COL_LOOP(c, cols) for (ulong c = lid; c < (ulong)(cols); c += RED_THREADS)

// softmax (`log_out` false) or log_softmax (true) of each row: one pass for the max, one for the
// sum of exp(x - max), one to write. The kernels pass a constant `log_out`, which inlining folds.
inline void softmax_rows(__global const float* x_base, ulong x_off, __global float* y_base,
                         ulong y_off, uint rows, uint cols, __local float* sh, bool log_out) {
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
        if (log_out) {
            float lse = mx + log(s);
            RNN_COL_LOOP(c, cols) y[c] = x[c] - lse;
        } else {
            float inv = 1.0f / s;
            RNN_COL_LOOP(c, cols) y[c] = exp(x[c] - mx) * inv;
        }
    }
}

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
__kernel void softmax(__global const float* x_base, ulong x_off, __global float* y_base,
                      ulong y_off, uint rows, uint cols) {
    __local float sh[RED_THREADS];
    softmax_rows(x_base, x_off, y_base, y_off, rows, cols, sh, false);
}

__kernel void log_softmax(__global const float* x_base, ulong x_off, __global float* y_base,
                          ulong y_off, uint rows, uint cols) {
    __local float sh[RED_THREADS];
    softmax_rows(x_base, x_off, y_base, y_off, rows, cols, sh, true);
}
#endif

// Geometry W: a segment of 32 work-items per row, 8 rows per group; every work-item runs the
// same number of loop iterations (the barriers in seg_* need that), inactive segments on
// rows past the end.
#define RNN_SEG_ROW_LOOP(base, rows) \
    for (ulong base = (ulong)get_group_id(0) * 8; base < (ulong)(rows); base += (ulong)get_num_groups(0) * 8)

// Columns a work-item of softmax_xent keeps in private memory: rows of up to XENT_SLOTS * SEG
// (128) classes are read from memory once and each exponential computed once; wider rows take
// three passes. Each work-item visits its columns in the same order and computes the same
// values either way, so the results do not depend on the path.
#define XENT_SLOTS 4

// The sums of `a` and `b` over the segment, as two seg_sum calls would add them (the same tree),
// in one round of barriers. `sh2` is a second array like `sh`.
inline void seg_sum2(__local float* sh, __local float* sh2, float* a, float* b) {
    uint lid = get_local_id(0);
    uint lane = lid % SEG;
    sh[lid] = *a;
    sh2[lid] = *b;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = SEG / 2; s > 0; s >>= 1) {
        if (lane < s) {
            sh[lid] += sh[lid + s];
            sh2[lid] += sh2[lid + s];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    *a = sh[lid - lane];
    *b = sh2[lid - lane];
    barrier(CLK_LOCAL_MEM_FENCE);
}

__kernel void softmax_xent(__global const float* x_base, ulong x_off,
                           __global const uint* l_base, ulong l_off, __global float* d_base,
                           ulong d_off, __global float* loss_base, ulong loss_off,
                           __global float* corr_base, ulong corr_off, __global float* tot_base,
                           ulong tot_off, __global float* part_base, ulong part_off,
                           __global uint* ticket_base, ulong ticket_off, uint rows, uint cols,
                           float grad_scale, uint with_totals) {
    __local float sh[RED_THREADS];
    __local float sh2[RED_THREADS];
    __local uint shi[RED_THREADS];
    __local float seg_loss[8];
    __local float seg_corr[8];
    __local uint flag;
    uint lid = get_local_id(0);
    uint lane = lid % SEG;
    uint seg = lid / SEG;
    const bool cached = cols <= XENT_SLOTS * SEG;
    float my_loss = 0.0f, my_corr = 0.0f;
    RNN_SEG_ROW_LOOP(base, rows) {
        ulong row = base + seg;
        bool active = row < rows;
        __global const float* x = x_base + x_off + row * cols;
        __global float* d = d_base + d_off + row * cols;
        int label = -1;
        if (active) {
            uint l = l_base[l_off + row];
            label = rnn_valid_index(l, cols) ? (int)l : -1;
        }
        float xv[XENT_SLOTS], ev[XENT_SLOTS];
        float mx = -INFINITY;
        uint arg = 0xffffffffu;
        if (active && cached) {
#pragma unroll
            for (uint j = 0; j < XENT_SLOTS; j++) {
                uint c = lane + j * SEG;
                xv[j] = c < cols ? x[c] : 0.0f;
            }
#pragma unroll
            for (uint j = 0; j < XENT_SLOTS; j++) {
                uint c = lane + j * SEG;
                if (c < cols && (xv[j] > mx || arg == 0xffffffffu)) { mx = xv[j]; arg = c; }
            }
        } else if (active) {
            for (ulong c = lane; c < cols; c += SEG) {
                float v = x[c];
                if (v > mx || arg == 0xffffffffu) { mx = v; arg = (uint)c; }
            }
        }
        seg_argmax(sh, shi, &mx, &arg);
        // The other classes' share is summed apart: p_label - 1 = -others / s, and a confident
        // row's loss is log1p(others). Both cancel when formed from p_label.
        float s = 0.0f, others = 0.0f;
        if (active && cached) {
#pragma unroll
            for (uint j = 0; j < XENT_SLOTS; j++) {
                uint c = lane + j * SEG;
                ev[j] = c < cols ? exp(xv[j] - mx) : 0.0f;
                s += ev[j];
                others += (int)c == label ? 0.0f : ev[j];
            }
        } else if (active) {
            for (ulong c = lane; c < cols; c += SEG) {
                float e = exp(x[c] - mx);
                s += e;
                others += (int)c == label ? 0.0f : e;
            }
        }
        seg_sum2(sh, sh2, &s, &others);
        if (active) {
            float inv = 1.0f / s;
            if (cached) {
#pragma unroll
                for (uint j = 0; j < XENT_SLOTS; j++) {
                    uint c = lane + j * SEG;
                    if (c < cols) d[c] = grad_scale * ((int)c == label ? -others : ev[j]) * inv;
                }
            } else {
                for (ulong c = lane; c < cols; c += SEG)
                    d[c] = grad_scale * ((int)c == label ? -others : exp(x[c] - mx)) * inv;
            }
            if (lane == 0) {
                float loss = label < 0           ? NAN
                             : x[label] == mx   ? log1p(others)
                                                : (mx + log(s) - x[label]);
                float corr = (label >= 0 && arg == (uint)label) ? 1.0f : 0.0f;
                loss_base[loss_off + row] = loss;
                corr_base[corr_off + row] = corr;
                my_loss += loss;
                my_corr += corr;
            }
        }
    }
    if (lane == 0) {
        seg_loss[seg] = my_loss;
        seg_corr[seg] = my_corr;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float a = 0.0f, b = 0.0f;
    if (lid == 0)
        for (uint j = 0; j < RED_THREADS / SEG; j++) {
            a += seg_loss[j];
            b += seg_corr[j];
        }
    rnn_add_totals(a, b, true, with_totals != 0u, tot_base + tot_off, part_base + part_off,
                   ticket_base + ticket_off, sh, &flag);
}

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
__kernel void mse(__global const float* p_base, ulong p_off, __global const float* t_base,
                  ulong t_off, __global float* d_base, ulong d_off, __global float* loss_base,
                  ulong loss_off, __global float* tot_base, ulong tot_off,
                  __global float* part_base, ulong part_off, __global uint* ticket_base,
                  ulong ticket_off, uint rows, uint cols, float grad_scale, uint with_totals) {
    __local float sh[RED_THREADS];
    __local float seg_loss[8];
    __local uint flag;
    uint lid = get_local_id(0);
    uint lane = lid % SEG;
    uint seg = lid / SEG;
    float inv_cols = 1.0f / (float)cols;
    float my_loss = 0.0f;
    RNN_SEG_ROW_LOOP(base, rows) {
        ulong row = base + seg;
        bool active = row < rows;
        float s = 0.0f;
        if (active) {
            __global const float* p = p_base + p_off + row * cols;
            __global const float* t = t_base + t_off + row * cols;
            __global float* d = d_base + d_off + row * cols;
            for (ulong c = lane; c < cols; c += SEG) {
                float diff = p[c] - t[c];
                s += diff * diff;
                d[c] = grad_scale * 2.0f * diff * inv_cols;
            }
        }
        s = seg_sum(sh, s);
        if (active && lane == 0) {
            loss_base[loss_off + row] = s * inv_cols;
            my_loss += s * inv_cols;
        }
    }
    if (lane == 0) seg_loss[seg] = my_loss;
    barrier(CLK_LOCAL_MEM_FENCE);
    float a = 0.0f;
    if (lid == 0)
        for (uint j = 0; j < RED_THREADS / SEG; j++) a += seg_loss[j];
    rnn_add_totals(a, 0.0f, false, with_totals != 0u, tot_base + tot_off, part_base + part_off,
                   ticket_base + ticket_off, sh, &flag);
}
#endif

// Column sums (geometry C) of g = dy * act'(z) over a rows x cols matrix, with g also stored
// in dz when `write_dz` (dz may be dy): the backward of bias_act_forward; `sum_rows` is this
// kernel with act = identity and no dz. Group (32, 8) over a strip of 32 column groups (group
// x) and a chunk of `chunk_rows` rows (group y); with `quad` a column group is 4 columns moved
// as float4s (cols % 4 == 0, every view 16-byte aligned), else one column. BAB_ROWS rows of a
// work-item are loaded before any is stored (dz may alias dy). With one chunk the group writes
// `out`; otherwise it stores its sums in part[chunk * cols + col] and the last group of the
// strip to arrive (one ticket per strip, geometry L) adds the chunks in order.
#define BAB_ROWS 4

// The upstream gradient of column group `col` (1 or 4 columns) of row `row`: from dy, or with
// pk > 0 as the product of row `row` of pg (rows x pk) and columns col.. of pw (pk x cols), the
// input gradient of a thin layer after this one (bias_act_backward_product), in k order.
inline float4 bab_dy(__global const float* dy, __global const float* pg,
                     __global const float* pw, uint pk, ulong row, ulong col, uint cols,
                     bool quad) {
    if (pk == 0) {
        const ulong at = row * cols + col;
        return quad ? *RNN_CF4(dy + at) : (float4)(dy[at], 0.0f, 0.0f, 0.0f);
    }
    float4 o = (float4)(0.0f);
    for (uint j = 0; j < pk; ++j) {
        const float gj = pg[row * pk + j];
        __global const float* wj = pw + (ulong)j * cols + col;
        o = fma((float4)(gj), quad ? *RNN_CF4(wj) : (float4)(wj[0], 0.0f, 0.0f, 0.0f), o);
    }
    return o;
}

// Puts work-item lx's column sums `v` into its row of `sh`: four at lx * 4 when `quad`, else
// v.x at lx.
inline void bab_stage(__local float* row, uint lx, uint quad, float4 v) {
    const uint w = quad ? 4 : 1;
    row[lx * w] = v.x;
    if (quad) {
        row[lx * 4 + 1] = v.y;
        row[lx * 4 + 2] = v.z;
        row[lx * 4 + 3] = v.w;
    }
}

// The body of both entries (dy from `dy`, or with pk > 0 from the product of pg and pw); `a`
// is what act_grad reads: y for relu, sigmoid and tanh, z for gelu and leaky relu.
inline void bab_body(__global const float* dy, __global const float* pg,
                     __global const float* pw, uint pk, __global const float* a,
                     __global float* dz, __global float* out, __global float* part,
                     __global uint* tickets, uint rows, uint cols, uint chunk_rows, uint act,
                     uint write_dz, uint quad, float act_param, float beta,
                     __local float (*sh)[4 * 32 + 1], __local uint* flag) {
    const bool load_a = act != ACT_IDENTITY;
    const uint lx = get_local_id(0);
    const uint ly = get_local_id(1);
    const uint chunks = get_num_groups(1);
    const uint w = quad ? 4 : 1;
    // This work-item's column group in the final sums; `col` below is the one it streams.
    const ulong own_col = ((ulong)get_group_id(0) * 32 + lx) * w;
    // Fewer than 32 single columns: the work-items of a row fold into `fold` rows of `cols`,
    // so a segment covers `fold` rows a step instead of leaving most of it idle.
    const uint fold = (!quad && cols < 32) ? 32 / cols : 1;
    const ulong col = fold > 1 ? (lx < fold * cols ? lx % cols : cols) : own_col;
    const uint step = 8 * fold;
    const ulong r0 = (ulong)get_group_id(1) * chunk_rows;
    const ulong r1 = min((ulong)rows, r0 + chunk_rows);
    const ulong first = r0 + (ulong)ly * fold + (fold > 1 ? lx / cols : 0);
    float4 s = (float4)(0.0f);
    if (col < cols) {
        for (ulong r = first; r < r1; r += (ulong)step * BAB_ROWS) {
            float4 g[BAB_ROWS], av[BAB_ROWS];
            for (int u = 0; u < BAB_ROWS; ++u) {
                const ulong at = (r + step * u) * cols + col;
                if (r + step * u >= r1) continue;
                av[u] = (float4)(0.0f);
                g[u] = bab_dy(dy, pg, pw, pk, r + step * u, col, cols, quad);
                if (load_a) av[u] = quad ? *RNN_CF4(a + at) : (float4)(a[at], 0.0f, 0.0f, 0.0f);
            }
            for (int u = 0; u < BAB_ROWS; ++u) {
                const ulong at = (r + step * u) * cols + col;
                if (r + step * u >= r1) continue;
                float4 v = (float4)(g[u].x * rnn_stream_act_grad(av[u].x, av[u].x, act, act_param),
                                    g[u].y * rnn_stream_act_grad(av[u].y, av[u].y, act, act_param),
                                    g[u].z * rnn_stream_act_grad(av[u].z, av[u].z, act, act_param),
                                    g[u].w * rnn_stream_act_grad(av[u].w, av[u].w, act, act_param));
                s += v;
                if (write_dz) {
                    if (quad) {
                        *RNN_F4(dz + at) = v;
                    } else {
                        dz[at] = v.x;
                    }
                }
            }
        }
    }
    // Work-item e < 32 w owns column `strip + e` from here on.
    const uint e = ly * 32 + lx;
    const ulong strip = (ulong)get_group_id(0) * 32 * w;
    bab_stage(sh[ly], lx, quad, s);
    barrier(CLK_LOCAL_MEM_FENCE);
    const bool owner = e < 32 * w && strip + e < cols;
    float t = 0.0f;
    if (owner)
        for (uint j = 0; j < 8; j++)
            for (uint q = 0; q < fold; q++) t += sh[j][e + q * cols];
    // No early return and every barrier reached by all work-items: PoCL's barrier handling
    // mis-compiled a version with a (uniform) early return before the last-arrival step.
    if (chunks > 1 && owner) {
        part[(ulong)get_group_id(1) * cols + strip + e] = t;
        mem_fence(CLK_GLOBAL_MEM_FENCE);
    }
    bool last = rnn_last_arrival(tickets + get_group_id(0), chunks, flag);
    float4 u = (float4)(0.0f);
    if (last && chunks > 1 && own_col < cols)
#pragma unroll 4
        for (uint j = ly; j < chunks; j += 8) {
            __global const float* pj = part + (ulong)j * cols + own_col;
            u.x += rnn_load_coherent(pj);
            if (quad) {
                u.y += rnn_load_coherent(pj + 1);
                u.z += rnn_load_coherent(pj + 2);
                u.w += rnn_load_coherent(pj + 3);
            }
        }
    barrier(CLK_LOCAL_MEM_FENCE);  // every owner has read sh above
    bab_stage(sh[ly], lx, quad, u);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (last && owner) {
        float v = t;
        if (chunks > 1) {
            v = 0.0f;
            for (uint j = 0; j < 8; j++) v += sh[j][e];
        }
        out[strip + e] = beta != 0.0f ? beta * out[strip + e] + v : v;
    }
}

__kernel void bias_act_backward(__global const float* dy_base, ulong dy_off,
                                __global const float* z_base, ulong z_off,
                                __global const float* y_base, ulong y_off,
                                __global float* dz_base, ulong dz_off, __global float* o_base,
                                ulong o_off, __global float* part_base, ulong part_off,
                                __global uint* ticket_base, ulong ticket_off, uint rows,
                                uint cols, uint chunk_rows, uint act, uint write_dz, uint quad,
                                float act_param, float beta) {
    __local float sh[8][4 * 32 + 1];
    __local uint flag;
    // Load only the one act_grad reads, and nothing for identity.
    __global const float* a =
        (act == ACT_GELU || act == ACT_LEAKY) ? z_base + z_off : y_base + y_off;
    bab_body(dy_base + dy_off, 0, 0, 0, a, dz_base + dz_off, o_base + o_off,
             part_base + part_off, ticket_base + ticket_off, rows, cols, chunk_rows, act,
             write_dz, quad, act_param, beta, sh, &flag);
}

// bias_act_backward with dy = g w (g rows x k, w k x cols, 0 < k <= 16) formed in the pass and
// never stored; dz always written. `a_base` is z for GELU and leaky ReLU, y otherwise.
__kernel void bias_act_backward_product(
    __global const float* g_base, ulong g_off, __global const float* w_base, ulong w_off,
    __global const float* a_base, ulong a_off, __global float* dz_base, ulong dz_off,
    __global float* o_base, ulong o_off, __global float* part_base, ulong part_off,
    __global uint* ticket_base, ulong ticket_off, uint rows, uint cols, uint k, uint chunk_rows,
    uint act, uint quad, float act_param) {
    __local float sh[8][4 * 32 + 1];
    __local uint flag;
    bab_body(0, g_base + g_off, w_base + w_off, k, a_base + a_off, dz_base + dz_off,
             o_base + o_off, part_base + part_off, ticket_base + ticket_off, rows, cols,
             chunk_rows, act, 1, quad, act_param, 0.0f, sh, &flag);
}

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
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
#endif

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

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
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
#endif

__kernel void clip_final(__global const float* p_base, ulong p_off, __global float* n_base,
                         ulong n_off, uint g) {
    __local float sh[RED_THREADS];
    __global const float* partial = p_base + p_off;
    float s = 0.0f;
    for (ulong j = get_local_id(0); j < g; j += RED_THREADS) s += partial[j];
    s = group_sum(sh, s);
    if (get_local_id(0) == 0) n_base[n_off] = sqrt(s);
}
