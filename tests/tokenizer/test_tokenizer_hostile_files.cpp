// Tokenizer files written to break the loader: ids outside [0, 2^31) (which overflowed where the next
// free id is computed), ids shared by two tokens, merges of unknown symbols, model_max_length past int64,
// negative or not a number, the id space running out, and files of many added tokens (which took quadratic
// time).
// Each is refused with an error naming the file, the token and the id, or loads in linear time. tokenizer.json
// files that are malformed or hold values of the wrong type are refused naming the file and the field.
#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "fixture_cases.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"
#include "text_contains.hpp"
#include "tokenizer_json_copy.hpp"
#include "tokenizer_test_util.hpp"

using flashdeberta::test::error_message;
using flashdeberta::test::TempDir;
using flashdeberta::test::tokenizer_fixture;
namespace tok = flashdeberta::tokenizer;

namespace {

using flashdeberta::testing::contains;

using Files = std::vector<std::pair<std::string, std::string>>;  // (name, bytes)

// A copy of the BPE fixture with `files` replaced.
struct BpeCopy {
  TempDir dir;
  explicit BpeCopy(Files const& files) {
    dir.copy_from(tokenizer_fixture("bpe"));
    std::filesystem::remove(dir.path() / "expected.json");
    for (auto const& [name, bytes] : files) dir.write(name, bytes);
  }
  std::string error() const {
    return error_message([&] { flashdeberta::load_tokenizer(dir.path()); });
  }
};

// The load error with `name` replaced by `bytes`; it must name that file.
std::string error_with(std::string const& name, std::string const& bytes) {
  BpeCopy const copy(Files{{name, bytes}});
  std::string const message = copy.error();
  CHECK_MESSAGE(contains(message, (copy.dir.path() / name).string()), message);
  return message;
}

// The added-token split written the plain way: at each position, every token in order, the longest
// accepted one wins; quadratic, and plainly right.
std::vector<tok::TextSegment> split_by_scanning(std::u32string const& text, std::vector<tok::AddedToken> const& added) {
  std::vector<tok::TextSegment> out;
  std::size_t const n = text.size();
  auto const word = [](char32_t c) { return tok::detail::is_word_char(c); };
  std::size_t plain_begin = 0;
  std::size_t i = 0;
  while (i < n) {
    std::int64_t best = -1;
    std::size_t best_len = 0;
    for (std::size_t k = 0; k < added.size(); ++k) {
      std::u32string const c = tok::decode_utf8(added[k].content).chars;
      if (c.empty() || c.size() <= best_len || i + c.size() > n || text.compare(i, c.size(), c) != 0) continue;
      if (added[k].single_word && ((i > 0 && word(text[i - 1])) || (i + c.size() < n && word(text[i + c.size()])))) {
        continue;
      }
      best = static_cast<std::int64_t>(k);
      best_len = c.size();
    }
    if (best < 0) {
      ++i;
      continue;
    }
    std::size_t start = i;
    std::size_t stop = i + best_len;
    auto const& token = added[static_cast<std::size_t>(best)];
    while (token.lstrip && start > plain_begin && tok::is_whitespace(text[start - 1])) --start;
    while (token.rstrip && stop < n && tok::is_whitespace(text[stop])) ++stop;
    if (start > plain_begin) out.push_back({plain_begin, start, -1});
    out.push_back({start, stop, best});
    plain_begin = i = stop;
  }
  if (plain_begin < n) out.push_back({plain_begin, n, -1});
  return out;
}

}  // namespace

TEST_CASE("added tokens are found as a token-by-token scan finds them (random tokens, flags and texts)") {
  std::mt19937 rng(5);
  std::u32string const token_chars = U"abcé";
  std::u32string const text_chars = U"abcé _";
  auto const random_string = [&](std::u32string const& alphabet, std::size_t length) {
    std::u32string s;
    while (s.size() < length) s += alphabet[rng() % alphabet.size()];
    return s;
  };
  int differences = 0;
  for (int round = 0; round < 400; ++round) {
    std::vector<tok::AddedToken> added;
    std::vector<std::u32string> contents;
    for (std::size_t k = 0, count = 1 + rng() % 8; k < count; ++k) {
      // Repeats of earlier tokens (same content, other flags) now and then.
      std::u32string const c =
          k > 0 && rng() % 5 == 0 ? contents[rng() % k] : random_string(token_chars, 1 + rng() % 4);
      contents.push_back(c);
      added.push_back(
          {tok::encode_utf8(c), static_cast<std::int64_t>(k), rng() % 3 == 0, rng() % 3 == 0, rng() % 2 == 0, true});
    }
    tok::AddedTokenMatcher const matcher(contents);
    for (int t = 0; t < 20; ++t) {
      tok::DecodedText const text = tok::decode_utf8(tok::encode_utf8(random_string(text_chars, rng() % 30)));
      auto const got = tok::detail::split_added_tokens(text, added, matcher);
      auto const want = split_by_scanning(text.chars, added);
      bool same = got.size() == want.size();
      for (std::size_t i = 0; same && i < got.size(); ++i) {
        same = got[i].begin == want[i].begin && got[i].end == want[i].end && got[i].added == want[i].added;
      }
      if (!same && ++differences <= 5) FAIL_CHECK("split differs for '" << tok::encode_utf8(text.chars) << "'");
    }
  }
  CHECK(differences == 0);
}

