// Elementwise kernels (geometry V: the helpers are in stream.cl).

__kernel void fill(__global float* y_base, ulong y_off, uint n, float value) {
    __global float* y = y_base + y_off;
    const float4 v4 = (float4)(value);
#define L(k, v)
#define S(k, v) RNN_F4(y)[k] = v4
#define E(i) y[i] = value
    RNN_STREAM(n, (y_off & 3) == 0, rnn_v1, L, S, E)
#undef L
#undef S
#undef E
}

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
__kernel void scale(__global float* x_base, ulong x_off, uint n, float alpha) {
    __global float* x = x_base + x_off;
#define L(k, v) v.a = RNN_F4(x)[k]
#define S(k, v) RNN_F4(x)[k] = v.a * alpha
#define E(i) x[i] *= alpha
    RNN_STREAM(n, (x_off & 3) == 0, rnn_v1, L, S, E)
#undef L
#undef S
#undef E
}

__kernel void axpy(__global const float* x_base, ulong x_off, __global float* y_base, ulong y_off,
                   uint n, float alpha) {
    __global const float* x = x_base + x_off;
    __global float* y = y_base + y_off;
#define L(k, v) (v.a = RNN_CF4(x)[k], v.b = RNN_F4(y)[k])
#define S(k, v) RNN_F4(y)[k] = v.b + alpha * v.a
#define E(i) y[i] += alpha * x[i]
    RNN_STREAM(n, ((x_off | y_off) & 3) == 0, rnn_v2, L, S, E)
#undef L
#undef S
#undef E
}
#endif

// o = a * b when `product`, else a + b; the kernels pass a constant `product`, which inlining
// folds. `o` may be the same view as `a` or `b`: each element is read before the same
// work-item writes it.
inline void rnn_add_or_mul(__global const float* a, __global const float* b, __global float* o,
                           uint n, bool aligned, bool product) {
#define L(k, v) (v.a = RNN_CF4(a)[k], v.b = RNN_CF4(b)[k])
#define S(k, v) RNN_F4(o)[k] = product ? v.a * v.b : v.a + v.b
#define E(i) o[i] = product ? a[i] * b[i] : a[i] + b[i]
    RNN_STREAM(n, aligned, rnn_v2, L, S, E)
#undef L
#undef S
#undef E
}

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
__kernel void add(__global const float* a_base, ulong a_off, __global const float* b_base,
                  ulong b_off, __global float* o_base, ulong o_off, uint n) {
    rnn_add_or_mul(a_base + a_off, b_base + b_off, o_base + o_off, n,
                   ((a_off | b_off | o_off) & 3) == 0, false);
}

__kernel void mul(__global const float* a_base, ulong a_off, __global const float* b_base,
                  ulong b_off, __global float* o_base, ulong o_off, uint n) {
    rnn_add_or_mul(a_base + a_off, b_base + b_off, o_base + o_off, n,
                   ((a_off | b_off | o_off) & 3) == 0, true);
}
#endif

// The bias is small and stays in cache; the four columns of a float4 may wrap past a row end.
// rows * cols fits a uint (checked by the host).
inline float4 rnn_bias4(__global const float* bias, ulong k, uint cols) {
    uint c = (uint)(4 * k) % cols;
    float4 r;
    r.x = bias[c];
    c = c + 1 == cols ? 0 : c + 1;
    r.y = bias[c];
    c = c + 1 == cols ? 0 : c + 1;
    r.z = bias[c];
    c = c + 1 == cols ? 0 : c + 1;
    r.w = bias[c];
    return r;
}

__kernel void bias_act_forward(__global float* z_base, ulong z_off, __global const float* b_base,
                               ulong b_off, __global float* y_base, ulong y_off, uint rows,
                               uint cols, uint act, float act_param) {
    __global float* z = z_base + z_off;
    __global const float* bias = b_base + b_off;
    __global float* y = y_base + y_off;
    const bool same = z == y;
    const uint n = rows * cols;
#define F(t) rnn_stream_act(t, K, act_param)
#define L(k, v) v.a = RNN_F4(z)[k] + rnn_bias4(bias, k, cols)
// In place (y is z) only y is stored: the pre-activation is not kept then.
#define S(k, v) ((same ? 0 : (RNN_F4(z)[k] = v.a, 0)), RNN_F4(y)[k] = RNN_MAP4(v.a, F))
#define E(i)                                   \
    {                                          \
        const float t_ = z[i] + bias[i % cols]; \
        z[i] = t_;                             \
        y[i] = F(t_);                          \
    }
    RNN_WITH_ACT(act, RNN_STREAM(n, ((z_off | y_off) & 3) == 0, rnn_v1, L, S, E))
#undef F
#undef L
#undef S
#undef E
}

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
__kernel void activation(__global const float* x_base, ulong x_off, __global float* y_base,
                         ulong y_off, uint n, uint act, float act_param) {
    __global const float* x = x_base + x_off;
    __global float* y = y_base + y_off;
#define F(t) rnn_stream_act(t, K, act_param)
#define L(k, v) v.a = RNN_CF4(x)[k]
#define S(k, v) RNN_F4(y)[k] = RNN_MAP4(v.a, F)
#define E(i) y[i] = F(x[i])
    RNN_WITH_ACT(act, RNN_STREAM(n, ((x_off | y_off) & 3) == 0, rnn_v1, L, S, E))
#undef F
#undef L
#undef S
#undef E
}

