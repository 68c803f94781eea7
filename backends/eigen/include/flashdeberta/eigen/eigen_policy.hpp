// EigenPolicy: the host execution policy. Eigen GEMMs, OpenMP threads, float32 compute; linear layers in bf16 or
// int8 through oneDNN on request (eigen_linear.hpp). This header declares it; its operations are defined in
// eigen_policy_ops.hpp, included at the end (header-only) unless the target links flashdeberta::eigen_ops, which
// compiled them once.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>

#include "flashdeberta/core/host_buffer.hpp"
#include "flashdeberta/core/omp_threads_scope.hpp"
#include "flashdeberta/eigen/eigen_linear.hpp"
#include "flashdeberta/eigen/free_cores.hpp"
#include "flashdeberta/policy/concepts.hpp"
#include "flashdeberta/policy/host_adoption.hpp"
#include "flashdeberta/policy/host_memory.hpp"
#include "flashdeberta/policy/prepared_linear.hpp"
#include "flashdeberta/policy/training_concepts.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace flashdeberta {

namespace eigen_detail {

using flashdeberta::OmpThreadsScope;  // core/omp_threads_scope.hpp

}  // namespace eigen_detail

struct EigenOptions {
  int threads = 0;  // <= 0: every core OpenMP reports, less those other processes keep busy (free_cores.hpp)
  // The encoder's linear layers: F32, BF16 (bf16 inputs and weights, float32 sums) or I8 (dynamic int8
  // quantization), the last two through oneDNN (docs/host-dtypes.md). Everything else computes in float32.
  DType linear_dtype = DType::kF32;
  // Where F32 linear layers run (F32Linear, eigen_linear.hpp): oneDNN in a build that has it unless told otherwise.
  F32Linear f32_linear = F32Linear::kAuto;
};

// Thread safety: a thread count (and, when the count was left to it, the shared measure of free cores) and
// nothing else; any number of threads may share one. Every calling thread opens OpenMP teams of up to threads()
// threads of its own, so size callers x threads to the cores (docs/thread-safety.md).
class EigenPolicy {
 public:
  using Buffer = HostBuffer;

  // threads <= 0 uses every core OpenMP reports, each operation as many of them as other processes leave free.
  explicit EigenPolicy(int threads = 0) : threads_(resolve_threads(threads)), free_cores_(free_cores_for(threads)) {}
  explicit EigenPolicy(EigenOptions const& options)
      : threads_(resolve_threads(options.threads)),
        free_cores_(free_cores_for(options.threads)),
        linear_dtype_(eigen_detail::checked_linear_dtype(options.linear_dtype)),
        f32_on_onednn_(eigen_detail::f32_linear_on_onednn(options.f32_linear)) {}

  static char const* name() { return "eigen"; }
  int threads() const { return threads_; }  // the most an operation uses
  // What the next operation uses: threads(), or when the count was left to the policy, the cores other processes
  // leave free (free_cores.hpp).
  int active_threads() const { return free_cores_ ? free_cores_->threads(threads_) : threads_; }
  DType compute_dtype() const { return DType::kF32; }
  DType linear_dtype() const { return linear_dtype_; }

  Buffer allocate(std::int64_t size, DType dtype) const { return Buffer(size, dtype); }

  Buffer upload(std::span<float const> host, DType dtype) const {
    FLASHDEBERTA_REQUIRE(dtype == DType::kF32, "EigenPolicy stores weights in float32, not " << dtype_name(dtype));
    Buffer buffer(static_cast<std::int64_t>(host.size()), DType::kF32);
    std::copy(host.begin(), host.end(), buffer.as<float>());
    return buffer;
  }

  // Load-time host loops (host_adoption.hpp's SplitsHostWork: converting float16 weights) on this policy's
  // threads, each taking at least a quarter of a million elements (about a page-fault-bound millisecond).
  void for_each_host_range(std::int64_t count, std::function<void(std::int64_t, std::int64_t)> const& body) const;

  // A weight read where it lies (host_adoption.hpp): a view of `values`, which `owner` keeps valid.
  Buffer adopt_host(std::span<float const> values, std::shared_ptr<void const> owner) const {
    return Buffer::view(values.data(), static_cast<std::int64_t>(values.size()), DType::kF32, std::move(owner));
  }

  // A float16 / bfloat16 embedding table read where it lies (AdoptsStoredTables): embedding() widens the rows
  // it gathers.
  Buffer adopt_host_table(void const* data, std::int64_t size, DType dtype, std::shared_ptr<void const> owner) const {
    FLASHDEBERTA_REQUIRE(dtype == DType::kF16 || dtype == DType::kBF16,
                         "adopt_host_table takes a float16 or bfloat16 table, not " << dtype_name(dtype));
    return Buffer::view(data, size, dtype, std::move(owner));
  }

