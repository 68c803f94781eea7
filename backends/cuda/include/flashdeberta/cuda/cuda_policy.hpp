// CudaPolicy: the NVIDIA GPU execution policy. It owns a stream, a cuBLASLt handle with its workspace and
// a caching allocator; copies of a policy share them. The compute dtype (F32, BF16 or F16) is chosen at
// construction: weights are converted to it at upload, and every operation stores in it while computing
// in fp32 (GEMM accumulation, softmax, LayerNorm statistics). F32 is strict IEEE (no TF32).
//
// Every operation is enqueued on the policy's stream without synchronizing; upload (weights), download
// and fence synchronize; upload_indices does not; of the training ops (cuda_training_ops.hpp), those that
// read a device value on the host do (embedding_backward, conv1d_backward, sum_of_squares). While the stream
// is being captured into a CUDA graph (CudaGraphForward), the synchronizing calls and the staged index
// uploads throw instead of breaking the capture. This header is host C++: any translation unit may include
// it (g++, clang++ or nvcc); the kernels it launches are compiled once, by nvcc, behind kernels/launch.hpp
// and training/launch.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "flashdeberta/cuda/caching_allocator.hpp"
#include "flashdeberta/cuda/cublaslt_gemm.hpp"
#include "flashdeberta/cuda/cuda_buffer.hpp"
#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/cuda_context.hpp"
#include "flashdeberta/cuda/kernels/launch.hpp"
#include "flashdeberta/cuda/training/launch.hpp"
#include "flashdeberta/policy/concepts.hpp"
#include "flashdeberta/policy/training_concepts.hpp"

namespace flashdeberta {

namespace cuda_detail {

// The float32 (rows, cols) view of data from element `first` on, with row stride ld: a head's columns, a group's
// (the training ops of cuda_training_ops.hpp and cuda_training_attention.hpp).
inline MatrixRef f32_view(void const* data, std::int64_t first, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  return {const_cast<float*>(static_cast<float const*>(data)) + first, DType::kF32, rows, cols, ld};
}

}  // namespace cuda_detail

// Thread safety: copies share one context (stream, cuBLASLt handle and plans, device cache, pinned ring) whose
// host-side state is mutex-guarded, so any number of threads may use one policy; their work runs in order on
// the one stream, and each fence waits for all of it. For GPU overlap give each thread its own CudaPolicy
// (same options) over the shared weights. A PoolScope switches the cache of every copy: no other thread may
// allocate through the policy while one lives (docs/thread-safety.md).
class CudaPolicy {
 public:
  using Buffer = CudaBuffer;

  explicit CudaPolicy(CudaOptions const& options = {})
      : context_(std::make_shared<cuda_detail::CudaContext>(options)) {}

  static char const* name() { return "cuda"; }
  DType compute_dtype() const { return context_->dtype; }
  int device() const { return context_->device; }
  cudaStream_t stream() const { return context_->stream; }
  cuda_detail::CachingAllocator::Stats memory_stats() const { return context_->allocator->stats(); }
  void reset_peak_memory() const { context_->allocator->reset_peak(); }

  // Device memory a forward can still allocate: what the device has free plus the blocks cached by the
  // allocator allocate() draws from (the pool of a PoolScope, else the shared cache), since a miss returns
  // that cache to the device before it gives up (CachingAllocator::device_malloc).
  std::optional<std::int64_t> available_memory_bytes() const {
    context_->activate();
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    FLASHDEBERTA_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    auto const& cache = context_->pool ? context_->pool : context_->allocator;
    return static_cast<std::int64_t>(free_bytes + cache->stats().cached_bytes);
  }

  // What disentangled_attention allocates for itself: eager keeps its score rows in shared memory (nothing);
  // flash, in a call without tables prepared at load, the two by-diff tables of at most 2 (L + 2 x 128) rows
  // of every head's columns (by_diff_tables.cuh; an upper bound, exact per call in attention_workspace_bytes).
  std::int64_t attention_workspace_bytes(AttentionShape const& s) const {
    if (s.impl == AttentionImpl::kEager || s.relative_rows == 0) return 0;
    double const rows = 2.0 * (static_cast<double>(s.max_seqlen) + 256.0);
    double const columns = static_cast<double>(s.num_heads) * static_cast<double>(s.head_size);
    return detail::saturated_bytes(2.0 * rows * columns * static_cast<double>(dtype_size(s.dtype)));
  }

