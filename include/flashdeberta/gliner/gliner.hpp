// GLiNER zero-shot NER on the DeBERTa engine (docs/gliner.md): GLiNER<Policy>, its config, inputs and decoding.
#pragma once

#include "flashdeberta/gliner/gliner_config.hpp"
#include "flashdeberta/gliner/gliner_decoding.hpp"
#include "flashdeberta/gliner/gliner_inputs.hpp"
#include "flashdeberta/gliner/gliner_long_text.hpp"
#include "flashdeberta/gliner/gliner_model.hpp"
#include "flashdeberta/gliner/word_splitter.hpp"
