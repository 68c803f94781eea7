// flashdeberta classify: HF's text-classification pipeline with top_k=None (or --top-k K). Every label of
// id2label (or the K best) with its probability, highest first: softmax, or a sigmoid per label when config.json's
// problem_type is multi_label_classification (or the model has one label). Text pairs (an NLI premise and
// hypothesis, a query and a passage) come from --pair or from JSON lines (--jsonl), HF's {"text", "text_pair"}.
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flashdeberta/io/json.hpp"
#include "pipeline_common.hpp"

namespace flashdeberta::cli {

namespace {

// A --jsonl line: {"text": "...", "text_pair": "..."}, text_pair optional (null counts as absent), as HF's
// text-classification takes a dict; read as strictly as every JSON the program reads (io::parse_json: no
// NUL byte, no duplicate key), anything else refused as text `index`.
runtime::TextInput parse_json_line(std::string const& line, std::size_t index) {
  std::string const source = "text " + std::to_string(index);
  io::Json doc;
  try {
    doc = io::parse_json(line, source, "the line");
  } catch (Error const& e) {
    throw runtime::InputError(runtime::InputError::Kind::kInvalid,
                              std::string(e.what()) + " (--jsonl reads {\"text\": ..., \"text_pair\": ...} per line)");
  }
  if (!doc.is_object()) {
    fail_text(index, "the line is a JSON " + std::string(doc.type_name()) +
                         ", not an object {\"text\": ..., \"text_pair\": ...} (--jsonl)");
  }
  runtime::TextInput input;
  bool has_text = false;
  for (auto const& item : doc.items()) {
    std::string const& key = item.key();
    if (key != "text" && key != "text_pair") {
      fail_text(index, "unknown key '" + key + "' (a --jsonl line holds \"text\" and optionally \"text_pair\")");
    }
    if (key == "text_pair" && item.value().is_null()) continue;
    if (!item.value().is_string()) {
      fail_text(index, "\"" + key + "\" is a JSON " + std::string(item.value().type_name()) + ", not a string");
    }
    (key == "text" ? input.text : input.pair.emplace()) = item.value().get<std::string>();
    has_text = has_text || key == "text";
  }
  if (!has_text) fail_text(index, "the line has no \"text\" (--jsonl reads {\"text\": ..., \"text_pair\": ...})");
  return input;
}

}  // namespace

int classify_command(std::span<char const* const> args) {
  auto const options = parse_pipeline_options("classify", args);
  if (!options) return 0;  // --help printed the help
  if (options->jsonl && !options->texts.empty()) {
    throw UsageError(
        "--jsonl reads JSON lines from stdin, so it takes no TEXT arguments (see 'flashdeberta "
        "classify --help')");
  }
  if (options->jsonl && options->pair) {
    throw UsageError(
        "--pair and --jsonl do not go together: give each line its \"text_pair\" (see 'flashdeberta "
        "classify --help')");
  }
  auto const pipeline = load_pipeline(*options, HeadKind::kSequenceClassification, "classify");
  runtime::ClassifyOptions task;
  if (options->top_k) task.top_k = static_cast<std::size_t>(*options->top_k);
  std::size_t const refused = for_each_batch(*options, [&](std::vector<std::string> const& lines, std::size_t first) {
    std::vector<runtime::TextInput> inputs;
    for (std::size_t i = 0; i < lines.size(); ++i)
      inputs.push_back(options->jsonl ? parse_json_line(lines[i], first + i)
                                      : runtime::TextInput{lines[i], options->pair});
    auto const results = pipeline->classify(inputs, task, text_run(*pipeline, first));
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      JsonOut line = {{"text", inputs[i].text}};
      if (inputs[i].pair) line["text_pair"] = *inputs[i].pair;
      line["labels"] = runtime::labels_json(results[i]);
      print_line(line);
    }
  });
  return exit_status(refused);
}

}  // namespace flashdeberta::cli
