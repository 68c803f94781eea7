// ZeroModels' Keras variables -> the tensors of the same model in HF's layout and names.
//
// Each vars group takes one role (io/zeromodels_roles.hpp): the layer name Keras >= 3.6 recorded on it, else
// the one its path gives. Paths name custom layers' sublayers by attribute, but plain Dense and
// LayerNormalization layers only by a per-class build-order counter within their model ("dense_4"); the order
// ZeroModels' code builds them in (per block: attention output, intermediate, output; the head's after the
// backbone's) turns the counters into roles. Every group must take exactly one role, every role of the
// backbone must be there with the shape the config gives, and the head in the file is what its roles say.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/keras_weights.hpp"
#include "flashdeberta/io/zeromodels_config.hpp"
#include "flashdeberta/io/zeromodels_roles.hpp"

namespace flashdeberta::io {

struct ZeroModelsTensor {
  std::string hf_name;
  KerasVariable const* variable = nullptr;
  std::string keras_path;  // "layers/dense_1/vars/0", for messages
  KerasLayout layout = KerasLayout::kSame;
};

struct ZeroModelsMapping {
  std::vector<ZeroModelsTensor> tensors;
  std::string architecture;  // HF's class of the head in the file ("DebertaV2ForMaskedLM"); empty: the backbone
  std::int64_t num_labels = 0;
  bool separate_position_projections = false;  // pos_key_proj / pos_query_proj: share_att_key false
};

namespace detail {

struct PlainLayer {
  std::string scope;  // the path before the layer's group: its model
  std::int64_t counter = 0;
  KerasVarsGroup const* group = nullptr;
};

struct ZeroModelsSizes {
  std::int64_t h, i, v, layers, rel_rows, conv_kernel;
  bool v1, norm_rel, c2p, p2c;
};

inline ZeroModelsSizes zeromodels_sizes(ZeroModelsConfig const& zc) {
  Json const& c = zc.hf_config;
  bool const v1 = zc.family == ZeroModelsFamily::kV1;
  auto const pos = c["pos_att_type"];
  auto const has = [&](char const* t) {
    return pos.is_array() && std::find(pos.begin(), pos.end(), Json(t)) != pos.end();
  };
  std::int64_t const rel_half =
      v1 ? c["max_relative_positions"].get<std::int64_t>() : c["position_buckets"].get<std::int64_t>();
  return {c["hidden_size"].get<std::int64_t>(),
          c["intermediate_size"].get<std::int64_t>(),
          c["vocab_size"].get<std::int64_t>(),
          c["num_hidden_layers"].get<std::int64_t>(),
          2 * rel_half,
          v1 ? 0 : c["conv_kernel_size"].get<std::int64_t>(),
          v1,
          !v1 && c["norm_rel_ebd"] == "layer_norm",
          has("c2p"),
          has("p2c")};
}

// The Keras shape of variable `index` of `role`; a head's label count (-1) is the file's to say.
inline std::vector<std::int64_t> keras_shape(std::string const& role, std::size_t index, ZeroModelsSizes const& s) {
  std::int64_t const h = s.h;
  auto const dense = [&](std::int64_t in, std::int64_t out) {
    return index == 0 ? std::vector<std::int64_t>{in, out} : std::vector<std::int64_t>{out};
  };
  auto const ends = [&](char const* suffix) { return role.ends_with(suffix); };
  if (role == "word_embeddings") return {s.v, h};
  if (role == "rel_embeddings") return {s.rel_rows, h};
  if (role == "conv") return index == 0 ? std::vector<std::int64_t>{s.conv_kernel, h, h} : std::vector<std::int64_t>{h};
  if (role == "lm_head_decoder") return dense(h, s.v);
  if (role == "classifier") return dense(h, -1);
  if (role == "qa_outputs") return dense(h, 2);
  if (ends("LayerNorm") || ends("layernorm") || ends("attention_self")) return {h};
  if (ends("in_proj")) return {h, 3 * h};
  if (ends("pos_proj")) return {h, h};
  if (ends("intermediate_dense")) return dense(h, s.i);
  if (ends("_output_dense") && !ends("attention_output_dense")) return dense(s.i, h);
  return dense(h, h);  // q/k/v and position projections, attention output, lm_head_dense, pooler_dense
}

inline std::string format_keras_shape(std::vector<std::int64_t> const& shape) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    os << (i ? ", " : "") << (shape[i] < 0 ? std::string("K") : std::to_string(shape[i]));
  os << "]";
  return os.str();
}

// The backbone's roles in the order ZeroModels builds its plain layers (deberta_v2_model.py:60-82, 129-131;
// deberta_model.py likewise without the relative-embedding LayerNorm).
inline std::vector<std::string> backbone_plain_roles(std::string const& cls, ZeroModelsSizes const& s) {
  std::vector<std::string> roles;
  if (cls == "layer_normalization" && s.norm_rel) roles.push_back("rel_embeddings_layernorm");
  for (std::int64_t b = 0; b < s.layers; ++b) {
    std::string const p = "blocks_" + std::to_string(b) + "_";
    if (cls == "dense") {
      for (char const* part : {"attention_output_dense", "intermediate_dense", "output_dense"})
        roles.push_back(p + part);
    } else {
      for (char const* part : {"attention_output_layernorm", "output_layernorm"}) roles.push_back(p + part);
    }
  }
  return roles;
}

// The roles of the head's plain layers, from how many there are and their shapes: two Dense layers are the
// masked-LM transform and decoder when the second projects onto the vocabulary, else pooler and classifier;
// one is the QA span layer when the model class says so, else a token classifier.
inline std::vector<std::string> head_dense_roles(std::vector<KerasVarsGroup const*> const& head,
                                                 ZeroModelsSizes const& s, std::string const& model_class) {
  auto const out_dim = [](KerasVarsGroup const* g) {
    auto it = g->variables.find(0);
    return it == g->variables.end() || it->second.dataset.shape.size() != 2 ? -1 : it->second.dataset.shape[1];
  };
  auto const dense = [](HeadKind kind) { return zeromodels_head_class(kind).dense; };
  if (head.size() == 2) {
    if (out_dim(head[1]) == s.v && !model_class.ends_with("Classify") && !model_class.ends_with("MultipleChoice"))
      return dense(HeadKind::kMaskedLM);
    return dense(HeadKind::kSequenceClassification);
  }
  if (head.size() == 1) {
    bool const qa = model_class.ends_with("QnA") || model_class.ends_with("QuestionAnswering");
    return dense(qa ? HeadKind::kQuestionAnswering : HeadKind::kTokenClassification);
  }
  return {};
}

}  // namespace detail

