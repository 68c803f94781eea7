// Fill-mask with the library API: a masked-LM checkpoint predicts the token at [MASK]; the top 5 with
// their probabilities, as HF's fill-mask pipeline.
//
//   fill_mask MODEL_DIR [TEXT [TOKENIZER_DIR]]   (TOKENIZER_DIR: where MODEL_DIR has no tokenizer files)
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "flashdeberta/eigen/eigen_policy.hpp"
#include "flashdeberta/flashdeberta.hpp"
#include "flashdeberta/heads/heads.hpp"
#include "flashdeberta/pipelines/pipelines.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"

int main(int argc, char** argv) try {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [TEXT [TOKENIZER_DIR]]\n", argv[0]);
    return 2;
  }
  std::string const text = argc > 2 ? argv[2] : "The capital of France is [MASK].";
  flashdeberta::Tokenizer const tok = flashdeberta::load_tokenizer(argc > 3 ? argv[3] : argv[1]);
  using Model = flashdeberta::DebertaV3ForMaskedLM<flashdeberta::EigenPolicy>;
  Model const model = Model::load(flashdeberta::EigenPolicy(/*threads=*/0), argv[1]);

  flashdeberta::Encoding const e = tok.encode(text);
  std::vector<std::int32_t> const ids(e.input_ids.begin(), e.input_ids.end());
  flashdeberta::Batch batch;
  batch.add_sequence(ids);
  // Ask for the logits of the mask tokens only: the vocabulary GEMM is the largest of the model.
  std::int64_t const mask_id = tok.mask_token_id();
  auto const request = flashdeberta::HeadRequest::tokens_with_id(batch, mask_id);
  if (request.tokens->empty()) throw flashdeberta::Error("no [MASK] token in \"" + text + "\"");
  flashdeberta::HeadOutput const out = model.forward_to_host(batch, request);

  std::vector<std::size_t> const masks(request.tokens->begin(), request.tokens->end());
  auto const decode = [&](std::span<std::int64_t const> ids, bool skip) {
    return tok.decode_dropping_unknown(ids, skip);
  };
  auto const predictions = flashdeberta::pipelines::fill_mask(e.input_ids, masks, out["logits"].values,
                                                              static_cast<std::size_t>(model.config().vocab_size),
                                                              /*k=*/5, tok.special_ids().pad, decode);
  std::printf("%s\n", text.c_str());
  for (std::size_t m = 0; m < predictions.size(); ++m) {
    std::printf("mask %zu:\n", m + 1);
    for (auto const& p : predictions[m])
      std::printf("  %.4f  %-12s -> %s\n", p.score, ("'" + p.token_str + "'").c_str(), p.sequence.c_str());
  }
  return 0;
} catch (std::exception const& e) {  // flashdeberta::Error: a missing file, a wrong checkpoint, ...
  std::fprintf(stderr, "fill_mask: error: %s\n", e.what());
  return 1;
}
