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

// Where a token stands among HF's pre-tokens, the pieces its pre-tokenizer cuts a text into before the
// model tokenizes each on its own (GPT-2's pattern matches for v1; for v2/v3 the words Metaspace starts
// at each "▁", and each punctuation run under split_by_punct): the first token of one, a later one, or
// an added token (matched in the raw text before pre-tokenization, a piece of its own).
// Truncation needs it: see hf_tokenized_length.
enum class PreTokenPosition : std::uint8_t { kFirst, kInside, kAddedToken };

// The tokens a model made of one text, before any special token is added.
struct TokenList {
  std::vector<std::int64_t> ids;
  std::vector<std::string> tokens;
  std::vector<Span> offsets;
  std::vector<PreTokenPosition> positions;

  std::size_t size() const { return ids.size(); }
  void push_back(std::int64_t id, std::string token, Span span, PreTokenPosition position = PreTokenPosition::kFirst) {
    ids.push_back(id);
    tokens.push_back(std::move(token));
    offsets.push_back(span);
    positions.push_back(position);
  }
  void append(TokenList const& other) {
    ids.insert(ids.end(), other.ids.begin(), other.ids.end());
    tokens.insert(tokens.end(), other.tokens.begin(), other.tokens.end());
    offsets.insert(offsets.end(), other.offsets.begin(), other.offsets.end());
    positions.insert(positions.end(), other.positions.begin(), other.positions.end());
  }
  void truncate(std::size_t n) {
    if (n >= size()) return;
    ids.resize(n);
    tokens.resize(n);
    offsets.resize(n);
    positions.resize(n);
  }
  // Keeps the last n tokens (HF's truncation_side "left").
  void truncate_front(std::size_t n) {
    if (n >= size()) return;
    auto const drop = static_cast<std::ptrdiff_t>(size() - n);
    ids.erase(ids.begin(), ids.begin() + drop);
    tokens.erase(tokens.begin(), tokens.begin() + drop);
    offsets.erase(offsets.begin(), offsets.begin() + drop);
    positions.erase(positions.begin(), positions.begin() + drop);
  }
  // Keeps n tokens from the end `side` says truncation keeps.
  void keep(std::size_t n, bool from_front) { from_front ? truncate(n) : truncate_front(n); }
};

// One encoded sequence (or pair), as HF's BatchEncoding row: every vector has size() entries.
struct Encoding {
  std::vector<std::int64_t> input_ids;
  std::vector<std::int64_t> token_type_ids;
  std::vector<std::int64_t> attention_mask;
  std::vector<Span> offsets;
  std::vector<std::string> tokens;
  std::vector<std::int32_t> sequence_ids;  // 0: first text, 1: pair text, -1: special token or padding
  // Each token's place among its text's pre-tokens (HF's words: a word starts at kFirst and at kAddedToken,
  // and after an added token); kAddedToken for the special tokens and padding.
  std::vector<PreTokenPosition> positions;

  std::size_t size() const { return input_ids.size(); }
};

// Whether token t of `e` starts a word of its sequence, as HF's word_ids count words: the sequence's first
// token, the first token of a pre-token, an added token, or the token after one.
inline bool starts_word(Encoding const& e, std::size_t t) {
  if (t == 0 || e.sequence_ids[t - 1] != e.sequence_ids[t]) return true;
  if (t >= e.positions.size()) return true;  // an encoding built without positions: every token its own word
  return e.positions[t] != PreTokenPosition::kInside || e.positions[t - 1] == PreTokenPosition::kAddedToken;
}

enum class Truncation {
  kNone,          // HF's do_not_truncate: max_length only pads
  kLongestFirst,  // HF's truncation=True
  kOnlyFirst,
  kOnlySecond,
};

// Which end of a sequence truncation cuts (HF's tokenizer.truncation_side, TEI's truncation_direction).
enum class TruncationSide {
  kRight,  // keep the first tokens (HF's default)
  kLeft,   // keep the last tokens
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
  TruncationSide side = TruncationSide::kRight;
  Padding padding = Padding::kNone;
  // The most tokens the encoding may hold, special tokens included, counted before truncation: a text (or
  // pair) making more is refused with TokenLimitError, and tokenizing stops as soon as that is certain,
  // so a long text costs work and memory in proportion to the limit, not to its length.
  std::optional<std::size_t> token_limit;
};

// What EncodeOptions::token_limit throws.
class TokenLimitError : public Error {
 public:
  explicit TokenLimitError(std::size_t limit)
      : Error("the text holds more than " + std::to_string(limit) +
              " tokens with its special tokens, the token limit; tokenizing stopped there"),
        limit_(limit) {}
  std::size_t limit() const { return limit_; }

 private:
  std::size_t limit_;
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

// One entry of a post-processing template (tokenizers' TemplateProcessing): a special token, which may
// stand for several ids, or one of the two sequences; each with the token type its tokens get.
struct TemplatePiece {
  std::int32_t sequence = -1;  // 0: A, 1: B, -1: the special token below
  std::vector<std::int64_t> ids;
  std::vector<std::string> tokens;
  std::int64_t type_id = 0;
};

// A tokenizer.json's templates for one text and for a pair.
struct SequenceTemplate {
  std::vector<TemplatePiece> single;
  std::vector<TemplatePiece> pair;

