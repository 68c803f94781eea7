// What the model requires of an execution policy.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>

#include "flashdeberta/policy/op_args.hpp"

namespace flashdeberta {

// A policy's buffer: owning, movable storage of `size()` elements of `dtype()` in the policy's memory.
template <class B>
concept PolicyBuffer = std::movable<B> && requires(B const& b) {
  { b.data() } -> std::convertible_to<void*>;
  { b.size() } -> std::convertible_to<std::int64_t>;
  { b.dtype() } -> std::same_as<DType>;
};

// An execution policy owns its execution resources and implements the closed set of operations of
// op_args.hpp for one memory space. Data moves in and out only through upload/download.
template <class P>
concept ExecutionPolicy = std::copy_constructible<P> && PolicyBuffer<typename P::Buffer> &&
    requires(P const& p, std::int64_t n, DType t, std::span<float const> host_f32,
             std::span<std::int32_t const> host_i32, std::span<float> host_out, typename P::Buffer const& buffer,
             GemmArgs const& gemm, LayerNormArgs const& layer_norm, EmbeddingArgs const& embedding,
             Conv1dArgs const& conv, AttentionArgs const& attention) {
  typename P::memory_space;
  { P::name() } -> std::convertible_to<char const*>;
  { p.compute_dtype() } -> std::same_as<DType>;
  { p.allocate(n, t) } -> std::same_as<typename P::Buffer>;
  { p.upload(host_f32, t) } -> std::same_as<typename P::Buffer>;  // converts to t
  { p.upload_indices(host_i32) } -> std::same_as<typename P::Buffer>;
  p.download(buffer, host_out);  // converts to float
  p.gemm(gemm);
  p.layer_norm(layer_norm);
  p.embedding(embedding);
  p.conv1d(conv);
  p.disentangled_attention(attention);
  p.fence();
};

}  // namespace flashdeberta
