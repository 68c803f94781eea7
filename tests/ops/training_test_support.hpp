// What the training ops' tests share (training_op_suite.hpp, training_gradient_checks.hpp): the runner they are
// generic over, which is anything with a policy's upload/download, its forward gemm, layer_norm and conv1d and
// the training ops (a TrainingPolicy is one; test_training_ops_eigen.cpp wraps eigen_ops directly), host and
// device matrices, and the error measure.
//
// Matrices are often views (row stride ld > cols): the extra columns of inputs hold NaN, which an op that reads
// them spreads into its output; those of outputs hold a sentinel that must survive. Written outputs start as
// NaN, so a skipped element fails; accumulated ones start random, so `=` instead of `+=` fails.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "flashdeberta/policy/concepts.hpp"
#include "flashdeberta/policy/training_op_args.hpp"
#include "training_reference.hpp"

namespace flashdeberta::training_tests {

namespace ref = training_reference;
using Host = std::vector<float>;
using Indices = std::vector<std::int32_t>;

template <class R>
concept TrainingOpRunner = PolicyBuffer<typename R::Buffer> &&
    requires(R const& r, std::span<float const> host, std::span<std::int32_t const> indices, std::span<float> out,
             typename R::Buffer const& buffer, GemmArgs const& gemm, LayerNormArgs const& layer_norm,
             Conv1dArgs const& conv, LinearBackwardArgs const& linear_backward,
             LayerNormBackwardArgs const& layer_norm_backward, ActivationArgs const& activation,
             EmbeddingBackwardArgs const& embedding_backward, Conv1dBackwardArgs const& conv_backward,
             DropoutArgs const& dropout, AdamWArgs const& adamw, MatrixRef const& matrix, float const* values,
             std::int64_t count, float value) {
  { r.upload(host, DType::kF32) } -> std::same_as<typename R::Buffer>;
  { r.upload_indices(indices) } -> std::same_as<typename R::Buffer>;
  r.download(buffer, out);
  r.fence();
  r.gemm(gemm);
  r.layer_norm(layer_norm);
  r.conv1d(conv);
  r.linear_backward(linear_backward);
  r.layer_norm_backward(layer_norm_backward);
  r.activation(activation);
  r.embedding_backward(embedding_backward);
  r.conv1d_backward(conv_backward);
  r.dropout(dropout);
  r.adamw(adamw);
  r.fill(matrix, value);
  { r.sum_of_squares(values, count) } -> std::same_as<double>;
};

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kSentinel = 777.0f;  // the padding of outputs

inline Host random_values(std::size_t n, float stddev, std::uint32_t seed, float mean = 0.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(mean, stddev);
  Host v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// A (rows, cols) matrix with row stride ld as the host holds it: values[r * ld + c].
struct HostMatrix {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;
  Host values;

  float& at(std::int64_t r, std::int64_t c) { return values[std::size_t(r * ld + c)]; }
  float at(std::int64_t r, std::int64_t c) const { return values[std::size_t(r * ld + c)]; }
  ref::Dense dense() const {
    ref::Dense d(rows, cols);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) d(r, c) = at(r, c);
    return d;
  }
  Host view() const {  // the (rows, cols) elements, dense
    Host v;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) v.push_back(at(r, c));
    return v;
  }
  bool padding_is(float value) const {
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = cols; c < ld; ++c)
        if (!(at(r, c) == value)) return false;
    return true;
  }
};

// Every element of the view `value` (or random with stddev > 0), the padding columns `padding`.
inline HostMatrix make_matrix(std::int64_t rows, std::int64_t cols, std::int64_t pad, float stddev, std::uint32_t seed,
                              float padding = kNaN, float value = 0.0f) {
  HostMatrix m{rows, cols, cols + pad, Host(std::size_t(rows * (cols + pad)), padding)};
  Host const random = random_values(std::size_t(rows * cols), stddev, seed);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) m.at(r, c) = stddev > 0.0f ? random[std::size_t(r * cols + c)] : value;
  return m;
}

// An output that the op writes: NaN in the view, the sentinel around it.
inline HostMatrix poisoned_matrix(std::int64_t rows, std::int64_t cols, std::int64_t pad) {
  return make_matrix(rows, cols, pad, 0.0f, 0, kSentinel, kNaN);
}

template <TrainingOpRunner R>
struct DeviceMatrix {
  typename R::Buffer buffer;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;
  MatrixRef ref() const { return {buffer.data(), DType::kF32, rows, cols, ld}; }
};

template <TrainingOpRunner R>
typename R::Buffer upload(R const& r, Host const& values) {
  return r.upload(std::span<float const>(values), DType::kF32);
}

template <TrainingOpRunner R>
typename R::Buffer upload(R const& r, Indices const& values) {
  return r.upload_indices(std::span<std::int32_t const>(values));
}

template <TrainingOpRunner R>
DeviceMatrix<R> upload(R const& r, HostMatrix const& m) {
  return {upload(r, m.values), m.rows, m.cols, m.ld};
}

