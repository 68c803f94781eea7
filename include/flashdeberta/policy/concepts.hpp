// What the model requires of an execution policy.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
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
             Conv1dArgs const& conv, AttentionArgs const& attention, LstmCellArgs const& lstm) {
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
  p.lstm_cell(lstm);
  p.fence();
};

// The sizes of one disentangled-attention call, known before anything is allocated: what a policy needs to
// say how much memory its attention op takes beyond q, k, v and out.
struct AttentionShape {
  std::int64_t batch = 0;         // B sequences
  std::int64_t total_tokens = 0;  // T
  std::int64_t max_seqlen = 0;    // L, the longest sequence
  std::int64_t num_heads = 0;
  std::int64_t head_size = 0;
  std::int64_t relative_rows = 0;  // 2k rows of the relative tables; 0 without position terms
  bool c2p = false;
  bool p2c = false;
  AttentionImpl impl = AttentionImpl::kFlash;
  DType dtype = DType::kF32;  // the compute dtype
};

namespace detail {
// Memory estimates are formed in double: num_heads x L x L overflows int64 long before a batch stops fitting
// int32 offsets. This turns one into bytes, saturating.
inline std::int64_t saturated_bytes(double bytes) {
  constexpr auto kMax = static_cast<double>(std::numeric_limits<std::int64_t>::max());
  return bytes >= kMax ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(std::max(bytes, 0.0));
}
}  // namespace detail

// Optional hooks a policy may offer; DebertaModel uses them, when present, to refuse a forward that cannot
// fit before allocating any of it (model/forward_memory.hpp).
//
// available_memory_bytes(): what the policy can still allocate in its memory space (host: MemAvailable;
// CUDA: free device memory plus its own cached blocks); nullopt when it cannot tell.
template <class P>
concept ReportsAvailableMemory = requires(P const& p) {
  { p.available_memory_bytes() } -> std::same_as<std::optional<std::int64_t>>;
};

// attention_workspace_bytes(shape): the most memory disentangled_attention allocates for itself during one
// call of that shape (scores, projected tables, per-thread tiles). Without it the model assumes HF's eager
// layout: num_heads x L x L scores per sequence, and (T, heads, 2k) projected tables.
template <class P>
concept ReportsAttentionWorkspace = requires(P const& p, AttentionShape const& shape) {
  { p.attention_workspace_bytes(shape) } -> std::convertible_to<std::int64_t>;
};

// attention_backward_workspace_bytes(shape): the same for one disentangled_attention_backward call (training). Without
// it the training estimate counts the backward's relative-table partials (training_memory.hpp); CudaPolicy keeps
// (T, heads, 2k) products and bands per position term, which grow with T.
template <class P>
concept ReportsAttentionBackwardWorkspace = requires(P const& p, AttentionShape const& shape) {
  { p.attention_backward_workspace_bytes(shape) } -> std::convertible_to<std::int64_t>;
};

// prepare_relative(args): what a policy derives once, at load, from a layer's relative tables (args as the
// layer's attention calls will carry them, without q, k, v or sequences), as a type of its own: CudaPolicy
// re-indexes the tables by position difference, which its kernel would otherwise redo at every call.
// AttentionBlock keeps the result and passes it to every attention call of that layer; policies without the
// hook run disentangled_attention(args) alone.
template <class P>
concept PreparesRelativeTables = requires(P const& p, AttentionArgs const& args,
                                          typename P::PreparedRelative const& prepared) {
  { p.prepare_relative(args) } -> std::same_as<typename P::PreparedRelative>;
  p.disentangled_attention(args, prepared);
};

// What AttentionBlock keeps of prepare_relative: the policy's type, or nothing.
template <class P>
struct PreparedRelativeOf {
  struct Nothing {};
  using type = Nothing;
};
template <PreparesRelativeTables P>
struct PreparedRelativeOf<P> {
  using type = typename P::PreparedRelative;
};
template <class P>
using prepared_relative_t = typename PreparedRelativeOf<P>::type;

}  // namespace flashdeberta
