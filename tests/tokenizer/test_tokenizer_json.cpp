// tokenizer.json directories (tests/fixtures/tokenizer_json/, make_tokenizer_json_fixtures.py): every case
// against what HF's tokenizers library returns for the same file (ids, token types, masks, offsets,
// tokens, sequence ids, decoding, refusals), the NFC and Precompiled normalizers character by character,
// and the refusals of what is not supported.
#include <doctest/doctest.h>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "flashdeberta/tokenizer/precompiled_charsmap.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"
#include "flashdeberta/tokenizer/unicode_normalization.hpp"
#include "tokenizer_test_util.hpp"

namespace {

namespace tok = flashdeberta::tokenizer;
using flashdeberta::test::kSlowdown;
using nlohmann::json;

std::filesystem::path json_fixture(std::string const& name) {
  return std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "tokenizer_json" / name;
}

json read_json(std::filesystem::path const& file) {
  std::ifstream in(file);
  REQUIRE(in.good());
  return json::parse(in);
}

tok::EncodeOptions options_of(json const& c) {
  tok::EncodeOptions o;
  o.add_special_tokens = c.value("add_special_tokens", true);
  if (c.contains("max_length")) o.max_length = c["max_length"].get<std::size_t>();
  o.truncation =
      c.contains("truncation") ? tok::parse_truncation(c["truncation"].get<std::string>()) : tok::Truncation::kNone;
  std::string const padding = c.value("padding", "");
  o.padding = padding == "longest"      ? tok::Padding::kLongest
              : padding == "max_length" ? tok::Padding::kMaxLength
                                        : tok::Padding::kNone;
  return o;
}

// The case as tokenizers ran it: tk.encode(text, pair) (an empty pair is a pair there), encode_batch, or
// encode(words, is_pretokenized=True).
std::vector<tok::Encoding> run(tok::Tokenizer const& t, json const& c) {
  tok::EncodeOptions const o = options_of(c);
  if (c.contains("batch")) {
    auto const texts = c["batch"].get<std::vector<std::string>>();
    if (c.contains("batch_pairs")) return t.encode_batch(texts, c["batch_pairs"].get<std::vector<std::string>>(), o);
    return t.encode_batch(texts, o);
  }
  if (c.contains("words")) return {t.encode_words(c["words"].get<std::vector<std::string>>(), o)};
  if (c.contains("pair")) return {t.encode(c["text"].get<std::string>(), c["pair"].get<std::string>(), o)};
  return {t.encode(c["text"].get<std::string>(), o)};
}

// The fields of one row that differ from tokenizers'. Added tokens' strings are left out: tokenizers
// reports the text it matched (" [MASK]" with lstrip), flashdeberta the token's content.
std::vector<std::string> differences(tok::Tokenizer const& t, json const& want, tok::Encoding const& got) {
  std::vector<std::string> bad;
  if (want["input_ids"].get<std::vector<std::int64_t>>() != got.input_ids) return {"input_ids"};
  if (want["token_type_ids"].get<std::vector<std::int64_t>>() != got.token_type_ids) bad.push_back("token_type_ids");
  if (want["attention_mask"].get<std::vector<std::int64_t>>() != got.attention_mask) bad.push_back("attention_mask");
  std::vector<std::vector<std::int64_t>> offsets;
  for (auto const& s : got.offsets) offsets.push_back({s.begin, s.end});
  if (want["offsets"].get<std::vector<std::vector<std::int64_t>>>() != offsets) bad.push_back("offsets");
  auto const tokens = want["tokens"].get<std::vector<std::string>>();
  std::vector<std::int32_t> sequence_ids;
  for (json const& s : want["sequence_ids"]) sequence_ids.push_back(s.is_null() ? -1 : s.get<std::int32_t>());
  auto const is_added_token = [&](std::int64_t id) {
    for (auto const& a : t.added_tokens()) {
      if (a.id == id) return true;
    }
    return false;
  };
  for (std::size_t i = 0; i < got.size() && i < tokens.size(); ++i) {
    if (sequence_ids[i] >= 0 && !is_added_token(got.input_ids[i]) && tokens[i] != got.tokens[i]) {
      bad.push_back("tokens[" + std::to_string(i) + "] " + tokens[i] + " vs " + got.tokens[i]);
      break;
    }
  }
  if (sequence_ids != got.sequence_ids) bad.push_back("sequence_ids");  // null (special, padding): -1
  if (want.contains("decoded")) {
    if (want["decoded"].get<std::string>() != t.decode(got.input_ids)) bad.push_back("decoded");
    if (want["decoded_skip_special"].get<std::string>() != t.decode(got.input_ids, true))
      bad.push_back("decoded_skip_special");
  }
  return bad;
}

// HF's word_ids of a single text's tokens, from its pre-tokens (tokenizers' pre_tokenize_str): each word's tokens
// spell its pre-token. Empty where they do not line up.
std::vector<std::int64_t> hf_words(std::vector<std::string> const& tokens, json const& pre_tokens) {
  std::vector<std::int64_t> words;
  std::size_t w = 0;
  std::string spelled;
  for (std::string const& token : tokens) {
    if (w >= pre_tokens.size()) return {};
    spelled += token;
    words.push_back(static_cast<std::int64_t>(w));
    std::string const pre = pre_tokens[w][0].get<std::string>();
    if (spelled == pre) {
      ++w;
      spelled.clear();
    } else if (!pre.starts_with(spelled)) {
      return {};
    }
  }
  return w == pre_tokens.size() ? words : std::vector<std::int64_t>{};
}

// The words tok::starts_word finds in the text's tokens (what question answering aligns answers to) against
// HF's word_ids, for a case of one text holding no added token (HF cuts those out before pre-tokenizing).
void check_words(tok::Tokenizer const& t, json const& c, tok::Encoding const& got) {
  if (!c.contains("pre_tokens") || c.contains("pair") || c.contains("batch") || c.contains("words")) return;
  auto const lower = [](std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  std::string const text = lower(c["text"].get<std::string>());
  for (auto const& a : t.added_tokens()) {
    if (text.find(lower(a.content)) != std::string::npos) return;  // also as a lowercasing normalizer sees it
  }
  std::vector<std::string> tokens;
  std::vector<std::int64_t> ours;
  std::int64_t word = -1;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got.sequence_ids[i] != 0) continue;
    tokens.push_back(c["expected"]["tokens"][i].get<std::string>());
    if (tok::starts_word(got, i)) ++word;
    ours.push_back(word);
  }
  std::vector<std::int64_t> const want = hf_words(tokens, c["pre_tokens"]);
  if (want.empty()) return;  // the tokens do not spell the pre-tokens (a normalizer changed the text)
  CHECK_MESSAGE(ours == want, "words " << json(ours).dump() << ", HF's " << json(want).dump());
}

