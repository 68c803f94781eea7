// Named-entity recognition with the library API: a token-classification checkpoint labels each token,
// and neighbouring tokens of one entity type are grouped into spans, as HF's token-classification
// pipeline with aggregation_strategy="simple".
//
//   ner MODEL_DIR [TEXT [TOKENIZER_DIR]]   (TOKENIZER_DIR: where MODEL_DIR has no tokenizer files)
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
  std::string const text = argc > 2 ? argv[2] : "My name is Wolfgang and I live in Berlin.";
  flashdeberta::Tokenizer const tok = flashdeberta::load_tokenizer(argc > 3 ? argv[3] : argv[1]);
  using Model = flashdeberta::DebertaV3ForTokenClassification<flashdeberta::EigenPolicy>;
  Model const model = Model::load(flashdeberta::EigenPolicy(/*threads=*/0), argv[1]);

  flashdeberta::Encoding const e = tok.encode(text);
  std::vector<std::int32_t> const ids(e.input_ids.begin(), e.input_ids.end());
  flashdeberta::Batch batch;
  batch.add_sequence(ids);
  flashdeberta::HeadOutput const out = model.forward_to_host(batch);  // logits: a row per token

  // Each text token's best label (softmax), then B-/I- runs of one type merged into entities.
  std::vector<std::string> const labels = flashdeberta::label_names(model.config());
  auto const predictions = flashdeberta::pipelines::token_predictions(e, out["logits"].values, labels.size());
  auto const decode = [&](std::span<std::int64_t const> ids) { return tok.decode(ids); };
  auto const entities = flashdeberta::pipelines::group_entities_simple(e, predictions, labels, decode);

  std::printf("%s\n", text.c_str());
  for (auto const& entity : entities) {
    // start/end count code points of the text; substr_code_points turns them into the UTF-8 span.
    std::printf("  %-6s %.4f  [%lld, %lld)  '%s'\n", entity.entity_group.c_str(), entity.score,
                static_cast<long long>(entity.start), static_cast<long long>(entity.end),
                flashdeberta::pipelines::substr_code_points(text, entity.start, entity.end).c_str());
  }
  return 0;
} catch (std::exception const& e) {  // flashdeberta::Error: a missing file, a wrong checkpoint, ...
  std::fprintf(stderr, "ner: error: %s\n", e.what());
  return 1;
}
