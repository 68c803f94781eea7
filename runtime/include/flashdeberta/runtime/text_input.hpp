// One input of text classification, as every front end reads it: a text, or a text and its pair
// ([CLS] text [SEP] pair [SEP], HF's {"text", "text_pair"}).
#pragma once

#include <optional>
#include <string>

namespace flashdeberta::runtime {

struct TextInput {
  std::string text;
  std::optional<std::string> pair;
};

}  // namespace flashdeberta::runtime
