// config.json parsing: family defaults, every parsing rule of spec section 1, and every rejection.
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cstdint>
#include <filesystem>
#include <string>

#include <doctest/doctest.h>

#include "flashdeberta/io/config_json.hpp"
#include "io_test_util.hpp"

using flashdeberta::Activation;
using flashdeberta::ModelConfig;
using flashdeberta::ModelType;
using flashdeberta::parse_model_config;
using flashdeberta::test::error_message;

namespace {

ModelConfig parse(std::string const& json) { return parse_model_config(json, "cfg.json"); }

// Every rejection names the source first and carries `needle`.
void check_rejected(std::string const& json, std::string const& needle) {
  CAPTURE(json);
  std::string const message = error_message([&] { parse(json); });
  CAPTURE(message);
  CHECK(message.rfind("cfg.json: ", 0) == 0);
  CHECK(message.find(needle) != std::string::npos);
}

std::string v1(std::string const& extra = "") {
  return R"({"model_type": "deberta")" + (extra.empty() ? "" : ", " + extra) + "}";
}
std::string v2(std::string const& extra = "") {
  return R"({"model_type": "deberta-v2")" + (extra.empty() ? "" : ", " + extra) + "}";
}

// microsoft/deberta-v3-base as published (spec 1.4).
constexpr char const* kV3Base = R"({
  "model_type": "deberta-v2", "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1, "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 512, "relative_attention": true, "position_buckets": 256,
  "norm_rel_ebd": "layer_norm", "share_att_key": true, "pos_att_type": "p2c|c2p", "layer_norm_eps": 1e-7,
  "max_relative_positions": -1, "position_biased_input": false, "num_attention_heads": 12,
  "num_hidden_layers": 12, "type_vocab_size": 0, "vocab_size": 128100})";

}  // namespace

TEST_CASE("v1 defaults (spec 1.2)") {
  ModelConfig const c = parse(v1());
  CHECK(c.model_type == ModelType::kDeberta);
  CHECK(c.vocab_size == 50265);
  CHECK(c.hidden_size == 768);
  CHECK(c.num_layers == 12);
  CHECK(c.num_heads == 12);
  CHECK(c.head_size == 64);
  CHECK(c.intermediate_size == 3072);
  CHECK(c.embedding_size == 768);
  CHECK(c.pooler_hidden_size == 768);
  CHECK(c.max_position_embeddings == 512);
  CHECK(c.max_relative_positions == 512);  // -1 resolved to max_position_embeddings
  CHECK(c.type_vocab_size == 0);
  CHECK(c.layer_norm_eps == 1e-7f);
  CHECK_FALSE(c.relative_attention);
  CHECK(c.position_biased_input);
  CHECK_FALSE(c.c2p);
  CHECK_FALSE(c.p2c);
  CHECK(c.pos_att_type_count == 0);
  CHECK(c.legacy);
  CHECK_FALSE(c.talking_head);
  CHECK(c.hidden_act == Activation::kGelu);
  CHECK(c.pooler_hidden_act == Activation::kGelu);
  CHECK(c.num_labels == 2);
  CHECK(c.id2label.empty());
  CHECK(c.architectures.empty());
  CHECK(c.position_buckets == -1);
}

TEST_CASE("v2 defaults (spec 1.3)") {
  ModelConfig const c = parse(v2());
  CHECK(c.model_type == ModelType::kDebertaV2);
  CHECK(c.vocab_size == 128100);
  CHECK(c.hidden_size == 1536);
  CHECK(c.num_layers == 24);
  CHECK(c.num_heads == 24);
  CHECK(c.head_size == 64);
  CHECK(c.intermediate_size == 6144);
  CHECK(c.embedding_size == 1536);
  CHECK(c.max_relative_positions == 512);
  CHECK(c.position_buckets == -1);
  CHECK(c.conv_kernel_size == 0);
  CHECK(c.conv_groups == 1);
  CHECK(c.conv_act == Activation::kTanh);
  CHECK_FALSE(c.share_att_key);
  CHECK_FALSE(c.norm_rel_ebd_layer_norm);
  CHECK(c.layer_norm_eps == 1e-7f);
}