TEST_CASE("vocab.json: ids below 0 or from 2^31 on and ids shared by two tokens are refused, naming token and id") {
  CHECK(contains(error_with("vocab.json", R"({"a": 0, "b": -1})"), "token 'b' has id -1, outside [0, 2^31)"));
  CHECK(contains(error_with("vocab.json", R"({"a": 2147483648})"), "token 'a' has id 2147483648, outside [0, 2^31)"));
  CHECK(contains(error_with("vocab.json", R"({"a": 9223372036854775807})"),
                 "token 'a' has id 9223372036854775807, outside [0, 2^31)"));
  CHECK(contains(error_with("vocab.json", R"({"a": 18446744073709551615})"),
                 "key 'a' must be an integer that fits in int64"));
  CHECK(contains(error_with("vocab.json", R"({"a": 1.5})"), "key 'a' must be an integer"));
  CHECK(contains(error_with("vocab.json", R"({"a": 7, "b": 7})"), "id 7 is used by both 'a' and 'b'"));
  // The largest id is fine.
  BpeCopy const edge(Files{{"vocab.json", R"({"[PAD]": 0, "a": 2147483647})"}, {"merges.txt", ""}});
  CHECK(edge.error().empty());
}

TEST_CASE("merges.txt: symbols and merged tokens missing from vocab.json are refused") {
  CHECK(contains(error_with("merges.txt", "#version: 0.2\nqqq a\n"), "line 2 uses 'qqq', which is not in vocab.json"));
  CHECK(contains(error_with("merges.txt", "a qqq\n"), "line 1 uses 'qqq', which is not in vocab.json"));
  // Both halves exist, their concatenation does not.
  CHECK(contains(error_with("merges.txt", "q z\n"), "line 1 uses 'qz', which is not in vocab.json"));
}

TEST_CASE("added_tokens.json and added_tokens_decoder: ids below 0 or from 2^31 on are refused") {
  CHECK(contains(error_with("added_tokens.json", R"({"[X]": 2147483648})"),
                 "added_tokens.json: token '[X]' has id 2147483648, outside [0, 2^31)"));
  CHECK(contains(error_with("added_tokens.json", R"({"[X]": 9223372036854775807})"),
                 "added_tokens.json: token '[X]' has id 9223372036854775807, outside [0, 2^31)"));
  auto const decoder = [](std::string const& key) {
    return R"({"added_tokens_decoder": {")" + key + R"(": {"content": "[X]"}}})";
  };
  CHECK(contains(error_with("tokenizer_config.json", decoder("9223372036854775807")),
                 "added_tokens_decoder: token '[X]' has id 9223372036854775807, outside [0, 2^31)"));
  CHECK(contains(error_with("tokenizer_config.json", decoder("123456789012345678901234567890")),
                 "added_tokens_decoder: token '[X]' has id 123456789012345678901234567890, outside [0, 2^31)"));
  CHECK(contains(error_with("tokenizer_config.json", decoder("2147483648")),
                 "added_tokens_decoder: token '[X]' has id 2147483648, outside [0, 2^31)"));
  CHECK(contains(error_with("tokenizer_config.json", decoder("-1")),
                 "added_tokens_decoder: token '[X]' has id -1, outside [0, 2^31)"));
  CHECK(contains(error_with("tokenizer_config.json", decoder("twelve")),
                 "added_tokens_decoder key 'twelve' is not a token id"));
  // The largest id loads and encodes.
  BpeCopy const edge(Files{{"added_tokens.json", R"({"[X]": 2147483647})"}});
  auto const t = flashdeberta::load_tokenizer(edge.dir.path());
  CHECK(t.token_to_id("[X]") == 2147483647);
  CHECK(t.encode("a[X]").input_ids[2] == 2147483647);
}

