// load_tokenizer(dir): the tokenizer of a DeBERTa checkpoint directory, picked from its files.
//
//   spm.model                 SentencePiece (v2, v3, mDeBERTa); needs flashdeberta::tokenizers, which
//                             links libsentencepiece and defines FLASHDEBERTA_WITH_SENTENCEPIECE
//   vocab.json + merges.txt   GPT-2 byte-level BPE (v1); core only
//   tokenizer.json            HF's fast-tokenizer file, when neither of the above is there (GLiNER saved with
//                             transformers 5.x): its own pipeline, as HF's tokenizers runs it (tokenizer_json.hpp);
//                             core only
// When both spm.model and vocab.json + merges.txt are present, tokenizer_config.json's vocab_type ("spm" /
// "gpt2") or tokenizer_class decides.
// tokenizer_config.json, special_tokens_map.json and added_tokens.json are read when present; a
// directory holding only these files is enough (no config.json or weights needed).
//
//   auto tok = flashdeberta::load_tokenizer("path/to/deberta-v3-base");
//   flashdeberta::Encoding e = tok.encode("Paris is the [MASK] of France.");  // e.input_ids, e.offsets, ...
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/regular_file.hpp"
#include "flashdeberta/tokenizer/encoding.hpp"
#include "flashdeberta/tokenizer/gpt2_bpe.hpp"
#include "flashdeberta/tokenizer/tokenizer_base.hpp"
#include "flashdeberta/tokenizer/tokenizer_config.hpp"
#include "flashdeberta/tokenizer/tokenizer_json.hpp"
#if defined(FLASHDEBERTA_WITH_SENTENCEPIECE)
#include "flashdeberta/tokenizer/sentencepiece_tokenizer.hpp"
#endif

namespace flashdeberta::tokenizer {

// Which tokenizer load_tokenizer builds.
enum class TokenizerKind { kSentencePiece, kGpt2Bpe, kTokenizerJson };

namespace detail {

// The added-token table: the five special tokens first (ids from the model's vocabulary, then from
// added_tokens_decoder / added_tokens.json, else appended after the vocabulary, as HF appends [MASK]),
// then every other token those files list. Hash maps keep this linear in the number of added tokens.
inline std::vector<AddedToken> build_added_tokens(TokenizerModel const& model, TokenizerConfig const& config,
                                                  std::filesystem::path const& dir) {
  // Ids are below 2^31 (checked on load), so next_id cannot overflow.
  std::int64_t next_id = static_cast<std::int64_t>(model.vocab_size());
  std::unordered_map<std::string, std::int64_t> decoder_id;               // content -> its lowest id
  std::unordered_map<std::string, AddedToken const*> decoder_last_entry;  // content -> its highest-id entry
  for (auto const& entry : config.added_tokens_decoder) {
    next_id = std::max(next_id, entry.first + 1);
    decoder_id.emplace(entry.second.content, entry.first);
    decoder_last_entry.insert_or_assign(entry.second.content, &entry.second);
  }
  for (auto const& entry : config.added_tokens_json) next_id = std::max(next_id, entry.second + 1);
  auto const known = [&](std::string const& content) -> std::optional<std::int64_t> {
    if (auto it = decoder_id.find(content); it != decoder_id.end()) return it->second;
    if (auto it = config.added_tokens_json.find(content); it != config.added_tokens_json.end()) return it->second;
    return model.token_to_id(content);
  };
  std::vector<AddedToken> out;
  std::unordered_set<std::string> seen;
  auto const add = [&](AddedToken token) {
    if (!seen.insert(token.content).second) return;
    if (auto const id = known(token.content)) {
      token.id = *id;
    } else {
      FLASHDEBERTA_REQUIRE(next_id < kTokenIdLimit, dir.string()
                                                        << ": no token id below 2^31 is left for the added token '"
                                                        << token.content << "'");
      token.id = next_id++;
    }
    out.push_back(std::move(token));
  };
  SpecialTokenNames const& s = config.specials;
  for (AddedToken const* t : {&s.pad, &s.cls, &s.sep, &s.unk, &s.mask}) {
    AddedToken token = *t;
    if (auto it = decoder_last_entry.find(token.content); it != decoder_last_entry.end()) {
      token = *it->second;  // the file's flags win
    }
    token.special = true;
    add(token);
  }
  for (auto const& entry : config.added_tokens_decoder) add(entry.second);
  for (auto const& entry : config.added_tokens_json)
    add(AddedToken{entry.first, entry.second, false, false, false, false});
  for (auto const& t : out) {
    FLASHDEBERTA_REQUIRE(!t.content.empty(), dir.string() << ": an added or special token is the empty string");
  }
  return out;
}

inline Tokenizer assemble(std::shared_ptr<TokenizerModel const> model, TokenizerConfig const& config,
                          std::filesystem::path const& dir, std::size_t hf_pair_special_tokens,
                          std::optional<SequenceTemplate> sequence_template = std::nullopt) {
  std::vector<AddedToken> added = build_added_tokens(*model, config, dir);
  auto const id_of = [&](AddedToken const& role) {
    for (auto const& t : added) {
      if (t.content == role.content) return t.id;
    }
    return std::int64_t{-1};
  };
  SpecialTokenNames const& s = config.specials;
  SpecialIds ids{id_of(s.cls),  id_of(s.sep),  id_of(s.pad),          s.cls.content,
                 s.sep.content, s.pad.content, hf_pair_special_tokens};
  ids.unk = id_of(s.unk);
  ids.unk_token = s.unk.content;
  ids.sequence_template = std::move(sequence_template);
  std::int64_t const mask = id_of(s.mask);
  return Tokenizer(std::move(model), std::move(added), std::move(ids), mask, config.model_max_length);
}

// Whether anything of the name is there: a FIFO, a directory or a broken link counts, so that reading it reports
// what it is (io::read_regular_file) rather than the directory seeming to hold no tokenizer.
inline bool is_file(std::filesystem::path const& p) { return io::file_status(p).kind != io::FileKind::kMissing; }

// "a, b, c" (sorted, at most 20 names) for messages about what a directory holds.
inline std::string list_directory(std::filesystem::path const& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) return "nothing";
  std::ostringstream os;
  for (std::size_t i = 0; i < names.size() && i < 20; ++i) os << (i ? ", " : "") << names[i];
  if (names.size() > 20) os << ", ... (" << names.size() - 20 << " more)";
  return os.str();
}

}  // namespace detail

