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
#include "flashdeberta/runtime/pipeline.hpp"

namespace flashdeberta::runtime {

namespace {

// GLiNER<P>::predict_entities over `model`, with the texts numbered from `first` in messages and their tokens
// counted against `max_tokens` before the forward.
std::vector<std::vector<GlinerEntity>> predict_with(LoadedGliner const& model, std::span<std::string const> texts,
                                                    std::vector<std::string> const& labels,
                                                    GlinerOptions const& options, std::size_t first,
                                                    std::int64_t max_tokens, TokenLimitNames const& names) {
  GlinerConfig const& config = model.config();
  std::vector<std::string> const used = dedup_gliner_labels(labels);
  std::vector<std::vector<GlinerEntity>> out(texts.size());
  std::vector<GlinerTextPlan> plans;  // one window per text, except under long_text windows
  std::vector<GlinerInput> inputs;    // every window of every text: one forward
  std::vector<std::size_t> which;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    std::size_t const before = inputs.size();
    try {
      if (gliner_blank_text(texts[i])) continue;  // GLiNER: [] and nothing encoded
      plans.push_back(plan_gliner_text(model.tokenizer(), config, texts[i], used, options));
      append_gliner_inputs(model.tokenizer(), config, plans.back(), used, options, inputs);
    } catch (Error const& e) {
      fail_text(first + i, e.what());
    }
    which.push_back(i);
    for (std::size_t w = before; w < inputs.size(); ++w) total += static_cast<std::int64_t>(inputs[w].input_ids.size());
    if (total > max_tokens) {
      std::string const what = which.size() == 1 ? "text " + std::to_string(first + i) + " holds "
                                                 : "texts " + std::to_string(first + which.front()) + " to " +
                                                       std::to_string(first + i) + " hold ";
      throw Error(what + std::to_string(total) + " tokens with the labels' prompt, more than " + names.max_tokens +
                  " " + std::to_string(max_tokens) + names.remedy(which.size() > 1));
    }
  }
  std::vector<GlinerLogits> const all = model.logits(inputs);
  std::span<GlinerLogits const> rest(all);
  for (std::size_t j = 0; j < plans.size(); ++j) {
    std::span<GlinerLogits const> const windows = rest.first(plans[j].windows.size());
    rest = rest.subspan(windows.size());
    out[which[j]] = gliner_text_entities(config, texts[which[j]], plans[j], windows, used, options);
  }
  return out;
}

}  // namespace

bool is_gliner_directory(std::filesystem::path const& directory) {
  std::error_code ec;
  return std::filesystem::is_regular_file(directory / "gliner_config.json", ec);
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
                                                                     std::size_t first) const {
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
  for (std::size_t i = 0; i < texts.size(); ++i)
    require_text_bytes(texts[i].size(), first + i, max_tokens_, limit_names_);
  return predict_with(*model_, texts, labels, options, first, max_tokens_, limit_names_);
}

}  // namespace flashdeberta::runtime
