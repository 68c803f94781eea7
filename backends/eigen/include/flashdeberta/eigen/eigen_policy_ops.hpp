// EigenPolicy's operations (eigen_policy.hpp declares them): the Eigen GEMMs, the flash and eager attention
// kernels, the dense and training ops of ops/. Two ways in, one text:
//   header-only  eigen_policy.hpp includes this file and every definition is inline: the kernels compile in the
//                program that includes the library, with its flags (-march=native for AVX-512), as any
//                header-only library's would;
//   compiled     a target linking flashdeberta::eigen_ops (this build's tests, examples, benchmarks and runtime)
//                gets FLASHDEBERTA_EIGEN_COMPILED_OPS, sees only the declarations, and links the definitions that
//                src/eigen_policy_ops.cpp compiled once, with the build's flags: a translation unit that runs the
//                model then no longer parses and optimizes Eigen's kernels itself (half of a golden test's
//                compile time).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <type_traits>

#include "flashdeberta/eigen/eigen_policy.hpp"
#include "flashdeberta/eigen/host_kernels.hpp"
#include "flashdeberta/eigen/ops/attention_backward.hpp"
#include "flashdeberta/eigen/ops/attention_eager.hpp"
#include "flashdeberta/eigen/ops/attention_flash.hpp"
#include "flashdeberta/eigen/ops/dense_ops.hpp"
#include "flashdeberta/eigen/ops/prepared_gemm.hpp"
#include "flashdeberta/eigen/ops/training_ops.hpp"

// inline in the header-only use; empty in src/eigen_policy_ops.cpp, which defines each once.
#ifndef FLASHDEBERTA_EIGEN_OPS_LINKAGE
#define FLASHDEBERTA_EIGEN_OPS_LINKAGE inline
#endif

