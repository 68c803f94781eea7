// A random-weight DeBERTa v2/v3 checkpoint in Hugging Face layout (config.json + model.safetensors),
// for benchmarks and memory measurements at the shapes of real checkpoints without downloading one.
//
// Weights are N(0, 0.02) (HF's initializer range), LayerNorm gains 1 + N(0, 0.02) and biases N(0, 0.02),
// so no product is trivially zero. Each tensor draws from its own stream seeded by (seed, name): the
// bytes depend only on the spec, not on the order tensors are generated in.
//
// The directory is cached under the system temp dir, named by a hash of the config text and the seed,
// so repeated benchmark runs reuse the ~740 MB v3-base file instead of rewriting it. Both files are
// written to a temporary and renamed, so concurrent or interrupted runs never see a partial checkpoint.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/safetensors_writer.hpp"

namespace flashdeberta::bench {

// The subset of config.json that shapes a v2/v3 backbone; defaults are deberta-v3-base.
struct RandomCheckpointSpec {
  std::int64_t vocab_size = 128100;
  std::int64_t hidden_size = 768;
  std::int64_t num_layers = 12;
  std::int64_t num_heads = 12;
  std::int64_t intermediate_size = 3072;
  std::int64_t max_position_embeddings = 512;
  std::int64_t type_vocab_size = 0;
  std::int64_t position_buckets = 256;
  std::int64_t max_relative_positions = -1;  // < 1: max_position_embeddings, as in HF
  std::string norm_rel_ebd = "layer_norm";
  std::string pos_att_type = "p2c|c2p";
  bool share_att_key = true;
  bool position_biased_input = false;
  bool relative_attention = true;
  std::uint64_t seed = 20261130;

  static RandomCheckpointSpec v3_base() { return {}; }

  // v3-base with the vocabulary cut to 32000 rows, for the GPU benchmarks and timings: the embedding gather
  // costs the same, and the file a fresh GPU machine writes is 440 MB instead of 735 MB.
  static RandomCheckpointSpec v3_base_short_vocabulary() {
    RandomCheckpointSpec spec;
    spec.vocab_size = 32000;
    return spec;
  }

  io::Json config_json() const {
    return {{"model_type", "deberta-v2"},
            {"architectures", {"DebertaV2Model"}},
            {"vocab_size", vocab_size},
            {"hidden_size", hidden_size},
            {"num_hidden_layers", num_layers},
            {"num_attention_heads", num_heads},
            {"intermediate_size", intermediate_size},
            {"hidden_act", "gelu"},
            {"hidden_dropout_prob", 0.1},
            {"attention_probs_dropout_prob", 0.1},
            {"max_position_embeddings", max_position_embeddings},
            {"type_vocab_size", type_vocab_size},
            {"initializer_range", 0.02},
            {"layer_norm_eps", 1e-7},
            {"relative_attention", relative_attention},
            {"max_relative_positions", max_relative_positions},
            {"position_buckets", position_buckets},
            {"norm_rel_ebd", norm_rel_ebd},
            {"share_att_key", share_att_key},
            {"pos_att_type", pos_att_type},
            {"position_biased_input", position_biased_input},
            {"pad_token_id", 0}};
  }
};

namespace detail {

// splitmix64: tiny, seedable per tensor, and identical on every platform (std::normal_distribution is not).
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // in (0, 1)
};

inline std::uint64_t fnv1a(std::string const& text, std::uint64_t hash = 0xcbf29ce484222325ULL) {
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ULL;
  return hash;
}

inline void write_text_atomically(std::filesystem::path const& path, std::string const& text) {
  std::filesystem::path const temp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << text;
    FLASHDEBERTA_REQUIRE(out.good(), temp.string() << ": write failed");
  }
  std::filesystem::rename(temp, path);
}

}  // namespace detail

// `count` values mean + std * N(0, 1) by Box-Muller (two per pair of uniforms), from a stream seeded by
// (seed, name): the same tensor whatever else is generated and in what order.
inline std::vector<float> random_normal(std::uint64_t seed, std::string const& name, std::int64_t count, float mean,
                                        float std) {
  detail::SplitMix64 rng{detail::fnv1a(name, seed)};
  std::vector<float> values(static_cast<std::size_t>(count));
  constexpr double kTwoPi = 6.283185307179586;
  for (std::int64_t i = 0; i < count; i += 2) {
    double const radius = std::sqrt(-2.0 * std::log(rng.uniform()));
    double const angle = kTwoPi * rng.uniform();
    values[static_cast<std::size_t>(i)] = mean + std * static_cast<float>(radius * std::cos(angle));
    if (i + 1 < count)
      values[static_cast<std::size_t>(i + 1)] = mean + std * static_cast<float>(radius * std::sin(angle));
  }
  return values;
}

