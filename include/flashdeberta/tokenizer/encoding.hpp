// What a tokenizer returns, and the steps shared by both tokenizer families: truncation, DeBERTa's
// special-token template and padding.
//
// The rules are those of HF's tokenizers library (what transformers 5.x runs): truncation happens on the
// model's tokens before the special tokens are added, with the length budget reduced by the number of
// special tokens, and `longest_first` splits the budget the way tokenizers' truncate_encodings does
// (not token by token like the old Python code). The template is DeBERTa's for every variant:
//   single  [CLS] A [SEP]             token types 0 ... 0
//   pair    [CLS] A [SEP] B [SEP]     token types 0 for [CLS] A [SEP], 1 for B [SEP]
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "flashdeberta/core/error.hpp"

namespace flashdeberta::tokenizer {

// A span of the input text in code points, [begin, end); {0, 0} for special and padding tokens.
struct Span {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  friend bool operator==(Span const&, Span const&) = default;
};

// The tokens a model made of one text, before any special token is added.
struct TokenList {
  std::vector<std::int64_t> ids;
  std::vector<std::string> tokens;
  std::vector<Span> offsets;

  std::size_t size() const { return ids.size(); }
  void push_back(std::int64_t id, std::string token, Span span) {
    ids.push_back(id);
    tokens.push_back(std::move(token));
    offsets.push_back(span);
  }
  void append(TokenList const& other) {
    ids.insert(ids.end(), other.ids.begin(), other.ids.end());
    tokens.insert(tokens.end(), other.tokens.begin(), other.tokens.end());
    offsets.insert(offsets.end(), other.offsets.begin(), other.offsets.end());
  }
  void truncate(std::size_t n) {
    if (n >= size()) return;
    ids.resize(n);
    tokens.resize(n);
    offsets.resize(n);
  }
};

// One encoded sequence (or pair), as HF's BatchEncoding row: every vector has size() entries.
struct Encoding {
  std::vector<std::int64_t> input_ids;
  std::vector<std::int64_t> token_type_ids;
  std::vector<std::int64_t> attention_mask;
  std::vector<Span> offsets;
  std::vector<std::string> tokens;
  std::vector<std::int32_t> sequence_ids;  // 0: first text, 1: pair text, -1: special token or padding

