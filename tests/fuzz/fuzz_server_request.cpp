// libFuzzer target: the HTTP server's request bodies (apps/server/requests.cpp, tei_requests.cpp), the bytes a
// client sends to /predict, /rerank, /embed, /tokenize, /zero-shot, /fill-mask, /ner, /gliner, /embed_all,
// /similarity, /v1/embeddings, /decode and /text-classification. Each body goes
// through every route's parser. A body is either taken, within the limits (no more inputs, texts or labels than
// max_client_batch_size), or refused with an ApiError of a 4xx status; anything else (another exception, a
// crash, a hang) is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.hpp"
#include "server/api_error.hpp"
#include "server/requests.hpp"
#include "server/tei_requests.hpp"

namespace fz = flashdeberta::fuzz;
namespace server = flashdeberta::cli::server;

namespace {

constexpr server::RequestLimits kLimits{4};

template <class Parse, class Check>
void try_route(std::string_view body, Parse const& parse, Check const& check) {
  try {
    check(parse(body, kLimits));
  } catch (server::ApiError const& e) {
    fz::fuzz_check(e.status() >= 400 && e.status() < 500, "a request refused with a status outside 4xx");
  }
}

bool within(std::size_t count) { return count <= kLimits.max_client_batch_size; }

}  // namespace

FLASHDEBERTA_FUZZ_TARGET(server_request) {
  std::string_view const body = fz::as_text(data, size);
  try_route(body, server::parse_predict_request, [](auto const& r) {
    fz::fuzz_check(!r.inputs.empty() && within(r.inputs.size()), "/predict: inputs outside the limits taken");
  });
  try_route(body, server::parse_rerank_request, [](auto const& r) {
    fz::fuzz_check(!r.texts.empty() && within(r.texts.size()), "/rerank: texts outside the limits taken");
  });
  // TEI's Input: one input, or a list within the limits; token ids never an empty list.
  auto const inputs_within = [](server::EmbedInputs const& in) {
    if (in.inputs.empty() || (!in.batch && in.inputs.size() != 1) || !within(in.inputs.size())) return false;
    for (auto const& input : in.inputs)
      if (input.ids && input.ids->empty()) return false;
    return true;
  };
  try_route(body, server::parse_embed_request,
            [&](auto const& r) { fz::fuzz_check(inputs_within(r.inputs), "/embed: inputs outside the limits taken"); });
  try_route(body, server::parse_embed_all_request, [&](auto const& r) {
    fz::fuzz_check(inputs_within(r.inputs), "/embed_all: inputs outside the limits taken");
  });
  try_route(body, server::parse_openai_embeddings_request, [&](auto const& r) {
    fz::fuzz_check(inputs_within(r.inputs), "/v1/embeddings: input outside the limits taken");
  });
  try_route(body, server::parse_similarity_request, [](auto const& r) {
    fz::fuzz_check(!r.sentences.empty() && within(r.sentences.size() + 1), "/similarity: sentences outside the limits");
  });
  try_route(body, server::parse_decode_request, [](auto const& r) {
    bool ok = !r.ids.empty() && within(r.ids.size());
    for (auto const& ids : r.ids) ok = ok && !ids.empty();
    fz::fuzz_check(ok, "/decode: ids outside the limits taken");
  });
  try_route(body, server::parse_text_classification_request, [](auto const& r) {
    fz::fuzz_check(!r.inputs.empty() && within(r.inputs.size()), "/text-classification: inputs outside the limits");
  });
  try_route(body, server::parse_tokenize_request, [](auto const& r) {
    fz::fuzz_check(!r.inputs.empty() && within(r.inputs.size()), "/tokenize: inputs outside the limits taken");
  });
  try_route(body, server::parse_zero_shot_request, [](auto const& r) {
    fz::fuzz_check(!r.inputs.empty() && within(r.inputs.size()) && !r.candidate_labels.empty(),
                   "/zero-shot: inputs or labels outside the limits taken");
  });
  try_route(body, server::parse_fill_mask_request, [](auto const& r) {
    fz::fuzz_check(!r.inputs.empty() && within(r.inputs.size()), "/fill-mask: inputs outside the limits taken");
  });
  try_route(body, server::parse_ner_request, [](auto const& r) {
    fz::fuzz_check(!r.inputs.empty() && within(r.inputs.size()), "/ner: inputs outside the limits taken");
  });
  try_route(body, server::parse_gliner_request, [](auto const& r) {
    fz::fuzz_check(!r.texts.empty() && within(r.texts.size()) && !r.labels.empty() && within(r.labels.size()) &&
                       r.threshold >= 0.0 && r.threshold <= 1.0,
                   "/gliner: texts, labels or threshold outside the limits taken");
  });
  return 0;
}
