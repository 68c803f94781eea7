// EigenPolicy: the host execution policy. Eigen GEMMs, OpenMP threads, float32 compute.
#pragma once

#include <algorithm>
#include <span>

#include <Eigen/Core>

#include "flashdeberta/core/host_buffer.hpp"
#include "flashdeberta/eigen/ops/attention_eager.hpp"
#include "flashdeberta/eigen/ops/attention_flash.hpp"
#include "flashdeberta/eigen/ops/dense_ops.hpp"
#include "flashdeberta/policy/concepts.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace flashdeberta {

struct HostSpace {};

class EigenPolicy {
 public:
  using memory_space = HostSpace;
  using Buffer = HostBuffer;

  // threads <= 0 uses every core OpenMP reports.
  explicit EigenPolicy(int threads = 0) : threads_(resolve_threads(threads)) { Eigen::setNbThreads(threads_); }

  static char const* name() { return "eigen"; }
  int threads() const { return threads_; }
  DType compute_dtype() const { return DType::kF32; }

  Buffer allocate(std::int64_t size, DType dtype) const { return Buffer(size, dtype); }

  Buffer upload(std::span<float const> host, DType dtype) const {
    FLASHDEBERTA_REQUIRE(dtype == DType::kF32, "EigenPolicy stores weights in float32, not " << dtype_name(dtype));
    Buffer buffer(static_cast<std::int64_t>(host.size()), DType::kF32);
    std::copy(host.begin(), host.end(), buffer.as<float>());
    return buffer;
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

  void gemm(GemmArgs const& args) const { eigen_ops::gemm(args, threads_); }
  void layer_norm(LayerNormArgs const& args) const { eigen_ops::layer_norm(args, threads_); }
  void embedding(EmbeddingArgs const& args) const { eigen_ops::embedding(args, threads_); }
  void conv1d(Conv1dArgs const& args) const { eigen_ops::conv1d(args, threads_); }
  void disentangled_attention(AttentionArgs const& args) const {
    if (args.impl == AttentionImpl::kEager) {
      eigen_ops::attention_eager(args, threads_);
    } else {
      eigen_ops::attention_flash(args, threads_);
    }
  }
  void fence() const {}  // every operation is synchronous

 private:
  static int resolve_threads(int requested) {
    if (requested > 0) return requested;
#if defined(_OPENMP)
    return std::max(1, omp_get_max_threads());
#else
    return 1;
#endif
  }

  int threads_;
};

static_assert(ExecutionPolicy<EigenPolicy>);

}  // namespace flashdeberta
