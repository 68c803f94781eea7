// libFuzzer target: arbitrary bytes as a safetensors image. Any outcome other than a parsed file or a
// flashdeberta::Error (a crash, a sanitizer report, another exception type) is a bug.
#include <cstddef>
#include <cstdint>
#include <span>

#include "flashdeberta/io/safetensors.hpp"
#include "fuzz_support.hpp"

FLASHDEBERTA_FUZZ_TARGET(safetensors) {
  try {
    auto const file = flashdeberta::SafetensorsFile::parse(std::as_bytes(std::span(data, size)), "fuzz");
    // Reading every tensor proves the validated views stay inside the image.
    for (auto const& name : file.names()) {
      flashdeberta::TensorInfo const& info = file.info(name);
      // The view must be the tensor's whole byte size and lie inside the image.
      auto const* const begin = reinterpret_cast<std::byte const*>(data);
      if (info.numel < 0 ||
          info.bytes.size() != static_cast<std::size_t>(info.numel) * flashdeberta::dtype_size(info.dtype) ||
          (!info.bytes.empty() && (info.bytes.data() < begin || info.bytes.data() + info.bytes.size() > begin + size)))
        __builtin_trap();
      if (flashdeberta::is_floating(info.dtype)) {
        if (file.read_f32(name).size() != static_cast<std::size_t>(info.numel)) __builtin_trap();
      } else {
        if (file.read_i64(name).size() != static_cast<std::size_t>(info.numel)) __builtin_trap();
      }
    }
    (void)file.metadata();
  } catch (flashdeberta::Error const&) {
  }
  return 0;
}
