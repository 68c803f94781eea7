// The heads this library runs, listed once: what each head is (its CLI name, HF's class-name suffix, how
// messages describe it, the input layout it takes, whether it pools a position) sits in kHeadFacts, and
// every name, parse and check below folds over that list. The head's template registers itself in its own
// file (RegisteredHead, heads/registered_head.hpp), where dispatch_head finds it. Adding a head: its file,
// its enumerator and its row here (docs/extending.md).
#pragma once

#include <array>
#include <cstddef>
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

// The token inputs a head takes: [B][L] rows, [B][C][L] choices, or either (the backbone).
enum class HeadInputLayout { kRows, kChoices, kRowsOrChoices };

struct HeadFacts {
  HeadKind kind;
  std::string_view name;          // the CLI's --head and Python's head names
  std::string_view class_suffix;  // HF's architectures: Deberta<suffix>, DebertaV2<suffix>
  std::string_view description;   // in messages: "a masked-LM checkpoint"
  HeadInputLayout layout;
  bool pools_first_token;  // reads position 0 of each row (HF's hidden_states[:, 0]): left padding is refused
  bool v2_only;            // HF has no v1 class for it
};

// The list, in HeadKind's order (checked below).
inline constexpr std::array kHeadFacts = {
    HeadFacts{HeadKind::kBase, "base", "Model", "backbone", HeadInputLayout::kRowsOrChoices, false, false},
    HeadFacts{HeadKind::kMaskedLM, "mlm", "ForMaskedLM", "masked-LM", HeadInputLayout::kRows, false, false},
    HeadFacts{HeadKind::kSequenceClassification, "seqcls", "ForSequenceClassification", "sequence-classification",
              HeadInputLayout::kRows, true, false},
    HeadFacts{HeadKind::kTokenClassification, "tokcls", "ForTokenClassification", "token-classification",
              HeadInputLayout::kRows, false, false},
    HeadFacts{HeadKind::kQuestionAnswering, "qa", "ForQuestionAnswering", "question-answering", HeadInputLayout::kRows,
              false, false},
    HeadFacts{HeadKind::kMultipleChoice, "mc", "ForMultipleChoice", "multiple-choice", HeadInputLayout::kChoices, true,
              true},
};

consteval bool head_facts_in_order() {
  for (std::size_t i = 0; i < kHeadFacts.size(); ++i) {
    if (static_cast<std::size_t>(kHeadFacts[i].kind) != i) return false;
  }
  return true;
}
static_assert(head_facts_in_order(), "kHeadFacts must list every HeadKind once, in the enum's order");

constexpr HeadFacts const& head_facts(HeadKind kind) { return kHeadFacts[static_cast<std::size_t>(kind)]; }

// The CLI's short names: base, mlm, seqcls, tokcls, qa, mc.
constexpr std::string_view head_kind_name(HeadKind kind) { return head_facts(kind).name; }
// HF's class name suffix: DebertaV2ForMaskedLM and DebertaForMaskedLM both end in "ForMaskedLM".
constexpr std::string_view head_kind_class_suffix(HeadKind kind) { return head_facts(kind).class_suffix; }
// What a checkpoint with this head is, in messages: "backbone", "masked-LM", "sequence-classification", ...
constexpr std::string_view head_description(HeadKind kind) { return head_facts(kind).description; }

// "base, mlm, seqcls, tokcls, qa, mc": the names, for messages.
inline std::string head_kind_names() {
  std::string out;
  for (HeadFacts const& f : kHeadFacts) out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

inline std::optional<HeadKind> parse_head_kind(std::string_view name) {
  for (HeadFacts const& f : kHeadFacts) {
    if (f.name == name) return f.kind;
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
    for (HeadFacts const& f : kHeadFacts) {
      if (rest == f.class_suffix) return f.kind;
    }
  }
  return HeadKind::kBase;
}

// Rejects a head the checkpoint's family does not have, naming why (HF has no v1 multiple-choice class).
inline void require_head_supported(ModelConfig const& config, HeadKind kind, std::string const& source) {
  HeadFacts const& f = head_facts(kind);
  FLASHDEBERTA_REQUIRE(!f.v2_only || config.model_type == ModelType::kDebertaV2,
                       source << ": the " << f.description << " head needs a DeBERTa v2/v3 checkpoint (model_type "
                              << "deberta-v2); this is a v1 checkpoint (model_type deberta), for which HF has no "
                              << "Deberta" << f.class_suffix);
}

// `requested` (nullopt: auto) resolved against config.json, and checked.
inline HeadKind resolve_head_kind(ModelConfig const& config, std::optional<HeadKind> requested,
                                  std::string const& source) {
  HeadKind const kind = requested ? *requested : head_kind_from_config(config);
  require_head_supported(config, kind, source);
  return kind;
}

}  // namespace flashdeberta