// One tensor of a random checkpoint, by its HF name.
struct NamedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

// The backbone's tensors under their HF names (no "deberta." prefix); a program that builds a larger model
// around a backbone (GLiNER) renames them and adds its own from random_normal.
inline std::vector<NamedTensor> random_backbone(RandomCheckpointSpec const& s) {
  constexpr float kStd = 0.02f;
  std::vector<NamedTensor> tensors;
  auto add = [&](std::string name, std::vector<std::int64_t> shape, float mean) {
    std::int64_t count = 1;
    for (std::int64_t d : shape) count *= d;
    std::vector<float> values = random_normal(s.seed, name, count, mean, kStd);
    tensors.push_back({std::move(name), std::move(shape), std::move(values)});
  };
  auto linear = [&](std::string const& prefix, std::int64_t out, std::int64_t in) {
    add(prefix + ".weight", {out, in}, 0.0f);
    add(prefix + ".bias", {out}, 0.0f);
  };
  auto layer_norm = [&](std::string const& prefix, std::int64_t width) {
    add(prefix + ".weight", {width}, 1.0f);
    add(prefix + ".bias", {width}, 0.0f);
  };
  std::int64_t const h = s.hidden_size;
  add("embeddings.word_embeddings.weight", {s.vocab_size, h}, 0.0f);
  if (s.position_biased_input) add("embeddings.position_embeddings.weight", {s.max_position_embeddings, h}, 0.0f);
  if (s.type_vocab_size > 0) add("embeddings.token_type_embeddings.weight", {s.type_vocab_size, h}, 0.0f);
  layer_norm("embeddings.LayerNorm", h);
  if (s.relative_attention) {
    std::int64_t const max_relative =
        s.max_relative_positions < 1 ? s.max_position_embeddings : s.max_relative_positions;
    std::int64_t const span = s.position_buckets > 0 ? s.position_buckets : max_relative;
    add("encoder.rel_embeddings.weight", {2 * span, h}, 0.0f);
    if (s.norm_rel_ebd.find("layer_norm") != std::string::npos) layer_norm("encoder.LayerNorm", h);
  }
  for (std::int64_t l = 0; l < s.num_layers; ++l) {
    std::string const layer = "encoder.layer." + std::to_string(l) + ".";
    for (char const* part : {"query_proj", "key_proj", "value_proj"}) linear(layer + "attention.self." + part, h, h);
    if (s.relative_attention && !s.share_att_key) {
      linear(layer + "attention.self.pos_key_proj", h, h);
      linear(layer + "attention.self.pos_query_proj", h, h);
    }
    linear(layer + "attention.output.dense", h, h);
    layer_norm(layer + "attention.output.LayerNorm", h);
    linear(layer + "intermediate.dense", s.intermediate_size, h);
    linear(layer + "output.dense", h, s.intermediate_size);
    layer_norm(layer + "output.LayerNorm", h);
  }
  return tensors;
}

// Writes `tensors` as an F32 safetensors file with HF's {"format": "pt"} metadata.
inline void write_named_tensors(std::filesystem::path const& path, std::vector<NamedTensor> const& tensors) {
  std::vector<TensorToWrite> views;
  views.reserve(tensors.size());
  for (auto const& t : tensors) {
    views.push_back({t.name, DType::kF32, t.shape, std::as_bytes(std::span<float const>(t.values))});
  }
  write_safetensors(path, views, {{"format", "pt"}});
}

// The directory's name: stable for a given spec, different for any change of shape, flag or seed.
inline std::filesystem::path random_checkpoint_directory(RandomCheckpointSpec const& spec,
                                                         std::filesystem::path const& root = {}) {
  constexpr char kFormatVersion[] = "random-checkpoint-v1";
  std::string const key = spec.config_json().dump() + kFormatVersion;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(detail::fnv1a(key, spec.seed)));
  std::filesystem::path const base = root.empty() ? std::filesystem::temp_directory_path() : root;
  return base / ("flashdeberta-bench-" + std::string(hex));
}

// Writes the checkpoint unless a complete one is already there; returns its directory.
inline std::filesystem::path random_checkpoint(RandomCheckpointSpec const& spec,
                                               std::filesystem::path const& root = {}) {
  std::filesystem::path const dir = random_checkpoint_directory(spec, root);
  // config.json is written last, so its presence marks a complete checkpoint.
  if (std::filesystem::exists(dir / "config.json") && std::filesystem::exists(dir / "model.safetensors")) return dir;
  std::filesystem::create_directories(dir);
  write_named_tensors(dir / "model.safetensors", random_backbone(spec));
  detail::write_text_atomically(dir / "config.json", spec.config_json().dump(2) + "\n");
  return dir;
}

}  // namespace flashdeberta::bench
