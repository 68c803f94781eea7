// Long inputs and shared use: one 100,000-character word must tokenize in well under a second with
// both tokenizers (the BPE merges run on a priority queue, not a rescan per merge), the BPE result must
// equal a plain reference BPE (lowest (rank, position) merge first, HF's order) on many random words,
// and several threads sharing one tokenizer (and its word cache) must get the single-threaded results.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../sanitized_build.hpp"
#include "fixture_cases.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"
#include "tokenizer_test_util.hpp"

using flashdeberta::test::tokenizer_fixture;
namespace tok = flashdeberta::tokenizer;

namespace {

constexpr std::size_t kLongWord = 100'000;
// "Well under a second" here; generous for a loaded CI machine, and for AddressSanitizer's slowdown (the
// quadratic paths these guard against took 4.6 to 97 s without it).
constexpr double kSecondsAllowed = flashdeberta::testing::kAddressSanitized ? 10.0 : 2.0;

std::string utf8_of(std::u32string const& chars) { return tok::encode_utf8(chars); }

// The long inputs: random letters (ASCII and beyond, one pre-token for BPE), one letter repeated ('l',
// which the BPE fixture merges with itself, 'll' and so on), random bytes read as characters
// U+0000..U+00FF (every character class, many pre-tokens), a run of spaces between two letters, and a
// letter carrying 99,999 combining accents (for SentencePiece one [UNK], which libsentencepiece alone
// builds in quadratic time: sentencepiece_chunks.hpp).
std::vector<std::pair<std::string, std::string>> long_inputs() {
  std::mt19937 rng(20240611);
  std::u32string const alphabet = U"abcdefghijklmnopqrstuvwxyzéüßжщλ漢字";
  std::u32string letters;
  std::u32string bytes;
  for (std::size_t i = 0; i < kLongWord; ++i) {
    letters += alphabet[rng() % alphabet.size()];
    bytes += static_cast<char32_t>(rng() % 256);
  }
  std::vector<std::pair<std::string, std::string>> out{
      {"random letters", utf8_of(letters)},
      {"one repeated letter", std::string(kLongWord, 'l')},
      {"random bytes as characters", utf8_of(bytes)},
      {"a run of spaces", "a" + std::string(kLongWord - 2, ' ') + "b"},
      {"a letter and combining marks", utf8_of(U"e" + std::u32string(kLongWord - 1, U'\u0301'))}};
  return out;
}

void check_long_inputs(tok::Tokenizer const& t, std::string const& name) {
  for (auto const& [what, text] : long_inputs()) {
    auto const start = std::chrono::steady_clock::now();
    tok::Encoding const e = t.encode(text);
    double const seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    MESSAGE(name << ", " << what << " (" << kLongWord << " characters): " << e.size() << " tokens in " << seconds
                 << " s");
    CHECK(seconds < kSecondsAllowed);
    REQUIRE(e.size() >= 3);
    // The tokens run through the text in order, up to its last character (SentencePiece spans leave out
    // the combining marks after a piece's last character, as HF's alignment does).
    auto const chars = tok::decode_utf8(text).chars;
    if (!tok::is_mark(chars.back())) CHECK(e.offsets[e.size() - 2].end == static_cast<std::int64_t>(chars.size()));
    bool ordered = true;
    for (std::size_t i = 2; i + 1 < e.size(); ++i) ordered = ordered && e.offsets[i].begin >= e.offsets[i - 1].begin;
    CHECK(ordered);
  }
}

// The fixture's vocabulary and merges, read here independently of the library.
struct ReferenceBpe {
  std::map<std::string, std::int64_t> vocab;
  std::map<std::pair<std::string, std::string>, std::int64_t> ranks;

  ReferenceBpe() {
    std::ifstream vocab_in(tokenizer_fixture("bpe") / "vocab.json");
    nlohmann::json const doc = nlohmann::json::parse(vocab_in);
    for (auto const& [token, id] : doc.items()) vocab[token] = id.get<std::int64_t>();
    std::ifstream merges_in(tokenizer_fixture("bpe") / "merges.txt");
    std::string line;
    std::int64_t rank = 0;
    while (std::getline(merges_in, line)) {
      if (line.starts_with("#version") || line.empty()) continue;
      auto const space = line.find(' ');
      ranks[{line.substr(0, space), line.substr(space + 1)}] = rank++;
    }
  }

