// flashdeberta run: token ids from a JSON file -> last_hidden_state in a safetensors file.
//
// Order of work: everything cheap that can fail (options, output location, input file, config, ids
// against the vocabulary) is checked before the weights are loaded, so a mistake costs milliseconds.
// Memory: the packed output and the padded output exist together once (the padded copy is skipped when
// nothing is masked, since both layouts are then the same); the model is freed before either is written.
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
#include "flashdeberta/io/safetensors_writer.hpp"
#include "flashdeberta/model/deberta_model.hpp"
#include "input_json.hpp"
#include "model_dispatch.hpp"

namespace flashdeberta::cli {

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
  int threads = 0;
  std::vector<std::int64_t> input_shape;
  std::vector<std::int64_t> output_shape;
  std::int64_t tokens = 0;
  double load_ms = 0.0;
  double forward_ms = 0.0;
};

void print_summary(RunOptions const& o, RunSummary const& s) {
  double const tokens_per_s = s.forward_ms > 0.0 ? static_cast<double>(s.tokens) / (s.forward_ms / 1000.0) : 0.0;
  char line[256];
  std::cout << "model      " << o.common.model.string() << " (" << s.variant << ")\n";
  std::cout << "backend    " << describe_backend(o.common, s.threads) << "\n";
  std::cout << "input      " << shape_text(s.input_shape, " x ")
            << (s.input_shape.size() == 3 ? " (B x C x L)" : " (B x L)") << ", " << s.tokens
            << " tokens (attention_mask = 1)\n";
  std::snprintf(line, sizeof(line), "load       %.1f ms\nforward    %.1f ms, %.0f tokens/s\n", s.load_ms, s.forward_ms,
                tokens_per_s);
  std::cout << line;
  std::cout << "output     " << o.output.string() << ": last_hidden_state [" << shape_text(s.output_shape, ", ")
            << "] float32\n";
}

}  // namespace

int run_command(RunOptions const& o) {
  Backend const backend(o.common);
  check_output_location(o.output);

  RunSummary summary;
  std::string const config_source = (o.common.model / "config.json").string();
  ModelConfig const config = read_model_config(o.common.model);
  summary.variant = std::string(variant_name(config));

  Batch batch;
  bool dense = false;
  {
    // The parsed input is dropped once packed: only the batch is needed from here on.
    TokenInput const input = read_token_input(o.input);
    check_against_config(input, config, config_source);
    batch = to_batch(input, config);
    dense = input.dense();
    summary.input_shape = input.shape;
  }
  summary.output_shape = summary.input_shape;
  summary.output_shape.push_back(config.hidden_size);
  summary.tokens = batch.total_tokens();

  std::vector<float> packed;  // (T, H)
  {
    Clock::time_point const load_start = Clock::now();
    std::unique_ptr<LoadedModel> const model = backend.load(o.common.model, config);
    summary.load_ms = elapsed_ms(load_start);
    summary.threads = backend.threads();

    Clock::time_point const forward_start = Clock::now();
    packed = model->forward_to_host(batch);
    summary.forward_ms = elapsed_ms(forward_start);
  }

  // (B, L, H), or (B, C, L, H) for a multiple-choice input: the same bytes either way.
  std::vector<float> padded = dense ? std::move(packed) : unpack_to_padded(batch, packed, config.hidden_size);
  std::vector<float>().swap(packed);
  std::span<std::byte const> const bytes = std::as_bytes(std::span<float const>(padded));
  write_safetensors(o.output, {{"last_hidden_state", DType::kF32, summary.output_shape, bytes}},
                    {{"format", "pt"}, {"producer", "flashdeberta " FLASHDEBERTA_VERSION_STRING}});

  print_summary(o, summary);
  return 0;
}

}  // namespace flashdeberta::cli
