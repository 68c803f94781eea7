// Pair truncation against transformers 5.17 (tokenizers 0.23.2) on the wide grid of
// tests/fixtures/make_truncation_grid.py: every strategy, 0-40 tokens in each text, budgets 0-64, for the
// v2/v3 SentencePiece tokenizer and the v1 BPE one (tests/fixtures/tokenizers/{spm,bpe}/truncation_grid
// .safetensors). Each grid text is la one-token words, so each token is a pre-token of its own.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixture_cases.hpp"
#include "flashdeberta/io/safetensors.hpp"
#include "flashdeberta/tokenizer/encoding.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"

using flashdeberta::test::tokenizer_fixture;
namespace tok = flashdeberta::tokenizer;

namespace {

constexpr std::int64_t kStrategies = 3;
constexpr std::int64_t kMaxTokens = 40;
constexpr std::int64_t kMaxBudget = 64;

tok::TokenList one_token_words(std::int64_t n) {
  tok::TokenList list;
  for (std::int64_t i = 0; i < n; ++i) list.push_back(i, "a", {}, tok::PreTokenPosition::kFirst);
  return list;
}

// What truncate_tokens keeps of la + lb tokens for the grid's cell; {-1, -1} where it refuses. The grid's
// budget is HF's max_length minus HF's own special tokens for a pair (`hf_specials`); we build our
// template ([CLS] A [SEP] B [SEP], 3 special tokens for every variant) with the same budget, as the
// README's "v1 pairs" paragraph says. An empty second text is no pair in HF (tokenizer(text, "") encodes
// text alone), so lb = 0 is a single sequence at HF's max_length.
std::vector<std::int64_t> ours(tok::Truncation strategy, std::int64_t la, std::int64_t lb, std::int64_t budget,
                               std::size_t hf_specials) {
  tok::TokenList a = one_token_words(la);
  tok::TokenList b = one_token_words(lb);
  tok::EncodeOptions o;
  o.truncation = strategy;
  bool const pair = lb > 0;
  o.max_length = static_cast<std::size_t>(budget) + (pair ? tok::special_token_count(true, true) : hf_specials);
  try {
    tok::truncate_tokens(a, pair ? &b : nullptr, o, hf_specials);
  } catch (flashdeberta::Error const&) {
    return {-1, -1};
  }
  return {static_cast<std::int64_t>(a.size()), pair ? static_cast<std::int64_t>(b.size()) : 0};
}

void check_grid(std::string const& name, std::size_t hf_specials) {
  auto const path = tokenizer_fixture(name) / "truncation_grid.safetensors";
  REQUIRE_MESSAGE(std::filesystem::exists(path), path.string()
                                                     << " is missing (tests/fixtures/make_truncation_grid.py)");
  auto const file = flashdeberta::SafetensorsFile::open(path);
  auto const& meta = file.metadata();
  REQUIRE(meta.count("special_tokens") == 1);
  REQUIRE(meta.count("strategies") == 1);
  CHECK(std::stoul(meta.at("special_tokens")) == hf_specials);
  auto const strategies = nlohmann::json::parse(meta.at("strategies")).get<std::vector<std::string>>();
  REQUIRE(strategies.size() == kStrategies);
  flashdeberta::TensorInfo const& kept = file.info("kept");
  REQUIRE(kept.dtype == flashdeberta::DType::kI8);
  REQUIRE(kept.shape == std::vector<std::int64_t>{kStrategies, kMaxTokens + 1, kMaxTokens + 1, kMaxBudget + 1, 2});
  auto const* cells = reinterpret_cast<std::int8_t const*>(kept.bytes.data());

  std::int64_t checked = 0;
  std::int64_t wrong = 0;
  std::int64_t refusals = 0;
  for (std::int64_t s = 0; s < kStrategies; ++s) {
    tok::Truncation const strategy = tok::parse_truncation(strategies[static_cast<std::size_t>(s)]);
    for (std::int64_t la = 0; la <= kMaxTokens; ++la) {
      for (std::int64_t lb = 0; lb <= kMaxTokens; ++lb) {
        for (std::int64_t budget = 0; budget <= kMaxBudget; ++budget) {
          std::int8_t const* cell =
              cells + 2 * (((s * (kMaxTokens + 1) + la) * (kMaxTokens + 1) + lb) * (kMaxBudget + 1) + budget);
          std::vector<std::int64_t> const want{cell[0], cell[1]};
          std::vector<std::int64_t> const got = ours(strategy, la, lb, budget, hf_specials);
          ++checked;
          refusals += want[0] < 0;
          if (got != want && ++wrong <= 10) {
            FAIL_CHECK(name << ": " << strategies[static_cast<std::size_t>(s)] << " of " << la << " + " << lb
                            << " tokens to budget " << budget << ": HF keeps " << want[0] << " + " << want[1]
                            << ", we keep " << got[0] << " + " << got[1]);
          }
        }
      }
    }
  }
  CHECK(wrong == 0);
  MESSAGE(name << ": " << checked << " cells checked (" << refusals << " HF refusals), " << wrong << " differ");
}

// The grid's texts_kept: pairs of texts whose words split into several tokens (and hold [MASK]), through the
// whole tokenizer, so that HF's early stop of tokenization at whole pre-tokens decides the split. Tokens of A
// and B are counted from our template's token types: [CLS] A [SEP] are type 0, B [SEP] type 1.
void check_texts(std::string const& name, std::size_t hf_specials) {
  auto const file = flashdeberta::SafetensorsFile::open(tokenizer_fixture(name) / "truncation_grid.safetensors");
  auto const texts = nlohmann::json::parse(file.metadata().at("texts")).get<std::vector<std::string>>();
  auto const strategies = nlohmann::json::parse(file.metadata().at("strategies")).get<std::vector<std::string>>();
  auto const n = static_cast<std::int64_t>(texts.size());
  flashdeberta::TensorInfo const& kept = file.info("texts_kept");
  REQUIRE(kept.shape == std::vector<std::int64_t>{kStrategies, n, n, kMaxBudget + 1, 2});
  auto const* cells = reinterpret_cast<std::int8_t const*>(kept.bytes.data());
  auto const tokenizer = flashdeberta::load_tokenizer(tokenizer_fixture(name));
  std::int64_t checked = 0;
  std::int64_t wrong = 0;
  for (std::int64_t s = 0; s < kStrategies; ++s) {
    for (std::int64_t la = 0; la < n; ++la) {
      for (std::int64_t lb = 0; lb < n; ++lb) {
        for (std::int64_t budget = 0; budget <= kMaxBudget; ++budget) {
          std::int8_t const* cell = cells + 2 * (((s * n + la) * n + lb) * (kMaxBudget + 1) + budget);
          tok::EncodeOptions o;
          o.truncation = tok::parse_truncation(strategies[static_cast<std::size_t>(s)]);
          o.max_length = static_cast<std::size_t>(budget) + tok::special_token_count(true, true);
          std::vector<std::int64_t> got{-1, -1};
          try {
            auto const e =
                tokenizer.encode(texts[static_cast<std::size_t>(la)], texts[static_cast<std::size_t>(lb)], o);
            std::int64_t first = 0;
            for (std::int64_t type : e.token_type_ids) first += type == 0;
            got = {first - 2, static_cast<std::int64_t>(e.token_type_ids.size()) - first - 1};
          } catch (flashdeberta::Error const&) {
          }
          std::vector<std::int64_t> const want{cell[0], cell[1]};
          ++checked;
          if (got != want && ++wrong <= 10) {
            FAIL_CHECK(name << ": " << strategies[static_cast<std::size_t>(s)] << " of texts " << la << " + " << lb
                            << " to budget " << budget << ": HF keeps " << want[0] << " + " << want[1] << ", we keep "
                            << got[0] << " + " << got[1]);
          }
        }
      }
    }
  }
  CHECK(wrong == 0);
  MESSAGE(name << ": " << checked << " text pairs checked (hf specials " << hf_specials << "), " << wrong << " differ");
}

}  // namespace