namespace flashdeberta {

FLASHDEBERTA_EIGEN_OPS_LINKAGE bool eigen_flash_microkernels() { return eigen_ops::detail::kHasFlashMicrokernel; }

template <class Args, class... Extra>
void EigenPolicy::run(void (*op)(Args const&, int, Extra...), Args const& args,
                      std::type_identity_t<Extra>... extra) const {
  int const threads = active_threads();
  eigen_detail::OmpThreadsScope const scope(threads);
  op(args, threads, extra...);
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE void EigenPolicy::for_each_host_range(
    std::int64_t count, std::function<void(std::int64_t, std::int64_t)> const& body) const {
  eigen_ops::OpThreads const team =
      eigen_ops::threads_for(static_cast<double>(count), 256.0 * 1024.0, active_threads());
  eigen_ops::run_workers(
      team, [&](int worker, int workers) { body(count * worker / workers, count * (worker + 1) / workers); });
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE void EigenPolicy::gemm(GemmArgs const& args) const {
  run(eigen_ops::gemm, args, f32_on_onednn_);
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE EigenPolicy::PreparedLinear EigenPolicy::prepare_linear(MatrixRef const& weight) const {
  int const threads = active_threads();
  eigen_detail::OmpThreadsScope const scope(threads);
  return eigen_detail::prepare_linear(weight, linear_dtype_, f32_on_onednn_, threads);
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE bool EigenPolicy::prepared_holds_weight(
    [[maybe_unused]] PreparedLinear const& prepared) const {
#if defined(FLASHDEBERTA_EIGEN_WITH_ONEDNN)
  return prepared && prepared->packs_from_itself();
#else
  return false;
#endif
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE void EigenPolicy::gemm(GemmArgs const& args, PreparedLinear const& prepared) const {
  int const threads = active_threads();
  eigen_detail::OmpThreadsScope const scope(threads);
  eigen_detail::gemm_prepared(args, prepared, threads);
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE void EigenPolicy::layer_norm(LayerNormArgs const& args) const {
  run(eigen_ops::layer_norm, args);
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE void EigenPolicy::embedding(EmbeddingArgs const& args) const {
  run(eigen_ops::embedding, args);
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE void EigenPolicy::conv1d(Conv1dArgs const& args) const { run(eigen_ops::conv1d, args); }

FLASHDEBERTA_EIGEN_OPS_LINKAGE void EigenPolicy::disentangled_attention(AttentionArgs const& args) const {
  int const threads = active_threads();
  eigen_detail::OmpThreadsScope const scope(threads);
  if (args.impl == AttentionImpl::kEager) {
    eigen_ops::attention_eager(args, threads);
  } else {
    eigen_ops::attention_flash(args, threads);
  }
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE void EigenPolicy::lstm_cell(LstmCellArgs const& args) const {
  run(eigen_ops::lstm_cell, args);
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE void EigenPolicy::linear_backward(LinearBackwardArgs const& args) const {
  run(eigen_ops::linear_backward, args, f32_on_onednn_);
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE void EigenPolicy::layer_norm_backward(LayerNormBackwardArgs const& args) const {
  run(eigen_ops::layer_norm_backward, args);
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE void EigenPolicy::activation(ActivationArgs const& args) const {
  run(eigen_ops::activation, args);
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE void EigenPolicy::embedding_backward(EmbeddingBackwardArgs const& args) const {
  run(eigen_ops::embedding_backward, args);
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE void EigenPolicy::conv1d_backward(Conv1dBackwardArgs const& args) const {
  run(eigen_ops::conv1d_backward, args);
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE void EigenPolicy::disentangled_attention_backward(
    AttentionBackwardArgs const& args) const {
  run(eigen_ops::attention_backward, args);
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE void EigenPolicy::dropout(DropoutArgs const& args) const {
  run(eigen_ops::dropout, args);
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE void EigenPolicy::adamw(AdamWArgs const& args) const { run(eigen_ops::adamw, args); }

FLASHDEBERTA_EIGEN_OPS_LINKAGE void EigenPolicy::fill(MatrixRef const& out, float value) const {
  int const threads = active_threads();
  eigen_detail::OmpThreadsScope const scope(threads);
  eigen_ops::fill(out, value, threads);
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE double EigenPolicy::sum_of_squares(float const* values, std::int64_t count) const {
  int const threads = active_threads();
  eigen_detail::OmpThreadsScope const scope(threads);
  return eigen_ops::sum_of_squares(values, count, threads);
}

FLASHDEBERTA_EIGEN_OPS_LINKAGE std::int64_t EigenPolicy::attention_workspace_bytes(AttentionShape const& s) const {
  using Tile = eigen_ops::HostFlashTile;
  double const f = sizeof(float);
  double const length = static_cast<double>(s.max_seqlen);
  double const d = static_cast<double>(s.head_size);
  bool const relative = s.relative_rows > 0;
  double const slots = relative ? static_cast<double>(s.relative_rows) : 1.0;
  double bytes = 0.0;
  if (s.impl == AttentionImpl::kEager) {
    double const workers = static_cast<double>(std::min<std::int64_t>(threads_, s.num_heads));
    double per_head = length * length + length * d;
    if (s.c2p) per_head += length * slots;
    if (s.p2c) per_head += length * slots;
    bytes = (relative ? length * length * sizeof(std::int32_t) : 0.0) + workers * per_head * f;
  } else {
    double const bm = static_cast<double>(Tile::kBlockQ);
    double const bn = static_cast<double>(Tile::kBlockK);
    double per_thread = (2 * bm * d + bm * slots + bm * bn + 2 * bm) * f + 3 * (bm + bn + 32) * sizeof(std::int32_t);
    if (s.p2c) per_thread += (length * slots + 2 * length) * f;
    if (eigen_ops::detail::kHasFlashMicrokernel && s.head_size == eigen_ops::detail::kMicroHeadSize) {
      double const panel = static_cast<double>(eigen_ops::detail::kMicroPanel);
      per_thread += (2 * std::ceil(length / panel) * panel * d + 2 * slots * d) * f;
    }
    bytes = static_cast<double>(threads_) * per_thread;
  }
  return detail::saturated_bytes(bytes);
}

}  // namespace flashdeberta