TEST_CASE("deberta-v3-base config and its attention scale") {
  ModelConfig const c = parse(kV3Base);
  CHECK(c.c2p);
  CHECK(c.p2c);
  CHECK(c.pos_att_type_count == 2);
  CHECK(c.position_buckets == 256);
  CHECK(c.norm_rel_ebd_layer_norm);
  CHECK(c.share_att_key);
  CHECK(c.max_relative_positions == 512);
  CHECK(c.relative_span() == 256);
  CHECK(c.uses_log_buckets());
  CHECK_FALSE(c.position_biased_input);
  CHECK(c.head_size == 64);
  CHECK(c.scale_factor() == 3);
  CHECK(std::bit_cast<std::uint32_t>(c.attention_scale()) == 0x415DB3D7u);  // sqrtf(192)
}

TEST_CASE("pos_att_type: string, list, null, counting") {
  ModelConfig c = parse(v1(R"("pos_att_type": " C2P | p2c ")"));
  CHECK((c.c2p && c.p2c && c.pos_att_type_count == 2));
  c = parse(v1(R"("pos_att_type": ["c2p"])"));
  CHECK((c.c2p && !c.p2c && c.pos_att_type_count == 1));
  CHECK(c.scale_factor() == 2);
  c = parse(v1(R"("pos_att_type": null)"));
  CHECK((!c.c2p && !c.p2c && c.pos_att_type_count == 0));
  c = parse(v1(R"("pos_att_type": "c2p|c2p")"));  // v1 counts list entries, duplicates included (spec 4.1)
  CHECK(c.pos_att_type_count == 2);
  CHECK(c.scale_factor() == 3);
  c = parse(v2(R"("pos_att_type": "c2p|c2p")"));  // v2 counts membership (spec 4.2)
  CHECK(c.scale_factor() == 2);
  check_rejected(v1(R"("pos_att_type": "c2p|p2p")"), "pos_att_type' has entry 'p2p'");
  check_rejected(v1(R"("pos_att_type": ["C2P"])"), "has entry 'C2P'");  // HF uses list entries verbatim
  check_rejected(v1(R"("pos_att_type": "")"), "has entry ''");
  check_rejected(v1(R"("pos_att_type": 3)"), "key 'pos_att_type' must be");
  check_rejected(v1(R"("pos_att_type": [1])"), "key 'pos_att_type[0]' must be a string");
}

TEST_CASE("max_relative_positions, head size, embedding and pooler sizes") {
  CHECK(parse(v1(R"("max_relative_positions": 0, "max_position_embeddings": 1024)")).max_relative_positions == 1024);
  CHECK(parse(v1(R"("max_relative_positions": 128)")).max_relative_positions == 128);
  CHECK(parse(v2(R"("hidden_size": 768, "num_attention_heads": 12, "attention_head_size": 32)")).head_size == 32);
  CHECK(parse(v1(R"("hidden_size": 768, "num_attention_heads": 12, "attention_head_size": 32)")).head_size == 64);
  CHECK(parse(v2(R"("hidden_size": 770, "num_attention_heads": 12, "attention_head_size": 64)")).head_size == 64);
  check_rejected(v2(R"("hidden_size": 770, "num_attention_heads": 12)"), "hidden_size 770 is not a multiple");
  check_rejected(v2(R"("attention_head_size": 0)"), "key 'attention_head_size' is 0");
  ModelConfig const c = parse(v2(R"("hidden_size": 768, "num_attention_heads": 12, "embedding_size": 128)"));
  CHECK(c.embedding_size == 128);
  CHECK(c.pooler_hidden_size == 768);
  CHECK(parse(v2(R"("pooler_hidden_size": 256)")).pooler_hidden_size == 256);
}

TEST_CASE("norm_rel_ebd") {
  CHECK(parse(v2(R"("norm_rel_ebd": "layer_norm")")).norm_rel_ebd_layer_norm);
  CHECK(parse(v2(R"("norm_rel_ebd": "None | Layer_Norm")")).norm_rel_ebd_layer_norm);
  CHECK_FALSE(parse(v2(R"("norm_rel_ebd": "none")")).norm_rel_ebd_layer_norm);
  check_rejected(v2(R"("norm_rel_ebd": "batch_norm")"), "norm_rel_ebd' has entry 'batch_norm'");
}

