// Test-time writers of torch.save files: a stored zip archive, torch-style state-dict pickles, and a
// converter from a safetensors checkpoint to pytorch_model.bin. Host-only; shared by
// tests/unit/test_torch_checkpoint.cpp and the heads suites (tests/heads/heads_bin_suite.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "flashdeberta/io/safetensors.hpp"
#include "flashdeberta/io/torch_checkpoint.hpp"
#include "io_test_util.hpp"

namespace flashdeberta::test::torch_bin {

inline void put_le(std::string& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>(i < 8 ? (v >> (8 * i)) & 0xFF : 0));
}

struct ZipRecord {
  std::string name;
  std::string data;
  std::uint16_t method = 0;
};

// A zip archive as torch writes it (stored records, no data descriptors); with `zip64`, every entry and
// the end of the directory use ZIP64 records with the 32-bit fields saturated.
inline std::string make_zip(std::vector<ZipRecord> const& records, bool zip64 = false) {
  std::string out, directory;
  for (auto const& r : records) {
    std::uint64_t const local = out.size();
    put_le(out, 0x04034b50, 4);
    put_le(out, 20, 2);
    put_le(out, 0, 2);
    put_le(out, r.method, 2);
    put_le(out, 0, 8);  // time, date, crc (never checked)
    put_le(out, r.data.size(), 4);
    put_le(out, r.data.size(), 4);
    put_le(out, r.name.size(), 2);
    put_le(out, 0, 2);
    out += r.name + r.data;

    put_le(directory, 0x02014b50, 4);
    put_le(directory, 45, 2);
    put_le(directory, 45, 2);
    put_le(directory, 0, 2);
    put_le(directory, r.method, 2);
    put_le(directory, 0, 8);
    put_le(directory, zip64 ? 0xFFFFFFFF : r.data.size(), 4);
    put_le(directory, zip64 ? 0xFFFFFFFF : r.data.size(), 4);
    put_le(directory, r.name.size(), 2);
    put_le(directory, zip64 ? 28 : 0, 2);
    put_le(directory, 0, 2 + 2 + 2 + 4);  // comment length, disk, internal and external attributes
    put_le(directory, zip64 ? 0xFFFFFFFF : local, 4);
    directory += r.name;
    if (zip64) {
      put_le(directory, 0x0001, 2);
      put_le(directory, 24, 2);
      put_le(directory, r.data.size(), 8);
      put_le(directory, r.data.size(), 8);
      put_le(directory, local, 8);
    }
  }
  std::uint64_t const cd_offset = out.size();
  out += directory;
  if (zip64) {
    std::uint64_t const record = out.size();
    put_le(out, 0x06064b50, 4);
    put_le(out, 44, 8);
    put_le(out, 45, 2);
    put_le(out, 45, 2);
    put_le(out, 0, 8);
    put_le(out, records.size(), 8);
    put_le(out, records.size(), 8);
    put_le(out, directory.size(), 8);
    put_le(out, cd_offset, 8);
    put_le(out, 0x07064b50, 4);
    put_le(out, 0, 4);
    put_le(out, record, 8);
    put_le(out, 1, 4);
  }
  put_le(out, 0x06054b50, 4);
  put_le(out, 0, 4);
  put_le(out, zip64 ? 0xFFFF : records.size(), 2);
  put_le(out, zip64 ? 0xFFFF : records.size(), 2);
  put_le(out, zip64 ? 0xFFFFFFFF : directory.size(), 4);
  put_le(out, zip64 ? 0xFFFFFFFF : cd_offset, 4);
  put_le(out, 0, 2);
  return out;
}

inline std::string str(std::string const& s) {  // BINUNICODE
  std::string out = "X";
  put_le(out, s.size(), 4);
  return out + s;
}
inline std::string integer(std::int64_t v) {  // LONG1 with 8 bytes: any int64
  std::string out = "\x8a\x08";
  put_le(out, static_cast<std::uint64_t>(v), 8);
  return out;
}
inline std::string global(std::string const& module, std::string const& name) {
  return "c" + module + "\n" + name + "\n";
}
inline std::string int_tuple(std::vector<std::int64_t> const& v) {
  std::string out = "(";
  for (std::int64_t x : v) out += integer(x);
  return out + "t";
}