TEST_CASE("a special token that needs an id past 2^31 - 1 is refused") {
  // [NEWMASK] is in no file, so it would get the id after the largest one: 2^31.
  BpeCopy const copy(Files{{"added_tokens.json", R"({"[X]": 2147483647})"},
                           {"special_tokens_map.json", R"({"mask_token": "[NEWMASK]"})"}});
  std::string const message = copy.error();
  CHECK_MESSAGE(contains(message, "no token id below 2^31 is left for the added token '[NEWMASK]'"), message);
  BpeCopy const fits(Files{{"added_tokens.json", R"({"[X]": 2147483646})"},
                           {"special_tokens_map.json", R"({"mask_token": "[NEWMASK]"})"}});
  CHECK(flashdeberta::load_tokenizer(fits.dir.path()).mask_token_id() == 2147483647);
}

TEST_CASE(
    "tokenizer_config.json: model_max_length past int64 or null is no limit, negative, fractional or "
    "non-numeric is refused") {
  CHECK(contains(error_with("tokenizer_config.json", R"({"model_max_length": -5})"),
                 "key 'model_max_length' is negative (-5)"));
  CHECK(contains(error_with("tokenizer_config.json", R"({"model_max_length": -1e300})"),
                 "key 'model_max_length' is negative (-1e+300)"));
  // Read as no limit, a typo would silently lift truncation.
  CHECK(contains(error_with("tokenizer_config.json", R"({"model_max_length": "x"})"),
                 "key 'model_max_length' must be an integer (or null for no limit), found string \"x\""));
  CHECK(contains(error_with("tokenizer_config.json", R"({"model_max_length": 512.5})"),
                 "key 'model_max_length' must be an integer (or null for no limit), found number 512.5"));
  CHECK(contains(error_with("tokenizer_config.json", R"({"model_max_length": true})"),
                 "key 'model_max_length' must be an integer (or null for no limit), found boolean true"));
  TempDir const dir;
  dir.write("tokenizer_config.json", R"({"model_max_length": 18446744073709551615})");
  CHECK_FALSE(tok::load_tokenizer_config(dir.path()).model_max_length.has_value());
  dir.write("tokenizer_config.json", R"({"model_max_length": 1e30})");
  CHECK_FALSE(tok::load_tokenizer_config(dir.path()).model_max_length.has_value());
  dir.write("tokenizer_config.json", R"({"model_max_length": null})");
  CHECK_FALSE(tok::load_tokenizer_config(dir.path()).model_max_length.has_value());
  dir.write("tokenizer_config.json", R"({"model_max_length": 512})");
  CHECK(tok::load_tokenizer_config(dir.path()).model_max_length == 512);
  dir.write("tokenizer_config.json", R"({"model_max_length": 512.0})");
  CHECK(tok::load_tokenizer_config(dir.path()).model_max_length == 512);
}

TEST_CASE("a vocabulary without a byte's symbol is refused when that byte is encoded") {
  BpeCopy const copy(Files{{"vocab.json", R"({"[PAD]": 0, "a": 1})"}, {"merges.txt", ""}});
  auto const t = flashdeberta::load_tokenizer(copy.dir.path());
  CHECK(t.encode("aa").size() == 4);
  CHECK(contains(error_message([&] { t.encode("ab"); }),
                 "BPE: token 'b' (the symbol of byte 0x62) is not in vocab.json"));
}

