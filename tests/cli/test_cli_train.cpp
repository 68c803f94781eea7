// flashdeberta train (apps/cli/train_command.cpp, runtime/src/trainer.cpp) on the shipped tiny-en model: the
// checkpoint it writes loads in the pipeline commands, bad data is refused before training naming file and line,
// a run stopped by SIGTERM and resumed ends bit-identical to an uninterrupted one, and the epoch order is HF's.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cli_harness.hpp"
#include "flashdeberta/io/safetensors.hpp"
#include "flashdeberta/io/safetensors_writer.hpp"
#include "flashdeberta/pipelines/text_span.hpp"
#include "flashdeberta/runtime/trainer.hpp"

namespace flashdeberta::testing {

namespace {

namespace fs = std::filesystem;

fs::path tiny_en() { return fs::path(FLASHDEBERTA_FIXTURE_DIR).parent_path().parent_path() / "models" / "tiny-en"; }

// `count` sentiment lines, alternating labels, each a little different.
std::string sentiment_lines(int count, int offset = 0) {
  char const* const good[] = {"great", "wonderful", "excellent", "lovely"};
  char const* const bad[] = {"terrible", "awful", "horrible", "dreadful"};
  std::string out;
  for (int i = offset; i < offset + count; ++i) {
    bool const positive = i % 2 == 0;
    std::string const word = positive ? good[i % 4] : bad[i % 4];
    out += R"({"text": "The package manager was )" + word + " on day " + std::to_string(i) + R"(.", "label": ")" +
           (positive ? "positive" : "negative") + "\"}\n";
  }
  return out;
}

std::vector<std::string> train_args(ScratchDir const& dir, fs::path const& out, std::vector<std::string> extra) {
  std::vector<std::string> args = {
      "train",    "--model",    tiny_en().string(), "--train", (dir / "train.jsonl").string(),
      "--output", out.string(), "--max-length",     "32"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

io::Json read_json(fs::path const& file) { return io::Json::parse(read_text(file)); }

// SQuAD-style lines whose contexts --max-length 32 cuts into several windows; the answer is a maintainer's name.
std::string qa_lines(int count) {
  char const* const names[] = {"Alice Smith", "Bob Jones", "Carol White", "Dan Brown"};
  std::string out;
  for (int i = 0; i < count; ++i) {
    std::string const name = names[i % 4];
    std::string const context = "The tool number " + std::to_string(i) +
                                " is a command-line program for managing archives. It is maintained by " + name +
                                " since 2019. Releases come every spring and autumn, with a manual for each option.";
    out += R"({"question": "Who maintains tool number )" + std::to_string(i) + R"(?", "context": ")" + context +
           R"(", "answers": {"text": [")" + name + R"("], "answer_start": [)" + std::to_string(context.find(name)) +
           "]}}\n";
  }
  return out;
}

}  // namespace

TEST_CASE("train: text classification writes a checkpoint classify loads, with eval lines") {
  ScratchDir const dir("train");
  dir.write("train.jsonl", sentiment_lines(32));
  dir.write("eval.jsonl", sentiment_lines(8, 100));
  fs::path const out = dir / "out";
  CliResult const r = run_cli(train_args(dir, out,
                                         {"--eval", (dir / "eval.jsonl").string(), "--epochs", "2", "--threads", "2",
                                          "--learning-rate", "1e-4", "--logging-steps", "2"}));
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  auto const lines = json_lines(r.out);
  REQUIRE(lines.size() == 3);  // two evaluations, then the summary
  for (int e = 0; e < 2; ++e) {
    CHECK(lines[e]["epoch"].get<double>() == doctest::Approx(e + 1));
    CHECK(lines[e]["step"] == 4 * (e + 1));
    CHECK(lines[e].contains("eval_loss"));
    CHECK(lines[e]["eval_accuracy"].get<double>() >= 0.0);
    CHECK(lines[e].contains("eval_f1"));
  }
  CHECK(lines[2]["global_step"] == 8);
  CHECK(std::isfinite(lines[2]["train_loss"].get<double>()));
  CHECK(r.err.find("flashdeberta: step 2/8 (epoch 0.50): loss ") != std::string::npos);
  CHECK(json_lines(read_text(out / "eval.jsonl")).size() == 2);

  io::Json const config = read_json(out / "config.json");
  CHECK(config["architectures"] == io::Json::array({"DebertaV2ForSequenceClassification"}));
  CHECK(config["id2label"] == io::Json({{"0", "negative"}, {"1", "positive"}}));
  CHECK(config["label2id"]["positive"] == 1);
  CHECK(config["problem_type"] == "single_label_classification");
  CHECK(config["hidden_size"] == 256);
  CHECK(fs::is_regular_file(out / "spm.model"));
  SafetensorsFile const weights = SafetensorsFile::open(out / "model.safetensors");
  CHECK(weights.info("classifier.weight").shape == std::vector<std::int64_t>{2, 256});
  CHECK(weights.info("pooler.dense.weight").shape == std::vector<std::int64_t>{256, 256});
  CHECK(weights.info("deberta.embeddings.word_embeddings.weight").shape == std::vector<std::int64_t>{12008, 256});

  auto const classified = run_cli_lines({"classify", "--model", out.string(), "--threads", "2", "It was great."}, 1);
  auto const& labels = classified.lines[0]["labels"];
  REQUIRE(labels.size() == 2);
  CHECK((labels[0]["label"] == "positive" || labels[0]["label"] == "negative"));
}

TEST_CASE("train: token classification and masked LM write checkpoints ner and fill-mask load") {
  ScratchDir const dir("train");
  std::string data;
  for (int i = 0; i < 12; ++i)
    data += R"({"tokens": ["Alice", "visited", "Paris", "on", "day", ")" + std::to_string(i) +
            R"("], "ner_tags": ["B-PER", "O", "B-LOC", "O", "O", "O"]})" + "\n";
  dir.write("train.jsonl", data);
  fs::path const out = dir / "ner";
  CliResult const r = run_cli(train_args(
      dir, out,
      {"--task", "token-classification", "--epochs", "1", "--threads", "2", "--eval", (dir / "train.jsonl").string()}));
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  auto const lines = json_lines(r.out);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].contains("eval_f1"));
  CHECK(lines[0].contains("eval_precision"));
  io::Json const config = read_json(out / "config.json");
  CHECK(config["architectures"] == io::Json::array({"DebertaV2ForTokenClassification"}));
  CHECK(config["id2label"] == io::Json({{"0", "B-LOC"}, {"1", "B-PER"}, {"2", "O"}}));
  run_cli_lines({"ner", "--model", out.string(), "--threads", "2", "Alice visited Paris."}, 1);

  std::string texts;
  for (int i = 0; i < 8; ++i)
    texts += R"({"text": "This is a command-line tool for managing packages number )" + std::to_string(i) + ".\"}\n";
  dir.write("train.jsonl", texts);
  fs::path const mlm = dir / "mlm";
  CliResult const m = run_cli(train_args(dir, mlm, {"--task", "masked-lm", "--max-steps", "2", "--threads", "2"}));
  CAPTURE(m.err);
  REQUIRE(m.status == 0);
  CHECK(read_json(mlm / "config.json")["architectures"] == io::Json::array({"DebertaV2ForMaskedLM"}));
  run_cli_lines({"fill-mask", "--model", mlm.string(), "--threads", "2", "A [MASK] for managing packages."}, 1);
}

