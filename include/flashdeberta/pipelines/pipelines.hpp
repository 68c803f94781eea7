// HF's pipelines after the model (fill-mask, text classification, token classification with simple
// aggregation, question answering): host code on logits and the tokenizer's encodings, no policy.
#pragma once

#include "flashdeberta/pipelines/fill_mask.hpp"
#include "flashdeberta/pipelines/question_answering.hpp"
#include "flashdeberta/pipelines/scores.hpp"
#include "flashdeberta/pipelines/text_classification.hpp"
#include "flashdeberta/pipelines/text_span.hpp"
#include "flashdeberta/pipelines/token_classification.hpp"
