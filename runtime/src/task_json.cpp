#include "flashdeberta/runtime/task_json.hpp"

namespace flashdeberta::runtime {

JsonOut masks_json(MaskPredictions const& masks) {
  JsonOut all = JsonOut::array();
  for (auto const& row : masks) {
    JsonOut list = JsonOut::array();
    for (pipelines::MaskPrediction const& p : row)
      list.push_back({{"score", p.score}, {"token", p.token}, {"token_str", p.token_str}, {"sequence", p.sequence}});
    all.push_back(std::move(list));
  }
  return all;
}

JsonOut fill_mask_answer_json(MaskPredictions const& masks) {
  JsonOut all = masks_json(masks);
  return all.size() == 1 ? std::move(all[0]) : std::move(all);
}

JsonOut labels_json(std::vector<pipelines::LabelScore> const& labels) {
  JsonOut list = JsonOut::array();
  for (pipelines::LabelScore const& s : labels) list.push_back({{"label", s.label}, {"score", s.score}});
  return list;
}

JsonOut entities_json(std::vector<pipelines::Entity> const& entities) {
  JsonOut list = JsonOut::array();
  for (pipelines::Entity const& e : entities) {
    if (e.index) {  // aggregation "none": HF's per-token entity
      list.push_back({{"entity", e.entity_group},
                      {"score", e.score},
                      {"index", *e.index},
                      {"word", e.word},
                      {"start", e.start},
                      {"end", e.end}});
      continue;
    }
    list.push_back(
        {{"entity_group", e.entity_group}, {"score", e.score}, {"word", e.word}, {"start", e.start}, {"end", e.end}});
  }
  return list;
}

JsonOut answer_json(Answer const& answer) {
  return {{"score", answer.score}, {"start", answer.start}, {"end", answer.end}, {"answer", answer.answer}};
}

JsonOut zero_shot_json(std::string const& sequence, ZeroShotResult const& result) {
  return {{"sequence", sequence}, {"labels", result.labels}, {"scores", result.scores}};
}

JsonOut rerank_json(std::vector<RerankScore> const& ranked, std::span<std::string const> passages, bool return_text) {
  JsonOut list = JsonOut::array();
  for (RerankScore const& r : ranked) {
    JsonOut entry;
    entry["index"] = r.index;
    if (return_text) entry["text"] = passages[r.index];
    entry["score"] = r.score;
    list.push_back(std::move(entry));
  }
  return list;
}

JsonOut gliner_entities_json(std::vector<GlinerEntity> const& entities) {
  JsonOut list = JsonOut::array();
  for (GlinerEntity const& e : entities)
    list.push_back({{"start", e.start}, {"end", e.end}, {"text", e.text}, {"label", e.label}, {"score", e.score}});
  return list;
}

}  // namespace flashdeberta::runtime
