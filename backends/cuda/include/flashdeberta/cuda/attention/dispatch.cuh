// Host side of the attention kernels: the plan of each call and the one run-time -> compile-time dispatch point
// per kernel family (dtype x padded head size for flash, dtype for eager); the argument checks and the
// AttentionArgs -> AttentionParams translation are attention_params.cuh's.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "flashdeberta/cuda/attention/attention_params.cuh"
#include "flashdeberta/cuda/attention/by_diff_tables.cuh"
#include "flashdeberta/cuda/attention/eager_kernel.cuh"
#include "flashdeberta/cuda/attention/flash_fwd_kernel.cuh"
#include "flashdeberta/cuda/attention/flash_mma_kernel.cuh"
#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/kernels/launch.hpp"
#include "flashdeberta/policy/op_args.hpp"

namespace flashdeberta::cuda_kernels {

// The tensor-core kernel's preconditions: 16-bit elements, sm_80+, a head size it runs zero-padded to 64
// (the CUDA-core kernel keeps 32 and below), and every row start 16-byte aligned for cp.async.
inline bool flash_mma_applies(AttentionArgs const& a, DeviceLimits const& limits) {
  auto const aligned = [](MatrixRef const& m) {
    return m.empty() || (reinterpret_cast<std::uintptr_t>(m.data) % 16 == 0 && m.ld % 8 == 0);
  };
  return (a.q.dtype == DType::kBF16 || a.q.dtype == DType::kF16) && limits.compute_capability >= 80 &&
         a.head_size > 32 && a.head_size <= 64 && a.head_size % 8 == 0 && a.head_stride % 8 == 0 && aligned(a.q) &&
         aligned(a.k) && aligned(a.v) && aligned(a.pos_key) && aligned(a.pos_query) && a.out.ld % 2 == 0 &&
         reinterpret_cast<std::uintptr_t>(a.out.data) % 4 == 0 &&
         FlashTraits<__half, 64, true>::is_valid(limits.max_smem_per_block);
}

// How attention_flash runs one call: the one place that chooses the kernel and where its position terms
// come from.
struct FlashPlan {
  bool tensor_cores = false;  // flash_mma_kernel; else the CUDA-core flash kernel
  // The tensor-core kernel reads the relative tables re-indexed by position difference (by_diff_tables.cuh):
  // contiguous positions, a full head of 64 (its window copies whole 64-column rows), a position term.
  bool by_diff = false;
  bool prepared = false;            // ... the tables made at load (CudaPolicy::prepare_relative); else per call
  ByDiffLayout layout;              // of the tables read, when by_diff
  std::size_t workspace_bytes = 0;  // device memory the per-call tables need
};

inline FlashPlan plan_flash(AttentionArgs const& a, DeviceLimits const& limits, ByDiffTables const& prepared) {
  FlashPlan plan;
  plan.tensor_cores = flash_mma_applies(a, limits);
  plan.by_diff = plan.tensor_cores && a.sequences.contiguous_positions && a.head_size == 64 &&
                 (!a.pos_key.empty() || !a.pos_query.empty());
  if (!plan.by_diff || a.sequences.total_tokens == 0 || a.sequences.max_seqlen == 0) return plan;
  plan.prepared = !prepared.empty() && (a.pos_key.empty() || prepared.key != nullptr) &&
                  (a.pos_query.empty() || prepared.query != nullptr);
  if (plan.prepared) {  // made at load for every length
    plan.layout = prepared.layout;
    return plan;
  }
  using Traits = FlashTraits<__half, 64, true>;
  plan.layout = by_diff_layout(a.saturation, a.sequences.max_seqlen, a.num_heads * a.head_size, Traits::kWindow);
  int const tables = (a.pos_key.empty() ? 0 : 1) + (a.pos_query.empty() ? 0 : 1);
  plan.workspace_bytes = static_cast<std::size_t>(tables * plan.layout.rows * plan.layout.ld) * dtype_size(a.q.dtype);
  return plan;
}

// The by-diff tables of a call's relative tables for every sequence length (rows for differences up to the
// saturation and one window beyond), as CudaPolicy::prepare_relative builds them at load: head size 64,
// 16-bit tables, sm_80+. Empty when the tensor-core kernel would not read them.
ByDiffLayout prepared_layout(AttentionArgs const& a, DeviceLimits const& limits) {
  auto const aligned = [](MatrixRef const& m) {  // the build copies 16-byte vectors
    return m.empty() || (reinterpret_cast<std::uintptr_t>(m.data) % 16 == 0 && m.ld % 8 == 0);
  };
  bool const applies = (!a.pos_key.empty() || !a.pos_query.empty()) && a.head_size == 64 && aligned(a.pos_key) &&
                       aligned(a.pos_query) && (a.num_heads * a.head_size) % 8 == 0 &&
                       (a.pos_key.empty() ? a.pos_query.dtype : a.pos_key.dtype) != DType::kF32 &&
                       limits.compute_capability >= 80;
  if (!applies) return {};
  using Traits = FlashTraits<__half, 64, true>;
  return by_diff_layout(a.saturation, a.saturation, a.num_heads * a.head_size, Traits::kWindow);
}

// Builds the tables of `layout` into workspace (key table first): Qr pre-scaled like the kernel's q.
template <class T>
ByDiffTables build_by_diff_tables_for(AttentionArgs const& a, ByDiffLayout const& layout, T* workspace,
                                      cudaStream_t stream) {
  ByDiffTables tables;
  tables.layout = layout;
  T* next = workspace;
  if (!a.pos_key.empty()) {
    build_by_diff_table(next, static_cast<T const*>(a.pos_key.data), a.pos_key.ld, a.relative_index,
                        static_cast<int>(a.saturation), layout, 1.0f, stream);
    tables.key = next;
    next += layout.rows * layout.ld;
  }
  if (!a.pos_query.empty()) {  // scores are in log2 units
    build_by_diff_table(next, static_cast<T const*>(a.pos_query.data), a.pos_query.ld, a.relative_index,
                        static_cast<int>(a.saturation), layout, (1.0f / a.scale) * kLog2e, stream);
    tables.query = next;
  }
  return tables;
}

ByDiffTables build_by_diff_tables(AttentionArgs const& a, ByDiffLayout const& layout, void* storage, DType dtype,
                                  cudaStream_t stream) {
  FLASHDEBERTA_REQUIRE(dtype == DType::kBF16 || dtype == DType::kF16,
                       "by-diff tables are built for 16-bit tables only, not " << dtype_name(dtype));
  ByDiffTables tables;
  dispatch_float_type(dtype, [&]<class T>() {
    if constexpr (!std::is_same_v<T, float>)
      tables = build_by_diff_tables_for(a, layout, static_cast<T*>(storage), stream);
  });
  return tables;
}

std::size_t attention_workspace_bytes(AttentionArgs const& a, DeviceLimits const& limits,
                                      ByDiffTables const& prepared) {
  return plan_flash(a, limits, prepared).workspace_bytes;
}

// Launches kKernel with Traits' dynamic shared memory, raising the kernel's limit past 48 KiB first (once
// per kernel and device: the attribute is per device context).
template <class Traits, void (*kKernel)(AttentionParams)>
void launch_flash(dim3 grid, AttentionParams const& params, cudaStream_t stream) {
  auto* const kernel = kKernel;
  if constexpr (Traits::kSmemBytes > 48 * 1024) {
    static std::atomic<std::uint64_t> raised{0};  // bit per device ordinal < 64
    int device = 0;
    FLASHDEBERTA_CUDA_CHECK(cudaGetDevice(&device));
    std::uint64_t const bit = device < 64 ? std::uint64_t{1} << device : 0;
    if (bit == 0 || (raised.load(std::memory_order_relaxed) & bit) == 0) {
      FLASHDEBERTA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(Traits::kSmemBytes)));
      raised.fetch_or(bit, std::memory_order_relaxed);
    }
  }
  kernel<<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(params);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

