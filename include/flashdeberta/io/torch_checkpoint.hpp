// Reader for PyTorch checkpoints (pytorch_model.bin) written by torch.save:
//   - the zip format (torch >= 1.6): `<prefix>/data.pkl` holds the pickled state dict, each storage is the
//     stored record `<prefix>/data/<key>`, optional `<prefix>/byteorder` says "little";
//   - the legacy format (torch < 1.6, or `_use_new_zipfile_serialization=False`): pickles of the magic
//     number, the protocol version (1001) and sys_info, the state dict, the sorted storage keys, then
//     each storage as an int64 element count followed by its raw bytes.
// The tar format of torch < 0.4 is detected and rejected.
//
// The pickle is interpreted by a restricted unpickler (torch_pickle.hpp) that executes nothing. Each
// tensor must be a contiguous row-major view inside its storage and is exposed as a TensorInfo over
// the mapping, so tensors sharing a storage (tied weights) are simply two views of the same bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/mapped_file.hpp"
#include "flashdeberta/io/safetensors.hpp"
#include "flashdeberta/io/torch_pickle.hpp"
#include "flashdeberta/io/zip_archive.hpp"

namespace flashdeberta {

namespace detail {

// pickle.dumps(0x1950a86a20f9469cfc6c, protocol=2): the first bytes of every legacy torch.save file.
inline constexpr unsigned char kTorchLegacyMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                                      0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};
inline constexpr std::int64_t kTorchLegacyProtocol = 1001;

inline bool starts_with_bytes(std::span<std::byte const> bytes, std::span<unsigned char const> prefix) {
  if (bytes.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::to_integer<unsigned char>(bytes[i]) != prefix[i]) return false;
  }
  return true;
}

// Checks one tensor of a state dict against its storage (`storage`: the bytes of the whole storage, or
// of the legacy view) and returns its TensorInfo. The tensor must be contiguous in torch's sense:
// dimensions of size 1 may have any stride, and an empty tensor is contiguous whatever its strides.
inline TensorInfo torch_tensor_info(std::string const& source, std::string const& name, io::TorchTensorRecord const& t,
                                    io::TorchStorageRef const& ref, std::span<std::byte const> storage) {
  TensorInfo info;
  info.name = name;
  info.dtype = ref.dtype;
  info.shape = t.shape;
  std::string const tensor = source + ": tensor '" + name + "'";
  FLASHDEBERTA_REQUIRE(t.stride.size() == t.shape.size(), tensor << " has size " << format_shape(t.shape)
                                                                 << " but stride " << format_shape(t.stride)
                                                                 << " (a different number of dimensions)");
  for (std::int64_t d : t.shape) {
    FLASHDEBERTA_REQUIRE(d >= 0, tensor << " has negative size " << format_shape(t.shape));
  }
  std::optional<std::int64_t> const numel = checked_numel(t.shape);
  std::int64_t const elem = static_cast<std::int64_t>(dtype_size(ref.dtype));
  FLASHDEBERTA_REQUIRE(numel && *numel <= std::numeric_limits<std::int64_t>::max() / elem,
                       tensor << " has size " << format_shape(t.shape) << ", whose byte size overflows int64");
  info.numel = *numel;
  if (info.numel == 0) return info;  // no bytes: offset and strides are irrelevant

  std::int64_t expected = 1;
  for (std::size_t d = t.shape.size(); d-- > 0;) {
    FLASHDEBERTA_REQUIRE(t.shape[d] == 1 || t.stride[d] == expected,
                         tensor << " is not contiguous: size " << format_shape(t.shape) << ", stride "
                                << format_shape(t.stride) << " (row-major needs stride " << expected << " in dimension "
                                << d << "); save it after .contiguous()");
    expected *= t.shape[d];
  }
  std::int64_t const available = static_cast<std::int64_t>(storage.size()) / elem;
  FLASHDEBERTA_REQUIRE(t.offset >= 0 && t.offset <= available && info.numel <= available - t.offset,
                       tensor << " (" << dtype_name(ref.dtype) << ", size " << format_shape(t.shape)
                              << ") at storage offset " << t.offset << " needs elements [" << t.offset << ", "
                              << t.offset << " + " << info.numel << "), but storage '" << ref.key << "' holds "
                              << available);
  info.bytes = storage.subspan(static_cast<std::size_t>(t.offset * elem), static_cast<std::size_t>(info.numel * elem));
  return info;
}

