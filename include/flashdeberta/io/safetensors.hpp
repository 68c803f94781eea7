// Reader for the safetensors format: 8-byte little-endian header length N, N bytes of JSON header
// (tensor name -> {dtype, shape, data_offsets}, optional "__metadata__"), then the raw data section.
//
// The whole header is validated before any tensor byte is touched, so a corrupt or hostile file
// fails with a message naming the file, the tensor and the sizes involved, never with a crash or a
// read outside the mapping. Data may be unaligned: every read goes through memcpy.
//
// The file is accepted exactly when the Rust `safetensors` crate (SafeTensors::read_metadata and
// Metadata::validate, which every HF loader goes through) accepts it: N <= 100,000,000; the header is
// UTF-8 JSON starting with '{', with only whitespace after the object (the Rust writer pads it with
// spaces to a multiple of 8 bytes); the tensors, sorted by data_offsets, tile the data section from
// byte 0 with no hole and no overlap, and the last one ends at the end of the file. The header is read
// against its schema (safetensors_header.hpp), so a value of the wrong type fails where it appears, as
// in the crate's typed parse. Stricter than the crate where a file is hand-edited or foreign: duplicate
// JSON keys, keys other than dtype/shape/data_offsets in a tensor entry, an entry written as a JSON
// array (serde takes a struct from a sequence), and dtypes the library cannot compute with.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/core/float_convert.hpp"
#include "flashdeberta/io/mapped_file.hpp"
#include "flashdeberta/io/safetensors_header.hpp"

namespace flashdeberta {

static_assert(std::endian::native == std::endian::little, "tensor data is read as little-endian without swapping");

// One tensor of a checkpoint file, format-neutral: a view of its bytes in memory its file keeps alive.
struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::int64_t numel = 0;
  std::span<std::byte const> bytes;  // numel * dtype_size(dtype) bytes, any alignment
};

namespace detail {

// The Rust reference's MAX_HEADER_SIZE, in bytes (decimal, not 100 MiB).
inline constexpr std::uint64_t kMaxSafetensorsHeader = 100'000'000;

inline std::optional<DType> parse_dtype_name(std::string_view name) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI64, DType::kI32, DType::kI16,
                  DType::kI8, DType::kU8, DType::kBool}) {
    if (dtype_name(t) == name) return t;
  }
  return std::nullopt;
}

inline std::string format_shape(std::vector<std::int64_t> const& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// Product of the dimensions, or nullopt when it exceeds int64. A zero dimension makes the product 0
// whatever the others are, so the result does not depend on dimension order.
inline std::optional<std::int64_t> checked_numel(std::vector<std::int64_t> const& shape) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0 || n > std::numeric_limits<std::int64_t>::max() / d) return std::nullopt;
    n *= d;
  }
  return n;
}

template <class T>
T load_unaligned(std::byte const* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

// Converts any floating tensor to float32 into `out` (t.numel floats): exact for F32/F16/BF16, rounded to
// nearest for F64 (float_convert.hpp: vectorized where the CPU can).
inline void tensor_to_f32(TensorInfo const& t, std::string_view source, std::span<float> out) {
  FLASHDEBERTA_ASSERT(static_cast<std::int64_t>(out.size()) == t.numel);
  FLASHDEBERTA_REQUIRE(is_floating(t.dtype), source << ": tensor '" << t.name << "' has dtype " << dtype_name(t.dtype)
                                                    << "; a float tensor (F32, F16, BF16 or F64) is required");
  floats_to_f32(t.dtype, t.bytes.data(), 0, out);
}

inline std::vector<float> tensor_to_f32(TensorInfo const& t, std::string_view source) {
  std::vector<float> out(static_cast<std::size_t>(t.numel));
  tensor_to_f32(t, source, out);
  return out;
}

// Converts any integer or boolean tensor to int64 (BOOL: any non-zero byte is 1).
inline std::vector<std::int64_t> tensor_to_i64(TensorInfo const& t, std::string_view source) {
  FLASHDEBERTA_REQUIRE(!is_floating(t.dtype), source
                                                  << ": tensor '" << t.name << "' has dtype " << dtype_name(t.dtype)
                                                  << "; an integer tensor (I64, I32, I16, I8, U8 or BOOL) is required");
  std::vector<std::int64_t> out(static_cast<std::size_t>(t.numel));
  std::byte const* p = t.bytes.data();
  for (std::size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype) {
      case DType::kI64:
        out[i] = load_unaligned<std::int64_t>(p + 8 * i);
        break;
      case DType::kI32:
        out[i] = load_unaligned<std::int32_t>(p + 4 * i);
        break;
      case DType::kI16:
        out[i] = load_unaligned<std::int16_t>(p + 2 * i);
        break;
      case DType::kI8:
        out[i] = load_unaligned<std::int8_t>(p + i);
        break;
      case DType::kU8:
        out[i] = load_unaligned<std::uint8_t>(p + i);
        break;
      default:
        out[i] = load_unaligned<std::uint8_t>(p + i) != 0 ? 1 : 0;
        break;  // kBool
    }
  }
  return out;
}

}  // namespace detail

