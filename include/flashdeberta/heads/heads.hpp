// Umbrella header of the heads: masked LM, sequence and token classification, question answering,
// multiple choice, and DebertaWith<Variant, Policy, Head> that composes one with the backbone.
#pragma once

#include "flashdeberta/heads/deberta_with.hpp"
#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/heads/head_output.hpp"