struct FakeTensor {
  std::string name;
  std::string key;
  std::int64_t storage_numel = 0;
  std::int64_t offset = 0;
  std::vector<std::int64_t> size;
  std::vector<std::int64_t> stride;
  std::string storage_type = "FloatStorage";
};

inline std::vector<std::int64_t> row_major(std::vector<std::int64_t> const& size) {
  std::vector<std::int64_t> stride(size.size(), 1);
  for (std::size_t d = size.size(); d-- > 1;) stride[d - 1] = stride[d] * size[d];
  return stride;
}

// What torch.save writes for an OrderedDict of tensors (torch 1.13's opcodes, without the memo). The
// legacy format's persistent ids carry a sixth element, the storage view (None here).
inline std::string state_dict_pickle(std::vector<FakeTensor> const& tensors, bool legacy = false) {
  std::string p = "\x80\x02" + global("collections", "OrderedDict") + ")R(";
  for (auto const& t : tensors) {
    p += str(t.name) + global("torch._utils", "_rebuild_tensor_v2") + "((" + str("storage") +
         global("torch", t.storage_type) + str(t.key) + str("cpu") + integer(t.storage_numel) + (legacy ? "N" : "") +
         "tQ" + integer(t.offset) + int_tuple(t.size) + int_tuple(t.stride) + "\x89" +
         global("collections", "OrderedDict") + ")RtR";
  }
  return p + "u.";
}

// A torch.save zip image: `pickle` as archive/data.pkl plus the given storage records.
inline std::string torch_zip(std::string const& pickle,
                             std::vector<std::pair<std::string, std::string>> const& storages = {},
                             bool zip64 = false) {
  std::vector<ZipRecord> records = {{"archive/data.pkl", pickle}};
  for (auto const& [key, data] : storages) records.push_back({"archive/data/" + key, data});
  records.push_back({"archive/version", "3\n"});
  return make_zip(records, zip64);
}

// A legacy torch.save image (torch < 1.6): the magic number, protocol 1001 and sys_info pickles, then
// `dict_pickle` (written with legacy = true), `keys_pickle` (the list of storage keys) and the raw
// storages, each an int64 element count and its bytes.
struct LegacyStorage {
  std::int64_t numel = 0;
  std::string data;
};
inline std::string torch_legacy(std::string const& dict_pickle, std::string const& keys_pickle,
                                std::vector<LegacyStorage> const& storages = {}) {
  std::string out(std::begin(flashdeberta::detail::kTorchLegacyMagic),
                  std::end(flashdeberta::detail::kTorchLegacyMagic));
  out += "\x80\x02M\xe9\x03.";  // BININT2 1001
  out += "\x80\x02}(" + str("little_endian") + "\x88u.";
  out += dict_pickle + keys_pickle;
  for (auto const& s : storages) {
    put_le(out, static_cast<std::uint64_t>(s.numel), 8);
    out += s.data;
  }
  return out;
}

// Converts a safetensors checkpoint to pytorch_model.bin in `dir`, one storage per tensor, each tensor
// keeping its dtype (FloatStorage, HalfStorage, BFloat16Storage, ... as torch.save names them).
inline void convert_to_torch(std::filesystem::path const& safetensors, std::filesystem::path const& dir) {
  SafetensorsFile const file = SafetensorsFile::open(safetensors);
  std::vector<FakeTensor> tensors;
  std::vector<std::pair<std::string, std::string>> storages;
  for (auto const& [name, info] : file.tensors()) {
    std::string const key = std::to_string(storages.size());
    tensors.push_back({name, key, info.numel, 0, info.shape, row_major(info.shape),
                       flashdeberta::detail::storage_type_name(info.dtype)});
    storages.emplace_back(key, std::string(reinterpret_cast<char const*>(info.bytes.data()), info.bytes.size()));
  }
  write_file(dir / "pytorch_model.bin", torch_zip(state_dict_pickle(tensors), storages));
}

}  // namespace flashdeberta::test::torch_bin
