// The CUDA kernels as the host sees them: one launcher per operation, declared here in plain C++ and
// compiled once, by nvcc, into the flashdeberta::cuda library (backends/cuda/src/). CudaPolicy calls only
// these, so any C++ translation unit, compiled by g++ or clang++, can hold a CudaPolicy. The definitions
// live beside their kernels in the .cuh headers, which only backends/cuda/src/ includes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "flashdeberta/core/matrix_ref.hpp"
#include "flashdeberta/policy/op_args.hpp"

namespace flashdeberta::cuda_kernels {

// What the kernels need from the device they run on.
struct DeviceLimits {
  std::size_t max_smem_per_block = 48 * 1024;  // opt-in maximum of dynamic shared memory
  // major * 10 + minor of the code that runs: the device's, or lower where this build carries no code for the
  // device and the driver JIT-compiles older PTX (kernel_code_arch), whose paths are those of the older GPU.
  int compute_capability = 0;
};

// The virtual architecture (major * 10 + minor) of the kernels' code as the driver loads it on `device`: below
// the device's own capability when the build carries only older PTX for it (CMAKE_CUDA_ARCHITECTURES 75 on an
// sm_90 GPU), where the tensor-core kernels are compiled out and the CUDA-core paths must run.
int kernel_code_arch(int device);

// A layer's relative table re-indexed by position difference (attention/by_diff_tables.cuh): row
// offset + d holds the table row of difference d.
struct ByDiffLayout {
  int offset = 0;         // the row of difference 0
  std::int64_t rows = 0;  // 2 * offset: differences [-offset, offset)
  std::int64_t ld = 0;    // elements per row: every head's columns
};

// The by-diff tables of one layer (pos_key's, and pos_query's pre-scaled as the kernel's q), in the
// dtype of the tables they come from; null where the layer has no such term. None at all: not prepared.
struct ByDiffTables {
  void const* key = nullptr;
  void const* query = nullptr;
  ByDiffLayout layout;

  bool empty() const { return key == nullptr && query == nullptr; }
};

// Element-wise (kernels/elementwise.cuh): out = act(out + bias) in place; a 16-bit buffer to float.
void bias_activation(MatrixRef const& out, void const* bias, Activation act, cudaStream_t stream);
void convert_to_float(void const* in, DType dtype, float* out, std::int64_t n, cudaStream_t stream);

// kernels/layer_norm.cuh, kernels/embedding.cuh, kernels/conv1d.cuh (columns: (T, C x kernel) im2col).
void layer_norm(LayerNormArgs const& n, cudaStream_t stream);
void embedding(EmbeddingArgs const& e, cudaStream_t stream);
void im2col(Conv1dArgs const& c, void* columns, cudaStream_t stream);

// kernels/lstm_cell.cuh: one LSTM step's gates and state update (the recurrent GEMM runs before it).
void lstm_cell(LstmCellArgs const& a, cudaStream_t stream);

// kernels/gemm_f64.cuh: GemmArgs::accumulate_f64, float32 operands.
void gemm_accumulate_f64(GemmArgs const& g, cudaStream_t stream);

// Attention (attention/dispatch.cuh). prepared_layout: the by-diff tables CudaPolicy::prepare_relative
// builds at load for a layer's arguments (rows 0: none apply); build_by_diff_tables writes them into
// `storage` (tables x rows x ld elements of `dtype`, key table first). attention_workspace_bytes: what
// attention_flash needs in `workspace` for this call, given the tables prepared at load (or none).
ByDiffLayout prepared_layout(AttentionArgs const& a, DeviceLimits const& limits);
ByDiffTables build_by_diff_tables(AttentionArgs const& a, ByDiffLayout const& layout, void* storage, DType dtype,
                                  cudaStream_t stream);
std::size_t attention_workspace_bytes(AttentionArgs const& a, DeviceLimits const& limits, ByDiffTables const& prepared);
void attention_flash(AttentionArgs const& a, DeviceLimits const& limits, ByDiffTables const& prepared,
                     cudaStream_t stream, void* workspace);
void attention_eager(AttentionArgs const& a, DeviceLimits const& limits, cudaStream_t stream);

}  // namespace flashdeberta::cuda_kernels
