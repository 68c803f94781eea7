// GEMMs through cuBLASLt: out (M, N) = act(alpha * a (M, K) . b (N, K)^T + bias (N)), row-major; and, for the
// training backward, the general out (M, N) = alpha op(a) . op(b) + beta out with op(x) = x or x^T (Product).
//
// cuBLASLt is column-major, so the product is posed as its transpose: out^T (N, M) = op(b)^T . op(a)^T, where a
// row-major matrix (r, c) is the column-major (c, r) matrix with the same stride: op(b)^T is that of b taken as is
// (op(b) = b) or transposed (op(b) = b^T), and op(a)^T likewise. The forward's b (N, K)^T is the transposed case.
// The bias then runs along the rows of out^T, which is what cuBLASLt's bias epilogue adds. Accumulation is
// CUBLAS_COMPUTE_32F for every dtype; for float32 data this is the strict IEEE path (no TF32), the parity path
// against the host policies. a and b share one dtype; out has it too, or is float32 under 16-bit operands (mixed-
// precision training: bf16 or fp16 tensor-core products of float32 activations, accumulated and kept in float32).
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

  // out (M, N) = alpha op(a) . op(b) + beta out, op(a) (M, K) and op(b) (K, N); a and b of one dtype, out of that
  // or float32. With beta 0 out is only written (its old values, NaN included, are not read).
  // batch > 1: that many products in one call, product i on a, b and out advanced by i times their batch strides
  // (elements): the attention backward's per-head products, whose heads sit side by side in one matrix.
  struct Product {
    MatrixRef a;
    bool transpose_a = false;  // op(a) = a^T: a is (K, M)
    MatrixRef b;
    bool transpose_b = false;  // op(b) = b^T: b is (N, K)
    MatrixRef out;
    float alpha = 1.0f;
    float beta = 0.0f;
    std::int64_t batch = 1;
    std::int64_t batch_stride_a = 0, batch_stride_b = 0, batch_stride_out = 0;
  };

  // Enqueues the product on stream with the bias (if any) and the given activation fused; any other
  // activation is the caller's.
  void run(GemmArgs const& g, FusedActivation activation, cudaStream_t stream) {
    bool const bias = g.bias != nullptr;
    cublasLtEpilogue_t epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    if (activation == FusedActivation::kRelu) epilogue = bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    if (activation == FusedActivation::kGeluTanh)
      epilogue = bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    enqueue({.a = g.a, .b = g.b, .transpose_b = true, .out = g.out, .alpha = g.alpha}, epilogue, g.bias, stream);
  }

  void run(Product const& p, cudaStream_t stream) { enqueue(p, CUBLASLT_EPILOGUE_DEFAULT, nullptr, stream); }

 private:
  void enqueue(Product const& p, cublasLtEpilogue_t epilogue, void const* bias, cudaStream_t stream) {
    if (p.out.rows == 0 || p.out.cols == 0) return;
    std::int64_t const inner = p.transpose_a ? p.a.rows : p.a.cols;
    FLASHDEBERTA_REQUIRE(inner > 0, "gemm with an empty inner dimension");
    FLASHDEBERTA_REQUIRE(p.batch >= 1 && (p.batch == 1 || epilogue == CUBLASLT_EPILOGUE_DEFAULT),
                         "gemm batch " << p.batch << ": at least 1, and without a fused epilogue");
    FLASHDEBERTA_REQUIRE(p.a.dtype == p.b.dtype && (p.out.dtype == p.a.dtype || p.out.dtype == DType::kF32),
                         "gemm operands a " << dtype_name(p.a.dtype) << ", b " << dtype_name(p.b.dtype) << ", out "
                                            << dtype_name(p.out.dtype)
                                            << ": a and b share one dtype, out has it or is F32");
    Key const key{p.out.rows,
                  p.out.cols,
                  inner,
                  p.a.ld,
                  p.b.ld,
                  p.out.ld,
                  static_cast<int>(p.out.dtype),
                  static_cast<int>(p.a.dtype),
                  static_cast<int>(epilogue),
                  operand_alignment(p.a, p.batch_stride_a),
                  operand_alignment(p.b, p.batch_stride_b),
                  p.out.dtype == DType::kF32
                      ? operand_alignment(p.out, p.batch_stride_out)
                      : std::min(operand_alignment(p.out, p.batch_stride_out), out_alignment_cap_),
                  bias != nullptr ? pointer_alignment(bias) : 256u,
                  2 * int{p.transpose_a} + int{p.transpose_b},
                  p.batch,
                  p.batch_stride_a,
                  p.batch_stride_b,
                  p.batch_stride_out};
    std::lock_guard<std::mutex> const lock(mutex_);
    Plan& plan = plan_for(key, p, epilogue, bias != nullptr);
    if (bias != nullptr) {
      FLASHDEBERTA_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    FLASHDEBERTA_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.operation, &p.alpha, p.b.data, plan.weight, p.a.data,
                                             plan.input, &p.beta, p.out.data, plan.output, p.out.data, plan.output,
                                             &plan.algo, workspace_.data(), workspace_.bytes(), stream));
  }

  // m, n, k, lda, ldb, ldc, out's and the operands' dtypes, epilogue, alignments of a, b, out and bias, transposes
  // (2 op(a) + op(b)), batch count and the batch strides of a, b and out.
  using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, int, int,
                         int, std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t, int, std::int64_t,
                         std::int64_t, std::int64_t, std::int64_t>;

  struct Plan {
    cublasLtMatmulDesc_t operation = nullptr;
    cublasLtMatrixLayout_t weight = nullptr;  // b as column-major (b.cols, b.rows), cuBLASLt's A
    cublasLtMatrixLayout_t input = nullptr;   // a as column-major (a.cols, a.rows), cuBLASLt's B
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
  Plan& plan_for(Key const& key, Product const& p, cublasLtEpilogue_t epilogue, bool bias) {
    auto found = plans_.find(key);
    if (found != plans_.end()) return found->second;
    cudaDataType_t const type = cuda_data_type(p.out.dtype);
    cudaDataType_t const operand_type = cuda_data_type(p.a.dtype);
    Plan plan;
    try {
      FLASHDEBERTA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      // cuBLASLt's A is our b, its B our a (out^T = op(b)^T . op(a)^T): each stored matrix is taken transposed
      // exactly when its op transposes it.
      cublasOperation_t const op_weight = p.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
      cublasOperation_t const op_input = p.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
      FLASHDEBERTA_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSA, &op_weight, sizeof(op_weight)));
      FLASHDEBERTA_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSB, &op_input, sizeof(op_input)));
      FLASHDEBERTA_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
      if (bias) {
        FLASHDEBERTA_CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof(type)));
      }
      auto const rows = [](MatrixRef const& m) { return static_cast<std::uint64_t>(m.cols); };  // column-major
      auto const cols = [](MatrixRef const& m) { return static_cast<std::uint64_t>(m.rows); };
      FLASHDEBERTA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.weight, operand_type, rows(p.b), cols(p.b), p.b.ld));
      FLASHDEBERTA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.input, operand_type, rows(p.a), cols(p.a), p.a.ld));
      FLASHDEBERTA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.output, type, rows(p.out), cols(p.out), p.out.ld));
      if (p.batch > 1) {
        set_batch(plan.weight, p.batch, p.batch_stride_b);
        set_batch(plan.input, p.batch, p.batch_stride_a);
        set_batch(plan.output, p.batch, p.batch_stride_out);
      }

      cublasLtMatmulPreference_t preference = nullptr;
      FLASHDEBERTA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
      std::size_t const workspace_bytes = workspace_.bytes();
      std::uint32_t const align_a = std::get<9>(key), align_b = std::get<10>(key), align_out = std::get<11>(key);
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
                                                << p.a.rows << ", " << p.a.cols << ") ld " << p.a.ld << ", b ("
                                                << p.b.rows << ", " << p.b.cols << ") ld " << p.b.ld << ", out ld "
                                                << p.out.ld << " in " << dtype_name(p.a.dtype) << " to "
                                                << dtype_name(p.out.dtype));
      plan.algo = result.algo;
    } catch (...) {
      plan.destroy();
      throw;
    }
    return plans_.emplace(key, plan).first->second;
  }

  // What cuBLASLt may assume of every product's pointer to m: the first's alignment, and the batch stride's in bytes.
  static std::uint32_t operand_alignment(MatrixRef const& m, std::int64_t batch_stride) {
    auto const stride_bytes = static_cast<std::uintptr_t>(batch_stride) * dtype_size(m.dtype);
    return std::min(pointer_alignment(m.data), pointer_alignment(reinterpret_cast<void const*>(stride_bytes)));
  }

  static void set_batch(cublasLtMatrixLayout_t layout, std::int64_t batch, std::int64_t stride) {
    auto const count = static_cast<std::int32_t>(batch);
    FLASHDEBERTA_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    FLASHDEBERTA_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::uint32_t out_alignment_cap_ = 256;
  std::mutex mutex_;
  std::map<Key, Plan> plans_;
};

}  // namespace flashdeberta::cuda_detail
