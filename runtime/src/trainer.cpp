// The training loop of flashdeberta train, as HF's Trainer runs it (docs: ../shared/docs/training-notes.md):
// epoch e visits the examples in torch.randperm(N, seed + e) order, in batches of batch_size (the last one
// partial), gradient_accumulation_steps micro-batches per AdamW step (the last group of an epoch may be shorter),
// for ceil(epochs * steps_per_epoch) steps or max_steps. Every random draw (dropout, masked LM's masks) is a
// function of the seed and the position in the run, so a run resumed from a checkpoint continues exactly as the
// uninterrupted one would have.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "flashdeberta/io/config_json.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/runtime/backend_entry.hpp"
#include "flashdeberta/runtime/loaded_model.hpp"
#include "flashdeberta/runtime/trainer.hpp"
#include "training_internal.hpp"

namespace flashdeberta::runtime {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Dropout as config.json sets it for the head's class (HF's defaults where a key is absent).
DropoutRates dropout_of(std::string const& config_text, TrainingTask task) {
  io::Json const doc = io::parse_json(config_text, "config.json", "config");
  auto const number = [&](char const* key, double fallback) {
    auto const it = doc.find(key);
    return it != doc.end() && it->is_number() ? it->get<double>() : fallback;
  };
  DropoutRates d;
  d.hidden = static_cast<float>(number("hidden_dropout_prob", 0.1));
  d.attention = static_cast<float>(number("attention_probs_dropout_prob", 0.1));
  d.pooler = static_cast<float>(number("pooler_dropout", 0.0));
  // Sequence classification and multiple choice: cls_dropout, else hidden_dropout_prob; token classification:
  // hidden_dropout_prob; question answering has none before qa_outputs.
  bool const pooled = task == TrainingTask::kTextClassification || task == TrainingTask::kMultipleChoice;
  d.classifier = pooled ? static_cast<float>(number("cls_dropout", d.hidden)) : d.hidden;
  if (task == TrainingTask::kQuestionAnswering || task == TrainingTask::kMaskedLM) d.classifier = 0.0f;
  return d;
}

void append_line(fs::path const& file, std::string const& line) {
  std::ofstream out(file, std::ios::app);
  out << line << '\n';
  FLASHDEBERTA_REQUIRE_FILE(out.flush().good(), file.string() << ": cannot append the evaluation");
}

}  // namespace

