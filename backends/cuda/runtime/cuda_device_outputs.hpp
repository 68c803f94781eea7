// Head outputs of CudaPolicy laid out as HF returns them, without leaving the device (CudaDevice::padded, behind
// LoadedModel::forward_head_on_device in the CUDA backend module). Packed per-token rows are scattered into a zeroed
// [B, L, width] buffer by device-to-device copies, one per run of rows that are contiguous on both sides
// (a right-padded sequence is one run), so no kernel is needed.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

#include "flashdeberta/core/batch.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/cuda_policy.hpp"
#include "flashdeberta/heads/head_support.hpp"
#include "flashdeberta/runtime/loaded_model.hpp"

namespace flashdeberta::runtime::detail {

// Owns a device buffer for DLPack consumers; releasing it waits for the device first (see DeviceTensor).
inline std::shared_ptr<void> device_owner(CudaBuffer&& buffer) {
  auto* held = new CudaBuffer(std::move(buffer));
  return std::shared_ptr<void>(held, [](void* p) {
    cudaDeviceSynchronize();  // consumers' work on their own streams is done before the cache reuses it
    delete static_cast<CudaBuffer*>(p);
  });
}

inline int current_device() {
  int device = 0;
  FLASHDEBERTA_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

// `t` in HF's layout for an input of `input_shape` (to_padded's rules, on the device); the policy's stream
// is synchronized before returning.
inline DeviceTensor padded_on_device(CudaPolicy const& policy, DeviceHeadTensor<CudaPolicy>&& t, Batch const& batch,
                                     std::vector<std::int64_t> const& input_shape) {
  FLASHDEBERTA_REQUIRE(input_shape.size() >= 2, "the input shape needs at least [B, L]");
  std::int64_t const sequences =
      std::accumulate(input_shape.begin(), input_shape.end() - 1, std::int64_t{1}, std::multiplies<>());
  std::int64_t const length = input_shape.back();
  DeviceTensor out{t.name, {}, t.values.dtype(), nullptr, current_device(), nullptr};
  bool const keep_width = !(t.squeeze && t.width == 1);
  if (t.rows == HeadRows::kSequences) {
    out.shape.assign(input_shape.begin(), input_shape.end() - 1);
    if (keep_width) out.shape.push_back(t.width);
    FLASHDEBERTA_CUDA_CHECK(cudaStreamSynchronize(policy.stream()));
    out.data = t.values.data();
    out.owner = device_owner(std::move(t.values));
    return out;
  }
  out.shape = input_shape;
  if (keep_width) out.shape.push_back(t.width);
  std::size_t const row_bytes = static_cast<std::size_t>(t.width) * dtype_size(t.values.dtype());
  CudaBuffer padded = policy.allocate(sequences * length * t.width, t.values.dtype());
  FLASHDEBERTA_CUDA_CHECK(cudaMemsetAsync(padded.data(), 0, padded.size_bytes(), policy.stream()));
  // Destination row of each packed row: sequence * L + position.
  std::vector<std::int64_t> destination(static_cast<std::size_t>(t.row_count));
  for (std::int64_t r = 0; r < t.row_count; ++r) {
    std::int64_t const token = t.tokens[r];
    auto const next = std::upper_bound(batch.cu_seqlens.begin(), batch.cu_seqlens.end(), token);
    std::int64_t const sequence = (next - batch.cu_seqlens.begin()) - 1;
    FLASHDEBERTA_REQUIRE(batch.positions[token] < length,
                         t.name << ": position " << batch.positions[token] << " is beyond L = " << length);
    destination[r] = sequence * length + batch.positions[token];
  }
  auto* const to = static_cast<char*>(padded.data());
  auto const* const from = static_cast<char const*>(t.values.data());
  for (std::int64_t first = 0; first < t.row_count;) {
    std::int64_t last = first + 1;
    while (last < t.row_count && destination[last] == destination[last - 1] + 1) ++last;
    FLASHDEBERTA_CUDA_CHECK(cudaMemcpyAsync(to + destination[first] * row_bytes, from + first * row_bytes,
                                            static_cast<std::size_t>(last - first) * row_bytes,
                                            cudaMemcpyDeviceToDevice, policy.stream()));
    first = last;
  }
  FLASHDEBERTA_CUDA_CHECK(cudaStreamSynchronize(policy.stream()));
  out.data = padded.data();
  out.owner = device_owner(std::move(padded));
  return out;
}

}  // namespace flashdeberta::runtime::detail
