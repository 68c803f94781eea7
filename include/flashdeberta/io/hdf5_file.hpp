// A read-only view of an HDF5 file through libhdf5 (Debian's libhdf5-dev), for Keras 3 weight files: every
// dataset's path, dtype and shape, the string attributes Keras writes, and checked reads.
//
// Only what Keras' save_weights writes is accepted, so that a hostile file cannot make the reader allocate
// or follow more than the file itself holds: hard links only (a soft or external link could point into
// another file), float datasets (float16/32/64, and bfloat16 as Keras marks it: a 2-byte opaque type with
// the attribute dtype="bfloat16"), unfiltered storage whose size is the declared size (so the declared
// dimensions are checked against bytes that exist before anything is allocated), at most kMaxObjects objects
// and kMaxDepth levels (hard links may form cycles). libhdf5 is thread-safe in Debian's build; a process-wide
// lock still serializes every call here, as HDF5 asks of builds that are not.
#pragma once

#if !FLASHDEBERTA_WITH_HDF5
#error "flashdeberta/io/hdf5_file.hpp needs libhdf5: link flashdeberta::core from a build configured with HDF5"
#endif

#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/hdf5_preflight.hpp"
#include "flashdeberta/io/mapped_file.hpp"
#include "flashdeberta/io/regular_file.hpp"