__kernel void act_backward(__global const float* dy_base, ulong dy_off,
                           __global const float* z_base, ulong z_off,
                           __global const float* y_base, ulong y_off, __global float* dz_base,
                           ulong dz_off, uint n, uint act, float act_param) {
    __global const float* dy = dy_base + dy_off;
    __global const float* z = z_base + z_off;
    __global const float* y = y_base + y_off;
    __global float* dz = dz_base + dz_off;
    // z is only read by the activations whose derivative needs it (the host may pass y as z).
    if (act == ACT_GELU || act == ACT_LEAKY) {
#define D(g, zi, yi) ((g) * rnn_stream_act_grad(zi, yi, K, act_param))
#define L(k, v) (v.a = RNN_CF4(dy)[k], v.b = RNN_CF4(z)[k], v.c = RNN_CF4(y)[k])
#define S(k, v)                                                                          \
    RNN_F4(dz)[k] = (float4)(D(v.a.x, v.b.x, v.c.x), D(v.a.y, v.b.y, v.c.y),             \
                             D(v.a.z, v.b.z, v.c.z), D(v.a.w, v.b.w, v.c.w))
#define E(i) dz[i] = D(dy[i], z[i], y[i])
        RNN_WITH_ACT(act,
                     RNN_STREAM(n, ((dy_off | z_off | y_off | dz_off) & 3) == 0, rnn_v3, L, S, E))
#undef L
#undef S
#undef E
    } else {
#define L(k, v) (v.a = RNN_CF4(dy)[k], v.b = RNN_CF4(y)[k])
#define S(k, v)                                                                          \
    RNN_F4(dz)[k] = (float4)(D(v.a.x, 0.0f, v.b.x), D(v.a.y, 0.0f, v.b.y),               \
                             D(v.a.z, 0.0f, v.b.z), D(v.a.w, 0.0f, v.b.w))
#define E(i) dz[i] = D(dy[i], 0.0f, y[i])
        RNN_WITH_ACT(act, RNN_STREAM(n, ((dy_off | y_off | dz_off) & 3) == 0, rnn_v2, L, S, E))
#undef L
#undef S
#undef E
#undef D
    }
}
#endif

__kernel void clip_scale(__global float* x_base, ulong x_off, __global const float* nrm_base,
                         ulong nrm_off, uint n, float max_norm) {
    __global float* x = x_base + x_off;
    float f = fmin(1.0f, max_norm / (nrm_base[nrm_off] + 1e-6f));
    RNN_GRID_LOOP(i, n) x[i] *= f;
}

// The body of the row gathers over `s_base`/`i_base`/`d_base` (elements of type T): a row whose
// index is invalid (rnn_valid_index over src_rows) becomes `invalid`, since a kernel cannot
// return an error and must never read outside `src`.
#define RNN_GATHER_ROWS_BODY(T, invalid)                                                        \
    __global const T* src = s_base + s_off;                                                     \
    __global const uint* idx = i_base + i_off;                                                  \
    __global T* dst = d_base + d_off;                                                           \
    ulong n = (ulong)nrows * cols;                                                              \
    RNN_GRID_LOOP(i, n) {                                                                       \
        ulong r = i / cols;                                                                     \
        ulong c = i - r * cols;                                                                 \
        uint v = idx[r];                                                                        \
        dst[i] = rnn_valid_index(v, src_rows) ? src[(ulong)v * cols + c] : (invalid);          \
    }

// Float rows: a NaN row for an invalid index.
__kernel void gather_rows(__global const float* s_base, ulong s_off, __global const uint* i_base,
                          ulong i_off, __global float* d_base, ulong d_off, uint nrows,
                          uint cols, uint src_rows) {
    RNN_GATHER_ROWS_BODY(float, NAN)
}

// u32 rows (labels, token ids moved with their samples): a row of RNN_INVALID_INDEX, itself an
// invalid index further on.
__kernel void gather_rows_u32(__global const uint* s_base, ulong s_off,
                              __global const uint* i_base, ulong i_off, __global uint* d_base,
                              ulong d_off, uint nrows, uint cols, uint src_rows) {
    RNN_GATHER_ROWS_BODY(uint, RNN_INVALID_INDEX)
}

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
// An invalid index (rnn_valid_index) gives an all-zero row, as on the CPU.
__kernel void one_hot(__global const uint* i_base, ulong i_off, __global float* o_base,
                      ulong o_off, uint n, uint classes) {
    __global const uint* idx = i_base + i_off;
    __global float* out = o_base + o_off;
    ulong total = (ulong)n * classes;
    RNN_GRID_LOOP(i, total) {
        ulong r = i / classes;
        ulong c = i - r * classes;
        uint v = idx[r];
        out[i] = (rnn_valid_index(v, classes) && (ulong)v == c) ? 1.0f : 0.0f;
    }
}
#endif
