// The building blocks of GLiNER's layers over an execution policy: tensors read from the checkpoint by their
// GLiNER names (a missing one is refused, where GLiNER's strict=False load would keep a random value), the
// Linear layer as a policy GEMM with its bias and activation epilogue, create_projection_layer's
// Linear -> ReLU -> Linear, the row gathers that assemble the batched layers' inputs, and the host <-> policy
// transfers around the steps that run on the host.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "flashdeberta/io/checkpoint.hpp"
#include "flashdeberta/layers/weight_loader.hpp"
#include "flashdeberta/policy/concepts.hpp"

namespace flashdeberta {

// A host float32 matrix, row-major (rows, cols).
struct HostMatrix {
  std::vector<float> values;
  std::int64_t rows = 0;
  std::int64_t cols = 0;

  HostMatrix() = default;
  HostMatrix(std::int64_t r, std::int64_t c) : values(static_cast<std::size_t>(r * c), 0.0f), rows(r), cols(c) {}
  float* row(std::int64_t r) { return values.data() + r * cols; }
  float const* row(std::int64_t r) const { return values.data() + r * cols; }
};

// A matrix in policy memory, in the policy's compute dtype.
template <ExecutionPolicy P>
struct PolicyMatrix {
  typename P::Buffer buffer;
  std::int64_t rows = 0;
  std::int64_t cols = 0;

  MatrixRef ref() const { return {buffer.data(), buffer.dtype(), rows, cols, cols}; }
};

template <ExecutionPolicy P>
PolicyMatrix<P> allocate_matrix(P const& p, std::int64_t rows, std::int64_t cols) {
  return {p.allocate(rows * cols, p.compute_dtype()), rows, cols};
}

template <ExecutionPolicy P>
PolicyMatrix<P> to_policy(P const& p, HostMatrix const& host) {
  return {p.upload(std::span<float const>(host.values), p.compute_dtype()), host.rows, host.cols};
}

// Waits for the policy's work, then copies to the host as float32.
template <ExecutionPolicy P>
HostMatrix to_host(P const& p, PolicyMatrix<P> const& m) {
  HostMatrix host(m.rows, m.cols);
  if (!host.values.empty()) {
    p.fence();
    p.download(m.buffer, std::span<float>(host.values));
  }
  return host;
}

template <ExecutionPolicy P>
typename P::Buffer upload_rows(P const& p, std::vector<std::int32_t> const& rows) {
  return p.upload_indices(std::span<std::int32_t const>(rows));
}

// out row r = table row rows[r]: the embedding op without position or token-type tables. table and out may be
// column ranges of wider matrices (the op keeps their ld), which is how the batched layers build their
// concatenations in place.
template <ExecutionPolicy P>
void gather_rows(P const& p, MatrixRef table, typename P::Buffer const& rows, MatrixRef out) {
  FLASHDEBERTA_ASSERT(rows.size() == out.rows && rows.dtype() == DType::kI32);
  if (out.rows == 0) return;
  p.embedding({.ids = static_cast<std::int32_t const*>(rows.data()), .word = table, .out = out});
}

// A row of zeros in policy memory: the policies allocate uninitialized and have no fill op, so the zero row
// that ends each gathered-from matrix (gliner_batch.hpp) is gathered from this one.
template <ExecutionPolicy P>
class GlinerZeroRow {
 public:
  GlinerZeroRow() = default;

  static GlinerZeroRow make(P const& p, std::int64_t width) {
    GlinerZeroRow z;
    z.width_ = width;
    z.row_ =
        p.upload(std::span<float const>(std::vector<float>(static_cast<std::size_t>(width), 0.0f)), p.compute_dtype());
    z.index_ = upload_rows(p, std::vector<std::int32_t>{0});
    return z;
  }

  // Zeros the last row of m.
  void fill_last_row(P const& p, MatrixRef m) const {
    FLASHDEBERTA_REQUIRE(m.cols <= width_ && m.rows > 0,
                         "GLiNER: a zero row of " << width_ << " columns cannot fill a row of " << m.cols);
    gather_rows(p, MatrixRef{row_->data(), row_->dtype(), 1, m.cols, width_}, *index_, m.row_range(m.rows - 1, 1));
  }

 private:
  std::int64_t width_ = 0;
  std::optional<typename P::Buffer> row_;    // (1, width)
  std::optional<typename P::Buffer> index_;  // {0}
};

// GLiNER tensors by their state-dict names (docs/gliner.md section 8), shape-checked.
class GlinerTensors {
 public:
  explicit GlinerTensors(Checkpoint const& checkpoint) : checkpoint_(checkpoint) {}

  bool has(std::string const& name) const { return checkpoint_.contains(name); }

