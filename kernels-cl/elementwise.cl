// Elementwise kernels: 1-D grid-stride loops, any grid is correct.

__kernel void fill(__global float* y_base, ulong y_off, uint n, float value) {
    __global float* y = y_base + y_off;
    for (uint i = get_global_id(0); i < n; i += get_global_size(0)) y[i] = value;
}

__kernel void scale(__global float* x_base, ulong x_off, uint n, float alpha) {
    __global float* x = x_base + x_off;
    for (uint i = get_global_id(0); i < n; i += get_global_size(0)) x[i] *= alpha;
}

__kernel void axpy(__global const float* x_base, ulong x_off, __global float* y_base, ulong y_off,
                   uint n, float alpha) {
    __global const float* x = x_base + x_off;
    __global float* y = y_base + y_off;
    for (uint i = get_global_id(0); i < n; i += get_global_size(0)) y[i] += alpha * x[i];
}

__kernel void add(__global const float* a_base, ulong a_off, __global const float* b_base,
                  ulong b_off, __global float* o_base, ulong o_off, uint n) {
    __global const float* a = a_base + a_off;
    __global const float* b = b_base + b_off;
    __global float* o = o_base + o_off;
    for (uint i = get_global_id(0); i < n; i += get_global_size(0)) o[i] = a[i] + b[i];
}

__kernel void mul(__global const float* a_base, ulong a_off, __global const float* b_base,
                  ulong b_off, __global float* o_base, ulong o_off, uint n) {
    __global const float* a = a_base + a_off;
    __global const float* b = b_base + b_off;
    __global float* o = o_base + o_off;
    for (uint i = get_global_id(0); i < n; i += get_global_size(0)) o[i] = a[i] * b[i];
}

__kernel void bias_act_forward(__global float* z_base, ulong z_off, __global const float* b_base,
                               ulong b_off, __global float* y_base, ulong y_off, uint rows,
                               uint cols, uint act, float act_param) {
    __global float* z = z_base + z_off;
    __global const float* bias = b_base + b_off;
    __global float* y = y_base + y_off;
    uint n = rows * cols;
    for (uint i = get_global_id(0); i < n; i += get_global_size(0)) {
        float v = z[i] + bias[i % cols];
        z[i] = v;
        y[i] = act_forward(v, act, act_param);
    }
}

__kernel void activation(__global const float* x_base, ulong x_off, __global float* y_base,
                         ulong y_off, uint n, uint act, float act_param) {
    __global const float* x = x_base + x_off;
    __global float* y = y_base + y_off;
    for (uint i = get_global_id(0); i < n; i += get_global_size(0))
        y[i] = act_forward(x[i], act, act_param);
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
    int need_z = act == ACT_GELU || act == ACT_LEAKY;
    for (uint i = get_global_id(0); i < n; i += get_global_size(0)) {
        float zi = need_z ? z[i] : 0.0f;
        dz[i] = act_derivative(dy[i], zi, y[i], act, act_param);
    }
}

__kernel void clip_scale(__global float* x_base, ulong x_off, __global const float* nrm_base,
                         ulong nrm_off, uint n, float max_norm) {
    __global float* x = x_base + x_off;
    float f = fmin(1.0f, max_norm / (nrm_base[nrm_off] + 1e-6f));
    for (uint i = get_global_id(0); i < n; i += get_global_size(0)) x[i] *= f;
}

__kernel void gather_rows(__global const float* s_base, ulong s_off, __global const float* i_base,
                          ulong i_off, __global float* d_base, ulong d_off, uint nrows,
                          uint cols) {
    __global const float* src = s_base + s_off;
    __global const float* idx = i_base + i_off;
    __global float* dst = d_base + d_off;
    uint n = nrows * cols;
    for (uint i = get_global_id(0); i < n; i += get_global_size(0)) {
        uint r = i / cols;
        uint c = i - r * cols;
        dst[i] = src[(ulong)(uint)idx[r] * cols + c];
    }
}

__kernel void one_hot(__global const float* i_base, ulong i_off, __global float* o_base,
                      ulong o_off, uint n, uint classes) {
    __global const float* idx = i_base + i_off;
    __global float* out = o_base + o_off;
    uint total = n * classes;
    for (uint i = get_global_id(0); i < total; i += get_global_size(0)) {
        uint r = i / classes;
        uint c = i - r * classes;
        out[i] = idx[r] == (float)c ? 1.0f : 0.0f;
    }
}
