// ZeroModels' checkpoint directories (the Keras 3 port of DeBERTa, IMvision12/ZeroModels, earlier
// IMvision12/KerasFormers): which files make one, and its config translated into the config.json HF would
// write for the same model, so that one parser (io/config_json.hpp) validates both formats.
//
// A directory holds `zm_config.json` (KerasFormers: `kf_config.json`) beside `model.weights.h5` or a sharded
// `model.weights.json`. The config is nested (schema 2: `model_type` + `text_config`) or flat (older: the
// hyperparameters at the top level beside the loader keys). Line references below are to KerasFormers
// e61c8f8 (kerasformers/models/deberta*/), whose DeBERTa code ZeroModels carries with the names changed.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/regular_file.hpp"

namespace flashdeberta::io {

enum class ZeroModelsFamily { kV1, kV2, kV3 };

struct ZeroModelsDirectory {
  std::filesystem::path config_file;   // zm_config.json or kf_config.json
  std::filesystem::path weights_file;  // model.weights.h5, or the model.weights.json index
};

// The directory's ZeroModels files, or nullopt when it has no zm_config.json / kf_config.json. A config.json
// beside them makes it a Hugging Face directory (HF's files win, as the caller checks first).
inline std::optional<ZeroModelsDirectory> find_zeromodels_directory(std::filesystem::path const& dir) {
  for (char const* name : {"zm_config.json", "kf_config.json"}) {
    if (file_status(dir / name).kind == FileKind::kMissing) continue;
    ZeroModelsDirectory found{dir / name, {}};
    // The config's `weights` names the file; without it, ZeroModels' defaults in the order its loader tries.
    Json const config = parse_json(read_regular_file(found.config_file, "ZeroModels config"),
                                   found.config_file.string(), "ZeroModels config");
    JsonFields const fields(config, found.config_file.string());
    if (fields.has("weights")) {
      std::string const weights = fields.get_string("weights", "");
      std::filesystem::path const file(weights);
      FLASHDEBERTA_REQUIRE(!weights.empty() && weights.find('\0') == std::string::npos && file == file.filename() &&
                               weights != "." && weights != "..",
                           found.config_file.string()
                               << ": key 'weights' is '" << weights << "', which is not a file name in the directory");
      found.weights_file = dir / file;
    } else {
      found.weights_file = file_status(dir / "model.weights.h5").kind != FileKind::kMissing
                               ? dir / "model.weights.h5"
                               : dir / "model.weights.json";
    }
    return found;
  }
  return std::nullopt;
}

namespace detail {

// The loader keys of kf_config.py's KF_METADATA_KEYS (zm_ in ZeroModels); everything else of a flat config
// is a hyperparameter.
inline constexpr std::array<std::string_view, 14> kZeroModelsLoaderKeys{"library_name",
                                                                        "kerasformers_version",
                                                                        "zeromodels_version",
                                                                        "model_module",
                                                                        "model_class",
                                                                        "preprocessor_module",
                                                                        "preprocessor_class",
                                                                        "variant",
                                                                        "weights",
                                                                        "schema_version",
                                                                        "weight_dtype",
                                                                        "weight_dtype_overrides",
                                                                        "generate_args",
                                                                        "model_type"};

inline ZeroModelsFamily zeromodels_family(JsonFields const& top) {
  std::string const type = top.get_string("model_type", "");
  std::string const cls = top.get_string("model_class", "");
  std::string const module = top.get_string("model_module", "");
  if (type == "deberta_v3" || (type.empty() && (cls.starts_with("DebertaV3") || module.ends_with("deberta_v3"))))
    return ZeroModelsFamily::kV3;
  if (type == "deberta_v2" || (type.empty() && (cls.starts_with("DebertaV2") || module.ends_with("deberta_v2"))))
    return ZeroModelsFamily::kV2;
  if (type == "deberta" || (type.empty() && (cls.starts_with("Deberta") || module.ends_with("deberta"))))
    return ZeroModelsFamily::kV1;
  FLASHDEBERTA_FAIL(top.source() << ": model_type '" << type << "' (model_class '" << cls
                                 << "') is not a ZeroModels DeBERTa; accepted: deberta, deberta_v2, deberta_v3");
}

}  // namespace detail

// The ZeroModels config as HF's config.json would hold it (architectures and labels are the weights' to
// say: io/zeromodels_mapping.hpp adds them), its family and its model class.
struct ZeroModelsConfig {
  ZeroModelsFamily family = ZeroModelsFamily::kV3;
  std::string model_class;
  std::string source;
  Json hf_config;
};

inline ZeroModelsConfig read_zeromodels_config(std::filesystem::path const& file) {
  std::string const source = file.string();
  Json const top = parse_json(read_regular_file(file, "ZeroModels config"), source, "ZeroModels config");
  JsonFields const top_fields(top, source);
  ZeroModelsConfig out;
  out.source = source;
  out.family = detail::zeromodels_family(top_fields);
  out.model_class = top_fields.get_string("model_class", "");
  FLASHDEBERTA_REQUIRE(!top_fields.has("quantization_config"),
                       source << ": key 'quantization_config': quantized ZeroModels weights are not supported");

  // Schema 2 nests the hyperparameters; a flat config keeps them beside the loader keys.
  Json text = Json::object();
  if (Json const* nested = top_fields.find("text_config")) {
    if (!nested->is_object()) fail_json_type(source, "key 'text_config'", "an object", *nested);
    text = *nested;
  } else {
    for (auto const& item : top.items()) {
      bool const loader = std::find(detail::kZeroModelsLoaderKeys.begin(), detail::kZeroModelsLoaderKeys.end(),
                                    item.key()) != detail::kZeroModelsLoaderKeys.end();
      if (!loader) text[item.key()] = item.value();
    }
  }
  JsonFields const f(text, source);
  bool const v1 = out.family == ZeroModelsFamily::kV1;
  bool const v3 = out.family == ZeroModelsFamily::kV3;

  // Defaults: deberta_config.py (v1), deberta_v2_config.py, deberta_v3_config.py.
  std::int64_t const hidden = f.get_int("embed_dim", v1 || v3 ? 768 : 1536);
  std::int64_t const heads = f.get_int("num_heads", v1 || v3 ? 12 : 24);
  Json& hf = out.hf_config;
  hf = Json::object();
  hf["model_type"] = v1 ? "deberta" : "deberta-v2";
  hf["vocab_size"] = f.get_int("vocab_size", v1 ? 50265 : 128100);
  hf["hidden_size"] = hidden;
  hf["num_hidden_layers"] = f.get_int("num_layers", v1 || v3 ? 12 : 24);
  hf["num_attention_heads"] = heads;
  hf["intermediate_size"] = f.get_int("mlp_dim", v1 || v3 ? 3072 : 6144);
  hf["max_position_embeddings"] = f.get_int("max_position_embeddings", 512);
  hf["max_relative_positions"] = f.get_int("max_relative_positions", 512);
  hf["layer_norm_eps"] = f.get_number("layer_norm_eps", 1e-7);
  hf["hidden_act"] = f.get_string("hidden_act", "gelu");
  hf["pad_token_id"] = f.get_int("pad_token_id", 0);
  if (Json const* pos = f.find("pos_att_type")) {
    hf["pos_att_type"] = *pos;
  } else {
    hf["pos_att_type"] = v1 ? Json::array({"c2p", "p2c"}) : Json::array({"p2c", "c2p"});
  }
  // Every ZeroModels DeBERTa is relative-attention only: its embeddings have no absolute-position or token-type
  // table (deberta_layers.py:44-90, deberta_v2_layers.py:61-108: word embeddings, LayerNorm, mask).
  hf["relative_attention"] = true;
  hf["position_biased_input"] = false;
  hf["type_vocab_size"] = 0;
  // The heads' pooler applies gelu whatever hidden_act says (deberta_v3_model.py:382, deberta_v2_model.py:537,
  // deberta_model.py:479).
  hf["pooler_hidden_size"] = hidden;
  hf["pooler_hidden_act"] = "gelu";
  hf["pooler_dropout"] = 0;
  if (!v1) {
    hf["position_buckets"] = f.get_int("position_buckets", 256);
    // ZeroModels always buckets relative positions logarithmically (deberta_v2_model.py:122), which HF does for
    // position_buckets > 0 only.
    FLASHDEBERTA_REQUIRE(
        hf["position_buckets"].get<std::int64_t>() > 0,
        source << ": position_buckets is " << hf["position_buckets"].get<std::int64_t>()
               << "; ZeroModels' DeBERTa-v2/v3 always uses log buckets, which need position_buckets > 0");
    // The config has no share_att_key: the model's default True holds (deberta_v2_model.py:261,
    // deberta_v3_model.py:102); a model built with False has pos_key_proj/pos_query_proj, which the weights show.
    hf["share_att_key"] = f.get_bool("share_att_key", true);
    hf["norm_rel_ebd"] = f.get_bool("norm_rel_ebd", true) ? "layer_norm" : "none";
    hf["conv_kernel_size"] = f.get_int("conv_kernel_size", v3 ? 0 : 3);
    hf["conv_act"] = f.get_string("conv_act", "gelu");
    hf["conv_groups"] = 1;  // Conv1D without groups (deberta_v2_layers.py:140)
  }
  return out;
}

}  // namespace flashdeberta::io
