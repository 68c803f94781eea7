// Element-wise kernels: the bias + activation epilogue for activations cuBLASLt cannot fuse (erf GELU,
// tanh, ...), and the dtype conversion behind download().
#pragma once

#include <cuda_runtime_api.h>

#include "flashdeberta/core/matrix_ref.hpp"
#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/kernels/element.cuh"
#include "flashdeberta/cuda/kernels/launch.hpp"
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

// The same with 16-byte vectors when each row is a whole number of them (every DeBERTa width): the pass
// over the (T, intermediate) activation is memory-bound, so its bytes per instruction set its speed.
template <class T>
__global__ void bias_activation_vec_kernel(T* out, std::int64_t rows, std::int64_t vecs_per_row, std::int64_t ld,
                                           T const* bias, Activation act) {
  constexpr int kPer = 16 / sizeof(T);
  std::int64_t const n = rows * vecs_per_row;
  for (std::int64_t idx = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; idx < n;
       idx += std::int64_t{gridDim.x} * blockDim.x) {
    std::int64_t const r = idx / vecs_per_row;
    std::int64_t const c = (idx - r * vecs_per_row) * kPer;
    auto* element = reinterpret_cast<uint4*>(out + r * ld + c);
    uint4 v = *element;
    T* values = reinterpret_cast<T*>(&v);
    uint4 bv{};
    if (bias != nullptr) bv = *reinterpret_cast<uint4 const*>(bias + c);
    T const* biases = reinterpret_cast<T const*>(&bv);
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      float x = to_float(values[e]);
      if (bias != nullptr) x += to_float(biases[e]);
      values[e] = from_float<T>(apply_activation(act, x));
    }
    *element = v;
  }
}

void bias_activation(MatrixRef const& out, void const* bias, Activation act, cudaStream_t stream) {
  if ((bias == nullptr && act == Activation::kIdentity) || out.rows == 0 || out.cols == 0) return;
  dispatch_float_type(out.dtype, [&]<class T>() {
    constexpr int kThreads = 256;
    constexpr std::int64_t kPer = 16 / sizeof(T);
    auto const aligned = [](void const* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    if (out.cols % kPer == 0 && out.ld % kPer == 0 && aligned(out.data) && (bias == nullptr || aligned(bias))) {
      std::int64_t const vecs = out.cols / kPer;
      bias_activation_vec_kernel<T><<<grid_for(out.rows * vecs, kThreads, 65535), kThreads, 0, stream>>>(
          static_cast<T*>(out.data), out.rows, vecs, out.ld, static_cast<T const*>(bias), act);
    } else {
      bias_activation_kernel<T><<<grid_for(out.rows * out.cols, kThreads), kThreads, 0, stream>>>(
          static_cast<T*>(out.data), out.rows, out.cols, out.ld, static_cast<T const*>(bias), act);
    }
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
void convert_to_float(void const* in, DType dtype, float* out, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  dispatch_float_type(dtype, [&]<class T>() {
    constexpr int kThreads = 256;
    to_float_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<T const*>(in), out, n);
    FLASHDEBERTA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace flashdeberta::cuda_kernels