TEST_CASE("activations by name") {
  // Every name of the library's table (HF's ACT2FN, the subset implemented) through each key that takes one.
  for (auto const& entry : flashdeberta::detail::kActivationNames) {
    std::string const name(entry.name);
    Activation const act = entry.activation;
    CAPTURE(name);
    std::string const quoted = "\"" + name + "\"";
    ModelConfig const c =
        parse(v2("\"hidden_act\": " + quoted + ", \"pooler_hidden_act\": " + quoted + ", \"conv_act\": " + quoted));
    CHECK(c.hidden_act == act);
    CHECK(c.pooler_hidden_act == act);
    CHECK(c.conv_act == act);
  }
  // What ACT2FN means by the names that are not the function's own.
  CHECK(parse(v2(R"("hidden_act": "gelu_new")")).hidden_act == Activation::kGeluTanh);
  CHECK(parse(v2(R"("hidden_act": "gelu_pytorch_tanh")")).hidden_act == Activation::kGeluTanh);
  CHECK(parse(v2(R"("hidden_act": "swish")")).hidden_act == Activation::kSilu);
  CHECK(parse(v2(R"("hidden_act": "linear")")).hidden_act == Activation::kIdentity);
  check_rejected(v2(R"("hidden_act": "gelu_10")"), "key 'hidden_act' names unknown activation 'gelu_10'");
  check_rejected(v2(R"("conv_act": "GELU")"), "key 'conv_act' names unknown activation 'GELU'");
  check_rejected(v1(R"("pooler_hidden_act": 1)"), "key 'pooler_hidden_act' must be a string");
}

TEST_CASE("labels, architectures, legacy, talking_head") {
  ModelConfig c = parse(v2(R"("id2label": {"0": "NEG", "1": "NEU", "2": "POS"}, "num_labels": 7)"));
  CHECK(c.num_labels == 3);  // id2label wins, as in HF
  CHECK(c.id2label.at(2) == "POS");
  CHECK(parse(v2(R"("num_labels": 5)")).num_labels == 5);
  CHECK(parse(v2(R"("id2label": null)")).num_labels == 2);
  check_rejected(v2(R"("id2label": {"zero": "NEG"})"), "has key 'zero', which is not an integer");
  check_rejected(v2(R"("id2label": {"1x": "NEG"})"), "has key '1x', which is not an integer");
  check_rejected(v2(R"("id2label": {"1": "A", "01": "B"})"), "label id 1 twice");
  check_rejected(v2(R"("id2label": {"0": 3})"), "key 'id2label[\"0\"]' must be a string");
  check_rejected(v2(R"("id2label": {})"), "num_labels is 0");
  check_rejected(v2(R"("num_labels": 0)"), "num_labels is 0");

  c = parse(v1(R"("architectures": ["DebertaForMaskedLM"], "legacy": false, "talking_head": true)"));
  REQUIRE(c.architectures.size() == 1);
  CHECK(c.architectures[0] == "DebertaForMaskedLM");
  CHECK_FALSE(c.legacy);
  CHECK(c.talking_head);
  check_rejected(v1(R"("architectures": "DebertaModel")"), "key 'architectures' must be a list of strings");
}

TEST_CASE("model_type and JSON-level rejections") {
  check_rejected(R"({"hidden_size": 768})", "key 'model_type' is missing; accepted values are \"deberta\" and");
  check_rejected(R"({"model_type": "bert"})",
                 "key 'model_type' is \"bert\"; accepted values are \"deberta\" and \"deberta-v2\"");
  check_rejected(R"({"model_type": 2})", "key 'model_type' must be a string, found integer 2");
  check_rejected("{\"model_type\": \"deberta\",", "config is not valid JSON");
  check_rejected("[1, 2]", "the top-level value must be an object, found array [1,2]");
  check_rejected(v1(R"("hidden_size": 768, "hidden_size": 1024)"), "config has duplicate key 'hidden_size'");
  check_rejected(v1(R"("hidden_size": "768")"), "key 'hidden_size' must be an integer, found string \"768\"");
  check_rejected(v1(R"("hidden_size": 768.0)"), "key 'hidden_size' must be an integer, found number 768.0");
  check_rejected(v1(R"("vocab_size": 18446744073709551615)"), "an integer that fits in int64");
  check_rejected(v1(R"("relative_attention": "true")"), "key 'relative_attention' must be a boolean");
  check_rejected(v1(R"("layer_norm_eps": "1e-7")"), "key 'layer_norm_eps' must be a number");
}

