// flashdeberta gliner: GLiNER's zero-shot named entities (docs/gliner.md) of texts for labels given at run
// time, from a GLiNER model directory (runtime::GlinerModel); each batch of texts is one packed forward.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flashdeberta/gliner/gliner_long_text.hpp"
#include "flashdeberta/pipelines/zero_shot.hpp"
#include "flashdeberta/runtime/gliner.hpp"
#include "pipeline_common.hpp"

namespace flashdeberta::cli {

std::string gliner_help() {
  return "usage: flashdeberta gliner --model DIR --labels A,B,C [--threshold T] [--nested] [--multi-label]\n"
         "                           [--long-text truncate|windows|single-pass] [--window-overlap N]\n"
         "                           [options] [TEXT...]\n"
         "\n"
         "Finds the entities of each TEXT (or, without TEXT, each line of stdin) for the labels, with a GLiNER\n"
         "model directory as GLiNER's save_pretrained writes it (gliner_config.json, model.safetensors or\n"
         "pytorch_model.bin, tokenizer files), as GLiNER 0.2.27's predict_entities: uni-encoder span and\n"
         "token-level models on a DeBERTa-v2/v3 backbone (docs/gliner.md). Prints {\"text\": ..., \"entities\":\n"
         "[{\"start\", \"end\", \"text\", \"label\", \"score\"}, ...]} in GLiNER's order; start and end count Unicode\n"
         "code points of the text (Python's str indices). By default a text longer than the model's max_len\n"
         "words is cut as GLiNER cuts it; --long-text windows reads all of it (docs/gliner.md, \"Long texts\").\n"
         "--max-tokens counts the tokens of a batch with each text's (each window's) label prompt.\n"
         "\n"
         "  --labels A,B,C       the entity labels, comma-separated (white space around each is dropped)\n"
         "  --threshold T        the least score of an entity, in [0, 1] (default 0.5)\n"
         "  --nested             keep overlapping entities (GLiNER's flat_ner=False)\n"
         "  --multi-label        a span may carry several labels (GLiNER's multi_label=True)\n"
         "  --long-text M        truncate (default): GLiNER 0.2.27's cut at max_len words and the tokenizer's\n"
         "                       model_max_length; windows: overlapping windows of at most max_len words,\n"
         "                       their entities merged and decoded as one pass; single-pass: every word in\n"
         "                       one sequence, uncut (beyond GLiNER: its results differ on long texts)\n"
         "  --window-overlap N   words shared by neighbouring windows, below max_len (default max_len / 4)\n" +
         pipeline_common_help() +
         "GLiNER runs on --backend eigen, kokkos or cuda, in fp32; --tokenizer is not taken (the model\n"
         "directory holds GLiNER's own tokenizer).\n";
}

int gliner_command(std::span<char const* const> args) {
  ExtraOption const extras[] = {
      {.name = "labels", .required = true},  {.name = "threshold"}, {.name = "nested", .flag = true},
      {.name = "multi-label", .flag = true}, {.name = "long-text"}, {.name = "window-overlap"}};
  auto const options = parse_pipeline_options("gliner", args, extras, true);
  if (!options) {
    std::cout << gliner_help();
    return 0;
  }
  if (options->tokenizer) {
    throw UsageError(
        "--tokenizer: GLiNER reads the tokenizer of its model directory (see 'flashdeberta gliner --help')");
  }
  std::vector<std::string> const labels = pipelines::parse_candidate_labels(*options->labels);
  if (labels.empty()) {
    throw UsageError("--labels '" + *options->labels +
                     "' holds no label (give them comma-separated: --labels person,location; see 'flashdeberta "
                     "gliner --help')");
  }
  GlinerLongText long_text = GlinerLongText::kTruncate;
  if (options->long_text) {
    std::optional<GlinerLongText> const mode = parse_gliner_long_text(*options->long_text);
    if (!mode) {
      throw UsageError("--long-text '" + *options->long_text +
                       "' is not truncate, windows or single-pass (see 'flashdeberta gliner --help')");
    }
    long_text = *mode;
  }
  if (options->window_overlap && long_text != GlinerLongText::kWindows) {
    throw UsageError("--window-overlap needs --long-text windows (see 'flashdeberta gliner --help')");
  }
  GlinerOptions const gliner_options{.threshold = options->threshold.value_or(0.5),
                                     .flat_ner = !options->nested,
                                     .multi_label = options->multi_label,
                                     .long_text = long_text,
                                     .window_overlap = options->window_overlap};
  auto const start = std::chrono::steady_clock::now();
  runtime::GlinerModel const model(options->common);
  if (options->timing) {
    std::chrono::duration<double, std::milli> const load = std::chrono::steady_clock::now() - start;
    std::fprintf(stderr, "flashdeberta: loaded %s in %.1f ms\n", options->common.model.string().c_str(), load.count());
  }
  for_each_batch(*options, [&](std::vector<std::string> const& texts, std::size_t first) {
    runtime::GlinerRun const run{.names = runtime::InputNames::numbered("text", first),
                                 .batch_size = static_cast<std::size_t>(options->batch_size)};
    auto const results = model.predict_entities(texts, labels, gliner_options, run);
    for (std::size_t i = 0; i < texts.size(); ++i)
      print_line({{"text", texts[i]}, {"entities", runtime::gliner_entities_json(results[i])}});
  });
  return 0;
}

}  // namespace flashdeberta::cli
