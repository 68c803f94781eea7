// Tokenizes a text with an installed flashdeberta::tokenizers (SentencePiece, v2/v3).
#include <cstdio>

#include <flashdeberta/tokenizer/tokenizer.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer_tokenize TOKENIZER_DIR\n");
    return 2;
  }
  try {
    auto const tok = flashdeberta::load_tokenizer(argv[1]);
    auto const e = tok.encode("Paris is the [MASK] of France.");
    std::printf("consumer_tokenize: %zu tokens, [MASK] = %lld\n", e.size(),
                static_cast<long long>(tok.mask_token_id()));
    return e.size() > 2 && e.input_ids.front() == 1 && e.input_ids.back() == 2 ? 0 : 1;
  } catch (flashdeberta::Error const& e) {
    std::fprintf(stderr, "consumer_tokenize: %s\n", e.what());
    return 1;
  }
}