  // BPE of one pre-token given as byte symbols (UTF-8 strings): merge the pair of lowest rank, the
  // leftmost on ties, until none is left; quadratic, and plainly right.
  std::vector<std::string> merge(std::vector<std::string> symbols) const {
    while (true) {
      std::int64_t best = std::numeric_limits<std::int64_t>::max();
      std::size_t at = 0;
      for (std::size_t k = 0; k + 1 < symbols.size(); ++k) {
        auto it = ranks.find({symbols[k], symbols[k + 1]});
        if (it != ranks.end() && it->second < best) {
          best = it->second;
          at = k;
        }
      }
      if (best == std::numeric_limits<std::int64_t>::max()) return symbols;
      symbols[at] += symbols[at + 1];
      symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    }
  }
};

// GPT-2's byte -> character table (bytes_to_unicode), as UTF-8 strings.
std::vector<std::string> byte_symbols() {
  std::vector<std::string> out(256);
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    bool const printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    out[static_cast<std::size_t>(b)] =
        tok::encode_utf8(std::u32string(1, printable ? static_cast<char32_t>(b) : next++));
  }
  return out;
}

}  // namespace

TEST_CASE("BPE: a 100,000-character word tokenizes in well under a second") {
  auto const t = flashdeberta::load_tokenizer(tokenizer_fixture("bpe"));
  check_long_inputs(t, "bpe");
}

#if defined(FLASHDEBERTA_WITH_SENTENCEPIECE)
TEST_CASE("SentencePiece: a 100,000-character word tokenizes in well under a second") {
  auto const t = flashdeberta::load_tokenizer(tokenizer_fixture("spm"));
  check_long_inputs(t, "spm");
  // With do_lower_case and split_by_punct (spm_lower_punct/ holds the configs, spm/ the model).
  flashdeberta::test::TempDir const dir;
  dir.copy_from(tokenizer_fixture("spm_lower_punct"));
  std::filesystem::copy_file(tokenizer_fixture("spm") / "spm.model", dir.path() / "spm.model");
  check_long_inputs(flashdeberta::load_tokenizer(dir.path()), "spm, lower-cased, split by punctuation");
}
#endif

TEST_CASE("BPE: merges equal a plain reference BPE on random words, cached or not") {
  auto const t = flashdeberta::load_tokenizer(tokenizer_fixture("bpe"));
  ReferenceBpe const reference;
  std::vector<std::string> const symbols = byte_symbols();
  // Words from letters the fixture's merges use a lot, so that long merge chains occur; lengths up to
  // 600 bytes cover both sides of the cache's 256-byte limit.
  std::u32string const alphabet = U"aehilnorstél";
  int checked = 0;
  for (int round = 0; round < 2; ++round) {  // the second round hits the cache
    std::mt19937 words(11);
    for (int w = 0; w < 300; ++w) {
      std::size_t const length = 1 + words() % (w < 250 ? 40 : 600);
      std::u32string chars = w % 2 ? U" " : U"";  // a leading space stays in the pre-token ("Ġ")
      while (chars.size() < length) chars += alphabet[words() % alphabet.size()];
      std::string const word = tok::encode_utf8(chars);
      std::vector<std::string> start;
      for (unsigned char byte : word) start.push_back(symbols[byte]);
      std::vector<std::string> const want = reference.merge(start);
      tok::TokenList const got = t.tokenize(word);
      std::vector<std::int64_t> want_ids;
      for (auto const& s : want) want_ids.push_back(reference.vocab.at(s));
      CHECK_MESSAGE(got.tokens == want, "word '" << word << "'");
      CHECK(got.ids == want_ids);
      ++checked;
    }
  }
  MESSAGE(checked << " words checked against the reference BPE");
}

TEST_CASE("threads sharing one tokenizer get the single-threaded results") {
  std::vector<std::string> texts;
  std::mt19937 rng(3);
  std::u32string const alphabet = U"aehilnorst éü,.!漢";
  for (int i = 0; i < 200; ++i) {
    std::u32string chars;
    std::size_t const length = 1 + rng() % 300;
    while (chars.size() < length) chars += alphabet[rng() % alphabet.size()];
    texts.push_back(tok::encode_utf8(chars));
  }
  std::vector<std::string> names{"bpe"};
#if defined(FLASHDEBERTA_WITH_SENTENCEPIECE)
  names.push_back("spm");
#endif
  for (auto const& name : names) {
    auto const t = flashdeberta::load_tokenizer(tokenizer_fixture(name));
    std::vector<std::vector<std::int64_t>> want;
    for (auto const& text : texts) want.push_back(t.encode(text).input_ids);
    constexpr int kThreads = 4;
    std::vector<int> mismatches(kThreads, 0);
    std::vector<std::thread> threads;
    for (int k = 0; k < kThreads; ++k) {
      threads.emplace_back([&, k] {
        for (int pass = 0; pass < 5; ++pass) {
          for (std::size_t i = 0; i < texts.size(); ++i) {
            std::size_t const j =
                (i * 7 + static_cast<std::size_t>(k) * 13 + static_cast<std::size_t>(pass)) % texts.size();
            if (t.encode(texts[j]).input_ids != want[j]) ++mismatches[static_cast<std::size_t>(k)];
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int k = 0; k < kThreads; ++k)
      CHECK_MESSAGE(mismatches[static_cast<std::size_t>(k)] == 0, name << " thread " << k);
  }
}
