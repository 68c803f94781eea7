// Question answering for flashdeberta train: HF's run_qa.py. Training features (prepare_train_features): the
// question and the context cut into windows as the tokenizers library cuts an overflowing pair (qa_windows.hpp,
// the same windows the question-answering pipeline runs), each labelled with the first answer's first and last
// token, or [CLS] twice where the window does not hold the whole answer. Evaluation (postprocess_qa_predictions
// and the squad metric): the best span over an example's windows, then exact match and F1 against its answers.
#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>

#include "flashdeberta/pipelines/qa_windows.hpp"
#include "flashdeberta/pipelines/text_span.hpp"
#include "flashdeberta/tokenizer/unicode.hpp"
#include "training_internal.hpp"

namespace flashdeberta::runtime {

namespace {

using io::Json;

// One answer of SQuAD's column, its place in the context in code points.
struct ContextAnswer {
  std::string text;
  std::int64_t start = 0, length = 0;
};

// SQuAD's answers column: {"text": [...], "answer_start": [...]} with the same count (SQuAD 2's unanswerable
// questions have none).
std::vector<ContextAnswer> answers_of(std::filesystem::path const& file, detail::Line const& line,
                                      tokenizer::DecodedText const& context) {
  Json const& answers = detail::column(file, line, "answers", "{\"text\": [...], \"answer_start\": [...]} as SQuAD's");
  auto const texts = answers.find("text");
  auto const starts = answers.find("answer_start");
  if (!answers.is_object() || texts == answers.end() || starts == answers.end() || !texts->is_array() ||
      !starts->is_array())
    detail::refuse(file, line.number, "\"answers\" is {\"text\": [...], \"answer_start\": [...]} as SQuAD's");
  if (texts->size() != starts->size())
    detail::refuse(file, line.number,
                   "\"answers\" has " + std::to_string(texts->size()) + " texts but " + std::to_string(starts->size()) +
                       " answer_start values");
  std::vector<ContextAnswer> out;
  for (std::size_t i = 0; i < texts->size(); ++i) {
    Json const& text = (*texts)[i];
    Json const& start = (*starts)[i];
    std::string const which = "answer " + std::to_string(i);
    if (!text.is_string() || text.get_ref<std::string const&>().empty())
      detail::refuse(file, line.number, which + ": \"text\" is not a non-empty string");
    if (!start.is_number_integer() || start.get<std::int64_t>() < 0)
      detail::refuse(file, line.number, which + ": \"answer_start\" is not a character index");
    std::string const& value = text.get_ref<std::string const&>();
    auto const begin = start.get<std::int64_t>();
    auto const length = static_cast<std::int64_t>(
        detail::tokenize_at(file, line.number, [&] { return tokenizer::decode_utf8(value, "answer"); }).size());
    auto const characters = static_cast<std::int64_t>(context.size());
    if (begin + length > characters)
      detail::refuse(file, line.number,
                     which + " (\"" + value + "\") at answer_start " + std::to_string(begin) +
                         " runs past the context's " + std::to_string(characters) + " characters");
    std::string const found = tokenizer::encode_utf8(
        std::u32string_view(context.chars).substr(static_cast<std::size_t>(begin), static_cast<std::size_t>(length)));
    if (found != value)
      detail::refuse(file, line.number,
                     which + " (\"" + value + "\") is not the context's text at answer_start " + std::to_string(begin) +
                         " (\"" + found + "\")");
    out.push_back({value, begin, length});
  }
  return out;
}

// The window's tokens of the answer [first_char, end_char) in code points: run_qa's walk from both ends of the
// context, kept inside the context's tokens (HF's loop may step past the last one onto [SEP] or padding).
std::pair<std::int64_t, std::int64_t> answer_tokens(tokenizer::Encoding const& e, std::int64_t first_char,
                                                    std::int64_t end_char) {
  std::int64_t begin = -1, last = -1;
  for (std::size_t t = 0; t < e.size(); ++t) {
    if (e.sequence_ids[t] != 1) continue;
    if (begin < 0) begin = static_cast<std::int64_t>(t);
    last = static_cast<std::int64_t>(t);
  }
  if (begin < 0 || e.offsets[begin].begin > first_char || e.offsets[last].end < end_char) return {0, 0};
  std::int64_t start = begin;
  while (start < last && e.offsets[start + 1].begin <= first_char) ++start;
  std::int64_t end = last;
  while (end > begin && e.offsets[end - 1].end >= end_char) --end;
  return {start, end};
}

// SQuAD's normalize_answer: lower case, ASCII punctuation removed, the words a / an / the removed, whitespace runs
// collapsed; returned as its words. Python's \w (letters, numbers, _) and str.split()'s whitespace.
std::vector<std::u32string> normalized_words(std::string_view text) {
  std::u32string lowered;
  for (char32_t c : tokenizer::decode_utf8(text, "answer").chars) {
    bool const ascii_punct = c < 0x80 && tokenizer::is_punctuation(c);
    if (!ascii_punct) tokenizer::append_lowercase(lowered, c);
  }
  auto const word_char = [](char32_t c) { return c == U'_' || tokenizer::is_letter(c) || tokenizer::is_number(c); };
  auto const space = [](char32_t c) { return tokenizer::is_whitespace(c) || (c >= 0x1C && c <= 0x1F); };
  // \b(a|an|the)\b: an article between non-word characters becomes a space.
  std::u32string cleaned;
  for (std::size_t i = 0; i < lowered.size();) {
    bool matched = false;
    if (i == 0 || !word_char(lowered[i - 1])) {
      for (std::u32string_view article : {U"the", U"an", U"a"}) {
        std::size_t const end = i + article.size();
        if (lowered.compare(i, article.size(), article) == 0 && (end == lowered.size() || !word_char(lowered[end]))) {
          cleaned += U' ';
          i = end;
          matched = true;
          break;
        }
      }
    }
    if (!matched) cleaned += lowered[i++];
  }
  std::vector<std::u32string> words;
  std::u32string word;
  for (char32_t c : cleaned + U' ') {
    if (!space(c)) {
      word += c;
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  return words;
}

double f1_score(std::vector<std::u32string> const& predicted, std::vector<std::u32string> const& truth) {
  std::map<std::u32string, int> counts;
  for (auto const& w : truth) ++counts[w];
  double common = 0;
  for (auto const& w : predicted)
    if (counts[w]-- > 0) ++common;
  if (common == 0) return 0.0;
  double const precision = common / static_cast<double>(predicted.size());
  double const recall = common / static_cast<double>(truth.size());
  return 2 * precision * recall / (precision + recall);
}

}  // namespace

namespace detail {

void read_question_answering(std::filesystem::path const& file, Line const& line, DataPlan const& plan,
                             tokenizer::Tokenizer const& tok, TrainingData& data) {
  std::string const& question = string_column(file, line, "question");
  std::string const& context = string_column(file, line, "context");
  tokenizer::DecodedText const chars =
      tokenize_at(file, line.number, [&] { return tokenizer::decode_utf8(context, "context"); });
  auto const answers = answers_of(file, line, chars);
  std::vector<tokenizer::Encoding> const windows = tokenize_at(file, line.number, [&] {
    return pipelines::question_context_windows(tok, question, context, static_cast<std::size_t>(plan.max_length),
                                               static_cast<std::size_t>(plan.doc_stride), SIZE_MAX);
  });
  AnswerReference reference{context, {}};
  for (ContextAnswer const& answer : answers) reference.answers.push_back(answer.text);
  for (tokenizer::Encoding const& window : windows) {
    TrainingExample ex;
    ex.line = line.number;
    ex.reference = data.references.size();
    ex.sequences.push_back(sequence_of(window, plan.token_types));
    if (!answers.empty()) {  // HF trains on the first answer
      ContextAnswer const& first = answers.front();
      std::tie(ex.answer_start, ex.answer_end) = answer_tokens(window, first.start, first.start + first.length);
    }
    for (std::size_t t = 0; t < window.size(); ++t)
      ex.context_offsets.push_back(window.sequence_ids[t] == 1 ? window.offsets[t] : tokenizer::Span{-1, -1});
    data.max_tokens = std::max(data.max_tokens, window.size());
    data.examples.push_back(std::move(ex));
  }
  data.references.push_back(std::move(reference));
}

}  // namespace detail

std::string best_answer(std::vector<WindowLogits> const& windows, std::string const& context) {
  constexpr std::size_t kBest = 20;      // run_qa's n_best_size
  constexpr std::int64_t kLongest = 30;  // run_qa's max_answer_length
  std::optional<std::pair<float, tokenizer::Span>> best;
  for (WindowLogits const& w : windows) {
    std::size_t const n = w.offsets->size();
    auto const top = [&](std::span<float const> logits) {  // np.argsort(logits)[-1 : -n_best_size - 1 : -1]
      std::vector<std::size_t> order(n);
      std::iota(order.begin(), order.end(), std::size_t{0});
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return logits[a] > logits[b]; });
      order.resize(std::min(n, kBest));
      return order;
    };
    for (std::size_t s : top(w.start))
      for (std::size_t e : top(w.end)) {
        tokenizer::Span const& first = (*w.offsets)[s];
        tokenizer::Span const& last = (*w.offsets)[e];
        if (first.begin < 0 || last.begin < 0 || e < s || static_cast<std::int64_t>(e - s) + 1 > kLongest) continue;
        float const score = w.start[s] + w.end[e];
        if (!best || score > best->first) best = {score, {first.begin, last.end}};
      }
  }
  if (!best) return "empty";  // postprocess_qa_predictions' answer when no span qualifies
  return pipelines::substr_code_points(context, best->second.begin, best->second.end);
}

SquadScores squad_scores(std::vector<std::string> const& predictions, std::vector<AnswerReference> const& references) {
  FLASHDEBERTA_REQUIRE(predictions.size() == references.size(), "squad metric: " << predictions.size()
                                                                                 << " predictions for "
                                                                                 << references.size() << " references");
  SquadScores out;
  for (std::size_t i = 0; i < predictions.size(); ++i) {
    std::vector<std::string> truths = references[i].answers;
    if (truths.empty()) truths.emplace_back();  // an unanswerable question's reference is the empty answer
    auto const predicted = normalized_words(predictions[i]);
    double exact = 0.0, f1 = 0.0;
    for (std::string const& truth : truths) {
      auto const words = normalized_words(truth);
      exact = std::max(exact, words == predicted ? 1.0 : 0.0);
      f1 = std::max(f1,
                    predicted.empty() || words.empty() ? (words == predicted ? 1.0 : 0.0) : f1_score(predicted, words));
    }
    out.exact_match += exact;
    out.f1 += f1;
  }
  double const n = static_cast<double>(std::max<std::size_t>(predictions.size(), 1));
  out.exact_match *= 100.0 / n;
  out.f1 *= 100.0 / n;
  return out;
}

}  // namespace flashdeberta::runtime
