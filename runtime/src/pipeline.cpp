#include "flashdeberta/runtime/pipeline.hpp"

#include <algorithm>
#include <numeric>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/heads/sequence_classification.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/mapped_file.hpp"
#include "flashdeberta/pipelines/question_answering.hpp"
#include "flashdeberta/pipelines/text_span.hpp"

namespace flashdeberta::runtime {

namespace {

// The same strict reader as the model's config (the model has loaded it by now); HF writes null when unset.
std::string read_problem_type(std::filesystem::path const& config_path) {
  io::MappedFile const file = io::MappedFile::open(config_path);
  std::string_view const text(reinterpret_cast<char const*>(file.bytes().data()), file.size());
  io::Json const root = io::parse_json(text, config_path.string(), "config");
  auto const it = root.is_object() ? root.find("problem_type") : root.end();
  return it != root.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::string_view head_description(HeadKind head) {
  switch (head) {
    case HeadKind::kBase:
      return "backbone";
    case HeadKind::kMaskedLM:
      return "masked-LM";
    case HeadKind::kSequenceClassification:
      return "sequence-classification";
    case HeadKind::kTokenClassification:
      return "token-classification";
    case HeadKind::kQuestionAnswering:
      return "question-answering";
    case HeadKind::kMultipleChoice:
      return "multiple-choice";
  }
  return "?";
}

Pipeline::Pipeline(RuntimeOptions const& options, std::optional<std::filesystem::path> const& tokenizer_dir,
                   HeadKind head, std::string_view task) {
  config_ = read_model_config(options.model);
  config_path_ = options.model / "config.json";
  HeadKind const found = head_kind_from_config(config_);
  if (found != head) {
    std::string names;
    for (std::string const& a : config_.architectures) names += (names.empty() ? "" : ", ") + a;
    throw UsageError(std::string(task) + " needs a " + std::string(head_description(head)) +
                     " checkpoint (architectures " + "Deberta*" + std::string(head_kind_class_suffix(head)) +
                     "), but " + config_path_.string() +
                     (names.empty() ? std::string(" names no architectures (the backbone alone)") : " names " + names));
  }
  max_tokens_ = options.max_tokens;
  limit_names_ = options.limit_names;
  problem_type_ = read_problem_type(config_path_);
  tokenizer_.emplace(tokenizer::load_tokenizer(tokenizer_dir.value_or(options.model)));
  backend_ = std::make_unique<Backend>(options);
  model_ = backend_->load(options.model, config_, head);
}

Pipeline::~Pipeline() {
  model_.reset();
  backend_.reset();
}

tokenizer::Encoding Pipeline::encode(std::string const& text, std::size_t index, std::string const* pair,
                                     Truncate const& truncate) const {
  require_text_bytes(text.size() + (pair != nullptr ? pair->size() : 0), index, max_tokens_, limit_names_);
  // Tokenizing stops once the text is sure to hold more than max_tokens, whatever its length.
  tokenizer::EncodeOptions options;
  options.token_limit = static_cast<std::size_t>(max_tokens_);
  options.max_length = truncate.max_length;
  options.truncation = truncate.strategy;
  tokenizer::Encoding e;
  try {
    e = pair != nullptr ? tokenizer_->encode(text, *pair, options) : tokenizer_->encode(text, options);
  } catch (tokenizer::TokenLimitError const&) {
    fail_over_max_tokens(index, max_tokens_, limit_names_);
  } catch (Error const& error) {
    fail_text(index, error.what());
  }
  return e;
}

Batch Pipeline::pack(std::vector<tokenizer::Encoding> const& encodings,
                     std::span<std::size_t const> text_numbers) const {
  FLASHDEBERTA_REQUIRE(text_numbers.size() == encodings.size(),
                       "pack: " << text_numbers.size() << " text numbers for " << encodings.size() << " encodings");
  std::int64_t total = 0;
  for (tokenizer::Encoding const& e : encodings) total += static_cast<std::int64_t>(e.size());
  FLASHDEBERTA_REQUIRE(encodings.empty() || total <= max_tokens_,
                       "texts " << text_numbers.front() << " to " << text_numbers.back() << " hold " << total
                                << " tokens together, more than " << limit_names_.max_tokens << " " << max_tokens_
                                << limit_names_.remedy(text_numbers.size() > 1));
  Batch batch;
  bool const types = config_.type_vocab_size > 0;
  for (std::size_t i = 0; i < encodings.size(); ++i) {
    tokenizer::Encoding const& e = encodings[i];
    std::vector<std::int32_t> ids, type_ids;
    for (std::size_t t = 0; t < e.size(); ++t) {
      std::int64_t const id = e.input_ids[t];
      if (id < 0 || id >= config_.vocab_size) {
        fail_text(text_numbers[i], "token '" + e.tokens[t] + "' has id " + std::to_string(id) +
                                       ", outside the model's vocabulary (vocab_size " +
                                       std::to_string(config_.vocab_size) + " in " + config_path_.string() +
                                       "); is the tokenizer the checkpoint's own?");
      }
      ids.push_back(static_cast<std::int32_t>(id));
      if (types)
        type_ids.push_back(
            static_cast<std::int32_t>(std::min<std::int64_t>(e.token_type_ids[t], config_.type_vocab_size - 1)));
    }
    batch.add_sequence(ids, type_ids);
  }
  return batch;
}

HeadOutput Pipeline::forward(std::vector<tokenizer::Encoding> const& encodings,
                             std::optional<std::int64_t> mask_token_id, std::size_t first_text) const {
  std::vector<std::size_t> numbers(encodings.size());
  std::iota(numbers.begin(), numbers.end(), first_text);
  return model_->forward_head(pack(encodings, numbers), mask_token_id);
}

std::vector<std::vector<float>> rows_by_sequence(HostHeadTensor const& t, std::span<std::size_t const> sizes) {
  std::vector<std::vector<float>> out(sizes.size());
  std::size_t const width = static_cast<std::size_t>(t.width);
  if (t.rows == HeadRows::kSequences) {
    FLASHDEBERTA_REQUIRE(t.row_count == static_cast<std::int64_t>(sizes.size()),
                         t.name << ": " << t.row_count << " rows for " << sizes.size() << " sequences");
    for (std::size_t b = 0; b < sizes.size(); ++b)
      out[b].assign(t.values.begin() + b * width, t.values.begin() + (b + 1) * width);
    return out;
  }
  std::vector<std::size_t> starts(sizes.size() + 1, 0);
  for (std::size_t b = 0; b < sizes.size(); ++b) {
    starts[b + 1] = starts[b] + sizes[b];
    out[b].assign(sizes[b] * width, 0.0f);
  }
  for (std::int64_t r = 0; r < t.row_count; ++r) {
    std::size_t const token = static_cast<std::size_t>(t.tokens[r]);
    auto const next = std::upper_bound(starts.begin(), starts.end(), token);
    std::size_t const b = static_cast<std::size_t>(next - starts.begin()) - 1;
    FLASHDEBERTA_REQUIRE(b < sizes.size(), t.name << ": row " << r << " names token " << token);
    std::copy_n(t.values.begin() + r * width, width, out[b].begin() + (token - starts[b]) * width);
  }
  return out;
}

// ---- the tasks ---------------------------------------------------------------------------------

std::vector<std::vector<std::vector<pipelines::MaskPrediction>>> Pipeline::fill_mask(std::span<std::string const> texts,
                                                                                     std::size_t top_k,
                                                                                     std::size_t first) const {
  tokenizer::Tokenizer const& tok = *tokenizer_;
  std::int64_t const mask_id = tok.mask_token_id();
  FLASHDEBERTA_REQUIRE(mask_id >= 0, "the tokenizer has no mask token ([MASK]), so fill-mask has nothing to fill");
  std::vector<tokenizer::Encoding> encodings;
  std::vector<std::vector<std::size_t>> masks;  // per text, where its masks are
  std::vector<std::size_t> starts = {0};        // per text, its first packed token
  for (std::size_t i = 0; i < texts.size(); ++i) {
    encodings.push_back(encode(texts[i], first + i));
    std::vector<std::size_t> at;
    for (std::size_t t = 0; t < encodings.back().size(); ++t)
      if (encodings.back().input_ids[t] == mask_id) at.push_back(t);
    if (at.empty())
      fail_text(first + i, "no mask token (" + *tok.id_to_token(mask_id) + ") in the text; fill-mask needs one");
    masks.push_back(std::move(at));
    starts.push_back(starts.back() + encodings.back().size());
  }
  HeadOutput const out = forward(encodings, mask_id, first);
  // The logits rows of the mask tokens only ([M, V], in token order): each goes to its text.
  HostHeadTensor const& logits = out["logits"];
  auto const vocab = static_cast<std::size_t>(config_.vocab_size);
  std::vector<std::vector<float>> rows(texts.size());  // per text: (masks, V)
  for (std::int64_t r = 0; r < logits.row_count; ++r) {
    auto const token = static_cast<std::size_t>(logits.tokens[r]);
    std::size_t const i =
        static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), token) - starts.begin()) - 1;
    FLASHDEBERTA_REQUIRE(i < texts.size(), "fill-mask: logits row " << r << " names token " << token);
    rows[i].insert(rows[i].end(), logits.values.begin() + r * vocab, logits.values.begin() + (r + 1) * vocab);
  }
  // A large top_k reaches model rows without a token (past the tokenizer's vocabulary): their token_str is
  // empty, as in HF.
  auto const decode = [&](std::span<std::int64_t const> ids, bool skip) {
    return tok.decode_dropping_unknown(ids, skip);
  };
  std::vector<std::vector<std::vector<pipelines::MaskPrediction>>> results;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    results.push_back(
        pipelines::fill_mask(encodings[i].input_ids, masks[i], rows[i], vocab, top_k, tok.special_ids().pad, decode));
  }
  return results;
}

