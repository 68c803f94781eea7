// GLiNER against GLiNER 0.2.27's own outputs, written once for any policy: every case under
// tests/fixtures/gliner (make_gliner_fixtures.py) and every input of each: our input ids and words mask equal
// GLiNER's, our logits are within kGlinerLogitTolerance of its float32 logits where expected.json records
// them, and our entities (spans, labels, text) equal GLiNER's with scores within kGlinerScoreTolerance.
// Batches of texts are compared with each text's batch-of-one result (entities_single), which is what our
// packed batches reproduce (docs/gliner.md section 7). Then the refusals: every refuse/ config, a missing
// tensor.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "../scratch_dir.hpp"
#include "flashdeberta/flashdeberta.hpp"
#include "flashdeberta/gliner/gliner.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/safetensors_writer.hpp"

namespace flashdeberta::testing {

inline constexpr double kGlinerScoreTolerance = 1e-4;
inline constexpr double kGlinerLogitTolerance = 2e-4;

inline std::filesystem::path gliner_fixture_dir() { return std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "gliner"; }

inline io::Json read_json_file(std::filesystem::path const& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return io::parse_json(text.str(), path.string(), "fixture");
}

inline std::vector<std::filesystem::path> gliner_cases() {
  std::vector<std::filesystem::path> dirs;
  for (auto const& entry : std::filesystem::directory_iterator(gliner_fixture_dir())) {
    if (entry.is_directory() && std::filesystem::exists(entry.path() / "expected.json")) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

inline std::vector<std::string> string_list(io::Json const& j) {
  std::vector<std::string> out;
  for (auto const& v : j) out.push_back(v.get<std::string>());
  return out;
}

inline void check_entities(std::vector<GlinerEntity> const& ours, io::Json const& theirs, std::string const& where) {
  INFO(where);
  REQUIRE(theirs.is_array());
  std::ostringstream os;
  for (auto const& e : ours) os << "(" << e.start << "," << e.end << "," << e.label << "," << e.score << ") ";
  INFO("ours: " << os.str() << " GLiNER: " << theirs.dump());
  REQUIRE(ours.size() == theirs.size());
  for (std::size_t i = 0; i < ours.size(); ++i) {
    io::Json const& t = theirs[i];
    CHECK(ours[i].start == t["start"].get<std::int64_t>());
    CHECK(ours[i].end == t["end"].get<std::int64_t>());
    CHECK(ours[i].text == t["text"].get<std::string>());
    CHECK(ours[i].label == t["label"].get<std::string>());
    CHECK(std::abs(ours[i].score - t["score"].get<double>()) <= kGlinerScoreTolerance);
  }
}

// Our logits of one text against expected.json's (values [W][K][C] or [W][C][3], maybe first_rows only).
template <ExecutionPolicy P>
double logit_error(GLiNER<P> const& model, GlinerLogits const& ours, io::Json const& expected) {
  io::Json const& values = expected["values"];
  std::int64_t const n = ours.words;
  std::int64_t const c = ours.labels;
  auto const rows = static_cast<std::int64_t>(values.size());
  double worst = 0.0;
  if (model.config().token_level()) {
    for (std::int64_t w = 0; w < std::min(n, rows); ++w)
      for (std::int64_t l = 0; l < c; ++l)
        for (int o = 0; o < 3; ++o)
          worst = std::max(worst, std::abs(values[w][l][o].get<double>() - ours.values[(w * c + l) * 3 + o]));
    return worst;
  }
  std::int64_t const kk = model.config().max_width;
  for (std::int64_t s = 0; s < std::min(n, rows); ++s)
    for (std::int64_t k = 0; k < kk && s + k < n; ++k)
      for (std::int64_t l = 0; l < c; ++l)
        worst = std::max(worst, std::abs(values[s][k][l].get<double>() - ours.values[(s * kk + k) * c + l]));
  return worst;
}

template <ExecutionPolicy P>
void run_gliner_case(P const& policy, std::filesystem::path const& dir) {
  INFO("case " << dir.filename().string());
  io::Json const expected = read_json_file(dir / "expected.json");
  GLiNER<P> const model = GLiNER<P>::load(policy, dir);
  CHECK(model.config().class_token_index == expected["meta"]["class_token_index"].get<std::int64_t>());
  for (io::Json const& rec : expected["inputs"]) {
    std::string const name = rec["name"].get<std::string>();
    INFO("input " << name);
    GlinerOptions const options{rec["threshold"].get<double>(), rec["flat_ner"].get<bool>(),
                                rec["multi_label"].get<bool>()};
    io::Json const& per_text = rec["per_text"];
    bool const per_text_labels = rec["labels"].size() > 0 && rec["labels"][0].is_array();
    std::vector<std::string> texts;
    std::vector<std::vector<std::string>> labels;
    for (std::size_t i = 0; i < per_text.size(); ++i) {
      texts.push_back(per_text[i]["text"].get<std::string>());
      labels.push_back(string_list(per_text_labels ? rec["labels"][i] : rec["labels"]));
    }
    // Intermediates of each text: input ids, words mask, logits.
    for (std::size_t i = 0; i < per_text.size(); ++i) {
      io::Json const& d = per_text[i];
      if (!d["valid"].get<bool>()) continue;
      std::vector<std::string> const used = string_list(d["labels_used"]);
      CHECK(dedup_gliner_labels(labels[i]) == used);
      GlinerInput const in = model.prepare(texts[i], used);
      CHECK(in.num_words() == d["num_words_used"].get<std::int64_t>());
      REQUIRE(in.input_ids == d["input_ids"].get<std::vector<std::int64_t>>());
      REQUIRE(in.words_mask == d["words_mask"].get<std::vector<std::int64_t>>());
      for (std::size_t w = 0; w < in.words.size(); ++w) {
        CHECK(in.words[w].start == d["words"][w][1].get<std::int64_t>());
        CHECK(in.words[w].end == d["words"][w][2].get<std::int64_t>());
      }
      if (d["logits"].contains("values")) {
        std::vector<GlinerLogits> const ours = model.logits({in});
        double const err = logit_error(model, ours[0], d["logits"]);
        INFO("text " << i << " logit error " << err);
        CHECK(err <= kGlinerLogitTolerance);
      }
    }
    // Entities: one text as predict_entities, a batch as each text's batch-of-one result.
    if (rec["api"] == "predict_entities") {
      check_entities(model.predict_entities(texts[0], labels[0], options), rec["entities"], name);
    } else {
      auto const ours = model.predict_entities(texts, labels, options);
      for (std::size_t i = 0; i < per_text.size(); ++i) {
        io::Json const& d = per_text[i];
        if (!d["valid"].get<bool>()) {
          CHECK(ours[i].empty());
        } else {
          check_entities(ours[i], d["entities_single"], name + " text " + std::to_string(i));
        }
      }
    }
  }
}

template <ExecutionPolicy P>
void run_gliner_fixture_suite(P const& policy) {
  auto const cases = gliner_cases();
  REQUIRE(cases.size() >= 16);
  for (auto const& dir : cases) {
    MESSAGE("GLiNER case " << dir.filename().string());
    try {
      run_gliner_case(policy, dir);
    } catch (std::exception const& e) {
      FAIL_CHECK("case " << dir.filename().string() << " threw: " << std::string(e.what()));
    }
  }
}

// Every refuse/ config fails at load with a message naming what it is.
inline void run_gliner_refusals() {
  std::filesystem::path const root = gliner_fixture_dir() / "refuse";
  io::Json const cases = read_json_file(root / "cases.json");
  // What each message must contain, by the case's must_refuse text.
  auto const key_of = [](std::string const& must) -> std::string {
    if (must.starts_with("bi-encoder")) return "labels_encoder";
    if (must.starts_with("decoder")) return "labels_decoder";
    if (must.starts_with("relation")) return "relations_layer";
    if (must.starts_with("backbone")) return "encoder_config.model_type";
    if (must.starts_with("represent_spans")) return "represent_spans";
    if (must.starts_with("precomputed")) return "precomputed_prompts_mode";
    if (must.starts_with("words_splitter")) return "words_splitter_type";
    return "encoder_config";
  };
  for (io::Json const& c : cases["cases"]) {
    std::string const dir = c["dir"].get<std::string>();
    std::string const must = c["must_refuse"].get<std::string>();
    INFO("refuse/" << dir << ": " << must);
    std::string message;
    try {
      load_gliner_config(root / dir);
    } catch (Error const& e) {
      message = e.what();
    }
    INFO("message: " << message);
    CHECK(message.find("gliner_config.json") != std::string::npos);
    CHECK(message.find(key_of(must)) != std::string::npos);
  }
}

// The message GLiNER<P>::load fails with on `dir`, or "" when it loads.
template <ExecutionPolicy P>
std::string gliner_load_error(P const& policy, std::filesystem::path const& dir) {
  try {
    (void)GLiNER<P>::load(policy, dir);
  } catch (Error const& e) {
    return e.what();
  }
  return "";
}

// A checkpoint without prompt_rep_layer.0.weight is refused, naming it (GLiNER's strict=False would not).
template <ExecutionPolicy P>
void run_gliner_missing_tensor(P const& policy) {
  std::filesystem::path const source = gliner_fixture_dir() / "span_marker";
  ScratchDir const copy("gliner_missing");
  copy.copy_from(source, {"gliner_config.json", "tokenizer.json", "tokenizer_config.json"});
  {
    Checkpoint const ckpt = Checkpoint::open(source);
    std::vector<std::vector<float>> data;
    std::vector<TensorToWrite> tensors;
    for (std::string const& name : ckpt.names()) {
      if (name == "prompt_rep_layer.0.weight") continue;
      data.push_back(ckpt.read_f32(name, ckpt.info(name).shape));
    }
    std::size_t k = 0;
    for (std::string const& name : ckpt.names()) {
      if (name == "prompt_rep_layer.0.weight") continue;
      tensors.push_back({name, DType::kF32, ckpt.info(name).shape, std::as_bytes(std::span<float const>(data[k]))});
      ++k;
    }
    write_safetensors(copy / "model.safetensors", tensors);
  }
  std::string const message = gliner_load_error(policy, copy.path());
  INFO("message: " << message);
  CHECK(message.find("prompt_rep_layer.0.weight") != std::string::npos);
  CHECK(message.find("missing") != std::string::npos);
}

// class_token_index -1 means "the id of ent_token"; any other value must be that id: -5 was taken as -1.
template <ExecutionPolicy P>
void run_gliner_class_token_index(P const& policy) {
  std::filesystem::path const source = gliner_fixture_dir() / "span_marker";
  ScratchDir const copy("gliner_class_token");
  copy.copy_from(source, {"model.safetensors", "tokenizer.json", "tokenizer_config.json"});
  io::Json config = read_json_file(source / "gliner_config.json");
  config["class_token_index"] = -5;
  copy.write("gliner_config.json", config.dump());
  std::string const message = gliner_load_error(policy, copy.path());
  INFO("message: " << message);
  CHECK(message.find("key 'class_token_index' is -5 but the tokenizer's '<<ENT>>' is token ") != std::string::npos);
}

// What GLiNER's loader refuses before it could block or run out of memory: encoder_config's num_hidden_layers
// past the layers the checkpoint holds (a vector sized from 1e8 gave "out of memory"), and FIFOs as its files
// (opened for reading, a FIFO waits for a writer forever).
template <ExecutionPolicy P>
void run_gliner_unreadable_files(P const& policy) {
  std::filesystem::path const source = gliner_fixture_dir() / "span_marker";
  {
    ScratchDir const copy("gliner_layers");
    copy.copy_from(source, {"model.safetensors", "tokenizer.json", "tokenizer_config.json"});
    io::Json config = read_json_file(source / "gliner_config.json");
    std::int64_t const layers = config["encoder_config"]["num_hidden_layers"].get<std::int64_t>();
    config["encoder_config"]["num_hidden_layers"] = 100000000;
    copy.write("gliner_config.json", config.dump());
    std::string const message = gliner_load_error(policy, copy.path());
    INFO("message: " << message);
    CHECK(message.find("config key 'num_hidden_layers' is 100000000, but the checkpoint holds " +
                       std::to_string(layers) + " layers") != std::string::npos);
  }
  ::alarm(60);  // a reader that blocks on a FIFO fails the test instead of hanging it
  for (char const* name : {"model.safetensors", "pytorch_model.bin", "gliner_config.json"}) {
    INFO(name);
    ScratchDir const copy("gliner_fifo");
    copy.copy_from(source, {"gliner_config.json", "tokenizer.json", "tokenizer_config.json"});
    if (std::string_view(name) == "gliner_config.json") {
      std::filesystem::remove(copy / name);
      std::filesystem::copy_file(source / "model.safetensors", copy / "model.safetensors");
    }
    REQUIRE(::mkfifo((copy / name).c_str(), 0600) == 0);
    std::string const message = gliner_load_error(policy, copy.path());
    INFO("message: " << message);
    CHECK(message.find((copy / name).string() + ": cannot ") == 0);
    CHECK(message.find(": it is a FIFO, not a regular file") != std::string::npos);
  }
  ::alarm(0);
}

inline void run_gliner_word_splitter() {
  auto const spans = [](std::string const& text) {
    std::vector<std::string> out;
    for (auto const& w : split_gliner_words(text)) out.push_back(w.text);
    return out;
  };
  CHECK(spans("e-mail snake_case Jean-Luc 3.14") ==
        std::vector<std::string>{"e-mail", "snake_case", "Jean-Luc", "3", ".", "14"});
  CHECK(spans("a-- b-") == std::vector<std::string>{"a", "-", "-", "b", "-"});
  CHECK(spans("cafe\xCC\x81") == std::vector<std::string>{"cafe", "\xCC\x81"});          // U+0301 is not \w
  CHECK(spans("x\xE2\x80\x8By") == std::vector<std::string>{"x", "\xE2\x80\x8B", "y"});  // U+200B is a word
  CHECK(spans("a\x1c"
              "b") == std::vector<std::string>{"a", "b"});        // U+001C is str.isspace
  auto const words = split_gliner_words("\xC3\xA9t\xC3\xA9 ok");  // "été ok": code-point offsets
  REQUIRE(words.size() == 2);
  CHECK(words[1].start == 4);
  CHECK(words[1].end == 6);
  CHECK(gliner_blank_text(" \t\xE2\x80\x83\n"));
  CHECK(!gliner_blank_text(" . "));
}

}  // namespace flashdeberta::testing
