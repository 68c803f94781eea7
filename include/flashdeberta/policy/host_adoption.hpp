// Optional policy hooks for host memory: computing on float32 host memory in place instead of uploading a copy
// of it, and sharing load-time host loops among the policy's threads.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "flashdeberta/core/dtype.hpp"

namespace flashdeberta {

// adopt_host(values, owner): a Buffer of the policy's compute dtype (float32) that reads `values` where they lie,
// `owner` keeping them valid while the buffer lives; the policy never writes them, so they may be read-only
// (a weight inside a mapped checkpoint) and need only float alignment. Host policies whose buffers are host
// memory have it (EigenPolicy); device policies upload (WeightLoader picks, load_weight in weight_loader.hpp).
template <class P>
concept AdoptsHostMemory = requires(P const& p, std::span<float const> values, std::shared_ptr<void const> owner) {
  { p.adopt_host(values, owner) } -> std::same_as<typename P::Buffer>;
};

// adopt_host_table(data, size, dtype, owner): a Buffer of `size` float16 or bfloat16 values (`dtype`) read where
// they lie (any alignment), which only the embedding op reads: it widens each gathered row to float32 as it reads
// it (EmbeddingArgs::word). A float32 model so keeps a checkpoint's 16-bit word embeddings as stored instead of
// converting the largest weight whole (393 MB of float32 for deberta-v3-base, 768 MB for mDeBERTa-v3-base) to
// read a few rows of it per token (lend_stored_table in weight_loader.hpp).
template <class P>
concept AdoptsStoredTables = AdoptsHostMemory<P> &&
    requires(P const& p, void const* data, std::int64_t size, DType dtype, std::shared_ptr<void const> owner) {
  { p.adopt_host_table(data, size, dtype, owner) } -> std::same_as<typename P::Buffer>;
};

// for_each_host_range(count, body): body(begin, end) over ranges tiling [0, count), run on up to the policy's
// host threads at once (they return before it does). The loader converts float16 / bfloat16 checkpoints through
// it, so that a load uses the threads the caller gave the policy (--threads), no more; a policy without it
// converts on the calling thread.
template <class P>
concept SplitsHostWork = requires(P const& p, std::int64_t count,
                                  std::function<void(std::int64_t, std::int64_t)> const& body) {
  p.for_each_host_range(count, body);
};

}  // namespace flashdeberta
