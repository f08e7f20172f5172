//===- convert.cuh - 16-bit data as f32 values ------------------*- CUDA -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The _typed kernels read bf16 or f16 data as the f32 values a widening gives
// (exactly) and store f32 values as 16-bit data rounded to nearest, ties to
// even, as a narrowing's conversion does: so a typed kernel computes the bits
// its f32 twin computes between the conversions the GPU plan left out.
//
//===----------------------------------------------------------------------===//

#ifndef DTK_CUDA_CONVERT_CUH
#define DTK_CUDA_CONVERT_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace dtk {

__device__ inline float widen(float v) { return v; }
__device__ inline float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline float widen(__half v) { return __half2float(v); }

template <typename T> __device__ T narrow(float v);
template <> __device__ inline float narrow<float>(float v) { return v; }
template <> __device__ inline __nv_bfloat16 narrow<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ inline __half narrow<__half>(float v) {
  return __float2half_rn(v);
}

} // namespace dtk

#endif // DTK_CUDA_CONVERT_CUH
