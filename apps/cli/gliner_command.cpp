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

int gliner_command(std::span<char const* const> args) {
  auto const options = parse_pipeline_options("gliner", args);
  if (!options) return 0;  // --help printed the help
  std::vector<std::string> const labels = pipelines::parse_candidate_labels(*options->labels);
  if (labels.empty()) {
    throw UsageError("--labels '" + *options->labels +
                     "' holds no label (give them comma-separated: --labels person,location; see 'flashdeberta "
                     "gliner --help')");
  }
  GlinerLongText const long_text = options->long_text.value_or(GlinerLongText::kTruncate);
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
  std::size_t const refused = for_each_batch(*options, [&](std::vector<std::string> const& texts, std::size_t first) {
    runtime::GlinerRun const run{.names = runtime::InputNames::numbered("text", first),
                                 .batch_size = static_cast<std::size_t>(options->batch_size)};
    auto const results = model.predict_entities(texts, labels, gliner_options, run);
    for (std::size_t i = 0; i < texts.size(); ++i)
      print_line({{"text", texts[i]}, {"entities", runtime::gliner_entities_json(results[i])}});
  });
  return exit_status(refused);
}

}  // namespace flashdeberta::cli
