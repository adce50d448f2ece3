// W_hh (`gates hidden x hidden`) into `packed` in the layout bl_load_w gives local memory
// (forward or backward operand), for the `_l1` entries: one work-item per packed element, which
// it gathers (zero in the padding of k), so no fill is needed. Geometry E over
// `gates hidden hp` elements, hp = hidden rounded up to 4.
__kernel void bl_pack_w(__global const float* w_hh_base, ulong w_hh_off,
                        __global float* packed_base, ulong packed_off, uint gates, uint hidden,
                        uint forward) {
    __global const float* W = w_hh_base + w_hh_off;
    __global float* packed = packed_base + packed_off;
    uint gh = gates * hidden;
    uint hp = bl_pad4(hidden);
    uint n = gh * hp;
    RNN_GRID_LOOP(e, n) {
        uint q = (uint)e >> 2;
        uint kk = (uint)e & 3u;
        float v;
        if (forward) {
            // (k, q') = W[q', k] at ((k / 4) gh + q') 4 + k % 4.
            uint k4 = q / gh;
            uint row = q - k4 * gh;
            uint col = k4 * 4 + kk;
            v = col < hidden ? W[row * hidden + col] : 0.0f;
        } else {
            // (s hp + k, j) = W[s hidden + k, j] at (((s hp + k) / 4) hidden + j) 4 + k % 4.
            uint k4 = q / hidden;
            uint col = q - k4 * hidden;
            uint k = k4 * 4 + kk;
            uint s = k / hp;
            uint r = k - s * hp;
            v = r < hidden ? W[(s * hidden + r) * hidden + col] : 0.0f;
        }
        packed[e] = v;
    }
}
