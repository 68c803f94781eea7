// libFuzzer target: a tokenizer directory holding only tokenizer.json (HF's tokenizers pipeline: normalizer,
// pre-tokenizer, Unigram or BPE model, post-processor, added tokens), as
//   [2 bytes of encode options] tokenizer.json 0xFF text [0xFF pair]
// load_tokenizer reads the file from a scratch folder; an accepted file must then encode the text (options
// from the first two bytes, fuzz_support.hpp) into an Encoding that keeps check_encoding's invariants, and
// its ids must decode. A refusal is a flashdeberta::Error; anything else (a crash, a sanitizer report, an
// id the vocabulary lacks, offsets outside the text) is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "flashdeberta/tokenizer/tokenizer.hpp"
#include "fuzz_support.hpp"

namespace fz = flashdeberta::fuzz;

FLASHDEBERTA_FUZZ_TARGET(tokenizer_json) {
  static fz::ScratchDir const dir("fuzz_tokenizer_json");
  std::string_view input = fz::as_text(data, size);
  fz::EncodeRequest request = fz::take_encode_request(input);
  // Bounded work per input: a hostile file may make long texts expensive, which the token limit caps.
  request.options.token_limit = 4096;
  std::size_t const cut = input.find(fz::kSeparator);
  std::string_view const file = input.substr(0, cut);
  std::string_view const text = cut == std::string_view::npos ? std::string_view{} : input.substr(cut + 1);
  dir.write("tokenizer.json", file);
  try {
    flashdeberta::Tokenizer const tok = flashdeberta::load_tokenizer(dir.path());
    fz::encode_and_check(tok, request, text, fz::Template::kFromFile);
  } catch (flashdeberta::Error const&) {
  }
  return 0;
}