  // What disentangled_attention_backward allocates (cuda_training_attention.hpp): per position term the (T, heads, 2k)
  // products of the tables and their bands, float32; eager its (heads, L, L) probabilities and dS, flash its rows'
  // D and lse.
  std::int64_t attention_backward_workspace_bytes(AttentionShape const& s) const {
    double const tokens = static_cast<double>(s.total_tokens);
    double const heads = static_cast<double>(s.num_heads);
    double const terms = (s.relative_rows > 0 && s.c2p ? 1.0 : 0.0) + (s.relative_rows > 0 && s.p2c ? 1.0 : 0.0);
    double const bands = 2.0 * terms * tokens * heads * static_cast<double>(s.relative_rows);
    double const length = static_cast<double>(s.max_seqlen);
    double const own = s.impl == AttentionImpl::kEager ? 2.0 * heads * length * length : 2.0 * heads * tokens;
    return detail::saturated_bytes((bands + own) * sizeof(float));
  }

  Buffer allocate(std::int64_t size, DType dtype) const {
    context_->activate();
    return Buffer(context_->pool ? context_->pool : context_->allocator, size, dtype, stream());
  }

  // Advanced: while a PoolScope lives, allocate() of this policy and of every copy of it draws from
  // `pool` instead of the shared cache; buffers return to the pool they came from. CudaGraphForward
  // gives each graph a pool of its own this way, so that the blocks a graph replays into are never
  // handed to anyone else. Scopes nest (each restores the one before). A scope holds for the policy, not
  // for a thread: while it lives, no other thread may allocate through the policy or a copy of it.
  class PoolScope {
   public:
    PoolScope(PoolScope const&) = delete;
    PoolScope& operator=(PoolScope const&) = delete;
    ~PoolScope() { context_->pool = std::move(previous_); }

   private:
    friend class CudaPolicy;
    PoolScope(std::shared_ptr<cuda_detail::CudaContext> context, std::shared_ptr<cuda_detail::CachingAllocator> pool)
        : context_(std::move(context)), previous_(std::exchange(context_->pool, std::move(pool))) {}

    std::shared_ptr<cuda_detail::CudaContext> context_;
    std::shared_ptr<cuda_detail::CachingAllocator> previous_;
  };

  std::shared_ptr<cuda_detail::CachingAllocator> make_pool() const {
    return std::make_shared<cuda_detail::CachingAllocator>(context_->device);
  }
  [[nodiscard]] PoolScope allocate_from(std::shared_ptr<cuda_detail::CachingAllocator> pool) const {
    return PoolScope(context_, std::move(pool));
  }

  // Converts on the host (round-to-nearest-even) and copies; synchronous.
  Buffer upload(std::span<float const> host, DType dtype) const {
    require_not_capturing("upload");
    FLASHDEBERTA_REQUIRE(dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16,
                         "CudaPolicy stores floating-point data as F32, BF16 or F16, not " << dtype_name(dtype));
    Buffer buffer = allocate(static_cast<std::int64_t>(host.size()), dtype);
    if (host.empty()) return buffer;
    if (dtype == DType::kF32) {
      copy_to_device(host.data(), buffer);
    } else {
      std::vector<std::uint16_t> converted(host.size());
      for (std::size_t i = 0; i < host.size(); ++i)
        converted[i] = dtype == DType::kBF16 ? float_to_bfloat16(host[i]) : float_to_half(host[i]);
      copy_to_device(converted.data(), buffer);
    }
    return buffer;
  }

  // Asynchronous: staged through pinned memory (PinnedStaging), so a forward pass's index uploads do
  // not synchronize the stream. Refused during capture: a captured copy would re-read its ring slot at
  // every replay, after later uploads have overwritten it.
  Buffer upload_indices(std::span<std::int32_t const> host) const {
    require_not_capturing("upload_indices");
    Buffer buffer = allocate(static_cast<std::int64_t>(host.size()), DType::kI32);
    context_->staging->copy_to_device(buffer.data(), host.data(), host.size_bytes(), stream());
    return buffer;
  }

  // upload_indices into an int32 buffer of exactly host.size() elements that already exists.
  void upload_indices_into(Buffer const& destination, std::span<std::int32_t const> host) const {
    require_not_capturing("upload_indices_into");
    FLASHDEBERTA_REQUIRE(
        destination.dtype() == DType::kI32 && destination.size() == static_cast<std::int64_t>(host.size()),
        "upload of " << host.size() << " int32 indices into a buffer of " << destination.size() << " "
                     << dtype_name(destination.dtype()) << " elements");
    context_->activate();
    context_->staging->copy_to_device(destination.data(), host.data(), host.size_bytes(), stream());
  }