TEST_CASE("train: bad data is refused before training, naming the file and the line") {
  ScratchDir const dir("train");
  fs::path const out = dir / "out";
  auto const refused = [&](std::string const& data, std::vector<std::string> extra, std::string const& needle) {
    dir.write("train.jsonl", data);
    CliResult const r = run_cli(train_args(dir, out, extra));
    check_one_line_error(r, 1, needle);
    CHECK(!fs::exists(out));  // nothing written: the data is checked first
  };
  std::string const good = R"({"text": "fine", "label": "a"})"
                           "\n";
  std::string const file = (dir / "train.jsonl").string();
  refused(good + "{\"text\": \"oops\",\n", {}, file + " line 2: ");
  refused(good + "\n" +
              R"({"label": "a"})"
              "\n",
          {}, file + " line 3: missing column \"text\"");
  refused(good + R"({"text": "x", "label": "c"})"
                 "\n",
          {"--labels", "a,b"}, file + " line 2: label \"c\" is outside the label set");
  refused(good + R"({"text": "x", "label": 5})"
                 "\n",
          {"--labels", "a,b"}, file + " line 2: label 5 is outside");
  refused("\n\n", {}, file + ": no examples");
  refused(R"({"tokens": ["a", "b"], "ner_tags": ["O"]})"
          "\n",
          {"--task", "token-classification"}, file + " line 1: 2 tokens but 1 ner_tags");
  refused(good + "{\"text\": \"bad \xff byte\", \"label\": \"a\"}\n", {}, file + " line 2");

  dir.write("train.jsonl", good);
  dir.write("blocker", "a file, not a directory");
  check_one_line_error(run_cli(train_args(dir, dir / "blocker" / "out", {})), 1, "--output");
}

