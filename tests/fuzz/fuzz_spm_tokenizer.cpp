// libFuzzer target: arbitrary bytes as text for the SentencePiece tokenizer (DeBERTa v2/v3), built only
// with FLASHDEBERTA_WITH_SENTENCEPIECE. Two tokenizers over tests/fixtures/tokenizers/spm/spm.model are
// loaded once: the plain one (spm/) and one with do_lower_case and split_by_punct (spm_lower_punct/'s
// configs); bit 6 of the first byte picks one. The rest of the first two bytes choose single text or
// pair, special tokens, truncation and max_length (fuzz_support.hpp); a pair's texts are split at the
// first 0xFF. Any other outcome than an Encoding that keeps check_encoding's invariants or a
// flashdeberta::Error is a bug.
#include <cstddef>
#include <cstdint>
#include <filesystem>

#include "flashdeberta/tokenizer/tokenizer.hpp"
#include "fuzz_support.hpp"

namespace {

flashdeberta::Tokenizer load_lower_punct() {
  // spm_lower_punct/ holds configs only; load_tokenizer needs them next to the model.
  flashdeberta::fuzz::ScratchDir const dir("fuzz_spm_tokenizer");
  std::filesystem::path const fixtures = FLASHDEBERTA_FIXTURE_DIR "/tokenizers";
  dir.copy_in(fixtures / "spm" / "spm.model");
  for (char const* name : {"tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"}) {
    dir.copy_in(fixtures / "spm_lower_punct" / name);
  }
  return flashdeberta::load_tokenizer(dir.path());
}

}  // namespace

FLASHDEBERTA_FUZZ_TARGET(spm_tokenizer) {
  static flashdeberta::Tokenizer const plain = flashdeberta::load_tokenizer(FLASHDEBERTA_FIXTURE_DIR "/tokenizers/spm");
  static flashdeberta::Tokenizer const lower_punct = load_lower_punct();
  std::string_view input = flashdeberta::fuzz::as_text(data, size);
  flashdeberta::fuzz::EncodeRequest const request = flashdeberta::fuzz::take_encode_request(input);
  try {
    flashdeberta::fuzz::encode_and_check((request.target_bits & 1) != 0 ? lower_punct : plain, request, input);
  } catch (flashdeberta::Error const&) {
  }
  return 0;
}
