// flashdeberta._native.Pipeline: the runtime's pipeline tasks (the ones the CLI's commands run) over lists of
// texts, each result as the dicts HF's pipelines return. Batching and HF's single-input conventions are in
// flashdeberta/pipelines.py.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/heads/sequence_classification.hpp"
#include "flashdeberta/runtime/pipeline.hpp"

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

  py::list fill_mask(std::vector<std::string> const& texts, std::size_t top_k) const {
    require_fork_safe(pipeline_->threads());
    std::vector<std::vector<std::vector<pipelines::MaskPrediction>>> results;
    {
      py::gil_scoped_release const unlocked;
      ScopedNativeTime const timed;
      results = pipeline_->fill_mask(texts, top_k);
    }
    py::list out;
    for (auto const& masks : results) {
      py::list per_text;
      for (auto const& row : masks) {
        py::list predictions;
        for (auto const& p : row) {
          predictions.append(py::dict(py::arg("score") = p.score, py::arg("token") = p.token,
                                      py::arg("token_str") = p.token_str, py::arg("sequence") = p.sequence));
        }
        per_text.append(predictions);
      }
      out.append(per_text);
    }
    return out;
  }

  py::list classify(std::vector<std::string> const& texts, std::optional<std::vector<std::string>> const& pairs,
                    std::optional<std::size_t> top_k) const {
    require_fork_safe(pipeline_->threads());
    std::vector<std::vector<pipelines::LabelScore>> results;
    {
      py::gil_scoped_release const unlocked;
      ScopedNativeTime const timed;
      results = pairs ? pipeline_->classify(texts, *pairs, top_k) : pipeline_->classify(texts, {}, top_k);
    }
    py::list out;
    for (auto const& labels : results) {
      py::list per_text;
      for (auto const& s : labels) per_text.append(py::dict(py::arg("label") = s.label, py::arg("score") = s.score));
      out.append(per_text);
    }
    return out;
  }

  py::list ner(std::vector<std::string> const& texts) const {
    require_fork_safe(pipeline_->threads());
    std::vector<std::vector<pipelines::Entity>> results;
    {
      py::gil_scoped_release const unlocked;
      ScopedNativeTime const timed;
      results = pipeline_->ner(texts);
    }
    py::list out;
    for (auto const& entities : results) {
      py::list per_text;
      for (auto const& e : entities) {
        per_text.append(py::dict(py::arg("entity_group") = e.entity_group, py::arg("score") = e.score,
                                 py::arg("word") = e.word, py::arg("start") = e.start, py::arg("end") = e.end));
      }
      out.append(per_text);
    }
    return out;
  }

  py::dict answer(std::string const& question, std::string const& context) const {
    require_fork_safe(pipeline_->threads());
    runtime::Answer a;
    {
      py::gil_scoped_release const unlocked;
      ScopedNativeTime const timed;
      a = pipeline_->answer(question, context);
    }
    return py::dict(py::arg("score") = a.score, py::arg("start") = a.start, py::arg("end") = a.end,
                    py::arg("answer") = a.answer);
  }

  // Per sequence, HF's {"sequence", "labels", "scores"}.
  py::list zero_shot(std::vector<std::string> const& sequences, std::vector<std::string> const& candidate_labels,
                     std::string const& hypothesis_template, bool multi_label) const {
    require_fork_safe(pipeline_->threads());
    std::vector<runtime::ZeroShotResult> results;
    {
      py::gil_scoped_release const unlocked;
      ScopedNativeTime const timed;
      results = pipeline_->zero_shot(sequences, candidate_labels, hypothesis_template, multi_label);
    }
    py::list out;
    for (std::size_t i = 0; i < results.size(); ++i) {
      out.append(py::dict(py::arg("sequence") = sequences[i], py::arg("labels") = results[i].labels,
                          py::arg("scores") = results[i].scores));
    }
    return out;
  }

  // The passages' logits in passage order (the cross-encoder's one label); `truncation` is HF's strategy
  // name, cutting to max_length or, without one, to the tokenizer's model_max_length.
  std::vector<float> rerank_logits(std::string const& query, std::vector<std::string> const& passages,
                                   std::optional<std::size_t> max_length,
                                   std::optional<std::string> const& truncation) const {
    require_fork_safe(pipeline_->threads());
    runtime::Truncate truncate;
    if (truncation) truncate.strategy = tokenizer::parse_truncation(*truncation);
    truncate.max_length = max_length;
    if (truncation && !max_length && truncate.strategy != tokenizer::Truncation::kNone) {
      std::optional<std::int64_t> const model_max_length = pipeline_->tokenizer().model_max_length();
      if (!model_max_length) {
        throw runtime::UsageError("truncation='" + *truncation +
                                  "' without max_length cuts to the tokenizer's model_max_length, but its "
                                  "tokenizer_config.json gives none (pass max_length=N)");
      }
      truncate.max_length = static_cast<std::size_t>(*model_max_length);
    }
    std::vector<runtime::RerankScore> scores;
    {
      py::gil_scoped_release const unlocked;
      ScopedNativeTime const timed;
      scores = pipeline_->rerank(query, passages, std::nullopt, /*raw_scores=*/true, truncate);
    }
    std::vector<float> logits(passages.size());
    for (runtime::RerankScore const& s : scores) logits[s.index] = s.score;
    return logits;
  }

  std::vector<std::string> labels() const { return label_names(pipeline_->config()); }
  std::string description() const { return std::to_string(pipeline_->threads()) + " threads"; }

 private:
  std::unique_ptr<runtime::Pipeline> pipeline_;
};

void bind_pipeline(py::module_& m) {
  py::class_<Pipeline>(m, "Pipeline")
      .def(py::init<std::string const&, std::string const&, std::optional<std::string> const&, std::string const&,
                    std::string const&, std::string const&, int, std::int64_t>(),
           py::arg("task"), py::arg("model"), py::arg("tokenizer"), py::arg("backend"), py::arg("dtype"),
           py::arg("attention"), py::arg("threads"), py::arg("max_tokens"))
      .def("fill_mask", &Pipeline::fill_mask, py::arg("texts"), py::arg("top_k"))
      .def("classify", &Pipeline::classify, py::arg("texts"), py::arg("pairs") = py::none(),
           py::arg("top_k") = py::none())
      .def("ner", &Pipeline::ner, py::arg("texts"))
      .def("answer", &Pipeline::answer, py::arg("question"), py::arg("context"))
      .def("zero_shot", &Pipeline::zero_shot, py::arg("sequences"), py::arg("candidate_labels"),
           py::arg("hypothesis_template"), py::arg("multi_label"))
      .def("rerank_logits", &Pipeline::rerank_logits, py::arg("query"), py::arg("passages"),
           py::arg("max_length") = py::none(), py::arg("truncation") = py::none())
      .def_property_readonly("labels", &Pipeline::labels);
  // TEI's /rerank order over the logits of all passages (those of several rerank_logits calls together).
  m.def(
      "rank_passages",
      [](std::vector<float> const& logits, std::optional<std::size_t> top_n, bool raw_scores) {
        py::list out;
        for (pipelines::RerankScore const& r : pipelines::rerank(logits, top_n, raw_scores))
          out.append(py::dict(py::arg("index") = r.index, py::arg("score") = r.score));
        return out;
      },
      py::arg("logits"), py::arg("top_n") = py::none(), py::arg("raw_scores") = false);
}

}  // namespace flashdeberta::python
