// config.json -> ModelConfig, following deberta-spec.md section 1 (HF DebertaConfig / DebertaV2Config).
//
// The parser is stricter than HF where HF would silently run a different model than the file asks for:
// unknown pos_att_type or norm_rel_ebd entries, unknown activations, wrong JSON types, duplicate keys,
// even conv kernels, and position-bucket settings that make the log-bucket function undefined are all
// rejected with a message that starts with the file name and names the key and its value.
#pragma once

#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/core/model_config.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/regular_file.hpp"
#include "flashdeberta/io/zeromodels.hpp"

namespace flashdeberta {

namespace detail {

// Sizes feed int32 kernel indexing and products such as 2k rows x H; no published model is within
// a factor of 1000 of this bound, and it keeps every derived product inside int64.
inline constexpr std::int64_t kMaxConfigSize = std::numeric_limits<std::int32_t>::max();

struct ActivationName {
  std::string_view name;
  Activation activation;
};

// Names as in HF's ACT2FN; the subset the library implements.
inline constexpr std::array<ActivationName, 12> kActivationNames{{
    {"gelu", Activation::kGelu},
    {"gelu_new", Activation::kGeluTanh},
    {"gelu_pytorch_tanh", Activation::kGeluTanh},
    {"gelu_fast", Activation::kGeluFast},
    {"quick_gelu", Activation::kQuickGelu},
    {"relu", Activation::kRelu},
    {"tanh", Activation::kTanh},
    {"sigmoid", Activation::kSigmoid},
    {"silu", Activation::kSilu},
    {"swish", Activation::kSilu},
    {"mish", Activation::kMish},
    {"linear", Activation::kIdentity},
}};

inline Activation parse_activation(io::JsonFields const& fields, std::string_view key, std::string_view fallback) {
  std::string const name = fields.get_string(key, fallback);
  for (auto const& entry : kActivationNames) {
    if (entry.name == name) return entry.activation;
  }
  std::ostringstream accepted;
  for (std::size_t i = 0; i < kActivationNames.size(); ++i) accepted << (i ? ", " : "") << kActivationNames[i].name;
  FLASHDEBERTA_FAIL(fields.source() << ": key '" << key << "' names unknown activation '" << name
                                    << "' (accepted: " << accepted.str() << ")");
}

inline std::string strip_and_lower(std::string_view text) {
  auto const is_space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// HF: value.lower().split("|"), each part stripped. An empty string gives one empty entry, as in Python.
inline std::vector<std::string> split_bar_list(std::string_view text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    std::size_t const bar = text.find('|', start);
    parts.push_back(strip_and_lower(text.substr(start, bar == std::string_view::npos ? text.npos : bar - start)));
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  return parts;
}

// pos_att_type: a list (entries used verbatim, as HF does) or a "|"-separated string; null -> empty.
inline void parse_pos_att_type(io::JsonFields const& fields, ModelConfig& config) {
  std::vector<std::string> entries;
  if (io::Json const* value = fields.find("pos_att_type"); value != nullptr && !value->is_null()) {
    if (value->is_string()) {
      entries = split_bar_list(value->get_ref<std::string const&>());
    } else if (value->is_array()) {
      for (std::size_t i = 0; i < value->size(); ++i) {
        entries.push_back(
            io::json_as_string((*value)[i], fields.source(), "key 'pos_att_type[" + std::to_string(i) + "]'"));
      }
    } else {
      io::fail_json_type(fields.source(), "key 'pos_att_type'", "a list, a \"|\"-separated string or null", *value);
    }
  }
  for (auto const& entry : entries) {
    // HF would accept anything and ignore it; an unknown entry almost always means a typo or a
    // training-only option (p2p), and silently dropping it would change the model's output.
    FLASHDEBERTA_REQUIRE(entry == "c2p" || entry == "p2c", fields.source()
                                                               << ": key 'pos_att_type' has entry '" << entry
                                                               << "'; accepted entries are 'c2p' and 'p2c'");
    config.c2p = config.c2p || entry == "c2p";
    config.p2c = config.p2c || entry == "p2c";
  }
  config.pos_att_type_count = static_cast<std::int64_t>(entries.size());
}

inline void parse_norm_rel_ebd(io::JsonFields const& fields, ModelConfig& config) {
  for (auto const& entry : split_bar_list(fields.get_string("norm_rel_ebd", "none"))) {
    FLASHDEBERTA_REQUIRE(entry == "none" || entry == "layer_norm",
                         fields.source() << ": key 'norm_rel_ebd' has entry '" << entry
                                         << "'; accepted entries are 'none' and 'layer_norm'");
    config.norm_rel_ebd_layer_norm = config.norm_rel_ebd_layer_norm || entry == "layer_norm";
  }
}

// num_labels = len(id2label) when present (HF's PretrainedConfig rule), else the num_labels key, else 2.
inline void parse_labels(io::JsonFields const& fields, ModelConfig& config) {
  io::Json const* id2label = fields.find("id2label");
  if (id2label != nullptr && !id2label->is_null()) {
    if (!id2label->is_object()) io::fail_json_type(fields.source(), "key 'id2label'", "an object", *id2label);
    for (auto const& item : id2label->items()) {  // no structured binding: clang < 16 cannot capture one
      std::string const& key = item.key();
      io::Json const& label = item.value();
      std::string const what = "key 'id2label[\"" + key + "\"]'";
      std::int64_t id = 0;
      std::size_t used = 0;
      bool ok = !key.empty() && (std::isdigit(static_cast<unsigned char>(key[0])) || key[0] == '-');
      if (ok) {
        try {
          id = std::stoll(key, &used);
        } catch (std::exception const&) {
          ok = false;
        }
      }
      FLASHDEBERTA_REQUIRE(ok && used == key.size(),
                           fields.source() << ": key 'id2label' has key '" << key << "', which is not an integer");
      FLASHDEBERTA_REQUIRE(config.id2label.emplace(id, io::json_as_string(label, fields.source(), what)).second,
                           fields.source() << ": key 'id2label' has label id " << id << " twice (key '" << key << "')");
    }
    config.num_labels = static_cast<std::int64_t>(config.id2label.size());
  } else {
    config.num_labels = fields.get_int("num_labels", 2);
  }
  FLASHDEBERTA_REQUIRE(config.num_labels >= 1 && config.num_labels <= kMaxConfigSize,
                       fields.source() << ": num_labels is " << config.num_labels << "; it must be in [1, "
                                       << kMaxConfigSize << "] (an empty id2label also gives 0)");
}

inline void parse_architectures(io::JsonFields const& fields, ModelConfig& config) {
  io::Json const* value = fields.find("architectures");
  if (value == nullptr || value->is_null()) return;
  if (!value->is_array()) io::fail_json_type(fields.source(), "key 'architectures'", "a list of strings", *value);
  for (std::size_t i = 0; i < value->size(); ++i) {
    config.architectures.push_back(
        io::json_as_string((*value)[i], fields.source(), "key 'architectures[" + std::to_string(i) + "]'"));
  }
}

inline void require_size(std::string const& source, std::string_view key, std::int64_t value, std::int64_t min) {
  FLASHDEBERTA_REQUIRE(value >= min && value <= kMaxConfigSize, source << ": key '" << key << "' is " << value
                                                                       << "; it must be in [" << min << ", "
                                                                       << kMaxConfigSize << "]");
}

// Checks the combinations the forward pass depends on; single-key ranges are checked while parsing.
inline void validate_model_config(std::string const& source, ModelConfig const& c) {
  if (c.position_biased_input) require_size(source, "max_position_embeddings", c.max_position_embeddings, 1);
  if (c.relative_attention) {
    FLASHDEBERTA_REQUIRE(c.max_relative_positions >= 1 && c.max_relative_positions <= kMaxConfigSize,
                         source << ": relative_attention needs max_relative_positions (or, when it is < 1, "
                                   "max_position_embeddings) in [1, "
                                << kMaxConfigSize << "], found " << c.max_relative_positions);
  }
  if (c.model_type == ModelType::kDebertaV2 && c.relative_attention && c.position_buckets > 0) {
    // Spec 3.2: mid = buckets / 2 divides |x| and log((R - 1) / mid) divides the result. Both must be
    // non-zero, and the ratio must exceed 1 in float32, or the bucket of a long distance is inf/NaN
    // (or, for R - 1 < mid, decreasing with distance).
    std::int64_t const buckets = c.position_buckets;
    std::int64_t const mid = buckets / 2;
    FLASHDEBERTA_REQUIRE(buckets >= 2, source << ": key 'position_buckets' is " << buckets
                                              << "; log bucketing needs at least 2 buckets (or <= 0 to disable it)");
    auto const ratio = static_cast<float>(static_cast<double>(c.max_relative_positions - 1) / static_cast<double>(mid));
    FLASHDEBERTA_REQUIRE(c.max_relative_positions - 1 > mid && std::log(ratio) > 0.0f,
                         source << ": key 'position_buckets' is " << buckets << " with max_relative_positions "
                                << c.max_relative_positions << "; log bucketing needs max_relative_positions - 1 > "
                                << "position_buckets / 2 (here " << mid << ")");
  }
  if (c.model_type == ModelType::kDebertaV2 && c.conv_kernel_size > 0) {
    FLASHDEBERTA_REQUIRE(c.conv_kernel_size % 2 == 1,
                         source << ": key 'conv_kernel_size' is " << c.conv_kernel_size
                                << "; an even kernel changes the sequence length (HF pads (k - 1) / 2 on each side), "
                                   "so only odd kernels are supported");
    FLASHDEBERTA_REQUIRE(c.conv_groups >= 1 && c.hidden_size % c.conv_groups == 0,
                         source << ": key 'conv_groups' is " << c.conv_groups << "; it must be >= 1 and divide "
                                << "hidden_size " << c.hidden_size);
  }
}

// HF's PretrainedConfig refuses any other problem_type (null is unset); read as unset, a typo would silently
// choose softmax over sigmoid scores.
inline void require_problem_type(io::JsonFields const& f) {
  io::Json const* value = f.find("problem_type");
  if (value == nullptr || value->is_null()) return;
  std::string const& type = io::json_as_string(*value, f.source(), "key 'problem_type'");
  if (type == "regression" || type == "single_label_classification" || type == "multi_label_classification") return;
  io::fail_json_type(f.source(), "key 'problem_type'",
                     "\"regression\", \"single_label_classification\" or \"multi_label_classification\" (or null)",
                     *value);
}

}  // namespace detail

// `source_name` (normally the file path) starts every error message.
inline ModelConfig parse_model_config(std::string_view json_text, std::string const& source_name) {
  io::Json const root = io::parse_json(json_text, source_name, "config");
  io::JsonFields const f(root, source_name);
  std::string const& src = f.source();
  ModelConfig c;

  io::Json const* model_type = f.find("model_type");
  FLASHDEBERTA_REQUIRE(model_type != nullptr,
                       src << ": key 'model_type' is missing; accepted values are \"deberta\" and \"deberta-v2\"");
  std::string const& type_name = io::json_as_string(*model_type, src, "key 'model_type'");
  if (type_name == "deberta") {
    c.model_type = ModelType::kDeberta;
  } else if (type_name == "deberta-v2") {
    c.model_type = ModelType::kDebertaV2;
  } else {
    FLASHDEBERTA_FAIL(src << ": key 'model_type' is \"" << type_name
                          << "\"; accepted values are \"deberta\" and \"deberta-v2\"");
  }
  bool const v2 = c.model_type == ModelType::kDebertaV2;

  // Family defaults: spec 1.2 (v1) and 1.3 (v2/v3).
  c.vocab_size = f.get_int("vocab_size", v2 ? 128100 : 50265);
  c.hidden_size = f.get_int("hidden_size", v2 ? 1536 : 768);
  c.num_layers = f.get_int("num_hidden_layers", v2 ? 24 : 12);
  c.num_heads = f.get_int("num_attention_heads", v2 ? 24 : 12);
  c.intermediate_size = f.get_int("intermediate_size", v2 ? 6144 : 3072);
  detail::require_size(src, "vocab_size", c.vocab_size, 1);
  detail::require_size(src, "hidden_size", c.hidden_size, 1);
  detail::require_size(src, "num_hidden_layers", c.num_layers, 1);
  detail::require_size(src, "num_attention_heads", c.num_heads, 1);
  detail::require_size(src, "intermediate_size", c.intermediate_size, 1);

  // v1 has no attention_head_size override (HF's DebertaConfig ignores the key).
  std::optional<std::int64_t> const head_size = v2 ? f.get_optional_int("attention_head_size") : std::nullopt;
  if (head_size) {
    detail::require_size(src, "attention_head_size", *head_size, 1);
    c.head_size = *head_size;
  } else {
    FLASHDEBERTA_REQUIRE(c.hidden_size % c.num_heads == 0,
                         src << ": hidden_size " << c.hidden_size << " is not a multiple of num_attention_heads "
                             << c.num_heads << " (and there is no attention_head_size)");
    c.head_size = c.hidden_size / c.num_heads;
  }
  FLASHDEBERTA_REQUIRE(c.all_head_size() <= detail::kMaxConfigSize, src << ": num_attention_heads " << c.num_heads
                                                                        << " x attention_head_size " << c.head_size
                                                                        << " exceeds " << detail::kMaxConfigSize);

  c.embedding_size = f.get_int("embedding_size", c.hidden_size);
  c.pooler_hidden_size = f.get_int("pooler_hidden_size", c.hidden_size);
  c.max_position_embeddings = f.get_int("max_position_embeddings", 512);
  c.type_vocab_size = f.get_int("type_vocab_size", 0);
  detail::require_size(src, "embedding_size", c.embedding_size, 1);
  detail::require_size(src, "pooler_hidden_size", c.pooler_hidden_size, 1);
  detail::require_size(src, "type_vocab_size", c.type_vocab_size, 0);
  FLASHDEBERTA_REQUIRE(c.max_position_embeddings <= detail::kMaxConfigSize,
                       src << ": key 'max_position_embeddings' is " << c.max_position_embeddings
                           << "; it must be <= " << detail::kMaxConfigSize);

  double const eps = f.get_number("layer_norm_eps", 1e-7);
  c.layer_norm_eps = static_cast<float>(eps);
  FLASHDEBERTA_REQUIRE(std::isfinite(eps) && std::isfinite(c.layer_norm_eps) && c.layer_norm_eps > 0.0f,
                       src << ": key 'layer_norm_eps' is " << eps << "; it must be finite and > 0 in float32");

  c.relative_attention = f.get_bool("relative_attention", false);
  c.position_biased_input = f.get_bool("position_biased_input", true);
  std::int64_t const max_relative = f.get_int("max_relative_positions", -1);
  c.max_relative_positions = max_relative < 1 ? c.max_position_embeddings : max_relative;
  detail::parse_pos_att_type(f, c);

  c.hidden_act = detail::parse_activation(f, "hidden_act", "gelu");
  c.pooler_hidden_act = detail::parse_activation(f, "pooler_hidden_act", "gelu");
  c.legacy = f.get_bool("legacy", true);
  detail::parse_labels(f, c);
  detail::parse_architectures(f, c);

  if (v2) {
    c.position_buckets = f.get_int("position_buckets", -1);
    FLASHDEBERTA_REQUIRE(
        c.position_buckets <= detail::kMaxConfigSize,
        src << ": key 'position_buckets' is " << c.position_buckets << "; it must be <= " << detail::kMaxConfigSize);
    c.share_att_key = f.get_bool("share_att_key", false);
    detail::parse_norm_rel_ebd(f, c);
    c.conv_kernel_size = f.get_int("conv_kernel_size", 0);
    c.conv_groups = f.get_int("conv_groups", 1);
    detail::require_size(src, "conv_kernel_size", c.conv_kernel_size, 0);
    c.conv_act = detail::parse_activation(f, "conv_act", "tanh");
  } else {
    c.talking_head = f.get_bool("talking_head", false);
  }

  detail::require_problem_type(f);
  detail::validate_model_config(src, c);
  return c;
}

// The file a checkpoint directory's config comes from, for messages: config.json, or ZeroModels' zm_config.json /
// kf_config.json where HF's is absent.
inline std::filesystem::path model_config_file(std::filesystem::path const& directory) {
  if (auto const zeromodels = io::zeromodels_directory_of(directory)) return zeromodels->config_file;
  return directory / "config.json";
}

// The text of a checkpoint directory's config.json; for a ZeroModels directory, the config.json HF would hold for
// the same model (io/zeromodels.hpp), which is what the model was built from.
inline std::string model_config_json(std::filesystem::path const& directory) {
  if (auto const zeromodels = io::zeromodels_directory_of(directory))
    return io::zeromodels_hf_config(*zeromodels).dump(2);
  return io::read_regular_file(directory / "config.json", "model config");
}

// `path` is a checkpoint directory holding config.json (or a ZeroModels directory: its config as HF would
// write it, io/zeromodels.hpp), or the JSON file itself.
inline ModelConfig load_model_config(std::filesystem::path const& path) {
  if (auto const zeromodels = io::zeromodels_directory_of(path))
    return parse_model_config(io::zeromodels_hf_config(*zeromodels).dump(), zeromodels->config_file.string());
  std::error_code ec;
  std::filesystem::path const file = std::filesystem::is_directory(path, ec) ? path / "config.json" : path;
  return parse_model_config(io::read_regular_file(file, "model config"), file.string());
}

}  // namespace flashdeberta
