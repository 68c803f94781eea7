// The Unigram segmentation of HF's tokenizers, run again over each word libsentencepiece segmented.
//
// Why: Debian's libsentencepiece (0.1.97) accumulates path scores in float, over the whole stretch it is
// given. Two segmentations of a word whose scores tie (the same pieces in another order: "1 11" and
// "11 1" of "111") or differ by less than a float step at the running total are then decided by rounding.
// HF's tokenizers (and sentencepiece >= 0.2) run the Viterbi per word in double, keeping the earliest
// start on a tie. The held-out text of models/tiny-en met two such words in 12,177 texts.
//
// So each word made only of normal pieces, whose normalized text is the input's own bytes (the usual case;
// a word the normalizer rewrote keeps libsentencepiece's pieces), is segmented again exactly as
// tokenizers' Unigram::encode_optimized does: f64 path scores `score + best_till_here`, pieces found
// shortest first from each start, a strictly better score replacing a node's best.
//
// The same Viterbi is the whole Unigram model of a tokenizer.json (tokenizer_json_unigram.hpp): from_vocab
// and encode, with unknown characters and their fusion as tokenizers has them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "flashdeberta/tokenizer/sentencepiece_chunks.hpp"

namespace flashdeberta::tokenizer::detail {

// A piece of a stretch as libsentencepiece gave it: its id, its normalized text ("▁" included) and its
// byte span [begin, end) in the stretch it was given.
struct StretchPiece {
  int id = 0;
  std::string normalized;
  std::size_t begin = 0;
  std::size_t end = 0;
};

class UnigramViterbi {
 public:
  // From the model proto (which pieces are NORMAL: ModelProto.pieces, field 1, type field 3, default
  // NORMAL = 1) and the scores and texts the processor reports for each id.
  template <class Processor>
  static UnigramViterbi from_model(std::string_view model_proto, Processor const& processor) {
    UnigramViterbi v;
    std::vector<bool> normal;
    for_each_field(model_proto, [&](std::uint64_t number, int wire, std::string_view payload) {
      if (number != 1 || wire != 2) return;
      std::uint64_t type = 1;
      for_each_field(payload, [&](std::uint64_t inner, int inner_wire, std::string_view value) {
        std::size_t at = 0;
        if (inner == 3 && inner_wire == 0) read_varint(value, at, type);
      });
      normal.push_back(type == 1);
    });
    auto const count = static_cast<int>(processor.GetPieceSize());
    if (static_cast<int>(normal.size()) != count) return v;  // unreadable proto: nothing is re-segmented
    v.texts_.reserve(static_cast<std::size_t>(count));
    for (int id = 0; id < count; ++id) v.texts_.push_back(processor.IdToPiece(id));
    v.normal_ = normal;
    v.min_score_ = std::numeric_limits<double>::infinity();
    for (int id = 0; id < count; ++id) {
      double const score = processor.GetScore(id);
      v.min_score_ = std::min(v.min_score_, score);
      if (!normal[static_cast<std::size_t>(id)]) continue;
      std::string_view const text = v.texts_[static_cast<std::size_t>(id)];
      v.pieces_.emplace(text, Entry{id, score});
      v.longest_ = std::max(v.longest_, text.size());
    }
    return v;
  }

  bool is_normal(int id) const {
    return id >= 0 && static_cast<std::size_t>(id) < normal_.size() && normal_[static_cast<std::size_t>(id)];
  }

  // From a tokenizer.json Unigram vocabulary (piece, score) in id order. Every piece takes part, as in
  // tokenizers' trie (control pieces such as "[CLS]" too); a piece listed twice keeps its last id and score.
  static UnigramViterbi from_vocab(std::vector<std::pair<std::string, double>> const& vocab) {
    UnigramViterbi v;
    v.texts_.reserve(vocab.size());
    v.normal_.assign(vocab.size(), true);
    v.min_score_ = std::numeric_limits<double>::infinity();
    for (auto const& [text, score] : vocab) v.texts_.push_back(text);
    for (std::size_t id = 0; id < vocab.size(); ++id) {
      v.min_score_ = std::min(v.min_score_, vocab[id].second);
      std::string_view const text = v.texts_[id];
      v.pieces_.insert_or_assign(text, Entry{static_cast<int>(id), vocab[id].second});
      v.longest_ = std::max(v.longest_, text.size());
    }
    return v;
  }

  // One word's normalized bytes as tokenizers' Unigram segments them, each piece as (id, length in
  // bytes); empty if its best path needs an unknown character.
  std::vector<std::pair<int, std::size_t>> segment(std::string_view word) const {
    std::vector<std::pair<int, std::size_t>> out = encode(word, -1);
    for (auto const& piece : out) {
      if (piece.first < 0) return {};
    }
    return out;
  }

