// The roles of ZeroModels' layers (the layer names its model code gives them: "blocks_0_query_proj",
// "lm_head_decoder", ...) and, for each, the HF tensors that hold the same variables; and the roles a Keras
// path gives by itself. io/zeromodels_mapping.hpp assigns the roles.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/heads/head_kind.hpp"

namespace flashdeberta::io {

enum class KerasLayout { kSame, kTransposed, kConvKernel };  // [in,out] -> [out,in]; (k,in,out) -> (out,in,k)
enum class LayoutDirection { kKerasToTorch, kTorchToKeras };

// A kernel moved between Keras' layout and torch's (the reader one way, `flashdeberta convert` the other), elements
// of `element_bytes` each: a Dense kernel [in, out] <-> [out, in], a Conv1D kernel (k, in, out) <-> (out, in, k).
// `shape` is the source's on entry and the result's on return.
inline std::vector<std::byte> relayout(std::span<std::byte const> in, std::vector<std::int64_t>& shape,
                                       KerasLayout layout, std::size_t element_bytes, LayoutDirection direction) {
  std::vector<std::byte> out(in.begin(), in.end());
  if (layout == KerasLayout::kSame || shape.size() < 2) return out;
  bool const to_torch = direction == LayoutDirection::kKerasToTorch;
  auto const move = [&](std::int64_t keras, std::int64_t torch) {
    std::int64_t const from = to_torch ? keras : torch, to = to_torch ? torch : keras;
    std::memcpy(&out[static_cast<std::size_t>(to) * element_bytes], &in[static_cast<std::size_t>(from) * element_bytes],
                element_bytes);
  };
  if (layout == KerasLayout::kTransposed) {
    std::int64_t const in_dim = to_torch ? shape[0] : shape[1], out_dim = to_torch ? shape[1] : shape[0];
    for (std::int64_t i = 0; i < in_dim; ++i)
      for (std::int64_t o = 0; o < out_dim; ++o) move(i * out_dim + o, o * in_dim + i);
    shape = {shape[1], shape[0]};
    return out;
  }
  std::int64_t const k = to_torch ? shape[0] : shape[2], in_dim = shape[1], out_dim = to_torch ? shape[2] : shape[0];
  for (std::int64_t t = 0; t < k; ++t)
    for (std::int64_t i = 0; i < in_dim; ++i)
      for (std::int64_t o = 0; o < out_dim; ++o) move((t * in_dim + i) * out_dim + o, (o * in_dim + i) * k + t);
  shape = {shape[2], shape[1], shape[0]};
  return out;
}

// ZeroModels' class for each head (after the family's prefix: "DebertaV3" + "SequenceClassify") and the roles of
// the head's layers: its Dense layers in the order the class builds them after the backbone's, and the masked-LM
// head's LayerNormalization. The reader (io/zeromodels_mapping.hpp) and the writer (`flashdeberta convert`) both
// take the heads from here.
struct ZeroModelsHeadClass {
  HeadKind kind;
  std::string_view class_suffix;
  std::vector<std::string> dense;
  std::vector<std::string> layer_norms;
};

inline std::vector<ZeroModelsHeadClass> const& zeromodels_head_classes() {
  static std::vector<ZeroModelsHeadClass> const heads{
      {HeadKind::kBase, "Model", {}, {}},
      {HeadKind::kMaskedLM, "MaskedLM", {"lm_head_dense", "lm_head_decoder"}, {"lm_head_layernorm"}},
      {HeadKind::kSequenceClassification, "SequenceClassify", {"pooler_dense", "classifier"}, {}},
      {HeadKind::kTokenClassification, "TokenClassify", {"classifier"}, {}},
      {HeadKind::kQuestionAnswering, "QnA", {"qa_outputs"}, {}},
      {HeadKind::kMultipleChoice, "MultipleChoice", {"pooler_dense", "classifier"}, {}},
  };
  return heads;
}

inline ZeroModelsHeadClass const& zeromodels_head_class(HeadKind kind) {
  auto const& heads = zeromodels_head_classes();
  return *std::find_if(heads.begin(), heads.end(), [&](ZeroModelsHeadClass const& h) { return h.kind == kind; });
}

namespace detail {

struct RoleTarget {
  std::string hf_module;  // "encoder.layer.0.attention.self.query_proj", "" for the v1 attention's own vars
  std::vector<std::string> hf_leaves;                    // per Keras variable index: "weight", "bias", ...
  KerasLayout kernel_layout = KerasLayout::kTransposed;  // of variable 0
};

inline bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "blocks_<digits>_<word>" (ZeroModels' encoder blocks) split into the block's index and its part, else nullopt.
// By hand rather than std::regex, whose instantiation alone added seconds to every file that loads a checkpoint.
inline std::optional<std::pair<std::string, std::string>> block_role(std::string_view role) {
  constexpr std::string_view kPrefix = "blocks_";
  if (!role.starts_with(kPrefix)) return std::nullopt;
  role.remove_prefix(kPrefix.size());
  std::size_t const underscore = role.find('_');
  if (underscore == std::string_view::npos || !all_digits(role.substr(0, underscore))) return std::nullopt;
  std::string_view const part = role.substr(underscore + 1);
  bool const word = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  });
  if (!word) return std::nullopt;
  return std::pair{std::string(role.substr(0, underscore)), std::string(part)};
}

// The layer counter of "deberta[_v2]_disentangled_self_attention[_<digits>]" ("0" without one), else nullopt.
inline std::optional<std::string> attention_layer_counter(std::string_view name) {
  for (std::string_view const stem :
       {"deberta_disentangled_self_attention", "deberta_v2_disentangled_self_attention"}) {
    if (!name.starts_with(stem)) continue;
    std::string_view const rest = name.substr(stem.size());
    if (rest.empty()) return "0";
    if (rest.front() == '_' && all_digits(rest.substr(1))) return std::string(rest.substr(1));
  }
  return std::nullopt;
}

// One role's HF tensors. `role` is ZeroModels' layer name.
inline std::optional<RoleTarget> role_target(std::string const& role, std::string const& base) {
  if (auto const block = block_role(role)) {
    std::string const layer = base + "encoder.layer." + block->first + ".";
    std::string const& part = block->second;
    static std::map<std::string, std::string> const modules{{"query_proj", "attention.self.query_proj"},
                                                            {"key_proj", "attention.self.key_proj"},
                                                            {"value_proj", "attention.self.value_proj"},
                                                            {"pos_key_proj", "attention.self.pos_key_proj"},
                                                            {"pos_query_proj", "attention.self.pos_query_proj"},
                                                            {"pos_q_proj", "attention.self.pos_q_proj"},
                                                            {"attention_output_dense", "attention.output.dense"},
                                                            {"intermediate_dense", "intermediate.dense"},
                                                            {"output_dense", "output.dense"}};
    if (auto it = modules.find(part); it != modules.end()) return RoleTarget{layer + it->second, {"weight", "bias"}};
    if (part == "in_proj" || part == "pos_proj") return RoleTarget{layer + "attention.self." + part, {"weight"}};
    if (part == "attention_self") return RoleTarget{layer + "attention.self", {"q_bias", "v_bias"}, KerasLayout::kSame};
    if (part == "attention_output_layernorm")
      return RoleTarget{layer + "attention.output.LayerNorm", {"weight", "bias"}, KerasLayout::kSame};
    if (part == "output_layernorm")
      return RoleTarget{layer + "output.LayerNorm", {"weight", "bias"}, KerasLayout::kSame};
    return std::nullopt;
  }
  static std::map<std::string, RoleTarget> const fixed{
      {"word_embeddings", {"embeddings.word_embeddings", {"weight"}, KerasLayout::kSame}},
      {"embeddings_LayerNorm", {"embeddings.LayerNorm", {"weight", "bias"}, KerasLayout::kSame}},
      {"rel_embeddings", {"encoder.rel_embeddings", {"weight"}, KerasLayout::kSame}},
      {"rel_embeddings_layernorm", {"encoder.LayerNorm", {"weight", "bias"}, KerasLayout::kSame}},
      {"conv", {"encoder.conv.conv", {"weight", "bias"}, KerasLayout::kConvKernel}},
      {"conv_LayerNorm", {"encoder.conv.LayerNorm", {"weight", "bias"}, KerasLayout::kSame}},
  };
  if (auto it = fixed.find(role); it != fixed.end()) {
    RoleTarget target = it->second;
    target.hf_module = base + target.hf_module;
    return target;
  }
  // The heads, in HF's legacy masked-LM layout with an untied decoder: ZeroModels' decoder is a Dense of its own.
  static std::map<std::string, RoleTarget> const heads{
      {"lm_head_dense", {"cls.predictions.transform.dense", {"weight", "bias"}}},
      {"lm_head_layernorm", {"cls.predictions.transform.LayerNorm", {"weight", "bias"}, KerasLayout::kSame}},
      {"lm_head_decoder", {"cls.predictions", {"decoder.weight", "bias"}}},
      {"pooler_dense", {"pooler.dense", {"weight", "bias"}}},
      {"classifier", {"classifier", {"weight", "bias"}}},
      {"qa_outputs", {"qa_outputs", {"weight", "bias"}}},
  };
  if (auto it = heads.find(role); it != heads.end()) return it->second;
  return std::nullopt;
}

inline std::vector<std::string> split_path(std::string const& path) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t const slash = path.find('/', start);
    parts.push_back(path.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return parts;
}

// "dense_4" -> 4, "dense" -> 0 for class "dense"; nullopt for another class.
inline std::optional<std::int64_t> counter_of(std::string const& group, std::string const& cls) {
  if (group == cls) return 0;
  if (!group.starts_with(cls + "_")) return std::nullopt;
  std::string const digits = group.substr(cls.size() + 1);
  if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoll(digits);
}

// The role a path alone gives (custom layers' sublayers), or "" for a plain Dense / LayerNormalization.
inline std::string role_from_path(std::vector<std::string> const& parts) {
  // parts end with "vars"; the layer is the one before, its parent before that.
  std::string const layer = parts.size() >= 2 ? parts[parts.size() - 2] : "";
  std::string const parent = parts.size() >= 3 ? parts[parts.size() - 3] : "";
  if (auto const counter = attention_layer_counter(parent)) return "blocks_" + *counter + "_" + layer;
  if (auto const counter = attention_layer_counter(layer)) return "blocks_" + *counter + "_attention_self";
  if (layer == "word_embeddings") return "word_embeddings";
  if (layer == "layer_norm" && parent.ends_with("conv_layer")) return "conv_LayerNorm";
  if (layer == "layer_norm" && parent.ends_with("embeddings")) return "embeddings_LayerNorm";
  if (layer == "conv" && parent.ends_with("conv_layer")) return "conv";
  if (counter_of(layer, "deberta_v2_relative_embedding") || counter_of(layer, "deberta_relative_embedding"))
    return "rel_embeddings";
  return "";
}

}  // namespace detail

}  // namespace flashdeberta::io
