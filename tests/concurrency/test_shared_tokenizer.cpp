// One tokenizer of each kind (SentencePiece, GPT-2 byte-level BPE) shared by 8 std::threads: every thread
// encodes the texts of the tokenizer's fixture (tests/fixtures/tokenizers/<name>/expected.json), each
// thread in its own order and several times over, and gets exactly the encodings a single thread got
// first. The BPE model may cache what it merged; the threads then meet in that cache.
#include <doctest/doctest.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "flashdeberta/tokenizer/tokenizer.hpp"
#include "run_on_threads.hpp"

namespace fd = flashdeberta;
using fd::testing::kThreads;
using fd::testing::run_on_threads;

namespace {

constexpr int kRounds = 3;  // passes over the texts per thread

std::filesystem::path tokenizer_dir(char const* name) {
  return std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "tokenizers" / name;
}

struct TextCase {
  std::string text;
  std::string pair;  // empty: a single text
};

// Every case of expected.json with a text (and its pair text, if any).
std::vector<TextCase> fixture_texts(std::filesystem::path const& dir) {
  std::ifstream in(dir / "expected.json");
  REQUIRE_MESSAGE(in.good(), (dir / "expected.json").string() << " cannot be read");
  nlohmann::json const expected = nlohmann::json::parse(in);
  std::vector<TextCase> texts;
  for (auto const& c : expected.at("cases")) {
    if (!c.contains("text") || !c["text"].is_string()) continue;
    TextCase t{c["text"].get<std::string>(), {}};
    if (c.contains("pair") && c["pair"].is_string()) t.pair = c["pair"].get<std::string>();
    texts.push_back(std::move(t));
  }
  return texts;
}

fd::Encoding encode(fd::Tokenizer const& tokenizer, TextCase const& t) {
  fd::EncodeOptions options;
  options.max_length = 64;  // long texts are cut: the truncation path runs concurrently too
  options.truncation = fd::Truncation::kLongestFirst;
  return t.pair.empty() ? tokenizer.encode(t.text, options) : tokenizer.encode(t.text, t.pair, options);
}

// Names the first field of `got` that differs from `expected`, or returns "".
std::string first_difference(fd::Encoding const& got, fd::Encoding const& expected) {
  if (got.input_ids != expected.input_ids) return "input_ids";
  if (got.token_type_ids != expected.token_type_ids) return "token_type_ids";
  if (got.attention_mask != expected.attention_mask) return "attention_mask";
  if (got.offsets != expected.offsets) return "offsets";
  if (got.tokens != expected.tokens) return "tokens";
  if (got.sequence_ids != expected.sequence_ids) return "sequence_ids";
  return "";
}

void check_shared_tokenizer(char const* name) {
  std::filesystem::path const dir = tokenizer_dir(name);
  fd::Tokenizer const tokenizer = fd::load_tokenizer(dir);
  std::vector<TextCase> const texts = fixture_texts(dir);
  REQUIRE(texts.size() >= 16);
  std::vector<fd::Encoding> expected;
  for (auto const& t : texts) expected.push_back(encode(tokenizer, t));

  // got[thread][round * texts + k]: the encoding of text k; thread t starts at text 7 t and walks on.
  std::vector<std::vector<fd::Encoding>> got(kThreads);
  run_on_threads(kThreads, [&](int thread) {
    auto& mine = got[static_cast<std::size_t>(thread)];
    mine.resize(kRounds * texts.size());
    for (int round = 0; round < kRounds; ++round) {
      for (std::size_t n = 0; n < texts.size(); ++n) {
        std::size_t const k = (n + 7 * static_cast<std::size_t>(thread)) % texts.size();
        mine[round * texts.size() + k] = encode(tokenizer, texts[k]);
      }
    }
  });

  int differing = 0;
  std::ostringstream first;
  for (int thread = 0; thread < kThreads; ++thread) {
    for (std::size_t i = 0; i < got[thread].size(); ++i) {
      std::size_t const k = i % texts.size();
      std::string const field = first_difference(got[thread][i], expected[k]);
      if (!field.empty() && differing++ == 0)
        first << "thread " << thread << ", text " << k << " ('" << texts[k].text.substr(0, 40) << "'): " << field;
    }
  }
  CHECK_MESSAGE(differing == 0, name << ": " << differing << " of " << kThreads * kRounds * texts.size()
                                     << " encodings differ from the single-thread ones, first " << first.str());
}

}  // namespace

TEST_CASE("concurrency: a GPT-2 BPE tokenizer shared by 8 threads gives the single-thread encodings") {
  check_shared_tokenizer("bpe");
}

#if defined(FLASHDEBERTA_WITH_SENTENCEPIECE)
TEST_CASE("concurrency: a SentencePiece tokenizer shared by 8 threads gives the single-thread encodings") {
  check_shared_tokenizer("spm");
}
#endif
