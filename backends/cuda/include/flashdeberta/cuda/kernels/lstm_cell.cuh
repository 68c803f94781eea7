// One LSTM time step (LstmCellArgs): the gate nonlinearities and the cell update of every (row, direction,
// unit), after the step's recurrent GEMM. The gates are loaded in the compute dtype and widened, the cell state
// stays float32 across steps, h is rounded once to the compute dtype. expf and tanhf, not their intrinsics:
// in fp32 the step stays within a few ulp of PyTorch's cell over hundreds of steps.
#pragma once

#include <cuda_runtime_api.h>

#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/kernels/element.cuh"
#include "flashdeberta/cuda/kernels/launch.hpp"
#include "flashdeberta/policy/op_args.hpp"

namespace flashdeberta::cuda_kernels {

struct LstmCellParams {
  void const* gates_in;
  void const* gates_rec;   // or null
  float const* cell_prev;  // or null
  float* cell;
  void* hidden;
  std::int64_t rows, units, width;  // width = directions x units
  std::int64_t in_ld, rec_ld, prev_ld, cell_ld, hidden_ld;
};

__device__ __forceinline__ float lstm_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

template <class T>
__global__ void lstm_cell_kernel(LstmCellParams p) {
  auto const* in = static_cast<T const*>(p.gates_in);
  auto const* rec = static_cast<T const*>(p.gates_rec);
  auto* hidden = static_cast<T*>(p.hidden);
  std::int64_t const n = p.rows * p.width;
  for (std::int64_t idx = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; idx < n;
       idx += std::int64_t{gridDim.x} * blockDim.x) {
    std::int64_t const r = idx / p.width;
    std::int64_t const u = idx - r * p.width;
    std::int64_t const g = 4 * p.units * (u / p.units) + u % p.units;  // gate i of this unit
    float z[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      z[q] = to_float(in[r * p.in_ld + g + q * p.units]);
      if (rec != nullptr) z[q] += to_float(rec[r * p.rec_ld + g + q * p.units]);
    }
    float const c_prev = p.cell_prev != nullptr ? p.cell_prev[r * p.prev_ld + u] : 0.0f;
    float const c = lstm_sigmoid(z[1]) * c_prev + lstm_sigmoid(z[0]) * tanhf(z[2]);
    p.cell[r * p.cell_ld + u] = c;
    hidden[r * p.hidden_ld + u] = from_float<T>(lstm_sigmoid(z[3]) * tanhf(c));
  }
}

void lstm_cell(LstmCellArgs const& a, cudaStream_t stream) {
  std::int64_t const units = lstm_cell_units(a);
  if (a.hidden.rows == 0 || units == 0) return;
  LstmCellParams const p{a.gates_in.data,
                         a.gates_rec.empty() ? nullptr : a.gates_rec.data,
                         a.cell_prev.empty() ? nullptr : static_cast<float const*>(a.cell_prev.data),
                         static_cast<float*>(a.cell.data),
                         a.hidden.data,
                         a.hidden.rows,
                         units,
                         a.hidden.cols,
                         a.gates_in.ld,
                         a.gates_rec.ld,
                         a.cell_prev.ld,
                         a.cell.ld,
                         a.hidden.ld};
  dispatch_float_type(a.hidden.dtype, [&]<class T>() {
    constexpr int kThreads = 256;  // a step of 64 texts x 512 units is 128 blocks: about one wave on an H200
    lstm_cell_kernel<T><<<grid_for(a.hidden.rows * a.hidden.cols, kThreads), kThreads, 0, stream>>>(p);
    FLASHDEBERTA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace flashdeberta::cuda_kernels
