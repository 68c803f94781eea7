// GEMMs through cuBLASLt: out (M, N) = act(alpha * a (M, K) . b (N, K)^T + bias (N)), row-major.
//
// cuBLASLt is column-major, so the product is posed as its transpose: out^T (N, M) = b . a^T, where the
// row-major b (N, K) is the column-major (K, N) matrix taken transposed, and the row-major a (M, K) is the
// column-major (K, M) matrix as is. The bias then runs along the rows of out^T, which is what cuBLASLt's
// bias epilogue adds. Accumulation is CUBLAS_COMPUTE_32F for every dtype; for float32 data this is the
// strict IEEE path (no TF32), the parity path against the host policies.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/device_buffer.hpp"
#include "flashdeberta/policy/op_args.hpp"

namespace flashdeberta::cuda_detail {

inline cudaDataType_t cuda_data_type(DType t) {
  switch (t) {
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    default:
      FLASHDEBERTA_FAIL("CudaPolicy computes in F32, BF16 or F16, not " << dtype_name(t));
  }
}

// Largest power of two (up to 256) that divides the address: cuBLASLt picks vectorized kernels from it.
inline std::uint32_t pointer_alignment(void const* p) {
  auto const address = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

class CublasLtGemm {
 public:
  // out_alignment_cap: the most alignment (bytes) the heuristic is told a 16-bit output has (CudaContext
  // lowers it for compute-sanitizer's initcheck).
  explicit CublasLtGemm(std::size_t workspace_bytes, std::uint32_t out_alignment_cap = 256)
      : workspace_(workspace_bytes), out_alignment_cap_(out_alignment_cap) {
    FLASHDEBERTA_CUBLAS_CHECK(cublasLtCreate(&handle_));
  }
  CublasLtGemm(CublasLtGemm const&) = delete;
  CublasLtGemm& operator=(CublasLtGemm const&) = delete;
  ~CublasLtGemm() {
    for (auto& [key, plan] : plans_) plan.destroy();
    cublasLtDestroy(handle_);
  }

  // The activations cuBLASLt can apply in its epilogue. Its GELU is the tanh form (HF's "gelu_new" /
  // "gelu_pytorch_tanh"), not the erf form of "gelu".
  enum class FusedActivation { kNone, kRelu, kGeluTanh };

  // Enqueues the product on stream with the bias (if any) and the given activation fused; any other
  // activation is the caller's.
  void run(GemmArgs const& g, FusedActivation activation, cudaStream_t stream) {
    if (g.out.rows == 0 || g.out.cols == 0) return;
    FLASHDEBERTA_REQUIRE(g.a.cols > 0, "gemm with an empty inner dimension");
    bool const bias = g.bias != nullptr;
    cublasLtEpilogue_t epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    if (activation == FusedActivation::kRelu) epilogue = bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    if (activation == FusedActivation::kGeluTanh)
      epilogue = bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    Key const key{g.out.rows,
                  g.out.cols,
                  g.a.cols,
                  g.a.ld,
                  g.b.ld,
                  g.out.ld,
                  static_cast<int>(g.out.dtype),
                  static_cast<int>(epilogue),
                  pointer_alignment(g.a.data),
                  pointer_alignment(g.b.data),
                  g.out.dtype == DType::kF32 ? pointer_alignment(g.out.data)
                                             : std::min(pointer_alignment(g.out.data), out_alignment_cap_),
                  bias ? pointer_alignment(g.bias) : 256u};
    std::lock_guard<std::mutex> const lock(mutex_);
    Plan& plan = plan_for(key, g, epilogue);
    if (bias) {
      void const* bias_pointer = g.bias;
      FLASHDEBERTA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                               &bias_pointer, sizeof(bias_pointer)));
    }
    float const alpha = g.alpha;
    float const beta = 0.0f;
    FLASHDEBERTA_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.operation, &alpha, g.b.data, plan.weight, g.a.data,
                                             plan.input, &beta, g.out.data, plan.output, g.out.data, plan.output,
                                             &plan.algo, workspace_.data(), workspace_.bytes(), stream));
  }

 private:
  // m, n, k, lda, ldb, ldc, dtype, epilogue, alignments of a, b, out and bias.
  using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, int, int,
                         std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t>;

  struct Plan {
    cublasLtMatmulDesc_t operation = nullptr;
    cublasLtMatrixLayout_t weight = nullptr;  // b as column-major (K, N), used transposed
    cublasLtMatrixLayout_t input = nullptr;   // a as column-major (K, M)
    cublasLtMatrixLayout_t output = nullptr;  // out as column-major (N, M)
    cublasLtMatmulAlgo_t algo{};

    void destroy() {
      if (output != nullptr) cublasLtMatrixLayoutDestroy(output);
      if (input != nullptr) cublasLtMatrixLayoutDestroy(input);
      if (weight != nullptr) cublasLtMatrixLayoutDestroy(weight);
      if (operation != nullptr) cublasLtMatmulDescDestroy(operation);
    }
  };

  // The descriptors and the heuristic's algorithm for one shape, made once: the heuristic query costs
  // more than a small GEMM.
  Plan& plan_for(Key const& key, GemmArgs const& g, cublasLtEpilogue_t epilogue) {
    auto found = plans_.find(key);
    if (found != plans_.end()) return found->second;
    cudaDataType_t const type = cuda_data_type(g.out.dtype);
    Plan plan;
    try {
      FLASHDEBERTA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      cublasOperation_t const transpose = CUBLAS_OP_T;
      cublasOperation_t const keep = CUBLAS_OP_N;
      FLASHDEBERTA_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)));
      FLASHDEBERTA_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof(keep)));
      FLASHDEBERTA_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
      if (g.bias != nullptr) {
        FLASHDEBERTA_CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof(type)));
      }
      auto const m = static_cast<std::uint64_t>(g.out.rows);
      auto const n = static_cast<std::uint64_t>(g.out.cols);
      auto const k = static_cast<std::uint64_t>(g.a.cols);
      FLASHDEBERTA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.weight, type, k, n, g.b.ld));
      FLASHDEBERTA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.input, type, k, m, g.a.ld));
      FLASHDEBERTA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.output, type, n, m, g.out.ld));

      cublasLtMatmulPreference_t preference = nullptr;
      FLASHDEBERTA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
      std::size_t const workspace_bytes = workspace_.bytes();
      std::uint32_t const align_a = std::get<8>(key), align_b = std::get<9>(key), align_out = std::get<10>(key);
      cublasLtMatmulHeuristicResult_t result{};
      int found_count = 0;
      cublasStatus_t const status = [&] {
        cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                &workspace_bytes, sizeof(workspace_bytes));
        // cuBLASLt's a is our b and its b our a.
        if (s == CUBLAS_STATUS_SUCCESS)
          s = cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_b,
                                                   sizeof(align_b));
        if (s == CUBLAS_STATUS_SUCCESS)
          s = cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_a,
                                                   sizeof(align_a));
        if (s == CUBLAS_STATUS_SUCCESS)
          s = cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_out,
                                                   sizeof(align_out));
        if (s == CUBLAS_STATUS_SUCCESS)
          s = cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_out,
                                                   sizeof(align_out));
        if (s == CUBLAS_STATUS_SUCCESS)
          s = cublasLtMatmulAlgoGetHeuristic(handle_, plan.operation, plan.weight, plan.input, plan.output, plan.output,
                                             preference, 1, &result, &found_count);
        return s;
      }();
      cublasLtMatmulPreferenceDestroy(preference);
      FLASHDEBERTA_CUBLAS_CHECK(status);
      FLASHDEBERTA_REQUIRE(found_count > 0, "cuBLASLt has no algorithm for the gemm a ("
                                                << g.a.rows << ", " << g.a.cols << ") ld " << g.a.ld << ", b ("
                                                << g.b.rows << ", " << g.b.cols << ") ld " << g.b.ld << ", out ld "
                                                << g.out.ld << " in " << dtype_name(g.out.dtype));
      plan.algo = result.algo;
    } catch (...) {
      plan.destroy();
      throw;
    }
    return plans_.emplace(key, plan).first->second;
  }

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::uint32_t out_alignment_cap_ = 256;
  std::mutex mutex_;
  std::map<Key, Plan> plans_;
};

}  // namespace flashdeberta::cuda_detail
