// DeBERTa v2/v3's tokenizer model: SentencePiece Unigram from spm.model, through libsentencepiece
// (target flashdeberta::tokenizers; deberta-spec.md 8.1).
//
// Per stretch of text between added tokens: optional lower-casing (do_lower_case, str.lower() per
// character), optional split_by_punct (each punctuation character and each run between them is encoded
// on its own, with its own "▁" prefix), then SentencePiece with the model's own normalizer, which for
// DeBERTa is NFKC plus whitespace folding: that is the pipeline of DeBERTa's training and of
// transformers 4.x. (transformers 5.x leaves the NFKC map out; see the README.)
//
// Offsets: SentencePiece reports each piece's byte span in the text it was given (its normalizer keeps
// the alignment); they are mapped back through lower-casing and splitting to code points of the input.
// HF's convention is followed: a piece starting with "▁" for a space covers that one space.
#pragma once

#include <sentencepiece_processor.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/tokenizer/tokenizer_base.hpp"
#include "flashdeberta/tokenizer/unicode.hpp"

namespace flashdeberta::tokenizer {

struct SentencePieceOptions {
  bool do_lower_case = false;
  bool split_by_punct = false;
};

class SentencePieceModel final : public TokenizerModel {
 public:
  static std::shared_ptr<SentencePieceModel> load(std::filesystem::path const& model_file,
                                                  SentencePieceOptions options = {}) {
    auto m = std::make_shared<SentencePieceModel>();
    m->options_ = options;
    std::error_code ec;
    FLASHDEBERTA_REQUIRE(std::filesystem::is_regular_file(model_file, ec),
                         model_file.string() << ": cannot read the SentencePiece model (no such file)");
    std::string const bytes = detail::read_text_file(model_file, "SentencePiece model");
    FLASHDEBERTA_REQUIRE(!bytes.empty(), model_file.string() << ": the SentencePiece model file is empty");
    auto const status = m->sp_.LoadFromSerializedProto(bytes);
    FLASHDEBERTA_REQUIRE(status.ok(), model_file.string()
                                          << ": not a valid SentencePiece model (" << status.ToString() << ")");
    FLASHDEBERTA_REQUIRE(m->sp_.GetPieceSize() > 0, model_file.string() << ": the SentencePiece model has no pieces");
    m->source_ = model_file.string();
    return m;
  }

  TokenList encode(DecodedText const& text, std::size_t begin, std::size_t end) const override {
    // The text the model sees, and for each of its code points the input code point it came from.
    std::u32string work;
    std::vector<std::size_t> origin;
    for (std::size_t i = begin; i < end; ++i) {
      if (options_.do_lower_case) {
        append_lowercase(work, text.chars[i]);
      } else {
        work += text.chars[i];
      }
      origin.resize(work.size(), i);
    }
    TokenList out;
    if (!options_.split_by_punct) {
      encode_range(work, origin, 0, work.size(), end, out);
      return out;
    }
    std::size_t run = 0;
    for (std::size_t i = 0; i < work.size(); ++i) {
      if (!is_punctuation(work[i])) continue;
      if (run < i) encode_range(work, origin, run, i, end, out);
      encode_range(work, origin, i, i + 1, end, out);
      run = i + 1;
    }
    if (run < work.size()) encode_range(work, origin, run, work.size(), end, out);
    return out;
  }

  std::optional<std::int64_t> token_to_id(std::string_view token) const override {
    int const id = sp_.PieceToId(token);
    if (id == sp_.unk_id() && token != sp_.IdToPiece(id)) return std::nullopt;
    return id;
  }
  std::optional<std::string> id_to_token(std::int64_t id) const override {
    if (id < 0 || id >= sp_.GetPieceSize()) return std::nullopt;
    return sp_.IdToPiece(static_cast<int>(id));
  }
  std::size_t vocab_size() const override { return static_cast<std::size_t>(sp_.GetPieceSize()); }
  char const* kind() const override { return "sentencepiece"; }

  // HF's Metaspace decoder: "▁" becomes a space and the first token loses its leading space.
  std::string decode(std::vector<std::string> const& tokens, std::vector<bool> const&) const override {
    std::string out;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string token;
      std::string_view const t = tokens[i];
      for (std::size_t k = 0; k < t.size();) {
        if (t.substr(k, 3) == "\xE2\x96\x81") {
          token += ' ';
          k += 3;
        } else {
          token += t[k++];
        }
      }
      if (i == 0 && !token.empty() && token.front() == ' ') token.erase(0, 1);
      out += token;
    }
    return out;
  }

  sentencepiece::SentencePieceProcessor const& processor() const { return sp_; }

 private:
  // Encodes work[first, last) and appends its pieces; `end` is the input's end, for empty spans there.
  void encode_range(std::u32string const& work, std::vector<std::size_t> const& origin, std::size_t first,
                    std::size_t last, std::size_t end, TokenList& out) const {
    std::string utf8;
    std::vector<std::size_t> byte_to_char;  // byte offset in utf8 -> index into work
    for (std::size_t i = first; i < last; ++i) {
      append_utf8(utf8, work[i]);
      byte_to_char.resize(utf8.size(), i);
    }
    // Input code point where the piece starting at `byte` starts, and one past the input code point
    // holding the byte before `byte` (so a lower-cased character of two code points maps back to one).
    auto const begin_of = [&](std::size_t byte) -> std::int64_t {
      if (byte < utf8.size()) return static_cast<std::int64_t>(origin[byte_to_char[byte]]);
      return static_cast<std::int64_t>(last > first ? origin[last - 1] + 1 : end);
    };
    auto const end_of = [&](std::size_t byte) -> std::int64_t {
      if (byte == 0) return begin_of(0);
      return static_cast<std::int64_t>(origin[byte_to_char[std::min(byte, utf8.size()) - 1]] + 1);
    };
    auto const result = sp_.EncodeAsImmutableProto(utf8);
    for (auto const& piece : result.pieces()) {
      out.push_back(piece.id(), piece.piece(), Span{begin_of(piece.begin()), end_of(piece.end())});
    }
  }

  sentencepiece::SentencePieceProcessor sp_;
  SentencePieceOptions options_;
  std::string source_;
};

}  // namespace flashdeberta::tokenizer
