// flashdeberta train: fine-tunes a checkpoint on JSON lines as HF's Trainer does (runtime/src/trainer.cpp) and
// writes an HF checkpoint directory of the task's head class. Each option names the TrainingArguments field it
// stands for. Progress goes to stderr (a bar at a terminal, else a line every --logging-steps steps); stdout
// carries JSON lines only: each evaluation's metrics and, at the end, the run's summary.
//
// SIGINT and SIGTERM stop the run at the next optimizer step: a checkpoint is written and the program exits with
// 128 + the signal (130, 143), the shell's status for a process ended by it, so that a script can tell a stopped
// run from a finished one; --resume continues it.
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "args.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "flashdeberta/runtime/trainer.hpp"

namespace flashdeberta::cli {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int signal) { g_stop_signal = signal; }

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

std::vector<std::string> split_labels(std::string const& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    std::size_t const b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    out.push_back(b == std::string::npos ? std::string() : item.substr(b, e - b + 1));
  }
  return out;
}

std::string format(char const* spec, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, spec, value);
  return buffer;
}

// "[########------------] 12/40 loss 0.6931 lr 4.50e-05 1234 tok/s"
void draw_bar(runtime::TrainingProgress const& p) {
  int constexpr kWidth = 24;
  int const filled = static_cast<int>(kWidth * p.step / std::max<std::int64_t>(p.total_steps, 1));
  std::cerr << "\r[" << std::string(filled, '#') << std::string(kWidth - filled, '-') << "] " << p.step << "/"
            << p.total_steps << " loss " << format("%.4f", p.loss) << " lr " << format("%.2e", p.learning_rate) << " "
            << format("%.0f", p.tokens_per_second) << " tok/s   " << (p.step == p.total_steps ? "\n" : "")
            << std::flush;
}

void print_line(runtime::TrainingProgress const& p) {
  std::cerr << "flashdeberta: step " << p.step << "/" << p.total_steps << " (epoch " << format("%.2f", p.epoch)
            << "): loss " << format("%.4f", p.loss) << ", learning rate " << format("%.3e", p.learning_rate)
            << ", grad norm " << format("%.4f", p.grad_norm) << ", " << format("%.0f", p.tokens_per_second)
            << " tokens/s" << std::endl;
}

constexpr char const* kAbout =
    "Fine-tunes the checkpoint DIR on TRAIN.jsonl as Hugging Face's Trainer does (AdamW, a linear\n"
    "schedule, clipping at 1.0, shuffled each epoch by torch.randperm seeded seed + epoch) and writes\n"
    "OUT/: config.json (architectures Deberta(V2)For<Head>, id2label, label2id, problem_type),\n"
    "model.safetensors and the tokenizer files, which 'flashdeberta classify' / 'ner' / 'fill-mask' /\n"
    "'qa' and transformers load as they are. JSON lines per task (one example per line):\n"
    "  text-classification   {\"text\", \"text_pair\"?, \"label\"}: a name or an index; a number with\n"
    "                        --problem-type regression, a list of names with multi_label_classification\n"
    "  token-classification  {\"tokens\": [...], \"ner_tags\": [...]}: tags as names or indexes\n"
    "  masked-lm             {\"text\"}: 15% of the tokens masked as DataCollatorForLanguageModeling\n"
    "  multiple-choice       {\"question\" or \"sent1\", \"choices\": [...], \"label\"} or SWAG's columns\n"
    "  question-answering    {\"question\", \"context\", \"answers\": {\"text\": [...], \"answer_start\": [...]}}\n"
    "                        as SQuAD's (answer_start in characters); contexts cut into windows of\n"
    "                        --max-length sharing --doc-stride tokens, each trained on the first answer\n"
    "Every line is read and checked before training starts; a refusal names the file and the line.\n"
    "Dropout follows config.json (hidden_dropout_prob, attention_probs_dropout_prob, pooler_dropout,\n"
    "cls_dropout), drawn from flashdeberta's own seeded generator.";