TEST_CASE("train: SIGTERM then --resume ends bit-identical to an uninterrupted run") {
  ScratchDir const dir("train");
  dir.write("train.jsonl", sentiment_lines(24));
  // 6 micro-batches of 4 an epoch, 2 per step: 3 steps an epoch, 6 in all; dropout on (tiny-en's 0.1).
  std::vector<std::string> const options = {
      "--epochs",        "2",    "--batch-size", "4", "--gradient-accumulation-steps", "2", "--threads", "1",
      "--learning-rate", "1e-4", "--seed",       "7"};
  CliResult const whole = run_cli(train_args(dir, dir / "whole", options));
  CAPTURE(whole.err);
  REQUIRE(whole.status == 0);

  fs::path const out = dir / "stopped";
  ::setenv("FLASHDEBERTA_TRAIN_TEST_SIGTERM_AT_STEP", "2", 1);  // mid-epoch 0
  CliResult const stopped = run_cli(train_args(dir, out, options));
  ::unsetenv("FLASHDEBERTA_TRAIN_TEST_SIGTERM_AT_STEP");
  CAPTURE(stopped.err);
  REQUIRE(stopped.status == 143);
  CHECK(fs::is_regular_file(out / "checkpoint-2" / "training_state.safetensors"));
  CHECK(read_json(out / "checkpoint-2" / "trainer_state.json")["micro_batches_in_epoch"] == 4);
  CHECK(!fs::exists(out / "model.safetensors"));

  std::vector<std::string> resume = options;
  resume.push_back("--resume");
  CliResult const resumed = run_cli(train_args(dir, out, resume));
  CAPTURE(resumed.err);
  REQUIRE(resumed.status == 0);
  CHECK(resumed.err.find("resuming from") != std::string::npos);
  CHECK(json_lines(resumed.out).back()["train_loss"] == json_lines(whole.out).back()["train_loss"]);

  SafetensorsFile const a = SafetensorsFile::open(dir / "whole" / "model.safetensors");
  SafetensorsFile const b = SafetensorsFile::open(out / "model.safetensors");
  REQUIRE(a.names() == b.names());
  std::size_t differing = 0;
  for (std::string const& name : a.names()) differing += a.read_f32(name) != b.read_f32(name);
  CHECK(differing == 0);
}

