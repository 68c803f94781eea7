// libFuzzer target: arbitrary bytes as the zip container of a torch.save file, read by ZipArchive
// alone (fuzz_torch_pickle goes on through the pickle; this target spends its time on the directory,
// local headers and ZIP64 records). An accepted archive must give every entry once, findable by its
// name, with its data inside the image and before the central directory. Any other outcome than that
// or a flashdeberta::Error is a bug.
#include <cstddef>
#include <cstdint>
#include <span>

#include "flashdeberta/io/zip_archive.hpp"
#include "fuzz_support.hpp"

namespace fz = flashdeberta::fuzz;

FLASHDEBERTA_FUZZ_TARGET(zip_archive) {
  auto const image = std::as_bytes(std::span(data, size));
  try {
    auto const zip = flashdeberta::io::ZipArchive::parse(image, "fuzz");
    for (flashdeberta::io::ZipEntry const& entry : zip.entries()) {
      fz::fuzz_check(zip.find(entry.name) == &entry, "an entry is not found under its own name");
      fz::fuzz_check(entry.data_offset <= size && entry.compressed_size <= size - entry.data_offset,
                     "an entry's data lies outside the image");
      if (entry.method != 0) continue;
      std::span<std::byte const> const bytes = zip.stored_data(entry);
      fz::fuzz_check(bytes.size() == entry.size && bytes.data() == image.data() + entry.data_offset,
                     "stored_data is not the entry's range of the image");
      volatile std::byte sink{};  // touch the ends: ASan sees a read outside the input
      if (!bytes.empty()) sink = bytes.front() ^ bytes.back();
      (void)sink;
    }
  } catch (flashdeberta::Error const&) {
  }
  return 0;
}