void check_cases(std::string const& name, tok::Tokenizer const& t);

// The directory's tokenizer with Unigram stretches cut at every place a cut is allowed (chunks of one
// character), which must not change any result.
tok::Tokenizer load_cut_everywhere(std::filesystem::path const& dir) {
  tok::TokenizerConfig config = tok::load_tokenizer_config(dir);
  tok::TokenizerJson file = tok::read_tokenizer_json(dir, config, {.unigram_chunk_chars = 1});
  std::size_t const pair_specials = file.sequence_template.special_tokens(true);
  return tok::detail::assemble(file.model, config, dir, pair_specials, file.sequence_template);
}

// The directory's tokenizer with no cut at all.
tok::Tokenizer read_tokenizer_whole(std::filesystem::path const& dir) {
  tok::TokenizerConfig config = tok::load_tokenizer_config(dir);
  tok::TokenizerJson file = tok::read_tokenizer_json(dir, config, {.unigram_chunk_chars = std::size_t(-1)});
  std::size_t const pair_specials = file.sequence_template.special_tokens(true);
  return tok::detail::assemble(file.model, config, dir, pair_specials, file.sequence_template);
}

void check_directory(std::string const& name) {
  auto const dir = json_fixture(name);
  check_cases(name, flashdeberta::load_tokenizer(dir));
  check_cases(name + " (cut everywhere)", load_cut_everywhere(dir));
}