TEST_CASE("size rejections") {
  check_rejected(v1(R"("vocab_size": 0)"), "key 'vocab_size' is 0");
  check_rejected(v1(R"("hidden_size": -1)"), "key 'hidden_size' is -1");
  check_rejected(v1(R"("num_hidden_layers": 0)"), "key 'num_hidden_layers' is 0");
  check_rejected(v1(R"("num_attention_heads": 0)"), "key 'num_attention_heads' is 0");
  check_rejected(v1(R"("intermediate_size": 0)"), "key 'intermediate_size' is 0");
  check_rejected(v1(R"("embedding_size": 0)"), "key 'embedding_size' is 0");
  check_rejected(v1(R"("pooler_hidden_size": -3)"), "key 'pooler_hidden_size' is -3");
  check_rejected(v1(R"("type_vocab_size": -1)"), "key 'type_vocab_size' is -1");
  check_rejected(v1(R"("hidden_size": 4294967296)"), "key 'hidden_size' is 4294967296; it must be in [1, 2147483647]");
  check_rejected(v1(R"("max_position_embeddings": 0)"), "key 'max_position_embeddings' is 0");
  // Without absolute positions or relative attention the table size is unused.
  CHECK(parse(v1(R"("max_position_embeddings": 0, "position_biased_input": false)")).max_position_embeddings == 0);
  check_rejected(v1(R"("max_position_embeddings": 0, "position_biased_input": false, "relative_attention": true)"),
                 "relative_attention needs max_relative_positions");
  check_rejected(v1(R"("layer_norm_eps": 0)"), "key 'layer_norm_eps' is 0");
  check_rejected(v1(R"("layer_norm_eps": -1e-5)"), "key 'layer_norm_eps' is -1e-05");
  check_rejected(v1(R"("layer_norm_eps": 1e-60)"),
                 "key 'layer_norm_eps' is 1e-60; it must be finite and > 0 in float32");
  check_rejected(v1(R"("layer_norm_eps": 1e300)"), "key 'layer_norm_eps' is 1e+300");
}

TEST_CASE("position buckets must make the log-bucket function well defined (spec 3.2)") {
  std::string const rel = R"("relative_attention": true, )";
  CHECK(parse(v2(rel + R"("position_buckets": 256, "max_relative_positions": 130)")).uses_log_buckets());
  CHECK(parse(v2(rel + R"("position_buckets": 2, "max_relative_positions": 3)")).uses_log_buckets());
  CHECK_FALSE(parse(v2(rel + R"("position_buckets": 0)")).uses_log_buckets());
  check_rejected(v2(rel + R"("position_buckets": 1)"), "key 'position_buckets' is 1; log bucketing needs at least 2");
  check_rejected(v2(rel + R"("position_buckets": 256, "max_relative_positions": 129)"),
                 "needs max_relative_positions - 1 > position_buckets / 2 (here 128)");
  check_rejected(v2(rel + R"("position_buckets": 256, "max_relative_positions": 100)"), "max_relative_positions 100");
  // A ratio above 1 that rounds to 1.0f in float32 would still divide by log(1) = 0.
  check_rejected(v2(rel + R"("position_buckets": 2000000000, "max_relative_positions": 1000000002)"),
                 "log bucketing needs");
  // Unused when relative attention is off.
  CHECK(parse(v2(R"("position_buckets": 256, "max_relative_positions": 10)")).position_buckets == 256);
}

