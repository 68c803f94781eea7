// The evaluation of flashdeberta train after each epoch, with the metrics HF's example scripts report: loss;
// accuracy and macro-F1 (run_glue with sklearn's f1_score, multiple choice's accuracy); seqeval's entity precision,
// recall and F1 and the token accuracy (run_ner); perplexity (run_mlm); SQuAD's exact match and F1 (run_qa, whose
// span choice and metric are training_qa.cpp's).
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "training_internal.hpp"

namespace flashdeberta::runtime {

namespace {

std::int64_t argmax(float const* row, std::int64_t n) { return std::max_element(row, row + n) - row; }

// seqeval's chunks of an IOB2 tag sequence (its default, non-strict mode, as conlleval): (type, begin, end).
std::set<std::tuple<std::string, std::size_t, std::size_t>> entities(std::vector<std::string> const& tags) {
  std::set<std::tuple<std::string, std::size_t, std::size_t>> out;
  std::string type;
  std::size_t begin = 0;
  bool open = false;
  for (std::size_t i = 0; i <= tags.size(); ++i) {
    std::string const tag = i < tags.size() ? tags[i] : "O";
    char const prefix = tag.size() > 1 && tag[1] == '-' ? tag[0] : (tag == "O" ? 'O' : 'I');
    std::string const t = tag.size() > 2 && tag[1] == '-' ? tag.substr(2) : (tag == "O" ? "" : tag);
    bool const starts = prefix == 'B' || prefix == 'S' || (prefix != 'O' && (!open || t != type));
    if (open && (prefix == 'O' || starts)) out.emplace(type, begin, i), open = false;
    if (starts) type = t, begin = i, open = true;
  }
  return out;
}

}  // namespace

Evaluation evaluate(TrainingSession& session, TrainingData const& data, DataPlan const& plan, TrainerOptions const& o,
                    std::int64_t mask_id, std::int64_t vocab) {
  Evaluation ev;
  std::size_t const n = data.examples.size();
  std::int64_t const labels = static_cast<std::int64_t>(plan.labels.size());
  std::vector<std::int64_t> predicted, truth;                              // classes, choices
  std::vector<std::vector<std::string>> tag_truth, tag_predicted;          // token classification, per example
  std::vector<std::vector<WindowLogits>> windows(data.references.size());  // question answering, per reference
  for (std::size_t first = 0; first < n; first += static_cast<std::size_t>(o.batch_size)) {
    std::vector<TrainingExample const*> batch;
    for (std::size_t i = first; i < std::min(n, first + static_cast<std::size_t>(o.batch_size)); ++i)
      batch.push_back(&data.examples[i]);
    // Evaluation masks the same tokens every epoch, so that its loss compares across epochs.
    TrainingBatch const b = make_training_batch(batch, plan, mask_id, vocab, o.mlm_probability, mix(o.seed) ^ 0xe7a1);
    TrainingLoss const loss = session.evaluate(b.batch, b.targets);
    ev.loss += loss.loss * static_cast<double>(batch.size());
    ev.examples += batch.size();
    if (plan.task == TrainingTask::kTokenClassification) {
      std::size_t token = 0;
      for (TrainingExample const* ex : batch) {
        std::vector<std::string> t, p;
        for (std::int64_t label : ex->tokens) {
          if (label != kIgnoredLabel) {
            t.push_back(plan.labels[label]);
            p.push_back(plan.labels[argmax(&loss.logits[token * labels], labels)]);
          }
          ++token;
        }
        tag_truth.push_back(std::move(t));
        tag_predicted.push_back(std::move(p));
      }
    } else if (plan.task == TrainingTask::kQuestionAnswering) {  // (T, 2): each token's start and end logit
      std::size_t token = 0;
      for (TrainingExample const* ex : batch) {
        WindowLogits w;
        for (std::size_t t = 0; t < ex->context_offsets.size(); ++t, ++token) {
          w.start.push_back(loss.logits[2 * token]);
          w.end.push_back(loss.logits[2 * token + 1]);
        }
        w.offsets = &ex->context_offsets;
        windows[ex->reference].push_back(std::move(w));
      }
    } else if (plan.task == TrainingTask::kMultipleChoice ||
               (plan.task == TrainingTask::kTextClassification && plan.problem == ProblemType::kSingleLabel)) {
      std::int64_t const width =
          plan.task == TrainingTask::kMultipleChoice ? static_cast<std::int64_t>(plan.choices) : labels;
      for (std::size_t i = 0; i < batch.size(); ++i) {
        predicted.push_back(argmax(&loss.logits[i * width], width));
        truth.push_back(batch[i]->label);
      }
    }
  }
  ev.loss /= static_cast<double>(std::max<std::size_t>(ev.examples, 1));
  ev.metrics["eval_loss"] = ev.loss;
  if (!truth.empty()) {
    std::size_t right = 0;
    for (std::size_t i = 0; i < truth.size(); ++i) right += predicted[i] == truth[i];
    ev.metrics["eval_accuracy"] = static_cast<double>(right) / static_cast<double>(truth.size());
  }
  if (plan.task == TrainingTask::kTextClassification && plan.problem == ProblemType::kSingleLabel) {
    // sklearn's f1_score(average="macro"): the mean F1 over the labels present in the truth or the predictions.
    std::set<std::int64_t> present(truth.begin(), truth.end());
    present.insert(predicted.begin(), predicted.end());
    double sum = 0.0;
    for (std::int64_t c : present) {
      double tp = 0, fp = 0, fn = 0;
      for (std::size_t i = 0; i < truth.size(); ++i) {
        tp += predicted[i] == c && truth[i] == c;
        fp += predicted[i] == c && truth[i] != c;
        fn += predicted[i] != c && truth[i] == c;
      }
      sum += tp == 0 ? 0.0 : 2 * tp / (2 * tp + fp + fn);
    }
    ev.metrics["eval_f1"] = present.empty() ? 0.0 : sum / static_cast<double>(present.size());
  }
  if (plan.task == TrainingTask::kTokenClassification) {  // seqeval's micro scores, and the token accuracy
    double tp = 0, guessed = 0, gold = 0, right = 0, tokens = 0;
    for (std::size_t i = 0; i < tag_truth.size(); ++i) {
      auto const t = entities(tag_truth[i]);
      auto const p = entities(tag_predicted[i]);
      for (auto const& e : p) tp += t.contains(e);
      guessed += static_cast<double>(p.size());
      gold += static_cast<double>(t.size());
      for (std::size_t k = 0; k < tag_truth[i].size(); ++k) right += tag_truth[i][k] == tag_predicted[i][k];
      tokens += static_cast<double>(tag_truth[i].size());
    }
    double const precision = guessed > 0 ? tp / guessed : 0.0, recall = gold > 0 ? tp / gold : 0.0;
    ev.metrics["eval_precision"] = precision;
    ev.metrics["eval_recall"] = recall;
    ev.metrics["eval_f1"] = precision + recall > 0 ? 2 * precision * recall / (precision + recall) : 0.0;
    ev.metrics["eval_accuracy"] = tokens > 0 ? right / tokens : 0.0;
  }
  if (plan.task == TrainingTask::kQuestionAnswering) {
    std::vector<std::string> predictions;
    for (std::size_t r = 0; r < windows.size(); ++r)
      predictions.push_back(best_answer(windows[r], data.references[r].context));
    SquadScores const squad = squad_scores(predictions, data.references);
    ev.metrics["eval_exact_match"] = squad.exact_match;
    ev.metrics["eval_f1"] = squad.f1;
  }
  if (plan.task == TrainingTask::kMaskedLM) ev.metrics["perplexity"] = std::exp(ev.loss);
  // run_qa counts examples, not their windows.
  ev.metrics["eval_samples"] = plan.task == TrainingTask::kQuestionAnswering ? data.references.size() : ev.examples;
  return ev;
}

}  // namespace flashdeberta::runtime
