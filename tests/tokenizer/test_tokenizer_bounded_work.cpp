// Work bounded by the text's tokens, not its length: libsentencepiece gets the text in stretches cut where
// its result is provably the same (sentencepiece_chunks.hpp), and EncodeOptions::token_limit stops a
// tokenizer as soon as a text is sure to exceed it.
//
// The cuts are checked by encoding random texts with stretches of 1 to 7 code points (a cut wherever one
// is allowed) and with no cut at all: ids, offsets and pre-token positions must agree everywhere. The
// alphabet mixes what the cuts must respect: runs of spaces and other whitespace, characters the fixture's
// model lacks (CJK, private use, emoji: each one [UNK] node, and a run of them one merged [UNK]), combining
// marks that NFKC composes with the letter before them, Hangul jamo it composes with each other, and
// compatibility characters it rewrites (fullwidth letters, ligatures, U+00A8 which becomes a space and a mark).
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "fixture_cases.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"
#include "tokenizer_test_util.hpp"

using flashdeberta::test::kSlowdown;
using flashdeberta::test::tokenizer_fixture;
namespace tok = flashdeberta::tokenizer;

namespace {

constexpr std::size_t kNoLimit = std::numeric_limits<std::size_t>::max();

// Whether `got` is `want`, or another segmentation of the same text with the same score: where two
// segmentations tie, the library picks by the rounding of float sums that include everything before the
// word, so a cut may pick the other one (sentencepiece_chunks.hpp). The generator below makes runs of
// letters rarely, but random letters still repeat ("ooo": o+oo or oo+o).
bool same_or_tie(tok::TokenList const& want, tok::TokenList const& got, sentencepiece::SentencePieceProcessor const& sp,
                 int& ties) {
  if (got.ids == want.ids && got.offsets == want.offsets && got.positions == want.positions) return true;
  auto const summary = [&](tok::TokenList const& t) {
    std::string text;
    double score = 0.0;
    std::vector<tok::Span> unknown;
    for (std::size_t i = 0; i < t.size(); ++i) {
      text += t.tokens[i];
      if (sp.IsUnknown(static_cast<int>(t.ids[i]))) {
        unknown.push_back(t.offsets[i]);
      } else {
        score += sp.GetScore(static_cast<int>(t.ids[i]));
      }
    }
    return std::tuple(text, score, unknown);
  };
  auto const [want_text, want_score, want_unknown] = summary(want);
  auto const [got_text, got_score, got_unknown] = summary(got);
  bool const tie = want_text == got_text && std::abs(want_score - got_score) < 1e-3 && want_unknown == got_unknown;
  ties += tie;
  return tie;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The tokenizer fixtures a token limit is checked on: BPE, and SentencePiece where it is built.
std::vector<std::string> token_limit_fixtures() {
  std::vector<std::string> names{"bpe"};
#if defined(FLASHDEBERTA_WITH_SENTENCEPIECE)
  names.push_back("spm");
#endif
  return names;
}

}  // namespace

#if defined(FLASHDEBERTA_WITH_SENTENCEPIECE)
TEST_CASE("SentencePiece: stretches cut for libsentencepiece give the uncut result") {
  std::filesystem::path const model = tokenizer_fixture("spm") / "spm.model";
  std::u32string const alphabet =
      U"abcdefghij hello world  \t\n\u00A0\u3000丁漢字\uE000😀\u0301\u0308e\u1100\u1161\uAC00\uFF21\uFB01\u00A8,.!?-'12";
  for (bool lower : {false, true}) {
    for (bool punct : {false, true}) {
      auto const whole = tok::SentencePieceModel::load(
          model, {.do_lower_case = lower, .split_by_punct = punct, .chunk_chars = std::size_t{1} << 40});
      std::mt19937 rng(lower * 2 + punct + 17);
      int compared = 0;
      int ties = 0;
      for (std::size_t chunk = 1; chunk <= 7; ++chunk) {
        auto const cut = tok::SentencePieceModel::load(
            model, {.do_lower_case = lower, .split_by_punct = punct, .chunk_chars = chunk});
        for (int i = 0; i < 300; ++i) {
          std::u32string chars;
          std::size_t const length = 1 + rng() % 60;
          // Runs of a character the model lacks or of whitespace now and then (long [UNK] runs and gaps), not
          // of letters: their segmentations tie, and ties are where a cut may differ (sentencepiece_chunks.hpp).
          while (chars.size() < length) {
            char32_t const c = alphabet[rng() % alphabet.size()];
            bool const may_repeat =
                c == U' ' || c == U'\u4E01' || c == U'\uE000' || c == U'\U0001F600' || c == U'\u0301' || c == U'\u0308';
            chars.append(may_repeat && rng() % 3 == 0 ? 1 + rng() % 9 : 1, c);
          }
          tok::DecodedText const text = tok::decode_utf8(tok::encode_utf8(chars));
          tok::TokenList const want = whole->encode(text, 0, text.chars.size(), kNoLimit);
          tok::TokenList const got = cut->encode(text, 0, text.chars.size(), kNoLimit);
          CHECK_MESSAGE(same_or_tie(want, got, whole->processor(), ties), "chunk " << chunk << ", lower " << lower
                                                                                   << ", punct " << punct << ": '"
                                                                                   << tok::encode_utf8(chars) << "'");
          ++compared;
        }
      }
      MESSAGE(compared << " texts compared (lower " << lower << ", split_by_punct " << punct << "), " << ties
                       << " of them segmented differently with the same score");
    }
  }
}

TEST_CASE("SentencePiece: the model proto's normalizer flags, and the proto without the dummy prefix") {
  std::ifstream in(tokenizer_fixture("spm") / "spm.model", std::ios::binary);
  std::string const proto((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto const flags = tok::detail::normalizer_flags(proto);
  REQUIRE(flags.has_value());
  CHECK(flags->add_dummy_prefix);
  CHECK(flags->remove_extra_whitespaces);
  auto const rewritten = tok::detail::without_dummy_prefix(proto);
  REQUIRE(rewritten.has_value());
  auto const rewritten_flags = tok::detail::normalizer_flags(*rewritten);
  REQUIRE(rewritten_flags.has_value());
  CHECK_FALSE(rewritten_flags->add_dummy_prefix);
  CHECK(rewritten_flags->remove_extra_whitespaces);
  sentencepiece::SentencePieceProcessor plain, inside;
  REQUIRE(plain.LoadFromSerializedProto(proto).ok());
  REQUIRE(inside.LoadFromSerializedProto(*rewritten).ok());
  std::vector<std::string> with_prefix, without_prefix;
  REQUIRE(plain.Encode("hello", &with_prefix).ok());
  REQUIRE(inside.Encode("hello", &without_prefix).ok());
  REQUIRE(!with_prefix.empty());
  CHECK(with_prefix.front().starts_with("\xE2\x96\x81"));
  REQUIRE(!without_prefix.empty());
  CHECK_FALSE(without_prefix.front().starts_with("\xE2\x96\x81"));
  CHECK_FALSE(tok::detail::normalizer_flags(std::string("\x1a\x05\x18", 3)).has_value());  // truncated field
}

TEST_CASE("SentencePiece: 10^6 characters the model lacks make one [UNK] in well under the 97 s it took") {
  auto const t = flashdeberta::load_tokenizer(tokenizer_fixture("spm"));
  std::u32string chars(1'000'000, U'\u4E01');  // 丁: in no piece of the fixture's model
  auto const start = std::chrono::steady_clock::now();
  tok::Encoding const e = t.encode(tok::encode_utf8(chars));
  double const seconds = seconds_since(start);
  MESSAGE("10^6 unknown characters: " << e.size() << " tokens in " << seconds << " s");
  CHECK(seconds < 3.0 * kSlowdown);
  REQUIRE(e.size() == 4);  // [CLS] ▁ [UNK] [SEP]
  CHECK(e.offsets[2].begin == 0);
  CHECK(e.offsets[2].end == 1'000'000);
}
#endif

TEST_CASE("token_limit: a text at the limit is encoded, one over is refused, a huge one stops early") {
  for (std::string const& name : token_limit_fixtures()) {
    CAPTURE(name);
    auto const t = flashdeberta::load_tokenizer(tokenizer_fixture(name));
    std::string const text = "hello world, hello world";
    std::size_t const tokens = t.encode(text).size();  // special tokens included
    tok::EncodeOptions options;
    options.token_limit = tokens;
    CHECK(t.encode(text, options).size() == tokens);
    options.token_limit = tokens - 1;
    CHECK_THROWS_AS(t.encode(text, options), tok::TokenLimitError);
    // A pair counts both texts and three special tokens.
    std::size_t const pair_tokens = t.encode(text, text).size();
    options.token_limit = pair_tokens;
    CHECK(t.encode(text, text, options).size() == pair_tokens);
    options.token_limit = pair_tokens - 1;
    std::string const message = "more than " + std::to_string(pair_tokens - 1) + " tokens";
    CHECK_THROWS_WITH_AS(t.encode(text, text, options), doctest::Contains(message.c_str()), tok::TokenLimitError);
    // Truncation comes after the limit: max_length does not admit a longer text.
    options.max_length = 4;
    CHECK_THROWS_AS(t.encode(text, text, options), tok::TokenLimitError);

    std::string huge;
    for (int i = 0; i < 2'000'000; ++i) huge += "ab ";
    options = {};
    options.token_limit = 100;
    auto const start = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(t.encode(huge, options), tok::TokenLimitError);
    double const seconds = seconds_since(start);
    MESSAGE(name << ": 6 MB text refused at a limit of 100 tokens in " << seconds << " s");
    // Decoding and the added-token scan of 6 MB: 0.3 s on an idle 2-core VM, 0.8 s with two compilers beside it;
    // tokenizing the whole text takes several times the bound, so passing it still means an early stop.
    CHECK(seconds < 2.0 * kSlowdown);
  }
}

TEST_CASE("token_limit: one long word is refused before it is encoded, and a word within the limit is unchanged") {
  for (std::string const& name : token_limit_fixtures()) {
    CAPTURE(name);
    auto const t = flashdeberta::load_tokenizer(tokenizer_fixture(name));
    // A word within the limit: the same tokens at a limit of exactly its size, refused one below.
    std::string word;
    for (int i = 0; i < 2000; ++i) word += i % 2 == 0 ? "Hello" : "world";
    tok::Encoding const whole = t.encode(word);
    tok::EncodeOptions options;
    options.token_limit = whole.size();
    tok::Encoding const limited = t.encode(word, options);
    CHECK(limited.input_ids == whole.input_ids);
    CHECK(limited.offsets == whole.offsets);
    options.token_limit = whole.size() - 1;
    CHECK_THROWS_AS(t.encode(word, options), tok::TokenLimitError);
    CHECK_THROWS_AS(t.encode("a", word, options), tok::TokenLimitError);

    // 1.9 MB of one word: libsentencepiece held 230 bytes per piece of it (+450 MB, 6.6 s before a refusal).
    std::string huge;
    while (huge.size() < 1'900'000) huge += "Helloworld";
    options.token_limit = 512;
    auto const start = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(t.encode(huge, options), tok::TokenLimitError);
    CHECK_THROWS_AS(t.encode("a question", huge, options), tok::TokenLimitError);
    double const seconds = seconds_since(start);
    MESSAGE(name << ": a 1.9 MB word refused at a limit of 512 tokens (twice) in " << seconds << " s");
    // Decoding 1.9 MB twice is about 0.05 s; encoding the word took seconds.
    CHECK(seconds < 0.5 * kSlowdown);
  }
}
