// flashdeberta._native.Pipeline: the runtime's task units (runtime::Pipeline, the ones the CLI's commands and
// the server's routes run) over lists of inputs, in batches of batch_size inputs as the CLI's --batch-size,
// the texts numbered from 1 in messages as the CLI numbers them. Results come through the tasks' JSON writer
// (task_json.hpp), so each is what the CLI prints. HF's argument forms and single-input conventions are in
// flashdeberta/pipelines.py.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/runtime/pipeline.hpp"
#include "json_objects.hpp"

namespace flashdeberta::python {

namespace {

// The head each task needs and the task's name in messages.
HeadKind head_for_task(std::string const& task) {
  if (task == "fill-mask") return HeadKind::kMaskedLM;
  if (task == "text-classification") return HeadKind::kSequenceClassification;
  if (task == "token-classification") return HeadKind::kTokenClassification;
  if (task == "question-answering") return HeadKind::kQuestionAnswering;
  // NLI models and cross-encoders are sequence classifiers; the tasks check their labels.
  if (task == "zero-shot-classification" || task == "rerank") return HeadKind::kSequenceClassification;
  throw runtime::UsageError("task '" + task +
                            "' is not one of fill-mask, text-classification, token-classification, "
                            "question-answering, zero-shot-classification, rerank");
}

std::optional<pipelines::ScoreFunction> score_function_of(std::optional<std::string> const& name) {
  if (!name) return std::nullopt;
  try {
    return pipelines::parse_score_function(*name);
  } catch (Error const& e) {
    throw runtime::UsageError(e.what());
  }
}

}  // namespace

class Pipeline {
 public:
  Pipeline(std::string const& task, std::string const& model, std::optional<std::string> const& tokenizer,
           std::string const& backend, std::string const& dtype, std::string const& attention, int threads,
           std::int64_t max_tokens) {
    runtime::RuntimeOptions const options = runtime_options(model, backend, dtype, attention, threads, max_tokens);
    HeadKind const head = head_for_task(task);
    std::optional<std::filesystem::path> const tokenizer_dir =
        tokenizer ? std::optional<std::filesystem::path>(*tokenizer) : std::nullopt;
    py::gil_scoped_release const unlocked;
    ScopedNativeTime const timed;
    pipeline_ = std::make_unique<runtime::Pipeline>(options, tokenizer_dir, head, task);
  }

  // HF's targets as ids, and HF's warnings about the targets that are not tokens of the vocabulary.
  std::pair<std::vector<std::int64_t>, std::vector<std::string>> target_ids(
      std::vector<std::string> const& targets) const {
    std::vector<std::string> notes;
    std::vector<std::int64_t> ids = pipeline_->target_ids(targets, notes);
    return {std::move(ids), std::move(notes)};
  }

  // Per text, HF's answer: its mask's predictions, or a list of them per mask.
  py::object fill_mask(std::vector<std::string> const& texts, std::size_t top_k, std::size_t batch_size,
                       std::vector<std::int64_t> const& targets, std::optional<std::size_t> max_length,
                       std::optional<std::string> const& truncation) const {
    runtime::FillMaskOptions const options{top_k, targets, truncate(max_length, truncation)};
    return batched(texts, batch_size, [&](std::span<std::string const> part, runtime::TaskRun const& run) {
      runtime::JsonOut out = runtime::JsonOut::array();
      for (auto const& masks : pipeline_->fill_mask(part, options, run))
        out.push_back(runtime::fill_mask_answer_json(masks));
      return out;
    });
  }

  // Per text (with pairs[i] as its pair where that is not None), its labels best first.
  py::object classify(std::vector<std::string> const& texts, std::vector<std::optional<std::string>> const& pairs,
                      std::optional<std::size_t> top_k, std::optional<std::string> const& function_to_apply,
                      std::size_t batch_size, std::optional<std::size_t> max_length,
                      std::optional<std::string> const& truncation) const {
    if (pairs.size() != texts.size()) {
      throw runtime::UsageError(std::to_string(texts.size()) + " texts but " + std::to_string(pairs.size()) +
                                " text pairs");
    }
    std::vector<runtime::TextInput> inputs;
    for (std::size_t i = 0; i < texts.size(); ++i) inputs.push_back({texts[i], pairs[i]});
    runtime::ClassifyOptions const options{
        .top_k = top_k, .function = score_function_of(function_to_apply), .truncate = truncate(max_length, truncation)};
    return batched(inputs, batch_size, [&](std::span<runtime::TextInput const> part, runtime::TaskRun const& run) {
      runtime::JsonOut out = runtime::JsonOut::array();
      for (auto const& labels : pipeline_->classify(part, options, run)) out.push_back(runtime::labels_json(labels));
      return out;
    });
  }

