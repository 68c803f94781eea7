// flashdeberta._native.train: the runtime's trainer (runtime/trainer.hpp, the one `flashdeberta train` runs) for
// Python's Trainer (flashdeberta/training.py), which maps TrainingArguments' names onto this call's keywords. The
// GIL is released while training; it is taken back for each log callback and for each check of Python's signals
// after an optimizer step: a KeyboardInterrupt stops the run there, writes a checkpoint and is raised after it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "flashdeberta/runtime/trainer.hpp"

namespace flashdeberta::python {

namespace {

ProblemType problem_type_of(std::string const& name) {
  if (name == "single_label_classification" || name.empty()) return ProblemType::kSingleLabel;
  if (name == "regression") return ProblemType::kRegression;
  if (name == "multi_label_classification") return ProblemType::kMultiLabel;
  throw runtime::UsageError("problem_type '" + name +
                            "' is not one of single_label_classification, regression, multi_label_classification");
}

py::dict train(std::string const& task, std::string const& model, std::string const& train_file,
               std::optional<std::string> const& eval_file, std::string const& output_dir, double epochs,
               std::int64_t max_steps, std::int64_t batch_size, std::int64_t accumulation,
               std::optional<std::int64_t> max_length, std::uint64_t seed, double learning_rate, double weight_decay,
               std::int64_t warmup_steps, double warmup_ratio, std::string const& scheduler, double max_grad_norm,
               std::int64_t save_steps, std::int64_t logging_steps, bool resume,
               std::optional<std::vector<std::string>> const& labels, std::string const& problem_type,
               bool label_all_tokens, double mlm_probability, std::int64_t doc_stride, int threads,
               std::string const& attention, std::string const& backend, std::string const& dtype,
               py::object const& on_log) {
  runtime::TrainerOptions o;
  o.task = runtime::parse_training_task(task);
  o.runtime = runtime_options(model, backend, dtype, attention, threads, runtime::kMaxTokensLimit);
  o.train_file = train_file;
  if (eval_file) o.eval_file = *eval_file;
  o.output = output_dir;
  o.epochs = epochs;
  if (max_steps > 0) o.max_steps = max_steps;
  o.batch_size = batch_size;
  o.gradient_accumulation_steps = accumulation;
  o.max_length = max_length;
  o.seed = seed;
  o.optimizer.learning_rate = learning_rate;
  o.optimizer.weight_decay = weight_decay;
  o.optimizer.warmup_steps = warmup_steps;
  o.optimizer.max_grad_norm = max_grad_norm;
  o.optimizer.schedule = parse_learning_rate_schedule(scheduler);
  o.warmup_ratio = warmup_ratio;
  o.save_steps = save_steps;
  o.logging_steps = logging_steps;
  o.resume = resume;
  o.labels = labels;
  o.problem = problem_type_of(problem_type);
  o.label_all_tokens = label_all_tokens;
  o.mlm_probability = mlm_probability;
  o.doc_stride = doc_stride;

  std::vector<std::string> evaluations;
  bool interrupted_by_python = false;
  runtime::TrainerHooks hooks;
  hooks.on_eval = [&](std::string const& line) { evaluations.push_back(line); };
  hooks.on_step = [&](runtime::TrainingProgress const& p) {
    if (on_log.is_none() || !p.logging_step) return;
    py::gil_scoped_acquire const locked;
    on_log(py::dict(py::arg("step") = p.step, py::arg("total_steps") = p.total_steps, py::arg("epoch") = p.epoch,
                    py::arg("loss") = p.loss, py::arg("learning_rate") = p.learning_rate,
                    py::arg("grad_norm") = p.grad_norm, py::arg("tokens_per_second") = p.tokens_per_second));
  };
  hooks.should_stop = [&] {
    py::gil_scoped_acquire const locked;
    interrupted_by_python = PyErr_CheckSignals() != 0;
    return interrupted_by_python;
  };
  runtime::TrainingResult result;
  {
    py::gil_scoped_release const unlocked;
    result = runtime::train(o, hooks);
  }
  if (interrupted_by_python) throw py::error_already_set();  // the KeyboardInterrupt, after the checkpoint
  py::list eval_lines;
  for (std::string const& line : evaluations) eval_lines.append(line);
  return py::dict(py::arg("global_step") = result.global_step, py::arg("epoch") = result.epoch,
                  py::arg("train_loss") = result.train_loss, py::arg("interrupted") = result.interrupted,
                  py::arg("checkpoint") = result.checkpoint.string(), py::arg("evaluations") = eval_lines);
}

}  // namespace

void bind_train(py::module_& m) {
  m.def("train", &train, py::arg("task"), py::arg("model"), py::arg("train_file"), py::arg("eval_file"),
        py::arg("output_dir"), py::arg("num_train_epochs"), py::arg("max_steps"),
        py::arg("per_device_train_batch_size"), py::arg("gradient_accumulation_steps"), py::arg("max_length"),
        py::arg("seed"), py::arg("learning_rate"), py::arg("weight_decay"), py::arg("warmup_steps"),
        py::arg("warmup_ratio"), py::arg("lr_scheduler_type"), py::arg("max_grad_norm"), py::arg("save_steps"),
        py::arg("logging_steps"), py::arg("resume"), py::arg("labels"), py::arg("problem_type"),
        py::arg("label_all_tokens"), py::arg("mlm_probability"), py::arg("doc_stride"), py::arg("threads"),
        py::arg("attention"), py::arg("backend") = "eigen", py::arg("dtype") = "float32", py::arg("on_log"));
}

}  // namespace flashdeberta::python
