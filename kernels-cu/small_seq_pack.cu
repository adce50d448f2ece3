// W_hh (`gates hidden x hidden`) into `packed` in the layout bl_load_w gives shared memory
// (forward or backward operand), for the `_l1` entries: one thread per packed element, which it
// gathers (zero in the padding of k). Geometry E over `gates hidden hp` elements.
extern "C" __global__ void bl_pack_w(const float* w_hh_base, u64 w_hh_off, float* packed_base,
                                     u64 packed_off, uint gates, uint hidden, uint forward) {
    const float* W = w_hh_base + w_hh_off;
    float* packed = packed_base + packed_off;
    const uint gh = gates * hidden;
    const uint hp = bl_pad4(hidden);
    const uint n = gh * hp;
    for (uint e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += gridDim.x * blockDim.x) {
        const uint q = e >> 2;
        const uint kk = e & 3u;
        float v;
        if (forward) {
            // (k, q') = W[q', k] at ((k / 4) gh + q') 4 + k % 4.
            const uint k4 = q / gh;
            const uint row = q - k4 * gh;
            const uint col = k4 * 4 + kk;
            v = col < hidden ? W[row * hidden + col] : 0.0f;
        } else {
            // (s hp + k, j) = W[s hidden + k, j] at (((s hp + k) / 4) hidden + j) 4 + k % 4.
            const uint k4 = q / hidden;
            const uint col = q - k4 * hidden;
            const uint k = k4 * 4 + kk;
            const uint s = k / hp;
            const uint r = k - s * hp;
            v = r < hidden ? W[(s * hidden + r) * hidden + col] : 0.0f;
        }
        packed[e] = v;
    }
}
