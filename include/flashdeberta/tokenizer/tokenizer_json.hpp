// Reading HF's tokenizer.json (what transformers' fast tokenizers save, and all a GLiNER directory saved with
// transformers 5.x holds): the model, its normalizer, pre-tokenizer, post-processor template, decoder and
// added tokens, built so that encoding follows HF's tokenizers library exactly for that file.
//
// Supported (DeBERTa's tokenizers as transformers 4.x and 5.x write them):
//   model          Unigram (v2/v3, mDeBERTa: tokenizer_json_unigram.hpp; byte_fallback false), BPE (v1's
//                  GPT-2 byte-level BPE: gpt2_bpe.hpp, with pre_tokenizer ByteLevel and no normalizer)
//   normalizer     null, Sequence, Lowercase, Strip, Replace, NFC, Precompiled (tokenizer_json_normalizers.hpp)
//   pre_tokenizer  null, Sequence, Metaspace, Punctuation (Unigram); ByteLevel with use_regex (BPE)
//   post_processor null, TemplateProcessing (any template: v1's 5.x [CLS] A [SEP] [SEP] B [SEP] is followed)
//   decoder        null, Metaspace (Unigram), ByteLevel (BPE)
// Anything else is refused with a FileError naming the file, the field and its value; truncation and padding
// stored in the file are not applied (transformers' call arguments decide them, as EncodeOptions do here).
// With BPE, added tokens are all matched in the raw text: with no normalizer, HF's two passes (tokens not
// "normalized" first, then the others in what is left) give the same result unless two tokens overlap.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/tokenizer/encoding.hpp"
#include "flashdeberta/tokenizer/gpt2_bpe.hpp"
#include "flashdeberta/tokenizer/tokenizer_base.hpp"
#include "flashdeberta/tokenizer/tokenizer_config.hpp"
#include "flashdeberta/tokenizer/tokenizer_json_normalizers.hpp"
#include "flashdeberta/tokenizer/tokenizer_json_pre_tokenizers.hpp"
#include "flashdeberta/tokenizer/tokenizer_json_reader.hpp"
#include "flashdeberta/tokenizer/tokenizer_json_unigram.hpp"