std::vector<std::vector<pipelines::LabelScore>> Pipeline::classify(std::span<std::string const> texts,
                                                                   std::span<std::string const> pairs,
                                                                   std::optional<std::size_t> top_k,
                                                                   std::size_t first) const {
  FLASHDEBERTA_REQUIRE(pairs.empty() || pairs.size() == texts.size(),
                       "classify: " << texts.size() << " texts but " << pairs.size() << " text pairs");
  std::vector<std::string> const labels = label_names(config_);
  pipelines::ScoreFunction const function = pipelines::classification_function(problem_type_, labels.size());
  std::vector<tokenizer::Encoding> encodings;
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    encodings.push_back(encode(texts[i], first + i, pairs.empty() ? nullptr : &pairs[i]));
    sizes.push_back(encodings.back().size());
  }
  HeadOutput const out = forward(encodings, std::nullopt, first);
  std::vector<std::vector<float>> const logits = rows_by_sequence(out["logits"], sizes);
  std::vector<std::vector<pipelines::LabelScore>> results;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    results.push_back(pipelines::classify(logits[i], labels, function));
    if (top_k && *top_k < results.back().size()) results.back().resize(*top_k);
  }
  return results;
}

std::vector<std::vector<pipelines::Entity>> Pipeline::ner(std::span<std::string const> texts, std::size_t first) const {
  tokenizer::Tokenizer const& tok = *tokenizer_;
  std::vector<std::string> const labels = label_names(config_);
  std::vector<tokenizer::Encoding> encodings;
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    encodings.push_back(encode(texts[i], first + i));
    sizes.push_back(encodings.back().size());
  }
  HeadOutput const out = forward(encodings, std::nullopt, first);
  std::vector<std::vector<float>> const logits = rows_by_sequence(out["logits"], sizes);
  auto const decode = [&](std::span<std::int64_t const> ids) { return tok.decode(ids); };
  std::vector<std::vector<pipelines::Entity>> results;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    auto const predictions = pipelines::token_predictions(encodings[i], logits[i], labels.size());
    results.push_back(pipelines::group_entities_simple(encodings[i], predictions, labels, decode));
  }
  return results;
}

