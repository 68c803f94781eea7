// Helpers shared by the I/O unit tests: a self-removing temporary directory and file writers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include "../scratch_dir.hpp"
#include "flashdeberta/core/error.hpp"

namespace flashdeberta::test {

using TempDir = testing::ScratchDir;

inline void write_file(std::filesystem::path const& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// A safetensors image from a raw header text: 8-byte little-endian length, header, `data_size` zero bytes.
inline std::string safetensors_image(std::string_view header, std::size_t data_size) {
  std::string out(8, '\0');
  std::uint64_t const n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  out += header;
  out.append(data_size, '\0');
  return out;
}

// Copies the safetensors file `from` to `to` with `extra` spaces after its header (which readers accept), so
// every tensor lies `extra` bytes further from alignment than in `from`.
inline void pad_safetensors_header(std::filesystem::path const& from, std::filesystem::path const& to,
                                   std::size_t extra) {
  std::ifstream in(from, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(bytes.size() >= 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  REQUIRE(8 + n <= bytes.size());
  bytes.insert(8 + n, extra, ' ');
  n += extra;
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  write_file(to, bytes);
}

template <class T>
std::span<std::byte const> as_bytes_of(std::vector<T> const& v) {
  return std::as_bytes(std::span<T const>(v));
}

// The message of the flashdeberta::Error `fn` throws; fails the test if it throws nothing.
template <class Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (flashdeberta::Error const& e) {
    return e.what();
  }
  FAIL("expected flashdeberta::Error, nothing was thrown");
  return {};
}

}  // namespace flashdeberta::test
