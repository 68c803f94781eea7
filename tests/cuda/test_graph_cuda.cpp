// CudaGraphForward against the plain forward on the HF fixtures, in fp32 and bf16: a replay gives exactly
// the floats model.forward gives for the same batch, re-reads its ids, captures once per structure, calls
// cudaMalloc neither on replay nor (shared cache) during capture, and keeps to its cache bound and token
// threshold; the policy refuses synchronizing calls on a capturing stream. Without a GPU, cuda_test_main
// skips every case.
#include <cstring>

#include "../model/golden_suite.hpp"
#include "flashdeberta/cuda/graph_forward.hpp"
#include "flashdeberta/variant/dispatch.hpp"

namespace fd = flashdeberta;

namespace {

std::filesystem::path fixture(char const* name) { return std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / name; }

std::vector<float> to_host(fd::CudaPolicy const& policy, fd::HiddenStates<fd::CudaPolicy> const& states) {
  std::vector<float> host(static_cast<std::size_t>(states.tokens * states.hidden_size));
  policy.download(states.values, std::span<float>(host));
  return host;
}

// Values whose bits differ (a size mismatch counts every value): 0 means bitwise equal.
std::size_t differing(std::vector<float> const& ours, std::vector<float> const& expected) {
  if (ours.size() != expected.size()) return std::max(ours.size(), expected.size());
  std::size_t count = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) count += std::memcmp(&ours[i], &expected[i], sizeof(float)) != 0;
  return count;
}

// cudaMalloc calls so far: the policy's shared cache, and the cached graphs' pools.
struct Mallocs {
  std::size_t shared = 0, pools = 0;
  bool operator==(Mallocs const&) const = default;
};
template <class Runner>
Mallocs mallocs(fd::CudaPolicy const& policy, Runner const& graphs) {
  return {policy.memory_stats().device_allocations, graphs.memory_stats().device_allocations};
}

// The same structure with other ids, and other token types where the batch has them.
fd::Batch with_other_ids(fd::Batch batch, fd::ModelConfig const& config) {
  for (auto& id : batch.input_ids) id = static_cast<std::int32_t>((id + 1) % config.vocab_size);
  if (config.type_vocab_size > 1)
    for (auto& type : batch.token_type_ids) type = static_cast<std::int32_t>((type + 1) % config.type_vocab_size);
  return batch;
}

// Packed sequences of the given lengths with pseudo-random ids below vocab.
fd::Batch sequences(std::vector<std::int64_t> const& lengths, std::int32_t vocab, std::uint32_t seed) {
  fd::Batch batch;
  for (std::int64_t length : lengths) {
    std::vector<std::int32_t> ids(static_cast<std::size_t>(length));
    for (auto& id : ids) {
      seed = seed * 1664525u + 1013904223u;
      id = static_cast<std::int32_t>(seed % static_cast<std::uint32_t>(vocab));
    }
    batch.add_sequence(ids);
  }
  return batch;
}

template <fd::Variant V>
void check_replays_match_plain(std::filesystem::path const& dir, fd::DType dtype) {
  INFO("fixture " << dir.filename().string() << " in " << fd::dtype_name(dtype));
  fd::CudaPolicy const policy(fd::CudaOptions{.dtype = dtype});
  auto const model = fd::DebertaModel<V, fd::CudaPolicy>::load(policy, dir);
  fd::Batch const first = fd::testing::read_golden_case(dir).batch;
  fd::Batch const second = with_other_ids(first, model.config());
  std::vector<float> const plain_first = model.forward_to_host(first);
  std::vector<float> const plain_second = model.forward_to_host(second);
  REQUIRE(differing(plain_first, plain_second) > 0);  // else the re-read checks below could not fail

  fd::CudaGraphForward graphs(model);
  Mallocs const start = mallocs(policy, graphs);
  auto const& captured = graphs.forward(first);
  Mallocs const after_capture = mallocs(policy, graphs);
  CHECK(after_capture.shared == start.shared);  // warm-up and capture took their blocks from the graph's pool
  CHECK(after_capture.pools > 0);
  CHECK(differing(to_host(policy, captured), plain_first) == 0);

  // Alternating ids on one graph: each replay reads the ids of its own call.
  for (int round = 0; round < 2; ++round) {
    for (bool use_second : {true, false}) {
      Mallocs const before = mallocs(policy, graphs);
      auto const& states = graphs.forward(use_second ? second : first);
      CHECK(mallocs(policy, graphs) == before);  // a replay never calls cudaMalloc
      CHECK(differing(to_host(policy, states), use_second ? plain_second : plain_first) == 0);
    }
  }
  CHECK(graphs.stats().captures == 1);
  CHECK(graphs.stats().replays == 5);
  CHECK(graphs.stats().uncaptured == 0);
  CHECK(graphs.cached_graphs() == 1);
}

