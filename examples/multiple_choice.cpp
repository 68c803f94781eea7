// Multiple choice with the library API: a multiple-choice checkpoint scores each choice (a prompt paired
// with one candidate answer) and the highest logit wins, as HF's *ForMultipleChoice.
//
//   multiple_choice MODEL_DIR CHOICE CHOICE...
//
// Each CHOICE is the token ids of one sequence, space-separated, optionally followed by '|' and its
// token type ids: "1 523 2088 2 99 2 | 0 0 0 0 1 1". With a tokenizer they are
// tok.encode(prompt, answer).input_ids and .token_type_ids; the choices need no padding.
#include <cstdio>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "flashdeberta/eigen/eigen_policy.hpp"
#include "flashdeberta/flashdeberta.hpp"
#include "flashdeberta/heads/heads.hpp"
#include "flashdeberta/pipelines/scores.hpp"

namespace {

std::vector<std::int32_t> parse_ids(std::string const& text) {
  std::istringstream in(text);
  std::vector<std::int32_t> ids;
  for (std::int32_t id = 0; in >> id;) ids.push_back(id);
  if (!in.eof()) throw flashdeberta::Error("'" + text + "' is not a list of token ids");
  return ids;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL_DIR CHOICE CHOICE... (CHOICE: \"IDS [| TYPE_IDS]\")\n", argv[0]);
    return 2;
  }
  using Model = flashdeberta::DebertaV3ForMultipleChoice<flashdeberta::EigenPolicy>;
  Model const model = Model::load(flashdeberta::EigenPolicy(/*threads=*/0), argv[1]);

  // One example of C choices is C sequences of one batch (B examples: B * C sequences, example-major).
  flashdeberta::Batch batch;
  for (int c = 2; c < argc; ++c) {
    std::string const arg = argv[c];
    std::size_t const bar = arg.find('|');
    std::vector<std::int32_t> const ids = parse_ids(arg.substr(0, bar));
    std::vector<std::int32_t> const types =
        bar == std::string::npos ? std::vector<std::int32_t>{} : parse_ids(arg.substr(bar + 1));
    if (ids.empty() || (!types.empty() && types.size() != ids.size()))
      throw flashdeberta::Error("choice " + std::to_string(c - 1) + ": empty, or not one type id per token id");
    batch.add_sequence(ids, types);
  }
  flashdeberta::HeadOutput const out = model.forward_to_host(batch);
  std::vector<float> const& logits = out["logits"].values;  // one per choice

  std::size_t best = 0;
  for (std::size_t c = 0; c < logits.size(); ++c) {
    std::printf("choice %zu: logit %+.4f\n", c, logits[c]);
    if (logits[c] > logits[best]) best = c;
  }
  std::vector<float> const p = flashdeberta::pipelines::softmax(logits);
  std::printf("best: choice %zu (probability %.4f)\n", best, p[best]);
  return 0;
} catch (std::exception const& e) {  // flashdeberta::Error: a missing file, a bad token id, ...
  std::fprintf(stderr, "multiple_choice: error: %s\n", e.what());
  return 1;
}
