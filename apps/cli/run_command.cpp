// flashdeberta run: token ids from a JSON file -> the backbone's last_hidden_state, or a head's outputs
// (logits, start_logits/end_logits), under HF's field names in a safetensors file.
//
// Order of work: everything cheap that can fail (options, output location, input file and its size against
// --max-tokens, config, the head and the input's layout, ids against the vocabulary) is checked before the
// weights are loaded, so a mistake costs milliseconds. Memory: each packed output and its padded form exist together
// once (the padded copy is skipped when nothing is masked, since both layouts are then the same); the model is freed
// before anything is written.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

#include "commands.hpp"
#include "flashdeberta/config.hpp"
#include "flashdeberta/heads/sequence_classification.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/safetensors_writer.hpp"
#include "flashdeberta/model/deberta_model.hpp"
#include "flashdeberta/runtime/loaded_model.hpp"
#include "input_json.hpp"

namespace flashdeberta::cli {

using runtime::Backend;
using runtime::DeviceRun;
using runtime::LoadedModel;
using runtime::read_model_config;
using runtime::variant_name;

namespace {

using Clock = std::chrono::steady_clock;

double elapsed_ms(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

// The output is written only after the forward pass; a path that cannot take it should fail first.
void check_output_location(std::filesystem::path const& output) {
  std::error_code ec;
  FLASHDEBERTA_REQUIRE(!std::filesystem::is_directory(output, ec),
                       "--output " << output.string() << " is a directory; give a file name such as out.safetensors");
  require_replaceable_output(output);
  std::filesystem::path const dir = output.has_parent_path() ? output.parent_path() : ".";
  FLASHDEBERTA_REQUIRE(std::filesystem::is_directory(dir, ec),
                       "--output " << output.string() << ": directory " << dir.string() << " does not exist");
  FLASHDEBERTA_REQUIRE(::access(dir.c_str(), W_OK) == 0,
                       "--output " << output.string() << ": directory " << dir.string() << " is not writable");
}

std::string shape_text(std::vector<std::int64_t> const& shape, char const* separator) {
  std::string out;
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? separator : "") + std::to_string(shape[i]);
  return out;
}

struct RunSummary {
  std::string variant;
  HeadKind head = HeadKind::kBase;
  int threads = 0;
  std::vector<std::int64_t> input_shape;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> outputs;  // name, shape
  std::int64_t tokens = 0;
  double load_ms = 0.0;
  double forward_ms = 0.0;
};

void print_summary(RunOptions const& o, RunSummary const& s) {
  double const tokens_per_s = s.forward_ms > 0.0 ? static_cast<double>(s.tokens) / (s.forward_ms / 1000.0) : 0.0;
  char line[256];
  std::cout << "model      " << o.common.model.string() << " (" << s.variant << ", head " << head_kind_name(s.head)
            << (o.head ? "" : " from config.json") << ")\n";
  std::cout << "backend    " << describe_backend(o.common, s.threads) << "\n";
  std::cout << "input      " << shape_text(s.input_shape, " x ")
            << (s.input_shape.size() == 3 ? " (B x C x L)" : " (B x L)") << ", " << s.tokens
            << " tokens (attention_mask = 1)\n";
  std::snprintf(line, sizeof(line), "load       %.1f ms\nforward    %.1f ms, %.0f tokens/s\n", s.load_ms, s.forward_ms,
                tokens_per_s);
  std::cout << line;
  std::cout << "output     " << o.output.string() << ":";
  for (std::size_t i = 0; i < s.outputs.size(); ++i)
    std::cout << (i ? "," : "") << " " << s.outputs[i].first << " [" << shape_text(s.outputs[i].second, ", ") << "]";
  std::cout << (s.outputs.size() == 2 && s.outputs[1].first == "positions" ? " (logits float32, positions int64)\n"
                                                                           : " float32\n");
}

// The rows and positions of a masked LM's selected tokens, (M, 2) int64: where each logits row belongs
// in the padded input.
std::vector<std::int64_t> token_positions(Batch const& batch, std::vector<std::int64_t> const& tokens) {
  std::vector<std::int64_t> out;
  out.reserve(tokens.size() * 2);
  for (std::int64_t t : tokens) {
    auto const next = std::upper_bound(batch.cu_seqlens.begin(), batch.cu_seqlens.end(), t);
    out.push_back((next - batch.cu_seqlens.begin()) - 1);
    out.push_back(batch.positions[t]);
  }
  return out;
}

// {"0": "negative", ...}: the label names of a classification head, for the output's metadata.
std::string id2label_json(ModelConfig const& config) {
  io::Json labels = io::Json::object();
  std::vector<std::string> const names = label_names(config);
  for (std::size_t i = 0; i < names.size(); ++i) labels[std::to_string(i)] = names[i];
  return labels.dump();
}

}  // namespace

int run_command(RunOptions const& o) {
  Backend const backend(o.common);
  check_output_location(o.output);

  RunSummary summary;
  std::string const config_source = model_config_file(o.common.model).string();
  ModelConfig const config = read_model_config(o.common.model);
  summary.variant = std::string(variant_name(config));
  summary.head = resolve_head_kind(config, o.head, config_source);
  if (o.mask_token_id && summary.head != HeadKind::kMaskedLM) {
    throw UsageError("--mask-token-id selects masked-LM rows, but " + config_source + " names the " +
                     std::string(head_kind_name(summary.head)) + " head (give --head mlm to run the masked LM)");
  }

  Batch batch;
  {
    // The parsed input is dropped once packed: only the batch is needed from here on.
    TokenInput const input = read_token_input(o.input, o.common.max_tokens);
    check_against_head(input, summary.head);
    check_against_config(input, config, config_source);
    batch = to_batch(input, config);
    summary.input_shape = input.shape;
  }
  summary.tokens = batch.total_tokens();

  HeadOutput output;
  {
    Clock::time_point const load_start = Clock::now();
    std::unique_ptr<LoadedModel> const model = backend.load(o.common.model, config, summary.head);
    summary.load_ms = elapsed_ms(load_start);
    summary.threads = backend.threads();

    Clock::time_point const forward_start = Clock::now();
    output = model->forward_head(batch, o.mask_token_id);
    summary.forward_ms = elapsed_ms(forward_start);
  }

  // HF's layouts: [B, L, ...] per token ([B, C, L, H] for a multiple-choice input to the backbone),
  // [B, ...] per sequence, [B, C] for multiple choice. A masked LM asked for some tokens writes just
  // their rows, with where they sit.
  std::vector<PaddedTensor> tensors;
  std::vector<std::int64_t> positions;
  for (HostHeadTensor& t : output.tensors) {
    if (o.mask_token_id) {
      positions = token_positions(batch, t.tokens);
      tensors.push_back({t.name, {t.row_count, t.width}, std::move(t.values)});
    } else {
      tensors.push_back(to_padded(std::move(t), batch, summary.input_shape));
    }
  }
  std::vector<TensorToWrite> files;
  for (PaddedTensor const& t : tensors) {
    files.push_back({t.name, DType::kF32, t.shape, std::as_bytes(std::span<float const>(t.values))});
    summary.outputs.emplace_back(t.name, t.shape);
  }
  if (o.mask_token_id) {
    std::vector<std::int64_t> const shape = {static_cast<std::int64_t>(positions.size() / 2), 2};
    files.push_back({"positions", DType::kI64, shape, std::as_bytes(std::span<std::int64_t const>(positions))});
    summary.outputs.emplace_back("positions", shape);
  }
  std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                 {"producer", "flashdeberta " FLASHDEBERTA_VERSION_STRING},
                                                 {"head", std::string(head_kind_name(summary.head))}};
  if (summary.head == HeadKind::kSequenceClassification || summary.head == HeadKind::kTokenClassification)
    metadata["id2label"] = id2label_json(config);
  write_safetensors(o.output, files, metadata);

  print_summary(o, summary);
  return 0;
}

}  // namespace flashdeberta::cli