// workspace: attention_workspace_bytes(a, limits, prepared) bytes of device memory, free for this call's use
// on stream.
void attention_flash(AttentionArgs const& a, DeviceLimits const& limits, ByDiffTables const& prepared,
                     cudaStream_t stream, void* workspace) {
  if (a.sequences.total_tokens == 0 || a.sequences.max_seqlen == 0) return;
  AttentionParams params = attention_params(a);
  FlashPlan const plan = plan_flash(a, limits, prepared);
  if (plan.tensor_cores) {
    // Only 16-bit instantiations exist for the tensor-core plan: fp32 never reaches here.
    auto const run = [&]<class T>() {
      using Traits = FlashTraits<T, 64, true>;
      if (plan.by_diff) {
        ByDiffTables tables = prepared;
        if (!plan.prepared) {
          FLASHDEBERTA_REQUIRE(workspace != nullptr,
                               "attention_flash needs " << plan.workspace_bytes << " bytes of workspace for this call");
          tables = build_by_diff_tables_for(a, plan.layout, static_cast<T*>(workspace), stream);
        }
        params.key_by_diff = tables.key;
        params.query_by_diff = tables.query;
        params.by_diff_ld = plan.layout.ld;
        params.by_diff_offset = plan.layout.offset;
        params.by_diff_rows = static_cast<int>(plan.layout.rows);
      }
      if (params.key_by_diff != nullptr && params.query_by_diff != nullptr) {  // v2 / v3: both terms, contiguous
        launch_flash<Traits, flash_mma::flash_mma_kernel<Traits, true>>(attention_grid(a, Traits::kBlockM), params,
                                                                        stream);
      } else {
        launch_flash<Traits, flash_mma::flash_mma_kernel<Traits, false>>(attention_grid(a, Traits::kBlockM), params,
                                                                         stream);
      }
    };
    if (a.q.dtype == DType::kBF16) {
      run.template operator()<__nv_bfloat16>();
    } else {
      run.template operator()<__half>();
    }
    return;
  }
  dispatch_float_type(a.q.dtype, [&]<class T>() {
    dispatch_head_size(a.head_size, [&]<int D>() {
      using Traits = FlashTraits<T, D>;
      FLASHDEBERTA_REQUIRE(Traits::is_valid(limits.max_smem_per_block),
                           "flash attention for head size " << D << " needs " << Traits::kSmemBytes
                                                            << " bytes of shared memory; the device has "
                                                            << limits.max_smem_per_block);
      launch_flash<Traits, flash::flash_attention_kernel<Traits>>(attention_grid(a, Traits::kBlockM), params, stream);
    });
  });
}

