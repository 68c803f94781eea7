// HF's pipelines after the model (fill-mask, text classification, token classification with every
// aggregation strategy, question answering over overlapping windows, zero-shot classification), TEI's
// rerank and embedding pooling: host code on logits, hidden states and the tokenizer's encodings, no policy.
#pragma once

#include "flashdeberta/pipelines/embedding.hpp"
#include "flashdeberta/pipelines/fill_mask.hpp"
#include "flashdeberta/pipelines/qa_windows.hpp"
#include "flashdeberta/pipelines/question_answering.hpp"
#include "flashdeberta/pipelines/rerank.hpp"
#include "flashdeberta/pipelines/scores.hpp"
#include "flashdeberta/pipelines/text_classification.hpp"
#include "flashdeberta/pipelines/text_span.hpp"
#include "flashdeberta/pipelines/token_classification.hpp"
#include "flashdeberta/pipelines/word_aggregation.hpp"
#include "flashdeberta/pipelines/zero_shot.hpp"