TrainingResult train(TrainerOptions const& o, TrainerHooks const& hooks) {
  auto const note = [&](std::string const& m) {
    if (hooks.on_note) hooks.on_note(m);
  };
  if (o.runtime.dtype != DType::kF32 && o.runtime.backend != BackendKind::kCuda)
    throw UsageError("--dtype " + std::string(dtype_option_name(o.runtime.dtype)) +
                     ": mixed-precision training runs on --backend cuda; the host backends train in fp32");
  FLASHDEBERTA_REQUIRE(
      o.runtime.dtype == DType::kF32 || o.runtime.dtype == DType::kBF16 || o.runtime.dtype == DType::kF16,
      "--dtype " << dtype_option_name(o.runtime.dtype) << ": training computes in fp32, bf16 or fp16");
  fs::path const& model = o.runtime.model;
  ModelConfig config = read_model_config(model);
  std::string const source_config = model_config_json(model);
  tokenizer::Tokenizer const tok = tokenizer::load_tokenizer(model);

  // Everything about the data is checked before the backend starts or the output is touched.
  DataPlan plan;
  plan.task = o.task;
  plan.problem = o.task == TrainingTask::kTextClassification ? o.problem : ProblemType::kSingleLabel;
  plan.labels = decide_labels(o, config);
  std::int64_t const limit = std::min<std::int64_t>(512, tok.model_max_length().value_or(512));
  plan.max_length = o.max_length.value_or(limit);
  plan.label_all_tokens = o.label_all_tokens;
  plan.doc_stride = o.doc_stride;
  plan.token_types = config.type_vocab_size > 0;
  TrainingData const train_data = read_training_data(o.train_file, plan, tok);
  std::optional<TrainingData> eval_data;
  if (o.eval_file) eval_data = read_training_data(*o.eval_file, plan, tok);
  if (!plan.labels.empty()) {
    config.num_labels = static_cast<std::int64_t>(plan.labels.size());
    config.id2label.clear();
    for (std::size_t i = 0; i < plan.labels.size(); ++i) config.id2label[static_cast<std::int64_t>(i)] = plan.labels[i];
  }
  probe_output_directory(o.output);

  // HF's step counts: ceil(batches / accumulation) steps an epoch; warmup_ratio rounds up.
  auto const n = static_cast<std::int64_t>(train_data.examples.size());
  std::int64_t const batches = (n + o.batch_size - 1) / o.batch_size;
  std::int64_t const accumulation = o.gradient_accumulation_steps;
  std::int64_t const steps_per_epoch = (batches + accumulation - 1) / accumulation;
  std::int64_t const total =
      o.max_steps ? *o.max_steps
                  : static_cast<std::int64_t>(std::ceil(o.epochs * static_cast<double>(steps_per_epoch)));
  FLASHDEBERTA_REQUIRE(total > 0, "nothing to train: --epochs " << o.epochs << " makes 0 steps");
  std::int64_t const epochs =
      o.max_steps ? (total + steps_per_epoch - 1) / steps_per_epoch : static_cast<std::int64_t>(std::ceil(o.epochs));
  TrainingSessionOptions session_options{training_head(o.task), plan.problem, o.optimizer, o.seed};
  OptimizerOptions& opt = session_options.optimizer;
  opt.total_steps = total;
  if (opt.warmup_steps == 0) opt.warmup_steps = static_cast<std::int64_t>(std::ceil(o.warmup_ratio * total));

  BackendEntry const* const entry = find_backend(o.runtime.backend);
  if (entry == nullptr)
    throw UsageError("--backend " + std::string(backend_name(o.runtime.backend)) + ": not in this build");
  std::unique_ptr<StartedBackend> const backend = entry->start(o.runtime);
  std::unique_ptr<TrainingSession> session = backend->train(model, config, session_options);
  ModelFiles const files{trained_config_json(source_config, config, plan), model, session->shapes()};
  DropoutRates const dropout = dropout_of(source_config, o.task);

  TrainerPosition pos{0, 0, 0, 0.0, o.seed, o.batch_size, accumulation, n};
  if (o.resume) {
    if (auto const checkpoint = newest_checkpoint(o.output)) {
      TrainerPosition const saved = read_trainer_position(*checkpoint);
      FLASHDEBERTA_REQUIRE(saved.seed == o.seed && saved.batch_size == o.batch_size &&
                               saved.gradient_accumulation_steps == accumulation && saved.examples == n,
                           checkpoint->string()
                               << ": saved by a run with --seed " << saved.seed << ", --batch-size " << saved.batch_size
                               << ", --gradient-accumulation-steps " << saved.gradient_accumulation_steps << " and "
                               << saved.examples << " examples; --resume needs the same");
      session->restore(read_training_state(*checkpoint));
      pos = saved;
      note("resuming from " + checkpoint->string() + " (step " + std::to_string(pos.global_step) + ")");
    } else {
      note("--resume: no checkpoint-<step> in " + o.output.string() + "; starting from the beginning");
    }
  }

  std::int64_t const mask_id = tok.mask_token_id();
  FLASHDEBERTA_REQUIRE(o.task != TrainingTask::kMaskedLM || mask_id >= 0,
                       model.string() << ": the tokenizer has no mask token, which masked-lm training needs");
  auto const vocab = static_cast<std::int64_t>(tok.vocab_size());
  auto const started = Clock::now();
  std::int64_t tokens_seen = 0, window_steps = 0;
  double window_loss = 0.0;
  TrainingResult result;
  for (; pos.epoch < epochs && pos.global_step < total; ++pos.epoch, pos.micro_batches = 0) {
    std::vector<std::int64_t> const order = torch_randperm(n, o.seed + static_cast<std::uint64_t>(pos.epoch));
    while (pos.micro_batches < batches && pos.global_step < total) {
      std::int64_t const group_end = std::min(batches, (pos.micro_batches / accumulation + 1) * accumulation);
      double loss_sum = 0.0;
      std::int64_t const micro = group_end - pos.micro_batches;
      for (std::int64_t m = pos.micro_batches; m < group_end; ++m) {
        std::vector<TrainingExample const*> examples;
        for (std::int64_t i = m * o.batch_size; i < std::min(n, (m + 1) * o.batch_size); ++i)
          examples.push_back(&train_data.examples[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])]);
        std::uint64_t const draw =
            mix(mix(o.seed) ^ (static_cast<std::uint64_t>(pos.epoch) << 40) ^ static_cast<std::uint64_t>(m));
        TrainingBatch const b =
            make_training_batch(examples, plan, mask_id, vocab, o.mlm_probability, mix(draw ^ 0x6d61736b));
        loss_sum += session->forward_backward(b.batch, b.targets, dropout, draw).loss;
        tokens_seen += b.tokens;
      }
      // HF divides each micro-batch loss by the accumulation steps: the summed gradients, scaled once.
      OptimizerStepReport const report = session->step(1.0 / static_cast<double>(micro));
      if (report.skipped) {  // HF's Trainer counts the step too (GradScaler skipped the update)
        std::ostringstream line;
        line << "step " << pos.global_step + 1 << ": the fp16 gradients overflowed; update skipped, loss scale now "
             << report.loss_scale;
        note(line.str());
      }
      pos.micro_batches = group_end;
      ++pos.global_step;
      double const step_loss = loss_sum / static_cast<double>(micro);
      pos.loss_sum += step_loss;
      window_loss += step_loss;
      ++window_steps;
      double const elapsed = std::chrono::duration<double>(Clock::now() - started).count();
      TrainingProgress progress{
          pos.global_step,
          total,
          static_cast<double>(pos.epoch) + static_cast<double>(pos.micro_batches) / static_cast<double>(batches),
          window_loss / static_cast<double>(window_steps),
          report.learning_rate,
          report.grad_norm,
          elapsed > 0 ? static_cast<double>(tokens_seen) / elapsed : 0.0,
          pos.global_step % o.logging_steps == 0 || pos.global_step == total};
      if (hooks.on_step) hooks.on_step(progress);
      if (progress.logging_step) window_loss = 0.0, window_steps = 0;
      bool const stop = hooks.should_stop && hooks.should_stop();
      if (stop || (o.save_steps > 0 && pos.global_step % o.save_steps == 0)) {
        fs::path const written = write_training_checkpoint(o.output, files, *session, pos);
        if (stop) {
          note("stopped at step " + std::to_string(pos.global_step) + ": " + written.string() +
               " written; --resume continues from it");
          result = {pos.global_step, progress.epoch, pos.loss_sum / static_cast<double>(pos.global_step), true,
                    written};
          return result;
        }
      }
    }
    if (eval_data) {
      Evaluation ev = evaluate(*session, *eval_data, plan, o, mask_id, vocab);
      nlohmann::ordered_json line;
      line["epoch"] =
          static_cast<double>(pos.epoch) + static_cast<double>(pos.micro_batches) / static_cast<double>(batches);
      line["step"] = pos.global_step;
      line.update(ev.metrics);
      if (hooks.on_eval) hooks.on_eval(line.dump());
      append_line(o.output / "eval.jsonl", line.dump());
    }
  }
  write_model_files(o.output, files, session->weights());
  result.global_step = pos.global_step;
  result.epoch = static_cast<double>(pos.epoch);
  result.train_loss = pos.global_step > 0 ? pos.loss_sum / static_cast<double>(pos.global_step) : 0.0;
  return result;
}

}  // namespace flashdeberta::runtime
