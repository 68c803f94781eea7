// The one JSON writer of the tasks' results: the CLI prints these lines, the server answers them and
// Python converts them to its objects, so a result reads the same in every front end. Each front end adds
// only its envelope (the CLI's {"text": ..., "labels": ...} line, a list for a batch request).
#pragma once

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "flashdeberta/gliner/gliner_decoding.hpp"
#include "flashdeberta/runtime/pipeline.hpp"

namespace flashdeberta::runtime {

using JsonOut = nlohmann::ordered_json;

// fill-mask: [[{"score", "token", "token_str", "sequence"}, ...], ...], one list per mask.
JsonOut masks_json(MaskPredictions const& masks);
// HF's answer for one text: the list of its mask alone when it has one, else a list per mask.
JsonOut fill_mask_answer_json(MaskPredictions const& masks);
// text-classification: [{"label", "score"}, ...] best first.
JsonOut labels_json(std::vector<pipelines::LabelScore> const& labels);
// token-classification: [{"entity_group", "score", "word", "start", "end"}, ...]; with aggregation "none"
// [{"entity", "score", "index", "word", "start", "end"}, ...].
JsonOut entities_json(std::vector<pipelines::Entity> const& entities);
// question-answering: {"score", "start", "end", "answer"}.
JsonOut answer_json(Answer const& answer);
// zero-shot-classification: {"sequence", "labels", "scores"}.
JsonOut zero_shot_json(std::string const& sequence, ZeroShotResult const& result);
// rerank (TEI's /rerank): [{"index", ("text",) "score"}, ...] best first; "text" from `passages` when asked.
JsonOut rerank_json(std::vector<RerankScore> const& ranked, std::span<std::string const> passages, bool return_text);
// GLiNER: [{"start", "end", "text", "label", "score"}, ...].
JsonOut gliner_entities_json(std::vector<GlinerEntity> const& entities);

}  // namespace flashdeberta::runtime
