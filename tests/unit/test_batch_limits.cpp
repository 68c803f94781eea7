// Batch::validate refuses every malformed field a kernel would read, each public entry point calls it, and
// a forward whose estimated memory does not fit is refused with the numbers before anything is allocated.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "flashdeberta/eigen/eigen_policy.hpp"
#include "flashdeberta/heads/heads.hpp"
#include "flashdeberta/model/deberta_model.hpp"
#include "flashdeberta/policy/profiling_policy.hpp"

namespace flashdeberta {
namespace {

std::filesystem::path fixture(std::string const& name) {
  return std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / name;
}

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 97;
  c.type_vocab_size = 2;
  c.max_position_embeddings = 512;
  c.position_biased_input = true;
  return c;
}

// Two sequences of 3 and 2 tokens, with token types: valid for small_config().
Batch valid_batch() {
  Batch b;
  std::vector<std::int32_t> const a = {1, 2, 3}, a_types = {0, 1, 1};
  std::vector<std::int32_t> const c = {4, 5}, c_types = {0, 0};
  b.add_sequence(a, a_types);
  b.add_sequence(c, c_types);
  return b;
}

// The message of the Error `fn` throws ("" when it throws none).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (Error const& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("Batch::validate names the field, index and values of every malformed part") {
  ModelConfig const config = small_config();
  CHECK(error_of([&] { valid_batch().validate(config); }).empty());
  struct Case {
    char const* what;
    void (*mutate)(Batch&);
    char const* message;
  };
  std::vector<Case> const cases = {
      {"empty offsets", [](Batch& b) { b.cu_seqlens.clear(); }, "cu_seqlens is empty"},
      {"offsets start at 1", [](Batch& b) { b.cu_seqlens[0] = 1; }, "cu_seqlens[0] is 1; packed offsets start at 0"},
      {"offsets decrease",
       [](Batch& b) {
         b.cu_seqlens = {0, 4, 3, 5};
       },
       "cu_seqlens[2] = 3 is below cu_seqlens[1] = 4"},
      {"offsets end early",
       [](Batch& b) {
         b.cu_seqlens = {0, 3, 4};
       },
       "cu_seqlens[2] = 4 but input_ids has 5 tokens"},
      {"positions short", [](Batch& b) { b.positions.pop_back(); }, "positions has 4 entries for 5 tokens"},
      {"negative position", [](Batch& b) { b.positions[3] = -1; }, "positions[3] = -1 (sequence 1) is negative"},
      {"repeated position", [](Batch& b) { b.positions[2] = 1; },
       "positions[2] = 1 does not exceed positions[1] = 1 in sequence 0"},
      {"decreasing position",
       [](Batch& b) {
         b.positions = {0, 5, 2, 0, 1};
       },
       "positions[2] = 2 does not exceed positions[1] = 5 in sequence 0"},
      {"token types short", [](Batch& b) { b.token_type_ids.resize(2); }, "token_type_ids has 2 entries for 5 tokens"},
      {"padded_length negative", [](Batch& b) { b.padded_length = -1; }, "padded_length is -1"},
      {"position past padded_length", [](Batch& b) { b.padded_length = 2; },
       "positions[2] = 2 (sequence 0) lies beyond padded_length 2"},
      {"id past vocab", [](Batch& b) { b.input_ids[4] = 97; }, "token id 97 at packed position 4 is outside"},
      {"negative id", [](Batch& b) { b.input_ids[0] = -3; }, "token id -3 at packed position 0"},
      {"type past type_vocab", [](Batch& b) { b.token_type_ids[1] = 2; }, "token type id 2 at packed position 1"},
      {"position past the table", [](Batch& b) { b.positions[4] = 512; }, "sequence position 512 needs more"},
  };
  for (Case const& c : cases) {
    CAPTURE(c.what);
    Batch batch = valid_batch();
    c.mutate(batch);
    std::string const message = error_of([&] { batch.validate(config); });
    CHECK_MESSAGE(message.find(c.message) != std::string::npos, message);
  }
}