  // Waits for the work enqueued before it, converts to float on the device and copies to host.
  void download(Buffer const& buffer, std::span<float> host) const {
    FLASHDEBERTA_REQUIRE(is_floating(buffer.dtype()) && buffer.dtype() != DType::kF64 &&
                             static_cast<std::int64_t>(host.size()) == buffer.size(),
                         "download of " << buffer.size() << " " << dtype_name(buffer.dtype()) << " elements into "
                                        << host.size() << " floats");
    if (host.empty()) return;
    require_not_capturing("download");
    context_->activate();
    cudaStream_t const s = stream();
    if (buffer.dtype() == DType::kF32) {
      FLASHDEBERTA_CUDA_CHECK(
          cudaMemcpyAsync(host.data(), buffer.data(), host.size_bytes(), cudaMemcpyDeviceToHost, s));
    } else {
      Buffer const staged = allocate(buffer.size(), DType::kF32);
      cuda_kernels::convert_to_float(buffer.data(), buffer.dtype(), static_cast<float*>(staged.data()), buffer.size(),
                                     s);
      FLASHDEBERTA_CUDA_CHECK(
          cudaMemcpyAsync(host.data(), staged.data(), host.size_bytes(), cudaMemcpyDeviceToHost, s));
    }
    FLASHDEBERTA_CUDA_CHECK(cudaStreamSynchronize(s));
  }

  // The forward's ops (ExecutionPolicy, op_args.hpp), defined in cuda_forward_ops.hpp, which this header includes at
  // its end.
  void gemm(GemmArgs const& g) const;
  void layer_norm(LayerNormArgs const& n) const;
  void embedding(EmbeddingArgs const& e) const;
  // im2col (T, C * kernel) in a cached block, one GEMM per group with the bias fused, then the activation.
  void conv1d(Conv1dArgs const& c) const;
  void lstm_cell(LstmCellArgs const& a) const;

  // What prepare_relative keeps for a layer (PreparesRelativeTables, concepts.hpp): its relative tables
  // re-indexed by position difference for every sequence length (attention/by_diff_tables.cuh), so that the
  // attention kernel does not rebuild them at every call; about 2.4 MB per table for deberta-v3-base in bf16.
  // Empty where the tensor-core kernel does not read them (fp32, head sizes other than 64, before sm_80).
  struct PreparedRelative {
    Buffer storage;                     // owns the tables
    cuda_kernels::ByDiffTables tables;  // into storage
  };

  PreparedRelative prepare_relative(AttentionArgs const& a) const {
    PreparedRelative prepared;
    cuda_kernels::ByDiffLayout const layout = cuda_kernels::prepared_layout(a, context_->limits);
    if (layout.rows == 0) return prepared;
    context_->activate();
    int const tables = (a.pos_key.empty() ? 0 : 1) + (a.pos_query.empty() ? 0 : 1);
    prepared.storage =
        allocate(tables * layout.rows * layout.ld, a.pos_key.empty() ? a.pos_query.dtype : a.pos_key.dtype);
    prepared.tables =
        cuda_kernels::build_by_diff_tables(a, layout, prepared.storage.data(), prepared.storage.dtype(), stream());
    return prepared;
  }

  void disentangled_attention(AttentionArgs const& a) const { attend(a, {}); }
  void disentangled_attention(AttentionArgs const& a, PreparedRelative const& prepared) const {
    attend(a, prepared.tables);
  }

  // Throws while the stream is being captured rather than skip the wait: a caller that fences reads the
  // results next, and there are none until the graph is launched (DebertaModel::enqueue_forward is the
  // forward without its fence, for capture).
  void fence() const {
    require_not_capturing("fence");
    FLASHDEBERTA_CUDA_CHECK(cudaStreamSynchronize(stream()));
  }

  bool stream_is_capturing() const {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    FLASHDEBERTA_CUDA_CHECK(cudaStreamIsCapturing(stream(), &status));
    return status != cudaStreamCaptureStatusNone;
  }

  // Mixed-precision training: under a 16-bit compute dtype, a product whose operands and output are float32 (the
  // training model's activations and master weights) runs on tensor cores, its operands rounded to the compute
  // dtype and the sum accumulated and written in float32, as torch.autocast runs a linear layer (which rounds the
  // output too; this keeps it). Inference under a 16-bit dtype stores its operands in that dtype and never meets it.
  // A product summing fewer than kMinRoundedInner terms stays float32: a head's input gradient, dlogits (T, labels)
  // . W (labels, H), gains no speed from tensor cores, and rounding dlogits breaks the cancellation of its softmax
  // rows (each sums to zero) that the last layer's bias gradients are made of.
  static constexpr std::int64_t kMinRoundedInner = 16;
  bool rounds_product(MatrixRef const& a, MatrixRef const& b, MatrixRef const& out, std::int64_t inner) const {
    return compute_dtype() != DType::kF32 && a.dtype == DType::kF32 && b.dtype == DType::kF32 &&
           out.dtype == DType::kF32 && inner >= kMinRoundedInner;
  }