// Turns a state dict into TensorInfos; `storage_bytes(ref)` gives the bytes of the whole storage `ref.key`.
inline std::map<std::string, TensorInfo, std::less<>> torch_tensor_infos(
    std::string const& source, io::TorchStateDict const& dict,
    std::function<std::span<std::byte const>(io::TorchStorageRef const&)> const& storage_bytes) {
  std::map<std::string, std::span<std::byte const>, std::less<>> resolved;  // each storage once
  std::map<std::string, TensorInfo, std::less<>> out;
  for (auto const& item : dict.tensors) {  // no structured bindings: clang < 16 cannot capture them
    std::string const& name = item.first;
    io::TorchTensorRecord const& t = item.second;
    io::TorchStorageRef const& ref = dict.storages[t.storage];
    auto it = resolved.find(ref.key);
    if (it == resolved.end()) it = resolved.emplace(ref.key, storage_bytes(ref)).first;
    std::span<std::byte const> storage = it->second;
    if (ref.view_numel >= 0) {  // bounds checked against ref.numel by the unpickler; storage holds ref.numel
      std::size_t const elem = dtype_size(ref.dtype);
      storage = storage.subspan(static_cast<std::size_t>(ref.view_offset) * elem,
                                static_cast<std::size_t>(ref.view_numel) * elem);
    }
    auto const [pos, inserted] = out.emplace(name, torch_tensor_info(source, name, t, ref, storage));
    FLASHDEBERTA_REQUIRE(inserted, source << ": tensor '" << name << "' appears twice in the state dict");
  }
  return out;
}

inline std::string storage_type_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "FloatStorage";
    case DType::kF16:
      return "HalfStorage";
    case DType::kBF16:
      return "BFloat16Storage";
    case DType::kF64:
      return "DoubleStorage";
    case DType::kI64:
      return "LongStorage";
    case DType::kI32:
      return "IntStorage";
    case DType::kI16:
      return "ShortStorage";
    case DType::kI8:
      return "CharStorage";
    case DType::kU8:
      return "ByteStorage";
    case DType::kBool:
      return "BoolStorage";
  }
  return "?";
}

}  // namespace detail

class TorchFile {
 public:
  // Maps the file and reads its state dict; the mapping lives as long as the returned object.
  static TorchFile open(std::filesystem::path const& path) {
    io::MappedFile mapped = io::MappedFile::open(path);
    TorchFile file = parse(mapped.bytes(), path.string());
    // Moving the mapping keeps its address, so the views stay valid.
    file.mapping_ = std::make_shared<io::MappedFile const>(std::move(mapped));
    return file;
  }

  // Parses a torch.save image already in memory (the fuzzer's entry point). `bytes` must outlive the
  // result; `source` names the image in error messages.
  static TorchFile parse(std::span<std::byte const> bytes, std::string source) {
    TorchFile file;
    file.source_ = std::move(source);
    static constexpr unsigned char kZip[] = {'P', 'K', 0x03, 0x04};
    static constexpr unsigned char kEmptyZip[] = {'P', 'K', 0x05, 0x06};
    static constexpr unsigned char kTar[] = {'u', 's', 't', 'a', 'r'};
    if (detail::starts_with_bytes(bytes, kZip) || detail::starts_with_bytes(bytes, kEmptyZip)) {
      file.parse_zip(bytes);
    } else if (detail::starts_with_bytes(bytes, detail::kTorchLegacyMagic)) {
      file.parse_legacy(bytes);
    } else {
      FLASHDEBERTA_REQUIRE(!(bytes.size() > 262 && detail::starts_with_bytes(bytes.subspan(257), kTar)),
                           file.source_ << ": a tar archive: the torch.save format of torch < 0.4 is not supported; "
                                           "re-save the checkpoint with a current torch");
      FLASHDEBERTA_FAIL(file.source_ << ": not a torch.save file (neither a zip archive nor the legacy pickle "
                                        "format; the file is "
                                     << bytes.size() << " bytes)");
    }
    return file;
  }

  std::string const& source() const { return source_; }
  std::map<std::string, TensorInfo, std::less<>> const& tensors() const { return tensors_; }
  std::size_t size() const { return tensors_.size(); }
  bool contains(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (auto const& entry : tensors_) out.push_back(entry.first);
    return out;
  }

