// CudaGraphForward: DebertaModel<V, CudaPolicy>::forward replayed from CUDA graphs. A small batch spends
// most of a forward launching kernels (about ten per layer, each a few microseconds of host work for
// microseconds of GPU work); one graph launch replaces them all.
//
//   auto model = flashdeberta::DebertaV3<flashdeberta::CudaPolicy>::load(flashdeberta::CudaPolicy{}, dir);
//   flashdeberta::CudaGraphForward graphs(model);
//   auto const& hidden = graphs.forward(batch);  // as model.forward(batch): ready on return
//
// Graphs are cached per batch structure: cu_seqlens and positions (which fix every size the host-side
// forward decides from: tokens, max_seqlen, max_position, contiguous positions), whether the batch has
// token types, and the model's attention implementation. Ids and token types may change from call to
// call. The first call for a structure runs one eager warm-up forward (cuBLASLt plans, kernel attributes
// and every device block the forward takes come into being outside the capture), captures the forward,
// then replays it; later calls copy the new ids into the graph's input arrays and replay.
//
// Contracts:
// - The model is held by reference and must outlive the runner; changing its attention implementation
//   selects other graphs, and nothing else about it may change while graphs are cached.
// - The states returned are the graph's own output buffer: the next forward() overwrites them (a replay
//   of the same structure) or frees them (eviction, clear(), a batch that runs uncaptured). Copy what you
//   need first, as with torch CUDA graphs' static outputs.
// - Batches above max_graph_tokens run model.forward uncaptured: launch overhead is small there, and a
//   graph would hold its activations' memory for as long as it is cached.
// - Not thread-safe; while a graph is captured, nothing else may use the model's policy (its stream would
//   be captured too).
#pragma once

#include <cuda_runtime_api.h>

#include <concepts>
#include <cstdint>
#include <exception>
#include <list>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/cuda_policy.hpp"
#include "flashdeberta/model/deberta_model.hpp"

namespace flashdeberta {

struct GraphForwardOptions {
  std::size_t max_graphs = 8;            // structures cached; capturing one more drops the least recently used
  std::int64_t max_graph_tokens = 4096;  // larger batches run model.forward uncaptured
};

struct GraphForwardStats {
  std::size_t captures = 0;    // graphs captured, each after one warm-up forward
  std::size_t replays = 0;     // graph launches, the first after each capture included
  std::size_t evictions = 0;   // graphs dropped to stay within max_graphs
  std::size_t uncaptured = 0;  // forwards run by model.forward
};

// A DebertaModel on CudaPolicy.
template <class Model>
concept CudaModel = std::same_as<typename Model::Policy, CudaPolicy> &&
    requires(Model const& m, ForwardContext<CudaPolicy> const& ctx) {
  { m.enqueue_forward(ctx) } -> std::same_as<HiddenStates<CudaPolicy>>;
};

namespace cuda_detail {

struct GraphDeleter {
  void operator()(cudaGraph_t graph) const noexcept { cudaGraphDestroy(graph); }
};
struct GraphExecDeleter {
  void operator()(cudaGraphExec_t exec) const noexcept { cudaGraphExecDestroy(exec); }
};
using GraphHandle = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, GraphDeleter>;
using GraphExecHandle = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, GraphExecDeleter>;

// FNV-1a over what a graph depends on; full comparison settles collisions.
inline std::uint64_t structure_hash(Batch const& batch, AttentionImpl attention) {
  std::uint64_t hash = 14695981039346656037ull;
  auto const mix = [&](std::uint64_t value) { hash = (hash ^ value) * 1099511628211ull; };
  mix(static_cast<std::uint64_t>(attention));
  mix(batch.token_type_ids.empty() ? 0 : 1);
  for (std::int32_t v : batch.cu_seqlens) mix(static_cast<std::uint32_t>(v));
  for (std::int32_t v : batch.positions) mix(static_cast<std::uint32_t>(v));
  return hash;
}

// One captured forward and everything it reads and writes. Members are destroyed in reverse order: the
// executable graph first, then the buffers, which return to the pool, then (last owner) the pool, which
// frees its blocks.
struct GraphEntry {
  std::uint64_t hash = 0;
  std::vector<std::int32_t> cu_seqlens, positions;
  bool token_types = false;
  AttentionImpl attention = AttentionImpl::kFlash;
  std::shared_ptr<CachingAllocator> pool;
  DeviceBatch<CudaPolicy> inputs;   // read by the graph at fixed addresses; ids rewritten before replays
  HiddenStates<CudaPolicy> output;  // written by every replay
  GraphExecHandle exec;

