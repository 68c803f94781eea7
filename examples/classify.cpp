// Text classification with the library API: a sequence-classification checkpoint scores a text; every
// label with its probability, highest first, as HF's text-classification pipeline (top_k=None).
//
//   classify MODEL_DIR [TEXT [TOKENIZER_DIR]]   (TOKENIZER_DIR: where MODEL_DIR has no tokenizer files)
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
  std::string const text = argc > 2 ? argv[2] : "I really enjoyed this movie, it was great!";
  flashdeberta::Tokenizer const tok = flashdeberta::load_tokenizer(argc > 3 ? argv[3] : argv[1]);
  using Model = flashdeberta::DebertaV3ForSequenceClassification<flashdeberta::EigenPolicy>;
  Model const model = Model::load(flashdeberta::EigenPolicy(/*threads=*/0), argv[1]);

  flashdeberta::Encoding const e = tok.encode(text);
  std::vector<std::int32_t> const ids(e.input_ids.begin(), e.input_ids.end());
  flashdeberta::Batch batch;
  batch.add_sequence(ids);  // more texts: one add_sequence each, one logits row per sequence
  flashdeberta::HeadOutput const out = model.forward_to_host(batch);

  // id2label from config.json (LABEL_<i> where it has none). HF uses a sigmoid per label instead of the
  // softmax for problem_type "multi_label_classification" or a single label.
  std::vector<std::string> const labels = flashdeberta::label_names(model.config());
  auto const function = flashdeberta::pipelines::classification_function("", labels.size());
  std::printf("%s\n", text.c_str());
  for (auto const& s : flashdeberta::pipelines::classify(out["logits"].values, labels, function))
    std::printf("  %-12s %.4f\n", s.label.c_str(), s.score);
  return 0;
} catch (std::exception const& e) {  // flashdeberta::Error: a missing file, a wrong checkpoint, ...
  std::fprintf(stderr, "classify: error: %s\n", e.what());
  return 1;
}
