// Float32 GEMM in any transposition over row-major MatrixRefs through oneDNN's BLAS-like dnnl_sgemm (its
// AVX-512 JIT kernels): the training step's GEMMs, whose weights change every step, so packing them once as
// PreparedLinear does for inference would not pay. Runs on the calling thread's OpenMP team
// (omp_get_max_threads(), which the Eigen backend sets for each operation); for a given thread count the result
// is the same run to run.
#pragma once

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstdint>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/core/matrix_ref.hpp"

namespace flashdeberta::onednn {

// A matrix as a GEMM reads it: transposed (its columns are op(X)'s rows) or not.
struct SgemmOperand {
  MatrixRef const& matrix;
  bool transposed = false;

  std::int64_t op_rows() const { return transposed ? matrix.cols : matrix.rows; }
  std::int64_t op_cols() const { return transposed ? matrix.rows : matrix.cols; }
};

// out (M, N) = alpha op(a) (M, K) . op(b) (K, N) + beta out; beta 0 overwrites out whatever it held.
inline void sgemm(SgemmOperand const& a, SgemmOperand const& b, MatrixRef const& out, float alpha, float beta) {
  std::int64_t const m = a.op_rows();
  std::int64_t const k = a.op_cols();
  std::int64_t const n = b.op_cols();
  FLASHDEBERTA_REQUIRE(a.matrix.dtype == DType::kF32 && b.matrix.dtype == DType::kF32 && out.dtype == DType::kF32 &&
                           b.op_rows() == k && out.rows == m && out.cols == n,
                       "oneDNN sgemm: op(a) (" << m << ", " << k << ") . op(b) (" << b.op_rows() << ", " << n
                                               << ") into out (" << out.rows << ", " << out.cols
                                               << "), all float32, is needed");
  if (m == 0 || n == 0) return;
  // dnnl_sgemm wants a leading dimension of at least the stored row's length, even for an empty or 1-row matrix.
  auto const leading = [](MatrixRef const& x) {
    return std::max<std::int64_t>(x.ld, std::max<std::int64_t>(x.cols, 1));
  };
  dnnl_status_t const status =
      dnnl_sgemm(a.transposed ? 'T' : 'N', b.transposed ? 'T' : 'N', m, n, k, alpha, a.matrix.as<float>(),
                 leading(a.matrix), b.matrix.as<float>(), leading(b.matrix), beta, out.as<float>(), leading(out));
  FLASHDEBERTA_REQUIRE(status == dnnl_success, "oneDNN sgemm (" << m << " x " << k << " . " << k << " x " << n
                                                                << ") failed with dnnl_status_t " << status);
}

}  // namespace flashdeberta::onednn