  // Training (TrainingPolicy, training_op_args.hpp), float32 operands whatever the compute dtype (products as
  // rounds_product says); defined in cuda_training_ops.hpp and (the attention) cuda_training_attention.hpp, which
  // this header includes at its end.
  void linear_backward(LinearBackwardArgs const& l) const;
  void layer_norm_backward(LayerNormBackwardArgs const& n) const;
  void activation(ActivationArgs const& a) const;
  void embedding_backward(EmbeddingBackwardArgs const& e) const;
  void conv1d_backward(Conv1dBackwardArgs const& c) const;
  void disentangled_attention_backward(AttentionBackwardArgs const& g) const;
  void dropout(DropoutArgs const& d) const;
  void adamw(AdamWArgs const& a) const;
  void fill(MatrixRef const& m, float value) const;
  double sum_of_squares(float const* values, std::int64_t count) const;
  // BatchesFloatRuns: one chunk list uploaded and one launch for all the runs (and one round trip for the sum).
  void fill(std::span<FloatRun const> runs, float value) const;
  double sum_of_squares(std::span<FloatRun const> runs) const;

 private:
  // A float32 operand rounded to the compute dtype in a buffer of its own (rows 16-byte aligned for the tensor
  // cores), freed to the stream-ordered cache once the product that reads it is enqueued.
  struct RoundedOperand {
    Buffer storage;
    MatrixRef view;
  };
  RoundedOperand rounded(MatrixRef const& m) const;
  MatrixRef rounded_heads(MatrixRef const& head0, std::int64_t heads, std::int64_t stride, RoundedOperand& keep) const;

  // The runs cut into chunks of at most kSquaresChunk elements, the list in device memory; `chunks` its length.
  Buffer upload_chunks(std::span<FloatRun const> runs, std::int64_t& chunks) const;

  // Training's float32 operands (its dropout and log-sum-exp with them) run on the float32 kernels (eager and
  // CUDA-core flash), or under a 16-bit compute dtype on mixed precision's tensor-core forward; the launchers refuse
  // dropout and lse with 16-bit operands (attention_params.cuh).
  void attend(AttentionArgs const& a, cuda_kernels::ByDiffTables const& prepared) const {
    context_->activate();
    if (cuda_kernels::attention_forward_mixed_applies(a, context_->limits, compute_dtype())) {
      attend_mixed_precision(a);
      return;
    }
    if (a.impl == AttentionImpl::kEager) {
      cuda_kernels::attention_eager(a, context_->limits, stream());
      return;
    }
    // Tables the call builds itself (a few MB), returned to the cache right after: later work on the stream
    // is ordered behind the kernel that reads them.
    std::size_t const bytes = cuda_kernels::attention_workspace_bytes(a, context_->limits, prepared);
    Buffer workspace;
    if (bytes > 0) workspace = allocate(static_cast<std::int64_t>((bytes + 3) / 4), DType::kI32);
    cuda_kernels::attention_flash(a, context_->limits, prepared, stream(), workspace.data());
  }

  // Defined in cuda_training_attention.hpp: the tensor-core forward of float32 operands (training under bf16 / fp16),
  // and the per-head position tables it and the backward gather from.
  void attend_mixed_precision(AttentionArgs const& a) const;
  void project_pair_tables(AttentionArgs const& a, void* c2p_all, void* p2c_all, bool tensor_cores) const;

  void require_not_capturing(char const* operation) const {
    FLASHDEBERTA_REQUIRE(!stream_is_capturing(), "CudaPolicy::" << operation
                                                                << " was called while the policy's stream is being "
                                                                   "captured into a CUDA graph, where it cannot run");
  }

  // The host memory may be pageable and is released by the caller right after: wait for the copy.
  template <class T>
  void copy_to_device(T const* host, Buffer const& buffer) const {
    FLASHDEBERTA_CUDA_CHECK(
        cudaMemcpyAsync(buffer.data(), host, buffer.size_bytes(), cudaMemcpyHostToDevice, stream()));
    FLASHDEBERTA_CUDA_CHECK(cudaStreamSynchronize(stream()));
  }

  std::shared_ptr<cuda_detail::CudaContext> context_;
};

static_assert(ExecutionPolicy<CudaPolicy>);
static_assert(ReportsAvailableMemory<CudaPolicy> && ReportsAttentionWorkspace<CudaPolicy> &&
              PreparesRelativeTables<CudaPolicy>);
static_assert(TrainingPolicy<CudaPolicy> && ReportsAttentionBackwardWorkspace<CudaPolicy> &&
              BatchesFloatRuns<CudaPolicy>);

}  // namespace flashdeberta

#include "flashdeberta/cuda/cuda_forward_ops.hpp"         // the forward ops' definitions
#include "flashdeberta/cuda/cuda_training_attention.hpp"  // the training attention's definitions
#include "flashdeberta/cuda/cuda_training_ops.hpp"        // the training methods' definitions
