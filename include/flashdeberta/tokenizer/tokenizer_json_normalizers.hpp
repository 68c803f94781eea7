// The normalizer of a tokenizer.json, for the ones DeBERTa tokenizers carry:
//   transformers 5.x   Sequence[Lowercase (do_lower_case), Replace(Regex "\s{2,}|[\n\r\t]" -> " "), NFC,
//                      Strip(right)]
//   transformers 4.x   Sequence[Lowercase (do_lower_case), Strip, Precompiled (spm.model's charsmap),
//                      Replace(Regex " {2,}" -> " ")]
// Supported: Sequence, Lowercase, Strip, Replace (a String pattern, or one of the two Regex patterns above:
// a general regex engine is not part of this library), NFC, Precompiled. Anything else is refused when the
// file is read, never applied differently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/tokenizer/normalized_text.hpp"
#include "flashdeberta/tokenizer/precompiled_charsmap.hpp"
#include "flashdeberta/tokenizer/tokenizer_json_reader.hpp"
#include "flashdeberta/tokenizer/unicode.hpp"
#include "flashdeberta/tokenizer/unicode_normalization.hpp"

namespace flashdeberta::tokenizer {

class TextNormalizer {
 public:
  static constexpr std::string_view kSupported = "Sequence, Lowercase, Strip, Replace, NFC, Precompiled";
  static constexpr std::string_view kSupportedRegex = R"("\\s{2,}|[\\n\\r\\t]" and " {2,}")";

  // From the file's "normalizer" (null: no normalizer).
  static TextNormalizer parse(detail::JsonNode const& node) {
    TextNormalizer n;
    if (!node.value.is_null()) n.add(node);
    return n;
  }

  bool empty() const { return steps_.empty(); }

  // Whether a space between ASCII letters or digits comes out of every step as that one space, and those
  // characters as no whitespace (what UnigramPipelineModel's cuts rely on): no String pattern of Replace
  // holds a space or writes whitespace, and the charsmap maps neither the space nor a letter or digit to any.
  bool keeps_spaces_between_ascii_words() const {
    auto const has_space = [](std::u32string_view text) {
      for (char32_t c : text) {
        if (is_whitespace(c)) return true;
      }
      return false;
    };
    for (Step const& s : steps_) {
      // The two Regex patterns match only runs of whitespace, none of which can border a cut.
      bool const literal = s.kind == Kind::kReplace && s.pattern == Pattern::kLiteral;
      if (literal && (has_space(s.literal) || has_space(s.content))) return false;
      if (s.kind != Kind::kPrecompiled) continue;
      if (s.charsmap->transform(" ").has_value()) return false;
      for (char c = '0'; c <= 'z'; ++c) {
        auto const rep = s.charsmap->transform(std::string(1, c));
        if (rep && has_space(decode_utf8(*rep, "charsmap replacement").chars)) return false;
      }
    }
    return true;
  }

  // `at_start` / `at_end`: whether the text begins / ends the stretch being normalized (Strip acts only
  // there; a stretch normalized in pieces passes false inside it).
  void apply(NormalizedText& text, bool at_start = true, bool at_end = true) const {
    for (Step const& s : steps_) {
      switch (s.kind) {
        case Kind::kLowercase:
          text.lowercase();
          break;
        case Kind::kStrip:
          text.strip(s.left && at_start, s.right && at_end);
          break;
        case Kind::kReplace:
          text.replace(matches(s, text.chars()), s.content);
          break;
        case Kind::kNfc:
          apply_nfc(text);
          break;
        case Kind::kPrecompiled:
          s.charsmap->apply(text);
          break;
      }
    }
  }

 private:
  enum class Kind { kLowercase, kStrip, kReplace, kNfc, kPrecompiled };
  // The Regex patterns of Replace that are implemented.
  enum class Pattern { kLiteral, kWhitespaceRunsOrControl, kSpaceRuns };

  struct Step {
    Kind kind = Kind::kLowercase;
    bool left = false;
    bool right = false;
    Pattern pattern = Pattern::kLiteral;
    std::u32string literal;
    std::u32string content;
    std::shared_ptr<PrecompiledCharsmap const> charsmap;
  };

