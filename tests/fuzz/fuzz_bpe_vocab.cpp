// libFuzzer target: a BPE vocabulary, as vocab.json 0xFF merges.txt 0xFF text. The two files are
// written into a scratch folder and loaded with Gpt2BpeModel::load; an accepted vocabulary then
// encodes the text (a fixed sentence when the input has no third part) through a Tokenizer with the
// default special tokens, and the Encoding must keep check_encoding's invariants. Any other outcome
// than that or a flashdeberta::Error is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "flashdeberta/tokenizer/tokenizer.hpp"
#include "fuzz_support.hpp"

namespace fz = flashdeberta::fuzz;
namespace tk = flashdeberta::tokenizer;

FLASHDEBERTA_FUZZ_TARGET(bpe_vocab) {
  static fz::ScratchDir const dir("fuzz_bpe_vocab");
  std::vector<std::string_view> const parts = fz::split_input(fz::as_text(data, size), 3);
  dir.write("vocab.json", parts[0]);
  dir.write("merges.txt", parts.size() > 1 ? parts[1] : std::string_view{});
  std::string_view const text = parts.size() > 2 ? parts[2] : std::string_view("Hello world, it's 42 naïve cafés!");
  try {
    auto const model = tk::Gpt2BpeModel::load(dir.path());
    fz::fuzz_check(model->vocab_size() > 0, "an empty vocabulary was accepted");
    tk::Tokenizer const tok = tk::detail::assemble(model, tk::TokenizerConfig{}, dir.path(), 4);
    tk::EncodeOptions const options;
    tk::Encoding const e = tok.encode(text, options);
    fz::check_encoding(tok, e, text, nullptr, options);
    for (std::size_t i = 0; i < e.size(); ++i) {
      if (e.sequence_ids[i] < 0) continue;
      if (auto const id = model->token_to_id(e.tokens[i]); id.has_value()) {
        fz::fuzz_check(model->id_to_token(*id) == e.tokens[i], "token -> id -> token does not round-trip");
      }
    }
    fz::check_decodes(tok, e.input_ids, false);
  } catch (flashdeberta::Error const&) {
  }
  return 0;
}
