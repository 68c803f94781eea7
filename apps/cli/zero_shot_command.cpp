// flashdeberta zero-shot: HF's zero-shot-classification pipeline on an NLI checkpoint. Each text is paired
// with the hypothesis of every candidate label, all pairs of a batch of texts run as one packed forward
// pass, and the entailment logits rank the labels (runtime::Pipeline::zero_shot).
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flashdeberta/core/error.hpp"
#include "pipeline_common.hpp"

namespace flashdeberta::cli {

int zero_shot_command(std::span<char const* const> args) {
  auto const options = parse_pipeline_options("zero-shot", args);
  if (!options) return 0;  // --help printed the help
  runtime::ZeroShotOptions task{.candidate_labels = pipelines::parse_candidate_labels(*options->labels),
                                .multi_label = options->multi_label};
  if (task.candidate_labels.empty()) {
    throw UsageError("--labels '" + *options->labels +
                     "' holds no label (give them comma-separated: --labels sports,politics; see 'flashdeberta "
                     "zero-shot --help')");
  }
  if (options->hypothesis_template) task.hypothesis_template = *options->hypothesis_template;
  try {  // before the model loads
    pipelines::hypotheses(task.hypothesis_template, task.candidate_labels);
  } catch (Error const& e) {
    throw UsageError("--hypothesis-template: " + std::string(e.what()) + " (see 'flashdeberta zero-shot --help')");
  }
  auto const pipeline = load_pipeline(*options, HeadKind::kSequenceClassification, "zero-shot");
  pipeline->check_zero_shot(task);  // the checkpoint's labels (an entailment label), before any input is read
  std::size_t const refused = for_each_batch(*options, [&](std::vector<std::string> const& texts, std::size_t first) {
    auto const results = pipeline->zero_shot(texts, task, text_run(*pipeline, first));
    for (std::size_t i = 0; i < texts.size(); ++i) print_line(runtime::zero_shot_json(texts[i], results[i]));
  });
  return exit_status(refused);
}

}  // namespace flashdeberta::cli
