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
//
// Pieces: each word libsentencepiece segmented is segmented again as HF's tokenizers does, in double
// precision (unigram_viterbi.hpp); the library's float path scores decide ties and near-ties otherwise.
//
// Cost: linear in the text. libsentencepiece sees stretches of at most SentencePieceOptions::chunk_chars
// code points, cut where its result is provably the same (sentencepiece_chunks.hpp): its own memory
// (about 230 bytes a piece) stays a few MB, and a run of unknown characters, which it merges by copying
// the growing [UNK] piece once per character, never reaches it whole.
#pragma once

#include <sentencepiece_processor.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/tokenizer/sentencepiece_chunks.hpp"
#include "flashdeberta/tokenizer/tokenizer_base.hpp"
#include "flashdeberta/tokenizer/unicode.hpp"
#include "flashdeberta/tokenizer/unigram_viterbi.hpp"

namespace flashdeberta::tokenizer {

struct SentencePieceOptions {
  bool do_lower_case = false;
  bool split_by_punct = false;
  // The longest stretch (code points) libsentencepiece encodes at once; tests lower it to exercise the cuts.
  std::size_t chunk_chars = 4096;
};

class SentencePieceModel final : public TokenizerModel {
 public:
  static std::shared_ptr<SentencePieceModel> load(std::filesystem::path const& model_file,
                                                  SentencePieceOptions options = {}) {
    auto m = std::make_shared<SentencePieceModel>();
    m->options_ = options;
    std::string const bytes = detail::read_text_file(model_file, "SentencePiece model");
    FLASHDEBERTA_REQUIRE(!bytes.empty(), model_file.string() << ": the SentencePiece model file is empty");
    auto const status = m->sp_.LoadFromSerializedProto(bytes);
    FLASHDEBERTA_REQUIRE(status.ok(), model_file.string()
                                          << ": not a valid SentencePiece model (" << status.ToString() << ")");
    FLASHDEBERTA_REQUIRE(m->sp_.GetPieceSize() > 0, model_file.string() << ": the SentencePiece model has no pieces");
    m->source_ = model_file.string();
    m->prepare_cuts(bytes);
    m->viterbi_ = detail::UnigramViterbi::from_model(bytes, m->sp_);
    return m;
  }

  TokenList encode(DecodedText const& text, std::size_t begin, std::size_t end, std::size_t max_tokens) const override {
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
      encode_range(text, work, origin, 0, work.size(), max_tokens, out);
      return out;
    }
    std::size_t run = 0;
    for (std::size_t i = 0; i < work.size() && out.size() <= max_tokens; ++i) {
      if (!is_punctuation(work[i])) continue;
      if (run < i) encode_split(text, work, origin, run, i, false, max_tokens, out);
      encode_range(text, work, origin, i, i + 1, max_tokens, out);
      run = i + 1;
    }
    if (run < work.size() && out.size() <= max_tokens)
      encode_split(text, work, origin, run, work.size(), true, max_tokens, out);
    return out;
  }

