// A non-owning, row-major 2-D view of policy memory with a run-time element type.
//
// Every operation of the execution policies reads and writes through these. The element type is a
// run-time value because the compute dtype (fp32, bf16, fp16) is chosen when a model is loaded; the
// model code stays the same for all of them and each backend checks the types it supports.
#pragma once

#include <cstdint>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/core/error.hpp"

namespace flashdeberta {

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kF32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::kF64;
}
template <>
constexpr DType dtype_of<std::int32_t>() {
  return DType::kI32;
}
template <>
constexpr DType dtype_of<std::int64_t>() {
  return DType::kI64;
}

struct MatrixRef {
  void* data = nullptr;
  DType dtype = DType::kF32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;  // elements between the starts of consecutive rows (>= cols)

  bool empty() const { return data == nullptr; }

  template <class T>
  T* as() const {
    FLASHDEBERTA_ASSERT(dtype == dtype_of<T>());
    return static_cast<T*>(data);
  }

  // The columns [first, first + count) of every row, same ld.
  MatrixRef columns(std::int64_t first, std::int64_t count) const {
    FLASHDEBERTA_ASSERT(first >= 0 && first + count <= cols);
    return {static_cast<char*>(data) + first * static_cast<std::int64_t>(dtype_size(dtype)), dtype, rows, count, ld};
  }

  // The rows [first, first + count), same columns.
  MatrixRef row_range(std::int64_t first, std::int64_t count) const {
    FLASHDEBERTA_ASSERT(first >= 0 && first + count <= rows);
    return {static_cast<char*>(data) + first * ld * static_cast<std::int64_t>(dtype_size(dtype)), dtype, count, cols,
            ld};
  }
};

inline MatrixRef matrix_ref(void* data, DType dtype, std::int64_t rows, std::int64_t cols) {
  return {data, dtype, rows, cols, cols};
}

}  // namespace flashdeberta
