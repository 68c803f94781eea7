// The training data of flashdeberta train: JSON lines checked and tokenized before the first step, so that a bad
// line fails the run at once (naming its file and line) instead of hours in; then batches as HF's collators make
// them (DataCollatorWithPadding, DataCollatorForTokenClassification, DataCollatorForLanguageModeling).
#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/runtime/trainer.hpp"
#include "training_internal.hpp"

namespace flashdeberta::runtime {

namespace detail {

void refuse(std::filesystem::path const& file, std::size_t line, std::string const& message) {
  FLASHDEBERTA_FAIL(file.string() << " line " << line << ": " << message);
}

std::vector<Line> read_json_lines(std::filesystem::path const& file) {
  std::ifstream in(file, std::ios::binary);
  FLASHDEBERTA_REQUIRE_FILE(in && !std::filesystem::is_directory(file),
                            file.string() << ": cannot read the file (JSON lines are expected)");
  std::vector<Line> lines;
  std::string text;
  for (std::size_t number = 1; std::getline(in, text); ++number) {
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    Line line{number, {}};
    try {
      line.doc = io::parse_json(text, file.string() + " line " + std::to_string(number), "the line");
    } catch (Error const& e) {
      FLASHDEBERTA_FAIL(e.what() << " (malformed JSON)");
    }
    if (!line.doc.is_object()) refuse(file, number, "a JSON " + std::string(line.doc.type_name()) + ", not an object");
    lines.push_back(std::move(line));
  }
  FLASHDEBERTA_REQUIRE(!lines.empty(), file.string() << ": no examples (an empty data set)");
  return lines;
}

io::Json const& column(std::filesystem::path const& file, Line const& line, std::string const& name,
                       std::string const& expected) {
  auto const it = line.doc.find(name);
  if (it == line.doc.end() || it->is_null())
    refuse(file, line.number, "missing column \"" + name + "\" (" + expected + ")");
  return *it;
}

std::string const& string_column(std::filesystem::path const& file, Line const& line, std::string const& name) {
  io::Json const& value = column(file, line, name, "a string");
  if (!value.is_string())
    refuse(file, line.number, "\"" + name + "\" is a JSON " + value.type_name() + ", not a string");
  return value.get_ref<std::string const&>();
}

TrainingSequence sequence_of(tokenizer::Encoding const& e, bool token_types) {
  TrainingSequence s;
  for (std::size_t t = 0; t < e.size(); ++t) {
    s.ids.push_back(static_cast<std::int32_t>(e.input_ids[t]));
    if (token_types) s.token_types.push_back(static_cast<std::int32_t>(e.token_type_ids[t]));
    s.special.push_back(e.sequence_ids[t] < 0 ? 1 : 0);
  }
  return s;
}

}  // namespace detail

namespace {

using io::Json;
using namespace detail;

// The label column's name per task.
char const* label_column(TrainingTask task) {
  return task == TrainingTask::kTokenClassification ? "ner_tags" : "label";
}

// A label (a name, or an index into `labels`) as its id.
std::int64_t label_id(std::filesystem::path const& file, std::size_t line, Json const& value,
                      std::vector<std::string> const& labels) {
  if (value.is_string()) {
    auto const it = std::find(labels.begin(), labels.end(), value.get_ref<std::string const&>());
    if (it == labels.end()) refuse(file, line, "label \"" + value.get<std::string>() + "\" is outside the label set");
    return it - labels.begin();
  }
  if (value.is_number_integer() || value.is_number_unsigned()) {
    std::int64_t const id = value.get<std::int64_t>();
    if (id < 0 || id >= static_cast<std::int64_t>(labels.size()))
      refuse(file, line,
             "label " + std::to_string(id) + " is outside the label set [0, " + std::to_string(labels.size()) + ")");
    return id;
  }
  refuse(file, line, std::string("a label is a JSON ") + value.type_name() + ", not a name or an index");
}

tokenizer::EncodeOptions truncating(DataPlan const& plan) {
  tokenizer::EncodeOptions o;
  o.max_length = static_cast<std::size_t>(plan.max_length);
  o.truncation = tokenizer::Truncation::kLongestFirst;
  return o;
}

TrainingExample text_example(std::filesystem::path const& file, Line const& line, DataPlan const& plan,
                             tokenizer::Tokenizer const& tok) {
  TrainingExample ex;
  ex.line = line.number;
  std::string const& text = string_column(file, line, "text");
  auto const pair = line.doc.find("text_pair");
  bool const has_pair = pair != line.doc.end() && !pair->is_null();
  if (has_pair && !pair->is_string()) refuse(file, line.number, "\"text_pair\" is not a string");
  tokenizer::Encoding const e = tokenize_at(file, line.number, [&] {
    return has_pair ? tok.encode(text, pair->get_ref<std::string const&>(), truncating(plan))
                    : tok.encode(text, truncating(plan));
  });
  ex.sequences.push_back(sequence_of(e, plan.token_types));
  Json const& label = column(file, line, "label",
                             plan.problem == ProblemType::kRegression   ? "a number"
                             : plan.problem == ProblemType::kMultiLabel ? "a list of labels"
                                                                        : "a label name or index");
  if (plan.problem == ProblemType::kRegression) {
    if (!label.is_number()) refuse(file, line.number, "a regression label is a number");
    ex.values.push_back(label.get<float>());
  } else if (plan.problem == ProblemType::kMultiLabel) {
    if (!label.is_array()) refuse(file, line.number, "a multi-label label is a list of labels");
    ex.values.assign(plan.labels.size(), 0.0f);
    for (Json const& one : label)
      ex.values[static_cast<std::size_t>(label_id(file, line.number, one, plan.labels))] = 1.0f;
  } else {
    ex.label = label_id(file, line.number, label, plan.labels);
  }
  return ex;
}

// HF's run_ner: words tokenized one by one ([CLS] w1 w2 ... [SEP]); a word's first token takes its tag, its other
// tokens -100 (or the tag with label_all_tokens), the special tokens -100.
TrainingExample token_example(std::filesystem::path const& file, Line const& line, DataPlan const& plan,
                              tokenizer::Tokenizer const& tok) {
  Json const& words = column(file, line, "tokens", "a list of words");
  Json const& tags = column(file, line, "ner_tags", "a list of tags");
  if (!words.is_array() || !tags.is_array()) refuse(file, line.number, "\"tokens\" and \"ner_tags\" are lists");
  if (words.size() != tags.size())
    refuse(file, line.number,
           std::to_string(words.size()) + " tokens but " + std::to_string(tags.size()) + " ner_tags");
  TrainingExample ex;
  ex.line = line.number;
  auto const& specials = tok.special_ids();
  TrainingSequence s;
  s.ids.push_back(static_cast<std::int32_t>(specials.cls));
  s.special.push_back(1);
  ex.tokens.push_back(kIgnoredLabel);
  std::size_t const room = static_cast<std::size_t>(std::max<std::int64_t>(plan.max_length - 2, 0));
  for (std::size_t w = 0; w < words.size(); ++w) {
    if (!words[w].is_string()) refuse(file, line.number, "token " + std::to_string(w) + " is not a string");
    std::int64_t const tag = label_id(file, line.number, tags[w], plan.labels);
    tokenizer::TokenList const pieces =
        tokenize_at(file, line.number, [&] { return tok.tokenize(words[w].get<std::string>(), "word"); });
    for (std::size_t p = 0; p < pieces.size() && s.ids.size() - 1 < room; ++p) {
      s.ids.push_back(static_cast<std::int32_t>(pieces.ids[p]));
      s.special.push_back(0);
      ex.tokens.push_back(p == 0 || plan.label_all_tokens ? tag : kIgnoredLabel);
    }
  }
  s.ids.push_back(static_cast<std::int32_t>(specials.sep));
  s.special.push_back(1);
  ex.tokens.push_back(kIgnoredLabel);
  if (plan.token_types) s.token_types.assign(s.ids.size(), 0);
  ex.sequences.push_back(std::move(s));
  return ex;
}

// HF's run_swag: [CLS] context [SEP] ending [SEP] per choice; {"question" or "sent1", "choices": [...]} or SWAG's
// {"sent1", "sent2", "ending0".."ending3"}.
TrainingExample choice_example(std::filesystem::path const& file, Line const& line, DataPlan& plan,
                               tokenizer::Tokenizer const& tok) {
  std::string context =
      line.doc.contains("question") ? string_column(file, line, "question") : string_column(file, line, "sent1");
  std::vector<std::string> endings;
  if (line.doc.contains("choices")) {
    Json const& choices = column(file, line, "choices", "a list of strings");
    if (!choices.is_array() || choices.empty()) refuse(file, line.number, "\"choices\" is a non-empty list of strings");
    for (Json const& c : choices) {
      if (!c.is_string()) refuse(file, line.number, "a choice is not a string");
      endings.push_back(c.get<std::string>());
    }
  } else {
    std::string const header = string_column(file, line, "sent2");
    for (int k = 0; line.doc.contains("ending" + std::to_string(k)); ++k)
      endings.push_back(header + " " + string_column(file, line, "ending" + std::to_string(k)));
    if (endings.empty()) refuse(file, line.number, "missing column \"choices\" (or SWAG's \"ending0\", ...)");
  }
  if (plan.choices == 0) plan.choices = endings.size();
  if (endings.size() != plan.choices)
    refuse(file, line.number,
           std::to_string(endings.size()) + " choices where the first example has " + std::to_string(plan.choices));
  TrainingExample ex;
  ex.line = line.number;
  Json const& label = column(file, line, "label", "the index of the right choice");
  if (!label.is_number_integer() || label.get<std::int64_t>() < 0 ||
      label.get<std::int64_t>() >= static_cast<std::int64_t>(endings.size()))
    refuse(file, line.number, "label is not a choice index in [0, " + std::to_string(endings.size()) + ")");
  ex.label = label.get<std::int64_t>();
  for (std::string const& ending : endings) {
    tokenizer::Encoding const e =
        tokenize_at(file, line.number, [&] { return tok.encode(context, ending, truncating(plan)); });
    ex.sequences.push_back(sequence_of(e, plan.token_types));
  }
  return ex;
}

}  // namespace

std::string_view training_task_name(TrainingTask task) {
  switch (task) {
    case TrainingTask::kTextClassification:
      return "text-classification";
    case TrainingTask::kTokenClassification:
      return "token-classification";
    case TrainingTask::kMaskedLM:
      return "masked-lm";
    case TrainingTask::kMultipleChoice:
      return "multiple-choice";
    case TrainingTask::kQuestionAnswering:
      return "question-answering";
  }
  return "?";
}

TrainingTask parse_training_task(std::string_view name) {
  for (auto t : {TrainingTask::kTextClassification, TrainingTask::kTokenClassification, TrainingTask::kMaskedLM,
                 TrainingTask::kMultipleChoice, TrainingTask::kQuestionAnswering})
    if (training_task_name(t) == name) return t;
  throw UsageError("--task '" + std::string(name) +
                   "': not a task (text-classification, token-classification, masked-lm, multiple-choice, "
                   "question-answering)");
}

HeadKind training_head(TrainingTask task) {
  switch (task) {
    case TrainingTask::kTokenClassification:
      return HeadKind::kTokenClassification;
    case TrainingTask::kMaskedLM:
      return HeadKind::kMaskedLM;
    case TrainingTask::kMultipleChoice:
      return HeadKind::kMultipleChoice;
    case TrainingTask::kQuestionAnswering:
      return HeadKind::kQuestionAnswering;
    default:
      return HeadKind::kSequenceClassification;
  }
}

std::vector<std::int64_t> torch_randperm(std::int64_t n, std::uint64_t seed) {
  std::mt19937 generator(static_cast<std::uint32_t>(seed));  // at::mt19937 takes the seed's low 32 bits
  std::vector<std::int64_t> r(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)));
  for (std::int64_t i = 0; i < n; ++i) r[i] = i;
  for (std::int64_t i = 0; i + 1 < n; ++i) {
    std::int64_t const z = static_cast<std::int64_t>(generator() % static_cast<std::uint64_t>(n - i));
    std::swap(r[i], r[i + z]);
  }
  return r;
}

