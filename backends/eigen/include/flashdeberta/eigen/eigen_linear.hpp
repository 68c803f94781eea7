// EigenPolicy's linear layers in the dtype the user asked for (EigenOptions::linear_dtype): bf16 / int8 through
// oneDNN (flashdeberta::onednn, docs/host-dtypes.md) when the build has it; float32 through oneDNN's matmul on
// weights packed at load, or on Eigen / the skinny kernel over the weights where they lie (EigenOptions::f32_linear).
// The choices and the prepared weight's type; preparing and running them is ops/prepared_gemm.hpp's.
#pragma once

#include <memory>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/core/error.hpp"

namespace flashdeberta::onednn {
class PreparedLinear;  // flashdeberta/onednn/prepared_linear.hpp: only the operations (eigen_policy_ops.hpp) use it
}  // namespace flashdeberta::onednn

namespace flashdeberta {

// Where EigenPolicy runs float32 linear layers. kOneDnn: oneDNN's matmul (AVX-512 brgemm) on a copy of each
// weight packed at load; measured faster than kEigen at every v3-base shape on the GPU machine's Xeon, 2 and 16
// threads (bench/results/cpu-2026-12-02-onednn-switch.md; against ONNX Runtime: cpu-2026-12-02-onednn-f32.md). kEigen:
// Eigen or the skinny kernel (skinny_gemm.hpp) on the weights where they lie, lent from the mapped file: no copy, the
// fastest load and the least memory. kAuto: kOneDnn in a build with oneDNN, else kEigen.
enum class F32Linear { kAuto, kOneDnn, kEigen };

}  // namespace flashdeberta

namespace flashdeberta::eigen_detail {

#if defined(FLASHDEBERTA_EIGEN_WITH_ONEDNN)
inline constexpr bool kHasOnednn = true;
using PreparedLinear = std::shared_ptr<onednn::PreparedLinear const>;  // null: on Eigen
#else
inline constexpr bool kHasOnednn = false;
struct PreparedLinear {};
#endif

// `dtype` if EigenPolicy can run linear layers in it in this build, else an error naming what is missing.
inline DType checked_linear_dtype(DType dtype) {
  FLASHDEBERTA_REQUIRE(dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kI8,
                       "EigenPolicy runs linear layers in F32, BF16 or I8 (int8), not " << dtype_name(dtype));
  FLASHDEBERTA_REQUIRE(dtype == DType::kF32 || kHasOnednn,
                       "EigenPolicy: " << dtype_name(dtype)
                                       << " linear layers need oneDNN, and this build has none (install "
                                          "libdnnl-dev and configure with FLASHDEBERTA_WITH_ONEDNN=ON)");
  return dtype;
}

// Whether float32 linear layers go through oneDNN: kAuto means yes in a build that has it.
inline bool f32_linear_on_onednn(F32Linear choice) {
  FLASHDEBERTA_REQUIRE(choice != F32Linear::kOneDnn || kHasOnednn,
                       "EigenPolicy: float32 linear layers on oneDNN need oneDNN, and this build has none (install "
                       "libdnnl-dev and configure with FLASHDEBERTA_WITH_ONEDNN=ON)");
  return kHasOnednn && choice != F32Linear::kEigen;
}

}  // namespace flashdeberta::eigen_detail