  // `why` says where the expected shape comes from.
  std::vector<float> read(std::string const& name, std::vector<std::int64_t> const& shape,
                          std::string const& why = "gliner_config.json") const {
    FLASHDEBERTA_REQUIRE(checkpoint_.contains(name), "GLiNER checkpoint "
                                                         << checkpoint_.directory().string() << ": tensor '" << name
                                                         << "' is missing (GLiNER would keep a random value; refused)");
    auto const& actual = checkpoint_.info(name).shape;
    FLASHDEBERTA_REQUIRE(actual == shape, checkpoint_.source_of(name)
                                              << ": tensor '" << name << "' has shape " << detail::format_shape(actual)
                                              << "; " << why << " asks for " << detail::format_shape(shape));
    return checkpoint_.read_f32(name, shape);
  }

  HostMatrix matrix(std::string const& name, std::int64_t rows, std::int64_t cols) const {
    HostMatrix m;
    m.values = read(name, {rows, cols});
    m.rows = rows;
    m.cols = cols;
    return m;
  }

  Checkpoint const& checkpoint() const { return checkpoint_; }

 private:
  Checkpoint const& checkpoint_;
};

// torch.nn.Linear(in, out): weight [out, in], bias [out]; one policy GEMM with the bias and an activation
// in its epilogue.
template <ExecutionPolicy P>
class GlinerLinear {
 public:
  GlinerLinear() = default;

  static GlinerLinear load(P const& p, GlinerTensors const& t, std::string const& name, std::int64_t out,
                           std::int64_t in, bool bias = true) {
    return from_host(p, t.matrix(name + ".weight", out, in),
                     bias ? t.read(name + ".bias", {out}) : std::vector<float>{});
  }

  // weight (out, in) on the host, bias (out) or empty.
  static GlinerLinear from_host(P const& p, HostMatrix const& weight, std::vector<float> const& bias) {
    GlinerLinear l;
    l.weight_ = to_policy(p, weight);
    if (!bias.empty()) {
      l.bias_ = p.upload(std::span<float const>(bias), p.compute_dtype());
      l.has_bias_ = true;
    }
    return l;
  }

  std::int64_t in_features() const { return weight_.cols; }
  std::int64_t out_features() const { return weight_.rows; }

  // out (x.rows, out) = act(x . W^T + b); out may be a column range of a wider matrix.
  void forward_into(P const& p, MatrixRef x, MatrixRef out, Activation act = Activation::kIdentity) const {
    if (x.rows == 0) return;
    p.gemm({.a = x, .b = weight_.ref(), .bias = has_bias_ ? bias_->data() : nullptr, .out = out, .activation = act});
  }

  PolicyMatrix<P> forward(P const& p, MatrixRef x, Activation act = Activation::kIdentity) const {
    PolicyMatrix<P> out = allocate_matrix(p, x.rows, out_features());
    forward_into(p, x, out.ref(), act);
    return out;
  }

 private:
  PolicyMatrix<P> weight_;
  std::optional<typename P::Buffer> bias_;
  bool has_bias_ = false;
};

// create_projection_layer (and the Sequential(Linear, ReLU, [Dropout,] Linear) of the span heads): keys
// `<name>.0` and `<name>.3`, in -> hidden -> out.
template <ExecutionPolicy P>
class GlinerMlp {
 public:
  GlinerMlp() = default;

  static GlinerMlp load(P const& p, GlinerTensors const& t, std::string const& name, std::int64_t in,
                        std::int64_t hidden, std::int64_t out) {
    GlinerMlp m;
    m.first_ = GlinerLinear<P>::load(p, t, name + ".0", hidden, in);
    m.second_ = GlinerLinear<P>::load(p, t, name + ".3", out, hidden);
    return m;
  }

  std::int64_t out_features() const { return second_.out_features(); }

  // `act` is applied after the second Linear (the ReLU GLiNER applies to a concatenation of outputs).
  void forward_into(P const& p, MatrixRef x, MatrixRef out, Activation act = Activation::kIdentity) const {
    if (x.rows == 0) return;
    // `hidden` is freed on return without a fence, as the encoder frees its activations: host policies have
    // finished by then, CudaPolicy's cache hands the block out again only to work queued behind this GEMM.
    PolicyMatrix<P> const hidden = first_.forward(p, x, Activation::kRelu);
    second_.forward_into(p, hidden.ref(), out, act);
  }

  PolicyMatrix<P> forward(P const& p, MatrixRef x, Activation act = Activation::kIdentity) const {
    PolicyMatrix<P> out = allocate_matrix(p, x.rows, out_features());
    forward_into(p, x, out.ref(), act);
    return out;
  }

 private:
  GlinerLinear<P> first_;
  GlinerLinear<P> second_;
};

}  // namespace flashdeberta