void attention_eager(AttentionArgs const& a, DeviceLimits const& limits, cudaStream_t stream) {
  if (a.sequences.total_tokens == 0 || a.sequences.max_seqlen == 0) return;
  AttentionParams const params = attention_params(a);
  std::size_t const smem = EagerTraits::smem_bytes(a.sequences.max_seqlen, static_cast<int>(a.head_size));
  FLASHDEBERTA_REQUIRE(smem + sizeof(float) * 32 <= limits.max_smem_per_block,
                       "eager attention keeps a row of " << a.sequences.max_seqlen
                                                         << " scores in shared memory, more than the device's "
                                                         << limits.max_smem_per_block << " bytes; use kFlash");
  dispatch_float_type(a.q.dtype, [&]<class T>() {
    auto const kernel = eager::eager_attention_kernel<T>;
    if (smem > 48 * 1024)
      FLASHDEBERTA_CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    kernel<<<attention_grid(a, 1), EagerTraits::kThreads, smem, stream>>>(params);
    FLASHDEBERTA_CUDA_CHECK_LAUNCH();
  });
}

int kernel_code_arch(int device) {
  // The tensor-core kernel's body exists only where __CUDA_ARCH__ >= 800: its attributes on this device give the
  // virtual architecture of the code the driver picked for it (ptxVersion: 75 for compute_75 PTX JIT-compiled
  // on an sm_90 GPU, 90 for sm_90 SASS).
  FLASHDEBERTA_CUDA_CHECK(cudaSetDevice(device));
  cudaFuncAttributes attributes{};
  FLASHDEBERTA_CUDA_CHECK(
      cudaFuncGetAttributes(&attributes, flash_mma::flash_mma_kernel<FlashTraits<__half, 64, true>, true>));
  return attributes.ptxVersion;
}

}  // namespace flashdeberta::cuda_kernels