  std::size_t size() const { return input_ids.size(); }
};

enum class Truncation {
  kNone,          // HF's do_not_truncate: max_length only pads
  kLongestFirst,  // HF's truncation=True
  kOnlyFirst,
  kOnlySecond,
};

enum class Padding {
  kNone,
  kLongest,    // pad a batch to its longest row
  kMaxLength,  // pad every row to max_length (rows longer than it stay as they are)
};

struct EncodeOptions {
  bool add_special_tokens = true;
  std::optional<std::size_t> max_length;  // unset: no truncation, and Padding::kMaxLength is an error
  Truncation truncation = Truncation::kLongestFirst;
  Padding padding = Padding::kNone;
};

inline char const* truncation_name(Truncation t) {
  switch (t) {
    case Truncation::kNone:
      return "do_not_truncate";
    case Truncation::kLongestFirst:
      return "longest_first";
    case Truncation::kOnlyFirst:
      return "only_first";
    case Truncation::kOnlySecond:
      return "only_second";
  }
  return "?";
}

// "longest_first" | "only_first" | "only_second" | "do_not_truncate"; anything else is an error.
inline Truncation parse_truncation(std::string const& name) {
  for (Truncation t : {Truncation::kNone, Truncation::kLongestFirst, Truncation::kOnlyFirst, Truncation::kOnlySecond}) {
    if (name == truncation_name(t)) return t;
  }
  FLASHDEBERTA_FAIL("unknown truncation strategy '" << name
                                                    << "' (expected longest_first, only_first, only_second or "
                                                       "do_not_truncate)");
}

// The special tokens of DeBERTa's template.
struct SpecialIds {
  std::int64_t cls = 1;
  std::int64_t sep = 2;
  std::int64_t pad = 0;
  std::string cls_token = "[CLS]";
  std::string sep_token = "[SEP]";
  std::string pad_token = "[PAD]";
  // Special tokens in HF 5.x's own pair template: 3 ([CLS] A [SEP] B [SEP]) for v2/v3, 4 for v1, whose
  // 5.x template is [CLS] A [SEP] [SEP] B [SEP]. Only longest_first's tie-break depends on it.
  std::size_t hf_pair_special_tokens = 3;
};

inline std::size_t special_token_count(bool pair, bool add_special_tokens) {
  if (!add_special_tokens) return 0;
  return pair ? 3 : 2;
}

// Truncates `a` (and `b`) so that they and the special tokens fit in options.max_length, as HF's
// tokenizers library (0.23, under transformers 5.17) does, and throws where it raises: the chosen
// sequence is too short to give up the tokens, or only_second without a pair. A max_length below the
// number of special tokens is refused too; HF returns inconsistent results there (README, Tokenizers).
inline void truncate_tokens(TokenList& a, TokenList* b, EncodeOptions const& options,
                            std::size_t hf_pair_special_tokens = 3) {
  if (!options.max_length || options.truncation == Truncation::kNone) return;
  std::size_t const added = special_token_count(b != nullptr, options.add_special_tokens);
  std::size_t const max_length = *options.max_length;
  FLASHDEBERTA_REQUIRE(max_length >= added, "truncation error: max_length " << max_length << " is below the " << added
                                                                            << " special tokens of the "
                                                                            << (b ? "pair" : "sequence"));
  std::size_t const budget = max_length - added;
  std::size_t const total = a.size() + (b ? b->size() : 0);
  if (budget == 0) {  // nothing fits: both sequences become empty, whatever the strategy
    a.truncate(0);
    if (b) b->truncate(0);
    return;
  }
  if (total <= budget) return;
  std::size_t const to_remove = total - budget;
  switch (options.truncation) {
    case Truncation::kLongestFirst: {
      if (b == nullptr) {
        a.truncate(budget);
        return;
      }
      // The shorter sequence keeps its tokens if they fit in half the budget and the longer one takes
      // the rest; otherwise both are cut to half the budget. An odd token goes to the longer one, as in
      // tokenizers' source, except that the release under transformers 5.17 gives it to the second
      // sequence when the first is longer and the second holds at least max_length tokens, max_length
      // counted with HF's own template (fitted on the fixtures' truncation grid: 1120 cases).
      std::size_t const shorter = std::min(a.size(), b->size());
      if (shorter <= budget / 2) {
        (a.size() <= b->size() ? *b : a).truncate(budget - shorter);
      } else {
        std::size_t const hf_max_length = budget + hf_pair_special_tokens;
        bool const first_gets_odd = a.size() > b->size() && b->size() < hf_max_length;
        a.truncate(first_gets_odd ? budget - budget / 2 : budget / 2);
        b->truncate(first_gets_odd ? budget / 2 : budget - budget / 2);
      }
      return;
    }
    case Truncation::kOnlyFirst:
    case Truncation::kOnlySecond: {
      bool const first = options.truncation == Truncation::kOnlyFirst;
      FLASHDEBERTA_REQUIRE(first || b != nullptr,
                           "truncation error: only_second needs a pair, but a single sequence was given");
      TokenList& target = first ? a : *b;
      FLASHDEBERTA_REQUIRE(target.size() > to_remove, "truncation error: the "
                                                          << (first ? "first" : "second") << " sequence has "
                                                          << target.size() << " tokens, too few to remove the "
                                                          << to_remove << " needed to fit max_length " << max_length
                                                          << " with " << truncation_name(options.truncation));
      target.truncate(target.size() - to_remove);
      return;
    }
    case Truncation::kNone:
      return;
  }
}

// Adds the special tokens of DeBERTa's template around `a` (and `b`); type ids 0 / 1, mask 1.
inline Encoding build_encoding(TokenList const& a, TokenList const* b, SpecialIds const& specials,
                               bool add_special_tokens) {
  Encoding e;
  auto add = [&](std::int64_t id, std::string const& token, Span span, std::int64_t type, std::int32_t seq) {
    e.input_ids.push_back(id);
    e.token_type_ids.push_back(type);
    e.attention_mask.push_back(1);
    e.offsets.push_back(span);
    e.tokens.push_back(token);
    e.sequence_ids.push_back(seq);
  };
  auto add_list = [&](TokenList const& list, std::int64_t type, std::int32_t seq) {
    for (std::size_t i = 0; i < list.size(); ++i) add(list.ids[i], list.tokens[i], list.offsets[i], type, seq);
  };
  if (add_special_tokens) add(specials.cls, specials.cls_token, {}, 0, -1);
  add_list(a, 0, 0);
  if (add_special_tokens) add(specials.sep, specials.sep_token, {}, 0, -1);
  if (b != nullptr) {
    add_list(*b, 1, 1);
    if (add_special_tokens) add(specials.sep, specials.sep_token, {}, 1, -1);
  }
  return e;
}

// Right padding as HF does it: [PAD] id, token type 0, mask 0, offsets {0, 0}.
inline void pad_batch(std::vector<Encoding>& rows, EncodeOptions const& options, SpecialIds const& specials) {
  std::size_t width = 0;
  if (options.padding == Padding::kNone) return;
  if (options.padding == Padding::kMaxLength) {
    FLASHDEBERTA_REQUIRE(options.max_length.has_value(), "padding to max_length needs a max_length");
    width = *options.max_length;
  } else {
    for (auto const& r : rows) width = std::max(width, r.size());
  }
  for (auto& r : rows) {
    std::size_t const n = r.size();
    if (n >= width) continue;
    r.input_ids.resize(width, specials.pad);
    r.token_type_ids.resize(width, 0);
    r.attention_mask.resize(width, 0);
    r.offsets.resize(width, Span{});
    r.tokens.resize(width, specials.pad_token);
    r.sequence_ids.resize(width, -1);
  }
}

}  // namespace flashdeberta::tokenizer
