// runtime::Pipeline's pair tasks called directly, as the server calls them: embed (no CLI command runs it)
// against the backbone's states, and zero_shot and rerank on the pair fixtures against HF's logits and
// scores (tests/fixtures/pairs), with several texts in one call.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "flashdeberta/runtime/pipeline.hpp"

namespace rt = flashdeberta::runtime;
using nlohmann::json;

namespace {

std::filesystem::path const kFixtures = FLASHDEBERTA_FIXTURE_DIR;

std::unique_ptr<rt::Pipeline> make_pipeline(std::string const& name) {
  rt::RuntimeOptions options;
  options.model = kFixtures / "pairs" / name;
  options.threads = 2;
  return std::make_unique<rt::Pipeline>(options, kFixtures / "tokenizers" / "spm",
                                        flashdeberta::HeadKind::kSequenceClassification, "test");
}

json expected(std::string const& name) {
  return json::parse(std::ifstream(kFixtures / "pairs" / name / "expected.json"));
}

}  // namespace

TEST_CASE("embed pools the backbone's last hidden states of each text") {
  auto const pipeline = make_pipeline("zero_shot");
  std::vector<std::string> const texts = {"The cat sleeps on the sofa.", "It is raining heavily today."};
  rt::TaskRun const run = pipeline->local_run();
  auto const cls = pipeline->embed(texts, {.pooling = rt::Pooling::kCls, .normalize = false}, run);
  auto const mean = pipeline->embed(texts, {.pooling = rt::Pooling::kMean, .normalize = false}, run);
  auto const unit = pipeline->embed(texts, {.pooling = rt::Pooling::kMean, .normalize = true}, run);
  auto const width = static_cast<std::size_t>(pipeline->config().hidden_size);
  REQUIRE(cls.size() == 2);
  for (std::size_t i = 0; i < texts.size(); ++i) {
    // The text alone, through the backbone: its rows (tokens, hidden). The fixture has no token types.
    flashdeberta::tokenizer::Encoding const e =
        rt::encode_input(pipeline->tokenizer(), pipeline->config(), texts[i], nullptr, run.names(i), run.limit);
    flashdeberta::Batch batch;
    batch.add_sequence(std::vector<std::int32_t>(e.input_ids.begin(), e.input_ids.end()), {});
    std::vector<float> const hidden = pipeline->model().forward_to_host(batch);
    std::size_t const tokens = e.size();
    REQUIRE(hidden.size() == tokens * width);
    REQUIRE(cls[i].size() == width);
    double norm = 0.0;
    for (std::size_t h = 0; h < width; ++h) {
      double sum = 0.0;
      for (std::size_t t = 0; t < tokens; ++t) sum += hidden[t * width + h];
      CHECK(cls[i][h] == doctest::Approx(hidden[h]).epsilon(1e-5));
      CHECK(mean[i][h] == doctest::Approx(sum / static_cast<double>(tokens)).epsilon(1e-5));
      norm += static_cast<double>(unit[i][h]) * unit[i][h];
    }
    CHECK(norm == doctest::Approx(1.0).epsilon(1e-6));
  }
  CHECK(pipeline->embed({}, {}, run).empty());
}

TEST_CASE("zero_shot and rerank over several texts in one call agree with HF") {
  SUBCASE("zero_shot: every single-sequence fixture case with the same labels, in one packed batch") {
    auto const pipeline = make_pipeline("zero_shot");
    json const doc = expected("zero_shot");
    json const& first = doc["inputs"][0];  // four labels, multi_label false; case 1 is the same with multi_label
    auto const labels = first["input"]["candidate_labels"].get<std::vector<std::string>>();
    std::vector<std::string> const texts = {first["input"]["sequences"].get<std::string>(),
                                            "Another text, to share the batch."};
    for (std::size_t c = 0; c < 2; ++c) {
      json const& want = doc["inputs"][c]["output"];
      bool const multi_label = doc["inputs"][c]["input"]["multi_label"].get<bool>();
      auto const results =
          pipeline->zero_shot(texts, {labels, "This example is {}.", multi_label}, pipeline->local_run());
      REQUIRE(results.size() == 2);
      CHECK(results[0].labels == want["labels"].get<std::vector<std::string>>());
      for (std::size_t k = 0; k < labels.size(); ++k)
        CHECK(results[0].scores[k] == doctest::Approx(want["scores"][k].get<double>()).epsilon(1e-5));
    }
  }
  SUBCASE("rerank: raw scores are HF's logits") {
    auto const pipeline = make_pipeline("rerank");
    json const doc = expected("rerank");  // held: a range-for over a temporary's member would dangle
    for (json const& c : doc["inputs"]) {
      rt::Truncate truncate;
      if (!c["input"]["max_length"].is_null()) {
        truncate.max_length = c["input"]["max_length"].get<std::size_t>();
        truncate.strategy = flashdeberta::tokenizer::parse_truncation(c["input"]["truncation"].get<std::string>());
      }
      auto const passages = c["input"]["passages"].get<std::vector<std::string>>();
      rt::RerankOptions const options{.top_n = 3, .raw_scores = true, .truncate = truncate};
      auto const ranked =
          pipeline->rerank(c["input"]["query"].get<std::string>(), passages, options, pipeline->local_run());
      REQUIRE(ranked.size() == std::min<std::size_t>(3, passages.size()));
      for (std::size_t k = 0; k < ranked.size(); ++k) {
        CHECK(ranked[k].index == c["order"][k].get<std::size_t>());
        CHECK(ranked[k].score == doctest::Approx(c["logits"][ranked[k].index].get<double>()).epsilon(1e-5));
      }
    }
  }
}