TEST_CASE("train: question answering cuts contexts into windows labelled with the answer's tokens, as run_qa") {
  ScratchDir const dir("train");
  dir.write("train.jsonl", qa_lines(4));
  tokenizer::Tokenizer const tok = tokenizer::load_tokenizer(tiny_en());
  runtime::DataPlan plan;
  plan.task = runtime::TrainingTask::kQuestionAnswering;
  plan.max_length = 32;
  plan.doc_stride = 8;
  runtime::TrainingData const data = runtime::read_training_data(dir / "train.jsonl", plan, tok);
  REQUIRE(data.references.size() == 4);
  CHECK(data.examples.size() > 8);  // several windows per context
  std::vector<int> answered(4, 0);
  for (runtime::TrainingExample const& ex : data.examples) {
    CHECK(ex.sequences.at(0).ids.size() <= 32);
    CHECK(ex.context_offsets.size() == ex.sequences[0].ids.size());
    std::string const& context = data.references[ex.reference].context;
    std::string const& answer = data.references[ex.reference].answers.at(0);
    if (ex.answer_start == 0) {  // [CLS]: the window does not hold the whole answer
      CHECK(ex.answer_end == 0);
      continue;
    }
    ++answered[ex.reference];
    REQUIRE(ex.answer_start <= ex.answer_end);
    std::string text = pipelines::substr_code_points(context, ex.context_offsets[ex.answer_start].begin,
                                                     ex.context_offsets[ex.answer_end].end);
    text.erase(0, text.find_first_not_of(' '));
    CHECK(text == answer);
  }
  for (int a : answered) CHECK(a >= 1);  // the windows overlap by 8 tokens: one at least holds the name whole

  fs::path const out = dir / "out";
  auto const refused = [&](std::string const& line, std::string const& needle) {
    dir.write("bad.jsonl", line + "\n");
    check_one_line_error(run_cli({"train", "--task", "question-answering", "--model", tiny_en().string(), "--train",
                                  (dir / "bad.jsonl").string(), "--output", out.string()}),
                         1, (dir / "bad.jsonl").string() + " line 1: " + needle);
  };
  refused(R"({"question": "Who?", "context": "Ann wrote it.", "answers": {"text": ["Bob"], "answer_start": [0]}})",
          "answer 0 (\"Bob\") is not the context's text at answer_start 0 (\"Ann\")");
  refused(R"({"question": "Who?", "context": "Ann wrote it.", "answers": {"text": ["it."], "answer_start": [12]}})",
          "answer 0 (\"it.\") at answer_start 12 runs past the context's 13 characters");
  refused(R"({"question": "Who?", "context": "Ann", "answers": {"text": ["Ann"], "answer_start": []}})",
          "\"answers\" has 1 texts but 0 answer_start values");
  refused(R"({"question": "Who?", "context": "Ann"})", "missing column \"answers\"");
  CHECK(!fs::exists(out));

  CliResult const r =
      run_cli({"train", "--task", "question-answering", "--model", tiny_en().string(), "--train",
               (dir / "train.jsonl").string(), "--eval", (dir / "train.jsonl").string(), "--output", out.string(),
               "--max-length", "32", "--doc-stride", "8", "--epochs", "1", "--threads", "2"});
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  auto const lines = json_lines(r.out);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0]["eval_exact_match"].get<double>() >= 0.0);
  CHECK(lines[0]["eval_f1"].get<double>() <= 100.0);
  CHECK(lines[0]["eval_samples"] == 4);  // examples, as run_qa counts them, not windows
  CHECK(read_json(out / "config.json")["architectures"] == io::Json::array({"DebertaV2ForQuestionAnswering"}));
  CHECK(SafetensorsFile::open(out / "model.safetensors").info("qa_outputs.weight").shape ==
        std::vector<std::int64_t>{2, 256});
  run_cli_lines({"qa", "--model", out.string(), "--threads", "2", "--question", "Who maintains it?", "--context",
                 "It is maintained by Alice Smith."},
                1);
}

