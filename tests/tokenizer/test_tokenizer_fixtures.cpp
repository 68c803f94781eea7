// Every case of the HF fixtures (tests/fixtures/tokenizers/*/expected.json, make_tokenizer_fixtures.py):
// ids, token types, masks, tokens, offsets, decoding, and the refusals where HF raises.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "fixture_cases.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"
#include "tokenizer_test_util.hpp"

using flashdeberta::test::expect_fixture_passes;
using flashdeberta::test::tokenizer_fixture;

TEST_CASE("v1 byte-level BPE matches HF on every fixture case") {
  auto const tok = flashdeberta::load_tokenizer(tokenizer_fixture("bpe"));
  CHECK(std::string(tok.kind()) == "gpt2-bpe");
  expect_fixture_passes(tok, "bpe");
}

#if defined(FLASHDEBERTA_WITH_SENTENCEPIECE)
TEST_CASE("v2/v3 SentencePiece matches HF (and sentencepiece where 5.x skips NFKC) on every fixture case") {
  auto const tok = flashdeberta::load_tokenizer(tokenizer_fixture("spm"));
  CHECK(std::string(tok.kind()) == "sentencepiece");
  expect_fixture_passes(tok, "spm");
}

TEST_CASE("SentencePiece with do_lower_case and split_by_punct matches HF on every fixture case") {
  // spm_lower_punct/ holds the configs only; the model is spm/'s.
  flashdeberta::test::TempDir const dir;
  dir.copy_from(tokenizer_fixture("spm_lower_punct"));
  std::filesystem::copy_file(tokenizer_fixture("spm") / "spm.model", dir.path() / "spm.model");
  std::filesystem::remove(dir.path() / "expected.json");
  auto const tok = flashdeberta::load_tokenizer(dir.path());
  expect_fixture_passes(tok, "spm_lower_punct");
}
#endif
