// Element-wise kernels: the bias + activation epilogue for activations cuBLASLt cannot fuse (erf GELU,
// tanh, ...), and the dtype conversion behind download().
#pragma once

#include <cuda_runtime_api.h>

#include "flashdeberta/core/matrix_ref.hpp"
#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/kernels/element.cuh"
#include "flashdeberta/math/activation.hpp"

namespace flashdeberta::cuda_kernels {

// out (rows, cols) with row stride ld = act(out + bias), in place.
template <class T>
__global__ void bias_activation_kernel(T* out, std::int64_t rows, std::int64_t cols, std::int64_t ld, T const* bias,
                                       Activation act) {
  std::int64_t const n = rows * cols;
  for (std::int64_t idx = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; idx < n;
       idx += std::int64_t{gridDim.x} * blockDim.x) {
    std::int64_t const r = idx / cols;
    std::int64_t const c = idx - r * cols;
    T* element = out + r * ld + c;
    float v = to_float(*element);
    if (bias != nullptr) v += to_float(bias[c]);
    *element = from_float<T>(apply_activation(act, v));
  }
}

inline void bias_activation(MatrixRef const& out, void const* bias, Activation act, cudaStream_t stream) {
  if ((bias == nullptr && act == Activation::kIdentity) || out.rows == 0 || out.cols == 0) return;
  dispatch_float_type(out.dtype, [&]<class T>() {
    constexpr int kThreads = 256;
    bias_activation_kernel<T><<<grid_for(out.rows * out.cols, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(out.data), out.rows, out.cols, out.ld, static_cast<T const*>(bias), act);
    FLASHDEBERTA_CUDA_CHECK_LAUNCH();
  });
}

template <class T>
__global__ void to_float_kernel(T const* in, float* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = to_float(in[i]);
}

// out (n floats, device) = in (n elements of dtype, device).
inline void convert_to_float(void const* in, DType dtype, float* out, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  dispatch_float_type(dtype, [&]<class T>() {
    constexpr int kThreads = 256;
    to_float_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<T const*>(in), out, n);
    FLASHDEBERTA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace flashdeberta::cuda_kernels
