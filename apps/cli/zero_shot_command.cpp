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

std::string zero_shot_help() {
  return "usage: flashdeberta zero-shot --model DIR --labels A,B,C [--multi-label] [--hypothesis-template T]\n"
         "                              [options] [TEXT...]\n"
         "\n"
         "Classifies each TEXT (or, without TEXT, each line of stdin) into the candidate labels with an NLI\n"
         "checkpoint (a sequence-classification one whose id2label has a label starting with 'entail'), as\n"
         "HF's zero-shot-classification pipeline: the text is the premise, T with the label in place of {} the\n"
         "hypothesis. Prints {\"sequence\": ..., \"labels\": [...], \"scores\": [...]}, the labels best first.\n"
         "Scores are the softmax of the entailment logits over the labels (they sum to 1), or with\n"
         "--multi-label (or a single label) each label's own softmax of entailment against contradiction\n"
         "(the last label when entailment is label 0, else label 0, as HF). The premise is cut to the\n"
         "tokenizer's model_max_length when it has one, as HF. Each batch of texts runs with all its labels'\n"
         "pairs in one forward pass, so --batch-size counts texts and --max-tokens covers texts x labels.\n"
         "\n"
         "  --labels A,B,C       the candidate labels, comma-separated (white space around each is dropped)\n"
         "  --multi-label        score each label on its own (several may hold)\n"
         "  --hypothesis-template T\n"
         "                       the hypothesis, {} standing for the label (default \"" +
         std::string(pipelines::kDefaultHypothesisTemplate) + "\")\n" + pipeline_common_help();
}

int zero_shot_command(std::span<char const* const> args) {
  ExtraOption const extras[] = {
      {.name = "labels", .required = true}, {.name = "multi-label", .flag = true}, {.name = "hypothesis-template"}};
  auto const options = parse_pipeline_options("zero-shot", args, extras, true);
  if (!options) {
    std::cout << zero_shot_help();
    return 0;
  }
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
  for_each_batch(*options, [&](std::vector<std::string> const& texts, std::size_t first) {
    auto const results = pipeline->zero_shot(texts, task, text_run(*pipeline, first));
    for (std::size_t i = 0; i < texts.size(); ++i) print_line(runtime::zero_shot_json(texts[i], results[i]));
  });
  return 0;
}

}  // namespace flashdeberta::cli
