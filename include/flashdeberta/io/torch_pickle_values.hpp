// What the restricted unpickler (torch_pickle.hpp) builds: the state dict it returns (storages named by
// persistent ids, tensor records that view them) and the values on its stack while it runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "flashdeberta/core/dtype.hpp"

namespace flashdeberta::io {

// What a persistent id ('storage', storage_type, key, location, numel[, view]) names: the record
// `data/<key>` of the archive (or the key's slot after a legacy file's pickles), `numel` elements.
struct TorchStorageRef {
  std::string key;
  DType dtype = DType::kF32;
  std::int64_t numel = 0;        // elements of the whole storage
  std::int64_t view_offset = 0;  // legacy storage views (torch < 0.4): first element inside the storage
  std::int64_t view_numel = -1;  // and length; -1 for the whole storage
};

// _rebuild_tensor_v2(storage, offset, size, stride, ...), checked only for types here; shapes and
// bounds are checked where the tensor's name is known (torch_checkpoint.hpp).
struct TorchTensorRecord {
  std::size_t storage = 0;  // index into TorchStateDict::storages
  std::int64_t offset = 0;  // elements into the storage
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> stride;
};

struct TorchStateDict {
  std::vector<TorchStorageRef> storages;
  std::vector<std::pair<std::string, TorchTensorRecord>> tensors;  // in file order
};

// Zip archives write 5-element persistent ids; the legacy format adds view metadata as a sixth.
enum class TorchPersistentIds { kZip, kLegacy };

namespace detail {

enum class PickleKind : std::uint8_t {
  // clang-format off
  kNone, kBool, kInt, kFloat, kString, kTuple, kList, kDict, kGlobal, kStorage, kTensor
  // clang-format on
};
enum class PickleGlobal : std::uint8_t {
  kOrderedDict,
  kRebuildTensorV2,
  kRebuildTensor,
  kRebuildParameter,
  kStorageType
};

// A value on the machine's stack. Containers, strings, storages and tensors live in the machine's
// arenas and are referred to by index, so the memo shares them as pickle requires and a self-referencing
// pickle cannot leak or recurse. 16 bytes: containers of memo references are the commonest large thing.
struct PickleValue {
  PickleKind kind = PickleKind::kNone;
  std::uint32_t ref = 0;  // arena index; kGlobal kStorageType: the DType
  std::int64_t i = 0;     // kBool, kInt; kGlobal: the PickleGlobal; kFloat: the double's bits (never read)
};
static_assert(sizeof(PickleValue) == 16, "the memory budget charges 16 bytes per value");

// With its article, for "found a tuple", "is an int".
inline char const* pickle_kind_name(PickleKind k) {
  constexpr char const* kNames[] = {"None",   "a bool", "an int",   "a float",   "a string", "a tuple",
                                    "a list", "a dict", "a global", "a storage", "a tensor"};
  return kNames[static_cast<int>(k)];
}

}  // namespace detail
}  // namespace flashdeberta::io
