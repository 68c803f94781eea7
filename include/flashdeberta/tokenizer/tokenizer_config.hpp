// The tokenizer side of a checkpoint directory: tokenizer_config.json, special_tokens_map.json and
// added_tokens.json, read the way transformers reads them.
//
// Every file is optional (microsoft/deberta-v3-base ships {"do_lower_case": false, "vocab_type": "spm"}
// and an added_tokens.json; newer saves put everything in tokenizer_config.json); what is present is
// validated like config.json: wrong JSON types and duplicate keys are errors naming the file and key.
// Special tokens may be written as strings or as HF's AddedToken objects ({"content": ..., "lstrip": ...}).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/regular_file.hpp"

namespace flashdeberta::tokenizer {

// A token matched in the raw text before the model sees it (HF's AddedToken).
struct AddedToken {
  std::string content;
  std::int64_t id = -1;
  bool lstrip = false;  // also takes the whitespace before it
  bool rstrip = false;  // also takes the whitespace after it
  bool single_word = false;
  bool special = true;
  // Matched in the normalized text by the model instead of in the raw text (a tokenizer.json's "normalized"
  // added tokens; tokenizer_json_unigram.hpp). Never set for spm.model and vocab.json directories.
  bool normalized = false;
};

// The DeBERTa special tokens by role; every one is optional in the files and defaults to DeBERTa's.
struct SpecialTokenNames {
  AddedToken cls{"[CLS]"};
  AddedToken sep{"[SEP]"};
  AddedToken pad{"[PAD]"};
  AddedToken unk{"[UNK]"};
  AddedToken mask{"[MASK]"};
};

struct TokenizerConfig {
  std::optional<bool> do_lower_case;
  bool split_by_punct = false;
  std::optional<bool> add_prefix_space;
  std::string vocab_type;       // "spm", "gpt2" or empty
  std::string tokenizer_class;  // "DebertaV2Tokenizer", "DebertaTokenizerFast", ... or empty
  std::optional<std::int64_t> model_max_length;
  SpecialTokenNames specials;
  std::map<std::int64_t, AddedToken> added_tokens_decoder;  // tokenizer_config.json "added_tokens_decoder"
  std::map<std::string, std::int64_t> added_tokens_json;    // added_tokens.json
  std::vector<std::string> files_read;
};

namespace detail {

inline std::string read_text_file(std::filesystem::path const& file, char const* what) {
  return io::read_regular_file(file, what);
}

// Whether the optional file `file` is there to be read: false when nothing is there (HF's default then holds);
// anything there that is not a regular file is an error naming it, rather than a file silently left unread.
inline bool optional_file_present(std::filesystem::path const& file, char const* what) {
  io::FileStatus const status = io::file_status(file);
  if (status.kind == io::FileKind::kMissing) return false;
  if (status.kind != io::FileKind::kRegular) io::fail_not_regular_file(file, what, status);
  return true;
}

// A special token given as "[MASK]" or {"content": "[MASK]", "lstrip": true, ...}; flags not given keep
// the values already in `token`.
inline void read_added_token(io::Json const& value, std::string const& source, std::string const& what,
                             AddedToken& token) {
  if (value.is_string()) {
    token.content = value.get<std::string>();
    return;
  }
  if (!value.is_object()) io::fail_json_type(source, what, "a string or an AddedToken object", value);
  io::JsonFields const f(value, source);
  FLASHDEBERTA_REQUIRE(f.has("content"), source << ": " << what << " has no 'content'");
  token.content = io::json_as_string(*f.find("content"), source, what + ".content");
  token.lstrip = f.get_bool("lstrip", token.lstrip);
  token.rstrip = f.get_bool("rstrip", token.rstrip);
  token.single_word = f.get_bool("single_word", token.single_word);
  token.special = f.get_bool("special", token.special);
}

inline void read_special_tokens(io::JsonFields const& f, SpecialTokenNames& s) {
  struct Role {
    char const* key;
    AddedToken* token;
  };
  for (Role role : {Role{"cls_token", &s.cls}, Role{"sep_token", &s.sep}, Role{"pad_token", &s.pad},
                    Role{"unk_token", &s.unk}, Role{"mask_token", &s.mask}}) {
    if (io::Json const* v = f.find(role.key); v != nullptr && !v->is_null()) {
      read_added_token(*v, f.source(), io::JsonFields::describe_key(role.key), *role.token);
    }
  }
}

inline io::Json read_json_file(std::filesystem::path const& file, char const* what) {
  return io::parse_json(read_text_file(file, what), file.string(), what);
}

// Token ids must lie in [0, 2^31): HF's tokenizers holds them as u32, the models index embedding rows
// with them, and ids near 2^63 would overflow where the next free id is computed.
inline constexpr std::int64_t kTokenIdLimit = std::int64_t{1} << 31;

inline void require_token_id(std::int64_t id, std::string const& source, std::string const& token) {
  FLASHDEBERTA_REQUIRE(id >= 0 && id < kTokenIdLimit,
                       source << ": token '" << token << "' has id " << id << ", outside [0, 2^31)");
}

// An added_tokens_decoder key (Python's int() of it, as transformers reads it), for the token `token`.
inline std::int64_t parse_token_id(std::string const& text, std::string const& source, std::string const& token) {
  std::size_t used = 0;
  long long id = 0;
  try {
    id = std::stoll(text, &used);
  } catch (std::out_of_range const&) {
    id = std::numeric_limits<long long>::max();  // past int64: refused below like any id from 2^31 on
    used = text.size();
  } catch (std::exception const&) {
    used = 0;
  }
  FLASHDEBERTA_REQUIRE(used == text.size() && !text.empty(),
                       source << ": added_tokens_decoder key '" << text << "' is not a token id");
  FLASHDEBERTA_REQUIRE(id >= 0 && id < kTokenIdLimit, source << ": added_tokens_decoder: token '" << token
                                                             << "' has id " << text << ", outside [0, 2^31)");
  return id;
}

}  // namespace detail

// Reads whichever of the three files `dir` holds; a missing file leaves the defaults.
inline TokenizerConfig load_tokenizer_config(std::filesystem::path const& dir) {
  TokenizerConfig c;
  auto const config_file = dir / "tokenizer_config.json";
  if (detail::optional_file_present(config_file, "tokenizer config")) {
    io::Json const doc = detail::read_json_file(config_file, "tokenizer config");
    io::JsonFields const f(doc, config_file.string());
    if (f.has("do_lower_case")) c.do_lower_case = f.get_bool("do_lower_case", false);
    c.split_by_punct = f.get_bool("split_by_punct", false);
    if (f.has("add_prefix_space")) c.add_prefix_space = f.get_bool("add_prefix_space", false);
    c.vocab_type = f.get_string("vocab_type", "");
    c.tokenizer_class = f.get_string("tokenizer_class", "");
    // HF writes 1e30 (VERY_LARGE_INTEGER) for "no limit", and null is its default too: anything from 2^63 on
    // and null are no limit. Otherwise a whole number (512 or 512.0) is the limit; anything else (a string, a
    // fraction, a boolean) is refused, since taking it as no limit would silently lift truncation.
    if (io::Json const* v = f.find("model_max_length"); v != nullptr && !v->is_null()) {
      std::string const what = "key 'model_max_length'";
      if (!v->is_number()) io::fail_json_type(config_file.string(), what, "an integer (or null for no limit)", *v);
      double const value = v->get<double>();
      if (value < 9223372036854775808.0) {  // 2^63
        if (value != std::floor(value))
          io::fail_json_type(config_file.string(), what, "an integer (or null for no limit)", *v);
        FLASHDEBERTA_REQUIRE(value >= 0, config_file.string() << ": " << what << " is negative (" << v->dump() << ")");
        c.model_max_length = v->is_number_integer() ? v->get<std::int64_t>() : static_cast<std::int64_t>(value);
      }
    }
    detail::read_special_tokens(f, c.specials);
    if (io::Json const* decoder = f.find("added_tokens_decoder"); decoder != nullptr) {
      io::JsonFields const d(*decoder, config_file.string() + ": added_tokens_decoder");
      std::map<std::int64_t, std::string> keys;    // id -> the key that gave it
      for (auto const& item : decoder->items()) {  // no structured bindings: clang < 16 cannot capture them
        std::string const& key = item.key();
        AddedToken token;
        detail::read_added_token(item.value(), config_file.string(), "added_tokens_decoder[" + key + "]", token);
        token.id = detail::parse_token_id(key, config_file.string(), token.content);
        // Keys "7" and "07" are one id to Python's int(); transformers would keep whichever came last.
        // A pair, not a structured binding: clang 14 cannot capture a binding in the error macro's lambda.
        auto const placed = keys.emplace(token.id, key);
        std::string const& earlier_key = placed.first->second;
        FLASHDEBERTA_REQUIRE(placed.second, config_file.string()
                                                << ": added_tokens_decoder: id " << token.id << " is used by both '"
                                                << c.added_tokens_decoder.at(token.id).content << "' (key '"
                                                << earlier_key << "') and '" << token.content << "' (key '" << key
                                                << "')");
        c.added_tokens_decoder[token.id] = token;
      }
    }
    c.files_read.push_back("tokenizer_config.json");
  }
  auto const map_file = dir / "special_tokens_map.json";
  if (detail::optional_file_present(map_file, "special tokens map")) {
    io::Json const doc = detail::read_json_file(map_file, "special tokens map");
    detail::read_special_tokens(io::JsonFields(doc, map_file.string()), c.specials);
    c.files_read.push_back("special_tokens_map.json");
  }
  auto const added_file = dir / "added_tokens.json";
  if (detail::optional_file_present(added_file, "added tokens")) {
    io::Json const doc = detail::read_json_file(added_file, "added tokens");
    io::JsonFields const f(doc, added_file.string());
    for (auto const& item : doc.items()) {  // no structured bindings: clang < 16 cannot capture them
      std::string const& content = item.key();
      std::int64_t const id =
          io::json_as_int64(item.value(), added_file.string(), io::JsonFields::describe_key(content));
      detail::require_token_id(id, added_file.string(), content);
      c.added_tokens_json[content] = id;
    }
    c.files_read.push_back("added_tokens.json");
  }
  return c;
}

}  // namespace flashdeberta::tokenizer