  // Printable ASCII that is a piece character by character has no [UNK] in its lattice and passes the
  // normalizer unchanged (lower-cased at most), so every piece covers at most max_piece_chars_ of its
  // characters besides whitespace: a stretch of 1.9 MB of letters is refused before libsentencepiece holds
  // 230 bytes per piece of it. Any other character: no bound (0).
  std::size_t min_tokens(DecodedText const& text, std::size_t begin, std::size_t end) const override {
    if (max_piece_chars_ == 0) return 0;
    std::size_t chars = 0;
    for (std::size_t i = begin; i < end; ++i) {
      char32_t c = text.chars[i];
      if (c == U' ') continue;
      if (options_.do_lower_case && c >= U'A' && c <= U'Z') c += U'a' - U'A';
      if (c >= 0x80 || !ascii_pieces_[c]) return 0;
      ++chars;
    }
    return (chars + max_piece_chars_ - 1) / max_piece_chars_;
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
  // A stretch between punctuation characters under split_by_punct. HF 5.x strips whitespace only at the
  // end of the text, so whitespace that ends a stretch before a punctuation character becomes a "▁"
  // token of its own (covering the last whitespace character), and so does a stretch of whitespace
  // alone; SentencePiece (and transformers 4.x) dropped both.
  void encode_split(DecodedText const& text, std::u32string const& work, std::vector<std::size_t> const& origin,
                    std::size_t first, std::size_t last, bool at_end, std::size_t max_tokens, TokenList& out) const {
    bool const all_space = std::all_of(work.begin() + static_cast<std::ptrdiff_t>(first),
                                       work.begin() + static_cast<std::ptrdiff_t>(last), is_whitespace);
    if (!all_space) encode_range(text, work, origin, first, last, max_tokens, out);
    if (!at_end && is_whitespace(work[last - 1])) {
      int const id = sp_.PieceToId("\xE2\x96\x81");
      auto const at = static_cast<std::int64_t>(origin[last - 1]);
      out.push_back(id, sp_.IdToPiece(id), Span{at, at + 1});
    }
  }

  // Encodes work[first, last) (first < last) and appends its pieces with their input spans, stretch by
  // stretch, stopping once `out` holds more than max_tokens tokens.
  void encode_range(DecodedText const& text, std::u32string const& work, std::vector<std::size_t> const& origin,
                    std::size_t first, std::size_t last, std::size_t max_tokens, TokenList& out) const {
    std::size_t const chunk = std::max<std::size_t>(options_.chunk_chars, 1);
    auto const unknown = [this](char32_t c) { return unknown_char(c); };
    auto const cut_at = [&](std::size_t i) {
      return detail::cut_before(work, i, word_cuts_, inside_processor_ != nullptr, unknown);
    };
    std::size_t start = first;
    auto kind = detail::ChunkStart::kWordStart;
    while (start < last && out.size() <= max_tokens) {
      // The last cut within chunk code points of start, else the first one after, else the end.
      std::size_t stop = last;
      std::optional<detail::ChunkStart> next;
      if (last - start > chunk) {
        for (std::size_t i = start + chunk; i > start && !next; --i) {
          if ((next = cut_at(i))) stop = i;
        }
        for (std::size_t i = start + chunk + 1; i < last && !next; ++i) {
          if ((next = cut_at(i))) stop = i;
        }
      }
      encode_stretch(text, work, origin, start, stop, kind, out);
      start = stop;
      if (next) kind = *next;
    }
  }

  // One stretch through libsentencepiece: from a word start with the model's dummy prefix, or from inside a
  // word (after a character no piece contains) without it, an [UNK] there joining the one before it.
  void encode_stretch(DecodedText const& text, std::u32string const& work, std::vector<std::size_t> const& origin,
                      std::size_t first, std::size_t last, detail::ChunkStart kind, TokenList& out) const {
    std::string utf8;
    std::vector<std::size_t> byte_to_char;  // byte offset in utf8 -> index into work
    for (std::size_t i = first; i < last; ++i) {
      append_utf8(utf8, work[i]);
      byte_to_char.resize(utf8.size(), i);
    }
    std::size_t const lo = origin[first];  // the stretch in input code points
    std::size_t const hi = origin[last - 1] + 1;
    // Input code point where the piece starting at `byte` starts, and one past the input code point
    // holding the byte before `byte` (so a lower-cased character of two code points maps back to one).
    auto const begin_of = [&](std::size_t byte) { return byte < utf8.size() ? origin[byte_to_char[byte]] : hi; };
    auto const end_of = [&](std::size_t byte) {
      return byte == 0 ? begin_of(0) : origin[byte_to_char[std::min(byte, utf8.size()) - 1]] + 1;
    };
    bool const inside = kind == detail::ChunkStart::kInsideWord;
    auto const result = (inside ? *inside_processor_ : sp_).EncodeAsImmutableProto(utf8);
    std::vector<detail::StretchPiece> pieces;
    pieces.reserve(static_cast<std::size_t>(result.pieces_size()));
    for (auto const& piece : result.pieces())
      pieces.push_back({static_cast<int>(piece.id()), piece.piece(), piece.begin(), piece.end()});
    detail::resegment_words(viterbi_, pieces, utf8, !inside);
    bool first_piece = true;
    for (auto const& piece : pieces) {
      std::string const& token = sp_.IdToPiece(piece.id);  // "[UNK]", not the surface
      std::size_t b = begin_of(piece.begin);
      std::size_t e = std::max(b, end_of(piece.end));
      hf_offsets(text, token, lo, hi, b, e);
      auto const span = Span{static_cast<std::int64_t>(b), static_cast<std::int64_t>(e)};
      if (first_piece && inside) {
        // The library merges a run of [UNK] pieces into one: so does a run that a cut went through (its
        // span from the first piece's start, trailing marks dropped as for any piece).
        if (out.size() > 0 && sp_.IsUnknown(piece.id) && out.ids.back() == piece.id) {
          auto merged_begin = static_cast<std::size_t>(out.offsets.back().begin);
          std::size_t merged_end = std::max(merged_begin, end_of(piece.end));
          hf_offsets(text, token, lo, hi, merged_begin, merged_end);
          out.offsets.back().end = static_cast<std::int64_t>(merged_end);
        } else {
          out.push_back(piece.id, token, span, PreTokenPosition::kInside);
        }
        first_piece = false;
        continue;
      }
      // HF's Metaspace pre-tokenizer starts a word at each "▁" (and at the start of the stretch).
      bool const starts_word = first_piece || token.starts_with("\xE2\x96\x81");
      out.push_back(piece.id, token, span, starts_word ? PreTokenPosition::kFirst : PreTokenPosition::kInside);
      first_piece = false;
    }
  }

  // Which cuts this model allows (sentencepiece_chunks.hpp), from its vocabulary and normalizer spec.
  void prepare_cuts(std::string const& model_proto) {
    bool inner_space = false;
    for (int id = 0; id < sp_.GetPieceSize(); ++id) {
      std::string const& piece = sp_.IdToPiece(id);
      inner_space = inner_space || piece.find("\xE2\x96\x81", 1) != std::string::npos;
      std::u32string const chars = decode_utf8_lossy(piece);
      for (char32_t c : chars) piece_chars_.insert(c);
      max_piece_chars_ = std::max(max_piece_chars_, chars.size());
      bool const in_lattice = !sp_.IsControl(id) && !sp_.IsUnknown(id) && !sp_.IsUnused(id);
      if (in_lattice && chars.size() == 1 && chars[0] > U' ' && chars[0] < 0x7F) ascii_pieces_[chars[0]] = true;
    }
    auto const flags = detail::normalizer_flags(model_proto);
    word_cuts_ = flags && flags->add_dummy_prefix && flags->remove_extra_whitespaces && !inner_space;
    auto const inside = detail::without_dummy_prefix(model_proto);
    auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
    if (inside && processor->LoadFromSerializedProto(*inside).ok()) inside_processor_ = std::move(processor);
  }

  // A character no piece contains that the normalizer leaves as it is: libsentencepiece makes an [UNK] of
  // it wherever it stands. (A character it rewrites is never taken: U+00A8 becomes a space and a mark.)
  bool unknown_char(char32_t c) const {
    if (piece_chars_.contains(c)) return false;
    std::string utf8;
    append_utf8(utf8, c);
    auto const result = inside_processor_->EncodeAsImmutableProto(utf8);
    return result.pieces_size() == 1 && sp_.IsUnknown(static_cast<int>(result.pieces(0).id())) &&
           result.pieces(0).piece() == utf8;
  }

  static std::u32string decode_utf8_lossy(std::string const& bytes) {
    try {
      return decode_utf8(bytes, "piece").chars;
    } catch (Error const&) {
      return U"\uFFFD";
    }
  }

  // Moves SentencePiece's span [b, e) of a piece to where HF's tokenizers put it (transformers 5.x):
  //  - the "▁" a piece starts with stands for one character: the last space of the run it replaces, the
  //    space just before the piece when SentencePiece dropped it (leading spaces), or, for the "▁" added
  //    in front of the text, the first character of the text;
  //  - combining marks that NFC/NFKC composed into the character before them are not part of the span
  //    (HF aligns a composed character with its first code point).
  static void hf_offsets(DecodedText const& text, std::string const& token, std::size_t lo, std::size_t hi,
                         std::size_t& b, std::size_t& e) {
    auto const space = [&](std::size_t i) { return is_whitespace(text.chars[i]); };
    if (token.starts_with("\xE2\x96\x81")) {
      if (b < e && space(b)) {
        while (b + 1 < e && space(b + 1)) ++b;
      } else if (b > lo && space(b - 1)) {
        --b;
        e = std::max(e, b + 1);
      } else if (b == e && b < hi) {
        e = b + 1;
      }
    }
    DecodedText const chars = decode_utf8(token, "piece");
    if (!chars.chars.empty() && !is_mark(chars.chars.back())) {
      while (e > b + 1 && is_mark(text.chars[e - 1])) --e;
    }
  }

  sentencepiece::SentencePieceProcessor sp_;
  // The same model without the dummy prefix, for stretches that start inside a word; null where the
  // model proto could not be rewritten (then no cut is made inside words).
  std::unique_ptr<sentencepiece::SentencePieceProcessor> inside_processor_;
  std::unordered_set<char32_t> piece_chars_;  // every code point of every piece
  std::size_t max_piece_chars_ = 0;           // code points of the longest piece
  std::array<bool, 128> ascii_pieces_{};      // printable ASCII characters that are a piece of their own
  detail::UnigramViterbi viterbi_;            // each word's pieces as HF's tokenizers chooses them
  bool word_cuts_ = false;
  SentencePieceOptions options_;
  std::string source_;
};

}  // namespace flashdeberta::tokenizer
