// libFuzzer target: arbitrary bytes as text for the GPT-2 byte-level BPE tokenizer (DeBERTa v1), loaded
// once from tests/fixtures/tokenizers/bpe. The first two bytes choose single text or pair, special
// tokens, truncation and max_length (fuzz_support.hpp); a pair's texts are split at the first 0xFF.
// Invalid UTF-8 and truncation the options cannot satisfy are refused with flashdeberta::Error; any
// other outcome than an Encoding that keeps check_encoding's invariants is a bug.
#include <cstddef>
#include <cstdint>

#include "flashdeberta/tokenizer/tokenizer.hpp"
#include "fuzz_support.hpp"

FLASHDEBERTA_FUZZ_TARGET(bpe_tokenizer) {
  static flashdeberta::Tokenizer const tok = flashdeberta::load_tokenizer(FLASHDEBERTA_FIXTURE_DIR "/tokenizers/bpe");
  std::string_view input = flashdeberta::fuzz::as_text(data, size);
  flashdeberta::fuzz::EncodeRequest const request = flashdeberta::fuzz::take_encode_request(input);
  try {
    flashdeberta::fuzz::encode_and_check(tok, request, input);
  } catch (flashdeberta::Error const&) {
  }
  return 0;
}
