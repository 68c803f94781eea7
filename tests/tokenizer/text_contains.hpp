// Whether an error message holds the expected part: the tokenizer tests' one string check.
#pragma once

#include <string>

namespace flashdeberta::testing {

inline bool contains(std::string const& haystack, std::string const& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace flashdeberta::testing