void check_fixture(char const* name, fd::DType dtype) {
  std::filesystem::path const dir = fixture(name);
  fd::dispatch_variant(fd::load_model_config(dir), [&]<fd::Variant V>() { check_replays_match_plain<V>(dir, dtype); });
}

}  // namespace

// v3_base_like: the v3 structure, 2 x 640 padded; v2_conv: the conv layer and token types; v1_c2p_p2c: the
// fused v1 projection with token types; v3_mask_hole: positions that are not contiguous.
TEST_CASE("cuda graphs: replays give the plain forward's floats and re-read their ids, fp32 and bf16") {
  for (fd::DType dtype : {fd::DType::kF32, fd::DType::kBF16}) {
    for (char const* name : {"v3_base_like", "v2_conv", "v1_c2p_p2c", "v3_mask_hole"}) check_fixture(name, dtype);
  }
}

TEST_CASE("cuda graphs: one graph per structure, token types and attention implementation") {
  fd::CudaPolicy const policy;
  auto model = fd::DebertaV2<fd::CudaPolicy>::load(policy, fixture("v2_conv"));
  fd::Batch const typed = fd::testing::read_golden_case(fixture("v2_conv")).batch;
  REQUIRE(!typed.token_type_ids.empty());
  fd::Batch untyped = typed;
  untyped.token_type_ids.clear();
  fd::Batch const packed = sequences({5, 9}, static_cast<std::int32_t>(model.config().vocab_size), 3);
  std::vector<float> const plain_typed = model.forward_to_host(typed);
  std::vector<float> const plain_untyped = model.forward_to_host(untyped);
  std::vector<float> const plain_packed = model.forward_to_host(packed);
  model.set_attention(fd::AttentionImpl::kEager);
  std::vector<float> const plain_eager = model.forward_to_host(typed);
  model.set_attention(fd::AttentionImpl::kFlash);

  fd::CudaGraphForward graphs(model);
  auto const expect = [&](fd::Batch const& batch, std::vector<float> const& plain, std::size_t captures) {
    CHECK(differing(to_host(policy, graphs.forward(batch)), plain) == 0);
    CHECK(graphs.stats().captures == captures);
    CHECK(graphs.cached_graphs() == captures);
  };
  expect(typed, plain_typed, 1);
  expect(untyped, plain_untyped, 2);  // same cu_seqlens and positions, no token types
  expect(packed, plain_packed, 3);
  expect(typed, plain_typed, 3);  // found again
  model.set_attention(fd::AttentionImpl::kEager);
  expect(typed, plain_eager, 4);
  model.set_attention(fd::AttentionImpl::kFlash);
  expect(typed, plain_typed, 4);
  CHECK(graphs.stats().replays == 6);
}

TEST_CASE("cuda graphs: at most max_graphs, least recently used dropped first, and clear drops all") {
  fd::CudaPolicy const policy;
  auto const model = fd::DebertaV3<fd::CudaPolicy>::load(policy, fixture("v3_base_like"));
  auto const vocab = static_cast<std::int32_t>(model.config().vocab_size);
  fd::Batch const a = sequences({4}, vocab, 1), b = sequences({6}, vocab, 2), c = sequences({3, 5}, vocab, 3);
  std::vector<float> const plain_a = model.forward_to_host(a), plain_b = model.forward_to_host(b),
                           plain_c = model.forward_to_host(c);
  fd::CudaGraphForward graphs(model, {.max_graphs = 2});
  auto const expect = [&](fd::Batch const& batch, std::vector<float> const& plain, std::size_t captures,
                          std::size_t evictions) {
    CHECK(differing(to_host(policy, graphs.forward(batch)), plain) == 0);
    CHECK(graphs.stats().captures == captures);
    CHECK(graphs.stats().evictions == evictions);
    CHECK(graphs.cached_graphs() <= 2);
  };
  expect(a, plain_a, 1, 0);
  expect(b, plain_b, 2, 0);
  expect(c, plain_c, 3, 1);  // drops a
  expect(b, plain_b, 3, 1);  // b is now the most recent, c the least
  expect(a, plain_a, 4, 2);  // drops c
  expect(b, plain_b, 4, 2);
  expect(c, plain_c, 5, 3);  // drops a (b was used last)

  graphs.clear();
  CHECK(graphs.cached_graphs() == 0);
  CHECK(graphs.memory_stats().device_allocations == 0);
  CHECK(graphs.memory_stats().cached_bytes == 0);
  expect(a, plain_a, 6, 3);

  fd::CudaGraphForward off(model, fd::GraphForwardOptions{.max_graphs = 0});
  CHECK(differing(to_host(policy, off.forward(a)), plain_a) == 0);
  CHECK(off.stats().uncaptured == 1);
  CHECK(off.stats().captures == 0);
}

