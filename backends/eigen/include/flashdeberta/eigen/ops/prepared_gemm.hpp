// EigenPolicy's linear layers on a prepared weight (eigen_linear.hpp's PreparedLinear): oneDNN's matmul when the
// weight was prepared for it, Eigen otherwise.
#pragma once

#include <memory>

#include "flashdeberta/eigen/eigen_linear.hpp"
#include "flashdeberta/eigen/ops/dense_ops.hpp"

#if defined(FLASHDEBERTA_EIGEN_WITH_ONEDNN)
#include "flashdeberta/onednn/prepared_linear.hpp"
#endif

namespace flashdeberta::eigen_detail {

inline PreparedLinear prepare_linear([[maybe_unused]] MatrixRef const& weight, [[maybe_unused]] DType dtype,
                                     [[maybe_unused]] bool f32_on_onednn, [[maybe_unused]] int threads) {
#if defined(FLASHDEBERTA_EIGEN_WITH_ONEDNN)
  if (dtype != DType::kF32 || f32_on_onednn)
    return std::make_shared<onednn::PreparedLinear const>(weight, dtype, threads);
#endif
  return {};
}

// A prepared weight runs through oneDNN; alpha != 1 and float64 sums (never asked of linear layers) stay on Eigen.
inline void gemm_prepared(GemmArgs const& args, [[maybe_unused]] PreparedLinear const& prepared, int threads) {
#if defined(FLASHDEBERTA_EIGEN_WITH_ONEDNN)
  if (prepared && args.alpha == 1.0f && !args.accumulate_f64) {
    Activation const act = args.activation;
    prepared->run(args, threads, [act](float* row, std::int64_t cols) { eigen_ops::activate_row(row, cols, act); });
    return;
  }
#endif
  eigen_ops::gemm(args, threads);
}

}  // namespace flashdeberta::eigen_detail