  // Per text, its entities; each text cut as HF's pipeline cuts it (model_max_length_cut), or with a stride
  // run as overlapping windows.
  py::object ner(std::vector<std::string> const& texts, std::size_t batch_size, std::string const& aggregation,
                 std::vector<std::string> const& ignore_labels, std::optional<std::size_t> stride) const {
    runtime::NerOptions options{
        .ignore_labels = ignore_labels, .truncate = pipeline_->model_max_length_cut(), .stride = stride};
    try {
      options.aggregation = pipelines::parse_aggregation(aggregation);
    } catch (Error const& e) {
      throw runtime::UsageError(e.what());
    }
    return batched(texts, batch_size, [&](std::span<std::string const> part, runtime::TaskRun const& run) {
      runtime::JsonOut out = runtime::JsonOut::array();
      for (auto const& entities : pipeline_->ner(part, options, run)) out.push_back(runtime::entities_json(entities));
      return out;
    });
  }

  // The answers best first, as a list (HF's single-answer dict is pipelines.py's).
  py::object answers(std::string const& question, std::string const& context, std::size_t top_k,
                     std::size_t max_answer_len, bool handle_impossible_answer, bool align_to_words,
                     std::optional<std::size_t> max_seq_len, std::optional<std::size_t> doc_stride) const {
    runtime::AnswerOptions const options{top_k,          max_answer_len, handle_impossible_answer,
                                         align_to_words, max_seq_len,    doc_stride};
    require_fork_safe(pipeline_->threads());
    runtime::JsonOut out = runtime::JsonOut::array();
    {
      py::gil_scoped_release const unlocked;
      ScopedNativeTime const timed;
      for (auto const& a : pipeline_->answers(question, context, options, pipeline_->local_run()))
        out.push_back(runtime::answer_json(a));
    }
    return to_python(out);
  }

  // Per sequence, HF's {"sequence", "labels", "scores"}.
  py::object zero_shot(std::vector<std::string> const& sequences, std::vector<std::string> const& candidate_labels,
                       std::string const& hypothesis_template, bool multi_label, std::size_t batch_size) const {
    runtime::ZeroShotOptions const options{candidate_labels, hypothesis_template, multi_label};
    pipeline_->check_zero_shot(options);
    return batched(sequences, batch_size, [&](std::span<std::string const> part, runtime::TaskRun const& run) {
      runtime::JsonOut out = runtime::JsonOut::array();
      auto const results = pipeline_->zero_shot(part, options, run);
      for (std::size_t i = 0; i < part.size(); ++i) out.push_back(runtime::zero_shot_json(part[i], results[i]));
      return out;
    });
  }

  // TEI's /rerank answer over every passage, batch_size passages per forward; `truncation` is HF's strategy
  // name (pipeline::truncation's rules).
  py::object rerank(std::string const& query, std::vector<std::string> const& passages,
                    std::optional<std::size_t> top_n, bool raw_scores, bool return_text,
                    std::optional<std::size_t> max_length, std::optional<std::string> const& truncation,
                    std::size_t batch_size) const {
    pipeline_->check_rerank();
    std::optional<tokenizer::Truncation> const strategy =
        truncation ? std::optional(tokenizer::parse_truncation(*truncation)) : std::nullopt;
    runtime::Truncate const truncate = pipeline_->truncation(strategy, max_length, "truncation", "max_length");
    std::vector<float> logits;
    batched(passages, batch_size, [&](std::span<std::string const> part, runtime::TaskRun const& run) {
      std::vector<float> const scores = pipeline_->rerank_logits(query, part, truncate, run);
      logits.insert(logits.end(), scores.begin(), scores.end());
      return runtime::JsonOut::array();
    });
    return to_python(runtime::rerank_json(pipelines::rerank(logits, top_n, raw_scores), passages, return_text));
  }

