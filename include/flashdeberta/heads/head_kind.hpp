// Which head runs on top of the backbone: chosen from config.json's `architectures` or explicitly
// (the CLI's --head), checked against the checkpoint's family before any weight is read.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/core/model_config.hpp"

namespace flashdeberta {

enum class HeadKind {
  kBase,                    // the backbone alone: last_hidden_state
  kMaskedLM,                // logits [B, L, V]
  kSequenceClassification,  // logits [B, num_labels]
  kTokenClassification,     // logits [B, L, num_labels]
  kQuestionAnswering,       // start_logits, end_logits [B, L]
  kMultipleChoice,          // logits [B, C] (v2/v3 only)
};

inline constexpr std::array<HeadKind, 6> kAllHeadKinds = {HeadKind::kBase,
                                                          HeadKind::kMaskedLM,
                                                          HeadKind::kSequenceClassification,
                                                          HeadKind::kTokenClassification,
                                                          HeadKind::kQuestionAnswering,
                                                          HeadKind::kMultipleChoice};

// The CLI's short names: base, mlm, seqcls, tokcls, qa, mc.
constexpr std::string_view head_kind_name(HeadKind kind) {
  switch (kind) {
    case HeadKind::kBase:
      return "base";
    case HeadKind::kMaskedLM:
      return "mlm";
    case HeadKind::kSequenceClassification:
      return "seqcls";
    case HeadKind::kTokenClassification:
      return "tokcls";
    case HeadKind::kQuestionAnswering:
      return "qa";
    case HeadKind::kMultipleChoice:
      return "mc";
  }
  return "?";
}

// HF's class name suffix: DebertaV2ForMaskedLM and DebertaForMaskedLM both end in "ForMaskedLM".
constexpr std::string_view head_kind_class_suffix(HeadKind kind) {
  switch (kind) {
    case HeadKind::kBase:
      return "Model";
    case HeadKind::kMaskedLM:
      return "ForMaskedLM";
    case HeadKind::kSequenceClassification:
      return "ForSequenceClassification";
    case HeadKind::kTokenClassification:
      return "ForTokenClassification";
    case HeadKind::kQuestionAnswering:
      return "ForQuestionAnswering";
    case HeadKind::kMultipleChoice:
      return "ForMultipleChoice";
  }
  return "?";
}

inline std::optional<HeadKind> parse_head_kind(std::string_view name) {
  for (HeadKind kind : kAllHeadKinds) {
    if (head_kind_name(kind) == name) return kind;
  }
  return std::nullopt;
}

// The head HF would build from config.json: the first `architectures` entry naming a DeBERTa class
// (Deberta<suffix> or DebertaV2<suffix>) with a known suffix; the backbone alone when there is none
// (the Microsoft v3 checkpoints have no `architectures`). Other classes (e.g. a pretraining model) are
// skipped, since they name no head of this library.
inline HeadKind head_kind_from_config(ModelConfig const& config) {
  for (std::string const& name : config.architectures) {
    std::string_view rest = name;
    if (rest.starts_with("DebertaV2")) {
      rest.remove_prefix(9);
    } else if (rest.starts_with("Deberta")) {
      rest.remove_prefix(7);
    } else {
      continue;
    }
    for (HeadKind kind : kAllHeadKinds) {
      if (rest == head_kind_class_suffix(kind)) return kind;
    }
  }
  return HeadKind::kBase;
}

// Rejects a head the checkpoint's family does not have, naming why. HF has no v1 multiple-choice class.
inline void require_head_supported(ModelConfig const& config, HeadKind kind, std::string const& source) {
  FLASHDEBERTA_REQUIRE(kind != HeadKind::kMultipleChoice || config.model_type == ModelType::kDebertaV2,
                       source << ": the multiple-choice head needs a DeBERTa v2/v3 checkpoint (model_type "
                                 "deberta-v2); this is a v1 checkpoint (model_type deberta), for which HF has no "
                                 "DebertaForMultipleChoice");
}

// `requested` (nullopt: auto) resolved against config.json, and checked.
inline HeadKind resolve_head_kind(ModelConfig const& config, std::optional<HeadKind> requested,
                                  std::string const& source) {
  HeadKind const kind = requested ? *requested : head_kind_from_config(config);
  require_head_supported(config, kind, source);
  return kind;
}

}  // namespace flashdeberta