class SafetensorsFile {
 public:
  // Maps the file and validates its header; the mapping lives as long as the returned object.
  static SafetensorsFile open(std::filesystem::path const& path) {
    io::MappedFile mapped = io::MappedFile::open(path);
    SafetensorsFile file = parse(mapped.bytes(), path.string());
    // Moving the mapping keeps its address, so the views stay valid.
    file.mapping_ = std::make_shared<io::MappedFile const>(std::move(mapped));
    return file;
  }

  // Parses a safetensors image already in memory (the fuzzer's entry point). `bytes` must outlive
  // the result; `source` names the image in error messages.
  static SafetensorsFile parse(std::span<std::byte const> bytes, std::string source) {
    SafetensorsFile file;
    file.source_ = std::move(source);
    file.parse_image(bytes);
    return file;
  }

  std::string const& source() const { return source_; }

  // Tensor names in lexicographic order.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    out.reserve(tensors_.size());
    for (auto const& entry : tensors_) out.push_back(entry.first);
    return out;
  }
  std::size_t size() const { return tensors_.size(); }
  std::map<std::string, TensorInfo, std::less<>> const& tensors() const { return tensors_; }

  bool contains(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }

  // Lets the pages of a tensor already converted leave memory (see MappedFile::release); a no-op for
  // files parsed from memory.
  void release(TensorInfo const& tensor) const {
    if (mapping_) mapping_->release(tensor.bytes);
  }

  // The mapping every TensorInfo::bytes of this file points into, shared with whoever keeps a tensor's bytes
  // without copying them (Checkpoint::mapped_f32); null for an image parsed from memory.
  std::shared_ptr<io::MappedFile const> const& mapping() const { return mapping_; }

  TensorInfo const& info(std::string_view name) const {
    auto it = tensors_.find(name);
    FLASHDEBERTA_REQUIRE(it != tensors_.end(), source_ << ": no tensor named '" << name << "' (the file holds "
                                                       << tensors_.size() << " tensors)");
    return it->second;
  }

  std::vector<float> read_f32(std::string_view name) const { return detail::tensor_to_f32(info(name), source_); }
  std::vector<std::int64_t> read_i64(std::string_view name) const { return detail::tensor_to_i64(info(name), source_); }

  std::map<std::string, std::string> const& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;

  void parse_image(std::span<std::byte const> bytes) {
    FLASHDEBERTA_REQUIRE(bytes.size() >= 8, source_ << ": file is " << bytes.size()
                                                    << " bytes, too short for the 8-byte safetensors header length");
    std::uint64_t header_size = 0;
    for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | std::to_integer<std::uint64_t>(bytes[i]);
    FLASHDEBERTA_REQUIRE(header_size <= detail::kMaxSafetensorsHeader,
                         source_ << ": header length " << header_size << " exceeds the limit of "
                                 << detail::kMaxSafetensorsHeader << " bytes");
    FLASHDEBERTA_REQUIRE(header_size <= bytes.size() - 8, source_ << ": header length " << header_size
                                                                  << " runs past the end of the file (only "
                                                                  << bytes.size() - 8 << " bytes follow it)");
    std::string_view const text(reinterpret_cast<char const*>(bytes.data()) + 8, header_size);
    // The Rust reader refuses anything else here, leading whitespace included.
    if (text.empty() || text.front() != '{') {
      FLASHDEBERTA_FAIL(source_ << ": safetensors header must start with '{', found "
                                << (text.empty() ? std::string("an empty header")
                                                 : "byte 0x" + hex_byte(static_cast<unsigned char>(text.front()))));
    }
    detail::SafetensorsHeader header = detail::parse_safetensors_header(text, source_);
    metadata_ = std::move(header.metadata);
    std::span<std::byte const> const data = bytes.subspan(8 + header_size);
    std::vector<Extent> extents;
    extents.reserve(header.tensors.size());
    for (detail::SafetensorsHeaderEntry& entry : header.tensors) {
      TensorInfo info = make_info(entry, data, extents);
      // No structured bindings here: clang < 16 cannot capture them in the message lambdas.
      auto const emplaced = tensors_.emplace(std::move(entry.name), std::move(info));
      std::string const& name = emplaced.first->first;
      FLASHDEBERTA_REQUIRE(emplaced.second, source_ << ": safetensors header has duplicate key '" << name << "'");
      extents.back().name = &name;
    }
    check_layout(extents, data.size());
  }

  // Where a tensor's bytes lie in the data section, for the layout check.
  struct Extent {
    std::uint64_t begin = 0, end = 0;
    std::string const* name = nullptr;
  };

  static std::string hex_byte(unsigned char b) { return {"0123456789abcdef"[b >> 4], "0123456789abcdef"[b & 15]}; }

  // The TensorInfo of a header entry (JSON types already checked), with its shape moved out of it.
  TensorInfo make_info(detail::SafetensorsHeaderEntry& entry, std::span<std::byte const> data,
                       std::vector<Extent>& extents) const {
    std::string const tensor = "tensor '" + entry.name + "'";
    std::string const& dtype = entry.dtype;
    TensorInfo info;
    info.name = entry.name;
    std::optional<DType> const parsed = detail::parse_dtype_name(dtype);
    FLASHDEBERTA_REQUIRE(parsed.has_value(), source_
                                                 << ": " << tensor << " has unknown dtype '" << dtype
                                                 << "' (supported: F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL)");
    info.dtype = *parsed;

    info.shape = std::move(entry.shape);
    std::optional<std::int64_t> const numel = detail::checked_numel(info.shape);
    std::int64_t const elem = static_cast<std::int64_t>(dtype_size(info.dtype));
    FLASHDEBERTA_REQUIRE(numel && *numel <= std::numeric_limits<std::int64_t>::max() / elem,
                         source_ << ": " << tensor << " has shape " << detail::format_shape(info.shape)
                                 << ", whose byte size overflows int64");
    info.numel = *numel;

    std::int64_t const begin = entry.begin;
    std::int64_t const end = entry.end;
    FLASHDEBERTA_REQUIRE(begin <= end,
                         source_ << ": " << tensor << " has data_offsets begin " << begin << " > end " << end);
    FLASHDEBERTA_REQUIRE(static_cast<std::uint64_t>(end) <= data.size(),
                         source_ << ": " << tensor << " has data_offsets end " << end
                                 << " past the end of the data section (" << data.size() << " bytes)");
    FLASHDEBERTA_REQUIRE(end - begin == info.numel * elem, source_ << ": " << tensor << " has data_offsets spanning "
                                                                   << end - begin << " bytes, but dtype " << dtype
                                                                   << " and shape " << detail::format_shape(info.shape)
                                                                   << " need " << info.numel * elem);
    info.bytes = data.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin));
    extents.push_back({static_cast<std::uint64_t>(begin), static_cast<std::uint64_t>(end), nullptr});
    return info;
  }

  // Metadata::validate of the Rust reference: sorted by data_offsets (ties by name, so the message
  // does not depend on the order of the header), each tensor begins where the previous one ended,
  // starting at byte 0, and the last one ends at the end of the file. A hole is bytes no tensor
  // owns (a sign of a truncated or spliced file), an overlap makes two tensors alias. Empty tensors
  // take part like any other: [8, 8] is refused inside [0, 16], as the reference refuses it.
  void check_layout(std::vector<Extent>& extents, std::uint64_t data_size) const {
    std::sort(extents.begin(), extents.end(), [](Extent const& a, Extent const& b) {
      if (a.begin != b.begin) return a.begin < b.begin;
      if (a.end != b.end) return a.end < b.end;
      return *a.name < *b.name;
    });
    auto const describe = [](Extent const& e) {
      return "'" + *e.name + "' (data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "])";
    };
    std::uint64_t covered = 0;  // the data section's bytes [0, covered) belong to the tensors so far
    for (std::size_t i = 0; i < extents.size(); ++i) {
      Extent const& cur = extents[i];
      if (i == 0) {
        FLASHDEBERTA_REQUIRE(cur.begin == 0, source_ << ": tensor " << describe(cur)
                                                     << " is the first in the data section"
                                                     << " but starts at byte " << cur.begin << ", leaving a hole of "
                                                     << cur.begin << " bytes before it that no tensor owns");
      } else {
        Extent const& prev = extents[i - 1];
        FLASHDEBERTA_REQUIRE(cur.begin <= covered, source_ << ": tensors " << describe(prev) << " and " << describe(cur)
                                                           << " leave a hole of " << cur.begin - covered
                                                           << " bytes between them that no tensor owns");
        FLASHDEBERTA_REQUIRE(cur.begin == covered, source_ << ": tensors " << describe(prev) << " and " << describe(cur)
                                                           << " overlap: '" << *cur.name << "' starts "
                                                           << covered - cur.begin << " bytes before '" << *prev.name
                                                           << "' ends");
      }
      covered = cur.end;
    }
    if (covered != data_size) {  // only short: every end was checked against the data section
      FLASHDEBERTA_FAIL(
          source_ << ": the data section is " << data_size << " bytes, but "
                  << (extents.empty()
                          ? std::string("the header names no tensor")
                          : "its last tensor " + describe(extents.back()) + " ends at byte " + std::to_string(covered))
                  << ": " << data_size - covered
                  << " trailing bytes that no tensor owns (the file must end where its last tensor does)");
    }
  }

  std::string source_;
  std::shared_ptr<io::MappedFile const> mapping_;  // null for an image parsed from memory
  std::map<std::string, TensorInfo, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace flashdeberta