constexpr char const* kFooter =
    "Prints, on stdout, one JSON line per evaluation (also appended to OUT/eval.jsonl): epoch, step,\n"
    "eval_loss and eval_accuracy / eval_f1 (macro) for text classification, eval_precision / recall / f1\n"
    "(seqeval, IOB2 entities) and eval_accuracy for token classification, perplexity for masked-lm,\n"
    "eval_exact_match / eval_f1 (SQuAD's, in percent) for question-answering; then\n"
    "{\"global_step\", \"epoch\", \"train_loss\", \"output\"}. Progress on stderr: a bar at a terminal, else a\n"
    "line every --logging-steps steps.\n"
    "SIGINT / SIGTERM: the run stops after the current optimizer step, writes OUT/checkpoint-<step>/ and\n"
    "exits with 130 / 143; --resume continues it (bit-identically with --threads 1).\n"
    "exit status: 0 on success, 2 for usage errors, 1 for any other error (one line on stderr),\n"
    "130 / 143 when stopped by SIGINT / SIGTERM.";

}  // namespace

int train_command(std::span<char const* const> args) {
  runtime::TrainerOptions o;
  std::string task = "text-classification";
  std::optional<std::string> labels;
  std::int64_t seed = 42;
  std::optional<std::int64_t> max_steps, max_length;
  CommandLine cli("train", kAbout, 31);
  cli.option("--task", task, "T",
             "text-classification (default), token-classification, masked-lm,\nmultiple-choice or question-answering");
  cli.option("--model", o.runtime.model, "DIR", "the checkpoint to start from (HF directory, its tokenizer files too)")
      ->required();
  cli.option("--train", o.train_file, "TRAIN.jsonl", "the training examples")->required();
  cli.option("--eval", o.eval_file, "EVAL.jsonl", "examples evaluated after each epoch (HF eval_strategy=\"epoch\")");
  cli.option("--output", o.output, "OUT", "the directory written (HF output_dir); created when missing")->required();
  cli.group("training options (HF TrainingArguments' names)");
  cli.option("--epochs", o.epochs, "E", "num_train_epochs (default 3; fractions allowed)")
      ->transform(number_in(0.0, 1e6));
  cli.option("--learning-rate", o.optimizer.learning_rate, "LR", "learning_rate (default 5e-5)")
      ->transform(number_in(0.0, 10.0));
  cli.option("--batch-size", o.batch_size, "N", "per_device_train_batch_size (default 8; also evaluation's)")
      ->transform(integer_in(1, 65536));
  cli.option("--gradient-accumulation-steps", o.gradient_accumulation_steps, "N",
             "gradient_accumulation_steps (default 1)")
      ->transform(integer_in(1, 65536));
  cli.option("--max-steps", max_steps, "N", "max_steps: the run's optimizer steps, whatever --epochs says")
      ->transform(integer_in(1, 1000000000));
  cli.option("--max-length", max_length, "N",
             "the tokenizer's max_length: longer inputs are truncated (default 512,\nor the tokenizer's "
             "model_max_length when smaller)")
      ->transform(integer_in(8, 1000000));
  cli.option("--seed", seed, "S", "seed (default 42): order, new head weights, dropout, masking")
      ->transform(integer_in(0, std::numeric_limits<std::int64_t>::max()));
  cli.option("--weight-decay", o.optimizer.weight_decay, "W",
             "weight_decay (default 0; never on biases and LayerNorm weights)")
      ->transform(number_in(0.0, 1e6));
  cli.option("--warmup-steps", o.optimizer.warmup_steps, "N", "warmup_steps (default 0)")
      ->transform(integer_in(0, 1000000000));
  cli.option("--warmup-ratio", o.warmup_ratio, "R",
             "warmup_ratio (default 0): ceil(R x steps) when --warmup-steps is 0")
      ->transform(number_in(0.0, 1.0));
  cli.choice("--lr-scheduler", o.optimizer.schedule, "S",
             {{"linear", LearningRateSchedule::kLinear},
              {"cosine", LearningRateSchedule::kCosine},
              {"constant", LearningRateSchedule::kConstant}},
             "lr_scheduler_type: linear (default), cosine or constant (constant after\nthe warmup)");
  cli.option("--max-grad-norm", o.optimizer.max_grad_norm, "N", "max_grad_norm (default 1.0; 0: no clipping)")
      ->transform(number_in(0.0, 1e9));
  cli.option("--save-steps", o.save_steps, "N",
             "save_steps: OUT/checkpoint-<step>/ every N steps (default 0: none; HF's\nsave_strategy=\"steps\")")
      ->transform(integer_in(0, 1000000000));
  cli.option("--logging-steps", o.logging_steps, "N",
             "logging_steps (default 500, HF's): a progress line every N steps when\nstderr is not a terminal")
      ->transform(integer_in(1, 1000000000));
  cli.flag("--resume", o.resume,
           "resume_from_checkpoint=True: continue from the newest OUT/checkpoint-<step>/\n(from the start when there "
           "is none)");
  cli.group("task options");
  cli.option("--labels", labels, "A,B,C",
             "the label set in id order (text and token classification); default:\nthe checkpoint's id2label "
             "unless it is LABEL_0.., else the training\nfile's sorted names (integer labels: 0..max)");
  cli.choice("--problem-type", o.problem, "P",
             {{"single_label_classification", ProblemType::kSingleLabel},
              {"regression", ProblemType::kRegression},
              {"multi_label_classification", ProblemType::kMultiLabel}},
             "text classification's problem_type: single_label_classification\n(default), regression (num_labels "
             "1) or multi_label_classification");
  cli.flag("--label-all-tokens", o.label_all_tokens,
           "token classification: every sub-word takes its word's tag (default: the\nfirst only, -100 on the rest)");
  cli.option("--mlm-probability", o.mlm_probability, "P", "masked-lm: the share of tokens masked (default 0.15)")
      ->transform(number_in(0.0, 1.0));
  cli.option("--doc-stride", o.doc_stride, "N",
             "question-answering: the tokens neighbouring windows of a long context\nshare (default 128, run_qa's)")
      ->transform(integer_in(0, 1000000));
  cli.group("runtime options");
  add_backend_option(cli, o.runtime.backend);
  cli.option("--threads", o.runtime.threads, "N", "host threads; 0 (default) uses every core")
      ->transform(integer_in(0, runtime::kMaxThreads));
  cli.choice("--attention", o.runtime.attention, "IMPL",
             {{"flash", AttentionImpl::kFlash}, {"eager", AttentionImpl::kEager}},
             "flash (default) or eager (the L x L scores, as HF)");
  add_training_dtype_option(cli, o.runtime.dtype);
  cli.footer(kFooter);
  if (!cli.parse(args)) return 0;
  o.task = runtime::parse_training_task(task);
  if (labels) o.labels = split_labels(*labels);
  o.seed = static_cast<std::uint64_t>(seed);
  o.max_steps = max_steps;
  o.max_length = max_length;

  bool const at_terminal = ::isatty(STDERR_FILENO) == 1;
  long const signal_at = [] {  // a test hook: the run raises SIGTERM itself after this step
    char const* v = std::getenv("FLASHDEBERTA_TRAIN_TEST_SIGTERM_AT_STEP");
    return v == nullptr ? -1L : std::atol(v);
  }();
  runtime::TrainerHooks hooks;
  hooks.on_step = [&](runtime::TrainingProgress const& p) {
    if (at_terminal)
      draw_bar(p);
    else if (p.logging_step)
      print_line(p);
    if (p.step == signal_at) std::raise(SIGTERM);
  };
  hooks.on_eval = [&](std::string const& line) {
    if (at_terminal) std::cerr << "\n";
    std::cout << line << std::endl;
  };
  hooks.on_note = [](std::string const& m) { std::cerr << "flashdeberta: " << m << std::endl; };
  hooks.should_stop = [] { return g_stop_signal != 0; };
  install_stop_handlers();
  runtime::TrainingResult const r = runtime::train(o, hooks);
  nlohmann::ordered_json line;
  line["global_step"] = r.global_step;
  line["epoch"] = r.epoch;
  line["train_loss"] = r.train_loss;
  if (r.interrupted) {
    line["interrupted"] = true;
    line["checkpoint"] = r.checkpoint.string();
  } else {
    line["output"] = o.output.string();
  }
  std::cout << line.dump() << std::endl;
  return r.interrupted ? 128 + static_cast<int>(g_stop_signal) : 0;
}

}  // namespace flashdeberta::cli