namespace flashdeberta::io {

struct Hdf5Dataset {
  std::string path;  // "layers/dense_1/vars/0", no leading slash
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::int64_t numel = 0;
};

namespace detail {

inline constexpr std::size_t kMaxObjects = 1'000'000;
inline constexpr int kMaxDepth = 64;
inline constexpr int kMaxRank = 8;
inline constexpr std::size_t kMaxAttributeBytes = 1 << 16;

inline std::mutex& hdf5_lock() {
  static std::mutex lock;
  return lock;
}

// An hid_t closed by its matching H5*close when the owner goes.
class Hdf5Id {
 public:
  using Close = herr_t (*)(hid_t);
  Hdf5Id() = default;
  Hdf5Id(hid_t id, Close close) : id_(id), close_(close) {}
  Hdf5Id(Hdf5Id&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)), close_(other.close_) {}
  Hdf5Id& operator=(Hdf5Id&& other) noexcept {
    std::swap(id_, other.id_);
    std::swap(close_, other.close_);
    return *this;
  }
  Hdf5Id(Hdf5Id const&) = delete;
  Hdf5Id& operator=(Hdf5Id const&) = delete;
  ~Hdf5Id() {
    if (id_ >= 0 && close_ != nullptr) close_(id_);
  }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Close close_ = nullptr;
};

// The innermost message libhdf5 left on this thread's error stack ("truncated file: eof = ...").
inline std::string hdf5_error_message() {
  std::string message;
  auto const walk = [](unsigned n, H5E_error2_t const* err, void* data) -> herr_t {
    auto& out = *static_cast<std::string*>(data);
    if (n == 0 && err != nullptr && err->desc != nullptr) out = err->desc;
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk, &message);
  H5Eclear2(H5E_DEFAULT);
  return message.empty() ? std::string("libhdf5 gave no reason") : message;
}

inline char const* type_class_name(H5T_class_t type_class) {
  switch (type_class) {
    case H5T_INTEGER:
      return "an integer";
    case H5T_FLOAT:
      return "a float";
    case H5T_STRING:
      return "a string";
    case H5T_OPAQUE:
      return "an opaque";
    case H5T_COMPOUND:
      return "a compound";
    case H5T_ARRAY:
      return "an array";
    case H5T_ENUM:
      return "an enum";
    case H5T_VLEN:
      return "a variable-length";
    case H5T_REFERENCE:
      return "a reference";
    default:
      return "an unknown";
  }
}

// Where an object is in the file, to tell when the walk reaches it again.
inline std::string object_address(hid_t object) {
#if H5_VERSION_GE(1, 12, 0)
  H5O_info2_t info{};
  if (H5Oget_info3(object, &info, H5O_INFO_BASIC) < 0) return {};
  return std::string(reinterpret_cast<char const*>(&info.token), sizeof info.token);
#else
  H5O_info_t info{};
  if (H5Oget_info2(object, &info, H5O_INFO_BASIC) < 0) return {};
  return std::to_string(info.addr);
#endif
}

// libhdf5 prints its error stack to stderr by default; the messages go into Error instead.
inline void silence_hdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

// The string attribute `name` of `object` (scalar, fixed or variable length), or nullopt when it has none.
inline std::optional<std::string> string_attribute(hid_t object, char const* name, std::string const& where) {
  htri_t const exists = H5Aexists(object, name);
  FLASHDEBERTA_REQUIRE(exists >= 0, where << ": cannot look for attribute '" << name << "': " << hdf5_error_message());
  if (exists == 0) return std::nullopt;
  Hdf5Id const attribute(H5Aopen(object, name, H5P_DEFAULT), H5Aclose);
  FLASHDEBERTA_REQUIRE(attribute.valid(),
                       where << ": cannot open attribute '" << name << "': " << hdf5_error_message());
  Hdf5Id const type(H5Aget_type(attribute.get()), H5Tclose);
  Hdf5Id const space(H5Aget_space(attribute.get()), H5Sclose);
  if (!type.valid() || H5Tget_class(type.get()) != H5T_STRING || H5Sget_simple_extent_npoints(space.get()) != 1)
    return std::nullopt;  // not a string Keras wrote: treated as absent
  if (H5Tis_variable_str(type.get()) > 0) {
    Hdf5Id const memory(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(memory.get(), H5T_VARIABLE);
    H5Tset_cset(memory.get(), H5Tget_cset(type.get()));
    char* text = nullptr;
    FLASHDEBERTA_REQUIRE(H5Aread(attribute.get(), memory.get(), &text) >= 0,
                         where << ": cannot read attribute '" << name << "': " << hdf5_error_message());
    std::string value = text == nullptr ? std::string() : std::string(text, strnlen(text, kMaxAttributeBytes));
    H5free_memory(text);
    return value;
  }
  std::size_t const size = H5Tget_size(type.get());
  FLASHDEBERTA_REQUIRE(size > 0 && size <= kMaxAttributeBytes, where << ": attribute '" << name << "' declares " << size
                                                                     << " bytes (at most " << kMaxAttributeBytes
                                                                     << " are read)");
  std::string value(size, '\0');
  FLASHDEBERTA_REQUIRE(H5Aread(attribute.get(), type.get(), value.data()) >= 0,
                       where << ": cannot read attribute '" << name << "': " << hdf5_error_message());
  value.resize(strnlen(value.data(), value.size()));
  return value;
}

}  // namespace detail

class Hdf5File {
 public:
  // `what` names the file's role in messages ("Keras weights").
  static Hdf5File open(std::filesystem::path const& path, std::string_view what) {
    RegularFileDescriptor const fd(path, what);
    std::lock_guard const lock(detail::hdf5_lock());
    detail::silence_hdf5();
    Hdf5File file(path.string(), static_cast<std::uint64_t>(fd.size()));
    std::byte head[8] = {};
    ssize_t const got = ::pread(fd.get(), head, sizeof head, 0);
    file.require_signature(std::span<std::byte const>(head, got > 0 ? static_cast<std::size_t>(got) : 0));
    struct stat st {};
    FLASHDEBERTA_REQUIRE_FILE(::fstat(fd.get(), &st) == 0,
                              file.source_ << ": cannot stat (" << std::strerror(errno) << ")");
    detail::FileIdentity const identity{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                                        static_cast<std::uint64_t>(st.st_size),
                                        static_cast<std::uint64_t>(st.st_mtim.tv_sec) * 1'000'000'000u +
                                            static_cast<std::uint64_t>(st.st_mtim.tv_nsec)};
    if (!detail::checked_files().contains(identity)) {
      detail::require_sound_structure(MappedFile::open(path, what).bytes(), file.source_);
      detail::checked_files().add(identity);
    }
    file.file_ = detail::Hdf5Id(H5Fopen(file.source_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    file.require_opened();
    file.walk();
    return file;
  }

  // A file image in memory (the fuzz target; tests): opened through libhdf5's core driver, without a copy.
  static Hdf5File open_image(std::span<std::byte const> bytes, std::string source) {
    std::lock_guard const lock(detail::hdf5_lock());
    detail::silence_hdf5();
    Hdf5File file(std::move(source), bytes.size());
    file.require_signature(bytes.first(std::min<std::size_t>(bytes.size(), 8)));
    detail::require_sound_structure(bytes, file.source_);
    detail::Hdf5Id const access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    H5Pset_fapl_core(access.get(), 1 << 16, 0);
    // libhdf5 copies the image unless told otherwise; const_cast: the file is opened read-only.
    H5Pset_file_image(access.get(), const_cast<std::byte*>(bytes.data()), bytes.size());
    file.file_ = detail::Hdf5Id(H5Fopen(file.source_.c_str(), H5F_ACC_RDONLY, access.get()), H5Fclose);
    file.require_opened();
    file.walk();
    return file;
  }

  std::string const& source() const { return source_; }
  std::vector<Hdf5Dataset> const& datasets() const { return datasets_; }

  // The string attribute `name` of the object at `path` (a group or dataset), or nullopt.
  std::optional<std::string> attribute(std::string const& path, char const* name) const {
    std::lock_guard const lock(detail::hdf5_lock());
    detail::silence_hdf5();
    detail::Hdf5Id const object(H5Oopen(file_.get(), path.c_str(), H5P_DEFAULT), H5Oclose);
    FLASHDEBERTA_REQUIRE(object.valid(), source_ << ": cannot open '" << path << "': " << detail::hdf5_error_message());
    return detail::string_attribute(object.get(), name, source_ + ": '" + path + "'");
  }

  // The dataset's bytes as stored (little-endian, dtype_size(dtype) per value, row-major).
  std::vector<std::byte> read(Hdf5Dataset const& dataset) const {
    std::lock_guard const lock(detail::hdf5_lock());
    detail::silence_hdf5();
    std::string const where = source_ + ": dataset '" + dataset.path + "'";
    detail::Hdf5Id const handle(H5Dopen2(file_.get(), dataset.path.c_str(), H5P_DEFAULT), H5Dclose);
    FLASHDEBERTA_REQUIRE(handle.valid(), where << ": cannot open: " << detail::hdf5_error_message());
    std::vector<std::byte> bytes(static_cast<std::size_t>(dataset.numel) * dtype_size(dataset.dtype));
    if (bytes.empty()) return bytes;
    detail::Hdf5Id memory_type;
    switch (dataset.dtype) {
      case DType::kF32:
        memory_type = detail::Hdf5Id(H5Tcopy(H5T_IEEE_F32LE), H5Tclose);
        break;
      case DType::kF64:
        memory_type = detail::Hdf5Id(H5Tcopy(H5T_IEEE_F64LE), H5Tclose);
        break;
      default:
        memory_type = detail::Hdf5Id(H5Dget_type(handle.get()), H5Tclose);
        break;  // raw 2-byte values
    }
    FLASHDEBERTA_REQUIRE(H5Dread(handle.get(), memory_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()) >= 0,
                         where << ": cannot read: " << detail::hdf5_error_message());
    return bytes;
  }

 private:
  Hdf5File(std::string source, std::uint64_t size) : source_(std::move(source)), size_(size) {}

  // HDF5's superblock signature sits at byte 0 of every file Keras (h5py) writes; libhdf5 would also look at
  // 512, 1024, ... for files with a user block, which Keras never writes.
  void require_signature(std::span<std::byte const> head) const {
    static constexpr unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    FLASHDEBERTA_REQUIRE(head.size() == 8 && std::memcmp(head.data(), kSignature, 8) == 0,
                         source_ << ": not an HDF5 file (" << size_ << " bytes; no HDF5 signature at its start)");
  }

  void require_opened() const {
    FLASHDEBERTA_REQUIRE(file_.valid(), source_ << ": not a readable HDF5 file (" << size_
                                                << " bytes): " << detail::hdf5_error_message());
  }

  // A Keras group holds a layer's few sublayers or a model's layers (thousands for the largest models).
  static constexpr std::size_t kMaxLinksPerGroup = 100'000;

  void walk() { walk_group(file_.get(), "", 0); }

  void walk_group(hid_t group, std::string const& prefix, int depth) {
    FLASHDEBERTA_REQUIRE(depth <= detail::kMaxDepth, source_ << ": groups nest deeper than " << detail::kMaxDepth
                                                             << " levels at '" << prefix << "'");
    std::vector<std::string> children;
    auto const collect = [](hid_t, char const* name, H5L_info_t const* info, void* data) -> herr_t {
      auto& state = *static_cast<std::pair<std::vector<std::string>*, H5L_type_t*>*>(data);
      if (info->type != H5L_TYPE_HARD) {
        *state.second = info->type;
        state.first->push_back(name);
        return 1;  // stop: the caller refuses it by name
      }
      state.first->push_back(name);
      // A corrupt symbol table can make libhdf5 list links without end (its B-tree walked in a circle): stop here.
      return state.first->size() > kMaxLinksPerGroup ? 1 : 0;
    };
    H5L_type_t refused = H5L_TYPE_HARD;
    std::pair<std::vector<std::string>*, H5L_type_t*> state{&children, &refused};
    hsize_t index = 0;
    herr_t const status = H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &index, collect, &state);
    FLASHDEBERTA_REQUIRE(status >= 0, source_ << ": cannot list group '" << (prefix.empty() ? "/" : prefix)
                                              << "': " << detail::hdf5_error_message());
    FLASHDEBERTA_REQUIRE(children.size() <= kMaxLinksPerGroup, source_ << ": group '" << (prefix.empty() ? "/" : prefix)
                                                                       << "' lists more than " << kMaxLinksPerGroup
                                                                       << " links (its index may loop)");
    FLASHDEBERTA_REQUIRE(refused == H5L_TYPE_HARD, source_
                                                       << ": '" << prefix + children.back() << "' is a "
                                                       << (refused == H5L_TYPE_SOFT       ? "soft"
                                                           : refused == H5L_TYPE_EXTERNAL ? "external"
                                                                                          : "user-defined")
                                                       << " link; Keras weight files hold only groups and datasets");
    for (std::string const& name : children) {
      FLASHDEBERTA_REQUIRE(++objects_ <= detail::kMaxObjects,
                           source_ << ": more than " << detail::kMaxObjects << " objects (groups may link in a cycle)");
      std::string const path = prefix + name;
      detail::Hdf5Id const object(H5Oopen(group, name.c_str(), H5P_DEFAULT), H5Oclose);
      FLASHDEBERTA_REQUIRE(object.valid(),
                           source_ << ": cannot open '" << path << "': " << detail::hdf5_error_message());
      // Keras links every object once; an object reached twice is a file whose links form a cycle or a lattice
      // (walking it would repeat without end or blow up), refused at the second arrival.
      FLASHDEBERTA_REQUIRE(visited_.insert(detail::object_address(object.get())).second,
                           source_ << ": '" << path << "' links to an object already reached by another path");
      H5I_type_t const type = H5Iget_type(object.get());
      if (type == H5I_GROUP) {
        walk_group(object.get(), path + "/", depth + 1);
      } else if (type == H5I_DATASET) {
        datasets_.push_back(describe_dataset(object.get(), path));
      }
      // Named datatypes: nothing to read.
    }
  }

  Hdf5Dataset describe_dataset(hid_t dataset, std::string const& path) const {
    std::string const where = source_ + ": dataset '" + path + "'";
    Hdf5Dataset out;
    out.path = path;
    detail::Hdf5Id const type(H5Dget_type(dataset), H5Tclose);
    FLASHDEBERTA_REQUIRE(type.valid(), where << ": no readable type: " << detail::hdf5_error_message());
    H5T_class_t const type_class = H5Tget_class(type.get());
    std::size_t const size = H5Tget_size(type.get());
    if (type_class == H5T_FLOAT && size == 4) {
      out.dtype = DType::kF32;
    } else if (type_class == H5T_FLOAT && size == 8) {
      out.dtype = DType::kF64;
    } else if (type_class == H5T_FLOAT && size == 2 && H5Tget_order(type.get()) == H5T_ORDER_LE) {
      out.dtype = DType::kF16;
    } else if (type_class == H5T_OPAQUE && size == 2 &&
               detail::string_attribute(dataset, "dtype", where) == std::optional<std::string>("bfloat16")) {
      out.dtype = DType::kBF16;
    } else {
      FLASHDEBERTA_FAIL(where << ": " << detail::type_class_name(type_class) << " type of " << size
                              << " bytes; Keras weights are float16, bfloat16 (marked dtype=\"bfloat16\"), float32 or "
                                 "float64");
    }
    if (out.dtype == DType::kF16) {
      // IEEE half: 1 sign, 5 exponent, 10 mantissa bits, as h5py writes numpy's float16.
      std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
      H5Tget_fields(type.get(), &spos, &epos, &esize, &mpos, &msize);
      FLASHDEBERTA_REQUIRE(spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10,
                           where << ": a 2-byte float that is not IEEE half precision");
    }

    detail::Hdf5Id const space(H5Dget_space(dataset), H5Sclose);
    H5S_class_t const space_class = H5Sget_simple_extent_type(space.get());
    FLASHDEBERTA_REQUIRE(space_class == H5S_SIMPLE || space_class == H5S_SCALAR,
                         where << ": no dataspace with dimensions (an empty or unreadable dataspace)");
    int const rank = H5Sget_simple_extent_ndims(space.get());
    FLASHDEBERTA_REQUIRE(rank >= 0 && rank <= detail::kMaxRank,
                         where << ": rank " << rank << " (at most " << detail::kMaxRank << ")");
    hsize_t dims[detail::kMaxRank] = {};
    H5Sget_simple_extent_dims(space.get(), dims, nullptr);
    // Each dimension is below 2^31 and the product is checked as it grows, so it cannot overflow.
    std::uint64_t numel = 1;
    for (int i = 0; i < rank; ++i) {
      FLASHDEBERTA_REQUIRE(dims[i] < (hsize_t{1} << 31) && numel * dims[i] <= size_ / dtype_size(out.dtype),
                           where << ": declared dimensions exceed what the file's " << size_ << " bytes can hold");
      numel *= dims[i];
      out.shape.push_back(static_cast<std::int64_t>(dims[i]));
    }
    out.numel = static_cast<std::int64_t>(numel);

    detail::Hdf5Id const create(H5Dget_create_plist(dataset), H5Pclose);
    int const filters = H5Pget_nfilters(create.get());
    FLASHDEBERTA_REQUIRE(filters == 0, where << ": stored with " << filters
                                             << " filter(s) (compression); Keras writes datasets unfiltered");
    hsize_t const stored = H5Dget_storage_size(dataset);
    std::uint64_t const declared = numel * dtype_size(out.dtype);
    FLASHDEBERTA_REQUIRE(stored == declared,
                         where << ": stores " << stored << " bytes for its declared shape of " << declared << " bytes");
    return out;
  }

  std::string source_;
  std::uint64_t size_ = 0;
  detail::Hdf5Id file_;
  std::vector<Hdf5Dataset> datasets_;
  std::size_t objects_ = 0;
  std::set<std::string> visited_;  // object addresses (tokens in libhdf5 >= 1.12)
};

}  // namespace flashdeberta::io
