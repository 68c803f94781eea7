// flashdeberta tokenize: the checkpoint's tokenizer on texts from the command line or stdin, one JSON
// object per text and line (input_ids, token_type_ids, attention_mask, offsets, tokens), as HF's
// tokenizer(text, pair, truncation=..., max_length=..., return_offsets_mapping=True) gives them.
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

int tokenize_command(std::span<char const* const> args) {
  auto options = parse_tokenize_options(args);
  if (!options) return 0;  // --help printed the help
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