  std::size_t special_tokens(bool is_pair) const {
    std::size_t n = 0;
    for (TemplatePiece const& p : is_pair ? pair : single) n += p.ids.size();
    return n;
  }
};

// The special tokens of DeBERTa's template.
struct SpecialIds {
  std::int64_t cls = 1;
  std::int64_t sep = 2;
  std::int64_t pad = 0;
  std::string cls_token = "[CLS]";
  std::string sep_token = "[SEP]";
  std::string pad_token = "[PAD]";
  // Special tokens in HF 5.x's own pair template: 3 ([CLS] A [SEP] B [SEP]) for v2/v3, 4 for v1, whose
  // 5.x template is [CLS] A [SEP] [SEP] B [SEP]. It sets HF's max_length for a pair, where HF stops
  // tokenizing; only longest_first's split depends on that (truncate_tokens).
  std::size_t hf_pair_special_tokens = 3;
  std::int64_t unk = -1;  // -1: the tokenizer has no unknown token
  std::string unk_token = "[UNK]";
  // A tokenizer.json's own template, which replaces DeBERTa's above when set (hf_pair_special_tokens then
  // equals its pair template's special tokens).
  std::optional<SequenceTemplate> sequence_template = std::nullopt;
};

inline std::size_t special_token_count(bool pair, bool add_special_tokens) {
  if (!add_special_tokens) return 0;
  return pair ? 3 : 2;
}

// The special tokens `specials`' template adds to one text or a pair.
inline std::size_t special_token_count(SpecialIds const& specials, bool pair, bool add_special_tokens) {
  if (!add_special_tokens) return 0;
  if (specials.sequence_template) return specials.sequence_template->special_tokens(pair);
  return special_token_count(pair, true);
}

// How many of `list`'s tokens HF's tokenizers (0.23) hands to truncation when truncation is on with
// `max_length`: since 0.23 it stops tokenizing a sequence early (PreTokenizedString::tokenize_with_limit),
// after the first pre-token that brings the count to max_length or more, and drops the pre-tokens after
// it. Added tokens count but never stop it. The limit is max_length itself, special tokens included.
// With TruncationSide::kLeft it stops the same way from the end (tokenizers drains the leading pre-tokens).
inline std::size_t hf_tokenized_length(TokenList const& list, std::size_t max_length,
                                       TruncationSide side = TruncationSide::kRight) {
  if (side == TruncationSide::kLeft) {
    std::size_t count = 0;
    for (std::size_t i = list.size(); i > 0;) {
      std::size_t first = i - 1;  // the pre-token ending at i starts at its kFirst (or added) token
      bool const added = first < list.positions.size() && list.positions[first] == PreTokenPosition::kAddedToken;
      while (!added && first > 0 && first < list.positions.size() && list.positions[first] == PreTokenPosition::kInside)
        --first;
      i = first;
      count = list.size() - first;
      if (!added && count >= max_length) break;
    }
    return count;
  }
  std::size_t count = 0;
  for (std::size_t i = 0; i < list.size();) {
    bool const added = i < list.positions.size() && list.positions[i] == PreTokenPosition::kAddedToken;
    ++i;  // the pre-token runs on to the next token that starts one
    while (!added && i < list.size() && i < list.positions.size() && list.positions[i] == PreTokenPosition::kInside)
      ++i;
    count = i;
    if (!added && count >= max_length) break;
  }
  return count;
}

// Truncates `a` (and `b`) so that they and the special tokens fit in options.max_length, as HF's
// tokenizers library (0.23, under transformers 5.17) does, and throws where it raises: the chosen
// sequence is too short to give up the tokens, or only_second without a pair. A max_length below the
// number of special tokens is refused too; HF returns inconsistent results there (README, Tokenizers).
// `hf_pair_special_tokens` is the number of special tokens in HF's own pair template (4 for v1, whose
// 5.x template is [CLS] A [SEP] [SEP] B [SEP]), which sets HF's max_length for a pair.
// `added`: the special tokens the template adds to this text or pair (special_token_count).
inline void truncate_tokens_with(TokenList& a, TokenList* b, EncodeOptions const& options, std::size_t added,
                                 std::size_t hf_pair_special_tokens) {
  if (!options.max_length || options.truncation == Truncation::kNone) return;
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
  bool const front = options.side == TruncationSide::kRight;  // the tokens kept are the first ones
  switch (options.truncation) {
    case Truncation::kLongestFirst: {
      if (b == nullptr) {
        a.keep(budget, front);
        return;
      }
      // tokenizers' truncate_encodings on the lengths it sees, which the early stop of tokenization
      // (hf_tokenized_length, at HF's max_length: our budget plus HF's own special tokens) may have
      // cut to a whole number of pre-tokens. The shorter sequence keeps its tokens if they fit in half
      // the budget, and the longer one takes the rest; otherwise the first gets half the budget rounded
      // down, the second the rest, swapped when the first is strictly longer: the odd token goes to the
      // longer sequence, and to the second on a tie. Both sequences longer than HF's max_length are cut
      // to (about) max_length first and so tie, which is why the odd token goes to the second sequence
      // there however much longer the first one is. Only the lengths change; the tokens kept are the
      // first ones either way (the early stop keeps a prefix longer than the budget), or the last ones
      // when truncating on the left.
      std::size_t const hf_max_length = budget + hf_pair_special_tokens;
      std::size_t const la = hf_tokenized_length(a, hf_max_length, options.side);
      std::size_t const lb = hf_tokenized_length(*b, hf_max_length, options.side);
      std::size_t shorter = std::min(la, lb);
      std::size_t longer = shorter > budget ? shorter : std::max(shorter, budget - shorter);
      if (shorter + longer > budget) {
        shorter = budget / 2;
        longer = budget - budget / 2;
      }
      bool const first_longer = la > lb;
      a.keep(first_longer ? longer : shorter, front);
      b->keep(first_longer ? shorter : longer, front);
      return;
    }
    case Truncation::kOnlyFirst:
    case Truncation::kOnlySecond: {
      // The early stop of tokenization changes nothing here: a sequence it cuts is longer than the
      // budget, so HF refuses with or without it.
      bool const first = options.truncation == Truncation::kOnlyFirst;
      FLASHDEBERTA_REQUIRE(first || b != nullptr,
                           "truncation error: only_second needs a pair, but a single sequence was given");
      TokenList& target = first ? a : *b;
      FLASHDEBERTA_REQUIRE(target.size() > to_remove, "truncation error: the "
                                                          << (first ? "first" : "second") << " sequence has "
                                                          << target.size() << " tokens, too few to remove the "
                                                          << to_remove << " needed to fit max_length " << max_length
                                                          << " with " << truncation_name(options.truncation));
      target.keep(target.size() - to_remove, front);
      return;
    }
    case Truncation::kNone:
      return;
  }
}

inline void truncate_tokens(TokenList& a, TokenList* b, EncodeOptions const& options,
                            std::size_t hf_pair_special_tokens = 3) {
  truncate_tokens_with(a, b, options, special_token_count(b != nullptr, options.add_special_tokens),
                       hf_pair_special_tokens);
}

// The same with the template of `specials`.
inline void truncate_tokens(TokenList& a, TokenList* b, EncodeOptions const& options, SpecialIds const& specials) {
  truncate_tokens_with(a, b, options, special_token_count(specials, b != nullptr, options.add_special_tokens),
                       specials.hf_pair_special_tokens);
}

// Adds the special tokens of DeBERTa's template around `a` (and `b`); type ids 0 / 1, mask 1. A
// tokenizer.json's template (specials.sequence_template) is followed instead where there is one.
inline Encoding build_encoding(TokenList const& a, TokenList const* b, SpecialIds const& specials,
                               bool add_special_tokens) {
  Encoding e;
  auto add = [&](std::int64_t id, std::string const& token, Span span, std::int64_t type, std::int32_t seq,
                 PreTokenPosition position) {
    e.input_ids.push_back(id);
    e.token_type_ids.push_back(type);
    e.attention_mask.push_back(1);
    e.offsets.push_back(span);
    e.tokens.push_back(token);
    e.sequence_ids.push_back(seq);
    e.positions.push_back(position);
  };
  auto add_list = [&](TokenList const& list, std::int64_t type, std::int32_t seq) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      PreTokenPosition const position = i < list.positions.size() ? list.positions[i] : PreTokenPosition::kFirst;
      add(list.ids[i], list.tokens[i], list.offsets[i], type, seq, position);
    }
  };
  if (specials.sequence_template) {
    for (TemplatePiece const& p : b ? specials.sequence_template->pair : specials.sequence_template->single) {
      if (p.sequence >= 0) {
        add_list(p.sequence == 0 ? a : *b, p.type_id, p.sequence);
      } else if (add_special_tokens) {
        for (std::size_t k = 0; k < p.ids.size(); ++k)
          add(p.ids[k], p.tokens[k], {}, p.type_id, -1, PreTokenPosition::kAddedToken);
      }
    }
    return e;
  }
  if (add_special_tokens) add(specials.cls, specials.cls_token, {}, 0, -1, PreTokenPosition::kAddedToken);
  add_list(a, 0, 0);
  if (add_special_tokens) add(specials.sep, specials.sep_token, {}, 0, -1, PreTokenPosition::kAddedToken);
  if (b != nullptr) {
    add_list(*b, 1, 1);
    if (add_special_tokens) add(specials.sep, specials.sep_token, {}, 1, -1, PreTokenPosition::kAddedToken);
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
    r.positions.resize(width, PreTokenPosition::kAddedToken);
  }
}

}  // namespace flashdeberta::tokenizer
