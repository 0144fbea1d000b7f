// float8 storage: one byte each, converted bit by bit (no fp8 headers needed).
// To float8: round to nearest even, saturating to the largest finite value
// (as nvFuser's cvt.rn.satfinite does); NaN stays NaN.
__device__ __forceinline__ float fb_e4m3_to_f(unsigned char b) {
    const unsigned s = (unsigned)(b & 0x80) << 24, e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7) return __uint_as_float(0x7fffffffu);
    if (e == 0) return __uint_as_float(s | __float_as_uint((float)m * 0.001953125f));
    return __uint_as_float(s | ((e + 120) << 23) | (m << 20));
}
__device__ __forceinline__ unsigned char fb_f_to_e4m3(float f) {
    const unsigned char s = (__float_as_uint(f) >> 24) & 0x80;
    if (f != f) return 0x7f;
    const float a = fabsf(f);
    if (a >= 448.0f) return s | 0x7e;
    if (a < 0.015625f) return s | (unsigned char)rintf(a * 512.0f);
    unsigned v = __float_as_uint(a);
    v += 0x7ffffu + ((v >> 20) & 1u);
    const int e = (int)(v >> 23) - 120;
    const unsigned m = (v >> 20) & 7u;
    if (e > 15 || (e == 15 && m == 7)) return s | 0x7e;
    return s | (unsigned char)((e << 3) | m);
}
__device__ __forceinline__ float fb_e5m2_to_f(unsigned char b) {
    const unsigned s = (unsigned)(b & 0x80) << 24, e = (b >> 2) & 31, m = b & 3;
    if (e == 31) return __uint_as_float(m == 0 ? (s | 0x7f800000u) : 0x7fffffffu);
    if (e == 0) return __uint_as_float(s | __float_as_uint((float)m * 1.52587890625e-05f));
    return __uint_as_float(s | ((e + 112) << 23) | (m << 21));
}
__device__ __forceinline__ unsigned char fb_f_to_e5m2(float f) {
    const unsigned char s = (__float_as_uint(f) >> 24) & 0x80;
    if (f != f) return 0x7f;
    const float a = fabsf(f);
    if (a >= 57344.0f) return s | 0x7b;
    if (a < 6.103515625e-05f) return s | (unsigned char)rintf(a * 65536.0f);
    unsigned v = __float_as_uint(a);
    v += 0xfffffu + ((v >> 21) & 1u);
    const int e = (int)(v >> 23) - 112;
    const unsigned m = (v >> 21) & 3u;
    if (e > 30) return s | 0x7b;
    return s | (unsigned char)((e << 2) | m);
}
// Storing an e5m2 register: an infinity there is a copied e5m2 element (a
// conversion rounds first, saturating), kept as nvFuser's set keeps it.
__device__ __forceinline__ unsigned char fb_store_e5m2(float f) {
    return isinf(f) ? (unsigned char)(f < 0.0f ? 0xfc : 0x7c) : fb_f_to_e5m2(f);
}
// e8m0: a biased exponent only (2^(b-127), 255 is NaN), converted as
// PyTorch's fp8e8m0fnu_from_fp32_value: sign ignored, 1.5 * 2^k rounds up.
__device__ __forceinline__ float fb_e8m0_to_f(unsigned char b) {
    if (b == 255) return __uint_as_float(0x7fffffffu);
    if (b == 0) return __uint_as_float(0x00400000u);
    return __uint_as_float((unsigned)b << 23);
}
__device__ __forceinline__ unsigned char fb_f_to_e8m0(float f) {
    const unsigned u = __float_as_uint(f);
    unsigned e = (u >> 23) & 0xffu;
    if (e == 0xffu) return 0xff;
    if ((u & 0x400000u) && ((u & 0x3fffffu) || e > 0)) e += 1;
    return (unsigned char)e;
}
__device__ __forceinline__ float fb_re4m3(float f) { return fb_e4m3_to_f(fb_f_to_e4m3(f)); }
__device__ __forceinline__ float fb_re5m2(float f) { return fb_e5m2_to_f(fb_f_to_e5m2(f)); }
__device__ __forceinline__ float fb_re8m0(float f) { return fb_e8m0_to_f(fb_f_to_e8m0(f)); }