  std::vector<std::string> labels() const { return pipeline_->labels(); }

 private:
  // HF's tokenizer truncation= and max_length= (pipeline::truncation's rules; unset both: no cut).
  runtime::Truncate truncate(std::optional<std::size_t> max_length,
                             std::optional<std::string> const& truncation) const {
    std::optional<tokenizer::Truncation> strategy;
    if (truncation) {
      try {
        strategy = tokenizer::parse_truncation(*truncation);
      } catch (Error const& e) {
        throw runtime::UsageError(std::string("truncation: ") + e.what());
      }
    }
    // HF's tokenizer without a model_max_length takes a very large one (1e30): truncation alone cuts nothing.
    if (strategy && !max_length && !pipeline_->tokenizer().model_max_length()) return {};
    return pipeline_->truncation(strategy, max_length, "truncation", "max_length");
  }

  // `per_batch(inputs, run)` over batches of batch_size inputs with the GIL released, each batch's run
  // numbering its texts from where the batch starts; the batches' results concatenated.
  template <class Item, class PerBatch>
  py::object batched(std::vector<Item> const& items, std::size_t batch_size, PerBatch&& per_batch) const {
    if (batch_size == 0) throw runtime::UsageError("batch_size must be at least 1");
    require_fork_safe(pipeline_->threads());
    runtime::JsonOut all = runtime::JsonOut::array();
    {
      py::gil_scoped_release const unlocked;
      ScopedNativeTime const timed;
      std::span<Item const> const inputs(items);
      for (std::size_t first = 0; first < inputs.size(); first += batch_size) {
        auto const part = inputs.subspan(first, std::min(batch_size, inputs.size() - first));
        for (auto& result : per_batch(part, pipeline_->local_run(runtime::InputNames::numbered("text", first + 1))))
          all.push_back(std::move(result));
      }
    }
    return to_python(all);
  }

  std::unique_ptr<runtime::Pipeline> pipeline_;
};

void bind_pipeline(py::module_& m) {
  py::class_<Pipeline>(m, "Pipeline")
      .def(py::init<std::string const&, std::string const&, std::optional<std::string> const&, std::string const&,
                    std::string const&, std::string const&, int, std::int64_t>(),
           py::arg("task"), py::arg("model"), py::arg("tokenizer"), py::arg("backend"), py::arg("dtype"),
           py::arg("attention"), py::arg("threads"), py::arg("max_tokens"))
      .def("target_ids", &Pipeline::target_ids, py::arg("targets"))
      .def("fill_mask", &Pipeline::fill_mask, py::arg("texts"), py::arg("top_k"), py::arg("batch_size"),
           py::arg("targets"), py::arg("max_length"), py::arg("truncation"))
      .def("classify", &Pipeline::classify, py::arg("texts"), py::arg("pairs"), py::arg("top_k"),
           py::arg("function_to_apply"), py::arg("batch_size"), py::arg("max_length"), py::arg("truncation"))
      .def("ner", &Pipeline::ner, py::arg("texts"), py::arg("batch_size"), py::arg("aggregation_strategy"),
           py::arg("ignore_labels"), py::arg("stride"))
      .def("answers", &Pipeline::answers, py::arg("question"), py::arg("context"), py::arg("top_k"),
           py::arg("max_answer_len"), py::arg("handle_impossible_answer"), py::arg("align_to_words"),
           py::arg("max_seq_len"), py::arg("doc_stride"))
      .def("zero_shot", &Pipeline::zero_shot, py::arg("sequences"), py::arg("candidate_labels"),
           py::arg("hypothesis_template"), py::arg("multi_label"), py::arg("batch_size"))
      .def("rerank", &Pipeline::rerank, py::arg("query"), py::arg("passages"), py::arg("top_n"), py::arg("raw_scores"),
           py::arg("return_text"), py::arg("max_length"), py::arg("truncation"), py::arg("batch_size"))
      .def_property_readonly("labels", &Pipeline::labels);
}

}  // namespace flashdeberta::python
