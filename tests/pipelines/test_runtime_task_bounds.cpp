// The bounds runtime::Pipeline's tasks put on a call before any forward, as every front end meets them: the
// answer a fill-mask text may ask for, the candidate labels of a zero-shot call, a rerank query too long by
// itself (named as the query), and client strings quoted in refusals (cut to 64 characters and a size).
#include <doctest/doctest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "flashdeberta/runtime/pipeline.hpp"

namespace rt = flashdeberta::runtime;

namespace {

std::filesystem::path const kFixtures = FLASHDEBERTA_FIXTURE_DIR;

std::unique_ptr<rt::Pipeline> make_pipeline(std::filesystem::path const& dir, flashdeberta::HeadKind head) {
  rt::RuntimeOptions options;
  options.model = kFixtures / dir;
  options.threads = 2;
  return std::make_unique<rt::Pipeline>(options, kFixtures / "tokenizers" / "spm", head, "test");
}

std::unique_ptr<rt::Pipeline> make_pipeline(std::string const& pair_fixture) {
  return make_pipeline(std::filesystem::path("pairs") / pair_fixture, flashdeberta::HeadKind::kSequenceClassification);
}

}  // namespace

TEST_CASE("fill_mask refuses, before any forward, a text whose answer would hold too many tokens") {
  auto const pipeline =
      make_pipeline(std::filesystem::path("pipelines") / "fill_mask", flashdeberta::HeadKind::kMaskedLM);
  rt::TaskRun const run = pipeline->local_run(rt::InputNames::indexed("inputs"));
  std::string many;
  for (int i = 0; i < 510; ++i) many += "[MASK]";
  std::vector<std::string> const texts = {"a [MASK] tool", many};
  // 510 masks x 100 predictions x 512 tokens: 26 million tokens of answer (641 MB for 4 such texts).
  CHECK_THROWS_WITH_AS(pipeline->fill_mask(texts, {.top_k = 100}, run),
                       "inputs[1]: 510 masks x top_k 100 = 51000 predictions, each writing the text's 512 tokens, "
                       "are more than the 262144 tokens one text's answer may hold; ask for a smaller top_k or "
                       "fewer masks",
                       rt::InputError);
  // One mask at top_k 100 writes 100 x 5 tokens; 510 masks at top_k 1 write 510 x 512.
  CHECK(pipeline->fill_mask({texts.begin(), 1}, {.top_k = 100}, run).at(0).at(0).size() == 100);
  CHECK(pipeline->fill_mask({texts.begin() + 1, 1}, {.top_k = 1}, run).at(0).size() == 510);
}

TEST_CASE("zero_shot bounds its candidate labels and quotes a long label in a refusal") {
  auto const pipeline = make_pipeline("zero_shot");
  std::vector<std::string> const texts = {"The cat sleeps on the sofa."};
  rt::ZeroShotOptions options;
  options.candidate_labels = std::vector<std::string>(5, "animal");
  options.max_candidate_labels = 4;
  options.max_labels_option = "--max-client-batch-size";
  CHECK_THROWS_WITH_AS(pipeline->zero_shot(texts, options, pipeline->local_run()),
                       "candidate_labels holds 5 labels, more than the 4 of --max-client-batch-size (each label is "
                       "one more text-hypothesis pair per text; split the labels over several calls)",
                       rt::InputError);
  // The default bound of the CLI and Python.
  options = {};
  options.candidate_labels = std::vector<std::string>(rt::kMaxCandidateLabels + 1, "animal");
  CHECK_THROWS_AS(pipeline->check_zero_shot(options), rt::InputError);

  // A label too long for the run bound is named by its first 64 characters and its size, not echoed whole.
  options = {};
  options.candidate_labels = {std::string(100'000, 'x')};
  rt::TaskRun run = pipeline->local_run(rt::InputNames::indexed("inputs"));
  run.limit.run.tokens = 64;
  try {
    (void)pipeline->zero_shot(texts, options, run);
    FAIL("a 100 KB label was accepted");
  } catch (rt::InputError const& e) {
    std::string const message = e.what();
    CHECK(message.size() < 400);
    CHECK(message.starts_with("inputs[0] with the hypothesis of '" + std::string(64, 'x') + "...' (100000 bytes): "));
  }
  options.hypothesis_template = std::string(100'000, 'y');
  options.candidate_labels = {"animal"};
  try {
    pipeline->check_zero_shot(options);
    FAIL("a template without {} was accepted");
  } catch (rt::UsageError const& e) {
    CHECK(std::string(e.what()) == "hypothesis template \"" + std::string(64, 'y') +
                                       "...\" (100000 bytes) has no {} where the candidate label should go");
  }
}

TEST_CASE("rerank names a query too long by itself as the query") {
  auto const pipeline = make_pipeline("rerank");
  std::vector<std::string> const passages = {"short passage", "another one"};
  std::string query;
  for (int i = 0; i < 200; ++i) query += "word ";
  rt::TaskRun run = pipeline->local_run(rt::InputNames::indexed("texts"));
  run.limit.run = {64, "--max-input-length", "send \"truncate\": true to cut it"};
  CHECK_THROWS_WITH_AS(pipeline->rerank(query, passages, {}, run),
                       doctest::Contains("query: the text holds more than 64 tokens, more than --max-input-length 64"),
                       rt::InputError);
  // Cut to fit, the pair runs: the query alone is bounded only as it reads.
  rt::RerankOptions const cut{.truncate = {64, flashdeberta::tokenizer::Truncation::kLongestFirst}};
  CHECK(pipeline->rerank(query, passages, cut, run).size() == 2);
  // A long passage is still named as the passage.
  std::vector<std::string> const long_passage = {"short passage", query};
  CHECK_THROWS_WITH_AS(pipeline->rerank("a query", long_passage, {}, run), doctest::Contains("texts[1]: "),
                       rt::InputError);
}
