// nvFuser's random numbers (runtime/random_numbers.cu): Philox4x32-10 keyed by the seed, counter
// (offset, subsequence); element i of an op takes subsequence i / m and output i % m (m = 4, or 2 for
// double). Written with nvFuser's expressions so that NVRTC contracts them into the same FMAs.
struct fb_u4 { unsigned v[4]; };
__device__ __forceinline__ fb_u4 fb_philox(unsigned long long seed, unsigned long long sub, unsigned long long off) {
    unsigned c0 = (unsigned)off, c1 = (unsigned)(off >> 32), c2 = (unsigned)sub, c3 = (unsigned)(sub >> 32);
    unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
    #pragma unroll
    for (int r = 0; r < 10; r++) {
        unsigned lo0 = 0xD2511F53u * c0, hi0 = __umulhi(0xD2511F53u, c0);
        unsigned lo1 = 0xCD9E8D57u * c2, hi1 = __umulhi(0xCD9E8D57u, c2);
        c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;
        k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
    }
    fb_u4 o; o.v[0] = c0; o.v[1] = c1; o.v[2] = c2; o.v[3] = c3;
    return o;
}
__device__ __forceinline__ float fb_raw_uniformf(unsigned x) {
    const float scale = (float)(1.0 / (double)(1ll << 32));
    return (float)x * scale + 0.5f * scale;
}
__device__ __forceinline__ float fb_uniformf(unsigned x) { float r = fb_raw_uniformf(x); return r == 1.0f ? 0.0f : r; }
__device__ __forceinline__ double fb_uniformd(unsigned x, unsigned y) {
    const double scale = 1.0 / (double)(1ll << 53);
    const unsigned long long z = (unsigned long long)x ^ ((unsigned long long)y << (53 - 32));
    double r = (double)z * scale + 0.5 * scale;
    return r == 1.0 ? 0.0 : r;
}
// Each Philox block gives four floats: element i is word i % 4 of block i / 4.
// The `_r` forms take the block, so that a thread drawing four consecutive
// elements runs Philox once (codegen's lowerer shares it between lanes).
__device__ __forceinline__ float fb_rng_uniformf_r(fb_u4 r, int c, float from, float to) {
    float range = to - from;
    return from + range * fb_uniformf(r.v[c]);
}
__device__ float fb_rng_uniformf(unsigned long long seed, unsigned long long off, unsigned long long i, float from, float to) {
    return fb_rng_uniformf_r(fb_philox(seed, i / 4, off), (int)(i % 4), from, to);
}
// Half/bfloat16 (held in a float): a value that rounds to `to` becomes `from`.
__device__ __forceinline__ float fb_rng_uniform_reduced_r(fb_u4 r, int c, float from, float to, bool bf) {
    float range = to - from;
    float v = from + range * fb_raw_uniformf(r.v[c]);
    float h = bf ? fb_rbf(v) : fb_rh(v);
    float t = bf ? fb_rbf(to) : fb_rh(to);
    return h == t ? (bf ? fb_rbf(from) : fb_rh(from)) : h;
}
__device__ float fb_rng_uniform_reduced(unsigned long long seed, unsigned long long off, unsigned long long i, float from, float to, bool bf) {
    return fb_rng_uniform_reduced_r(fb_philox(seed, i / 4, off), (int)(i % 4), from, to, bf);
}
__device__ double fb_rng_uniformd(unsigned long long seed, unsigned long long off, unsigned long long i, double from, double to) {
    fb_u4 r = fb_philox(seed, i / 2, off);
    int c = (int)(i % 2);
    double range = to - from;
    return from + range * fb_uniformd(r.v[c * 2], r.v[c * 2 + 1]);
}
// Box-Muller: even outputs take the sine, odd ones the cosine of the pair's angle.
__device__ __forceinline__ float fb_rng_normalf_r(fb_u4 r, int c, float mean, float std) {
    float u = fb_uniformf(r.v[c / 2 * 2]);
    float v = fb_uniformf(r.v[1 + c / 2 * 2]) * 6.2831855f;
    float n = (c % 2 == 0) ? sqrtf(-2.0f * logf(u)) * sinf(v) : sqrtf(-2.0f * logf(u)) * cosf(v);
    return n * std + mean;
}
__device__ float fb_rng_normalf(unsigned long long seed, unsigned long long off, unsigned long long i, float mean, float std) {
    return fb_rng_normalf_r(fb_philox(seed, i / 4, off), (int)(i % 4), mean, std);
}
__device__ double fb_rng_normald(unsigned long long seed, unsigned long long off, unsigned long long i, double mean, double std) {
    fb_u4 r = fb_philox(seed, i / 2, off);
    int c = (int)(i % 2);
    double u = fb_uniformd(r.v[0], r.v[1]);
    double v = fb_uniformd(r.v[2], r.v[3]) * 6.2831853071795860;
    double n = (c % 2 == 0) ? sqrt(-2.0 * log(u)) * sin(v) : sqrt(-2.0 * log(u)) * cos(v);
    return n * std + mean;
}
