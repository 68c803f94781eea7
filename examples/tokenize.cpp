// Tokenization with the library API: load a checkpoint's tokenizer, encode one text and one pair, print
// the ids, tokens and character offsets (code points of the text) as HF's tokenizer gives them.
//
//   tokenize TOKENIZER_DIR [TEXT [PAIR]]   (spm.model, or vocab.json + merges.txt; tokenizer_config.json)
#include <cstdio>
#include <exception>
#include <string>

#include "flashdeberta/tokenizer/tokenizer.hpp"

namespace {

void print(char const* title, flashdeberta::Encoding const& e) {
  std::printf("%s: %zu tokens\n  ids:", title, e.size());
  for (std::int64_t id : e.input_ids) std::printf(" %lld", static_cast<long long>(id));
  std::printf("\n  types:");
  for (std::int64_t t : e.token_type_ids) std::printf(" %lld", static_cast<long long>(t));
  std::printf("\n");
  for (std::size_t t = 0; t < e.size(); ++t) {
    std::printf("  %3zu  %6lld  [%lld, %lld)  %s\n", t, static_cast<long long>(e.input_ids[t]),
                static_cast<long long>(e.offsets[t].begin), static_cast<long long>(e.offsets[t].end),
                e.tokens[t].c_str());
  }
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: %s TOKENIZER_DIR [TEXT [PAIR]]\n", argv[0]);
    return 2;
  }
  std::string const text = argc > 2 ? argv[2] : "Hello world";
  std::string const pair = argc > 3 ? argv[3] : "How are you?";
  flashdeberta::Tokenizer const tok = flashdeberta::load_tokenizer(argv[1]);

  flashdeberta::Encoding const single = tok.encode(text);  // [CLS] text [SEP]
  print("text", single);
  flashdeberta::Encoding const both = tok.encode(text, pair);  // [CLS] text [SEP] pair [SEP], types 0 then 1
  print("pair", both);
  std::printf("decoded: %s\n", tok.decode(both.input_ids, /*skip_special_tokens=*/true).c_str());
  return 0;
} catch (std::exception const& e) {  // flashdeberta::Error names the file and what is wrong with it
  std::fprintf(stderr, "tokenize: error: %s\n", e.what());
  return 1;
}
