// gliner_config.json -> GlinerConfig, following docs/gliner.md sections 1 and 2 (GLiNER 0.2.27's
// BaseGLiNERConfig defaults and GLiNER._get_gliner_class's dispatch).
//
// Only the uni-encoder span model and the uni-encoder token-level model over a DeBERTa-v2/v3 backbone are
// supported. Everything else GLiNER can load (relation extraction, label decoders, bi-encoders, other
// backbones, other word splitters, precomputed prompts) is refused with a message that starts with the file
// name and names the field and its value. Fields without effect in GLiNER 0.2.27 (dropout, loss settings,
// subtoken_pooling, post_fusion_schema, unknown training keys) are accepted and ignored, as GLiNER does.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/core/model_config.hpp"
#include "flashdeberta/io/config_json.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/regular_file.hpp"

namespace flashdeberta {

// docs/gliner.md section 4.4, plus token_level (section 5).
enum class GlinerSpanMode {
  kMarkerV0,
  kMarker,
  kMarkerV1,
  kQuery,
  kMlp,
  kCat,
  kConvConv,
  kConvMax,
  kConvMean,
  kConvSum,
  kConvShare,
  kTokenLevel,
};

struct GlinerSpanModeName {
  std::string_view name;
  GlinerSpanMode mode;
};

inline constexpr std::array<GlinerSpanModeName, 12> kGlinerSpanModes{{
    {"markerV0", GlinerSpanMode::kMarkerV0},
    {"marker", GlinerSpanMode::kMarker},
    {"markerV1", GlinerSpanMode::kMarkerV1},
    {"query", GlinerSpanMode::kQuery},
    {"mlp", GlinerSpanMode::kMlp},
    {"cat", GlinerSpanMode::kCat},
    {"conv_conv", GlinerSpanMode::kConvConv},
    {"conv_max", GlinerSpanMode::kConvMax},
    {"conv_mean", GlinerSpanMode::kConvMean},
    {"conv_sum", GlinerSpanMode::kConvSum},
    {"conv_share", GlinerSpanMode::kConvShare},
    {"token_level", GlinerSpanMode::kTokenLevel},
}};

inline std::string_view span_mode_name(GlinerSpanMode mode) {
  for (auto const& entry : kGlinerSpanModes) {
    if (entry.mode == mode) return entry.name;
  }
  return "?";
}

struct GlinerConfig {
  GlinerSpanMode span_mode = GlinerSpanMode::kMarkerV0;
  std::int64_t max_width = 12;          // K, longest span in words (span models)
  std::int64_t hidden_size = 512;       // D
  std::int64_t num_rnn_layers = 1;      // BiLSTM layers over the words; 0: none
  std::int64_t max_len = 384;           // words kept per text
  bool embed_ent_token = true;          // label vector at <<ENT>> (true) or at the token after it
  bool fuse_layers = false;             // LayersFuser over every encoder layer's output
  std::int64_t class_token_index = -1;  // id of ent_token; -1: len(tokenizer) - 2 after adding the markers
  std::int64_t vocab_size = -1;         // embedding rows after GLiNER's resize; -1: len(tokenizer)
  std::string ent_token = "<<ENT>>";
  std::string sep_token = "<<SEP>>";
  ModelConfig encoder;  // encoder_config, as config.json of the backbone

