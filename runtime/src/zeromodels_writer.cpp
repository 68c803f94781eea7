// HF -> ZeroModels (convert_support.hpp): zm_config.json and model.weights.h5 as ZeroModels' publishing writes
// them (write_zm_config, Keras' save_weights), for the ZeroModels class of the HF model and head. Each ZeroModels
// layer role reads the HF tensors io/zeromodels_roles.hpp gives it (the masked-LM head in either of HF's layouts,
// its decoder tied or not); an HF tensor left over, or a model ZeroModels' code cannot build, is refused.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "convert_support.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/io/checkpoint.hpp"
#include "flashdeberta/io/config_json.hpp"
#include "flashdeberta/io/json.hpp"
#if FLASHDEBERTA_WITH_HDF5
#include "zeromodels_keras_file.hpp"
#endif

namespace flashdeberta::runtime {

#if FLASHDEBERTA_WITH_HDF5

namespace {

namespace fs = std::filesystem;

struct ZeroModelsClass {
  std::string family;  // "deberta", "deberta_v2", "deberta_v3"
  std::string name;    // "DebertaV3SequenceClassify"
  std::vector<std::string> head_dense;
};

ZeroModelsClass zeromodels_class(ModelConfig const& c, HeadKind head) {
  bool const v1 = c.model_type == ModelType::kDeberta;
  std::string const prefix = v1 ? "Deberta" : c.conv_kernel_size > 0 ? "DebertaV2" : "DebertaV3";
  std::string const family = v1 ? "deberta" : c.conv_kernel_size > 0 ? "deberta_v2" : "deberta_v3";
  io::ZeroModelsHeadClass const& h = io::zeromodels_head_class(head);
  return {family, prefix + std::string(h.class_suffix), h.dense};
}

// What ZeroModels' DeBERTa cannot hold, refused before anything is written.
void require_representable(ModelConfig const& c, HeadKind head, std::string const& source) {
  auto const refuse = [&](bool bad, std::string const& why) {
    FLASHDEBERTA_REQUIRE(!bad, source << ": " << why << "; ZeroModels' DeBERTa cannot hold this model");
  };
  refuse(!c.relative_attention, "relative_attention is false");
  refuse(c.position_biased_input, "position_biased_input is true (absolute position embeddings)");
  refuse(c.type_vocab_size > 0, "type_vocab_size is " + std::to_string(c.type_vocab_size) + " (token-type embeddings)");
  refuse(c.embedding_size != c.hidden_size, "embedding_size " + std::to_string(c.embedding_size) +
                                                " differs from hidden_size " + std::to_string(c.hidden_size));
  refuse(c.all_head_size() != c.hidden_size, "attention_head_size x num_attention_heads is not hidden_size");
  refuse(c.model_type == ModelType::kDebertaV2 && !c.share_att_key,
         "share_att_key is false (zm_config.json cannot say so: ZeroModels builds shared keys)");
  refuse(c.model_type == ModelType::kDebertaV2 && c.position_buckets <= 0,
         "position_buckets is not positive (ZeroModels always uses log buckets)");
  refuse(c.conv_groups != 1, "conv_groups is " + std::to_string(c.conv_groups));
  bool const pooled = head == HeadKind::kSequenceClassification || head == HeadKind::kMultipleChoice;
  refuse(pooled && c.pooler_hidden_act != Activation::kGelu, "pooler_hidden_act is not gelu (ZeroModels' pooler's)");
  refuse(pooled && c.pooler_hidden_size != c.hidden_size, "pooler_hidden_size differs from hidden_size");
  refuse(head == HeadKind::kMaskedLM && c.hidden_act != Activation::kGelu,
         "the masked-LM head's activation (hidden_act) is not gelu (ZeroModels' head's)");
}

// The HF tensors of a role's variable `index`: the first of the candidates present.
std::vector<std::string> hf_candidates(std::string const& role, std::size_t index, std::string const& base) {
  if (role == "lm_head_dense")
    return {std::string("cls.predictions.transform.dense.") + (index ? "bias" : "weight"),
            std::string("lm_predictions.lm_head.dense.") + (index ? "bias" : "weight")};
  if (role == "lm_head_layernorm")
    return {std::string("cls.predictions.transform.LayerNorm.") + (index ? "bias" : "weight"),
            std::string("lm_predictions.lm_head.LayerNorm.") + (index ? "bias" : "weight")};
  if (role == "lm_head_decoder") {
    if (index == 0) return {"cls.predictions.decoder.weight", base + "embeddings.word_embeddings.weight"};  // tied
    return {"cls.predictions.decoder.bias", "cls.predictions.bias", "lm_predictions.lm_head.bias"};
  }
  io::detail::RoleTarget const target = *io::detail::role_target(role, base);
  return {target.hf_module + "." + target.hf_leaves[index]};
}

std::size_t variable_count(std::string const& role) { return io::detail::role_target(role, "")->hf_leaves.size(); }

io::Json zm_config(ModelConfig const& c, io::Json const& hf, ZeroModelsClass const& z, std::string const& variant) {
  io::Json text = io::Json::object();
  bool const v1 = z.family == "deberta";
  text["vocab_size"] = c.vocab_size;
  text["embed_dim"] = c.hidden_size;
  text["num_layers"] = c.num_layers;
  text["num_heads"] = c.num_heads;
  text["mlp_dim"] = c.intermediate_size;
  text["max_position_embeddings"] = c.max_position_embeddings;
  text["max_relative_positions"] = c.max_relative_positions;
  if (!v1) text["position_buckets"] = c.position_buckets;
  io::Json pos = io::Json::array();
  if (c.p2c && !v1) pos.push_back("p2c");
  if (c.c2p) pos.push_back("c2p");
  if (c.p2c && v1) pos.push_back("p2c");
  text["pos_att_type"] = pos;
  if (!v1) {
    text["norm_rel_ebd"] = c.norm_rel_ebd_layer_norm;
    text["conv_kernel_size"] = c.conv_kernel_size;
    text["conv_act"] = hf.value("conv_act", std::string("tanh"));
  }
  text["hidden_act"] = hf.value("hidden_act", std::string("gelu"));
  text["layer_norm_eps"] = hf.value("layer_norm_eps", 1e-7);
  text["pad_token_id"] = hf.value("pad_token_id", 0);
  io::Json out = io::Json::object();
  out["library_name"] = "zeromodels";
  out["zeromodels_version"] = nullptr;
  out["model_module"] = "zeromodels.models." + z.family;
  out["model_class"] = z.name;
  out["variant"] = variant;
  out["weights"] = "model.weights.h5";
  out["schema_version"] = 2;
  out["model_type"] = z.family;
  out["text_config"] = text;
  return out;
}

}  // namespace

ConversionSummary write_zeromodels_directory(fs::path const& from, fs::path const& out) {
  std::string const config_text = model_config_json(from);
  std::string const source = (from / "config.json").string();
  ModelConfig const config = parse_model_config(config_text, source);
  io::Json const hf = io::parse_json(config_text, source, "model config");
  HeadKind const head = head_kind_from_config(config);
  require_representable(config, head, source);
  ZeroModelsClass const z = zeromodels_class(config, head);

  Checkpoint const checkpoint = Checkpoint::open(from, {.zero_copy = false});
  std::string const base = checkpoint.contains("deberta.embeddings.word_embeddings.weight") ? "deberta." : "";
  io::detail::ZeroModelsSizes const sizes{config.hidden_size,
                                          config.intermediate_size,
                                          config.vocab_size,
                                          config.num_layers,
                                          2 * config.relative_span(),
                                          config.model_type == ModelType::kDeberta ? 0 : config.conv_kernel_size,
                                          config.model_type == ModelType::kDeberta,
                                          config.norm_rel_ebd_layer_norm,
                                          config.c2p,
                                          config.p2c};
  std::string const nested =
      head == HeadKind::kMultipleChoice ? (z.family == "deberta_v3" ? "deberta_v3_model" : "deberta_v2_model") : "";
  std::vector<zeromodels::KerasGroup> const groups =
      zeromodels::keras_groups(sizes, false, z.head_dense, head == HeadKind::kMaskedLM, nested);

  ConversionSummary summary{CheckpointFormat::kHuggingFace, CheckpointFormat::kZeroModels, z.name, 0, 0};
  std::set<std::string> used;
  zeromodels::Hdf5Writer file(out / "model.weights.h5");
  file.group("vars", z.name);  // the model's own (empty) vars group, as Keras writes it
  for (zeromodels::KerasGroup const& g : groups) {
    file.group(g.path, g.layer_name);
    io::detail::RoleTarget const target = *io::detail::role_target(g.role, base);
    for (std::size_t i = 0; i < variable_count(g.role); ++i) {
      std::optional<std::string> name;
      for (std::string const& candidate : hf_candidates(g.role, i, base)) {
        if (!name && checkpoint.contains(candidate)) name = candidate;
      }
      FLASHDEBERTA_REQUIRE(name.has_value(), from.string() << ": ZeroModels' layer '" << g.role << "' needs "
                                                           << hf_candidates(g.role, i, base).front()
                                                           << ", which the checkpoint lacks");
      std::vector<std::int64_t> shape = checkpoint.info(*name).shape;
      std::vector<float> const values = checkpoint.read_f32(*name, shape);
      io::KerasLayout const layout = i == 0 ? target.kernel_layout : io::KerasLayout::kSame;
      std::vector<std::byte> const moved = io::relayout(std::as_bytes(std::span(values)), shape, layout, sizeof(float),
                                                        io::LayoutDirection::kTorchToKeras);
      std::vector<float> keras(values.size());
      std::memcpy(keras.data(), moved.data(), moved.size());
      file.dataset(g.path + "/" + std::to_string(i), shape, keras);
      used.insert(*name);
      ++summary.tensors;
    }
  }
  // HF keeps the tied decoder bias under both names.
  for (char const* alias : {"cls.predictions.bias", "cls.predictions.decoder.bias"}) {
    if (head == HeadKind::kMaskedLM && checkpoint.contains(alias)) used.insert(alias);
  }
  std::vector<std::string> left;
  for (std::string const& name : checkpoint.names()) {
    if (!used.count(name) && !name.ends_with("position_ids")) left.push_back(name);
  }
  if (!left.empty()) {
    std::string names;
    for (std::size_t i = 0; i < left.size() && i < 8; ++i) names += (i ? ", " : "") + left[i];
    FLASHDEBERTA_FAIL(from.string() << ": " << left.size() << " tensor(s) have no place in ZeroModels' " << z.name
                                    << ": " << names << (left.size() > 8 ? ", ..." : ""));
  }
  file.close();
  std::ofstream(out / "zm_config.json") << zm_config(config, hf, z,
                                                     from.filename().empty() ? from.parent_path().filename().string()
                                                                             : from.filename().string())
                                               .dump(2)
                                        << "\n";
  return summary;
}

#else

ConversionSummary write_zeromodels_directory(std::filesystem::path const& from, std::filesystem::path const&) {
  FLASHDEBERTA_FAIL("--from " << from.string()
                              << ": writing ZeroModels' Keras weights needs libhdf5, and this flashdeberta was built "
                                 "without it: install Debian's libhdf5-dev and configure and build again");
}

#endif

}  // namespace flashdeberta::runtime