template <TrainingOpRunner R>
Host download(R const& r, typename R::Buffer const& buffer) {
  r.fence();
  Host host(std::size_t(buffer.size()));
  r.download(buffer, std::span<float>(host));
  return host;
}

template <TrainingOpRunner R>
HostMatrix download(R const& r, DeviceMatrix<R> const& m) {
  return {m.rows, m.cols, m.ld, download(r, m.buffer)};
}

// How max_error scales |ours - expected|: by max(1, |expected|) of each element (elementwise ops), or by
// max(1, max |expected|) over the whole output (sums, whose float32 rounding grows with their terms, not their
// result: an entry near 0 of a GEMM over 2000 rows is off by what its largest terms are).
enum class Scale { kElement, kOutput };

// The largest scaled error; NaN counts as infinite.
inline double max_error(Host const& ours, std::vector<double> const& expected, Scale scale) {
  REQUIRE(ours.size() == expected.size());
  double output_scale = 1.0;
  for (double e : expected) output_scale = std::max(output_scale, std::abs(e));
  double worst = 0.0;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    double const denominator = scale == Scale::kElement ? std::max(1.0, std::abs(expected[i])) : output_scale;
    double const err = std::abs(double(ours[i]) - expected[i]) / denominator;
    if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
  }
  return worst;
}

inline std::vector<double> plus(std::vector<double> a, Host const& b) {
  for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

inline std::vector<double> as_double(Host const& v) { return {v.begin(), v.end()}; }

inline void check_error(std::string const& label, double error, double bound) {
  MESSAGE(label << ": max error " << error << " (bound " << bound << ")");
  CHECK(error <= bound);
}

// ours (a written or accumulated view) against expected (+ what the buffer held before, when accumulating), and
// its padding untouched.
inline void check_matrix(std::string const& label, HostMatrix const& ours, ref::Dense const& expected,
                         HostMatrix const* before, Scale scale, double bound) {
  std::vector<double> want = expected.values;
  if (before != nullptr) want = plus(std::move(want), before->view());
  check_error(label, max_error(ours.view(), want, scale), bound);
  CHECK_MESSAGE(ours.padding_is(kSentinel), label << " wrote outside its view");
}

// Packed sequences for conv1d, with what SequenceLayout needs besides the two index arrays.
struct PackedLayout {
  ref::Sequences sequences;
  std::int64_t max_seqlen = 0;
  std::int64_t max_position = 0;
  std::int64_t tokens() const { return sequences.cu_seqlens.back(); }
};

inline PackedLayout packed_layout(std::vector<Indices> const& positions_per_sequence) {
  PackedLayout layout;
  layout.sequences.cu_seqlens.push_back(0);
  for (Indices const& positions : positions_per_sequence) {
    layout.sequences.positions.insert(layout.sequences.positions.end(), positions.begin(), positions.end());
    layout.sequences.cu_seqlens.push_back(std::int32_t(layout.sequences.positions.size()));
    layout.max_seqlen = std::max<std::int64_t>(layout.max_seqlen, std::int64_t(positions.size()));
    for (std::int32_t p : positions) layout.max_position = std::max<std::int64_t>(layout.max_position, p + 1);
  }
  return layout;
}

// 30 tokens in four sequences: one token; 9 starting at position 3; 14 with holes of 2, 3 and 3 positions; 6 at
// every other position (a hole between every two).
inline PackedLayout small_layout() {
  return packed_layout(
      {{0}, {3, 4, 5, 6, 7, 8, 9, 10, 11}, {0, 1, 2, 5, 6, 7, 8, 12, 13, 14, 15, 16, 20, 21}, {0, 2, 4, 6, 8, 10}});
}

// 271 tokens: lengths 1, 70 (from position 5) and 200 (a hole of 30 positions after its first 100 tokens).
inline PackedLayout large_layout() {
  std::vector<Indices> positions(3);
  positions[0] = {0};
  for (std::int32_t i = 0; i < 70; ++i) positions[1].push_back(5 + i);
  for (std::int32_t i = 0; i < 200; ++i) positions[2].push_back(i < 100 ? i : i + 30);
  return packed_layout(positions);
}

// The layout's index arrays on the runner, and the SequenceLayout over them.
template <TrainingOpRunner R>
struct DeviceLayout {
  typename R::Buffer cu_seqlens;
  typename R::Buffer positions;
  SequenceLayout layout;

  DeviceLayout(R const& r, PackedLayout const& host)
      : cu_seqlens(upload(r, host.sequences.cu_seqlens)), positions(upload(r, host.sequences.positions)) {
    layout.cu_seqlens = static_cast<std::int32_t const*>(cu_seqlens.data());
    layout.positions = static_cast<std::int32_t const*>(positions.data());
    layout.batch = std::int64_t(host.sequences.cu_seqlens.size()) - 1;
    layout.total_tokens = host.tokens();
    layout.max_seqlen = host.max_seqlen;
    layout.max_position = host.max_position;
    layout.contiguous_positions = false;
  }
};

template <class Buffer>
float* floats(Buffer const& buffer) {
  return static_cast<float*>(buffer.data());
}

}  // namespace flashdeberta::training_tests
