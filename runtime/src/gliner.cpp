#include "flashdeberta/runtime/gliner.hpp"

#include <cmath>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "backend_state.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/gliner/gliner_long_text.hpp"
#include "flashdeberta/gliner/gliner_model.hpp"
#include "flashdeberta/io/regular_file.hpp"
#include "flashdeberta/runtime/pipeline.hpp"

namespace flashdeberta::runtime {

namespace {

// One text ready to run: its plan and its windows' encoder inputs.
struct PlannedText {
  std::size_t index = 0;  // in the call's texts
  GlinerTextPlan plan;
  std::vector<GlinerInput> inputs;
  std::int64_t tokens = 0;  // of all its windows, prompts included
};

}  // namespace

// Anything of the name counts, so that a gliner_config.json that is a FIFO or a directory is reported as what it
// is when read, not taken for a DeBERTa directory without config.json.
bool is_gliner_directory(std::filesystem::path const& directory) {
  return io::file_status(directory / "gliner_config.json").kind != io::FileKind::kMissing;
}

GlinerModel::GlinerModel(RuntimeOptions const& options)
    : max_tokens_(options.max_tokens), limit_names_(options.limit_names) {
  std::error_code ec;
  FLASHDEBERTA_REQUIRE_FILE(std::filesystem::is_directory(options.model, ec),
                            "--model " << options.model.string()
                                       << ": no such directory (a GLiNER model directory with gliner_config.json "
                                       << "is expected)");
  FLASHDEBERTA_REQUIRE_FILE(is_gliner_directory(options.model),
                            "--model " << options.model.string()
                                       << ": no gliner_config.json, so it is not a GLiNER model (GLiNER's "
                                       << "save_pretrained writes gliner_config.json, the weights and the tokenizer)");
  backend_ = std::make_unique<Backend>(options);
  model_ = backend_->state_->started->load_gliner(options.model);
}

GlinerModel::~GlinerModel() {
  model_.reset();
  backend_.reset();
}

std::string GlinerModel::describe() const {
  GlinerConfig const& c = config();
  std::string out = "GLiNER ";
  if (c.token_level()) {
    out += "token-level";
  } else {
    out += "span (" + std::string(span_mode_name(c.span_mode)) + ", max_width " + std::to_string(c.max_width) + ")";
  }
  return out + " on " + std::string(variant_name(c.encoder)) + ", hidden " + std::to_string(c.hidden_size);
}

std::vector<std::vector<GlinerEntity>> GlinerModel::predict_entities(std::span<std::string const> texts,
                                                                     std::vector<std::string> const& labels,
                                                                     GlinerOptions const& options,
                                                                     GlinerRun const& run) const {
  if (labels.empty()) throw UsageError("GLiNER needs at least one label");
  for (std::size_t l = 0; l < labels.size(); ++l) {
    if (labels[l].empty()) throw UsageError("label " + std::to_string(l + 1) + " is empty");
  }
  if (!(options.threshold >= 0.0 && options.threshold <= 1.0)) {
    throw UsageError("threshold " + std::to_string(options.threshold) + " is outside [0, 1]");
  }
  if (std::string const problem = gliner_long_text_problem(options, config()); !problem.empty()) {
    throw UsageError(problem);
  }
  InputLimit const limit = InputLimit::of(max_tokens_, limit_names_);
  std::vector<std::string> const used = dedup_gliner_labels(labels);
  std::vector<std::vector<GlinerEntity>> out(texts.size());
  // Forwards of at most run.batch_size texts and max_tokens tokens, the texts in order.
  std::vector<PlannedText> batch;
  std::int64_t batch_tokens = 0;
  auto const flush = [&] {
    std::vector<GlinerInput> inputs;  // every window of every text of the batch: one forward
    for (PlannedText& t : batch) std::move(t.inputs.begin(), t.inputs.end(), std::back_inserter(inputs));
    std::vector<GlinerLogits> const all = inputs.empty() ? std::vector<GlinerLogits>() : model_->logits(inputs);
    std::span<GlinerLogits const> rest(all);
    for (PlannedText const& t : batch) {
      std::span<GlinerLogits const> const windows = rest.first(t.plan.windows.size());
      rest = rest.subspan(windows.size());
      out[t.index] = gliner_text_entities(config(), texts[t.index], t.plan, windows, used, options);
    }
    batch.clear();
    batch_tokens = 0;
  };
  for (std::size_t i = 0; i < texts.size(); ++i) {
    std::string const name = run.names(i);
    require_text_bytes(texts[i].size(), name, limit.read);
    if (gliner_blank_text(texts[i])) continue;  // GLiNER: [] and nothing encoded
    PlannedText t{.index = i};
    try {
      t.plan = plan_gliner_text(model_->tokenizer(), config(), texts[i], used, options);
      append_gliner_inputs(model_->tokenizer(), config(), t.plan, used, options, t.inputs);
    } catch (Error const& e) {
      throw InputError(InputError::Kind::kInvalid, name + ": " + e.what());
    }
    for (GlinerInput const& in : t.inputs) t.tokens += static_cast<std::int64_t>(in.input_ids.size());
    if (t.tokens > max_tokens_) {
      throw InputError(InputError::Kind::kTooLong, name + ": the text holds " + std::to_string(t.tokens) +
                                                       " tokens with the labels' prompt, more than " +
                                                       limit.run.option + " " + std::to_string(max_tokens_) + " (" +
                                                       limit.run.remedy + ")");
    }
    if (!batch.empty() && (batch.size() == run.batch_size || batch_tokens + t.tokens > max_tokens_)) flush();
    batch_tokens += t.tokens;
    batch.push_back(std::move(t));
  }
  flush();
  return out;
}

}  // namespace flashdeberta::runtime
