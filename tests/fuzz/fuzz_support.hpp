// Helpers shared by the libFuzzer targets: splitting one input into several files, a scratch folder for
// the parsers that only take paths, and the invariants every tokenizer Encoding must satisfy.
//
// A target signals a broken invariant with fuzz_check(), which traps: libFuzzer reports it as a crash
// and keeps the input. Only flashdeberta::Error is an accepted way for a parser to refuse an input.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/tokenizer/encoding.hpp"
#include "flashdeberta/tokenizer/tokenizer_base.hpp"
#include "flashdeberta/tokenizer/unicode.hpp"

namespace flashdeberta::fuzz {

// Every target is a function of one program, flashdeberta_fuzz, which runs the target its name says: CMake
// links fuzz_<name> to it, busybox-style (fuzz_main.cpp). One program compiles the parsers' headers once instead
// of once per target. FLASHDEBERTA_FUZZ_TARGET(name) { ... } defines target fuzz_<name>'s input function, as
// LLVMFuzzerTestOneInput would be (data, size; returns 0).
using FuzzTarget = int (*)(std::uint8_t const* data, std::size_t size);

struct FuzzTargetEntry {
  char const* name;
  FuzzTarget run;
};

inline std::vector<FuzzTargetEntry>& fuzz_targets() {
  static std::vector<FuzzTargetEntry> targets;
  return targets;
}

struct FuzzTargetRegistration {
  FuzzTargetRegistration(char const* name, FuzzTarget run) { fuzz_targets().push_back({name, run}); }
};

#define FLASHDEBERTA_FUZZ_TARGET(name)                                                                    \
  static int fuzz_target_##name(std::uint8_t const* data, std::size_t size);                              \
  static ::flashdeberta::fuzz::FuzzTargetRegistration const fuzz_registration_##name("fuzz_" #name,       \
                                                                                     fuzz_target_##name); \
  static int fuzz_target_##name(std::uint8_t const* data, std::size_t size)

// Separates the files (or the two texts of a pair) packed into one input. 0xFF never occurs in UTF-8,
// so no valid JSON document, merges.txt or text needs it; libFuzzer finds it through the dictionaries.
inline constexpr char kSeparator = '\xff';

inline void fuzz_check(bool ok, char const* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
    __builtin_trap();
  }
}

inline std::string_view as_text(std::uint8_t const* data, std::size_t size) {
  return {reinterpret_cast<char const*>(data), size};
}

// At most `parts` pieces: the input cut at the first parts - 1 separators (the last piece keeps any more).
inline std::vector<std::string_view> split_input(std::string_view input, std::size_t parts) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < parts) {
    std::size_t const at = input.find(kSeparator);
    if (at == std::string_view::npos) break;
    out.push_back(input.substr(0, at));
    input.remove_prefix(at + 1);
  }
  out.push_back(input);
  return out;
}

