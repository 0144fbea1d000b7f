// Complex products (nvFuser's complex prod: complex multiply, identity 1+0i),
// accumulated in complex double: shuffles move both parts, and the block
// helper keeps its own shared scratch (the caller's real one is ignored).
__device__ __forceinline__ fb_cd fb_shfl_xor(fb_cd v, int m) {
    return fb_cd(__shfl_xor_sync(0xffffffffu, v.re, m), __shfl_xor_sync(0xffffffffu, v.im, m));
}
FB_DEFINE_BLOCK_REDUCE(fb_block_prod_cd_in, fb_cd, FB_MUL)
__device__ __forceinline__ fb_cd fb_block_prod_cd(fb_cd v, const void*, int gw = 32) {
    __shared__ fb_cd s[32];
    return fb_block_prod_cd_in(v, s, gw);
}