std::vector<std::string> decide_labels(TrainerOptions const& options, ModelConfig const& config) {
  TrainingTask const task = options.task;
  if (task != TrainingTask::kTextClassification && task != TrainingTask::kTokenClassification) return {};
  if (task == TrainingTask::kTextClassification && options.problem == ProblemType::kRegression) return {"LABEL_0"};
  if (options.labels) {
    std::set<std::string> const distinct(options.labels->begin(), options.labels->end());
    FLASHDEBERTA_REQUIRE(!options.labels->empty() && distinct.size() == options.labels->size(),
                         "--labels: the names must be distinct and at least one");
    return *options.labels;
  }
  bool default_names = true;
  for (auto const& [id, name] : config.id2label) default_names = default_names && name == "LABEL_" + std::to_string(id);
  if (!config.id2label.empty() && !default_names) {
    std::vector<std::string> names;
    for (std::int64_t i = 0; i < config.num_labels; ++i) {
      auto const it = config.id2label.find(i);
      names.push_back(it != config.id2label.end() ? it->second : "LABEL_" + std::to_string(i));
    }
    return names;
  }
  // From the data: names sorted (HF's run_glue / run_ner), or integers 0..max.
  std::set<std::string> names;
  std::int64_t largest = -1;
  for (Line const& line : read_json_lines(options.train_file)) {
    auto const it = line.doc.find(label_column(task));
    if (it == line.doc.end()) continue;  // reported when the examples are read
    std::vector<Json> values = it->is_array() ? std::vector<Json>(it->begin(), it->end()) : std::vector<Json>{*it};
    for (Json const& v : values) {
      if (v.is_string()) names.insert(v.get<std::string>());
      if (v.is_number_integer() && v.get<std::int64_t>() >= 0) largest = std::max(largest, v.get<std::int64_t>());
    }
  }
  if (!names.empty()) return {names.begin(), names.end()};
  std::vector<std::string> out;
  for (std::int64_t i = 0; i <= largest; ++i) out.push_back("LABEL_" + std::to_string(i));
  FLASHDEBERTA_REQUIRE(!out.empty(), options.train_file.string() << ": no labels found (an empty label set)");
  return out;
}