TEST_CASE("train: SQuAD's exact match and F1, as the squad metric computes them") {
  std::vector<runtime::AnswerReference> const refs = {
      {"", {"Eiffel Tower", "the tower"}}, {"", {"Alice Smith"}}, {"", {"1889"}}, {"", {}}};
  runtime::SquadScores const s = runtime::squad_scores({"The Eiffel tower!", "Alice", "in 1889", ""}, refs);
  // exact: 1 (articles, case and punctuation ignored), 0, 0, 1 (no answer, none given); F1: 1, 2/3, 2/3, 1.
  CHECK(s.exact_match == doctest::Approx(50.0));
  CHECK(s.f1 == doctest::Approx(100.0 * (1 + 2.0 / 3 + 2.0 / 3 + 1) / 4));
  CHECK_THROWS_WITH_AS(runtime::squad_scores({"a"}, {}), doctest::Contains("1 predictions for 0 references"), Error);
}

TEST_CASE("train: the epoch order is torch.randperm(N, seed + epoch), as HF's Trainer drew it") {
  // torch 1.13: torch.randperm(10, generator=torch.Generator().manual_seed(42)) -> [2, 6, 1, 8, 4, 5, 0, 9, 3, 7]
  CHECK(runtime::torch_randperm(10, 42) == std::vector<std::int64_t>{2, 6, 1, 8, 4, 5, 0, 9, 3, 7});
  SafetensorsFile const expected = SafetensorsFile::open(fixture("training/trainer_20_steps/expected.safetensors"));
  std::vector<std::int64_t> const order = expected.read_i64("order");  // 20 batches of 4 over 32 examples
  REQUIRE(order.size() == 80);
  for (std::size_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<std::int64_t> const perm = runtime::torch_randperm(32, 42 + epoch);
    std::size_t const first = epoch * 32, count = std::min<std::size_t>(32, order.size() - first);
    CHECK(std::vector<std::int64_t>(order.begin() + first, order.begin() + first + count) ==
          std::vector<std::int64_t>(perm.begin(), perm.begin() + count));
  }
}

// --backend cuda trains in float32 through the same TrainingModel as the host: the same data, seed and dropout
// masks (a counter-based generator every backend draws alike) give eigen's losses up to float32 summation order.
// Without a GPU (CI) the CUDA build reports that in one line and the case ends there.
TEST_CASE("train: --backend cuda follows eigen's losses step by step") {
  ScratchDir const dir("train_cuda");
  dir.write("train.jsonl", sentiment_lines(16));
  auto const run = [&](std::string const& backend) {
    return run_cli(train_args(
        dir, dir / backend,
        {"--backend", backend, "--epochs", "1", "--threads", "2", "--batch-size", "4", "--logging-steps", "1"}));
  };
  CliResult const cuda = run("cuda");
  if (cuda.status != 0 && (cuda.err.find("no CUDA device") != std::string::npos ||
                           cuda.err.find("this build has no CUDA backend") != std::string::npos)) {
    MESSAGE("no CUDA device or backend: the cuda training case is skipped (" << cuda.err << ")");
    return;
  }
  REQUIRE_MESSAGE(cuda.status == 0, cuda.err);
  CliResult const eigen = run("eigen");
  REQUIRE_MESSAGE(eigen.status == 0, eigen.err);
  auto const losses = [](std::string const& err) {
    std::vector<double> out;
    for (std::size_t at = err.find("): loss "); at != std::string::npos; at = err.find("): loss ", at + 1))
      out.push_back(std::stod(err.substr(at + 8)));
    return out;
  };
  std::vector<double> const a = losses(cuda.err), b = losses(eigen.err);
  REQUIRE(a.size() == 4);
  REQUIRE(b.size() == a.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(2e-4));
  CHECK(run_cli_lines({"classify", "--model", (dir / "cuda").string(), "--threads", "2", "It was great."}, 1)
            .lines.size() == 1);
}