TEST_CASE("Batch::validate accepts what from_padded builds, empty rows and holes included") {
  std::vector<std::int64_t> const ids = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<std::int64_t> const mask = {1, 0, 1, 0, 0, 0, 0, 1, 1};  // row 0 has a hole, row 1 is empty
  Batch const batch = Batch::from_padded(3, 3, ids, mask);
  CHECK(batch.cu_seqlens == std::vector<std::int32_t>{0, 2, 2, 4});
  CHECK(batch.positions == std::vector<std::int32_t>{0, 2, 1, 2});
  CHECK(error_of([&] { batch.validate(small_config()); }).empty());
  CHECK(error_of([] { Batch::from_padded(-1, 4, {}); }).find("-1 x 4") != std::string::npos);
}

// An empty sequence changes nothing for the others, with either attention: the rows of a batch with an
// all-masked row equal those of the batch without it.
TEST_CASE("a forward with an empty sequence gives the other sequences' results") {
  for (AttentionImpl const impl : {AttentionImpl::kFlash, AttentionImpl::kEager}) {
    CAPTURE(static_cast<int>(impl));
    auto const model = DebertaV3<EigenPolicy>::load(EigenPolicy(1), fixture("v3_c2p"), {.attention = impl});
    std::vector<std::int64_t> const ids = {5, 6, 7, 8, 0, 0, 0, 0, 9, 10, 11, 12};
    std::vector<std::int64_t> const mask = {1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1};
    std::vector<std::int64_t> const kept_ids = {5, 6, 7, 8, 9, 10, 11, 12};
    std::vector<std::int64_t> const kept_mask = {1, 1, 1, 0, 1, 1, 1, 1};
    std::vector<float> const with_empty = model.forward_to_host(Batch::from_padded(3, 4, ids, mask));
    std::vector<float> const without = model.forward_to_host(Batch::from_padded(2, 4, kept_ids, kept_mask));
    REQUIRE(with_empty.size() == without.size());
    for (std::size_t i = 0; i < without.size(); ++i) CHECK(with_empty[i] == doctest::Approx(without[i]).epsilon(1e-5));
  }
}

TEST_CASE("every public entry point validates the batch") {
  Batch bad = Batch::from_sequences({{1, 2, 3}});
  bad.positions[2] = 0;
  auto const model = DebertaV3<EigenPolicy>::load(EigenPolicy(1), fixture("v3_c2p"));
  char const* const expected = "positions[2] = 0 does not exceed positions[1] = 1";
  CHECK(error_of([&] { model.forward(bad); }).find(expected) != std::string::npos);
  CHECK(error_of([&] { model.forward_to_host(bad); }).find(expected) != std::string::npos);
  auto const classifier =
      DebertaV3ForSequenceClassification<EigenPolicy>::load(EigenPolicy(1), fixture("heads/seqcls_v3"));
  CHECK(error_of([&] { classifier.forward(bad); }).find(expected) != std::string::npos);
  CHECK(error_of([&] { classifier.forward_to_host(bad); }).find(expected) != std::string::npos);
  std::vector<float> const packed(3 * 32, 0.0f);
  CHECK(error_of([&] { unpack_to_padded(bad, packed, 32); }).find(expected) != std::string::npos);
  Batch holes = Batch::from_sequences({{1, 2}});  // padded_length 0: L is the largest position + 1
  holes.positions = {0, 5};
  CHECK(unpack_to_padded(holes, std::vector<float>(2, 1.0f), 1) == std::vector<float>{1, 0, 0, 0, 0, 1});
}

// One sequence of `length` tokens of id 1.
Batch long_sequence(std::int64_t length) {
  Batch batch;
  batch.add_sequence(std::vector<std::int32_t>(static_cast<std::size_t>(length), 1));
  return batch;
}