TEST_CASE("pair truncation matches transformers 5.17 on pairs of texts of multi-token words") {
#if defined(FLASHDEBERTA_WITH_SENTENCEPIECE)
  check_texts("spm", 3);
#endif
  check_texts("bpe", 4);
}

TEST_CASE("pair truncation matches transformers 5.17 on the 41 x 41 x 65 grid, SentencePiece (v2/v3)") {
  check_grid("spm", 3);
}

TEST_CASE("pair truncation matches transformers 5.17 on the 41 x 41 x 65 grid, BPE (v1, HF's 4-token template)") {
  check_grid("bpe", 4);
}

TEST_CASE("longest_first counts whole pre-tokens where HF stops tokenizing early") {
  // HF's max_length 5 (budget 1 + 4): A's pre-tokens of 2, 2 and 3 tokens stop at 7 tokens, B's five
  // one-token words at 5, so A is longer and keeps the odd token; with A as seven one-token words both
  // stop at 5, tie, and the odd token goes to B (the grid's rule).
  auto const words = [](std::vector<std::size_t> const& sizes) {
    tok::TokenList list;
    for (std::size_t w : sizes) {
      for (std::size_t k = 0; k < w; ++k) {
        list.push_back(0, "t", {}, k == 0 ? tok::PreTokenPosition::kFirst : tok::PreTokenPosition::kInside);
      }
    }
    return list;
  };
  tok::EncodeOptions o;
  o.max_length = 4;  // budget 1 with our 3 special tokens
  tok::TokenList a = words({2, 2, 3});
  tok::TokenList b = words({1, 1, 1, 1, 1});
  CHECK(tok::hf_tokenized_length(a, 5) == 7);
  CHECK(tok::hf_tokenized_length(b, 5) == 5);
  tok::truncate_tokens(a, &b, o, 4);
  CHECK(a.size() == 1);
  CHECK(b.size() == 0);
  tok::TokenList a1 = words({1, 1, 1, 1, 1, 1, 1});
  tok::TokenList b1 = words({1, 1, 1, 1, 1});
  tok::truncate_tokens(a1, &b1, o, 4);
  CHECK(a1.size() == 0);
  CHECK(b1.size() == 1);
  // An added token counts but does not stop tokenization; the pre-token after it does.
  tok::TokenList c = words({4});
  c.push_back(0, "[MASK]", {}, tok::PreTokenPosition::kAddedToken);
  c.append(words({2, 1}));
  CHECK(tok::hf_tokenized_length(c, 5) == 7);
  CHECK(tok::hf_tokenized_length(c, 8) == 8);
  CHECK(tok::hf_tokenized_length(c, 100) == 8);
}

