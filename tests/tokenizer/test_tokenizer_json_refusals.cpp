// What a tokenizer.json may hold that flashdeberta does not implement: each is refused when the file is read,
// with a FileError naming the file, the field, its value and what is supported, never tokenized differently.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "flashdeberta/tokenizer/tokenizer.hpp"
#include "text_contains.hpp"
#include "tokenizer_json_copy.hpp"

using flashdeberta::test::TokenizerJsonCopy;
using nlohmann::json;

namespace {

using flashdeberta::testing::contains;

// The refusal of `name`'s tokenizer.json after `edit`: a FileError whose message names the file and holds `want`.
void check_refused(std::string const& name, std::function<void(json&)> const& edit, std::string const& want) {
  TokenizerJsonCopy const copy(name, edit);
  std::string const message = copy.error();
  CAPTURE(message);
  CHECK(contains(message, copy.file().string() + ": "));
  CHECK(contains(message, want));
  CHECK(copy.file_error());
}

}  // namespace

TEST_CASE("unsupported normalizers are refused, naming the field and the value") {
  check_refused(
      "spm",
      [](json& d) {
        d["normalizer"] = {{"type", "BertNormalizer"}, {"lowercase", true}};
      },
      "normalizer.type \"BertNormalizer\" is not supported; supported: Sequence, Lowercase, Strip, Replace, NFC, "
      "Precompiled");
  check_refused(
      "spm",
      [](json& d) {
        d["normalizer"]["normalizers"][1] = {{"type", "NFKC"}};
      },
      "normalizer.normalizers[1].type \"NFKC\" is not supported");
  check_refused(
      "spm",
      [](json& d) {
        d["normalizer"]["normalizers"][0]["pattern"] = {{"Regex", "\\d+"}};
      },
      "normalizer.normalizers[0].pattern.Regex \"\\d+\" is not supported");
}

TEST_CASE("unsupported pre-tokenizers, models, decoders and post-processors are refused") {
  check_refused(
      "spm",
      [](json& d) {
        d["pre_tokenizer"] = {{"type", "Whitespace"}};
      },
      "pre_tokenizer.type \"Whitespace\" is not supported; supported: Sequence, Metaspace, Punctuation");
  check_refused(
      "spm", [](json& d) { d["pre_tokenizer"]["pretokenizers"][0]["prepend_scheme"] = "sometimes"; },
      "pre_tokenizer.pretokenizers[0].prepend_scheme \"sometimes\" is not supported");
  check_refused(
      "spm", [](json& d) { d["model"]["type"] = "WordPiece"; },
      "model.type \"WordPiece\" is not supported; supported: Unigram, BPE");
  check_refused(
      "spm", [](json& d) { d["model"]["byte_fallback"] = true; }, "model.byte_fallback \"true\" is not supported");
  check_refused(
      "spm",
      [](json& d) {
        d["decoder"] = {{"type", "WordPiece"}};
      },
      "decoder.type \"WordPiece\" is not supported");
  check_refused(
      "spm",
      [](json& d) {
        d["post_processor"] = {{"type", "RobertaProcessing"}};
      },
      "post_processor.type \"RobertaProcessing\" is not supported; supported: TemplateProcessing");
  check_refused(
      "spm",
      [](json& d) {
        d["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
      },
      "pre_tokenizer.type \"ByteLevel\" is not supported");
}

TEST_CASE("a BPE tokenizer.json is refused unless it is v1's byte-level BPE") {
  check_refused(
      "bpe",
      [](json& d) {
        d["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"}};
      },
      "pre_tokenizer.type \"Metaspace\" is not supported; supported: ByteLevel (with model BPE)");
  check_refused(
      "bpe",
      [](json& d) {
        d["normalizer"] = {{"type", "NFC"}};
      },
      "normalizer.type \"NFC\" is not supported; supported: null (with model BPE)");
  check_refused(
      "bpe", [](json& d) { d["model"]["continuing_subword_prefix"] = "##"; },
      "model.continuing_subword_prefix \"##\" is not supported");
  check_refused(
      "bpe", [](json& d) { d["model"]["dropout"] = 0.1; }, "model.dropout \"0.1\" is not supported");
  check_refused(
      "bpe", [](json& d) { d["pre_tokenizer"]["use_regex"] = false; }, "pre_tokenizer.use_regex \"false\"");
}

TEST_CASE("a directory with only tokenizer_config.json names tokenizer.json among what it expects") {
  flashdeberta::test::TempDir const dir;
  dir.write("tokenizer_config.json", "{}");
  std::string const message = flashdeberta::test::error_message([&] { flashdeberta::load_tokenizer(dir.path()); });
  CHECK(contains(message, "or tokenizer.json"));
}