  bool matches(Batch const& batch, AttentionImpl impl, std::uint64_t h) const {
    return hash == h && attention == impl && token_types == !batch.token_type_ids.empty() &&
           cu_seqlens == batch.cu_seqlens && positions == batch.positions;
  }
};

}  // namespace cuda_detail

// Not thread-safe: one runner per thread. Its captures need the model's stream to themselves, so runners on
// one shared model need one mutex around every use of that model (docs/thread-safety.md).
template <CudaModel Model>
class CudaGraphForward {
 public:
  explicit CudaGraphForward(Model const& model, GraphForwardOptions options = {}) : model_(model), options_(options) {}
  CudaGraphForward(CudaGraphForward const&) = delete;
  CudaGraphForward& operator=(CudaGraphForward const&) = delete;

  // model.forward(batch), from the structure's graph when the batch is small enough.
  HiddenStates<CudaPolicy> const& forward(Batch const& batch) {
    if (options_.max_graphs == 0 || batch.total_tokens() == 0 || batch.total_tokens() > options_.max_graph_tokens) {
      uncaptured_ = model_.forward(batch);
      ++stats_.uncaptured;
      return uncaptured_;
    }
    uncaptured_ = {};
    batch.validate(model_.config());  // as model.forward does: the kernels index tables with the ids unchecked
    AttentionImpl const attention = model_.options().attention;
    std::uint64_t const hash = cuda_detail::structure_hash(batch, attention);
    auto entry = entries_.begin();
    while (entry != entries_.end() && !entry->matches(batch, attention, hash)) ++entry;
    CudaPolicy const& policy = model_.policy();
    if (entry == entries_.end()) {
      entry = capture(batch, attention, hash);  // its inputs hold this batch's ids already
    } else {
      entries_.splice(entries_.begin(), entries_, entry);  // most recently used first
      // Outside the graph, on its stream: the copies land before the replay reads them.
      policy.upload_indices_into(entry->inputs.input_ids, std::span<std::int32_t const>(batch.input_ids));
      if (entry->token_types)
        policy.upload_indices_into(entry->inputs.token_type_ids, std::span<std::int32_t const>(batch.token_type_ids));
    }
    FLASHDEBERTA_CUDA_CHECK(cudaGraphLaunch(entry->exec.get(), policy.stream()));
    policy.fence();
    ++stats_.replays;
    return entry->output;
  }

  std::vector<float> forward_to_host(Batch const& batch) {
    HiddenStates<CudaPolicy> const& states = forward(batch);
    std::vector<float> host(static_cast<std::size_t>(states.tokens * states.hidden_size));
    model_.policy().download(states.values, std::span<float>(host));
    return host;
  }

  // Drops every graph and its memory.
  void clear() {
    entries_.clear();
    uncaptured_ = {};
  }

  std::size_t cached_graphs() const { return entries_.size(); }
  GraphForwardStats const& stats() const { return stats_; }
  GraphForwardOptions const& options() const { return options_; }

  // The cached graphs' private pools, summed (policy.memory_stats() covers the shared cache only).
  cuda_detail::CachingAllocator::Stats memory_stats() const {
    cuda_detail::CachingAllocator::Stats total;
    for (auto const& entry : entries_) {
      auto const s = entry.pool->stats();
      total.in_use_bytes += s.in_use_bytes;
      total.peak_in_use_bytes += s.peak_in_use_bytes;
      total.cached_bytes += s.cached_bytes;
      total.device_allocations += s.device_allocations;
    }
    return total;
  }

 private:
  using Entries = std::list<cuda_detail::GraphEntry>;