// --dtype bf16 / fp16: mixed precision on the GPU (16-bit products, float32 master weights; fp16 scales the loss), the
// losses near float32's; the host backends refuse it before reading anything.
TEST_CASE("train: --dtype bf16 and fp16 on --backend cuda stay near fp32's losses, the host backends refuse them") {
  ScratchDir const dir("train_dtype");
  dir.write("train.jsonl", sentiment_lines(16));
  auto const run = [&](std::string const& backend, std::string const& dtype) {
    return run_cli(train_args(dir, dir / (backend + dtype),
                              {"--backend", backend, "--dtype", dtype, "--epochs", "1", "--threads", "2",
                               "--batch-size", "4", "--logging-steps", "1"}));
  };
  CliResult const refused = run("eigen", "bf16");
  CHECK(refused.status == 2);
  CHECK(refused.err.find("--dtype bf16: mixed-precision training runs on --backend cuda") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "eigenbf16"));
  CliResult const fp32 = run("cuda", "fp32");
  if (fp32.status != 0 && (fp32.err.find("no CUDA device") != std::string::npos ||
                           fp32.err.find("this build has no CUDA backend") != std::string::npos)) {
    MESSAGE("no CUDA device or backend: the mixed-precision case is skipped (" << fp32.err << ")");
    return;
  }
  REQUIRE_MESSAGE(fp32.status == 0, fp32.err);
  auto const losses = [](std::string const& err) {
    std::vector<double> out;
    for (std::size_t at = err.find("): loss "); at != std::string::npos; at = err.find("): loss ", at + 1))
      out.push_back(std::stod(err.substr(at + 8)));
    return out;
  };
  for (char const* dtype : {"bf16", "fp16"}) {
    CliResult const mixed = run("cuda", dtype);
    REQUIRE_MESSAGE(mixed.status == 0, mixed.err);
    std::vector<double> const a = losses(mixed.err), b = losses(fp32.err);
    REQUIRE(a.size() == 4);
    REQUIRE(b.size() == a.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK_MESSAGE(std::abs(a[i] - b[i]) <= 2e-2, dtype << " step " << i);
  }
}

// A training state whose numbers are not numbers (a hand-edited or damaged checkpoint) is refused naming the file and
// field; the fp16 loss scale reads back exactly.
TEST_CASE("train: the training state's metadata numbers are read strictly") {
  ScratchDir const dir("train_state");
  auto const write = [&](std::map<std::string, std::string> const& meta) {
    fs::create_directories(dir / "ckpt");
    write_safetensors(dir / "ckpt" / "training_state.safetensors", {}, meta);
  };
  write({{"parameters", ""}, {"completed_steps", "12"}, {"loss_scale", "32768"}, {"loss_scale_good_steps", "7"}});
  runtime::TrainingState const state = runtime::read_training_state(dir / "ckpt");
  CHECK(state.completed_steps == 12);
  CHECK(state.loss_scale == 32768.0);
  CHECK(state.loss_scale_good_steps == 7);
  for (auto const& [key, text] : std::vector<std::pair<std::string, std::string>>{
           {"completed_steps", "12x"}, {"loss_scale", "abc"}, {"loss_scale", ""}, {"loss_scale_good_steps", "-"}}) {
    std::map<std::string, std::string> meta{
        {"parameters", ""}, {"completed_steps", "3"}, {"loss_scale", "2"}, {"loss_scale_good_steps", "0"}};
    meta[key] = text;
    write(meta);
    std::string const expected = "training_state.safetensors: metadata '" + key + "' is \"" + text + "\"";
    CHECK_THROWS_WITH_AS(runtime::read_training_state(dir / "ckpt"), doctest::Contains(expected.c_str()), Error);
  }
}

TEST_CASE("train: --help names HF's TrainingArguments, and the program's help lists train") {
  CliResult const help = run_cli({"train", "--help"});
  CHECK(help.status == 0);
  for (char const* name :
       {"per_device_train_batch_size", "num_train_epochs", "gradient_accumulation_steps", "lr_scheduler_type",
        "max_grad_norm", "resume_from_checkpoint", "attention_probs_dropout_prob"})
    CHECK_MESSAGE(help.out.find(name) != std::string::npos, name);
  CHECK(run_cli({"--help"}).out.find("  train ") != std::string::npos);
  check_one_line_error(run_cli({"train", "--model", "m", "--train", "t", "--output", "o", "--task", "nope"}), 2,
                       "--task 'nope'");
}

}  // namespace flashdeberta::testing
