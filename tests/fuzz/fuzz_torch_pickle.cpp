// libFuzzer target for pytorch_model.bin. The first byte picks what the rest is:
//   even: a whole torch.save image (zip archive or legacy pickles) for TorchFile::parse;
//   odd:  a bare data.pkl, interpreted by the restricted unpickler against synthetic storages of
//         every size up to 4 KiB, then turned into TensorInfos as the zip reader does.
// Any outcome other than a result or a flashdeberta::Error (a crash, a sanitizer report, a leak,
// another exception type) is a bug. Seeds: tests/fuzz/corpus/torch_pickle (make_torch_fixtures.py).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "flashdeberta/io/torch_checkpoint.hpp"
#include "fuzz_support.hpp"

namespace {

// `image`: the bytes every tensor view must lie in (the input, or the synthetic storage).
void read_all(std::map<std::string, flashdeberta::TensorInfo, std::less<>> const& tensors,
              std::span<std::byte const> image) {
  // Reading every tensor proves the validated views stay inside the image.
  for (auto const& [name, info] : tensors) {
    if (info.numel < 0 ||
        info.bytes.size() != static_cast<std::size_t>(info.numel) * flashdeberta::dtype_size(info.dtype) ||
        (!info.bytes.empty() &&
         (info.bytes.data() < image.data() || info.bytes.data() + info.bytes.size() > image.data() + image.size())))
      __builtin_trap();
    std::vector<float> values;
    if (flashdeberta::is_floating(info.dtype)) {
      values = flashdeberta::detail::tensor_to_f32(info, "fuzz");
    } else {
      values.resize(flashdeberta::detail::tensor_to_i64(info, "fuzz").size());
    }
    if (values.size() != static_cast<std::size_t>(info.numel)) __builtin_trap();
  }
}

}  // namespace

FLASHDEBERTA_FUZZ_TARGET(torch_pickle) {
  if (size == 0) return 0;
  auto const bytes = std::as_bytes(std::span(data + 1, size - 1));
  try {
    if (data[0] % 2 == 0) {
      read_all(flashdeberta::TorchFile::parse(bytes, "fuzz").tensors(), bytes);
    } else {
      static std::vector<std::byte> const kStorage(4096, std::byte{0x3c});
      std::size_t pos = 0;
      flashdeberta::io::TorchStateDict const dict = flashdeberta::io::unpickle_state_dict(
          bytes, pos, "fuzz", "data.pkl", flashdeberta::io::TorchPersistentIds::kZip);
      auto const tensors =
          flashdeberta::detail::torch_tensor_infos("fuzz", dict, [](flashdeberta::io::TorchStorageRef const& ref) {
            std::size_t const elem = flashdeberta::dtype_size(ref.dtype);
            FLASHDEBERTA_REQUIRE(static_cast<std::uint64_t>(ref.numel) <= kStorage.size() / elem,
                                 "fuzz: storage of " << ref.numel << " elements");
            return std::span<std::byte const>(kStorage).first(static_cast<std::size_t>(ref.numel) * elem);
          });
      read_all(tensors, kStorage);
    }
  } catch (flashdeberta::Error const&) {
  }
  return 0;
}
