// CudaPolicy's training ops (TrainingPolicy, training_op_args.hpp): the definitions of the methods cuda_policy.hpp
// declares, which it includes this header for at its end. Float32 operands. Products run on cuBLASLt (strict
// float32, no TF32), the rest on the kernels of training/launch.hpp, with the host backends' conventions: parameter
// gradients add, activation gradients are written unless an op says otherwise, and db, dbias, dgamma, dbeta, D and
// the sums of squares add in float64 in an order fixed by the shapes. embedding_backward scatters with atomicAdd, so
// its sums over a repeated row vary in their last bits run to run; every other op gives the same bits each run.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <vector>

#include "flashdeberta/cuda/cuda_policy.hpp"
#include "flashdeberta/cuda/training/launch.hpp"
#include "flashdeberta/policy/training_op_checks.hpp"

namespace flashdeberta {

namespace cuda_detail {

// Element `at` of a device array, read on the host after the work enqueued before it.
template <class T>
T read_device_value(T const* values, std::int64_t at, cudaStream_t stream) {
  T value{};
  FLASHDEBERTA_CUDA_CHECK(cudaMemcpyAsync(&value, values + at, sizeof(T), cudaMemcpyDeviceToHost, stream));
  FLASHDEBERTA_CUDA_CHECK(cudaStreamSynchronize(stream));
  return value;
}

}  // namespace cuda_detail

inline CudaPolicy::RoundedOperand CudaPolicy::rounded(MatrixRef const& m) const {
  std::int64_t const ld = (m.cols + 7) / 8 * 8;
  RoundedOperand r{allocate(m.rows * ld, compute_dtype()), {}};
  r.view = {r.storage.data(), compute_dtype(), m.rows, m.cols, ld};
  cuda_kernels::round_to(m, r.view, stream());
  return r;
}

// dx (M, K) = dy (M, N) . w (N, K), then dw (N, K) += dy^T . x (M, K): two cuBLASLt products (dx first, as the host
// backends), each on 16-bit operands where rounds_product says (dx sums N terms, dw M); db += column sums of dy in
// float64.
inline void CudaPolicy::linear_backward(LinearBackwardArgs const& l) const {
  require_linear_backward_args(l);
  std::int64_t const rows = l.dy.rows;     // M
  std::int64_t const outputs = l.dy.cols;  // N
  context_->activate();
  using Product = cuda_detail::CublasLtGemm::Product;
  bool const round_dx = !l.dx.empty() && rows > 0 && outputs > 0 && rounds_product(l.dy, l.w, l.dx, outputs);
  bool const round_dw = !l.dw.empty() && rows > 0 && outputs > 0 && rounds_product(l.dy, l.x, l.dw, rows);
  RoundedOperand dy;
  if (round_dx || round_dw) dy = rounded(l.dy);
  if (!l.dx.empty()) {
    if (outputs > 0) {
      RoundedOperand w;
      if (round_dx) w = rounded(l.w);
      context_->gemm->run(Product{.a = round_dx ? dy.view : l.dy,
                                  .b = round_dx ? w.view : l.w,
                                  .out = l.dx,
                                  .beta = l.accumulate_dx ? 1.0f : 0.0f},
                          stream());
    } else if (!l.accumulate_dx) {
      cuda_kernels::fill(l.dx, 0.0f, stream());  // an empty sum
    }
  }
  if (!l.dw.empty() && rows > 0) {
    RoundedOperand x;
    if (round_dw) x = rounded(l.x);
    context_->gemm->run(Product{.a = round_dw ? dy.view : l.dy,
                                .transpose_a = true,
                                .b = round_dw ? x.view : l.x,
                                .out = l.dw,
                                .beta = 1.0f},
                        stream());
  }
  if (l.db != nullptr) {
    Buffer const partials = allocate(cuda_kernels::column_partials(rows, l.dy.cols), DType::kF64);
    cuda_kernels::add_column_sums(l.dy, l.db, partials.as<double>(), stream());
  }
}

// Row statistics, the parameter gradients in two stages, then dx, so that dx may alias dy or x; float64 scratch.
inline void CudaPolicy::layer_norm_backward(LayerNormBackwardArgs const& n) const {
  require_layer_norm_backward_args(n);
  std::int64_t const rows = n.x.rows;
  std::int64_t const cols = n.x.cols;
  if (rows == 0 || cols == 0) return;
  context_->activate();
  Buffer const scratch = allocate(cuda_kernels::layer_norm_backward_scratch(rows, cols), DType::kF64);
  cuda_kernels::layer_norm_backward(n, scratch.as<double>(), stream());
}

inline void CudaPolicy::activation(ActivationArgs const& a) const {
  bool const backward = !a.dy.empty();
  char const* op = backward ? "activation backward" : "activation forward";
  require_training_matrix(op, "x", a.x, a.x.rows, a.x.cols);
  require_training_matrix(op, "out", a.out, a.x.rows, a.x.cols);
  if (backward) require_training_matrix(op, "dy", a.dy, a.x.rows, a.x.cols);
  context_->activate();
  cuda_kernels::activation(a, stream());
}

// Every index is checked before anything is added (one synchronization for all tables), then one scatter-add.
inline void CudaPolicy::embedding_backward(EmbeddingBackwardArgs const& e) const {
  char const* op = "embedding_backward";
  std::int64_t const tokens = e.dout.rows;
  std::int64_t const width = e.dout.cols;
  require_training_matrix(op, "dout", e.dout, tokens, width);
  char const* const names[] = {"dword", "dposition", "dtoken_type"};
  MatrixRef const* const grads[] = {&e.dword, &e.dposition, &e.dtoken_type};
  std::int32_t const* const indices[] = {e.ids, e.positions, e.token_types};
  for (int i = 0; i < 3; ++i) {
    if (grads[i]->empty()) continue;
    require_training_matrix(op, names[i], *grads[i], grads[i]->rows, width);
    FLASHDEBERTA_REQUIRE(tokens == 0 || indices[i] != nullptr, op << ": " << names[i] << " has no indices");
  }
  if (tokens == 0) return;
  FLASHDEBERTA_REQUIRE(tokens < 0x7f7f7f7f, op << " over " << tokens << " tokens exceeds 32-bit indices");
  require_not_capturing(op);
  context_->activate();
  Buffer const first = allocate(3, DType::kI32);  // the first bad token of each table
  FLASHDEBERTA_CUDA_CHECK(cudaMemsetAsync(first.data(), 0x7f, 3 * sizeof(std::int32_t), stream()));
  for (int i = 0; i < 3; ++i)
    if (!grads[i]->empty())
      cuda_kernels::first_index_out_of_range(indices[i], tokens, grads[i]->rows, first.as<int>() + i, stream());
  std::array<std::int32_t, 3> bad{};
  FLASHDEBERTA_CUDA_CHECK(cudaMemcpyAsync(bad.data(), first.data(), sizeof(bad), cudaMemcpyDeviceToHost, stream()));
  FLASHDEBERTA_CUDA_CHECK(cudaStreamSynchronize(stream()));
  for (int i = 0; i < 3; ++i) {
    if (grads[i]->empty() || bad[i] >= tokens) continue;
    FLASHDEBERTA_FAIL(op << ": token " << bad[i] << " indexes row "
                         << cuda_detail::read_device_value(indices[i], bad[i], stream()) << " of " << names[i]
                         << ", which has " << grads[i]->rows << " rows");
  }
  cuda_kernels::embedding_backward(e, stream());
}

// The forward's taps transposed (training/scatter.cuh), per group g of width G = C / groups:
//   dweight_g (G, G kernel) += dpre_g^T (G, T) . unfold(x)_g (T, G kernel)
//   dx = fold(dpre_g (T, G) . W_g (G, G kernel)),   dbias += column sums of dpre
inline void CudaPolicy::conv1d_backward(Conv1dBackwardArgs const& c) const {
  char const* op = "conv1d_backward";
  std::int64_t const tokens = c.dpre.rows;
  std::int64_t const channels = c.dpre.cols;
  require_conv1d_backward_args(c);
  std::int64_t const batch = c.sequences.batch;
  FLASHDEBERTA_REQUIRE(batch == 0 || (c.sequences.cu_seqlens != nullptr && c.sequences.positions != nullptr),
                       op << ": the sequence layout of " << batch << " sequences has no offsets or positions");
  context_->activate();
  if (batch > 0) {
    require_not_capturing(op);
    std::int32_t const end = cuda_detail::read_device_value(c.sequences.cu_seqlens, batch, stream());
    FLASHDEBERTA_REQUIRE(end <= tokens, op << ": the sequence layout describes " << end << " tokens, not " << tokens);
  }
  if (tokens == 0) return;
  std::int64_t const group_width = channels / c.groups;
  std::int64_t const taps = group_width * c.kernel_size;  // columns of a group's unfolded slice
  std::int64_t const width = channels * c.kernel_size;
  Buffer const bounds = allocate(2 * tokens, DType::kI32);
  cuda_kernels::conv_sequence_bounds(c.sequences, tokens, bounds.as<std::int32_t>(), stream());
  using Product = cuda_detail::CublasLtGemm::Product;
  auto const dpre_group = [&](std::int64_t g) { return c.dpre.columns(g * group_width, group_width); };
  auto const weight_group = [&](void const* w, std::int64_t g) {  // (G, G kernel) rows of PyTorch's (C, G, kernel)
    return cuda_detail::f32_view(w, g * group_width * taps, group_width, taps, taps);
  };
  if (c.dweight != nullptr) {
    Buffer const columns = allocate(tokens * width, DType::kF32);  // (T, C kernel)
    cuda_kernels::conv_unfold(c, bounds.as<std::int32_t>(), columns.as<float>(), stream());
    for (std::int64_t g = 0; g < c.groups; ++g)
      context_->gemm->run(Product{.a = dpre_group(g),
                                  .transpose_a = true,
                                  .b = cuda_detail::f32_view(columns.data(), g * taps, tokens, taps, width),
                                  .out = weight_group(c.dweight, g),
                                  .beta = 1.0f},
                          stream());
  }
  if (!c.dx.empty()) {
    Buffer const dcolumns = allocate(tokens * width, DType::kF32);  // (T, C kernel)
    for (std::int64_t g = 0; g < c.groups; ++g)
      context_->gemm->run(Product{.a = dpre_group(g),
                                  .b = weight_group(c.weight, g),
                                  .out = cuda_detail::f32_view(dcolumns.data(), g * taps, tokens, taps, width)},
                          stream());
    cuda_kernels::conv_fold(c, bounds.as<std::int32_t>(), dcolumns.as<float>(), stream());
  }
  if (c.dbias != nullptr) {
    Buffer const partials = allocate(cuda_kernels::column_partials(c.dpre.rows, c.dpre.cols), DType::kF64);
    cuda_kernels::add_column_sums(c.dpre, c.dbias, partials.as<double>(), stream());
  }
}

// Inverted dropout; element (r, c) of the view draws counter offset + r cols + c.
inline void CudaPolicy::dropout(DropoutArgs const& d) const {
  require_dropout_args(d);
  context_->activate();
  cuda_kernels::dropout(d, stream());
}

// One element per thread in float64; the four arrays must not overlap.
inline void CudaPolicy::adamw(AdamWArgs const& a) const {
  require_adamw_args(a);
  context_->activate();
  cuda_kernels::adamw(a, stream());
}

inline void CudaPolicy::fill(MatrixRef const& m, float value) const {
  if (m.rows == 0 || m.cols == 0) return;
  require_training_matrix("fill", "out", m, m.rows, m.cols);
  context_->activate();
  cuda_kernels::fill(m, value, stream());
}

// One run of the BatchesFloatRuns form below.
inline double CudaPolicy::sum_of_squares(float const* values, std::int64_t count) const {
  FloatRun const run{const_cast<float*>(values), count};
  return sum_of_squares(std::span<FloatRun const>(&run, 1));
}

inline CudaPolicy::Buffer CudaPolicy::upload_chunks(std::span<FloatRun const> runs, std::int64_t& chunks) const {
  std::vector<FloatRun> list;
  for (FloatRun const& r : runs) {
    FLASHDEBERTA_REQUIRE(r.count >= 0 && (r.count == 0 || r.data != nullptr),
                         "a run of " << r.count << " floats at " << static_cast<void const*>(r.data));
    for (std::int64_t at = 0; at < r.count; at += cuda_kernels::kSquaresChunk)
      list.push_back({r.data + at, std::min(cuda_kernels::kSquaresChunk, r.count - at)});
  }
  chunks = static_cast<std::int64_t>(list.size());
  FLASHDEBERTA_REQUIRE(chunks < (std::int64_t{1} << 31), chunks << " chunks exceed one launch's grid");
  if (chunks == 0) return {};
  static_assert(sizeof(FloatRun) == 16, "two 8-byte words");
  Buffer list_d = allocate(2 * chunks, DType::kI64);
  // Pageable memory: the copy is staged before the call returns, so `list` may go.
  FLASHDEBERTA_CUDA_CHECK(
      cudaMemcpyAsync(list_d.data(), list.data(), list.size() * sizeof(FloatRun), cudaMemcpyHostToDevice, stream()));
  return list_d;
}

inline void CudaPolicy::fill(std::span<FloatRun const> runs, float value) const {
  require_not_capturing("fill of runs");  // its chunk list is uploaded from pageable memory
  context_->activate();
  std::int64_t chunks = 0;
  Buffer const list = upload_chunks(runs, chunks);
  cuda_kernels::fill_list(static_cast<FloatRun const*>(list.data()), chunks, value, stream());
}

// Each chunk's float64 sum on the device, the sums added in chunk order on the host: one round trip for all runs.
inline double CudaPolicy::sum_of_squares(std::span<FloatRun const> runs) const {
  require_not_capturing("sum_of_squares");
  context_->activate();
  std::int64_t chunks = 0;
  Buffer const list = upload_chunks(runs, chunks);
  if (chunks == 0) return 0.0;
  Buffer const partial = allocate(chunks, DType::kF64);
  cuda_kernels::sum_of_squares_list(static_cast<FloatRun const*>(list.data()), chunks, partial.as<double>(), stream());
  std::vector<double> host(static_cast<std::size_t>(chunks));
  FLASHDEBERTA_CUDA_CHECK(
      cudaMemcpyAsync(host.data(), partial.data(), host.size() * sizeof(double), cudaMemcpyDeviceToHost, stream()));
  FLASHDEBERTA_CUDA_CHECK(cudaStreamSynchronize(stream()));
  double total = 0.0;
  for (double sum : host) total += sum;
  return total;
}

}  // namespace flashdeberta
