// The run-time sizes and switches of a DeBERTa checkpoint, as parsed from config.json
// (see io/config_json.hpp for the parser and its validation rules, deberta-spec.md section 1).
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace flashdeberta {

enum class ModelType { kDeberta, kDebertaV2 };  // "deberta" (v1) and "deberta-v2" (v2 and v3)

enum class Activation { kIdentity, kGelu, kGeluTanh, kGeluFast, kQuickGelu, kRelu, kTanh, kSigmoid, kSilu, kMish };

struct ModelConfig {
  ModelType model_type = ModelType::kDebertaV2;
  std::int64_t vocab_size = 0;         // V
  std::int64_t hidden_size = 0;        // H
  std::int64_t num_layers = 0;         // num_hidden_layers
  std::int64_t num_heads = 0;          // N
  std::int64_t head_size = 0;          // d: attention_head_size (v2) or H / N
  std::int64_t intermediate_size = 0;  // I
  std::int64_t embedding_size = 0;     // E (defaults to H)
  std::int64_t max_position_embeddings = 512;
  std::int64_t type_vocab_size = 0;
  std::int64_t max_relative_positions = 0;  // R, already resolved (< 1 in the file -> max_position_embeddings)
  std::int64_t position_buckets = -1;       // v2: > 0 enables log buckets
  std::int64_t conv_kernel_size = 0;        // v2: > 0 enables the conv layer after layer 0
  std::int64_t conv_groups = 1;
  std::int64_t pooler_hidden_size = 0;  // defaults to H
  std::int64_t num_labels = 2;          // len(id2label) when present
  float layer_norm_eps = 1e-7f;
  bool relative_attention = false;
  bool position_biased_input = true;
  bool share_att_key = false;            // v2
  bool norm_rel_ebd_layer_norm = false;  // v2: "layer_norm" in norm_rel_ebd
  bool talking_head = false;             // v1 extra key; not supported by the model (rejected at load)
  bool c2p = false;                      // "c2p" in pos_att_type
  bool p2c = false;                      // "p2c" in pos_att_type
  std::int64_t pos_att_type_count = 0;   // length of the parsed pos_att_type list (v1 scale uses it)
  bool legacy = true;                    // masked-LM head flavour
  Activation hidden_act = Activation::kGelu;
  Activation conv_act = Activation::kTanh;
  Activation pooler_hidden_act = Activation::kGelu;
  std::vector<std::string> architectures;
  std::map<std::int64_t, std::string> id2label;

  std::int64_t all_head_size() const { return num_heads * head_size; }  // A

  // k: half the row count of the relative-embedding table (spec 3.3).
  std::int64_t relative_span() const {
    if (model_type == ModelType::kDebertaV2 && position_buckets > 0) return position_buckets;
    return max_relative_positions;
  }

  bool uses_log_buckets() const {
    return model_type == ModelType::kDebertaV2 && position_buckets > 0 && max_relative_positions > 0;
  }

  // s of sqrt(d * s): v1 counts list entries, v2 counts c2p/p2c membership (spec 4.1, 4.2).
  std::int64_t scale_factor() const {
    if (model_type == ModelType::kDeberta) return 1 + pos_att_type_count;
    return 1 + (c2p ? 1 : 0) + (p2c ? 1 : 0);
  }

  // sqrt(float32(d) * s) evaluated in float32, as HF does.
  float attention_scale() const {
    return std::sqrt(static_cast<float>(head_size) * static_cast<float>(scale_factor()));
  }

  bool has_position_terms() const { return relative_attention && (c2p || p2c); }
};

}  // namespace flashdeberta
