// flashdeberta classify: HF's text-classification pipeline with top_k=None (or --top-k K). Every label of
// id2label (or the K best) with its probability, highest first: softmax, or a sigmoid per label when config.json's
// problem_type is multi_label_classification (or the model has one label). Text pairs (an NLI premise and
// hypothesis, a query and a passage) come from --pair or from JSON lines (--jsonl), HF's {"text", "text_pair"}.
#include <iostream>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "pipeline_common.hpp"

namespace flashdeberta::cli {

namespace {

// One input: a text and, for a text pair, its second sequence.
struct ClassifyInput {
  std::string text;
  std::optional<std::string> pair;
};

// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string json_error_message(std::exception const& e) {
  std::string message = e.what();
  std::size_t const tag_end = message.find("] ");
  return message.starts_with("[json.exception.") && tag_end != std::string::npos ? message.substr(tag_end + 2)
                                                                                 : message;
}

// A --jsonl line: {"text": "...", "text_pair": "..."}, text_pair optional (null counts as absent), as HF's
// text-classification takes a dict; anything else is refused as text `index`.
ClassifyInput parse_json_line(std::string const& line, std::size_t index) {
  // nlohmann stops reading at a NUL byte, so '{"text": "a"}\0anything' would parse.
  if (std::size_t const nul = line.find('\0'); nul != std::string::npos) {
    fail_text(index, "the line has a NUL byte at offset " + std::to_string(nul) +
                         "; a --jsonl line is one JSON object {\"text\": ..., \"text_pair\": ...}");
  }
  // nlohmann keeps the last of two equal keys; refused, as every JSON the program reads.
  std::set<std::string> keys;
  auto const on_event = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && !keys.insert(parsed.get<std::string>()).second) {
      fail_text(index, "the line has duplicate key '" + parsed.get<std::string>() + "' (--jsonl)");
    }
    return true;
  };
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(line, on_event);
  } catch (nlohmann::json::exception const& e) {
    fail_text(index,
              "not a JSON line (--jsonl reads {\"text\": ..., \"text_pair\": ...} per line): " + json_error_message(e));
  }
  if (!doc.is_object()) {
    fail_text(index, std::string("the line is a JSON ") + doc.type_name() +
                         ", not an object {\"text\": ..., \"text_pair\": ...} (--jsonl)");
  }
  ClassifyInput input;
  bool has_text = false;
  for (auto const& item : doc.items()) {
    std::string const& key = item.key();
    if (key != "text" && key != "text_pair") {
      fail_text(index, "unknown key '" + key + "' (a --jsonl line holds \"text\" and optionally \"text_pair\")");
    }
    if (key == "text_pair" && item.value().is_null()) continue;
    if (!item.value().is_string()) {
      fail_text(index, "\"" + key + "\" is a JSON " + item.value().type_name() + ", not a string");
    }
    if (key == "text") {
      input.text = item.value().get<std::string>();
      has_text = true;
    } else {
      input.pair = item.value().get<std::string>();
    }
  }
  if (!has_text) fail_text(index, "the line has no \"text\" (--jsonl reads {\"text\": ..., \"text_pair\": ...})");
  return input;
}

// Classifies `inputs` (numbered from `first`) and prints a line per input. A forward pass takes either texts
// alone or pairs, so a batch mixing both runs as consecutive runs of one kind, in input order.
void classify_and_print(Pipeline const& pipeline, std::vector<ClassifyInput> const& inputs, std::size_t first,
                        std::optional<std::size_t> top_k) {
  for (std::size_t begin = 0; begin < inputs.size();) {
    bool const paired = inputs[begin].pair.has_value();
    std::vector<std::string> texts, pairs;
    std::size_t end = begin;
    for (; end < inputs.size() && inputs[end].pair.has_value() == paired; ++end) {
      texts.push_back(inputs[end].text);
      if (paired) pairs.push_back(*inputs[end].pair);
    }
    auto const results = pipeline.classify(texts, pairs, top_k, first + begin);
    for (std::size_t i = 0; i < texts.size(); ++i) {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (auto const& s : results[i]) list.push_back({{"label", s.label}, {"score", s.score}});
      nlohmann::ordered_json line;
      line["text"] = texts[i];
      if (paired) line["text_pair"] = pairs[i];
      line["labels"] = std::move(list);
      std::cout << line.dump() << '\n';
    }
    begin = end;
  }
}

}  // namespace

std::string classify_help() {
  return "usage: flashdeberta classify --model DIR [--top-k K] [--pair TEXT | --jsonl] [options] [TEXT...]\n"
         "\n"
         "Classifies each TEXT (or, without TEXT, each line of stdin) with a sequence-classification\n"
         "checkpoint (architectures Deberta*ForSequenceClassification), as HF's text-classification pipeline\n"
         "with top_k=None. Prints {\"text\": ..., \"labels\": [{\"label\", \"score\"}, ...]}: every label of\n"
         "config.json's id2label (LABEL_<i> without one), highest score first. Scores are the softmax over the\n"
         "labels, or a sigmoid per label when problem_type is multi_label_classification or there is one label.\n"
         "Text pairs ([CLS] text [SEP] text_pair [SEP], HF's {\"text\", \"text_pair\"} input) are classified\n"
         "the same way, and their lines carry \"text_pair\" too.\n"
         "\n"
         "  --top-k K            the K best labels only (HF's top_k; default: every label)\n"
         "  --pair TEXT          TEXT is the second sequence of every text (an NLI hypothesis, a query...)\n"
         "  --jsonl              stdin lines are JSON objects {\"text\": \"...\", \"text_pair\": \"...\"}\n"
         "                       (text_pair optional): pairs, or texts alone, one per line. Without --jsonl\n"
         "                       every stdin line is plain text, whatever it looks like; --jsonl takes no\n"
         "                       TEXT arguments and no --pair\n" +
         pipeline_common_help();
}

int classify_command(std::span<char const* const> args) {
  ExtraOption const extras[] = {{"top-k"}, {"pair"}, {.name = "jsonl", .flag = true}};
  auto const options = parse_pipeline_options("classify", args, extras, true);
  if (!options) {
    std::cout << classify_help();
    return 0;
  }
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
  std::optional<std::size_t> const top_k =
      options->top_k ? std::optional<std::size_t>(static_cast<std::size_t>(*options->top_k)) : std::nullopt;
  for_each_batch(*options, [&](std::vector<std::string> const& lines, std::size_t first) {
    std::vector<ClassifyInput> inputs;
    for (std::size_t i = 0; i < lines.size(); ++i)
      inputs.push_back(options->jsonl ? parse_json_line(lines[i], first + i) : ClassifyInput{lines[i], options->pair});
    classify_and_print(*pipeline, inputs, first, top_k);
  });
  return 0;
}

}  // namespace flashdeberta::cli