namespace flashdeberta::tokenizer {

// What a tokenizer.json gives load_tokenizer: the model and the template; its added tokens are merged into
// the TokenizerConfig (the file's entries win over tokenizer_config.json's).
struct TokenizerJson {
  std::shared_ptr<TokenizerModel const> model;
  SequenceTemplate sequence_template;
};

struct TokenizerJsonOptions {
  // The longest piece a Unigram pipeline normalizes at once (tokenizer_json_unigram.hpp); tests lower it.
  std::size_t unigram_chunk_chars = 4096;
};

namespace detail {

inline std::vector<AddedToken> read_json_added_tokens(JsonNode const& root) {
  std::vector<AddedToken> out;
  io::Json const* list = root.find("added_tokens");
  if (list == nullptr) return out;
  JsonNode const node = root.child(*list, "added_tokens");
  node.require_array();
  std::map<std::int64_t, std::size_t> index_of_id;  // HF's tokenizers would keep one of two tokens of one id
  for (std::size_t i = 0; i < node.value.size(); ++i) {
    JsonNode const item = node.element(i);
    AddedToken t;
    t.id = item.at("id").as_int();
    t.content = item.at("content").as_string();
    require_token_id(t.id, item.file, t.content);
    // A pair, not a structured binding: clang 14 cannot capture a binding in the error macro's lambda.
    auto const placed = index_of_id.emplace(t.id, i);
    std::size_t const earlier = placed.first->second;
    FLASHDEBERTA_REQUIRE(placed.second, item.file << ": added_tokens: id " << t.id << " is used by both '"
                                                  << out[earlier].content << "' (added_tokens[" << earlier << "]) and '"
                                                  << t.content << "' (added_tokens[" << i << "])");
    FLASHDEBERTA_REQUIRE(!t.content.empty(), item.file << ": " << item.field << " has an empty content");
    t.single_word = item.get_bool("single_word", false);
    t.lstrip = item.get_bool("lstrip", false);
    t.rstrip = item.get_bool("rstrip", false);
    t.special = item.get_bool("special", false);
    t.normalized = item.get_bool("normalized", !t.special);
    out.push_back(std::move(t));
  }
  return out;
}

inline SequenceTemplate default_template() {  // no post_processor: the sequences alone, types 0 and 1
  SequenceTemplate t;
  t.single.push_back({0, {}, {}, 0});
  t.pair = {{0, {}, {}, 0}, {1, {}, {}, 1}};
  return t;
}

inline std::vector<TemplatePiece> read_template(JsonNode const& node, JsonNode const& specials) {
  node.require_array();
  std::vector<TemplatePiece> out;
  for (std::size_t i = 0; i < node.value.size(); ++i) {
    JsonNode const item = node.element(i);
    item.require_object();
    TemplatePiece p;
    if (io::Json const* seq = item.find("Sequence")) {
      JsonNode const s = item.child(*seq, "Sequence");
      std::string const& id = s.at("id").as_string();
      if (id != "A" && id != "B") refuse_json_value(s.file, s.describe("id"), id, "A, B");
      p.sequence = id == "A" ? 0 : 1;
      p.type_id = s.at("type_id").as_int();
    } else if (io::Json const* special = item.find("SpecialToken")) {
      JsonNode const s = item.child(*special, "SpecialToken");
      std::string const& id = s.at("id").as_string();
      p.type_id = s.at("type_id").as_int();
      io::Json const* entry = specials.find(id);
      FLASHDEBERTA_REQUIRE(entry != nullptr, s.file << ": " << s.field << " names the special token '" << id
                                                    << "', which post_processor.special_tokens lacks");
      JsonNode const e = specials.child(*entry, id);
      JsonNode const ids = e.at("ids");
      JsonNode const tokens = e.at("tokens");
      ids.require_array();
      tokens.require_array();
      FLASHDEBERTA_REQUIRE(ids.value.size() == tokens.value.size(), e.file << ": " << e.field << " has "
                                                                           << ids.value.size() << " ids but "
                                                                           << tokens.value.size() << " tokens");
      for (std::size_t k = 0; k < ids.value.size(); ++k) {
        std::int64_t const token_id = ids.element(k).as_int();
        require_token_id(token_id, e.file, tokens.element(k).as_string());
        p.ids.push_back(token_id);
        p.tokens.push_back(tokens.element(k).as_string());
      }
    } else {
      FLASHDEBERTA_FAIL(item.file << ": " << item.field
                                  << " is neither {\"Sequence\": ...} nor {\"SpecialToken\": ...}");
    }
    FLASHDEBERTA_REQUIRE(p.type_id >= 0 && p.type_id < kTokenIdLimit,
                         item.file << ": " << item.field << " has type_id " << p.type_id << ", outside [0, 2^31)");
    out.push_back(std::move(p));
  }
  return out;
}

inline SequenceTemplate read_post_processor(JsonNode const& root) {
  io::Json const* value = root.find("post_processor");
  if (value == nullptr) return default_template();
  JsonNode const node = root.child(*value, "post_processor");
  std::string const& type = node.type();
  if (type != "TemplateProcessing") refuse_json_value(node.file, node.describe("type"), type, "TemplateProcessing");
  JsonNode const specials = node.at("special_tokens");
  specials.require_object();
  SequenceTemplate t{read_template(node.at("single"), specials), read_template(node.at("pair"), specials)};
  bool has_a = false, has_b = false;
  for (TemplatePiece const& p : t.pair) {
    has_a = has_a || p.sequence == 0;
    has_b = has_b || p.sequence == 1;
  }
  FLASHDEBERTA_REQUIRE(has_a && has_b, node.file << ": post_processor.pair must use both sequences $A and $B");
  return t;
}

inline MetaspaceDecoder read_unigram_decoder(JsonNode const& root) {
  MetaspaceDecoder d;
  io::Json const* value = root.find("decoder");
  if (value == nullptr) return d;
  JsonNode const node = root.child(*value, "decoder");
  std::string const& type = node.type();
  if (type != "Metaspace") refuse_json_value(node.file, node.describe("type"), type, "Metaspace (with model Unigram)");
  DecodedText const r = decode_utf8(node.at("replacement").as_string(), node.file + ": decoder.replacement");
  FLASHDEBERTA_REQUIRE(r.size() == 1, node.file << ": decoder.replacement must be one character");
  d.present = true;
  d.replacement = r.chars[0];
  d.keep_first = node.get_string("prepend_scheme", "always") == "never";
  return d;
}

inline std::shared_ptr<TokenizerModel const> read_unigram(JsonNode const& root, JsonNode const& model,
                                                          std::vector<AddedToken> const& added,
                                                          TokenizerJsonOptions const& options) {
  if (model.get_bool("byte_fallback", false))
    refuse_json_value(model.file, "model.byte_fallback", "true", "false (Unigram without byte fallback)");
  JsonNode const vocab = model.at("vocab");
  vocab.require_array();
  std::vector<std::pair<std::string, double>> pieces;
  pieces.reserve(vocab.value.size());
  for (std::size_t i = 0; i < vocab.value.size(); ++i) {
    JsonNode const entry = vocab.element(i);
    entry.require_array();
    FLASHDEBERTA_REQUIRE(entry.value.size() == 2, entry.file << ": " << entry.field << " must be [piece, score]");
    pieces.emplace_back(entry.element(0).as_string(), entry.element(1).as_number());
  }
  FLASHDEBERTA_REQUIRE(!pieces.empty(), model.file << ": model.vocab is empty");
  std::optional<int> unk_id;
  if (io::Json const* unk = model.find("unk_id")) {
    std::int64_t const id = model.child(*unk, "unk_id").as_int();
    FLASHDEBERTA_REQUIRE(id >= 0 && static_cast<std::size_t>(id) < pieces.size(),
                         model.file << ": model.unk_id " << id << " is outside the vocabulary of " << pieces.size());
    unk_id = static_cast<int>(id);
  }
  JsonNode const pre = root.optional("pre_tokenizer");
  if (!pre.value.is_null() && pre.type() == "ByteLevel")
    refuse_json_value(model.file, "pre_tokenizer.type", "ByteLevel",
                      "Sequence, Metaspace, Punctuation (with model Unigram)");
  auto m = std::make_shared<UnigramPipelineModel>(
      std::move(pieces), unk_id, TextNormalizer::parse(root.optional("normalizer")), PreTokenizer::parse(pre),
      read_unigram_decoder(root), model.file, options.unigram_chunk_chars);
  std::vector<AddedToken> normalized;
  for (AddedToken const& t : added) {
    if (t.normalized) normalized.push_back(t);
  }
  m->set_normalized_added_tokens(normalized);
  return m;
}

inline std::shared_ptr<TokenizerModel const> read_bpe(JsonNode const& root, JsonNode const& model) {
  if (io::Json const* n = root.find("normalizer"))
    refuse_json_value(model.file, "normalizer.type", root.child(*n, "normalizer").type(), "null (with model BPE)");
  JsonNode const pre = root.optional("pre_tokenizer");
  std::string const pre_type = pre.value.is_null() ? "null" : pre.type();
  if (pre_type != "ByteLevel")
    refuse_json_value(model.file, "pre_tokenizer.type", pre_type, "ByteLevel (with model BPE)");
  if (!pre.get_bool("use_regex", true)) refuse_json_value(model.file, "pre_tokenizer.use_regex", "false", "true");
  if (io::Json const* d = root.find("decoder"); d != nullptr && root.child(*d, "decoder").type() != "ByteLevel")
    refuse_json_value(model.file, "decoder.type", root.child(*d, "decoder").type(), "ByteLevel (with model BPE)");
  if (io::Json const* dropout = model.find("dropout"))
    refuse_json_value(model.file, "model.dropout", dropout->dump(), "null");
  for (char const* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    std::string const value = model.get_string(key, "");
    if (!value.empty()) refuse_json_value(model.file, std::string("model.") + key, value, "\"\" or null");
  }
  for (char const* key : {"byte_fallback", "ignore_merges"}) {
    if (model.get_bool(key, false)) refuse_json_value(model.file, std::string("model.") + key, "true", "false");
  }
  JsonNode const merges = model.at("merges");
  merges.require_array();
  std::vector<Gpt2BpeModel::MergeRule> rules;
  for (std::size_t i = 0; i < merges.value.size(); ++i) {
    JsonNode const m = merges.element(i);
    std::string const where = m.field;
    if (m.value.is_string()) {  // "left right" (tokenizers before 0.20)
      std::string const& line = m.as_string();
      std::size_t const space = line.find(' ');
      FLASHDEBERTA_REQUIRE(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                               line.find(' ', space + 1) == std::string::npos,
                           m.file << ": " << where << " is not 'LEFT RIGHT': '" << line << "'");
      rules.push_back({line.substr(0, space), line.substr(space + 1), where});
    } else {
      m.require_array();
      FLASHDEBERTA_REQUIRE(m.value.size() == 2, m.file << ": " << where << " must be [left, right]");
      rules.push_back({m.element(0).as_string(), m.element(1).as_string(), where});
    }
  }
  return Gpt2BpeModel::build(model.at("vocab").value, model.file, "model.vocab", rules, model.file,
                             {.trim_offsets = false, .add_prefix_space = pre.get_bool("add_prefix_space", false)});
}

}  // namespace detail

// Reads dir/tokenizer.json; its added tokens go into `config` (see TokenizerJson).
inline TokenizerJson read_tokenizer_json(std::filesystem::path const& dir, TokenizerConfig& config,
                                         TokenizerJsonOptions const& options = {}) {
  auto const path = dir / "tokenizer.json";
  std::string const file = path.string();
  io::Json const doc = detail::read_json_file(path, "tokenizer.json");
  detail::JsonNode const root{doc, file, ""};
  root.require_object();
  std::vector<AddedToken> added = detail::read_json_added_tokens(root);
  detail::JsonNode const model = root.at("model");
  std::string const& type = model.type();
  TokenizerJson out;
  if (type == "Unigram") {
    out.model = detail::read_unigram(root, model, added, options);
  } else if (type == "BPE") {
    out.model = detail::read_bpe(root, model);
    for (AddedToken& t : added) t.normalized = false;  // see the top of this header
  } else {
    detail::refuse_json_value(file, "model.type", type, "Unigram, BPE");
  }
  out.sequence_template = detail::read_post_processor(root);
  for (AddedToken const& t : added) config.added_tokens_decoder[t.id] = t;
  config.files_read.push_back("tokenizer.json");
  return out;
}

}  // namespace flashdeberta::tokenizer