  bool token_level() const { return span_mode == GlinerSpanMode::kTokenLevel; }
};

namespace detail {

// True when `key` is present and not null (GLiNER's dispatch tests `is not None`).
inline bool gliner_field_set(io::JsonFields const& f, std::string_view key) {
  io::Json const* v = f.find(key);
  return v != nullptr && !v->is_null();
}

inline void refuse_gliner_kind(io::JsonFields const& f, std::string_view key, std::string_view what,
                               std::string_view gliner_class) {
  if (!gliner_field_set(f, key)) return;
  FLASHDEBERTA_FAIL(f.source() << ": key '" << key << "' is " << io::json_describe(*f.find(key)) << ": a " << what
                               << " model (GLiNER's " << gliner_class
                               << "), which is not supported; only uni-encoder span and token-level models are");
}

inline std::int64_t gliner_size(io::JsonFields const& f, std::string_view key, std::int64_t fallback,
                                std::int64_t min) {
  std::int64_t const value = f.get_int(key, fallback);
  detail::require_size(f.source(), key, value, min);
  return value;
}

}  // namespace detail

// `source_name` (normally the file path) starts every error message.
inline GlinerConfig parse_gliner_config(std::string_view json_text, std::string const& source_name) {
  io::Json const root = io::parse_json(json_text, source_name, "GLiNER config");
  io::JsonFields const f(root, source_name);
  std::string const& src = f.source();
  GlinerConfig c;

  std::string const span_mode = f.get_string("span_mode", "markerV0");
  bool const token_level = span_mode == "token_level";
  // GLiNER._get_gliner_class's order: relations_layer, labels_decoder, labels_encoder.
  detail::refuse_gliner_kind(f, "relations_layer", "relation extraction",
                             token_level ? "UniEncoderTokenRelexGLiNER" : "UniEncoderSpanRelexGLiNER");
  detail::refuse_gliner_kind(f, "labels_decoder", "decoder (generative label decoder)",
                             token_level ? "UniEncoderTokenDecoderGLiNER" : "UniEncoderSpanDecoderGLiNER");
  detail::refuse_gliner_kind(f, "labels_encoder", "bi-encoder",
                             token_level ? "BiEncoderTokenGLiNER" : "BiEncoderSpanGLiNER");

  bool found = false;
  for (auto const& entry : kGlinerSpanModes) {
    if (entry.name == span_mode) {
      c.span_mode = entry.mode;
      found = true;
    }
  }
  if (!found) {
    std::ostringstream accepted;
    for (std::size_t i = 0; i < kGlinerSpanModes.size(); ++i) accepted << (i ? ", " : "") << kGlinerSpanModes[i].name;
    FLASHDEBERTA_FAIL(src << ": key 'span_mode' is \"" << span_mode << "\"; accepted values are " << accepted.str());
  }

  std::string const splitter = f.get_string("words_splitter_type", "whitespace");
  FLASHDEBERTA_REQUIRE(splitter == "whitespace",
                       src << ": key 'words_splitter_type' is \"" << splitter
                           << "\"; only \"whitespace\" (GLiNER's regex splitter) is supported (the others need "
                              "spacy, stanza, jieba and other libraries)");
  FLASHDEBERTA_REQUIRE(!(token_level && f.get_bool("represent_spans", false)),
                       src << ": key 'represent_spans' is true on a token_level model: its second span head "
                              "(span_rep_layer.*) is not supported");
  if (detail::gliner_field_set(f, "precomputed_prompts_mode")) {
    FLASHDEBERTA_REQUIRE(!f.get_bool("precomputed_prompts_mode", false),
                         src << ": key 'precomputed_prompts_mode' is true: label embeddings stored as the "
                                "parameter precomputed_prompts are not supported");
  }

  c.max_width = detail::gliner_size(f, "max_width", 12, 1);
  c.hidden_size = detail::gliner_size(f, "hidden_size", 512, 1);
  c.num_rnn_layers = detail::gliner_size(f, "num_rnn_layers", 1, 0);
  c.max_len = detail::gliner_size(f, "max_len", 384, 1);
  c.embed_ent_token = f.get_bool("embed_ent_token", true);
  c.fuse_layers = f.get_bool("fuse_layers", false);
  c.class_token_index = f.get_int("class_token_index", -1);
  c.vocab_size = f.get_int("vocab_size", -1);
  c.ent_token = f.get_string("ent_token", "<<ENT>>");
  c.sep_token = f.get_string("sep_token", "<<SEP>>");
  FLASHDEBERTA_REQUIRE(c.num_rnn_layers == 0 || c.hidden_size % 2 == 0,
                       src << ": key 'hidden_size' is " << c.hidden_size
                           << "; the BiLSTM (num_rnn_layers > 0) needs an even hidden size");

  io::Json const* encoder = f.find("encoder_config");
  FLASHDEBERTA_REQUIRE(encoder != nullptr && !encoder->is_null(),
                       src << ": key 'encoder_config' is " << (encoder == nullptr ? "missing" : "null")
                           << "; GLiNER would fetch the backbone's config of model_name from the hub (configs "
                              "saved by GLiNER 0.1.x lack it): add the backbone's config.json as encoder_config");
  if (!encoder->is_object()) io::fail_json_type(src, "key 'encoder_config'", "an object", *encoder);
  io::Json const* backbone_type = encoder->contains("model_type") ? &(*encoder)["model_type"] : nullptr;
  std::string const type_name =
      backbone_type != nullptr && backbone_type->is_string()
          ? backbone_type->get<std::string>()
          : (backbone_type == nullptr ? std::string("missing") : io::json_describe(*backbone_type));
  FLASHDEBERTA_REQUIRE(type_name == "deberta-v2", src << ": key 'encoder_config.model_type' is " << type_name
                                                      << "; only DeBERTa-v2/v3 backbones (\"deberta-v2\") are "
                                                         "supported (GLiNER also runs BERT, ModernBERT, T5, ...)");
  c.encoder = parse_model_config(encoder->dump(), src + " (encoder_config)");
  return c;
}

// `path` is a GLiNER directory holding gliner_config.json, or the JSON file itself.
inline GlinerConfig load_gliner_config(std::filesystem::path const& path) {
  std::error_code ec;
  std::filesystem::path const file = std::filesystem::is_directory(path, ec) ? path / "gliner_config.json" : path;
  return parse_gliner_config(io::read_regular_file(file, "GLiNER config"), file.string());
}

}  // namespace flashdeberta