void check_cases(std::string const& name, tok::Tokenizer const& t) {
  auto const doc = read_json(json_fixture(name.substr(0, name.find(' '))) / "expected.json");
  int cases = 0;
  for (json const& c : doc["cases"]) {
    std::string const case_name = c["name"].get<std::string>();
    CAPTURE(name);
    CAPTURE(case_name);
    ++cases;
    if (c.contains("error")) {
      CHECK_THROWS_AS(run(t, c), flashdeberta::Error);
      continue;
    }
    std::vector<tok::Encoding> got;
    try {
      got = run(t, c);
    } catch (flashdeberta::Error const& e) {
      FAIL_CHECK("threw " << e.what());
      continue;
    }
    json const& want = c["expected"];
    std::vector<json> rows = want.contains("rows") ? want["rows"].get<std::vector<json>>() : std::vector<json>{want};
    REQUIRE(rows.size() == got.size());
    if (rows.size() == 1 && differences(t, rows[0], got[0]).empty()) check_words(t, c, got[0]);
    for (std::size_t r = 0; r < rows.size(); ++r) {
      auto const bad = differences(t, rows[r], got[r]);
      std::string joined;
      for (auto const& b : bad) joined += b + "; ";
      CAPTURE(r);
      std::vector<std::vector<std::int64_t>> offsets;
      for (auto const& s : got[r].offsets) offsets.push_back({s.begin, s.end});
      CHECK_MESSAGE(bad.empty(), joined << "\n  want " << rows[r].dump() << "\n  got  " << json(got[r].input_ids).dump()
                                        << " " << json(got[r].tokens).dump() << " " << json(offsets).dump());
    }
  }
  CHECK(cases > 100);
}

}  // namespace

TEST_CASE("tokenizer.json of transformers 5.x's DebertaV2Tokenizer matches HF's tokenizers") {
  check_directory("spm");
  CHECK(std::string(flashdeberta::load_tokenizer(json_fixture("spm")).kind()) == "unigram");
}

TEST_CASE("tokenizer.json with GLiNER's added tokens <<ENT>> and <<SEP>> matches HF's tokenizers") {
  check_directory("spm_gliner");
  check_directory("tiny_en_gliner");
  auto const t = flashdeberta::load_tokenizer(json_fixture("spm_gliner"));
  CHECK(t.token_to_id("<<ENT>>") == 1075);
  CHECK(t.token_to_id("<<SEP>>") == 1076);
  CHECK(t.vocab_size() == 1077);
}

TEST_CASE("tokenizer.json with Lowercase and Punctuation (do_lower_case, split_by_punct) matches HF's tokenizers") {
  check_directory("spm_lower_punct_gliner");
}

TEST_CASE("tokenizer.json with sentencepiece's Precompiled charsmap (transformers 4.x's) matches HF's tokenizers") {
  check_directory("spm_precompiled");
}

TEST_CASE("tokenizer.json of the v1 byte-level BPE matches HF's tokenizers") {
  check_directory("bpe");
  check_directory("bpe_prefix_space");
  CHECK(std::string(flashdeberta::load_tokenizer(json_fixture("bpe")).kind()) == "gpt2-bpe");
}

TEST_CASE("tokenizer.json's NFC is tokenizers' (Unicode 9.0), character by character with its spans") {
  json const doc = read_json(json_fixture("normalizers.json"));
  std::size_t changed = 0;
  for (auto const& [cp, output] : doc["nfc"]["single"].items()) {
    auto const c = static_cast<char32_t>(std::stoul(cp));
    tok::NormalizedText text = tok::NormalizedText::of(std::u32string(1, c), 0, 1);
    tok::apply_nfc(text);
    CHECK_MESSAGE(tok::encode_utf8(text.chars()) == output.get<std::string>(), "U+" << std::hex << std::uint32_t(c));
    ++changed;
  }
  CHECK(changed > 1000);
  // No code point outside the fixture's list changes (the list holds every one that does).
  std::size_t unchanged_checked = 0;
  for (char32_t c = 0; c < 0x30000; ++c) {
    if ((c >= 0xD800 && c <= 0xDFFF) || doc["nfc"]["single"].contains(std::to_string(c))) continue;
    auto const changes = tok::nfc_changes(std::u32string(1, c));
    bool const same = changes.size() == 1 && changes[0].c == c;
    if (!same) FAIL_CHECK("U+" << std::hex << std::uint32_t(c) << " changes under NFC here, not in tokenizers");
    ++unchanged_checked;
  }
  CHECK(unchanged_checked > 100000);
  for (json const& s : doc["nfc"]["strings"]) {
    std::string const input = s["input"].get<std::string>();
    CAPTURE(input);
    tok::DecodedText const d = tok::decode_utf8(input);
    tok::NormalizedText text = tok::NormalizedText::of(d.chars, 0, d.size());
    tok::apply_nfc(text);
    CHECK(tok::encode_utf8(text.chars()) == s["normalized"].get<std::string>());
    std::vector<std::vector<std::int64_t>> spans;
    for (auto const& span : text.spans()) spans.push_back({span.begin, span.end});
    CHECK(json(spans) == s["spans"]);
  }
}

