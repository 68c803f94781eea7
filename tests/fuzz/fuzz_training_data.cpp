// libFuzzer target: arbitrary bytes as a training file of flashdeberta train (runtime/src/training_data.cpp and,
// for question answering, training_qa.cpp), read with the SentencePiece fixture tokenizer. Byte 0 picks the task
// (its value mod 5), byte 1 the max length (8 + its value), byte 2 question answering's doc stride; the rest is the
// file. Any outcome other than examples that keep the invariants below or a flashdeberta::Error is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "flashdeberta/runtime/trainer.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"
#include "fuzz_support.hpp"

namespace {

namespace fd = flashdeberta;
using fd::fuzz::fuzz_check;

// What the batches and the losses rely on, for every example read.
void check_examples(fd::runtime::TrainingData const& data, fd::runtime::DataPlan const& plan) {
  using fd::runtime::TrainingTask;
  for (fd::runtime::TrainingExample const& ex : data.examples) {
    fuzz_check(!ex.sequences.empty(), "an example without a sequence");
    for (fd::runtime::TrainingSequence const& s : ex.sequences) {
      fuzz_check(!s.ids.empty() && static_cast<std::int64_t>(s.ids.size()) <= plan.max_length,
                 "a sequence empty or longer than max_length");
      fuzz_check(s.special.size() == s.ids.size(), "special-token marks of another length than the ids");
    }
    std::int64_t const labels = static_cast<std::int64_t>(plan.labels.size());
    switch (plan.task) {
      case TrainingTask::kTokenClassification:
        fuzz_check(ex.tokens.size() == ex.sequences[0].ids.size(), "token labels of another length than the ids");
        for (std::int64_t t : ex.tokens) fuzz_check(t == -100 || (t >= 0 && t < labels), "a token label out of range");
        break;
      case TrainingTask::kQuestionAnswering: {
        auto const n = static_cast<std::int64_t>(ex.sequences[0].ids.size());
        fuzz_check(ex.answer_start >= 0 && ex.answer_start <= ex.answer_end && ex.answer_end < n,
                   "answer tokens outside their window");
        fuzz_check(static_cast<std::int64_t>(ex.context_offsets.size()) == n, "context offsets per token");
        fuzz_check(ex.reference < data.references.size(), "a window without its reference");
        break;
      }
      case TrainingTask::kMultipleChoice:
        fuzz_check(
            ex.sequences.size() == plan.choices && ex.label >= 0 && ex.label < static_cast<std::int64_t>(plan.choices),
            "a choice label out of range");
        break;
      case TrainingTask::kTextClassification:
        fuzz_check(ex.label >= 0 && ex.label < labels, "a class label out of range");
        break;
      default:
        break;
    }
  }
}

}  // namespace

FLASHDEBERTA_FUZZ_TARGET(training_data) {
  static fd::Tokenizer const tok = fd::load_tokenizer(FLASHDEBERTA_FIXTURE_DIR "/tokenizers/spm");
  static fd::fuzz::ScratchDir const dir("fuzz_training_data");
  std::string_view input = fd::fuzz::as_text(data, size);
  std::uint8_t header[3] = {0, 0, 0};
  for (std::size_t i = 0; i < 3 && i < input.size(); ++i) header[i] = static_cast<std::uint8_t>(input[i]);
  input.remove_prefix(std::min<std::size_t>(input.size(), 3));
  fd::runtime::DataPlan plan;
  plan.task = static_cast<fd::runtime::TrainingTask>(header[0] % 5);
  plan.max_length = 8 + header[1];
  plan.doc_stride = header[2] % 16;
  if (plan.task == fd::runtime::TrainingTask::kTextClassification ||
      plan.task == fd::runtime::TrainingTask::kTokenClassification)
    plan.labels = {"O", "B-PER", "a", "b"};
  dir.write("train.jsonl", input);
  try {
    fd::runtime::TrainingData const read = fd::runtime::read_training_data(dir / "train.jsonl", plan, tok);
    check_examples(read, plan);
  } catch (fd::Error const&) {
  }
  return 0;
}