// The tokenizer kind `dir` holds, from its files (see the top of this header).
inline TokenizerKind detect_tokenizer_kind(std::filesystem::path const& dir, TokenizerConfig const& config) {
  bool const spm = detail::is_file(dir / "spm.model");
  bool const bpe = detail::is_file(dir / "vocab.json") && detail::is_file(dir / "merges.txt");
  if (spm && bpe) {
    bool const wants_bpe = config.vocab_type == "gpt2" || config.tokenizer_class.starts_with("DebertaTokenizer");
    return wants_bpe ? TokenizerKind::kGpt2Bpe : TokenizerKind::kSentencePiece;
  }
  if (spm) return TokenizerKind::kSentencePiece;
  if (bpe) return TokenizerKind::kGpt2Bpe;
  if (detail::is_file(dir / "tokenizer.json")) return TokenizerKind::kTokenizerJson;
  std::error_code ec;
  FLASHDEBERTA_REQUIRE(std::filesystem::is_directory(dir, ec), dir.string() << ": not a directory");
  std::string hint;
  if (detail::is_file(dir / "vocab.json") || detail::is_file(dir / "merges.txt")) {
    hint = "; a BPE tokenizer needs both vocab.json and merges.txt";
  }
  ::flashdeberta::detail::throw_error<FileError>([&](std::ostringstream& os) {
    os << dir.string() << ": no tokenizer files: expected spm.model (DeBERTa v2/v3), vocab.json + merges.txt "
       << "(DeBERTa v1) or tokenizer.json; the directory holds " << detail::list_directory(dir) << hint;
  });
}

// load_tokenizer's body depends on FLASHDEBERTA_WITH_SENTENCEPIECE; the inline namespace gives the two
// versions different symbols, so translation units built with and without it can share a program.
#if defined(FLASHDEBERTA_WITH_SENTENCEPIECE)
#define FLASHDEBERTA_TOKENIZER_FLAVOUR with_sentencepiece
#else
#define FLASHDEBERTA_TOKENIZER_FLAVOUR without_sentencepiece
#endif
inline namespace FLASHDEBERTA_TOKENIZER_FLAVOUR {

// Builds the tokenizer of checkpoint directory `dir`; errors name the file and what is wrong with it. The
// Tokenizer may be shared by any number of threads, either kind (docs/thread-safety.md).
inline Tokenizer load_tokenizer(std::filesystem::path const& dir) {
  std::error_code ec;
  FLASHDEBERTA_REQUIRE_FILE(std::filesystem::exists(dir, ec), dir.string() << ": no such directory");
  TokenizerConfig config = load_tokenizer_config(dir);
  TokenizerKind const kind = detect_tokenizer_kind(dir, config);
  if (kind == TokenizerKind::kTokenizerJson) {
    TokenizerJson file = read_tokenizer_json(dir, config);
    std::size_t const pair_specials = file.sequence_template.special_tokens(true);
    return detail::assemble(std::move(file.model), config, dir, pair_specials, std::move(file.sequence_template));
  }
  if (kind == TokenizerKind::kGpt2Bpe) {
    FLASHDEBERTA_REQUIRE(!config.do_lower_case.value_or(false),
                         (dir / "tokenizer_config.json").string()
                             << ": do_lower_case is not supported for the BPE (v1) tokenizer");
    return detail::assemble(Gpt2BpeModel::load(dir), config, dir, /*hf_pair_special_tokens=*/4);
  }
#if defined(FLASHDEBERTA_WITH_SENTENCEPIECE)
  SentencePieceOptions options;
  options.do_lower_case = config.do_lower_case.value_or(false);
  options.split_by_punct = config.split_by_punct;
  return detail::assemble(SentencePieceModel::load(dir / "spm.model", options), config, dir,
                          /*hf_pair_special_tokens=*/3);
#else
  FLASHDEBERTA_FAIL((dir / "spm.model").string()
                    << ": SentencePiece tokenizers need libsentencepiece: link flashdeberta::tokenizers "
                       "(CMake option FLASHDEBERTA_WITH_SENTENCEPIECE)");
#endif
}

}  // namespace FLASHDEBERTA_TOKENIZER_FLAVOUR
}  // namespace flashdeberta::tokenizer

namespace flashdeberta {
using tokenizer::EncodeOptions;
using tokenizer::Encoding;
using tokenizer::load_tokenizer;
using tokenizer::Padding;
using tokenizer::Tokenizer;
using tokenizer::Truncation;
}  // namespace flashdeberta
