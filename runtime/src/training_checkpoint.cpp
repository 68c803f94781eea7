// What flashdeberta train writes: the trained model as an HF checkpoint directory (config.json, model.safetensors,
// the tokenizer files), and OUT/checkpoint-<step>/ with what a resumed run needs to continue bit-identically
// (training_state.safetensors: every parameter and AdamW's moments; trainer_state.json: where the loop stood).
// Every file lands by rename, so a crash or a full disk never leaves a half-written model where a good one was.
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <map>
#include <regex>
#include <sstream>

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/regular_file.hpp"
#include "flashdeberta/io/safetensors.hpp"
#include "flashdeberta/io/safetensors_writer.hpp"
#include "flashdeberta/runtime/trainer.hpp"

namespace flashdeberta::runtime {

namespace {

namespace fs = std::filesystem;
using Tensors = std::vector<std::pair<std::string, std::vector<float>>>;

// The files HF keeps beside the weights for the tokenizer (as convert.cpp copies them).
constexpr char const* kTokenizerFiles[] = {"tokenizer.json",
                                           "tokenizer_config.json",
                                           "special_tokens_map.json",
                                           "spm.model",
                                           "vocab.json",
                                           "merges.txt",
                                           "added_tokens.json",
                                           "vocab.txt"};
constexpr char const* kTrainerStateFormat = "flashdeberta-trainer-state-1";

// `bytes` into `path` through a temporary of the same directory renamed over it once complete and flushed (the
// safetensors writer's TempFileForRename).
void write_file_atomically(fs::path const& path, std::string_view bytes) {
  detail::TempFileForRename file(path);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

std::vector<std::int64_t> shape_of(ModelFiles const& files, std::string const& name, std::size_t numel) {
  auto const it = files.shapes.find(name);
  std::int64_t n = 1;
  if (it != files.shapes.end())
    for (std::int64_t d : it->second) n *= d;
  FLASHDEBERTA_REQUIRE(it != files.shapes.end() && n == static_cast<std::int64_t>(numel),
                       "writing the trained model: no shape of " << numel << " elements for tensor '" << name << "'");
  return it->second;
}

void write_tensors(fs::path const& path, std::vector<std::pair<std::string, std::vector<std::int64_t>>> const& shapes,
                   Tensors const& tensors, std::map<std::string, std::string> const& metadata) {
  std::vector<TensorToWrite> out;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    auto const& values = tensors[i].second;
    out.push_back({shapes[i].first, DType::kF32, shapes[i].second,
                   std::as_bytes(std::span<float const>(values.data(), values.size()))});
  }
  write_safetensors(path, out, metadata);
}

std::string join(std::vector<std::string> const& names) {
  std::string out;
  for (std::string const& n : names) out += (out.empty() ? "" : "\n") + n;
  return out;
}

}  // namespace

std::string trained_config_json(std::string const& source_config, ModelConfig const& config, DataPlan const& plan) {
  auto doc = io::parse_json<nlohmann::ordered_json>(source_config, "config.json", "config");
  std::string const family = config.model_type == ModelType::kDeberta ? "Deberta" : "DebertaV2";
  char const* const head = plan.task == TrainingTask::kTokenClassification ? "ForTokenClassification"
                           : plan.task == TrainingTask::kMaskedLM          ? "ForMaskedLM"
                           : plan.task == TrainingTask::kMultipleChoice    ? "ForMultipleChoice"
                           : plan.task == TrainingTask::kQuestionAnswering ? "ForQuestionAnswering"
                                                                           : "ForSequenceClassification";
  doc["architectures"] = nlohmann::ordered_json::array({family + head});
  if (!plan.labels.empty()) {
    nlohmann::ordered_json id2label = nlohmann::ordered_json::object(), label2id = nlohmann::ordered_json::object();
    for (std::size_t i = 0; i < plan.labels.size(); ++i) {
      id2label[std::to_string(i)] = plan.labels[i];
      label2id[plan.labels[i]] = i;
    }
    doc["id2label"] = id2label;
    doc["label2id"] = label2id;
    doc.erase("num_labels");  // HF writes num_labels as len(id2label)
  }
  if (plan.task == TrainingTask::kTextClassification) {
    doc["problem_type"] = plan.problem == ProblemType::kRegression   ? "regression"
                          : plan.problem == ProblemType::kMultiLabel ? "multi_label_classification"
                                                                     : "single_label_classification";
  }
  for (char const* key : {"dtype", "torch_dtype"})  // the weights are written in float32
    if (doc.contains(key)) doc[key] = "float32";
  return doc.dump(2) + "\n";
}

void write_model_files(fs::path const& directory, ModelFiles const& files, Tensors const& weights) {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes;
  for (auto const& [name, values] : weights) shapes.emplace_back(name, shape_of(files, name, values.size()));
  write_tensors(directory / "model.safetensors", shapes, weights, {{"format", "pt"}});
  write_file_atomically(directory / "config.json", files.config_json);
  for (char const* name : kTokenizerFiles) {
    fs::path const from = files.tokenizer_dir / name;
    if (io::file_status(from).kind != io::FileKind::kRegular) continue;
    write_file_atomically(directory / name, io::read_regular_file(from, "tokenizer file"));
  }
}

fs::path write_training_checkpoint(fs::path const& output, ModelFiles const& files, TrainingSession const& session,
                                   TrainerPosition const& position) {
  std::string const name = "checkpoint-" + std::to_string(position.global_step);
  std::string pattern = (output / ("." + name + ".partial.XXXXXX")).string();
  FLASHDEBERTA_REQUIRE_FILE(::mkdtemp(pattern.data()) != nullptr, output.string()
                                                                      << ": cannot create a checkpoint directory ("
                                                                      << std::strerror(errno) << ")");
  fs::path const staging = pattern;
  std::error_code ec;
  try {
    fs::permissions(staging, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                 fs::perms::others_read | fs::perms::others_exec);
    TrainingState const state = session.state();
    write_model_files(staging, files, state.values);
    std::vector<std::string> names;
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes;
    Tensors all;
    for (auto const* slot : {&state.values, &state.exp_avg, &state.exp_avg_sq}) {
      std::string const prefix = slot == &state.values ? "value." : slot == &state.exp_avg ? "exp_avg." : "exp_avg_sq.";
      for (auto const& [tensor, values] : *slot) {
        shapes.emplace_back(prefix + tensor, std::vector<std::int64_t>{static_cast<std::int64_t>(values.size())});
        all.emplace_back(prefix + tensor, values);
      }
    }
    for (auto const& [tensor, values] : state.values) names.push_back(tensor);
    std::map<std::string, std::string> meta{{"parameters", join(names)},
                                            {"completed_steps", std::to_string(state.completed_steps)}};
    if (state.loss_scale > 0.0) {  // an fp16 run's scale, exact in 17 significant digits
      std::ostringstream scale;
      scale << std::setprecision(17) << state.loss_scale;
      meta["loss_scale"] = scale.str();
      meta["loss_scale_good_steps"] = std::to_string(state.loss_scale_good_steps);
    }
    write_tensors(staging / "training_state.safetensors", shapes, all, meta);
    nlohmann::ordered_json s;
    s["format"] = kTrainerStateFormat;
    s["global_step"] = position.global_step;
    s["epoch"] = position.epoch;
    s["micro_batches_in_epoch"] = position.micro_batches;
    s["loss_sum"] = position.loss_sum;
    s["seed"] = position.seed;
    s["batch_size"] = position.batch_size;
    s["gradient_accumulation_steps"] = position.gradient_accumulation_steps;
    s["examples"] = position.examples;
    write_file_atomically(staging / "trainer_state.json", s.dump(2) + "\n");
    fs::path const target = output / name;
    fs::path old;
    if (fs::exists(target, ec)) {  // the same step written again (a resumed run stopped where it started)
      std::string aside = (output / ("." + name + ".old.XXXXXX")).string();
      FLASHDEBERTA_REQUIRE_FILE(::mkdtemp(aside.data()) != nullptr, output.string() << ": cannot replace " << name);
      old = aside;
      fs::rename(target, old / name);
    }
    fs::rename(staging, target);
    if (!old.empty()) fs::remove_all(old, ec);
    return target;
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
}

std::optional<fs::path> newest_checkpoint(fs::path const& output) {
  std::optional<fs::path> best;
  long long best_step = -1;
  std::regex const pattern("checkpoint-([0-9]{1,15})");
  std::error_code ec;
  for (auto it = fs::directory_iterator(output, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::smatch m;
    std::string const name = it->path().filename().string();
    if (!std::regex_match(name, m, pattern) || !fs::is_regular_file(it->path() / "trainer_state.json", ec)) continue;
    long long const step = std::stoll(m[1].str());
    if (step > best_step) best_step = step, best = it->path();
  }
  return best;
}

TrainerPosition read_trainer_position(fs::path const& checkpoint) {
  fs::path const file = checkpoint / "trainer_state.json";
  io::Json const doc = io::parse_json(io::read_regular_file(file, "trainer state"), file.string(), "trainer state");
  FLASHDEBERTA_REQUIRE(doc.is_object() && doc.value("format", "") == kTrainerStateFormat,
                       file.string() << ": not a trainer state of this program (format " << kTrainerStateFormat << ")");
  TrainerPosition p;
  try {
    p.global_step = doc.at("global_step").get<std::int64_t>();
    p.epoch = doc.at("epoch").get<std::int64_t>();
    p.micro_batches = doc.at("micro_batches_in_epoch").get<std::int64_t>();
    p.loss_sum = doc.at("loss_sum").get<double>();
    p.seed = doc.at("seed").get<std::uint64_t>();
    p.batch_size = doc.at("batch_size").get<std::int64_t>();
    p.gradient_accumulation_steps = doc.at("gradient_accumulation_steps").get<std::int64_t>();
    p.examples = doc.at("examples").get<std::int64_t>();
  } catch (nlohmann::json::exception const& e) {
    FLASHDEBERTA_FAIL(file.string() << ": " << e.what());
  }
  return p;
}

namespace {

// Metadata field `key` of a training state, the whole text one number: an Error naming the file and field otherwise.
template <class T>
T metadata_number(SafetensorsFile const& file, std::string const& key) {
  std::string const& text = file.metadata().at(key);
  T value{};
  auto const [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  FLASHDEBERTA_REQUIRE(ec == std::errc() && end == text.data() + text.size() && !text.empty(),
                       file.source() << ": metadata '" << key << "' is \"" << text << "\", not a number");
  return value;
}

}  // namespace

TrainingState read_training_state(fs::path const& checkpoint) {
  SafetensorsFile const file = SafetensorsFile::open(checkpoint / "training_state.safetensors");
  auto const& meta = file.metadata();
  FLASHDEBERTA_REQUIRE(meta.contains("parameters") && meta.contains("completed_steps"),
                       file.source() << ": no 'parameters' / 'completed_steps' metadata (not a training state)");
  TrainingState state;
  state.completed_steps = metadata_number<std::int64_t>(file, "completed_steps");
  if (meta.contains("loss_scale")) {
    state.loss_scale = metadata_number<double>(file, "loss_scale");
    state.loss_scale_good_steps =
        meta.contains("loss_scale_good_steps") ? metadata_number<std::int64_t>(file, "loss_scale_good_steps") : 0;
  }
  std::istringstream names(meta.at("parameters"));
  for (std::string name; std::getline(names, name);) {
    state.values.emplace_back(name, file.read_f32("value." + name));
    state.exp_avg.emplace_back(name, file.read_f32("exp_avg." + name));
    state.exp_avg_sq.emplace_back(name, file.read_f32("exp_avg_sq." + name));
  }
  return state;
}

void probe_output_directory(fs::path const& output) {
  std::error_code ec;
  fs::create_directories(output, ec);
  FLASHDEBERTA_REQUIRE_FILE(!ec && fs::is_directory(output, ec),
                            "--output " << output.string() << ": cannot create the directory (" << ec.message() << ")");
  std::string pattern = (output / ".probe.XXXXXX").string();
  int const fd = ::mkstemp(pattern.data());
  int const err = errno;
  FLASHDEBERTA_REQUIRE_FILE(
      fd >= 0, "--output " << output.string() << ": cannot write in the directory (" << std::strerror(err) << ")");
  ::close(fd);
  ::unlink(pattern.c_str());
}

}  // namespace flashdeberta::runtime