TEST_CASE("attention workspace estimates follow what each attention allocates") {
  // v3_c2p: 2 heads of 16, 2k = 32 relative rows, c2p only.
  ModelConfig const config = load_model_config(fixture("v3_c2p"));
  REQUIRE(config.num_heads == 2);
  REQUIRE(config.head_size == 16);
  REQUIRE(2 * config.relative_span() == 32);
  double const l = 100000.0;
  Batch const batch = long_sequence(100000);
  AttentionShape const eager = attention_shape(config, batch, AttentionImpl::kEager, DType::kF32);
  // EigenPolicy, one thread: the (L, L) int32 slot index, then one head at a time: scores, k / scale, c2p.
  CHECK(EigenPolicy(1).attention_workspace_bytes(eager) ==
        static_cast<std::int64_t>(4 * l * l + 4 * (l * l + l * 16 + l * 32)));
  // Two threads work on both heads at once.
  CHECK(EigenPolicy(2).attention_workspace_bytes(eager) ==
        static_cast<std::int64_t>(4 * l * l + 2 * 4 * (l * l + l * 16 + l * 32)));
  // A policy without the hook is assumed to hold HF's (heads, L, L) scores and the (T, heads, 2k) c2p.
  CHECK(default_attention_workspace_bytes(eager) == 2 * l * l * 4 + l * 2 * 32 * 4);
  // Flash is linear in L: far below one (L, L) matrix of one head.
  AttentionShape const flash = attention_shape(config, batch, AttentionImpl::kFlash, DType::kF32);
  CHECK(EigenPolicy(2).attention_workspace_bytes(flash) < static_cast<std::int64_t>(l * 1000));
  CHECK(default_attention_workspace_bytes(flash) == 0);  // c2p only: no (T, heads, 2k) p2c table
  // ProfilingPolicy passes the wrapped policy's hooks on.
  ProfilingPolicy<EigenPolicy> const profiled{EigenPolicy(1)};
  static_assert(ReportsAttentionWorkspace<ProfilingPolicy<EigenPolicy>>);
  static_assert(ReportsAvailableMemory<ProfilingPolicy<EigenPolicy>>);
  CHECK(attention_workspace_bytes(profiled, eager) == EigenPolicy(1).attention_workspace_bytes(eager));
  CHECK(profiled.available_memory_bytes().has_value() == EigenPolicy(1).available_memory_bytes().has_value());
}

