// oneDNN matmul primitives as the linear layers use them: created once per shape (MatmulCache) with the bias and
// activation fused where oneDNN has them, run on the calling thread's stream with a scratchpad of its own.
// Two weight forms: packed at load into the layout the primitive asked for (PreparedLinear), or a plain row-major
// (N, K) float32 matrix read where it lies (plain_gemm: weights made at run time, heads, load-time projections).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <unordered_map>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/onednn/linear_traits.hpp"
#include "flashdeberta/onednn/onednn_runtime.hpp"
#include "flashdeberta/onednn/row_conversion.hpp"
#include "flashdeberta/policy/op_args.hpp"

namespace flashdeberta::onednn {

// A growing 64-byte-aligned block: one thread's oneDNN scratchpad.
class ScratchBuffer {
 public:
  void* at_least(std::size_t bytes) {
    if (bytes > size_ || !data_) {
      size_ = std::max<std::size_t>((bytes + 63) / 64 * 64, 64);
      data_.reset(std::aligned_alloc(64, size_));
      FLASHDEBERTA_REQUIRE(data_ != nullptr, "oneDNN scratchpad: cannot allocate " << size_ << " bytes");
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<void, Free> data_;
  std::size_t size_ = 0;
};

// The matmul of `key` (MatmulCache): key.ldb 0 lets oneDNN pick the weights' layout (format_tag::any, packed by
// the caller); key.ldb > 0 reads (N, K) rows of stride ldb in place.
template <class Traits>
CachedMatmul cached_matmul(MatmulKey const& key) {
  using Tag = dnnl::memory::format_tag;
  using Dims = dnnl::memory::dims;
  return MatmulCache::instance().get(key, [&] {
    dnnl::memory::desc const src({key.m, key.k}, Traits::kSource, Dims{key.lda, 1});
    dnnl::memory::desc const weights = key.ldb > 0
                                           ? dnnl::memory::desc({key.k, key.n}, Traits::kWeights, Dims{1, key.ldb})
                                           : dnnl::memory::desc({key.k, key.n}, Traits::kWeights, Tag::any);
    dnnl::memory::desc const dst({key.m, key.n}, Traits::kOutput, Dims{key.ldc, 1});
    dnnl::primitive_attr attr;
    // The caller's scratchpad, not the library's: the library one is shared by every primitive (oneDNN built
    // without ONEDNN_ENABLE_CONCURRENT_EXEC, as Debian's is), so two threads running matmuls at once wrote
    // over each other's partial sums (tests/python/test_threads.py caught logits off by 2.7).
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (key.activation >= 0) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.0f, static_cast<dnnl::algorithm>(key.activation), 0.0f, 0.0f);
      attr.set_post_ops(ops);
    }
    auto const desc =
        key.bias ? dnnl::matmul::desc(src, weights,
                                      dnnl::memory::desc({1, key.n}, dnnl::memory::data_type::f32, Tag::ab), dst)
                 : dnnl::matmul::desc(src, weights, dst);
    dnnl::matmul::primitive_desc const pd(desc, attr, cpu_engine());
    return CachedMatmul{dnnl::matmul(pd), pd.weights_desc(), pd.scratchpad_desc()};
  });
}

// out (M, N) = source (M, K, row stride lda) . weights + bias (N floats, or null), on this thread's stream.
inline void execute_matmul(CachedMatmul const& matmul, MatmulKey const& key, dnnl::memory::data_type source_type,
                           void const* source, dnnl::memory const& weights, void const* bias,
                           dnnl::memory::data_type output_type, void* out) {
  using Dims = dnnl::memory::dims;
  dnnl::memory src({{key.m, key.k}, source_type, Dims{key.lda, 1}}, cpu_engine(), const_cast<void*>(source));
  dnnl::memory dst({{key.m, key.n}, output_type, Dims{key.ldc, 1}}, cpu_engine(), out);
  thread_local ScratchBuffer scratch;  // this thread's: calls on other threads never share it
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, src},
      {DNNL_ARG_WEIGHTS, weights},
      {DNNL_ARG_DST, dst},
      {DNNL_ARG_SCRATCHPAD,
       dnnl::memory(matmul.scratchpad, cpu_engine(), scratch.at_least(matmul.scratchpad.get_size()))}};
  if (key.bias) {
    args.emplace(DNNL_ARG_BIAS, dnnl::memory({{1, key.n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab},
                                             cpu_engine(), const_cast<void*>(bias)));
  }
  matmul.primitive.execute(thread_stream(), args);
  thread_stream().wait();
}

// g.out (M, N) = act(g.a (M, K) . g.b^T + bias) in float32 with g.b a plain (N, K) matrix, alpha 1. Where
// dnnl_sgemm's first call JIT-compiles every kernel of its driver (40-57 ms on the 2-core EPYC, paid by the first
// load of a process for its relative-table projections), a primitive costs ~1-2 ms per new shape.
// `activate(row, cols)` applies g.activation in place where oneDNN has no post-op for it.
template <class Activate>
void plain_gemm(GemmArgs const& g, int threads, Activate const& activate) {
  using Traits = LinearTraits<DType::kF32>;
  FLASHDEBERTA_REQUIRE(g.alpha == 1.0f && !g.accumulate_f64,
                       "oneDNN plain_gemm computes a . b^T + bias in float32 (alpha 1), got alpha " << g.alpha);
  if (g.a.rows == 0 || g.b.rows == 0) return;
  std::optional<dnnl::algorithm> const fused = fused_activation(g.activation);
  MatmulKey const key{.kind = Traits::kKind,
                      .m = g.a.rows,
                      .k = g.a.cols,
                      .n = g.b.rows,
                      .lda = g.a.ld,
                      .ldb = g.b.ld,
                      .ldc = g.out.ld,
                      .bias = g.bias != nullptr,
                      .activation = fused ? static_cast<int>(*fused) : -1,
                      .threads = threads};
  CachedMatmul const matmul = cached_matmul<Traits>(key);
  dnnl::memory const weights(matmul.weights, cpu_engine(), const_cast<void*>(g.b.data));
  execute_matmul(matmul, key, Traits::kSource, g.a.data, weights, g.bias, Traits::kOutput, g.out.data);
  if (g.activation != Activation::kIdentity && !fused) activate_rows(g.out, activate, threads);
}

}  // namespace flashdeberta::onednn
