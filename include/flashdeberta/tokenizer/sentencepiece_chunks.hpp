// Where a long text may be cut before libsentencepiece sees it, with the result unchanged.
//
// libsentencepiece keeps about 230 bytes per piece while it encodes, and merges a run of characters its
// model does not know into one [UNK] piece by copying the growing piece once per character (0.1.97 to
// 0.2.x, PopulateSentencePieceText): a 4 MB text held ~700 MB, and 10^6 unknown characters took 97 s.
// SentencePieceModel therefore hands it stretches of at most a few thousand characters, cut where the
// segmentation provably decomposes:
//  - before a run of whitespace (kWordStart). No piece holds a "▁" past its first byte (checked on the
//    vocabulary at load), so no piece crosses the run; the run collapses to the "▁" that starts the next
//    word, and a stretch starting with it gets that "▁" as its dummy prefix (both checked in the model's
//    normalizer spec: add_dummy_prefix and remove_extra_whitespaces);
//  - beside a character no piece contains (kInsideWord): it can only be an [UNK] node of the lattice, so
//    no piece crosses either side of it. The stretch after such a cut starts inside a word and is encoded
//    without the dummy prefix (a second processor over the same model, see without_dummy_prefix), and an
//    [UNK] ending one stretch and one starting the next are merged as the library would merge them.
// Normalization must not reach across a cut, which cut_before ensures.
//
// Exact up to ties: where two segmentations of a word score the same, the library picks by the rounding of
// float sums that include everything before the word, so a cut (like HF's tokenizers, which score each
// word on its own) can pick the other one. Such ties need runs of a repeated character ("lllll": l+ll+ll
// or ll+ll+l).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "flashdeberta/tokenizer/unicode.hpp"

namespace flashdeberta::tokenizer::detail {

enum class ChunkStart : std::uint8_t { kWordStart, kInsideWord };

struct ChunkCut {
  std::size_t at = 0;  // the next stretch starts at chars[at]
  ChunkStart kind = ChunkStart::kWordStart;
};

// Whether the text may be cut before chars[i] (0 < i < chars.size()), and how the stretch after it starts.
// `unknown(c)`: whether c is a character no piece contains and the normalizer leaves as it is. Inside a
// word both neighbours must be such characters or printable ASCII (which NFKC leaves alone too), and
// neither a combining mark (except inside a run of one), so that nothing is composed, rewritten or turned
// into whitespace across the cut.
template <class Unknown>
std::optional<ChunkStart> cut_before(std::u32string_view chars, std::size_t i, bool word_cuts, bool inside_cuts,
                                     Unknown const& unknown) {
  char32_t const before = chars[i - 1];
  char32_t const after = chars[i];
  if (is_whitespace(before)) return std::nullopt;
  if (after == U' ') return word_cuts ? std::optional(ChunkStart::kWordStart) : std::nullopt;
  if (!inside_cuts) return std::nullopt;
  // A combining mark composes with what comes before it, even when it is unknown alone; but in a run of
  // one mark only the first can compose (the others are blocked), so the run may be cut after two.
  if (is_mark(before) || is_mark(after)) {
    bool const inside_run = before == after && i >= 2 && chars[i - 2] == after;
    return inside_run && unknown(after) ? std::optional(ChunkStart::kInsideWord) : std::nullopt;
  }
  auto const ascii = [](char32_t c) { return c > U' ' && c < 0x7F; };
  bool const before_unknown = !ascii(before) && unknown(before);
  if (!before_unknown && !ascii(before)) return std::nullopt;
  bool const after_unknown = !ascii(after) && unknown(after);
  if (!after_unknown && !ascii(after)) return std::nullopt;
  if (before_unknown || after_unknown) return ChunkStart::kInsideWord;
  return std::nullopt;
}

// Protocol-buffer wire format, just enough to rewrite one field of a SentencePiece ModelProto.
inline bool read_varint(std::string_view bytes, std::size_t& at, std::uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64 && at < bytes.size(); shift += 7) {
    auto const byte = static_cast<std::uint8_t>(bytes[at++]);
    value |= std::uint64_t{byte & 0x7Fu} << shift;
    if ((byte & 0x80u) == 0) return true;
  }
  return false;
}

inline void write_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7F) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

// Calls field(number, wire type, payload) for each top-level field; false on malformed bytes.
inline bool for_each_field(std::string_view bytes,
                           std::function<void(std::uint64_t, int, std::string_view)> const& field) {
  std::size_t at = 0;
  while (at < bytes.size()) {
    std::uint64_t key = 0;
    if (!read_varint(bytes, at, key)) return false;
    std::size_t const start = at;
    int const wire = static_cast<int>(key & 7);
    std::uint64_t length = 0;
    if (wire == 0) {
      if (!read_varint(bytes, at, length)) return false;
    } else if (wire == 1 || wire == 5) {
      at += wire == 1 ? 8 : 4;
    } else if (wire == 2) {
      if (!read_varint(bytes, at, length) || length > bytes.size() - at) return false;
      field(key >> 3, wire, bytes.substr(at, length));
      at += length;
      continue;
    } else {
      return false;
    }
    if (at > bytes.size()) return false;
    field(key >> 3, wire, bytes.substr(start, at - start));
  }
  return true;
}

struct NormalizerFlags {
  bool add_dummy_prefix = true;  // the proto's defaults
  bool remove_extra_whitespaces = true;
};

// ModelProto.normalizer_spec (field 3): add_dummy_prefix (3) and remove_extra_whitespaces (4).
inline std::optional<NormalizerFlags> normalizer_flags(std::string_view model_proto) {
  NormalizerFlags flags;
  bool ok = true;
  bool const parsed = for_each_field(model_proto, [&](std::uint64_t number, int wire, std::string_view payload) {
    if (number != 3 || wire != 2) return;
    ok = ok && for_each_field(payload, [&](std::uint64_t inner, int inner_wire, std::string_view value) {
           if (inner_wire != 0 || (inner != 3 && inner != 4)) return;
           std::size_t at = 0;
           std::uint64_t v = 0;
           read_varint(value, at, v);
           (inner == 3 ? flags.add_dummy_prefix : flags.remove_extra_whitespaces) = v != 0;
         });
  });
  if (!parsed || !ok) return std::nullopt;
  return flags;
}

// The same ModelProto with normalizer_spec.add_dummy_prefix = false. A scalar field given twice takes its
// last value, so the field is appended to the normalizer spec (or a spec holding only it is added).
inline std::optional<std::string> without_dummy_prefix(std::string_view model_proto) {
  static constexpr char kNoDummyPrefix[] = {0x18, 0x00};  // field 3, varint, 0
  std::string out;
  bool seen = false;
  bool const parsed = for_each_field(model_proto, [&](std::uint64_t number, int wire, std::string_view payload) {
    write_varint(out, number << 3 | static_cast<std::uint64_t>(wire));
    if (number == 3 && wire == 2) {
      seen = true;
      write_varint(out, payload.size() + sizeof kNoDummyPrefix);
      out.append(payload);
      out.append(kNoDummyPrefix, sizeof kNoDummyPrefix);
    } else {
      if (wire == 2) write_varint(out, payload.size());
      out.append(payload);
    }
  });
  if (!parsed) return std::nullopt;
  if (!seen) {
    write_varint(out, 3 << 3 | 2);
    write_varint(out, sizeof kNoDummyPrefix);
    out.append(kNoDummyPrefix, sizeof kNoDummyPrefix);
  }
  return out;
}

}  // namespace flashdeberta::tokenizer::detail