Answer Pipeline::answer(std::string const& question, std::string const& context, std::size_t index) const {
  auto const blank = [](std::string const& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; };
  if (blank(question)) fail_text(index, "the question is empty");
  if (blank(context)) fail_text(index, "the context is empty");
  tokenizer::Encoding const e = encode(question, index, &context);
  FLASHDEBERTA_REQUIRE(e.size() <= kMaxAnswerWindow, "the question and context take "
                                                         << e.size() << " tokens, more than the " << kMaxAnswerWindow
                                                         << " of one window (HF's pipeline would split the context "
                                                            "into overlapping windows, which is not done yet)");
  std::vector<tokenizer::Encoding> const encodings = {e};
  std::size_t const sizes[] = {e.size()};
  HeadOutput const out = forward(encodings, std::nullopt, index);
  std::vector<float> const start = rows_by_sequence(out["start_logits"], sizes).front();
  std::vector<float> const end = rows_by_sequence(out["end_logits"], sizes).front();
  auto const span = pipelines::best_answer_span(e, start, end, tokenizer_->special_ids().cls);
  FLASHDEBERTA_REQUIRE(span.has_value(), "the context has no token to answer with");
  return Answer{span->score, span->start, span->end, pipelines::substr_code_points(context, span->start, span->end)};
}

void require_text_bytes(std::size_t bytes, std::size_t index, std::int64_t max_tokens, TokenLimitNames const& names) {
  std::int64_t const limit = max_text_bytes(max_tokens);
  if (static_cast<std::int64_t>(bytes) <= limit) return;
  fail_text(index, "the text holds " + std::to_string(bytes) + " bytes, more than the " + std::to_string(limit) + " (" +
                       std::to_string(kMaxTextBytesPerToken) + " per token) of " + names.max_tokens + " " +
                       std::to_string(max_tokens) + "; it is refused before tokenizing (raise " + names.max_tokens +
                       ")");
}

void fail_over_max_tokens(std::size_t index, std::int64_t max_tokens, TokenLimitNames const& names) {
  fail_text(index, "the text holds more than " + std::to_string(max_tokens) + " tokens, more than " +
                       names.max_tokens + " " + std::to_string(max_tokens) + " (tokenizing stopped there; raise " +
                       names.max_tokens + ")");
}

void fail_text(std::size_t index, std::string const& message) {
  throw Error("text " + std::to_string(index) + ": " + message);
}

}  // namespace flashdeberta::runtime
