// Embedding gather: out (T, E) = word[ids] + position[positions] + token_type[token_types], summed in
// fp32 in HF's order (then max(., 0) with relu) and rounded once.
#pragma once

#include <cuda_runtime_api.h>

#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/kernels/element.cuh"
#include "flashdeberta/cuda/kernels/launch.hpp"
#include "flashdeberta/policy/op_args.hpp"

namespace flashdeberta::cuda_kernels {

struct EmbeddingParams {
  std::int32_t const* ids;
  std::int32_t const* positions;    // used when position is set
  std::int32_t const* token_types;  // used when token_type is set
  void const* word;
  void const* position;    // or null
  void const* token_type;  // or null
  void* out;
  std::int64_t tokens, width, word_ld, position_ld, token_type_ld, out_ld;
  bool relu;
};

template <class T>
__global__ void embedding_kernel(EmbeddingParams p) {
  auto const* word = static_cast<T const*>(p.word);
  auto const* position = static_cast<T const*>(p.position);
  auto const* token_type = static_cast<T const*>(p.token_type);
  auto* out = static_cast<T*>(p.out);
  for (std::int64_t t = blockIdx.x; t < p.tokens; t += gridDim.x) {
    T const* w = word + static_cast<std::int64_t>(p.ids[t]) * p.word_ld;
    T const* pe = position != nullptr ? position + static_cast<std::int64_t>(p.positions[t]) * p.position_ld : nullptr;
    T const* te =
        token_type != nullptr ? token_type + static_cast<std::int64_t>(p.token_types[t]) * p.token_type_ld : nullptr;
    for (std::int64_t c = threadIdx.x; c < p.width; c += blockDim.x) {
      float v = to_float(w[c]);
      if (pe != nullptr) v += to_float(pe[c]);
      if (te != nullptr) v += to_float(te[c]);
      out[t * p.out_ld + c] = from_float<T>(p.relu ? fmaxf(v, 0.0f) : v);
    }
  }
}

void embedding(EmbeddingArgs const& e, cudaStream_t stream) {
  if (e.out.rows == 0) return;
  EmbeddingParams const p{e.ids,
                          e.positions,
                          e.token_types,
                          e.word.data,
                          e.position.empty() ? nullptr : e.position.data,
                          e.token_type.empty() ? nullptr : e.token_type.data,
                          e.out.data,
                          e.out.rows,
                          e.out.cols,
                          e.word.ld,
                          e.position.ld,
                          e.token_type.ld,
                          e.out.ld,
                          e.relu};
  dispatch_float_type(e.out.dtype, [&]<class T>() {
    embedding_kernel<T><<<grid_for(e.out.rows, 1, 65535), 128, 0, stream>>>(p);
    FLASHDEBERTA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace flashdeberta::cuda_kernels
