// Reader for the safetensors format: 8-byte little-endian header length N, N bytes of JSON header
// (tensor name -> {dtype, shape, data_offsets}, optional "__metadata__"), then the raw data section.
//
// The whole header is validated before any tensor byte is touched, so a corrupt or hostile file
// fails with a message naming the file, the tensor and the sizes involved, never with a crash or a
// read outside the mapping. Data may be unaligned: every read goes through memcpy.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/mapped_file.hpp"

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

// A safetensors header larger than this is not a model checkpoint (the Rust reference uses the same cap).
inline constexpr std::uint64_t kMaxSafetensorsHeader = std::uint64_t{100} << 20;

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

// Converts any floating tensor to float32: exact for F32/F16/BF16, rounded to nearest for F64.
inline std::vector<float> tensor_to_f32(TensorInfo const& t, std::string_view source) {
  std::vector<float> out(static_cast<std::size_t>(t.numel));
  std::byte const* p = t.bytes.data();
  switch (t.dtype) {
    case DType::kF32:
      if (!out.empty()) std::memcpy(out.data(), p, out.size() * sizeof(float));
      break;
    case DType::kF16:
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = half_to_float(load_unaligned<std::uint16_t>(p + 2 * i));
      break;
    case DType::kBF16:
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = bfloat16_to_float(load_unaligned<std::uint16_t>(p + 2 * i));
      break;
    case DType::kF64:
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(load_unaligned<double>(p + 8 * i));
      break;
    default:
      FLASHDEBERTA_FAIL(source << ": tensor '" << t.name << "' has dtype " << dtype_name(t.dtype)
                               << "; a float tensor (F32, F16, BF16 or F64) is required");
  }
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
    file.mapping_.emplace(std::move(mapped));  // moving the mapping keeps its address, so the views stay valid
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
                         source_ << ": header length " << header_size << " exceeds the 100 MiB limit");
    FLASHDEBERTA_REQUIRE(header_size <= bytes.size() - 8, source_ << ": header length " << header_size
                                                                  << " runs past the end of the file (only "
                                                                  << bytes.size() - 8 << " bytes follow it)");
    std::string_view const text(reinterpret_cast<char const*>(bytes.data()) + 8, header_size);
    io::Json const header = io::parse_json(text, source_, "safetensors header");
    FLASHDEBERTA_REQUIRE(header.is_object(),
                         source_ << ": safetensors header must be a JSON object, found " << io::json_describe(header));
    std::span<std::byte const> const data = bytes.subspan(8 + header_size);
    for (auto const& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        parse_metadata(entry);
      } else {
        tensors_.emplace(name, parse_entry(name, entry, data));
      }
    }
    check_overlaps();
  }

  void parse_metadata(io::Json const& entry) {
    if (!entry.is_object()) io::fail_json_type(source_, "__metadata__", "an object of strings", entry);
    for (auto const& [key, value] : entry.items()) {
      metadata_.emplace(key, io::json_as_string(value, source_, "__metadata__ value of '" + key + "'"));
    }
  }

  std::int64_t non_negative(io::Json const& value, std::string const& what) const {
    std::int64_t const v = io::json_as_int64(value, source_, what);
    FLASHDEBERTA_REQUIRE(v >= 0, source_ << ": " << what << " is " << v << "; it must be non-negative");
    return v;
  }

  TensorInfo parse_entry(std::string const& name, io::Json const& entry, std::span<std::byte const> data) const {
    std::string const tensor = "tensor '" + name + "'";
    if (!entry.is_object()) io::fail_json_type(source_, tensor, "an object with dtype, shape, data_offsets", entry);
    for (auto const& item : entry.items()) {
      FLASHDEBERTA_REQUIRE(item.key() == "dtype" || item.key() == "shape" || item.key() == "data_offsets",
                           source_ << ": " << tensor << " has unexpected key '" << item.key()
                                   << "' (expected exactly dtype, shape, data_offsets)");
    }
    for (char const* key : {"dtype", "shape", "data_offsets"}) {
      FLASHDEBERTA_REQUIRE(entry.contains(key), source_ << ": " << tensor << " is missing '" << key << "'");
    }

    TensorInfo info;
    info.name = name;
    std::string const& dtype = io::json_as_string(entry["dtype"], source_, "dtype of " + tensor);
    std::optional<DType> const parsed = detail::parse_dtype_name(dtype);
    FLASHDEBERTA_REQUIRE(parsed.has_value(), source_
                                                 << ": " << tensor << " has unknown dtype '" << dtype
                                                 << "' (supported: F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL)");
    info.dtype = *parsed;

    io::Json const& shape = entry["shape"];
    if (!shape.is_array()) io::fail_json_type(source_, "shape of " + tensor, "an array of integers", shape);
    for (std::size_t i = 0; i < shape.size(); ++i) {
      info.shape.push_back(non_negative(shape[i], "shape[" + std::to_string(i) + "] of " + tensor));
    }
    std::optional<std::int64_t> const numel = detail::checked_numel(info.shape);
    std::int64_t const elem = static_cast<std::int64_t>(dtype_size(info.dtype));
    FLASHDEBERTA_REQUIRE(numel && *numel <= std::numeric_limits<std::int64_t>::max() / elem,
                         source_ << ": " << tensor << " has shape " << detail::format_shape(info.shape)
                                 << ", whose byte size overflows int64");
    info.numel = *numel;

    io::Json const& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2) {
      io::fail_json_type(source_, "data_offsets of " + tensor, "an array of exactly two integers [begin, end]",
                         offsets);
    }
    std::int64_t const begin = non_negative(offsets[0], "data_offsets[0] of " + tensor);
    std::int64_t const end = non_negative(offsets[1], "data_offsets[1] of " + tensor);
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
    return info;
  }

  // Two tensors sharing bytes would alias; HF never writes that, so it signals a corrupt header.
  // Empty tensors occupy no bytes and cannot overlap anything.
  void check_overlaps() const {
    struct Range {
      std::uintptr_t begin, end;
      std::string const* name;
    };
    std::vector<Range> ranges;
    for (auto const& [name, t] : tensors_) {
      auto const begin = reinterpret_cast<std::uintptr_t>(t.bytes.data());
      if (!t.bytes.empty()) ranges.push_back({begin, begin + t.bytes.size(), &name});
    }
    std::sort(ranges.begin(), ranges.end(), [](Range const& a, Range const& b) { return a.begin < b.begin; });
    for (std::size_t i = 1; i < ranges.size(); ++i) {
      Range const& prev = ranges[i - 1];
      Range const& cur = ranges[i];
      FLASHDEBERTA_REQUIRE(prev.end <= cur.begin, source_ << ": tensors '" << *prev.name << "' ("
                                                          << prev.end - prev.begin << " bytes) and '" << *cur.name
                                                          << "' (" << cur.end - cur.begin << " bytes) overlap by "
                                                          << prev.end - cur.begin << " bytes");
    }
  }

  std::string source_;
  std::optional<io::MappedFile> mapping_;
  std::map<std::string, TensorInfo, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace flashdeberta
