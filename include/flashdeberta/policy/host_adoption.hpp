// An optional policy hook: computing on float32 host memory in place instead of uploading a copy of it.
#pragma once

#include <concepts>
#include <memory>
#include <span>

namespace flashdeberta {

// adopt_host(values, owner): a Buffer of the policy's compute dtype (float32) that reads `values` where they lie,
// `owner` keeping them valid while the buffer lives; the policy never writes them, so they may be read-only
// (a weight inside a mapped checkpoint) and need only float alignment. Host policies whose buffers are host
// memory have it (EigenPolicy); device policies upload (WeightLoader picks, load_weight in weight_loader.hpp).
template <class P>
concept AdoptsHostMemory = requires(P const& p, std::span<float const> values, std::shared_ptr<void const> owner) {
  { p.adopt_host(values, owner) } -> std::same_as<typename P::Buffer>;
};

}  // namespace flashdeberta