TrainingData read_training_data(std::filesystem::path const& file, DataPlan& plan, tokenizer::Tokenizer const& tok) {
  TrainingData data;
  for (Line const& line : read_json_lines(file)) {
    if (plan.task == TrainingTask::kQuestionAnswering) {
      read_question_answering(file, line, plan, tok, data);
      continue;
    }
    TrainingExample ex;
    switch (plan.task) {
      case TrainingTask::kTokenClassification:
        ex = token_example(file, line, plan, tok);
        break;
      case TrainingTask::kMultipleChoice:
        ex = choice_example(file, line, plan, tok);
        break;
      case TrainingTask::kMaskedLM: {
        ex.line = line.number;
        std::string const& text = string_column(file, line, "text");
        ex.sequences.push_back(sequence_of(
            tokenize_at(file, line.number, [&] { return tok.encode(text, truncating(plan)); }), plan.token_types));
        break;
      }
      default:
        ex = text_example(file, line, plan, tok);
        break;
    }
    std::size_t tokens = 0;
    for (auto const& s : ex.sequences) tokens += s.ids.size();
    data.max_tokens = std::max(data.max_tokens, tokens);
    data.examples.push_back(std::move(ex));
  }
  return data;
}

TrainingBatch make_training_batch(std::vector<TrainingExample const*> const& examples, DataPlan const& plan,
                                  std::int64_t mask_id, std::int64_t vocab_size, double mlm_probability,
                                  std::uint64_t mask_seed) {
  TrainingBatch out;
  for (TrainingExample const* ex : examples) {
    for (TrainingSequence const& s : ex->sequences) {
      if (plan.task != TrainingTask::kMaskedLM) {
        out.batch.add_sequence(s.ids, s.token_types);
        continue;
      }
      // DataCollatorForLanguageModeling: each non-special token picked with mlm_probability; a picked one
      // becomes [MASK] (80%), a random id (10%) or stays (10%). A generator per example and epoch keeps the masks
      // independent of batch composition, so a resumed run masks as the uninterrupted one.
      std::mt19937_64 g(mix(mask_seed ^ mix(ex->line)));
      auto const uniform = [&g] { return static_cast<double>(g() >> 11) * 0x1.0p-53; };
      std::vector<std::int32_t> ids = s.ids;
      for (std::size_t t = 0; t < ids.size(); ++t) {
        bool const picked = !s.special[t] && uniform() < mlm_probability;
        out.targets.classes.push_back(picked ? s.ids[t] : kIgnoredLabel);
        if (!picked) continue;
        double const u = uniform();
        if (u < 0.8)
          ids[t] = static_cast<std::int32_t>(mask_id);
        else if (u < 0.9)
          ids[t] = static_cast<std::int32_t>(g() % static_cast<std::uint64_t>(vocab_size));
      }
      out.batch.add_sequence(ids, s.token_types);
    }
    if (plan.task == TrainingTask::kTokenClassification)
      out.targets.classes.insert(out.targets.classes.end(), ex->tokens.begin(), ex->tokens.end());
    else if (plan.task == TrainingTask::kQuestionAnswering)
      out.targets.starts.push_back(ex->answer_start), out.targets.ends.push_back(ex->answer_end);
    else if (plan.task != TrainingTask::kMaskedLM && ex->values.empty())
      out.targets.classes.push_back(ex->label);
    out.targets.values.insert(out.targets.values.end(), ex->values.begin(), ex->values.end());
  }
  out.tokens = out.batch.total_tokens();
  return out;
}

}  // namespace flashdeberta::runtime