  static Step step(Kind kind) {
    Step s;
    s.kind = kind;
    return s;
  }

  void add(detail::JsonNode const& node) {
    std::string const& type = node.type();
    if (type == "Sequence") {
      detail::JsonNode const list = node.at("normalizers");
      list.require_array();
      for (std::size_t i = 0; i < list.value.size(); ++i) add(list.element(i));
    } else if (type == "Lowercase") {
      steps_.push_back(step(Kind::kLowercase));
    } else if (type == "Strip") {
      Step s = step(Kind::kStrip);
      s.left = node.get_bool("strip_left", true);
      s.right = node.get_bool("strip_right", true);
      steps_.push_back(std::move(s));
    } else if (type == "NFC") {
      steps_.push_back(step(Kind::kNfc));
    } else if (type == "Replace") {
      steps_.push_back(parse_replace(node));
    } else if (type == "Precompiled") {
      detail::JsonNode const map = node.at("precompiled_charsmap");
      auto const bytes = detail::decode_base64(map.as_string());
      FLASHDEBERTA_REQUIRE(bytes.has_value(), node.file << ": " << map.field << " is not valid base64");
      Step s = step(Kind::kPrecompiled);
      s.charsmap =
          std::make_shared<PrecompiledCharsmap const>(PrecompiledCharsmap::parse(*bytes, node.file + ": " + map.field));
      steps_.push_back(std::move(s));
    } else {
      detail::refuse_json_value(node.file, node.describe("type"), type, kSupported);
    }
  }

  static Step parse_replace(detail::JsonNode const& node) {
    Step s = step(Kind::kReplace);
    s.content = decode_utf8(node.at("content").as_string(), node.file + ": " + node.describe("content")).chars;
    detail::JsonNode const pattern = node.at("pattern");
    pattern.require_object();
    if (io::Json const* literal = pattern.find("String")) {
      s.literal = decode_utf8(pattern.child(*literal, "String").as_string(), node.file).chars;
      return s;
    }
    io::Json const* regex = pattern.find("Regex");
    FLASHDEBERTA_REQUIRE(regex != nullptr, node.file << ": " << pattern.field << " is neither {\"String\": ...} nor "
                                                     << "{\"Regex\": ...}");
    std::string const& re = pattern.child(*regex, "Regex").as_string();
    if (re == R"(\s{2,}|[\n\r\t])") {
      s.pattern = Pattern::kWhitespaceRunsOrControl;
    } else if (re == " {2,}") {
      s.pattern = Pattern::kSpaceRuns;
    } else {
      detail::refuse_json_value(node.file, pattern.describe("Regex"), re, kSupportedRegex);
    }
    return s;
  }

  // The matches of a Replace pattern, left to right, not overlapping (Oniguruma's \s: White_Space).
  static std::vector<CharRange> matches(Step const& s, std::u32string const& chars) {
    std::vector<CharRange> out;
    std::size_t const n = chars.size();
    if (s.pattern == Pattern::kLiteral) {
      if (s.literal.empty()) return out;
      for (std::size_t at = chars.find(s.literal); at != std::u32string::npos; at = chars.find(s.literal, at)) {
        out.push_back({at, at + s.literal.size()});
        at += s.literal.size();
      }
      return out;
    }
    auto const in_run = [&](char32_t c) { return s.pattern == Pattern::kSpaceRuns ? c == U' ' : is_whitespace(c); };
    for (std::size_t i = 0; i < n;) {
      std::size_t j = i;
      while (j < n && in_run(chars[j])) ++j;
      if (j - i >= 2) {  // \s{2,} (or " {2,}"), greedy
        out.push_back({i, j});
        i = j;
      } else if (s.pattern == Pattern::kWhitespaceRunsOrControl &&
                 (chars[i] == U'\n' || chars[i] == U'\r' || chars[i] == U'\t')) {
        out.push_back({i, i + 1});
        ++i;
      } else {
        ++i;
      }
    }
    return out;
  }

  std::vector<Step> steps_;
};

}  // namespace flashdeberta::tokenizer