inline ZeroModelsMapping map_zeromodels(KerasWeights const& weights, ZeroModelsConfig const& zc) {
  detail::ZeroModelsSizes const s = detail::zeromodels_sizes(zc);
  std::string const& src = weights.source();

  // Roles from the paths; plain layers wait for their counters.
  std::map<KerasVarsGroup const*, std::string> role_of;
  std::map<std::string, std::vector<detail::PlainLayer>> plain;  // "dense" / "layer_normalization"
  std::string backbone_scope;
  for (auto const& item : weights.groups()) {
    std::string const& path = item.first;
    KerasVarsGroup const& group = item.second;
    std::vector<std::string> const parts = detail::split_path(path);
    std::string const layer = parts.size() >= 2 ? parts[parts.size() - 2] : "";
    std::string const scope = path.substr(0, path.size() - std::string("vars").size() - layer.size());
    std::string role = detail::role_from_path(parts);
    if (role == "word_embeddings" && parts.size() >= 3)
      backbone_scope = scope.substr(0, scope.size() - parts[parts.size() - 3].size() - 1);
    if (role.empty()) {
      for (char const* cls : {"dense", "layer_normalization"}) {
        if (auto counter = detail::counter_of(layer, cls)) plain[cls].push_back({scope, *counter, &group});
      }
    }
    role_of[&group] = role;
  }
  for (auto& [cls, layers] : plain) {
    // The backbone's model first (a multiple-choice model nests it: layers/deberta_v2_model/layers/dense), then
    // the outer model's layers, each by counter.
    std::sort(layers.begin(), layers.end(), [&](detail::PlainLayer const& a, detail::PlainLayer const& b) {
      bool const a_inner = a.scope == backbone_scope, b_inner = b.scope == backbone_scope;
      if (a_inner != b_inner) return a_inner;
      return a.scope != b.scope ? a.scope < b.scope : a.counter < b.counter;
    });
    std::vector<std::string> roles = detail::backbone_plain_roles(cls, s);
    std::vector<KerasVarsGroup const*> rest;
    for (std::size_t k = roles.size(); k < layers.size(); ++k) rest.push_back(layers[k].group);
    if (cls == "dense") {
      for (std::string const& r : detail::head_dense_roles(rest, s, zc.model_class)) roles.push_back(r);
    } else if (rest.size() == 1) {
      roles.push_back(zeromodels_head_class(HeadKind::kMaskedLM).layer_norms.front());
    }
    for (std::size_t k = 0; k < layers.size() && k < roles.size(); ++k) role_of[layers[k].group] = roles[k];
  }

  // Recorded names win over counters; "LayerNorm" is the name of two layers, told apart by the path.
  std::map<std::string, KerasVarsGroup const*> by_role;
  bool separate_positions = false;
  for (auto& item : role_of) {
    KerasVarsGroup const* const group = item.first;
    std::string& role = item.second;
    if (group->layer_name && !(*group->layer_name == "LayerNorm" && role.ends_with("LayerNorm")))
      role = *group->layer_name == "LayerNorm" ? "embeddings_LayerNorm" : *group->layer_name;
    FLASHDEBERTA_REQUIRE(!role.empty(),
                         src << ": '/" << group->path
                             << "' is not a layer of ZeroModels' DeBERTa (no name recorded, and its path "
                                "names no layer the model builds)");
    auto const placed = by_role.emplace(role, group);
    FLASHDEBERTA_REQUIRE(placed.second, src << ": '/" << placed.first->second->path << "' and '/" << group->path
                                            << "' are both layer '" << role << "'");
    separate_positions = separate_positions || role.ends_with("pos_key_proj") || role.ends_with("pos_query_proj");
  }

  // The head, from the roles present.
  auto const present = [&](char const* role) { return by_role.count(role) != 0; };
  ZeroModelsMapping out;
  out.separate_position_projections = separate_positions;
  std::string const prefix = s.v1 ? "Deberta" : "DebertaV2";
  // The head in the file: the masked-LM head by any of its layers, the others by their first Dense layer (the
  // classifier alone is a token classifier's), multiple choice told from sequence classification by the class.
  auto const head_in_file = [&] {
    ZeroModelsHeadClass const& mlm = zeromodels_head_class(HeadKind::kMaskedLM);
    for (auto const& roles : {mlm.dense, mlm.layer_norms})
      for (std::string const& role : roles)
        if (present(role.c_str())) return HeadKind::kMaskedLM;
    if (present(zeromodels_head_class(HeadKind::kSequenceClassification).dense.front().c_str()))
      return zc.model_class.ends_with("MultipleChoice") ? HeadKind::kMultipleChoice : HeadKind::kSequenceClassification;
    for (HeadKind kind : {HeadKind::kTokenClassification, HeadKind::kQuestionAnswering})
      if (present(zeromodels_head_class(kind).dense.front().c_str())) return kind;
    return HeadKind::kBase;
  };
  HeadKind const head = head_in_file();
  ZeroModelsHeadClass const& head_class = zeromodels_head_class(head);
  std::vector<std::string> head_roles = head_class.dense;
  head_roles.insert(head_roles.end(), head_class.layer_norms.begin(), head_class.layer_norms.end());
  if (head != HeadKind::kBase) out.architecture = prefix + std::string(head_kind_class_suffix(head));
  if (head == HeadKind::kMaskedLM) {
    FLASHDEBERTA_REQUIRE(zc.hf_config["hidden_act"] == "gelu",
                         zc.source << ": hidden_act is " << zc.hf_config["hidden_act"].dump()
                                   << ", but ZeroModels' masked-LM head applies gelu (deberta_v3_model.py:277), which "
                                      "HF's head (hidden_act) cannot express");
  }
  std::string const base = out.architecture.empty() ? "" : "deberta.";

  // The roles the backbone must have.
  std::vector<std::string> required{"word_embeddings", "embeddings_LayerNorm", "rel_embeddings"};
  if (s.norm_rel) required.push_back("rel_embeddings_layernorm");
  if (s.conv_kernel > 0) required.insert(required.end(), {"conv", "conv_LayerNorm"});
  for (std::int64_t b = 0; b < s.layers; ++b) {
    std::string const p = "blocks_" + std::to_string(b) + "_";
    std::vector<std::string> parts{"attention_output_dense", "attention_output_layernorm", "intermediate_dense",
                                   "output_dense", "output_layernorm"};
    if (s.v1) {
      parts.insert(parts.end(), {"in_proj", "attention_self"});
      if (s.c2p) parts.push_back("pos_proj");
      if (s.p2c) parts.push_back("pos_q_proj");
    } else {
      parts.insert(parts.end(), {"query_proj", "key_proj", "value_proj"});
      if (separate_positions && s.c2p) parts.push_back("pos_key_proj");
      if (separate_positions && s.p2c) parts.push_back("pos_query_proj");
    }
    for (std::string const& part : parts) required.push_back(p + part);
  }
  required.insert(required.end(), head_roles.begin(), head_roles.end());
  std::set<std::string> const wanted(required.begin(), required.end());
  for (std::string const& role : required) {
    FLASHDEBERTA_REQUIRE(present(role.c_str()), src << ": layer '" << role << "' is missing (" << zc.source << " gives "
                                                    << s.layers << " layers; " << by_role.size()
                                                    << " layers with variables are in the file)");
  }

  for (auto const& item : by_role) {
    std::string const& role = item.first;
    KerasVarsGroup const* const group = item.second;
    FLASHDEBERTA_REQUIRE(wanted.count(role) != 0,
                         src << ": '/" << group->path << "' is layer '" << role << "', which the model " << zc.source
                             << " describes has not"
                             << (out.architecture.empty() ? "" : " (the file's head: " + out.architecture + ")"));
    detail::RoleTarget const target = *detail::role_target(role, base);
    FLASHDEBERTA_REQUIRE(group->variables.size() == target.hf_leaves.size() &&
                             group->variables.rbegin()->first + 1 == static_cast<std::int64_t>(target.hf_leaves.size()),
                         src << ": '/" << group->path << "' (layer '" << role << "') holds " << group->variables.size()
                             << " variables, expected vars/0.." << target.hf_leaves.size() - 1);
    for (auto const& var : group->variables) {
      std::int64_t const index = var.first;
      KerasVariable const& variable = var.second;
      std::vector<std::int64_t> expected = detail::keras_shape(role, static_cast<std::size_t>(index), s);
      std::vector<std::int64_t> const& got = variable.dataset.shape;
      bool ok = got.size() == expected.size();
      for (std::size_t d = 0; ok && d < got.size(); ++d) ok = expected[d] < 0 ? got[d] > 0 : got[d] == expected[d];
      FLASHDEBERTA_REQUIRE(ok, weights.source(variable.file)
                                   << ": '" << variable.dataset.path << "' (layer '" << role << "', variable " << index
                                   << ") has shape " << detail::format_keras_shape(got) << "; " << zc.source
                                   << " requires " << detail::format_keras_shape(expected));
      if (role == "classifier" && index == 0) out.num_labels = got[1];
      KerasLayout const layout = index == 0 ? target.kernel_layout : KerasLayout::kSame;
      out.tensors.push_back({target.hf_module + "." + target.hf_leaves[static_cast<std::size_t>(index)], &variable,
                             variable.dataset.path, got.size() >= 2 ? layout : KerasLayout::kSame});
    }
  }
  if (out.architecture.ends_with("ForMultipleChoice"))
    FLASHDEBERTA_REQUIRE(out.num_labels == 1, src << ": the multiple-choice classifier scores " << out.num_labels
                                                  << " outputs per choice; ZeroModels' has one");
  return out;
}

}  // namespace flashdeberta::io
