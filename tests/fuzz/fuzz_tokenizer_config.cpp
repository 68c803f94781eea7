// libFuzzer target: the tokenizer side of a checkpoint directory, as
//   tokenizer_config.json 0xFF special_tokens_map.json 0xFF added_tokens.json
// (an empty part: that file is absent). load_tokenizer_config reads them from a scratch folder; an
// accepted configuration is then assembled with the BPE vocabulary of tests/fixtures/tokenizers/bpe
// (loaded once) into a Tokenizer, which must encode a text holding every special and added token.
// Any other outcome than a result keeping the invariants below or a flashdeberta::Error is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/tokenizer/tokenizer.hpp"
#include "fuzz_support.hpp"

namespace fz = flashdeberta::fuzz;
namespace tk = flashdeberta::tokenizer;

namespace {

constexpr char const* kFiles[] = {"tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"};

void check_config(tk::TokenizerConfig const& c, std::vector<std::string> const& present) {
  fz::fuzz_check(c.files_read == present, "files_read differs from the files present");
  for (auto const& [id, token] : c.added_tokens_decoder) {
    fz::fuzz_check(id >= 0 && token.id == id, "added_tokens_decoder entry with a wrong id");
  }
  for (auto const& [content, id] : c.added_tokens_json) fz::fuzz_check(id >= 0, "added_tokens.json negative id");
}

// Every token the tokenizer matches in raw text, between plain words.
std::string text_with_added_tokens(tk::Tokenizer const& tok) {
  std::string text = "Hello";
  for (tk::AddedToken const& t : tok.added_tokens()) text += " " + t.content + " world";
  return text;
}

}  // namespace

FLASHDEBERTA_FUZZ_TARGET(tokenizer_config) {
  static fz::ScratchDir const dir("fuzz_tokenizer_config");
  static auto const bpe = tk::Gpt2BpeModel::load(FLASHDEBERTA_FIXTURE_DIR "/tokenizers/bpe");
  std::vector<std::string_view> const parts = fz::split_input(fz::as_text(data, size), 3);
  std::vector<std::string> present;
  for (std::size_t i = 0; i < 3; ++i) {
    if (i < parts.size() && !parts[i].empty()) {
      dir.write(kFiles[i], parts[i]);
      present.emplace_back(kFiles[i]);
    } else {
      dir.remove(kFiles[i]);
    }
  }
  try {
    tk::TokenizerConfig const config = tk::load_tokenizer_config(dir.path());
    check_config(config, present);
    tk::Tokenizer const tok = tk::detail::assemble(bpe, config, dir.path(), 4);
    for (tk::AddedToken const& t : tok.added_tokens()) {
      fz::fuzz_check(!t.content.empty() && t.id >= 0, "an empty or id-less added token was accepted");
      fz::fuzz_check(tok.id_to_token(t.id).has_value(), "an added token's id does not map back to a token");
    }
    fz::fuzz_check(tok.special_ids().cls >= 0 && tok.special_ids().sep >= 0 && tok.special_ids().pad >= 0 &&
                       tok.mask_token_id() >= 0,
                   "a special token without an id");
    std::string const text = text_with_added_tokens(tok);
    tk::EncodeOptions const options;
    fz::check_encoding(tok, tok.encode(text, options), text, nullptr, options);
  } catch (flashdeberta::Error const&) {
  }
  return 0;
}
