// The training ops' elementwise kernels: activation forward and backward, dropout, the AdamW update, fill and the
// rounding of float32 operands to 16 bits for mixed-precision products. One
// thread per element (grid-stride), each reading its inputs before it writes, so an output may alias its input as
// the contracts allow. The formulas are the host backends' (kokkos/ops/training_elementwise_ops.hpp) term for term.
#pragma once

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>

#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/kernels/element.cuh"
#include "flashdeberta/cuda/training/launch.hpp"
#include "flashdeberta/math/activation.hpp"

namespace flashdeberta::cuda_kernels {

namespace training {

// A (rows, cols) float32 view with row stride ld; element idx of the view (row-major over the view, not the ld).
struct View {
  float* data;
  std::int64_t cols;
  std::int64_t ld;

  __device__ float& at(std::int64_t idx) const {
    std::int64_t const r = idx / cols;
    return data[r * ld + (idx - r * cols)];
  }
};

inline View view(MatrixRef const& m) { return {static_cast<float*>(m.data), m.cols, m.ld}; }

// body(idx) for this thread's elements of [0, count), grid-stride.
template <class Body>
__device__ __forceinline__ void for_each_element(std::int64_t count, Body const& body) {
  for (std::int64_t idx = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; idx < count;
       idx += std::int64_t{gridDim.x} * blockDim.x)
    body(idx);
}

// The forward is apply_activation, as the GEMM epilogue (kernels/elementwise.cuh) applies it: an activation run
// on its own and one after a GEMM agree bit for bit.
__global__ void activation_kernel(View x, View dy, View out, std::int64_t count, Activation act, bool backward,
                                  bool accumulate) {
  for_each_element(count, [&](std::int64_t idx) {
    float const v = backward ? activation_backward(act, x.at(idx), dy.at(idx)) : apply_activation(act, x.at(idx));
    float& o = out.at(idx);
    o = accumulate ? o + v : v;
  });
}

// Element idx of the view draws counter offset + idx: the mask counts the view's elements, not its row stride.
__global__ void dropout_kernel(View x, View out, std::int64_t count, float probability, float scale, std::uint64_t seed,
                               std::uint64_t offset) {
  for_each_element(count, [&](std::int64_t idx) {
    float const v = x.at(idx);
    if (probability == 0.0f) {
      out.at(idx) = v;
    } else {
      bool const keep = dropout_uniform(seed, offset + static_cast<std::uint64_t>(idx)) >= probability;
      out.at(idx) = v * (keep ? scale : 0.0f);
    }
  });
}

// torch.optim.AdamW's _single_tensor_adamw as the host backends evaluate it: float64 arithmetic per element, one
// rounding per stored value. The explicit _rn operations keep nvcc from contracting a * b + c into FMAs, so the
// float64 values, and the stored float32 ones, are the host's (compiled without FMA) bit for bit.
struct AdamWStep {
  double one_minus_beta1, beta2, one_minus_beta2, eps, grad_scale;
  double decay;                  // 1 - lr weight_decay
  double step_size;              // lr / (1 - beta1^step)
  double bias_correction2_sqrt;  // sqrt(1 - beta2^step)
};

__global__ void adamw_kernel(float* weights, float const* grads, float* exp_avg, float* exp_avg_sq, std::int64_t count,
                             AdamWStep s) {
  for_each_element(count, [&](std::int64_t i) {
    double const g = __dmul_rn(static_cast<double>(grads[i]), s.grad_scale);
    double const m_old = exp_avg[i];
    // lerp(m, g, 1 - beta1) as PyTorch evaluates it for a weight below 0.5: m + (1 - beta1) (g - m)
    float const m = static_cast<float>(__dadd_rn(m_old, __dmul_rn(s.one_minus_beta1, __dsub_rn(g, m_old))));
    float const v = static_cast<float>(__dadd_rn(__dmul_rn(s.beta2, static_cast<double>(exp_avg_sq[i])),
                                                 __dmul_rn(__dmul_rn(s.one_minus_beta2, g), g)));
    double const denom = __dadd_rn(sqrt(static_cast<double>(v)) / s.bias_correction2_sqrt, s.eps);
    weights[i] = static_cast<float>(__dsub_rn(__dmul_rn(static_cast<double>(weights[i]), s.decay),
                                              __dmul_rn(s.step_size, static_cast<double>(m)) / denom));
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  });
}

__global__ void fill_kernel(View out, std::int64_t count, float value) {
  for_each_element(count, [&](std::int64_t idx) { out.at(idx) = value; });
}

// out (rows, cols) with row stride out_ld = in rounded to T (round-to-nearest-even).
template <class T>
__global__ void round_kernel(View in, T* out, std::int64_t out_ld, std::int64_t count) {
  for_each_element(count, [&](std::int64_t idx) {
    std::int64_t const r = idx / in.cols;
    out[r * out_ld + (idx - r * in.cols)] = from_float<T>(in.at(idx));
  });
}

inline constexpr int kElementwiseThreads = 256;

}  // namespace training

void activation(ActivationArgs const& a, cudaStream_t stream) {
  std::int64_t const count = a.x.rows * a.x.cols;
  if (count == 0) return;
  bool const backward = !a.dy.empty();
  training::View const x = training::view(a.x);
  training::
      activation_kernel<<<grid_for(count, training::kElementwiseThreads), training::kElementwiseThreads, 0, stream>>>(
          x, backward ? training::view(a.dy) : x, training::view(a.out), count, a.activation, backward, a.accumulate);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

void dropout(DropoutArgs const& d, cudaStream_t stream) {
  std::int64_t const count = d.x.rows * d.x.cols;
  if (count == 0) return;
  // 1 / (1 - p) in float64, rounded once, as the host backends scale.
  float const scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(d.probability)));
  training::
      dropout_kernel<<<grid_for(count, training::kElementwiseThreads), training::kElementwiseThreads, 0, stream>>>(
          training::view(d.x), training::view(d.out), count, d.probability, scale, d.seed, d.offset);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

void adamw(AdamWArgs const& a, cudaStream_t stream) {
  if (a.count == 0) return;
  double const step = static_cast<double>(a.step);
  training::AdamWStep const s{1.0 - a.beta1,
                              a.beta2,
                              1.0 - a.beta2,
                              a.eps,
                              a.grad_scale,
                              1.0 - a.learning_rate * a.weight_decay,
                              a.learning_rate / (1.0 - std::pow(a.beta1, step)),
                              std::sqrt(1.0 - std::pow(a.beta2, step))};
  training::
      adamw_kernel<<<grid_for(a.count, training::kElementwiseThreads), training::kElementwiseThreads, 0, stream>>>(
          a.weights, a.grads, a.exp_avg, a.exp_avg_sq, a.count, s);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

void round_to(MatrixRef const& in, MatrixRef const& out, cudaStream_t stream) {
  FLASHDEBERTA_REQUIRE(in.dtype == DType::kF32 && (out.dtype == DType::kBF16 || out.dtype == DType::kF16) &&
                           out.rows == in.rows && out.cols == in.cols,
                       "round_to: a float32 ("
                           << in.rows << ", " << in.cols << ") matrix rounds to a 16-bit one of its "
                           << "shape, not " << dtype_name(in.dtype) << " to " << dtype_name(out.dtype) << " ("
                           << out.rows << ", " << out.cols << ")");
  std::int64_t const count = in.rows * in.cols;
  if (count == 0) return;
  dispatch_float_type(out.dtype, [&]<class T>() {
    training::round_kernel<T>
        <<<grid_for(count, training::kElementwiseThreads), training::kElementwiseThreads, 0, stream>>>(
            training::view(in), static_cast<T*>(out.data), out.ld, count);
  });
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

void fill(MatrixRef const& m, float value, cudaStream_t stream) {
  std::int64_t const count = m.rows * m.cols;
  if (count == 0) return;
  training::fill_kernel<<<grid_for(count, training::kElementwiseThreads), training::kElementwiseThreads, 0, stream>>>(
      training::view(m), count, value);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

}  // namespace flashdeberta::cuda_kernels