  TensorInfo const& info(std::string_view name) const {
    auto it = tensors_.find(name);
    FLASHDEBERTA_REQUIRE(it != tensors_.end(), source_ << ": no tensor named '" << name << "' (the file holds "
                                                       << tensors_.size() << " tensors)");
    return it->second;
  }

  std::vector<float> read_f32(std::string_view name) const { return detail::tensor_to_f32(info(name), source_); }
  std::vector<std::int64_t> read_i64(std::string_view name) const { return detail::tensor_to_i64(info(name), source_); }

  // Lets the pages of a converted tensor leave memory (see MappedFile::release). Tensors sharing its
  // storage read those pages back from the file if touched later.
  void release(TensorInfo const& tensor) const {
    if (mapping_) mapping_->release(tensor.bytes);
  }

  // The mapping every TensorInfo::bytes of this file points into, shared with whoever keeps a tensor's bytes
  // without copying them (Checkpoint::mapped_f32); null for an image parsed from memory.
  std::shared_ptr<io::MappedFile const> const& mapping() const { return mapping_; }

 private:
  TorchFile() = default;

  void parse_zip(std::span<std::byte const> bytes) {
    io::ZipArchive const zip = io::ZipArchive::parse(bytes, source_);
    FLASHDEBERTA_REQUIRE(!zip.entries().empty(), source_ << ": empty zip archive, not a torch.save file");
    // Like torch's reader: the first record's folder is the archive's prefix (the saved file's stem, or "archive").
    std::string const& first = zip.entries().front().name;
    std::string const prefix = first.substr(0, first.find('/')) + "/";
    std::string const pickle_name = prefix + "data.pkl";
    FLASHDEBERTA_REQUIRE(zip.find(pickle_name) != nullptr,
                         source_ << ": zip archive has no '" << pickle_name
                                 << "' record, so it is not a torch.save file (a TorchScript archive or another zip?)");
    if (io::ZipEntry const* order = zip.find(prefix + "byteorder")) {
      std::span<std::byte const> const b = zip.stored_data(*order);
      std::string_view const text(reinterpret_cast<char const*>(b.data()), b.size());
      FLASHDEBERTA_REQUIRE(text == "little", source_ << ": '" << prefix << "byteorder' is '" << text.substr(0, 16)
                                                     << "'; only little-endian data is supported");
    }
    std::span<std::byte const> const pickle = zip.stored_data(pickle_name);
    std::size_t pos = 0;
    io::TorchStateDict const dict =
        io::unpickle_state_dict(pickle, pos, source_, pickle_name, io::TorchPersistentIds::kZip);
    // torch.save writes the pickle and nothing else into the record; torch.load would ignore a tail.
    FLASHDEBERTA_REQUIRE(pos == pickle.size(), source_ << ": " << pickle_name << " has " << pickle.size() - pos
                                                       << " bytes after the pickle's STOP opcode at byte " << pos - 1
                                                       << "; torch.save writes nothing there");
    tensors_ = detail::torch_tensor_infos(source_, dict, [&](io::TorchStorageRef const& ref) {
      std::string const record = prefix + "data/" + ref.key;
      io::ZipEntry const* entry = zip.find(record);
      FLASHDEBERTA_REQUIRE(entry != nullptr,
                           source_ << ": storage '" << ref.key << "' has no record '" << record << "' in the archive");
      std::span<std::byte const> const data = zip.stored_data(*entry);
      std::uint64_t const elem = dtype_size(ref.dtype);
      FLASHDEBERTA_REQUIRE(data.size() / elem == static_cast<std::uint64_t>(ref.numel) && data.size() % elem == 0,
                           source_ << ": record '" << record << "' is " << data.size() << " bytes, but "
                                   << detail::storage_type_name(ref.dtype) << " '" << ref.key << "' of " << ref.numel
                                   << " elements needs " << static_cast<std::uint64_t>(ref.numel) * elem);
      return data;
    });
  }