TEST_CASE("eager attention at L = 100000 is refused at once, naming the sizes") {
  using Clock = std::chrono::steady_clock;
  SUBCASE("against the memory the host has available") {
    auto const model =
        DebertaV3<EigenPolicy>::load(EigenPolicy(1), fixture("v3_c2p"), {.attention = AttentionImpl::kEager});
    Clock::time_point const start = Clock::now();
    Batch const batch = long_sequence(100000);
    ForwardMemory const need = model.estimate_forward_memory(batch);
    std::optional<std::int64_t> const available = model.policy().available_memory_bytes();
    REQUIRE(available.has_value());
    if (*available >= need.total) {  // a machine this large would run it: only the ModelOptions case applies
      MESSAGE("the host has " << *available << " bytes available, enough for " << need.total << "; skipped");
      return;
    }
    std::string const message = error_of([&] { model.forward(batch); });
    double const seconds = std::chrono::duration<double>(Clock::now() - start).count();
    CHECK(seconds < 0.5);
    CHECK_MESSAGE(message.starts_with("forward of 1 sequence, 100000 tokens, longest 100000 needs about 74.6 GiB "
                                      "(eager attention: 74.5 GiB of scores per layer) but only "),
                  message);
    CHECK_MESSAGE(message.ends_with(" GiB are available to the eigen policy; use flash attention (memory linear in "
                                    "L) or fewer tokens"),
                  message);
  }
  SUBCASE("against ModelOptions::max_forward_bytes") {
    auto const model = DebertaV3<EigenPolicy>::load(
        EigenPolicy(1), fixture("v3_c2p"), {.attention = AttentionImpl::kEager, .max_forward_bytes = 1ll << 30});
    Clock::time_point const start = Clock::now();
    std::string const message = error_of([&] { model.forward_to_host(long_sequence(100000)); });
    CHECK(std::chrono::duration<double>(Clock::now() - start).count() < 0.5);
    CHECK_MESSAGE(message ==
                      "forward of 1 sequence, 100000 tokens, longest 100000 needs about 74.6 GiB (eager attention: "
                      "74.5 GiB of scores per layer) but only 1 GiB are available (ModelOptions::max_forward_bytes); "
                      "use flash attention (memory linear in L) or fewer tokens",
                  message);
  }
  SUBCASE("flash attention over the same batch fits in far less") {
    auto const model =
        DebertaV3<EigenPolicy>::load(EigenPolicy(1), fixture("v3_c2p"), {.max_forward_bytes = 1ll << 30});
    ForwardMemory const need = model.estimate_forward_memory(long_sequence(100000));
    // H = A = 32, I = 64: the attention block's (T, 3H + 4A) activations lead the feed-forward's (T, 4H + I).
    CHECK(need.activations == 100000ll * (3 * 32 + 4 * 32) * 4);
    CHECK(need.total < (1ll << 30));
    CHECK(need.total >= need.activations);
  }
}

TEST_CASE("a masked LM's logits count: refused when they cannot fit beside the hidden states") {
  using Clock = std::chrono::steady_clock;
  // mlm_v3_nonlegacy: H = E = 32, V = 100. The logits path (hidden states, gathered rows, transform, LayerNorm
  // and logits: T x (32 + 32 + 2 x 32 + 100) floats) outgrows the backbone's own peak at any length.
  std::filesystem::path const dir = fixture("heads/mlm_v3_nonlegacy");
  Batch const batch = long_sequence(2000);
  auto const backbone = DebertaV3<EigenPolicy>::load(EigenPolicy(1), dir);
  std::int64_t const backbone_peak = backbone.estimate_forward_memory(batch).total;
  auto const mlm =
      DebertaV3ForMaskedLM<EigenPolicy>::load(EigenPolicy(1), dir, {.max_forward_bytes = backbone_peak + 1});
  Clock::time_point const start = Clock::now();
  std::string const message = error_of([&] { mlm.forward_to_host(batch); });
  CHECK(std::chrono::duration<double>(Clock::now() - start).count() < 0.5);
  CHECK_MESSAGE(message.find("(head outputs: 0.00146 GiB)") != std::string::npos, message);
  CHECK_MESSAGE(
      message.ends_with("ask the head for fewer tokens (HeadRequest::tokens) or use fewer sequences per forward"),
      message);
  // The masked positions only: the backbone's peak again, which fits.
  HeadRequest request;
  request.tokens = std::vector<std::int64_t>{0, 1999};
  CHECK(error_of([&] { mlm.forward(batch, request); }).empty());
}

// EigenPolicy whose buffers count the bytes they hold, to measure a forward's peak against the estimate.
struct ByteCounter {
  std::int64_t live = 0;
  std::int64_t peak = 0;
};

class CountedBuffer {
 public:
  CountedBuffer() = default;
  CountedBuffer(HostBuffer buffer, std::shared_ptr<ByteCounter> counter)
      : buffer_(std::move(buffer)), counter_(std::move(counter)) {
    counter_->live += bytes();
    counter_->peak = std::max(counter_->peak, counter_->live);
  }
  CountedBuffer(CountedBuffer&& other) noexcept
      : buffer_(std::move(other.buffer_)), counter_(std::exchange(other.counter_, nullptr)) {}
  CountedBuffer& operator=(CountedBuffer&& other) noexcept {
    release();
    buffer_ = std::move(other.buffer_);
    counter_ = std::exchange(other.counter_, nullptr);
    return *this;
  }
  ~CountedBuffer() { release(); }

