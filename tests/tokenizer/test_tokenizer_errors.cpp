// The factory's choices and every refusal: missing or corrupt files, invalid UTF-8, impossible
// truncations, unknown ids. Errors are flashdeberta::Error with a message naming the file (or the input).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "fixture_cases.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"
#include "text_contains.hpp"
#include "tokenizer_test_util.hpp"

using flashdeberta::test::error_message;
using flashdeberta::test::TempDir;
using flashdeberta::test::tokenizer_fixture;
namespace tok = flashdeberta::tokenizer;

namespace {

using flashdeberta::testing::contains;

// A copy of the BPE fixture whose `name` is replaced by `bytes`.
std::string bpe_error_with(std::string const& name, std::string const& bytes) {
  TempDir const dir;
  dir.copy_from(tokenizer_fixture("bpe"));
  std::filesystem::remove(dir.path() / "expected.json");
  dir.write(name, bytes);
  std::string const message = error_message([&] { flashdeberta::load_tokenizer(dir.path()); });
  CHECK(contains(message, (dir.path() / name).string()));
  return message;
}

}  // namespace

TEST_CASE("load_tokenizer: missing and unrecognized directories") {
  CHECK(contains(error_message([] { flashdeberta::load_tokenizer("/nonexistent/tokenizer"); }), "no such directory"));
  TempDir const empty;
  std::string const m = error_message([&] { flashdeberta::load_tokenizer(empty.path()); });
  CHECK(contains(m,
                 "no tokenizer files: expected spm.model (DeBERTa v2/v3), vocab.json + merges.txt (DeBERTa v1) or "
                 "tokenizer.json"));
  CHECK(contains(m, "holds nothing"));
  empty.write("vocab.json", "{}");
  CHECK(contains(error_message([&] { flashdeberta::load_tokenizer(empty.path()); }),
                 "needs both vocab.json and merges.txt"));
}

TEST_CASE("BPE: bad vocab.json and merges.txt are rejected with the file and line") {
  CHECK(contains(bpe_error_with("vocab.json", "{\"a\": 0,"), "is not valid JSON"));
  CHECK(contains(bpe_error_with("vocab.json", "[1, 2]"), "must be a non-empty object"));
  CHECK(contains(bpe_error_with("vocab.json", "{\"a\": \"zero\"}"), "key 'a' must be an integer"));
  CHECK(contains(bpe_error_with("vocab.json", "{\"a\": 0, \"b\": 0}"), "id 0 is used by both"));
  CHECK(contains(bpe_error_with("vocab.json", "{\"a\": 0, \"a\": 1}"), "duplicate key 'a'"));
  CHECK(contains(bpe_error_with("vocab.json", "{\"a\": -1}"), "token 'a' has id -1, outside [0, 2^31)"));
  CHECK(
      contains(bpe_error_with("merges.txt", "#version: 0.2\n\xC4\xA0 a\nnot-a-pair\n"), "line 3 is not 'LEFT RIGHT'"));
  CHECK(contains(bpe_error_with("merges.txt", "#version: 0.2\nx y z\n"), "line 2 is not 'LEFT RIGHT'"));
  CHECK(contains(bpe_error_with("merges.txt", "qqq zzz\n"), "line 1 uses 'qqq', which is not in vocab.json"));
  CHECK(contains(bpe_error_with("tokenizer_config.json", "{\"do_lower_case\": \"no\"}"),
                 "key 'do_lower_case' must be a boolean"));
  CHECK(contains(bpe_error_with("special_tokens_map.json", "{\"mask_token\": 5}"),
                 "key 'mask_token' must be a string or an AddedToken object"));
  CHECK(contains(bpe_error_with("added_tokens.json", "{\"[X]\": -4}"), "token '[X]' has id -4, outside [0, 2^31)"));
}

TEST_CASE("BPE: special tokens, [MASK] and the factory's choice") {
  auto const t = flashdeberta::load_tokenizer(tokenizer_fixture("bpe"));
  CHECK(t.mask_token_id() == 1060);  // [MASK] is the last entry of the fixture's vocab.json
  CHECK(t.token_to_id("[MASK]") == 1060);
  CHECK(t.token_to_id("[CLS]") == 1);
  CHECK(t.vocab_size() == 1061);
  auto const e = t.encode("a [MASK] b");
  CHECK(e.input_ids.front() == 1);
  CHECK(e.input_ids.back() == 2);
  CHECK(std::find(e.input_ids.begin(), e.input_ids.end(), 1060) != e.input_ids.end());
}

TEST_CASE("invalid UTF-8 input is an error naming the byte") {
  auto const t = flashdeberta::load_tokenizer(tokenizer_fixture("bpe"));
  CHECK(error_message([&] { t.encode("ok \xFF"); }) ==
        "text: invalid UTF-8 at byte 3 (byte 0xff cannot start a character)");
  CHECK(contains(error_message([&] { t.encode("fine", "bad \xC3"); }), "invalid UTF-8 at byte 4"));
}

