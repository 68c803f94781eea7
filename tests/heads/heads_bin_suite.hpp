// The heads from pytorch_model.bin: every fixture of heads_suite.hpp converted at test time (config.json
// plus pytorch_model.bin, no model.safetensors) and checked against the same HF outputs at the same
// tolerance. Host policies only: the converter (tests/unit/torch_bin_writer.hpp) is host test code, so
// the CUDA heads test includes heads_suite.hpp alone.
#pragma once

#include <filesystem>

#include "../unit/torch_bin_writer.hpp"
#include "heads_suite.hpp"

namespace flashdeberta::testing {

template <ExecutionPolicy P>
void run_head_torch_bin_suite(P const& policy) {
  auto const dirs = head_fixture_directories();
  REQUIRE_MESSAGE(dirs.size() > 1, "no head fixtures under " << heads_fixture_dir().string());
  for (auto const& dir : dirs) {
    SUBCASE(dir.filename().string().c_str()) {
      // convert_to_torch keeps each tensor's dtype (F32, F16, BF16, ...), so any fixture converts.
      flashdeberta::test::TempDir const converted;
      std::filesystem::copy_file(dir / "config.json", converted / "config.json");
      flashdeberta::test::torch_bin::convert_to_torch(dir / "model.safetensors", converted.path());
      REQUIRE(std::filesystem::exists(converted / "pytorch_model.bin"));
      REQUIRE(!std::filesystem::exists(converted / "model.safetensors"));
      check_head_fixture(policy, dir, converted.path(), " (from pytorch_model.bin)");
    }
  }
}

}  // namespace flashdeberta::testing
