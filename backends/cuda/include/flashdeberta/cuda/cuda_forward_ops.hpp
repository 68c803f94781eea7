// CudaPolicy's forward ops (the methods cuda_policy.hpp declares and includes this header for at its end): GEMMs
// through cuBLASLt (a 16-bit product of float32 operands for mixed-precision training, float64 accumulation where
// asked), LayerNorm, the embedding gather, conv1d as im2col plus grouped GEMMs, and the LSTM cell. The attention
// forward stays in the class (attend), beside the relative tables it prepares.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flashdeberta/cuda/cuda_policy.hpp"

namespace flashdeberta {

inline void CudaPolicy::gemm(GemmArgs const& g) const {
  FLASHDEBERTA_REQUIRE(g.a.cols == g.b.cols && g.out.rows == g.a.rows && g.out.cols == g.b.rows,
                       "gemm shapes do not agree: a (" << g.a.rows << ", " << g.a.cols << "), b (" << g.b.rows << ", "
                                                       << g.b.cols << "), out (" << g.out.rows << ", " << g.out.cols
                                                       << ")");
  FLASHDEBERTA_REQUIRE(g.a.dtype == g.out.dtype && g.b.dtype == g.out.dtype, "gemm operands must share one dtype: a "
                                                                                 << dtype_name(g.a.dtype) << ", b "
                                                                                 << dtype_name(g.b.dtype) << ", out "
                                                                                 << dtype_name(g.out.dtype));
  context_->activate();
  if (g.accumulate_f64 && g.out.dtype == DType::kF32) {
    cuda_kernels::gemm_accumulate_f64(g, stream());
    return;
  }
  if (rounds_product(g.a, g.b, g.out, g.a.cols)) {
    RoundedOperand const a = rounded(g.a);
    RoundedOperand const b = rounded(g.b);
    GemmArgs r = g;
    r.a = a.view;
    r.b = b.view;
    context_->gemm->run(r, cuda_detail::CublasLtGemm::FusedActivation::kNone, stream());
    cuda_kernels::bias_activation(g.out, nullptr, g.activation, stream());
    return;
  }
  using Fused = cuda_detail::CublasLtGemm::FusedActivation;
  Fused fused = Fused::kNone;
  if (g.activation == Activation::kRelu) fused = Fused::kRelu;
  bool const tanh_gelu =
      g.activation == Activation::kGeluTanh || (g.activation == Activation::kGelu && context_->fuse_gelu_tanh);
  if (tanh_gelu && g.out.dtype != DType::kF32) fused = Fused::kGeluTanh;
  context_->gemm->run(g, fused, stream());
  if (fused == Fused::kNone) cuda_kernels::bias_activation(g.out, nullptr, g.activation, stream());
}

inline void CudaPolicy::layer_norm(LayerNormArgs const& n) const {
  FLASHDEBERTA_REQUIRE(n.out.rows == n.x.rows && n.out.cols == n.x.cols &&
                           (n.residual.empty() || (n.residual.rows == n.x.rows && n.residual.cols == n.x.cols)),
                       "layer_norm shapes do not agree: x (" << n.x.rows << ", " << n.x.cols << "), out (" << n.out.rows
                                                             << ", " << n.out.cols << ")");
  FLASHDEBERTA_REQUIRE(n.out.dtype == n.x.dtype && (n.residual.empty() || n.residual.dtype == n.x.dtype),
                       "layer_norm operands must share one dtype");
  context_->activate();
  cuda_kernels::layer_norm(n, stream());
}

inline void CudaPolicy::embedding(EmbeddingArgs const& e) const {
  FLASHDEBERTA_REQUIRE(e.word.dtype == e.out.dtype && e.word.cols == e.out.cols,
                       "embedding table (" << e.word.rows << ", " << e.word.cols << ") " << dtype_name(e.word.dtype)
                                           << " does not match out (" << e.out.rows << ", " << e.out.cols << ") "
                                           << dtype_name(e.out.dtype));
  context_->activate();
  cuda_kernels::embedding(e, stream());
}

inline void CudaPolicy::conv1d(Conv1dArgs const& c) const {
  std::int64_t const channels = c.x.cols;
  FLASHDEBERTA_REQUIRE(
      c.groups > 0 && channels % c.groups == 0 && c.kernel_size > 0,
      "conv1d over " << channels << " channels in " << c.groups << " groups, kernel " << c.kernel_size);
  FLASHDEBERTA_REQUIRE(c.out.rows == c.x.rows && c.out.cols == channels && c.out.dtype == c.x.dtype,
                       "conv1d output (" << c.out.rows << ", " << c.out.cols << ") does not match its input");
  if (c.x.rows == 0) return;
  context_->activate();
  std::int64_t const group_width = channels / c.groups;
  std::int64_t const width = channels * c.kernel_size;
  Buffer const columns = allocate(c.x.rows * width, c.x.dtype);
  cuda_kernels::im2col(c, columns.data(), stream());
  MatrixRef const unfolded{columns.data(), c.x.dtype, c.x.rows, width, width};
  MatrixRef const weight{const_cast<void*>(c.weight), c.x.dtype, channels, group_width * c.kernel_size,
                         group_width * c.kernel_size};
  std::size_t const element = dtype_size(c.x.dtype);
  for (std::int64_t g = 0; g < c.groups; ++g) {
    GemmArgs group{.a = unfolded.columns(g * group_width * c.kernel_size, group_width * c.kernel_size),
                   .b = weight.row_range(g * group_width, group_width),
                   .bias = c.bias == nullptr ? nullptr : static_cast<char const*>(c.bias) + g * group_width * element,
                   .out = c.out.columns(g * group_width, group_width)};
    context_->gemm->run(group, cuda_detail::CublasLtGemm::FusedActivation::kNone, stream());
  }
  cuda_kernels::bias_activation(c.out, nullptr, c.activation, stream());
}

inline void CudaPolicy::lstm_cell(LstmCellArgs const& a) const {
  context_->activate();
  cuda_kernels::lstm_cell(a, stream());
}

}  // namespace flashdeberta