  // Why a private pool per graph: the graph keeps every address its capture was handed. Returned to the
  // policy's shared cache, those blocks would be handed on (to a plain forward's output the caller keeps,
  // to another graph's output, to a model loaded later) and each replay would overwrite them; the
  // single-stream ordering the cache relies on protects only blocks nobody holds across the replay.
  // Within the pool, reuse is safe: the captured kernels run in capture order (one stream, one chain), so
  // a block freed and taken again during the capture is written only after its earlier use, and replays
  // of one graph are ordered on the stream.
  typename Entries::iterator capture(Batch const& batch, AttentionImpl attention, std::uint64_t hash) {
    if (entries_.size() >= options_.max_graphs) {  // before allocating: the dropped pool's memory is freed
      entries_.pop_back();
      ++stats_.evictions;
    }
    CudaPolicy const& policy = model_.policy();
    cuda_detail::GraphEntry entry;
    entry.hash = hash;
    entry.cu_seqlens = batch.cu_seqlens;
    entry.positions = batch.positions;
    entry.token_types = !batch.token_type_ids.empty();
    entry.attention = attention;
    entry.pool = policy.make_pool();
    {
      auto const scope = policy.allocate_from(entry.pool);
      entry.inputs = DeviceBatch<CudaPolicy>::upload(policy, batch);
      ForwardContext<CudaPolicy> const ctx(policy, batch, entry.inputs, attention);
      {
        // The host code of the warm-up and of the capture is the same, so the capture takes exactly the
        // blocks the warm-up left in the pool and never calls cudaMalloc.
        HiddenStates<CudaPolicy> const warm_up = model_.enqueue_forward(ctx);
        policy.fence();
      }
      entry.exec = record(ctx, entry.output);
    }
    entries_.push_front(std::move(entry));
    ++stats_.captures;
    return entries_.begin();
  }

  // Capture mode ThreadLocal: the runtime refuses, on this thread, the calls a capture cannot record
  // (cudaMalloc, synchronizations), so a forward path that grew one fails here loudly instead of yielding
  // a graph that replays something else; other threads' CUDA work (another model, another policy) is
  // left alone, which Global mode would make fail while we capture. Relaxed would let such calls through.
  cuda_detail::GraphExecHandle record(ForwardContext<CudaPolicy> const& ctx, HiddenStates<CudaPolicy>& output) {
    cudaStream_t const stream = model_.policy().stream();
    FLASHDEBERTA_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      output = model_.enqueue_forward(ctx);
    } catch (std::exception const& e) {
      abandon_capture(stream);
      FLASHDEBERTA_FAIL("capturing the forward of " << ctx.tokens() << " tokens in " << ctx.sequences.batch
                                                    << " sequences into a CUDA graph failed: " << e.what());
    } catch (...) {
      abandon_capture(stream);
      throw;
    }
    cudaGraph_t raw = nullptr;
    cudaError_t const ended = cudaStreamEndCapture(stream, &raw);
    cuda_detail::GraphHandle const graph(raw);
    if (ended != cudaSuccess) {
      cudaGetLastError();  // capture errors are not sticky; leave none behind for the next check
      FLASHDEBERTA_FAIL("capturing the forward of "
                        << ctx.tokens() << " tokens into a CUDA graph failed: " << cudaGetErrorName(ended) << " ("
                        << cudaGetErrorString(ended) << ") at cudaStreamEndCapture; something in the forward "
                        << "path called an API that capture forbids");
    }
    cudaGraphExec_t exec = nullptr;
    FLASHDEBERTA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph.get(), 0));
    return cuda_detail::GraphExecHandle(exec);
  }

  // Ends a capture that an exception interrupted and discards what it recorded.
  static void abandon_capture(cudaStream_t stream) noexcept {
    cudaGraph_t partial = nullptr;
    cudaStreamEndCapture(stream, &partial);
    if (partial != nullptr) cudaGraphDestroy(partial);
    cudaGetLastError();
  }

  Model const& model_;
  GraphForwardOptions options_;
  GraphForwardStats stats_;
  Entries entries_;                      // most recently used first
  HiddenStates<CudaPolicy> uncaptured_;  // the last uncaptured forward's states
};

}  // namespace flashdeberta
