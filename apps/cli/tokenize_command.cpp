// flashdeberta tokenize: the checkpoint's tokenizer on texts from the command line or stdin, one JSON
// object per text and line (input_ids, token_type_ids, attention_mask, offsets, tokens), as HF's
// tokenizer(text, pair, truncation=..., max_length=..., return_offsets_mapping=True) gives them.
#include <charconv>
#include <cstdint>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/runtime/options.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"
#include "pipeline_common.hpp"

namespace flashdeberta::cli {

namespace {

struct TokenizeOptions {
  std::filesystem::path model;
  std::optional<std::string> pair;
  std::optional<std::size_t> max_length;
  std::optional<tokenizer::Truncation> truncation;
  std::int64_t max_tokens = kDefaultMaxTokens;
  std::vector<std::string> texts;
};

[[noreturn]] void tokenize_usage_fail(std::string const& message) {
  throw UsageError(message + " (see 'flashdeberta tokenize --help')");
}

// Returns std::nullopt for --help.
std::optional<TokenizeOptions> parse_tokenize_options(std::span<char const* const> args) {
  TokenizeOptions o;
  bool seen_model = false;
  bool options_done = false;
  std::vector<std::string> seen;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view const arg = args[i];
    if (options_done || !arg.starts_with("-") || arg == "-") {
      o.texts.emplace_back(arg);
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") return std::nullopt;
    if (!arg.starts_with("--")) tokenize_usage_fail("unknown option '" + std::string(arg) + "'");
    std::size_t const eq = arg.find('=');
    std::string const name(arg.substr(2, eq == std::string_view::npos ? std::string_view::npos : eq - 2));
    if (name != "model" && name != "pair" && name != "max-length" && name != "truncation" && name != "max-tokens") {
      tokenize_usage_fail("unknown option '--" + name + "' for 'tokenize'");
    }
    for (auto const& s : seen) {
      if (s == name) tokenize_usage_fail("option --" + name + " is given twice");
    }
    seen.push_back(name);
    std::string value;
    if (eq != std::string_view::npos) {
      value = std::string(arg.substr(eq + 1));
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      tokenize_usage_fail("option --" + name + " needs a value");
    }
    if (name == "model") {
      if (value.empty()) tokenize_usage_fail("option --model has an empty value");
      o.model = value;
      seen_model = true;
    } else if (name == "pair") {
      if (!value.empty()) o.pair = value;  // HF's tokenizer(text, "") encodes a single sequence
    } else if (name == "max-length") {
      std::int64_t n = 0;
      auto const [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || end != value.data() + value.size() || n < 0 || n > (std::int64_t{1} << 31)) {
        tokenize_usage_fail("--max-length '" + value + "' is not an integer in [0, 2147483648]");
      }
      o.max_length = static_cast<std::size_t>(n);
    } else if (name == "max-tokens") {
      o.max_tokens = parse_integer_option("tokenize", "max-tokens", value, 1, runtime::kMaxTokensLimit);
    } else {
      if (value != "longest_first" && value != "only_first" && value != "only_second") {
        tokenize_usage_fail("unknown truncation '" + value + "' (expected longest_first, only_first or only_second)");
      }
      o.truncation = tokenizer::parse_truncation(value);
    }
  }
  if (!seen_model) tokenize_usage_fail("missing --model");
  if (o.truncation && !o.max_length) tokenize_usage_fail("--truncation needs --max-length");
  return o;
}

nlohmann::ordered_json to_json(tokenizer::Encoding const& e) {
  nlohmann::ordered_json j;
  j["input_ids"] = e.input_ids;
  j["token_type_ids"] = e.token_type_ids;
  j["attention_mask"] = e.attention_mask;
  nlohmann::ordered_json offsets = nlohmann::ordered_json::array();
  for (auto const& s : e.offsets) offsets.push_back({s.begin, s.end});
  j["offsets"] = std::move(offsets);
  j["tokens"] = e.tokens;
  return j;
}

}  // namespace

std::string tokenize_help() {
  return "usage: flashdeberta tokenize --model DIR [--pair TEXT] [--max-length N]\n"
         "                             [--truncation longest_first|only_first|only_second]\n"
         "                             [--max-tokens N] [TEXT...]\n"
         "\n"
         "Tokenizes each TEXT (or, without TEXT, each line of stdin) with the checkpoint's tokenizer and\n"
         "prints one JSON object per line: input_ids, token_type_ids, attention_mask, offsets ([start, end]\n"
         "in Unicode code points of the text, [0, 0] for special tokens, as HF's offset_mapping) and tokens.\n"
         "\n"
         "  --model DIR          directory with spm.model (v2/v3) or vocab.json + merges.txt (v1), and\n"
         "                       tokenizer_config.json etc. when present; tokenizer files alone are enough\n"
         "  --pair TEXT          second sequence for every text: [CLS] TEXT [SEP] PAIR [SEP], types 0 / 1\n"
         "                       (an empty PAIR means none, as tokenizer(text, \"\") in HF)\n"
         "  --max-length N       truncate to N tokens, special tokens included (longest_first by default)\n"
         "  --truncation S       longest_first, only_first or only_second; a truncation HF refuses (the\n"
         "                       chosen sequence is too short) is an error\n"
         "  --max-tokens N       refuse a text (with its pair) of more than N tokens before truncation,\n"
         "                       special tokens included (default 65536); a text or line of more than\n"
         "                       64 x N bytes is refused before it is tokenized (or read whole)\n"
         "  --                   every later argument is a TEXT, even one starting with '-'\n"
         "\n"
         "Texts must be valid UTF-8. Lines read from stdin lose their line ending (\\n or \\r\\n).\n";
}

int tokenize_command(std::span<char const* const> args) {
  auto options = parse_tokenize_options(args);
  if (!options) {
    std::cout << tokenize_help();
    return 0;
  }
  tokenizer::Tokenizer const tok = tokenizer::load_tokenizer(options->model);
  tokenizer::EncodeOptions encode_options;
  encode_options.max_length = options->max_length;
  encode_options.truncation = options->truncation.value_or(tokenizer::Truncation::kLongestFirst);
  encode_options.token_limit = static_cast<std::size_t>(options->max_tokens);
  std::size_t count = 0;
  auto const encode = [&](std::string const& text) -> std::string {
    ++count;
    std::string const name = "text " + std::to_string(count);
    runtime::TokenBound const bound = runtime::InputLimit::of(options->max_tokens, {}).read;
    runtime::require_text_bytes(text.size() + (options->pair ? options->pair->size() : 0), name, bound);
    try {
      tokenizer::Encoding const e =
          options->pair ? tok.encode(text, *options->pair, encode_options) : tok.encode(text, encode_options);
      return to_json(e).dump();
    } catch (tokenizer::TokenLimitError const&) {
      runtime::refuse_token_limit(name, bound);
    } catch (Error const& error) {  // "text: invalid UTF-8 ..." -> "text 3: invalid UTF-8 ..."
      std::string message = error.what();
      if (message.starts_with("text: ")) message.erase(0, 6);
      if (message.starts_with("pair text: ")) message = "--pair: " + message.substr(11);
      throw Error("text " + std::to_string(count) + ": " + message);
    }
  };
  if (!options->texts.empty()) {
    // Texts on the command line are all encoded before the first line is printed, so a bad one leaves no
    // partial output behind; stdin is a stream and is answered line by line.
    std::vector<std::string> lines;
    for (auto const& text : options->texts) lines.push_back(encode(text));
    for (auto const& line : lines) std::cout << line << '\n';
  } else {
    auto const line_limit = static_cast<std::size_t>(max_text_bytes(options->max_tokens));
    for (std::string line; read_bounded_line(std::cin, line, line_limit, count + 1, options->max_tokens);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      std::cout << encode(line) << '\n';
    }
  }
  std::cout.flush();
  return 0;
}

}  // namespace flashdeberta::cli