// A folder of its own under the temporary directory (TMPDIR, as run_fuzzers.sh sets it), removed when
// the process exits normally. One per target process, so parallel fuzzers never share files.
class ScratchDir {
 public:
  explicit ScratchDir(std::string const& stem) {
    std::string pattern = (std::filesystem::temp_directory_path() / (stem + "-XXXXXX")).string();
    fuzz_check(::mkdtemp(pattern.data()) != nullptr, "cannot create a scratch folder under the temp directory");
    path_ = pattern;
  }
  ScratchDir(ScratchDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  ScratchDir& operator=(ScratchDir&&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }

  std::filesystem::path const& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

  void write(std::string_view name, std::string_view bytes) const {
    std::ofstream out(path_ / name, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    fuzz_check(out.good(), "cannot write a file into the scratch folder");
  }
  void remove(std::string_view name) const {
    std::error_code ec;
    std::filesystem::remove(path_ / name, ec);
  }
  void copy_in(std::filesystem::path const& file) const {
    std::filesystem::copy_file(file, path_ / file.filename(), std::filesystem::copy_options::overwrite_existing);
  }

 private:
  std::filesystem::path path_;
};

// Options for Tokenizer::encode from the first two input bytes (consumed from `input`):
//   byte 0: bit 0 pair, bit 1 no special tokens, bits 2-3 truncation, bit 4 max_length set,
//           bit 5 pad to max_length, bits 6-7 left for the target (e.g. which tokenizer);
//   byte 1: max_length (0-255), so truncation is exercised on short texts.
struct EncodeRequest {
  bool pair = false;
  std::uint8_t target_bits = 0;
  tokenizer::EncodeOptions options;
};

inline EncodeRequest take_encode_request(std::string_view& input) {
  EncodeRequest r;
  std::uint8_t const flags = input.size() > 0 ? static_cast<std::uint8_t>(input[0]) : 0;
  std::uint8_t const length = input.size() > 1 ? static_cast<std::uint8_t>(input[1]) : 0;
  input.remove_prefix(std::min<std::size_t>(input.size(), 2));
  r.pair = (flags & 0x01) != 0;
  r.options.add_special_tokens = (flags & 0x02) == 0;
  constexpr tokenizer::Truncation kTruncations[] = {tokenizer::Truncation::kLongestFirst,
                                                    tokenizer::Truncation::kOnlyFirst,
                                                    tokenizer::Truncation::kOnlySecond, tokenizer::Truncation::kNone};
  r.options.truncation = kTruncations[(flags >> 2) & 0x3];
  if ((flags & 0x10) != 0) r.options.max_length = length;
  if ((flags & 0x20) != 0) r.options.padding = tokenizer::Padding::kMaxLength;
  r.target_bits = static_cast<std::uint8_t>(flags >> 6);
  return r;
}

// Which template an encoding follows: DeBERTa's ([CLS] A [SEP] B [SEP], token types 0 then 1), or the one a
// tokenizer.json's post-processor writes, where the special tokens and type ids are the file's.
enum class Template { kDeberta, kFromFile };

// What every Encoding of `text` (and `pair`) must satisfy, whatever the vocabulary: equal lengths,
// spans inside the text they point into, the template's special tokens, known ids, max_length kept,
// padding at the end only.
inline void check_encoding(tokenizer::Tokenizer const& tok, tokenizer::Encoding const& e, std::string_view text,
                           std::string_view const* pair, tokenizer::EncodeOptions const& options,
                           Template const layout = Template::kDeberta) {
  bool const deberta = layout == Template::kDeberta;
  std::size_t const n = e.input_ids.size();
  fuzz_check(e.token_type_ids.size() == n && e.attention_mask.size() == n && e.offsets.size() == n &&
                 e.tokens.size() == n && e.sequence_ids.size() == n,
             "Encoding fields differ in length");
  // Both texts decoded when encode() accepted them, so these cannot throw.
  auto const length_of = [](std::string_view s) { return static_cast<std::int64_t>(tokenizer::decode_utf8(s).size()); };
  std::int64_t const text_chars = length_of(text);
  std::int64_t const pair_chars = pair != nullptr ? length_of(*pair) : 0;
  tokenizer::SpecialIds const& specials = tok.special_ids();
  bool in_padding = false;
  for (std::size_t i = 0; i < n; ++i) {
    std::int32_t const seq = e.sequence_ids[i];
    fuzz_check(seq == -1 || seq == 0 || (seq == 1 && pair != nullptr), "sequence id out of range");
    fuzz_check(e.attention_mask[i] == 0 || e.attention_mask[i] == 1, "attention mask not 0/1");
    fuzz_check(!deberta || e.token_type_ids[i] == 0 || e.token_type_ids[i] == 1, "token type not 0/1");
    if (e.attention_mask[i] == 0) in_padding = true;
    fuzz_check(!in_padding || e.attention_mask[i] == 0, "a real token after padding");
    tokenizer::Span const span = e.offsets[i];
    if (seq < 0) {
      fuzz_check(span == tokenizer::Span{}, "special or padding token with a non-empty span");
    } else {
      std::int64_t const limit = seq == 0 ? text_chars : pair_chars;
      fuzz_check(0 <= span.begin && span.begin <= span.end && span.end <= limit, "offset outside its text");
      fuzz_check(!deberta || e.token_type_ids[i] == seq, "token type differs from the sequence id");
    }
    fuzz_check(in_padding ? e.input_ids[i] == specials.pad : tok.id_to_token(e.input_ids[i]).has_value(),
               "an id the tokenizer does not know");
  }
  if (deberta && options.add_special_tokens && n > 0 && !in_padding) {
    fuzz_check(e.input_ids.front() == specials.cls && e.input_ids.back() == specials.sep, "[CLS] ... [SEP] missing");
  }
  if (options.max_length && options.truncation != tokenizer::Truncation::kNone) {
    fuzz_check(n <= *options.max_length, "max_length exceeded with truncation on");
  }
  if (options.max_length && options.padding == tokenizer::Padding::kMaxLength) {
    fuzz_check(n >= *options.max_length, "padding to max_length left the row short");
  }
}

// Ids an encoding produced must decode: an Error here is a bug, not a refused input.
inline void check_decodes(tokenizer::Tokenizer const& tok, std::vector<std::int64_t> const& ids, bool skip_special) {
  try {
    (void)tok.decode(ids, skip_special);
  } catch (Error const& e) {
    std::fprintf(stderr, "decode of encoded ids failed: %s\n", e.what());
    fuzz_check(false, "ids from encode() do not decode");
  }
}

// Encodes the input as the first two bytes ask and checks the result; decoding the ids back must work.
inline void encode_and_check(tokenizer::Tokenizer const& tok, EncodeRequest const& request, std::string_view input,
                             Template const layout = Template::kDeberta) {
  if (request.pair) {
    std::vector<std::string_view> const texts = split_input(input, 2);
    std::string_view const text = texts[0];
    std::string_view const pair = texts.size() > 1 ? texts[1] : std::string_view{};
    tokenizer::Encoding const e = tok.encode(text, pair, request.options);
    check_encoding(tok, e, text, &pair, request.options, layout);
    check_decodes(tok, e.input_ids, /*skip_special=*/true);
  } else {
    tokenizer::Encoding const e = tok.encode(input, request.options);
    check_encoding(tok, e, input, nullptr, request.options, layout);
    // A second pass costs as much as the first; on long inputs it would only slow the search down.
    if (layout == Template::kDeberta && !request.options.max_length && request.options.add_special_tokens &&
        input.size() <= (64u << 10)) {
      fuzz_check(e.size() == tok.tokenize(input).size() + 2, "encode() and tokenize() disagree on the token count");
    }
    check_decodes(tok, e.input_ids, /*skip_special=*/false);
  }
}

}  // namespace flashdeberta::fuzz
