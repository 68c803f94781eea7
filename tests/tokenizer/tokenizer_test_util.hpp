// Scratch directories and error capture for the tokenizer tests.
#pragma once

#include <filesystem>
#include <string>

#include "../sanitized_build.hpp"
#include "../scratch_dir.hpp"
#include "flashdeberta/core/error.hpp"

namespace flashdeberta::test {

// Time bounds are ten times looser under AddressSanitizer.
constexpr double kSlowdown = testing::kAddressSanitized ? 10.0 : 1.0;

using TempDir = testing::ScratchDir;

// The message of the flashdeberta::Error `fn` throws; empty when it does not throw.
template <class Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (Error const& e) {
    return e.what();
  }
  return "";
}

}  // namespace flashdeberta::test