TEST_CASE("many added tokens load and match in linear time") {
  // 50,000 added tokens: the table was built with a scan of all tokens per token (2.5e9 steps).
  constexpr int kTokens = 50'000;
  std::string json = "{";
  for (int i = 0; i < kTokens; ++i) {
    json += (i ? ",\"<t" : "\"<t") + std::to_string(i) + ">\": " + std::to_string(2000 + i);
  }
  json += "}";
  BpeCopy const copy(Files{{"added_tokens.json", json}});
  auto const start = std::chrono::steady_clock::now();
  auto const t = flashdeberta::load_tokenizer(copy.dir.path());
  double const load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(t.token_to_id("<t49999>") == 2000 + 49999);
  std::string text;
  for (int i = 0; i < 2'000; ++i) text += (i ? " a<t" : "a<t") + std::to_string(i * 7) + ">";
  auto const encode_start = std::chrono::steady_clock::now();
  auto const e = t.encode(text);
  double const encode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - encode_start).count();
  MESSAGE(kTokens << " added tokens: load " << load_seconds << " s, a " << text.size()
                  << "-byte text with 2,000 of them " << encode_seconds << " s");
  CHECK(load_seconds < 3.0);  // generous for a loaded CI machine: about 0.5 s here, over 10 s before
  CHECK(encode_seconds < 3.0);
  REQUIRE(e.size() == 2 + 2 * 2'000);  // [CLS] a <t0> Ġa <t7> ... [SEP]
  CHECK(e.input_ids[2] == 2000);
  CHECK(e.input_ids[4] == 2000 + 7);
  CHECK(e.input_ids[e.size() - 2] == 2000 + 7 * 1999);
}

namespace {

// The load error of `name`'s tokenizer.json after `edit` (or replaced by `bytes`); it must name the file.
std::string json_error(std::string const& name, std::function<void(nlohmann::json&)> const& edit) {
  flashdeberta::test::TokenizerJsonCopy const copy(name, edit);
  std::string const message = copy.error();
  CHECK_MESSAGE(contains(message, copy.file().string()), message);
  return message;
}

}  // namespace

TEST_CASE("tokenizer.json: malformed JSON and a top-level value that is not an object are refused") {
  std::string const text = [] {
    std::ifstream in(flashdeberta::test::tokenizer_json_fixture("spm") / "tokenizer.json");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  flashdeberta::test::TokenizerJsonCopy const cut("spm", text.substr(0, text.size() / 2));
  CHECK(contains(cut.error(), "is not valid JSON"));
  flashdeberta::test::TokenizerJsonCopy const list("spm", "[1, 2]");
  CHECK(contains(list.error(), "the top-level value must be an object"));
  CHECK(contains(json_error("spm", [](nlohmann::json& d) { d.erase("model"); }), "the file has no 'model'"));
}

TEST_CASE("tokenizer.json: model fields of the wrong type or out of range are refused, naming the field") {
  using nlohmann::json;
  CHECK(contains(json_error("spm", [](json& d) { d["model"]["vocab"] = "pieces"; }), "model.vocab must be an array"));
  CHECK(contains(json_error("spm", [](json& d) { d["model"]["vocab"][5] = json::array({"x"}); }),
                 "model.vocab[5] must be [piece, score]"));
  CHECK(contains(json_error("spm", [](json& d) { d["model"]["vocab"][5][1] = "high"; }),
                 "model.vocab[5][1] must be a number"));
  CHECK(contains(json_error("spm", [](json& d) { d["model"]["vocab"] = json::array(); }), "model.vocab is empty"));
  CHECK(contains(json_error("spm", [](json& d) { d["model"]["unk_id"] = 5000; }),
                 "model.unk_id 5000 is outside the vocabulary of 1074"));
  CHECK(contains(json_error("bpe", [](json& d) { d["model"]["merges"][3] = "nospace"; }),
                 "model.merges[3] is not 'LEFT RIGHT'"));
  CHECK(contains(json_error("bpe",
                            [](json& d) {
                              d["model"]["merges"][3] = json::array({"q", "zz"});
                            }),
                 "model.merges[3] uses 'zz', which is not in model.vocab"));
}

TEST_CASE("tokenizer.json: added tokens and templates with bad ids or missing parts are refused") {
  using nlohmann::json;
  CHECK(contains(json_error("spm_gliner", [](json& d) { d["added_tokens"][5]["id"] = 2147483648LL; }),
                 "has id 2147483648, outside [0, 2^31)"));
  CHECK(contains(json_error("spm_gliner", [](json& d) { d["added_tokens"][5]["id"] = "1075"; }),
                 "added_tokens[5].id must be an integer"));
  CHECK(contains(json_error("spm_gliner", [](json& d) { d["added_tokens"][5]["normalized"] = "yes"; }),
                 "added_tokens[5].normalized must be a boolean"));
  CHECK(contains(json_error("spm", [](json& d) { d["post_processor"]["special_tokens"].erase("[SEP]"); }),
                 "names the special token '[SEP]', which post_processor.special_tokens lacks"));
  CHECK(contains(json_error("spm", [](json& d) { d["post_processor"]["pair"].erase(3); }),
                 "post_processor.pair must use both sequences $A and $B"));
  CHECK(contains(json_error("spm",
                            [](json& d) {
                              d["post_processor"]["special_tokens"]["[CLS]"]["ids"] = {1, 2};
                            }),
                 "has 2 ids but 1 tokens"));
  CHECK(contains(json_error("spm", [](json& d) { d["pre_tokenizer"]["pretokenizers"][0]["replacement"] = "__"; }),
                 "replacement must be one character"));
}

TEST_CASE("tokenizer.json: a Precompiled charsmap that is not base64 or does not hold its trie is refused") {
  using nlohmann::json;
  CHECK(contains(json_error("spm_precompiled",
                            [](json& d) { d["normalizer"]["normalizers"][1]["precompiled_charsmap"] = "abc!"; }),
                 "normalizer.normalizers[1].precompiled_charsmap is not valid base64"));
  CHECK(contains(json_error("spm_precompiled",
                            [](json& d) { d["normalizer"]["normalizers"][1]["precompiled_charsmap"] = "CAAAAAE="; }),
                 "does not fit its 5 bytes"));
  CHECK(contains(json_error("spm_precompiled",
                            [](json& d) { d["normalizer"]["normalizers"][1]["precompiled_charsmap"] = "AQ=="; }),
                 "is too short (1 bytes)"));
}

TEST_CASE("two added tokens of one id are refused, naming both tokens and the id") {
  // "7" and "07" are one id to Python's int(), which transformers applies to the keys.
  CHECK(contains(error_with("tokenizer_config.json",
                            R"({"added_tokens_decoder": {"7": {"content": "[A]"}, "07": {"content": "[B]"}}})"),
                 "tokenizer_config.json: added_tokens_decoder: id 7 is used by both '[B]' (key '07') and '[A]' (key "
                 "'7')"));
  using nlohmann::json;
  std::string const message =
      json_error("spm_gliner", [](json& d) { d["added_tokens"][5]["id"] = d["added_tokens"][4]["id"]; });
  CAPTURE(message);
  CHECK(contains(message, "tokenizer.json: added_tokens: id "));
  CHECK(contains(message, "(added_tokens[4]) and '"));
  CHECK(contains(message, "(added_tokens[5])"));
}

TEST_CASE("optional tokenizer files: absent means not there, and a FIFO, a directory or a device there is an error") {
  ::alarm(60);  // a reader that blocks on a FIFO fails the test instead of hanging it
  struct Kind {
    char const* what;
    std::function<void(std::filesystem::path const&)> make;
  };
  Kind const kinds[] = {
      {"a FIFO, not a regular file", [](auto const& p) { REQUIRE(::mkfifo(p.c_str(), 0600) == 0); }},
      {"a directory, not a regular file", [](auto const& p) { std::filesystem::create_directory(p); }},
      {"a character device, not a regular file",
       [](auto const& p) { std::filesystem::create_symlink("/dev/urandom", p); }},
      {"a symbolic link loop", [](auto const& p) { std::filesystem::create_symlink(p.filename(), p); }},
  };
  for (char const* name : {"tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"}) {
    for (Kind const& kind : kinds) {
      CAPTURE(name);
      CAPTURE(kind.what);
      BpeCopy const copy(Files{});
      std::filesystem::remove(copy.dir / name);
      kind.make(copy.dir / name);
      std::string const message = copy.error();
      CHECK_MESSAGE(contains(message, (copy.dir / name).string() + ": cannot read the "), message);
      CHECK_MESSAGE(contains(message, std::string(": it is ") + kind.what), message);
    }
  }
  ::alarm(0);
  // Absent, each leaves HF's defaults.
  BpeCopy const bare(Files{});
  for (char const* name : {"tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"})
    std::filesystem::remove(bare.dir / name);
  CHECK(tok::load_tokenizer_config(bare.dir.path()).files_read.empty());
}

TEST_CASE("tokenizer model files that are FIFOs are refused, not waited on") {
  ::alarm(60);
  for (char const* name : {"vocab.json", "merges.txt"}) {
    CAPTURE(name);
    BpeCopy const copy(Files{});
    std::filesystem::remove(copy.dir / name);
    REQUIRE(::mkfifo((copy.dir / name).c_str(), 0600) == 0);
    std::string const message = copy.error();
    CHECK_MESSAGE(contains(message, (copy.dir / name).string() + ": cannot read the BPE "), message);
    CHECK_MESSAGE(contains(message, "it is a FIFO, not a regular file"), message);
  }
  ::alarm(0);
}