TEST_CASE("truncation on the left keeps the last tokens and counts HF's early stop from the end") {
  auto const numbered = [](std::vector<std::size_t> const& sizes, std::int64_t first_id) {
    tok::TokenList list;
    std::int64_t id = first_id;
    for (std::size_t w : sizes) {
      for (std::size_t k = 0; k < w; ++k)
        list.push_back(id++, "t", {}, k == 0 ? tok::PreTokenPosition::kFirst : tok::PreTokenPosition::kInside);
    }
    return list;
  };
  tok::EncodeOptions o;
  o.max_length = 5;  // budget 3 for one text with its 2 special tokens
  o.side = tok::TruncationSide::kLeft;
  tok::TokenList a = numbered({1, 1, 1, 1, 1}, 10);
  tok::truncate_tokens(a, nullptr, o);
  CHECK(a.ids == std::vector<std::int64_t>{12, 13, 14});
  // From the end, A's pre-tokens of 3, 2 and 2 tokens stop at 7 for HF's max_length 5; from the start the
  // same list stops at 3 + 2 = 5.
  tok::TokenList b = numbered({3, 2, 2}, 0);
  CHECK(tok::hf_tokenized_length(b, 5, tok::TruncationSide::kLeft) == 7);
  CHECK(tok::hf_tokenized_length(b, 5) == 5);
  CHECK(tok::hf_tokenized_length(b, 2, tok::TruncationSide::kLeft) == 2);
  // A pair into max_length 8 (budget 5): both longer than it, so a tie; 2 for the first, 3 for the second,
  // each keeping its last tokens.
  o.max_length = 8;
  tok::TokenList p = numbered({1, 1, 1, 1, 1, 1}, 0);
  tok::TokenList q = numbered({1, 1, 1, 1, 1, 1}, 100);
  tok::truncate_tokens(p, &q, o);
  CHECK(p.ids == std::vector<std::int64_t>{4, 5});
  CHECK(q.ids == std::vector<std::int64_t>{103, 104, 105});
}