TEST_CASE("cuda graphs: batches above max_graph_tokens run the plain forward") {
  fd::CudaPolicy const policy(fd::CudaOptions{.dtype = fd::DType::kBF16});
  auto const model = fd::DebertaV3<fd::CudaPolicy>::load(policy, fixture("v3_base_like"));
  auto const vocab = static_cast<std::int32_t>(model.config().vocab_size);
  fd::Batch const large = sequences({7, 5}, vocab, 4), small = sequences({8}, vocab, 5);
  std::vector<float> const plain_large = model.forward_to_host(large), plain_small = model.forward_to_host(small);
  fd::CudaGraphForward graphs(model, fd::GraphForwardOptions{.max_graph_tokens = 8});
  CHECK(differing(to_host(policy, graphs.forward(large)), plain_large) == 0);
  CHECK(graphs.stats().uncaptured == 1);
  CHECK(graphs.stats().captures == 0);
  CHECK(graphs.cached_graphs() == 0);
  CHECK(differing(to_host(policy, graphs.forward(small)), plain_small) == 0);  // 8 tokens: at the bound
  CHECK(graphs.stats().captures == 1);
  CHECK(graphs.stats().uncaptured == 1);
  // Bad ids are refused before any graph reads them.
  fd::Batch bad = small;
  bad.input_ids[3] = vocab;
  CHECK_THROWS_WITH_AS(graphs.forward(bad), doctest::Contains("outside the vocabulary"), fd::Error);
}

TEST_CASE("cuda graphs: the policy refuses what a capture cannot record") {
  fd::CudaPolicy const policy;
  std::vector<std::int32_t> const indices{1, 2, 3};
  auto const existing = policy.upload_indices(std::span<std::int32_t const>(indices));
  std::vector<float> host(4);
  auto const floats = policy.upload(std::span<float const>(host), fd::DType::kF32);
  policy.fence();
  CHECK_FALSE(policy.stream_is_capturing());
  REQUIRE(cudaStreamBeginCapture(policy.stream(), cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  CHECK(policy.stream_is_capturing());
  CHECK_THROWS_WITH_AS(policy.fence(), doctest::Contains("captured into a CUDA graph"), fd::Error);
  CHECK_THROWS_WITH_AS(policy.upload_indices(std::span<std::int32_t const>(indices)),
                       doctest::Contains("captured into a CUDA graph"), fd::Error);
  CHECK_THROWS_WITH_AS(policy.upload_indices_into(existing, std::span<std::int32_t const>(indices)),
                       doctest::Contains("captured into a CUDA graph"), fd::Error);
  CHECK_THROWS_WITH_AS(policy.download(floats, std::span<float>(host)), doctest::Contains("captured into a CUDA graph"),
                       fd::Error);
  CHECK_THROWS_WITH_AS(policy.upload(std::span<float const>(host), fd::DType::kF32),
                       doctest::Contains("captured into a CUDA graph"), fd::Error);
  // A size the cache has never held: a miss, which must not reach cudaMalloc.
  CHECK_THROWS_WITH_AS(policy.allocate(12345, fd::DType::kF32), doctest::Contains("cannot call cudaMalloc"), fd::Error);
  // Nothing forbidden reached the runtime, so the capture is intact.
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamEndCapture(policy.stream(), &graph) == cudaSuccess);
  if (graph != nullptr) cudaGraphDestroy(graph);
  CHECK_FALSE(policy.stream_is_capturing());
  policy.fence();
}

TEST_CASE("cuda graphs: a context over device arrays checks that they hold the batch") {
  fd::CudaPolicy const policy;
  fd::Batch const batch = sequences({3, 4}, 50, 6);
  fd::DeviceBatch<fd::CudaPolicy> device = fd::DeviceBatch<fd::CudaPolicy>::upload(policy, batch);
  CHECK_NOTHROW(fd::ForwardContext<fd::CudaPolicy>(policy, batch, device, fd::AttentionImpl::kFlash));
  device.positions = policy.upload_indices(std::span<std::int32_t const>(batch.positions.data(), 6));
  CHECK_THROWS_WITH_AS(fd::ForwardContext<fd::CudaPolicy>(policy, batch, device, fd::AttentionImpl::kFlash),
                       doctest::Contains("does not hold a batch of 7 tokens in 2 sequences"), fd::Error);
}
