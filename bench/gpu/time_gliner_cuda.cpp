// Times GLiNER<CudaPolicy>::logits at the shape of issue 16: a gliner_medium-v2.1-shaped model (DeBERTa-v3-base
// backbone, hidden_size 512, one BiLSTM layer, markerV0, max_width 12; random weights, the fixtures' tokenizer of
// 12004 tokens), 64 texts of about 200 words, 5 labels, in bf16 and fp32. Prints the median of repeated calls
// after warm-up, texts per second, and one call's time per policy operation (ProfilingPolicy: each operation
// fenced, so the sum is more than an unprofiled call).
//
//   time_gliner_cuda [DIR]   DIR: where the random checkpoint is written (default /tmp)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "../random_checkpoint.hpp"
#include "flashdeberta/cuda/cuda_policy.hpp"
#include "flashdeberta/flashdeberta.hpp"
#include "flashdeberta/gliner/gliner.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/policy/profiling_policy.hpp"

namespace fd = flashdeberta;

namespace {

std::filesystem::path write_gliner_medium(std::filesystem::path const& root) {
  std::filesystem::path const fixture = std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "gliner" / "span_markerV0";
  std::filesystem::path const dir = root / "flashdeberta-gliner-medium-random";
  if (std::filesystem::exists(dir / "gliner_config.json")) return dir;
  std::filesystem::create_directories(dir);
  for (char const* f : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(std::filesystem::canonical(fixture / f), dir / f,
                               std::filesystem::copy_options::overwrite_existing);
  std::ifstream in(fixture / "gliner_config.json");
  std::string const text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fd::io::Json config = fd::io::parse_json(text, "gliner_config.json", "fixture");
  fd::bench::RandomCheckpointSpec spec;  // v3-base with the fixture tokenizer's vocabulary
  spec.vocab_size = config["encoder_config"]["vocab_size"].get<std::int64_t>();
  fd::io::Json& enc = config["encoder_config"];
  enc["hidden_size"] = 768;
  enc["num_hidden_layers"] = 12;
  enc["num_attention_heads"] = 12;
  enc["intermediate_size"] = 3072;
  enc["position_buckets"] = 256;
  enc["pooler_hidden_size"] = 768;
  enc.erase("embedding_size");
  config["hidden_size"] = 512;
  config["max_width"] = 12;
  config["max_len"] = 384;
  config["num_rnn_layers"] = 1;
  config["span_mode"] = "markerV0";
  std::int64_t const d = 512;
  std::vector<fd::bench::NamedTensor> tensors = fd::bench::random_backbone(spec);
  for (auto& t : tensors) t.name = "token_rep_layer.bert_layer.model." + t.name;
  auto add = [&](std::string const& name, std::vector<std::int64_t> shape) {
    std::int64_t count = 1;
    for (std::int64_t x : shape) count *= x;
    tensors.push_back({name, shape, fd::bench::random_normal(spec.seed, name, count, 0.0f, 0.02f)});
  };
  auto linear = [&](std::string const& name, std::int64_t out, std::int64_t in_features) {
    add(name + ".weight", {out, in_features});
    add(name + ".bias", {out});
  };
  auto mlp = [&](std::string const& name, std::int64_t in_features, std::int64_t out) {
    linear(name + ".0", 4 * d, in_features);
    linear(name + ".3", out, 4 * d);
  };
  linear("token_rep_layer.projection", d, 768);
  for (char const* suffix : {"_l0", "_l0_reverse"}) {
    add(std::string("rnn.lstm.weight_ih") + suffix, {2 * d, d});
    add(std::string("rnn.lstm.weight_hh") + suffix, {2 * d, d / 2});
    add(std::string("rnn.lstm.bias_ih") + suffix, {2 * d});
    add(std::string("rnn.lstm.bias_hh") + suffix, {2 * d});
  }
  std::string const span = "span_rep_layer.span_rep_layer.";
  mlp(span + "project_start", d, d);
  mlp(span + "project_end", d, d);
  mlp(span + "out_project", 2 * d, d);
  mlp("prompt_rep_layer", d, d);
  fd::bench::write_named_tensors(dir / "model.safetensors", tensors);
  std::ofstream(dir / "gliner_config.json") << config.dump(2) << "\n";
  return dir;
}

std::vector<std::string> random_texts(std::size_t count, std::size_t words) {
  std::vector<std::string> const vocabulary{"the",   "company", "Paris",   "announced", "a",       "new", "product",
                                            "in",    "London",  "on",      "Monday",    "while",   "Ada", "Lovelace",
                                            "wrote", "about",   "engines", "and",       "science", ",",   "."};
  std::mt19937 gen(7);
  std::vector<std::string> texts;
  for (std::size_t i = 0; i < count; ++i) {
    std::string text;
    std::size_t const n = words - 20 + gen() % 41;  // 180 .. 220 words
    for (std::size_t w = 0; w < n; ++w) text += (w ? " " : "") + vocabulary[gen() % vocabulary.size()];
    texts.push_back(text);
  }
  return texts;
}

template <class P>
double median_ms(fd::GLiNER<P> const& model, std::vector<fd::GlinerInput> const& inputs, int repeats) {
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    auto const start = std::chrono::steady_clock::now();
    (void)model.logits(inputs);  // ends with a download: synchronized
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

// Each stage on stderr (unbuffered) before it starts: a crash names the stage it happened in.
static void stage(char const* what, fd::DType dtype) {
  std::fprintf(stderr, "time_gliner_cuda: %s (%s)\n", what, std::string(fd::dtype_name(dtype)).c_str());
}

int main(int argc, char** argv) {
  stage("writing the checkpoint", fd::DType::kF32);
  std::filesystem::path const dir = write_gliner_medium(argc > 1 ? argv[1] : "/tmp");
  std::vector<std::string> const texts = random_texts(64, 200);
  std::vector<std::string> const labels{"person", "organization", "location", "date", "product"};
  for (fd::DType dtype : {fd::DType::kBF16, fd::DType::kF32}) {
    stage("creating the policy", dtype);
    fd::CudaPolicy const policy({.dtype = dtype});
    stage("loading the model", dtype);
    auto const model = fd::GLiNER<fd::CudaPolicy>::load(policy, dir);
    stage("preparing 64 texts", dtype);
    std::vector<fd::GlinerInput> inputs;
    for (auto const& t : texts) inputs.push_back(model.prepare(t, labels));
    std::int64_t words = 0;
    for (auto const& in : inputs) words += in.num_words();
    stage("timing logits()", dtype);
    (void)median_ms(model, inputs, 3);
    double const ms = median_ms(model, inputs, 10);
    std::printf("%s: 64 texts (%lld words), 5 labels: %.2f ms per logits() call, %.0f texts/s\n",
                std::string(fd::dtype_name(dtype)).c_str(), static_cast<long long>(words), ms, 64.0 / ms * 1e3);
    stage("profiling logits()", dtype);
    fd::ProfilingPolicy<fd::CudaPolicy> const profiled(policy);
    auto const profiled_model = fd::GLiNER<fd::ProfilingPolicy<fd::CudaPolicy>>::load(profiled, dir);
    (void)profiled_model.logits(inputs);
    profiled.reset();
    (void)profiled_model.logits(inputs);
    std::printf("%s", profiled.report().format().c_str());
  }
  return 0;
}