  Buffer upload_indices(std::span<std::int32_t const> host) const {
    Buffer buffer(static_cast<std::int64_t>(host.size()), DType::kI32);
    std::copy(host.begin(), host.end(), buffer.as<std::int32_t>());
    return buffer;
  }

  void download(Buffer const& buffer, std::span<float> host) const {
    FLASHDEBERTA_REQUIRE(buffer.dtype() == DType::kF32 && static_cast<std::int64_t>(host.size()) == buffer.size(),
                         "download of " << buffer.size() << " " << dtype_name(buffer.dtype()) << " elements into "
                                        << host.size() << " floats");
    std::copy_n(buffer.as<float>(), host.size(), host.begin());
  }

  void gemm(GemmArgs const& args) const;
  // Linear layers (prepared_linear.hpp): the weight converted or quantized and packed for oneDNN once, at load;
  // nothing for float32 on Eigen.
  using PreparedLinear = eigen_detail::PreparedLinear;
  PreparedLinear prepare_linear(MatrixRef const& weight) const;
  void gemm(GemmArgs const& args, PreparedLinear const& prepared) const;
  // Whether `prepared` runs every later gemm by itself: oneDNN's float32 packing, which packs another layout from
  // its own copy; bf16 and int8 pack other layouts from the float32 weight, which the layer then keeps.
  bool prepared_holds_weight(PreparedLinear const& prepared) const;
  void layer_norm(LayerNormArgs const& args) const;
  void embedding(EmbeddingArgs const& args) const;
  void conv1d(Conv1dArgs const& args) const;
  void disentangled_attention(AttentionArgs const& args) const;
  void lstm_cell(LstmCellArgs const& args) const;
  void fence() const {}  // every operation is synchronous

  // Training (training_op_args.hpp), float32 throughout.
  void linear_backward(LinearBackwardArgs const& args) const;
  void layer_norm_backward(LayerNormBackwardArgs const& args) const;
  void activation(ActivationArgs const& args) const;
  void embedding_backward(EmbeddingBackwardArgs const& args) const;
  void conv1d_backward(Conv1dBackwardArgs const& args) const;
  void disentangled_attention_backward(AttentionBackwardArgs const& args) const;
  void dropout(DropoutArgs const& args) const;
  void adamw(AdamWArgs const& args) const;
  void fill(MatrixRef const& out, float value) const;
  double sum_of_squares(float const* values, std::int64_t count) const;

  std::optional<std::int64_t> available_memory_bytes() const { return host_available_memory_bytes(); }

  // What attention_eager / attention_flash allocate for themselves, from their buffers (ops/): eager holds,
  // per sequence, the (L, L) slot index and, in each of min(threads, heads) workers, one head's (L, L) scores,
  // k / scale and the (L, 2k) c2p and p2c products; flash holds per thread its tile workspace, the (L, 2k)
  // p2c table of a head and the packed K and V panels.
  std::int64_t attention_workspace_bytes(AttentionShape const& s) const;

 private:
  // op(args, threads, extra...) within this policy's OpenMP thread count (extra: the float32 GEMM route of the ops
  // that have one).
  template <class Args, class... Extra>
  void run(void (*op)(Args const&, int, Extra...), Args const& args, std::type_identity_t<Extra>... extra) const;

  static std::shared_ptr<eigen_detail::FreeCores> free_cores_for(int requested) {
    return requested > 0 ? nullptr : std::make_shared<eigen_detail::FreeCores>(resolve_threads(requested));
  }
  static int resolve_threads(int requested) {
    if (requested > 0) return requested;
#if defined(_OPENMP)
    return std::max(1, omp_get_max_threads());
#else
    return 1;
#endif
  }

  int threads_;
  std::shared_ptr<eigen_detail::FreeCores> free_cores_;  // null when the caller chose the count
  DType linear_dtype_ = DType::kF32;
  bool f32_on_onednn_ = eigen_detail::kHasOnednn;
};

static_assert(ExecutionPolicy<EigenPolicy>);
static_assert(ReportsAvailableMemory<EigenPolicy> && ReportsAttentionWorkspace<EigenPolicy>);
static_assert(PreparesLinearWeights<EigenPolicy>);
static_assert(AdoptsHostMemory<EigenPolicy>);
static_assert(TrainingPolicy<EigenPolicy>);

}  // namespace flashdeberta

#if !defined(FLASHDEBERTA_EIGEN_COMPILED_OPS)
#include "flashdeberta/eigen/eigen_policy_ops.hpp"
#endif
