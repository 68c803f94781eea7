// The pre-tokenizer of a tokenizer.json with a Unigram model: it cuts a normalized text into the pieces
// ("pre-tokens") the model then segments one by one. DeBERTa v2/v3 files carry
//   Sequence[Punctuation(Isolated) (split_by_punct), Metaspace("▁", prepend_scheme, split)].
// Supported: Sequence, Metaspace, Punctuation (every behavior). ByteLevel belongs to the BPE model
// (tokenizer_json.hpp); anything else is refused when the file is read.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/tokenizer/normalized_text.hpp"
#include "flashdeberta/tokenizer/tokenizer_json_reader.hpp"
#include "flashdeberta/tokenizer/unicode.hpp"

namespace flashdeberta::tokenizer {

// Metaspace's prepend_scheme: when a "▁" goes in front of a pre-token that does not start with one.
enum class PrependScheme { kAlways, kFirst, kNever };

class PreTokenizer {
 public:
  static constexpr std::string_view kSupported = "Sequence, Metaspace, Punctuation";

  // From the file's "pre_tokenizer" (null: the whole text is one pre-token).
  static PreTokenizer parse(detail::JsonNode const& node) {
    PreTokenizer p;
    if (!node.value.is_null()) p.add(node);
    return p;
  }

  // Whether every space starts a new pre-token (a Metaspace step that splits), so that no pre-token
  // reaches across a space of the normalized text.
  bool splits_at_spaces() const {
    for (Step const& s : steps_) {
      if (s.kind == Kind::kMetaspace && s.split) return true;
    }
    return false;
  }

  // The pre-tokens of `text`, empty ones dropped.
  std::vector<NormalizedText> apply(NormalizedText const& text) const {
    std::vector<NormalizedText> splits;
    if (!text.empty()) splits.push_back(text);
    for (Step const& s : steps_) {
      std::vector<NormalizedText> next;
      for (NormalizedText& split : splits) {
        std::vector<NormalizedText> pieces =
            s.kind == Kind::kMetaspace ? metaspace(s, std::move(split)) : split_text(split, is_punctuation, s.behavior);
        for (NormalizedText& piece : pieces) {
          if (!piece.empty()) next.push_back(std::move(piece));
        }
      }
      splits = std::move(next);
    }
    return splits;
  }

 private:
  enum class Kind { kMetaspace, kPunctuation };

  struct Step {
    Kind kind = Kind::kMetaspace;
    char32_t replacement = U'\u2581';
    PrependScheme prepend = PrependScheme::kAlways;
    bool split = true;
    SplitBehavior behavior = SplitBehavior::kIsolated;
  };

  void add(detail::JsonNode const& node) {
    std::string const& type = node.type();
    if (type == "Sequence") {
      detail::JsonNode const list = node.at("pretokenizers");
      list.require_array();
      for (std::size_t i = 0; i < list.value.size(); ++i) add(list.element(i));
    } else if (type == "Metaspace") {
      steps_.push_back(parse_metaspace(node));
    } else if (type == "Punctuation") {
      Step s;
      s.kind = Kind::kPunctuation;
      std::string const behavior = node.get_string("behavior", "Isolated");
      s.behavior = parse_behavior(behavior, node);
      steps_.push_back(s);
    } else {
      detail::refuse_json_value(node.file, node.describe("type"), type, kSupported);
    }
  }

  static SplitBehavior parse_behavior(std::string const& name, detail::JsonNode const& node) {
    if (name == "Removed") return SplitBehavior::kRemoved;
    if (name == "Isolated") return SplitBehavior::kIsolated;
    if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
    if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
    if (name == "Contiguous") return SplitBehavior::kContiguous;
    detail::refuse_json_value(node.file, node.describe("behavior"), name,
                              "Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
  }

  static Step parse_metaspace(detail::JsonNode const& node) {
    Step s;
    s.kind = Kind::kMetaspace;
    std::string const& replacement = node.at("replacement").as_string();
    DecodedText const r = decode_utf8(replacement, node.file + ": " + node.describe("replacement"));
    FLASHDEBERTA_REQUIRE(r.size() == 1, node.file << ": " << node.describe("replacement")
                                                  << " must be one character, found \"" << replacement << "\"");
    s.replacement = r.chars[0];
    std::string const scheme = node.get_string("prepend_scheme", "always");
    if (scheme == "always") {
      s.prepend = PrependScheme::kAlways;
    } else if (scheme == "first") {
      s.prepend = PrependScheme::kFirst;
    } else if (scheme == "never") {
      s.prepend = PrependScheme::kNever;
    } else {
      detail::refuse_json_value(node.file, node.describe("prepend_scheme"), scheme, "always, first, never");
    }
    // Files from before prepend_scheme: add_prefix_space false means "never" (tokenizers refuses a mismatch).
    if (io::Json const* legacy = node.find("add_prefix_space");
        legacy != nullptr && !node.child(*legacy, "add_prefix_space").as_bool()) {
      FLASHDEBERTA_REQUIRE(s.prepend == PrependScheme::kNever,
                           node.file << ": " << node.field
                                     << ": add_prefix_space false does not match prepend_scheme \"" << scheme << "\"");
      s.prepend = PrependScheme::kNever;
    }
    s.split = node.get_bool("split", true);
    return s;
  }

  // tokenizers' Metaspace::pre_tokenize: spaces become the replacement, a replacement goes in front as the
  // scheme says (kFirst: only for a pre-token at the very start of the input), then a cut before each
  // replacement (SplitDelimiterBehavior::MergedWithNext).
  static std::vector<NormalizedText> metaspace(Step const& s, NormalizedText text) {
    std::u32string const rep(1, s.replacement);
    text.replace_char(U' ', rep);
    bool const starts = !text.empty() && text.chars().front() == s.replacement;
    if (!starts && (s.prepend == PrependScheme::kAlways || (s.prepend == PrependScheme::kFirst && text.origin() == 0)))
      text.prepend(s.replacement);
    if (!s.split) return {std::move(text)};
    char32_t const r = s.replacement;
    return split_text(
        text, [r](char32_t c) { return c == r; }, SplitBehavior::kMergedWithNext);
  }

  std::vector<Step> steps_;
};

}  // namespace flashdeberta::tokenizer
