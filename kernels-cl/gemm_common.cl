// The operand load the f32 GEMM families share (kernels-cl/gemm.cl, gemm_tc.cl, gemm_wg.cl):
// the first file of the `gemm` and `gemm_tc` modules (src/backend/opencl/kernels.rs), guarded
// so that the whole op set, which holds both, has it once.

#ifndef RNN_CL_GEMM_COMMON
#define RNN_CL_GEMM_COMMON

// Four consecutive elements along the contiguous dimension of a row-major operand, zero-filled
// outside (row_lim, col_lim). `col` is a multiple of 4, so with `vec` (16-byte aligned address
// and ld % 4 == 0) the float4 access is aligned. No index here wraps: tiles start below their
// limit at multiples of 8 (k) or 128 (m, n), so start + 7 (or + 127) still fits a uint.
inline float4 sg_load4(__global const float* base, uint row, uint row_lim, uint col,
                       uint col_lim, uint ld, bool vec) {
    float4 v = (float4)(0.0f);
    if (row < row_lim) {
        __global const float* p = base + (ulong)row * ld + col;
        if (vec && col + 3 < col_lim) {
            v = *(__global const float4*)p;
        } else {
            if (col < col_lim) v.x = p[0];
            if (col + 1 < col_lim) v.y = p[1];
            if (col + 2 < col_lim) v.z = p[2];
            if (col + 3 < col_lim) v.w = p[3];
        }
    }
    return v;
}

#endif  // RNN_CL_GEMM_COMMON