  void* data() const { return buffer_.data(); }
  std::int64_t size() const { return buffer_.size(); }
  DType dtype() const { return buffer_.dtype(); }
  HostBuffer const& host() const { return buffer_; }

 private:
  std::int64_t bytes() const { return static_cast<std::int64_t>(buffer_.size_bytes()); }
  void release() {
    if (counter_) counter_->live -= bytes();
    counter_ = nullptr;
  }
  HostBuffer buffer_;
  std::shared_ptr<ByteCounter> counter_;
};

class CountingPolicy {
 public:
  using Buffer = CountedBuffer;

  static char const* name() { return "counting"; }
  DType compute_dtype() const { return DType::kF32; }
  Buffer allocate(std::int64_t n, DType t) const { return {inner_.allocate(n, t), counter_}; }
  Buffer upload(std::span<float const> host, DType t) const { return {inner_.upload(host, t), counter_}; }
  Buffer upload_indices(std::span<std::int32_t const> host) const { return {inner_.upload_indices(host), counter_}; }
  void download(Buffer const& b, std::span<float> host) const { inner_.download(b.host(), host); }
  void gemm(GemmArgs const& a) const { inner_.gemm(a); }
  void layer_norm(LayerNormArgs const& a) const { inner_.layer_norm(a); }
  void embedding(EmbeddingArgs const& a) const { inner_.embedding(a); }
  void conv1d(Conv1dArgs const& a) const { inner_.conv1d(a); }
  void disentangled_attention(AttentionArgs const& a) const { inner_.disentangled_attention(a); }
  void lstm_cell(LstmCellArgs const& a) const { inner_.lstm_cell(a); }
  void fence() const {}

  ByteCounter& counter() const { return *counter_; }

 private:
  EigenPolicy inner_{1};
  std::shared_ptr<ByteCounter> counter_ = std::make_shared<ByteCounter>();
};
static_assert(ExecutionPolicy<CountingPolicy>);

// Peak bytes the model allocates through the policy during one forward, beyond what it held before.
template <class Model>
std::int64_t measured_forward_peak(Model const& model, Batch const& batch) {
  ByteCounter& counter = model.policy().counter();
  std::int64_t const before = counter.live;
  counter.peak = before;
  model.forward(batch);
  return counter.peak - before;
}

TEST_CASE("the activation estimate bounds what the layers allocate, closely") {
  // v1_c2p has 64 absolute positions.
  Batch const batch = Batch::from_sequences({std::vector<std::int32_t>(64, 3), std::vector<std::int32_t>(40, 4), {}});
  auto check = [&](auto const& model, char const* name) {
    CAPTURE(name);
    std::int64_t const measured = measured_forward_peak(model, batch);
    ForwardMemory const estimate = model.estimate_forward_memory(batch);
    // Everything a policy-agnostic layer allocates goes through allocate(); the attention op's own memory
    // (not counted by CountingPolicy) is the estimate's separate term.
    std::int64_t const layers = estimate.indices + estimate.activations;
    CHECK(measured <= layers);
    CHECK(static_cast<double>(layers) <= 1.05 * static_cast<double>(measured));
  };
  check(DebertaV3<CountingPolicy>::load(CountingPolicy(), fixture("v3_c2p")), "v3_c2p");
  check(DebertaV2<CountingPolicy>::load(CountingPolicy(), fixture("v2_conv")), "v2_conv (conv layer)");
  check(DebertaV1<CountingPolicy>::load(CountingPolicy(), fixture("v1_c2p")), "v1_c2p");
  check(DebertaV3<CountingPolicy>::load(CountingPolicy(), fixture("v3_embedding_size")), "v3_embedding_size");
}

}  // namespace
}  // namespace flashdeberta