  void parse_legacy(std::span<std::byte const> bytes) {
    std::size_t pos = sizeof(detail::kTorchLegacyMagic);
    using Kind = io::TorchUnpickler::Kind;
    {
      io::TorchUnpickler u(bytes, source_, "the protocol version pickle", io::TorchPersistentIds::kLegacy);
      auto const v = u.run(pos);
      FLASHDEBERTA_REQUIRE(u.kind(v) == Kind::kInt && v.i == detail::kTorchLegacyProtocol,
                           source_ << ": legacy torch.save protocol version is not " << detail::kTorchLegacyProtocol);
    }
    {
      io::TorchUnpickler u(bytes, source_, "the sys_info pickle", io::TorchPersistentIds::kLegacy);
      auto const info = u.run(pos);
      FLASHDEBERTA_REQUIRE(u.kind(info) == Kind::kDict, source_ << ": legacy sys_info is not a dict");
      for (auto const& [key, value] : u.dict_of(info)) {
        bool const big = u.kind(key) == Kind::kString && u.string_of(key) == "little_endian" &&
                         !(u.kind(value) == Kind::kBool && value.i == 1);
        FLASHDEBERTA_REQUIRE(!big, source_ << ": written on a big-endian machine, which is not supported");
      }
    }
    io::TorchStateDict const dict =
        io::unpickle_state_dict(bytes, pos, source_, "the state dict pickle", io::TorchPersistentIds::kLegacy);
    // The storages the state dict names, by key. The key list must name each of them at most once
    // and nothing else; checking that while reading it means no key is copied that a list of memo
    // references could repeat without bound.
    std::map<std::string, io::TorchStorageRef const*, std::less<>> refs;
    for (auto const& ref : dict.storages) refs.emplace(ref.key, &ref);
    std::vector<io::TorchStorageRef const*> listed;  // in file order
    {
      io::TorchUnpickler u(bytes, source_, "the storage key pickle", io::TorchPersistentIds::kLegacy);
      auto const list = u.run(pos);
      FLASHDEBERTA_REQUIRE(u.kind(list) == Kind::kList, source_ << ": legacy storage keys are not a list");
      std::set<std::string_view> seen;
      for (auto const& key : u.items_of(list)) {
        FLASHDEBERTA_REQUIRE(u.kind(key) == Kind::kString, source_ << ": a legacy storage key is not a string");
        std::string const& name = u.string_of(key);
        auto const it = refs.find(name);
        FLASHDEBERTA_REQUIRE(it != refs.end(), source_ << ": storage '"
                                                       << name.substr(0, io::TorchUnpickler::kMaxStorageKey)
                                                       << "' is listed but no tensor of the state dict uses it");
        FLASHDEBERTA_REQUIRE(seen.insert(it->first).second, source_ << ": storage '" << name << "' is listed twice");
        listed.push_back(it->second);
      }
    }
    // The raw storages follow in the order of the list: int64 element count, then the elements.
    std::map<std::string, std::span<std::byte const>, std::less<>> data;
    for (io::TorchStorageRef const* listed_ref : listed) {
      io::TorchStorageRef const& ref = *listed_ref;
      std::string const& key = ref.key;
      FLASHDEBERTA_REQUIRE(bytes.size() - pos >= 8, source_ << ": storage '" << key << "' starts at byte " << pos
                                                            << ", past the end of the file (" << bytes.size()
                                                            << " bytes); the file is truncated");
      std::uint64_t count = 0;
      for (int i = 7; i >= 0; --i) count = (count << 8) | std::to_integer<std::uint64_t>(bytes[pos + i]);
      pos += 8;
      FLASHDEBERTA_REQUIRE(
          count == static_cast<std::uint64_t>(ref.numel),
          source_ << ": storage '" << key << "' holds " << count << " elements, but the state dict says " << ref.numel);
      std::uint64_t const elem = dtype_size(ref.dtype);
      FLASHDEBERTA_REQUIRE(count <= (bytes.size() - pos) / elem,
                           source_ << ": storage '" << key << "' (" << detail::storage_type_name(ref.dtype) << " of "
                                   << count << " elements) at byte " << pos << " runs past the end of the file ("
                                   << bytes.size() << " bytes); the file is truncated");
      data.emplace(key, bytes.subspan(pos, count * elem));
      pos += count * elem;
    }
    tensors_ = detail::torch_tensor_infos(source_, dict, [&](io::TorchStorageRef const& ref) {
      auto const it = data.find(ref.key);
      FLASHDEBERTA_REQUIRE(it != data.end(), source_ << ": storage '" << ref.key
                                                     << "' is used by a tensor but missing from the storage list");
      return it->second;
    });
  }

  std::string source_;
  std::shared_ptr<io::MappedFile const> mapping_;  // null for an image parsed from memory
  std::map<std::string, TensorInfo, std::less<>> tensors_;
};

}  // namespace flashdeberta
