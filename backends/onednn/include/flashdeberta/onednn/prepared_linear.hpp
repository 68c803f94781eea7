// One linear layer's weight prepared for oneDNN's matmul (linear_traits.hpp): kept float32, converted to bf16, or
// quantized to s8 with per-output-channel scales, and packed into the layout the matmul reads
// (memory::format_tag::any), once at load. Calls then only convert their input rows (bf16, int8) and run a cached
// primitive (onednn_runtime.hpp).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/core/omp_threads_scope.hpp"
#include "flashdeberta/core/weight_arena.hpp"
#include "flashdeberta/onednn/linear_traits.hpp"
#include "flashdeberta/onednn/matmul_primitive.hpp"
#include "flashdeberta/onednn/onednn_runtime.hpp"
#include "flashdeberta/onednn/row_conversion.hpp"
#include "flashdeberta/policy/op_args.hpp"

namespace flashdeberta::onednn {

// Memory for a packed weight, in transparent huge pages: a v3-base load packs 340 MB of float32 weights, and
// first-touching that in 4 KiB pages is ~83,000 page faults. Below 2 MiB (heads, GLiNER's layers, small models)
// carved from the WeightArena's shared huge-page chunks: a huge page each would make a 6 KB classifier weight hold
// 2 MiB. From 2 MiB on, 2 MiB-aligned blocks of their own.
inline std::shared_ptr<void> packed_storage(std::size_t bytes) {
  constexpr std::size_t kHugePage = HostBlockCache::kHugePageBytes;
  if (bytes < kHugePage) return WeightArena::instance().allocate(bytes);
  std::size_t const rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* const p = std::aligned_alloc(kHugePage, rounded);
  FLASHDEBERTA_REQUIRE(p != nullptr, "oneDNN packed weight: cannot allocate " << rounded << " bytes");
  HostBlockCache::advise_huge_pages(p, rounded);  // advice only: without THP the pages stay 4 KiB
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

class PreparedLinear {
 public:
  // The rows a layer's weights are packed for at load; the layout oneDNN picks rarely depends on it (on an
  // AVX512-BF16 EPYC it was the same for 1 to 4096 rows and 1 to 16 threads), and a call whose primitive wants
  // another layout packs that one on first use.
  static constexpr std::int64_t kPackedForRows = 128;

  // weight (N, K) float32, PyTorch's Linear layout; dtype F32, BF16 or I8.
  PreparedLinear(MatrixRef const& weight, DType dtype, int threads) : dtype_(dtype), n_(weight.rows), k_(weight.cols) {
    FLASHDEBERTA_REQUIRE(weight.dtype == DType::kF32 && weight.rows > 0 && weight.cols > 0,
                         "oneDNN linear weight: expected a non-empty float32 (N, K) matrix, got ("
                             << weight.rows << ", " << weight.cols << ") " << dtype_name(weight.dtype));
    dispatch_linear_dtype(dtype_, [&]<class Traits>() {
      if constexpr (Traits::kQuantized) {
        scales_.resize(static_cast<std::size_t>(n_));
        for (std::int64_t n = 0; n < n_; ++n) {
          float peak = 0.0f;
          float const* row = weight.as<float>() + n * weight.ld;
          for (std::int64_t c = 0; c < k_; ++c) peak = std::max(peak, std::abs(row[c]));
          scales_[n] = peak > 0.0f ? peak / Traits::kLevels : 1.0f;
        }
      }
      MatmulKey const key{
          .kind = Traits::kKind, .m = kPackedForRows, .k = k_, .n = n_, .lda = k_, .ldc = n_, .threads = threads};
      (void)packed_for(cached_matmul<Traits>(key).weights, weight, threads);
    });
  }

  DType dtype() const { return dtype_; }
  // Whether a layout not packed yet is packed from the first packed copy (float32: a plain reorder), so that
  // run() needs no source weight (g.b may be empty); bf16 and int8 pack from the float32 source.
  bool packs_from_itself() const { return dtype_ == DType::kF32; }
  std::int64_t rows() const { return n_; }
  std::int64_t cols() const { return k_; }
  std::vector<float> const& channel_scales() const { return scales_; }  // int8: (N); empty for bf16

  // g.out (M, N) = act(g.a (M, K) . W^T + bias), W the weight this was prepared from, passed again as g.b (the
  // source of a layout not packed yet). `activate(row, cols)` applies g.activation in place where oneDNN did not.
  template <class Activate>
  void run(GemmArgs const& g, int threads, Activate const& activate) const {
    bool const source_fits = g.b.empty() ? packs_from_itself() : g.b.rows == n_ && g.b.cols == k_;
    FLASHDEBERTA_REQUIRE(g.a.dtype == DType::kF32 && g.out.dtype == DType::kF32 && g.a.cols == k_ && source_fits &&
                             g.out.rows == g.a.rows && g.out.cols == n_,
                         "oneDNN " << dtype_name(dtype_) << " linear (" << n_ << ", " << k_ << "): a float32 input of "
                                   << k_ << " columns and a float32 (M, " << n_ << ") output are needed, got a ("
                                   << g.a.rows << ", " << g.a.cols << ") " << dtype_name(g.a.dtype) << ", out ("
                                   << g.out.rows << ", " << g.out.cols << ") " << dtype_name(g.out.dtype));
    if (g.a.rows == 0) return;
    dispatch_linear_dtype(dtype_, [&]<class Traits>() { run_as<Traits>(g, threads, activate); });
  }

 private:
  using Dims = dnnl::memory::dims;

  // Weight elements per thread of a packing reorder. Each parallel region wakes the team's sleeping workers,
  // and on the 2-core EPYC VM packing tiny-en's 256 x 768 weights on 2 threads took 3-7 ms more per layer than
  // on 1; a v3-base feed-forward weight (2.4 M elements) still gets 9 threads.
  static constexpr std::int64_t kReorderElementsPerThread = std::int64_t{1} << 18;

  // The weight in `layout`, packed from `source` (N, K) float32 on first use.
  dnnl::memory packed_for(dnnl::memory::desc const& layout, MatrixRef const& source, int threads) const {
    std::lock_guard const lock(mutex_);
    for (Packed const& p : packed_)
      if (p.layout == layout) return p.memory;
    // (K, N) view of the (N, K) rows: strides (1, ld). int8 rounds w / scale[n] here and lets the reorder add
    // the s8 x s8 compensation the packed layout carries (oneDNN 2.6 has no reorder that does both from float32).
    std::vector<std::int8_t> quantized;
    dnnl::memory from;
    if (source.empty()) {
      FLASHDEBERTA_REQUIRE(packs_from_itself() && !packed_.empty(),
                           "oneDNN " << dtype_name(dtype_) << " linear (" << n_ << ", " << k_
                                     << "): a new layout needs the source weight, and none was given");
      from = packed_.front().memory;
    } else if (scales_.empty()) {
      from = dnnl::memory({{k_, n_}, dnnl::memory::data_type::f32, Dims{1, source.ld}}, cpu_engine(), source.data);
    } else {
      quantized.resize(static_cast<std::size_t>(n_ * k_));
      for (std::int64_t n = 0; n < n_; ++n) {
        float const* w = source.as<float>() + n * source.ld;
        float const inverse = 1.0f / scales_[n];
        for (std::int64_t c = 0; c < k_; ++c) {
          float const q = std::nearbyint(w[c] * inverse);
          quantized[n * k_ + c] = static_cast<std::int8_t>(std::clamp(q, -127.0f, 127.0f));
        }
      }
      from = dnnl::memory({{k_, n_}, dnnl::memory::data_type::s8, Dims{1, k_}}, cpu_engine(), quantized.data());
    }
    std::shared_ptr<void> storage = packed_storage(layout.get_size());
    dnnl::memory to(layout, cpu_engine(), storage.get());
    dnnl::primitive_attr const attr;
    OmpThreadsScope const team(
        static_cast<int>(std::clamp<std::int64_t>(n_ * k_ / kReorderElementsPerThread, 1, threads)));
    dnnl::reorder(dnnl::reorder::primitive_desc(from, to, attr)).execute(thread_stream(), from, to);
    thread_stream().wait();
    packed_.push_back({layout, std::move(to), std::move(storage)});
    return packed_.back().memory;
  }

  template <class Traits, class Activate>
  void run_as(GemmArgs const& g, int threads, Activate const& activate) const {
    using Source = typename Traits::Source;
    std::int64_t const m = g.a.rows;
    thread_local std::vector<Source> source;  // a in the matmul's input type, dense
    thread_local std::vector<float> row_scales;
    constexpr bool kInPlace = std::is_same_v<Source, float>;  // float32: a read where it lies
    if constexpr (Traits::kQuantized) {
      source.resize(static_cast<std::size_t>(m * k_));
      row_scales.resize(static_cast<std::size_t>(m));
      quantize_rows(g.a, source.data(), row_scales.data(), Traits::kLevels, threads);
    } else if constexpr (!kInPlace) {
      source.resize(static_cast<std::size_t>(m * k_));
      rows_to_bf16(g.a, source.data(), threads);
    }
    std::optional<dnnl::algorithm> const fused = Traits::kFusesEpilogue ? fused_activation(g.activation) : std::nullopt;
    MatmulKey const key{.kind = Traits::kKind,
                        .m = m,
                        .k = k_,
                        .n = n_,
                        .lda = kInPlace ? g.a.ld : k_,
                        .ldc = g.out.ld,
                        .bias = Traits::kFusesEpilogue && g.bias != nullptr,
                        .activation = fused ? static_cast<int>(*fused) : -1,
                        .threads = threads};
    CachedMatmul const matmul = cached_matmul<Traits>(key);
    dnnl::memory const weights = packed_for(matmul.weights, g.b, threads);
    execute_matmul(matmul, key, Traits::kSource, kInPlace ? g.a.data : static_cast<void const*>(source.data()), weights,
                   g.bias, Traits::kOutput, g.out.data);
    auto const* bias = static_cast<float const*>(g.bias);
    if constexpr (Traits::kQuantized) {
      dequantize_rows(g.out, row_scales.data(), scales_.data(), bias, activate, threads);
    } else {
      if (g.activation != Activation::kIdentity && !fused) activate_rows(g.out, activate, threads);
    }
  }

  DType dtype_;
  std::int64_t n_, k_;
  std::vector<float> scales_;  // int8: the scale of each output channel (row of the weight)
  mutable std::mutex mutex_;
  struct Packed {
    dnnl::memory::desc layout;
    dnnl::memory memory;  // over storage
    std::shared_ptr<void> storage;
  };
  mutable std::vector<Packed> packed_;  // the layouts asked for so far
};

}  // namespace flashdeberta::onednn
