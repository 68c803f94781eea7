#include "random_weights.hpp"

#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/safetensors_writer.hpp"

namespace flashdeberta::bench_gpu {

void write_random_checkpoint(std::filesystem::path const& dir, ModelShape const& s) {
  if (std::filesystem::exists(dir / "model.safetensors") && std::filesystem::exists(dir / "config.json")) return;
  std::filesystem::create_directories(dir);
  // deberta-v3-base's config; the vocabulary is cut to 32000 rows (the gather costs the same, the file less).
  io::Json const config = {
      {"model_type", "deberta-v2"},     {"vocab_size", s.vocab},          {"hidden_size", s.hidden},
      {"num_hidden_layers", s.layers},  {"num_attention_heads", s.heads}, {"intermediate_size", s.intermediate},
      {"hidden_act", "gelu"},           {"max_position_embeddings", 512}, {"type_vocab_size", 0},
      {"relative_attention", true},     {"position_buckets", s.buckets},  {"max_relative_positions", -1},
      {"norm_rel_ebd", "layer_norm"},   {"share_att_key", true},          {"pos_att_type", "p2c|c2p"},
      {"position_biased_input", false}, {"layer_norm_eps", 1e-7}};
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> specs;
  auto add = [&](std::string name, std::vector<std::int64_t> shape) { specs.emplace_back(std::move(name), shape); };
  std::int64_t const h = s.hidden;
  add("embeddings.word_embeddings.weight", {s.vocab, h});
  add("embeddings.LayerNorm.weight", {h});
  add("embeddings.LayerNorm.bias", {h});
  add("encoder.rel_embeddings.weight", {2 * s.buckets, h});
  add("encoder.LayerNorm.weight", {h});
  add("encoder.LayerNorm.bias", {h});
  for (std::int64_t l = 0; l < s.layers; ++l) {
    std::string const p = "encoder.layer." + std::to_string(l) + ".";
    for (char const* proj : {"query_proj", "key_proj", "value_proj"}) {
      add(p + "attention.self." + proj + ".weight", {h, h});
      add(p + "attention.self." + proj + ".bias", {h});
    }
    add(p + "attention.output.dense.weight", {h, h});
    add(p + "attention.output.dense.bias", {h});
    add(p + "attention.output.LayerNorm.weight", {h});
    add(p + "attention.output.LayerNorm.bias", {h});
    add(p + "intermediate.dense.weight", {s.intermediate, h});
    add(p + "intermediate.dense.bias", {s.intermediate});
    add(p + "output.dense.weight", {h, s.intermediate});
    add(p + "output.dense.bias", {h});
    add(p + "output.LayerNorm.weight", {h});
    add(p + "output.LayerNorm.bias", {h});
  }
  std::mt19937 gen(20261130);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<std::vector<float>> values;
  std::vector<TensorToWrite> tensors;
  values.reserve(specs.size());
  for (auto const& [name, shape] : specs) {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    std::vector<float>& v = values.emplace_back(static_cast<std::size_t>(n));
    bool const gain = name.find("LayerNorm.weight") != std::string::npos;
    for (float& x : v) x = (gain ? 1.0f : 0.0f) + dist(gen);
    tensors.push_back({name, DType::kF32, shape, std::as_bytes(std::span<float const>(v))});
  }
  write_safetensors(dir / "model.safetensors", tensors);
  std::ofstream(dir / "config.json") << config.dump(1);  // last: its presence marks a complete checkpoint
}

}  // namespace flashdeberta::bench_gpu