TEST_CASE("tokenizer.json's Precompiled charsmap is applied as tokenizers applies it, spans included") {
  json const doc = read_json(json_fixture("normalizers.json"));
  json const file = read_json(json_fixture("spm_precompiled") / "tokenizer.json");
  std::string base64;
  for (json const& n : file["normalizer"]["normalizers"]) {
    if (n["type"] == "Precompiled") base64 = n["precompiled_charsmap"].get<std::string>();
  }
  auto const bytes = tok::detail::decode_base64(base64);
  REQUIRE(bytes.has_value());
  auto const map = tok::PrecompiledCharsmap::parse(*bytes, "charsmap");
  auto const normalize = [&](std::u32string const& chars) {
    tok::NormalizedText text = tok::NormalizedText::of(chars, 0, chars.size());
    map.apply(text);
    return text;
  };
  std::size_t changed = 0;
  for (auto const& [cp, output] : doc["precompiled"]["single"].items()) {
    auto const c = static_cast<char32_t>(std::stoul(cp));
    CHECK_MESSAGE(tok::encode_utf8(normalize(std::u32string(1, c)).chars()) == output.get<std::string>(),
                  "U+" << std::hex << std::uint32_t(c));
    ++changed;
  }
  CHECK(changed > 4000);
  for (char32_t c = 0; c < 0x30000; ++c) {
    if ((c >= 0xD800 && c <= 0xDFFF) || doc["precompiled"]["single"].contains(std::to_string(c))) continue;
    if (map.changes(std::u32string(1, c)).has_value())
      FAIL_CHECK("U+" << std::hex << std::uint32_t(c) << " has a charsmap entry here, not in tokenizers");
  }
  for (json const& s : doc["precompiled"]["strings"]) {
    std::string const input = s["input"].get<std::string>();
    CAPTURE(input);
    tok::NormalizedText const text = normalize(tok::decode_utf8(input).chars);
    CHECK(tok::encode_utf8(text.chars()) == s["normalized"].get<std::string>());
    std::vector<std::vector<std::int64_t>> spans;
    for (auto const& span : text.spans()) spans.push_back({span.begin, span.end});
    CHECK(json(spans) == s["spans"]);
  }
}

TEST_CASE("a directory with spm.model and tokenizer.json keeps using spm.model") {
  flashdeberta::test::TempDir const dir;
  dir.copy_from(json_fixture("spm"));
  std::filesystem::copy_file(std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "tokenizers" / "spm" / "spm.model",
                             dir.path() / "spm.model");
#if defined(FLASHDEBERTA_WITH_SENTENCEPIECE)
  CHECK(std::string(flashdeberta::load_tokenizer(dir.path()).kind()) == "sentencepiece");
#else
  CHECK_THROWS_AS(flashdeberta::load_tokenizer(dir.path()), flashdeberta::Error);
#endif
}

TEST_CASE("a long text is tokenized in pieces with the result of the whole, and a token limit stops it early") {
  auto const dir = json_fixture("spm_gliner");
  auto const whole = read_tokenizer_whole(dir);
  auto const cut = load_cut_everywhere(dir);
  auto const pieces = flashdeberta::load_tokenizer(dir);  // 4096-character pieces
  json const doc = read_json(dir / "expected.json");
  std::string text;
  for (int round = 0; round < 8; ++round) {
    for (json const& c : doc["cases"]) {
      if (c.contains("text") && !c.contains("pair")) text += c["text"].get<std::string>() + (round % 2 ? " " : "  ");
    }
  }
  REQUIRE(tok::decode_utf8(text).size() > 3 * 4096);
  tok::Encoding const want = whole.encode(text);
  for (tok::Tokenizer const* t : {&cut, &pieces}) {
    tok::Encoding const got = t->encode(text);
    CHECK(got.input_ids == want.input_ids);
    CHECK(got.offsets == want.offsets);
    CHECK(got.tokens == want.tokens);
  }
  std::string huge;
  for (int i = 0; i < 2'000'000; ++i) huge += "ab ";
  tok::EncodeOptions options;
  options.token_limit = 100;
  auto const start = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(pieces.encode(huge, options), tok::TokenLimitError);
  double const seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("tokenizer.json: 6 MB text refused at a limit of 100 tokens in " << seconds << " s");
  CHECK(seconds < 1.0 * kSlowdown);  // decoding and the added-token scan of 6 MB; the whole text takes 10 s
}
