// Eigen views over MatrixRef: row-major, arbitrary row stride, float32.
#pragma once

#include <Eigen/Core>

#include "flashdeberta/core/matrix_ref.hpp"

namespace flashdeberta::eigen_ops {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;
using ConstMatrixMap = Eigen::Map<RowMatrix const, Eigen::Unaligned, Eigen::OuterStride<>>;

inline void require_f32(MatrixRef const& m, char const* what) {
  FLASHDEBERTA_REQUIRE(m.dtype == DType::kF32,
                       "EigenPolicy computes in float32 only; " << what << " is " << dtype_name(m.dtype));
}

inline MatrixMap map(MatrixRef const& m) {
  return MatrixMap(m.as<float>(), m.rows, m.cols, Eigen::OuterStride<>(m.ld));
}

inline ConstMatrixMap cmap(MatrixRef const& m) {
  return ConstMatrixMap(m.as<float>(), m.rows, m.cols, Eigen::OuterStride<>(m.ld));
}

// rows x cols block of a row-major float array with row stride ld.
inline ConstMatrixMap cmap(float const* data, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  return ConstMatrixMap(data, rows, cols, Eigen::OuterStride<>(ld));
}

// Rows [first, first + count) of m, as a map.
inline ConstMatrixMap middle_rows(ConstMatrixMap const& m, std::int64_t first, std::int64_t count) {
  return cmap(m.data() + first * m.outerStride(), count, m.cols(), m.outerStride());
}

inline MatrixMap map(float* data, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  return MatrixMap(data, rows, cols, Eigen::OuterStride<>(ld));
}

}  // namespace flashdeberta::eigen_ops