TEST_CASE("conv layer settings") {
  ModelConfig const c = parse(v2(R"("hidden_size": 768, "num_attention_heads": 12, "conv_kernel_size": 3,
                                    "conv_groups": 4, "conv_act": "gelu")"));
  CHECK(c.conv_kernel_size == 3);
  CHECK(c.conv_groups == 4);
  CHECK(c.conv_act == Activation::kGelu);
  check_rejected(v2(R"("conv_kernel_size": -1)"), "key 'conv_kernel_size' is -1");
  check_rejected(v2(R"("conv_kernel_size": 2)"), "key 'conv_kernel_size' is 2; an even kernel changes the sequence");
  check_rejected(v2(R"("hidden_size": 768, "num_attention_heads": 12, "conv_kernel_size": 3, "conv_groups": 5)"),
                 "key 'conv_groups' is 5; it must be >= 1 and divide hidden_size 768");
  check_rejected(v2(R"("conv_kernel_size": 3, "conv_groups": 0)"), "key 'conv_groups' is 0");
}

TEST_CASE("load_model_config reads a directory or the file") {
  flashdeberta::test::TempDir dir;
  flashdeberta::test::write_file(dir / "config.json", kV3Base);
  CHECK(flashdeberta::load_model_config(dir.path()).hidden_size == 768);
  CHECK(flashdeberta::load_model_config(dir / "config.json").num_layers == 12);
  std::string const missing = error_message([&] { flashdeberta::load_model_config(dir / "nope"); });
  CHECK(missing.find((dir / "nope").string()) == 0);
  flashdeberta::test::write_file(dir / "bad.json", R"({"model_type": "deberta", "vocab_size": 0})");
  std::string const bad = error_message([&] { flashdeberta::load_model_config(dir / "bad.json"); });
  CHECK(bad.find((dir / "bad.json").string() + ": key 'vocab_size' is 0") == 0);
}

TEST_CASE("config.json: a NUL byte or anything but whitespace after the object is refused") {
  using namespace std::string_literals;
  // Before, nlohmann stopped at the NUL: the bad hidden_size after it was never read.
  std::string const hidden = v1() + "\0, \"hidden_size\": -1}"s;
  CHECK(error_message([&] { parse(hidden); }) ==
        "cfg.json: config has a NUL byte at offset " + std::to_string(v1().size()) +
            "; JSON text cannot contain one (the file is truncated, padded or not JSON)");
  check_rejected(v1() + "\0garbage"s, "config has a NUL byte at offset 25");
  check_rejected(v1() + " garbage", "config is not valid JSON");
  check_rejected(v1() + " {}", "expected end of input");
  check_rejected("\xEF\xBB\xBF" + v1(), "config starts with a UTF-8 byte order mark");
  CHECK(parse(v1() + "\n").model_type == ModelType::kDeberta);  // a final newline is whitespace

  // The same through the file reader, which hands the whole file to the parser.
  flashdeberta::test::TempDir dir;
  flashdeberta::test::write_file(dir / "config.json", v1() + "\0garbage"s);
  CHECK(error_message([&] { flashdeberta::load_model_config(dir.path()); }) ==
        (dir / "config.json").string() +
            ": config has a NUL byte at offset 25; JSON text cannot contain one (the file is truncated, padded or not "
            "JSON)");
  flashdeberta::test::write_file(dir / "config.json", v1() + "garbage");
  CHECK(error_message([&] {
          flashdeberta::load_model_config(dir.path());
        }).rfind((dir / "config.json").string() + ": config is not valid JSON (", 0) == 0);
}

TEST_CASE("problem_type: HF's three values or null, anything else is refused naming them") {
  for (char const* type : {"regression", "single_label_classification", "multi_label_classification"}) {
    CAPTURE(type);
    CHECK(parse(v2(std::string(R"("problem_type": ")") + type + "\"")).model_type == ModelType::kDebertaV2);
  }
  CHECK(parse(v2(R"("problem_type": null)")).model_type == ModelType::kDebertaV2);
  check_rejected(v2(R"("problem_type": "zzz")"),
                 "key 'problem_type' must be \"regression\", \"single_label_classification\" or "
                 "\"multi_label_classification\" (or null), found string \"zzz\"");
  check_rejected(v2(R"("problem_type": 3)"), "key 'problem_type' must be a string, found integer 3");
}

TEST_CASE("config.json that is not a regular file is reported as what it is") {
  flashdeberta::test::TempDir dir;
  auto const message = [&] { return error_message([&] { flashdeberta::load_model_config(dir.path()); }); };
  std::string const file = (dir / "config.json").string();
  CHECK(message() == file + ": cannot read the model config (no such file)");
  REQUIRE(::mkfifo((dir / "config.json").c_str(), 0600) == 0);
  ::alarm(60);  // a reader that blocks on the FIFO fails the test instead of hanging it
  CHECK(message() == file + ": cannot read the model config: it is a FIFO, not a regular file");
  ::alarm(0);
  std::filesystem::remove(dir / "config.json");
  std::filesystem::create_symlink("config.json", dir / "config.json");
  CHECK(message() == file + ": cannot read the model config: it is a symbolic link loop");
  std::filesystem::remove(dir / "config.json");
  std::filesystem::create_directory(dir / "config.json");
  CHECK(message() == file + ": cannot read the model config: it is a directory, not a regular file");
  std::filesystem::remove(dir / "config.json");
  std::filesystem::create_symlink("/dev/urandom", dir / "config.json");
  CHECK(message() == file + ": cannot read the model config: it is a character device, not a regular file");
}
