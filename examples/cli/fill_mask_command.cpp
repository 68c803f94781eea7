// flashdeberta fill-mask: HF's fill-mask pipeline. For each text, the top-k tokens at every [MASK] with
// their probabilities, token strings and the filled-in text.
#include <algorithm>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flashdeberta/pipelines/fill_mask.hpp"
#include "pipeline_common.hpp"

namespace flashdeberta::cli {

std::string fill_mask_help() {
  return "usage: flashdeberta fill-mask --model DIR [--top-k K] [options] [TEXT...]\n"
         "\n"
         "Predicts the tokens at the mask token ([MASK]) of each TEXT (or, without TEXT, each line of stdin)\n"
         "with a masked-LM checkpoint (architectures Deberta*ForMaskedLM), as HF's fill-mask pipeline. Prints\n"
         "{\"text\": ..., \"masks\": [[{\"score\", \"token\", \"token_str\", \"sequence\"}, ...], ...]}: one list per\n"
         "mask, best first; score is the softmax probability, sequence the text with that mask filled in\n"
         "(special tokens left out when the text has one mask, kept when it has several, as HF).\n"
         "\n"
         "  --top-k K            predictions per mask (default 5)\n" +
         pipeline_common_help();
}

int fill_mask_command(std::span<char const* const> args) {
  ExtraOption const extras[] = {{"top-k"}};
  auto const options = parse_pipeline_options("fill-mask", args, extras, true);
  if (!options) {
    std::cout << fill_mask_help();
    return 0;
  }
  Pipeline const pipeline(*options, HeadKind::kMaskedLM, "fill-mask");
  tokenizer::Tokenizer const& tok = pipeline.tokenizer();
  std::int64_t const mask_id = tok.mask_token_id();
  FLASHDEBERTA_REQUIRE(mask_id >= 0, "the tokenizer has no mask token ([MASK]), so fill-mask has nothing to fill");
  std::size_t const vocab = static_cast<std::size_t>(pipeline.config().vocab_size);
  std::int64_t const pad_id = tok.special_ids().pad;
  auto const decode = [&](std::span<std::int64_t const> ids, bool skip) { return tok.decode(ids, skip); };

  for_each_batch(*options, [&](std::vector<std::string> const& texts, std::size_t first) {
    std::vector<tokenizer::Encoding> encodings;
    std::vector<std::vector<std::size_t>> masks;
    std::vector<std::size_t> sizes;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      encodings.push_back(pipeline.encode(texts[i], first + i));
      std::vector<std::size_t> at;
      for (std::size_t t = 0; t < encodings.back().size(); ++t)
        if (encodings.back().input_ids[t] == mask_id) at.push_back(t);
      if (at.empty()) {
        fail_text(first + i, "no mask token (" + *tok.id_to_token(mask_id) + ") in the text; fill-mask needs one");
      }
      masks.push_back(std::move(at));
      sizes.push_back(encodings.back().size());
    }
    HeadOutput const out = pipeline.forward(encodings, mask_id, first);
    // The logits rows of the mask tokens only ([M, V], in token order): each goes to its text.
    HostHeadTensor const& logits = out["logits"];
    std::vector<std::vector<float>> rows(texts.size());  // per text: (masks, V)
    std::vector<std::size_t> starts(texts.size() + 1, 0);
    for (std::size_t i = 0; i < texts.size(); ++i) starts[i + 1] = starts[i] + sizes[i];
    for (std::int64_t r = 0; r < logits.row_count; ++r) {
      std::size_t const token = static_cast<std::size_t>(logits.tokens[r]);
      std::size_t const i =
          static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), token) - starts.begin()) - 1;
      FLASHDEBERTA_REQUIRE(i < texts.size(), "fill-mask: logits row " << r << " names token " << token);
      rows[i].insert(rows[i].end(), logits.values.begin() + r * vocab, logits.values.begin() + (r + 1) * vocab);
    }
    for (std::size_t i = 0; i < texts.size(); ++i) {
      auto const predictions =
          pipelines::fill_mask(encodings[i].input_ids, masks[i], rows[i], vocab,
                               static_cast<std::size_t>(options->top_k.value_or(5)), pad_id, decode);
      nlohmann::ordered_json line;
      line["text"] = texts[i];
      nlohmann::ordered_json all = nlohmann::ordered_json::array();
      for (auto const& row : predictions) {
        nlohmann::ordered_json list = nlohmann::ordered_json::array();
        for (auto const& p : row) {
          list.push_back(
              {{"score", p.score}, {"token", p.token}, {"token_str", p.token_str}, {"sequence", p.sequence}});
        }
        all.push_back(std::move(list));
      }
      line["masks"] = std::move(all);
      std::cout << line.dump() << '\n';
    }
  });
  return 0;
}

}  // namespace flashdeberta::cli