  // tokenizers' Unigram::encode_optimized and tokenize: the best path of `word` (f64 path scores
  // `score + best_till_here`, pieces found shortest first from each start, a strictly better score replacing
  // a node's best), each piece as (id, length in bytes); a character no piece starts with is an unknown
  // node scored min_score - 10, and a run of unknown nodes is one piece of id `unk_id`.
  std::vector<std::pair<int, std::size_t>> encode(std::string_view word, int unk_id) const {
    struct Node {
      double score = 0.0;
      std::ptrdiff_t start = -1;
      int id = -1;
    };
    std::vector<Node> best(word.size() + 1);
    double const unknown_score = min_score_ - 10.0;  // tokenizers' kUnkPenalty
    for (std::size_t start = 0; start < word.size();) {
      double const till_here = best[start].score;
      std::size_t const char_bytes = std::min(utf8_length(word[start]), word.size() - start);
      bool single_char_piece = false;
      for (std::size_t length = 1; length <= std::min(longest_, word.size() - start); ++length) {
        auto const found = pieces_.find(word.substr(start, length));
        if (found == pieces_.end()) continue;
        Node& target = best[start + length];
        double const candidate = found->second.score + till_here;
        if (target.start < 0 || candidate > target.score) target = {candidate, std::ptrdiff_t(start), found->second.id};
        single_char_piece = single_char_piece || length == char_bytes;
      }
      if (!single_char_piece) {
        Node& target = best[start + char_bytes];
        double const candidate = unknown_score + till_here;
        if (target.start < 0 || candidate > target.score) target = {candidate, std::ptrdiff_t(start), unk_id};
      }
      start += char_bytes;
    }
    std::vector<std::pair<int, std::size_t>> out;
    for (std::size_t at = word.size(); at > 0;) {
      Node const& node = best[at];
      auto const length = at - static_cast<std::size_t>(node.start);
      // tokenizers fuses by id: a run of nodes of the unknown id (unknown characters, or the unknown piece's
      // own text) is one piece.
      if (node.id == unk_id && !out.empty() && out.back().first == unk_id) {
        out.back().second += length;
      } else {
        out.emplace_back(node.id, length);
      }
      at = static_cast<std::size_t>(node.start);
    }
    return {out.rbegin(), out.rend()};
  }

 private:
  struct Entry {
    int id;
    double score;
  };
  static std::size_t utf8_length(char lead) {
    auto const b = static_cast<unsigned char>(lead);
    return b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
  }

  std::vector<std::string> texts_;  // owns the keys of pieces_
  std::vector<bool> normal_;
  std::unordered_map<std::string_view, Entry> pieces_;
  std::size_t longest_ = 0;
  double min_score_ = 0.0;
};

// How far byte `at` of a piece's normalized text lies from piece.begin + at in the stretch, when the
// text is the stretch's own bytes (a leading "▁" standing for one space, or for nothing before the first
// word); nullopt when the normalizer rewrote the piece.
inline std::optional<std::ptrdiff_t> verbatim_shift(StretchPiece const& piece, std::string_view stretch) {
  static constexpr std::string_view kSpace = "\xE2\x96\x81";
  std::string_view const text = piece.normalized;
  std::string_view const surface = stretch.substr(piece.begin, piece.end - piece.begin);
  if (text == surface) return 0;
  if (!text.starts_with(kSpace)) return std::nullopt;
  std::string_view const rest = text.substr(kSpace.size());
  if (rest == surface) return -std::ptrdiff_t(kSpace.size());
  if (surface.starts_with(' ') && rest == surface.substr(1)) return 1 - std::ptrdiff_t(kSpace.size());
  return std::nullopt;
}

// Re-segments each word of `pieces` (a word: a piece starting with "▁" and the pieces up to the next
// one) the way tokenizers does. `first_is_word` is false for a stretch that starts inside a word: its
// first word is left as it is (its path score carries on from the part before the cut).
inline void resegment_words(UnigramViterbi const& viterbi, std::vector<StretchPiece>& pieces, std::string_view stretch,
                            bool first_is_word) {
  static constexpr std::string_view kSpace = "\xE2\x96\x81";
  std::vector<StretchPiece> out;
  out.reserve(pieces.size());
  for (std::size_t first = 0; first < pieces.size();) {
    std::size_t last = first + 1;
    while (last < pieces.size() && !std::string_view(pieces[last].normalized).starts_with(kSpace)) ++last;
    std::string word;
    bool eligible = first > 0 || first_is_word;
    for (std::size_t k = first; k < last && eligible; ++k) {
      eligible = viterbi.is_normal(pieces[k].id) && verbatim_shift(pieces[k], stretch).has_value();
      word += pieces[k].normalized;
    }
    auto const segments = eligible && last - first > 1 ? viterbi.segment(word) : decltype(viterbi.segment(word)){};
    if (segments.empty()) {
      out.insert(out.end(), pieces.begin() + std::ptrdiff_t(first), pieces.begin() + std::ptrdiff_t(last));
      first = last;
      continue;
    }
    // A new piece's span: from where its first byte lies (an old piece's start where it starts one) to
    // where its last byte lies plus one (an old piece's end where it ends one).
    // The stretch byte of word byte `at`, inside old piece k which starts at word byte k_start.
    auto const byte_of = [&](std::size_t k, std::size_t k_start, std::size_t at) {
      return std::size_t(std::ptrdiff_t(pieces[k].begin + at - k_start) + *verbatim_shift(pieces[k], stretch));
    };
    std::size_t k = first, k_start = 0;  // the old piece holding word byte `at`, and where it starts in word
    std::size_t at = 0;
    for (auto const& [id, length] : segments) {
      while (at >= k_start + pieces[k].normalized.size()) k_start += pieces[k++].normalized.size();
      std::size_t const begin = at == k_start ? pieces[k].begin : byte_of(k, k_start, at);
      std::size_t const end_at = at + length;
      std::size_t j = k, j_start = k_start;
      while (end_at > j_start + pieces[j].normalized.size()) j_start += pieces[j++].normalized.size();
      std::size_t const end =
          end_at == j_start + pieces[j].normalized.size() ? pieces[j].end : byte_of(j, j_start, end_at);
      out.push_back({id, word.substr(at, length), begin, end});
      at = end_at;
    }
    first = last;
  }
  pieces = std::move(out);
}

}  // namespace flashdeberta::tokenizer::detail
