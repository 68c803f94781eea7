// libFuzzer target: the CLI's input file ({"input_ids": [[...]], "attention_mask": ..., "token_type_ids":
// ...}), read by apps/cli/input_json.cpp's read_token_input from a scratch file (it takes a path)
// with the default --max-tokens. An accepted input must be rectangular, within --max-tokens, with the
// fields agreeing in size and values in range, and the checks against a model, a head and the packing
// into a Batch must end in a result or an Error. Any other outcome is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "args.hpp"
#include "flashdeberta/heads/head_kind.hpp"
#include "fuzz_support.hpp"
#include "input_json.hpp"

namespace fz = flashdeberta::fuzz;
namespace cli = flashdeberta::cli;

namespace {

void check_input(cli::TokenInput const& in) {
  fz::fuzz_check(in.shape.size() == 2 || in.shape.size() == 3, "an input of rank other than 2 or 3");
  std::size_t numel = 1;
  for (std::int64_t d : in.shape) {
    fz::fuzz_check(d > 0, "an input with an empty dimension");
    numel *= static_cast<std::size_t>(d);
  }
  fz::fuzz_check(in.ids.size() == numel && static_cast<std::size_t>(in.rows() * in.length()) == numel,
                 "input_ids size differs from its shape");
  fz::fuzz_check(numel <= static_cast<std::size_t>(cli::kDefaultMaxTokens), "more positions than --max-tokens");
  fz::fuzz_check(in.mask.empty() || in.mask.size() == numel, "attention_mask size differs from the shape");
  fz::fuzz_check(in.types.empty() || in.types.size() == numel, "token_type_ids size differs from the shape");
  for (std::int64_t id : in.ids) fz::fuzz_check(id >= 0, "a negative id was accepted");
  for (std::int64_t m : in.mask) fz::fuzz_check(m == 0 || m == 1, "a mask value other than 0/1 was accepted");
  for (std::int64_t t : in.types) fz::fuzz_check(t >= 0, "a negative token type was accepted");
}

void check_batch(cli::TokenInput const& in, flashdeberta::ModelConfig const& config) {
  flashdeberta::Batch const batch = cli::to_batch(in, config);
  std::size_t kept = 0;
  for (std::int64_t m : in.mask) kept += static_cast<std::size_t>(m);
  if (in.mask.empty()) kept = in.ids.size();
  fz::fuzz_check(batch.batch_size() == in.rows() && batch.input_ids.size() == kept && batch.positions.size() == kept,
                 "the packed batch lost or gained tokens");
  fz::fuzz_check(batch.token_type_ids.empty() || batch.token_type_ids.size() == kept, "packed token types misaligned");
  for (std::int32_t p : batch.positions) fz::fuzz_check(p >= 0 && p < in.length(), "a position outside the row");
}

}  // namespace

FLASHDEBERTA_FUZZ_TARGET(cli_input) {
  static fz::ScratchDir const dir("fuzz_cli_input");
  dir.write("input.json", fz::as_text(data, size));
  cli::TokenInput input;
  try {
    input = cli::read_token_input(dir / "input.json");
  } catch (flashdeberta::Error const&) {
    return 0;
  }
  check_input(input);
  flashdeberta::ModelConfig config;
  config.vocab_size = 128;
  for (std::int64_t type_vocab_size : {0, 2}) {
    config.type_vocab_size = type_vocab_size;
    try {
      cli::check_against_config(input, config, "config.json");
    } catch (flashdeberta::Error const&) {
    }
    try {
      check_batch(input, config);
    } catch (flashdeberta::Error const&) {
    }
  }
  for (flashdeberta::HeadFacts const& facts : flashdeberta::kHeadFacts) {
    flashdeberta::HeadKind const head = facts.kind;
    try {
      cli::check_against_head(input, head);
    } catch (flashdeberta::Error const&) {
    }
  }
  return 0;
}