TEST_CASE("truncations HF refuses are refused") {
  auto const t = flashdeberta::load_tokenizer(tokenizer_fixture("bpe"));
  tok::EncodeOptions o;
  o.max_length = 6;
  o.truncation = tok::Truncation::kOnlySecond;
  CHECK(contains(error_message([&] { t.encode("one two three four five six seven", o); }), "only_second needs a pair"));
  CHECK(contains(error_message([&] { t.encode("one two three four five six seven", "x", o); }),
                 "the second sequence has 1 tokens, too few to remove"));
  o.truncation = tok::Truncation::kOnlyFirst;
  CHECK(t.encode("one two three four five six seven", "x", o).size() == 6);
  o.max_length = 2;
  CHECK(contains(error_message([&] { t.encode("a", "b", o); }), "max_length 2 is below the 3 special tokens"));
  tok::EncodeOptions pad;
  pad.padding = tok::Padding::kMaxLength;
  CHECK(contains(error_message([&] { t.encode("a", pad); }), "padding to max_length needs a max_length"));
  CHECK(contains(error_message([] { tok::parse_truncation("longest"); }), "unknown truncation strategy 'longest'"));
}

TEST_CASE("decode rejects ids outside the vocabulary") {
  auto const t = flashdeberta::load_tokenizer(tokenizer_fixture("bpe"));
  std::vector<std::int64_t> const ids{1, 99999, 2};
  CHECK(contains(error_message([&] { t.decode(ids); }), "token id 99999 is outside the vocabulary of 1061 tokens"));
}

TEST_CASE("padding and batches") {
  auto const t = flashdeberta::load_tokenizer(tokenizer_fixture("bpe"));
  std::vector<std::string> const texts{"Hello world", "", "a b c d e f g h"};
  tok::EncodeOptions o;
  o.padding = tok::Padding::kLongest;
  auto const rows = t.encode_batch(texts, o);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].size() == rows[2].size());
  CHECK(rows[1].input_ids[0] == 1);
  CHECK(rows[1].input_ids[1] == 2);
  CHECK(rows[1].input_ids[2] == 0);
  CHECK(rows[1].attention_mask[2] == 0);
  CHECK(rows[1].tokens[2] == "[PAD]");
  std::vector<std::string> const pairs{"x"};
  CHECK(contains(error_message([&] { t.encode_batch(texts, pairs, o); }), "3 texts but 1 pair texts"));
}

#if defined(FLASHDEBERTA_WITH_SENTENCEPIECE)
TEST_CASE("SentencePiece: missing, empty and corrupt spm.model") {
  TempDir const dir;
  dir.write("spm.model", "");
  CHECK(contains(error_message([&] { flashdeberta::load_tokenizer(dir.path()); }),
                 "spm.model: the SentencePiece model file is empty"));
  dir.write("spm.model", "this is not a protobuf \x01\x02\x03");
  CHECK(contains(error_message([&] { flashdeberta::load_tokenizer(dir.path()); }),
                 "spm.model: not a valid SentencePiece model"));
  std::string const good = [] {
    std::ifstream in(tokenizer_fixture("spm") / "spm.model", std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  dir.write("spm.model", good.substr(0, good.size() / 2));
  CHECK(contains(error_message([&] { flashdeberta::load_tokenizer(dir.path()); }), "not a valid SentencePiece model"));
  CHECK(contains(error_message([] { tok::SentencePieceModel::load("/nonexistent/spm.model"); }), "no such file"));
}

TEST_CASE("SentencePiece: [MASK] after the pieces, specials 0-3, factory choice by vocab_type") {
  auto const t = flashdeberta::load_tokenizer(tokenizer_fixture("spm"));
  CHECK(t.mask_token_id() == 1074);  // added_tokens.json, as 128000 in deberta-v3
  CHECK(t.token_to_id("[PAD]") == 0);
  CHECK(t.token_to_id("[UNK]") == 3);
  CHECK(t.vocab_size() == 1075);
  CHECK(t.encode("[MASK]").input_ids == std::vector<std::int64_t>{1, 1074, 2});

  TempDir const both;  // spm.model and BPE files in one directory: tokenizer_config.json decides
  both.copy_from(tokenizer_fixture("bpe"));
  std::filesystem::copy_file(tokenizer_fixture("spm") / "spm.model", both.path() / "spm.model");
  CHECK(std::string(flashdeberta::load_tokenizer(both.path()).kind()) == "gpt2-bpe");
  both.write("tokenizer_config.json", "{\"vocab_type\": \"spm\"}");
  CHECK(std::string(flashdeberta::load_tokenizer(both.path()).kind()) == "sentencepiece");

  TempDir const no_added;  // without added_tokens.json, [MASK] is appended after the pieces as HF does
  std::filesystem::copy_file(tokenizer_fixture("spm") / "spm.model", no_added.path() / "spm.model");
  CHECK(flashdeberta::load_tokenizer(no_added.path()).mask_token_id() == 1074);
}
#endif
