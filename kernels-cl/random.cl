// Counter-based random masks (dropout) and the advance of the device-side random state. The
// hash is the one in src/ops/mod.rs (`rng_key`, `rng_hash`, `dropout_keeps`), integer for
// integer, so every backend draws the same mask. The state is 6 floats holding 16-bit limbs:
// seed (4 limbs, least significant first), then the step counter (2 limbs).

// "lowbias32" (hash-prospector): a bijection on 32 bits with good avalanche.
inline uint rnn_mix32(uint x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

inline uint rnn_limb(__global const float* s, int i) { return (uint)s[i] & 0xffffu; }

__kernel void dropout(__global const float* x_base, ulong x_off, __global float* y_base,
                      ulong y_off, __global const float* s_base, ulong s_off, uint n,
                      uint stream, uint threshold, float scale) {
    __global const float* x = x_base + x_off;
    __global float* y = y_base + y_off;
    __global const float* s = s_base + s_off;
    const uint seed_lo = rnn_limb(s, 0) | (rnn_limb(s, 1) << 16);
    const uint seed_hi = rnn_limb(s, 2) | (rnn_limb(s, 3) << 16);
    const uint counter = rnn_limb(s, 4) | (rnn_limb(s, 5) << 16);
    const uint k0 =
        rnn_mix32(seed_lo ^ rnn_mix32(seed_hi ^ rnn_mix32(counter ^ rnn_mix32(stream ^ 0x9e3779b9u))));
    const uint k1 = rnn_mix32(k0 ^ 0x85ebca6bu);
    RNN_GRID_LOOP(i, n) {
        const uint h = rnn_mix32(rnn_mix32((uint)i ^ k0) + k1);
        // A multiply, not a select: a NaN input stays NaN where it is dropped (as PyTorch).
        y[i] = x[i] * ((h >> 8) >= threshold ? scale : 0.0f);
    }
}

// One work-item: counter += 1 over its two 16-bit limbs.
__kernel void rng_advance(__global float* s_base, ulong s_off) {
    __global float* s = s_base + s_off;
    if (get_global_id(0) == 0) {
        const uint lo = rnn_limb(s, 4) + 1u;
        if (lo == 0x10000u) {
            s[4] = 0.0f;
            s[5] = (float)((rnn_limb(s, 5) + 1u) & 0xffffu);
        } else {
            s[4] = (float)lo;
        }
    }
}
