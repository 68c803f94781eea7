// ProfilingPolicy<P>: an execution policy that forwards every operation to P and adds up, per kind of
// operation, how often it ran and how long it took. It answers "where does the time of a forward go", and for a
// TrainingPolicy P of a training step, for any backend without touching the model or the backend.
//
// Each operation is fenced before and after, so asynchronous backends are timed per operation rather
// than per enqueue; this serializes the policy's stream, which is the point when profiling and the
// reason not to profile in production. Copies share one set of counters: the copy a DebertaModel keeps
// and the one the caller holds report the same numbers.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "flashdeberta/policy/concepts.hpp"
#include "flashdeberta/policy/host_adoption.hpp"
#include "flashdeberta/policy/training_concepts.hpp"

namespace flashdeberta {

// The forward's operations, then the training ops (training_concepts.hpp).
enum class ProfiledOp {
  kGemm,
  kLayerNorm,
  kEmbedding,
  kConv1d,
  kAttention,
  kLstmCell,
  kLinearBackward,
  kLayerNormBackward,
  kActivation,
  kEmbeddingBackward,
  kConv1dBackward,
  kAttentionBackward,
  kDropout,
  kAdamW,
  kFill,
  kSumOfSquares
};
inline constexpr std::size_t kProfiledOpCount = 16;

inline char const* profiled_op_name(ProfiledOp op) {
  switch (op) {
    case ProfiledOp::kGemm:
      return "gemm";
    case ProfiledOp::kLayerNorm:
      return "layer_norm";
    case ProfiledOp::kEmbedding:
      return "embedding";
    case ProfiledOp::kConv1d:
      return "conv1d";
    case ProfiledOp::kAttention:
      return "attention";
    case ProfiledOp::kLstmCell:
      return "lstm_cell";
    case ProfiledOp::kLinearBackward:
      return "linear_backward";
    case ProfiledOp::kLayerNormBackward:
      return "layer_norm_backward";
    case ProfiledOp::kActivation:
      return "activation";
    case ProfiledOp::kEmbeddingBackward:
      return "embedding_backward";
    case ProfiledOp::kConv1dBackward:
      return "conv1d_backward";
    case ProfiledOp::kAttentionBackward:
      return "attention_backward";
    case ProfiledOp::kDropout:
      return "dropout";
    case ProfiledOp::kAdamW:
      return "adamw";
    case ProfiledOp::kFill:
      return "fill";
    case ProfiledOp::kSumOfSquares:
      return "sum_of_squares";
  }
  return "?";
}

// 2 M N K multiply-adds of out = a . b^T.
inline double gemm_flops(GemmArgs const& g) { return 2.0 * static_cast<double>(g.a.rows * g.b.rows * g.a.cols); }

// Useful work of disentangled attention: 4 L^2 d H for q.k^T and p.v, plus 2 L (2k) d H for each of the
// c2p (q.Kr^T) and p2c (k.Qr^T) products. Exact for batches of equal lengths; the cu_seqlens may live
// in device memory, so other batches are estimated with every sequence at max_seqlen.
inline double attention_flops(AttentionArgs const& a) {
  auto const tokens = static_cast<double>(a.sequences.total_tokens);
  auto const length = static_cast<double>(a.sequences.max_seqlen);
  auto const width = static_cast<double>(a.head_size * a.num_heads);
  double flops = 4.0 * tokens * length * width;
  std::int64_t const slots = !a.pos_key.empty() ? a.pos_key.rows : a.pos_query.rows;
  int const terms = (a.pos_key.empty() ? 0 : 1) + (a.pos_query.empty() ? 0 : 1);
  flops += terms * 2.0 * tokens * static_cast<double>(slots) * width;
  return flops;
}

struct OpProfile {
  std::int64_t calls = 0;
  double seconds = 0.0;
  double flops = 0.0;  // gemm and attention only
};

struct ProfileReport {
  std::array<OpProfile, kProfiledOpCount> ops{};

  OpProfile const& operator[](ProfiledOp op) const { return ops[static_cast<std::size_t>(op)]; }

  double total_seconds() const {
    double total = 0.0;
    for (OpProfile const& o : ops) total += o.seconds;
    return total;
  }

  // Fraction of the profiled time spent in `op`, in [0, 1].
  double share(ProfiledOp op) const {
    double const total = total_seconds();
    return total > 0.0 ? (*this)[op].seconds / total : 0.0;
  }

  // One line per kind that ran: calls, milliseconds, share of the total, GFLOP/s where counted.
  std::string format() const {
    std::string text = "op                    calls        ms   share   GFLOP/s\n";
    char line[128];
    for (std::size_t i = 0; i < kProfiledOpCount; ++i) {
      OpProfile const& o = ops[i];
      if (o.calls == 0) continue;
      double const gflops = o.flops > 0.0 && o.seconds > 0.0 ? o.flops / o.seconds * 1e-9 : 0.0;
      std::snprintf(line, sizeof(line), "%-19s %7lld %9.2f %6.1f%% %9.1f\n",
                    profiled_op_name(static_cast<ProfiledOp>(i)), static_cast<long long>(o.calls), o.seconds * 1e3,
                    100.0 * share(static_cast<ProfiledOp>(i)), gflops);
      text += line;
    }
    std::snprintf(line, sizeof(line), "%-19s %7s %9.2f\n", "total", "", total_seconds() * 1e3);
    return text + line;
  }
};

template <ExecutionPolicy P>
class ProfilingPolicy {
 public:
  using Buffer = typename P::Buffer;

  explicit ProfilingPolicy(P inner = P{}) : inner_(std::move(inner)), counters_(std::make_shared<Counters>()) {}

  // The wrapped policy's name: the decorator changes timing, not results.
  static char const* name() { return P::name(); }
  P const& inner() const { return inner_; }
  DType compute_dtype() const { return inner_.compute_dtype(); }

  Buffer allocate(std::int64_t size, DType dtype) const { return inner_.allocate(size, dtype); }
  Buffer upload(std::span<float const> host, DType dtype) const { return inner_.upload(host, dtype); }
  Buffer adopt_host(std::span<float const> values,
                    std::shared_ptr<void const> owner) const requires AdoptsHostMemory<P> {
    return inner_.adopt_host(values, std::move(owner));
  }
  Buffer upload_indices(std::span<std::int32_t const> host) const { return inner_.upload_indices(host); }
  void download(Buffer const& buffer, std::span<float> host) const { inner_.download(buffer, host); }

  void gemm(GemmArgs const& args) const {
    timed(ProfiledOp::kGemm, gemm_flops(args), [&] { inner_.gemm(args); });
  }
  void layer_norm(LayerNormArgs const& args) const {
    timed(ProfiledOp::kLayerNorm, 0.0, [&] { inner_.layer_norm(args); });
  }
  void embedding(EmbeddingArgs const& args) const {
    timed(ProfiledOp::kEmbedding, 0.0, [&] { inner_.embedding(args); });
  }
  void conv1d(Conv1dArgs const& args) const {
    timed(ProfiledOp::kConv1d, 0.0, [&] { inner_.conv1d(args); });
  }
  void disentangled_attention(AttentionArgs const& args) const {
    timed(ProfiledOp::kAttention, attention_flops(args), [&] { inner_.disentangled_attention(args); });
  }
  void lstm_cell(LstmCellArgs const& args) const {
    timed(ProfiledOp::kLstmCell, 0.0, [&] { inner_.lstm_cell(args); });
  }
  void fence() const { inner_.fence(); }

  // The wrapped policy's optional hooks, where it has them: a profiled forward is refused where the plain
  // one is (concepts.hpp) and runs on the same tables prepared at load (CudaPolicy::prepare_relative).
  std::optional<std::int64_t> available_memory_bytes() const requires ReportsAvailableMemory<P> {
    return inner_.available_memory_bytes();
  }
  std::int64_t attention_workspace_bytes(AttentionShape const& shape) const requires ReportsAttentionWorkspace<P> {
    return static_cast<std::int64_t>(inner_.attention_workspace_bytes(shape));
  }
  using PreparedRelative = prepared_relative_t<P>;
  PreparedRelative prepare_relative(AttentionArgs const& args) const requires PreparesRelativeTables<P> {
    return inner_.prepare_relative(args);
  }
  void disentangled_attention(AttentionArgs const& args,
                              PreparedRelative const& prepared) const requires PreparesRelativeTables<P> {
    timed(ProfiledOp::kAttention, attention_flops(args), [&] { inner_.disentangled_attention(args, prepared); });
  }

  // The training ops, where P trains: ProfilingPolicy<P> is a TrainingPolicy exactly when P is. linear_backward's
  // flops are its two products' (dx and dW); the attention backward's are FlashAttention's count, 2.5 times the
  // forward's (five products of the forward's size against its two).
  void linear_backward(LinearBackwardArgs const& args) const requires TrainingPolicy<P> {
    double const flops = 2.0 * 2.0 * static_cast<double>(args.dy.rows * args.dy.cols * args.x.cols);
    timed(ProfiledOp::kLinearBackward, flops, [&] { inner_.linear_backward(args); });
  }
  void layer_norm_backward(LayerNormBackwardArgs const& args) const requires TrainingPolicy<P> {
    timed(ProfiledOp::kLayerNormBackward, 0.0, [&] { inner_.layer_norm_backward(args); });
  }
  void activation(ActivationArgs const& args) const requires TrainingPolicy<P> {
    timed(ProfiledOp::kActivation, 0.0, [&] { inner_.activation(args); });
  }
  void embedding_backward(EmbeddingBackwardArgs const& args) const requires TrainingPolicy<P> {
    timed(ProfiledOp::kEmbeddingBackward, 0.0, [&] { inner_.embedding_backward(args); });
  }
  void conv1d_backward(Conv1dBackwardArgs const& args) const requires TrainingPolicy<P> {
    timed(ProfiledOp::kConv1dBackward, 0.0, [&] { inner_.conv1d_backward(args); });
  }
  void disentangled_attention_backward(AttentionBackwardArgs const& args) const requires TrainingPolicy<P> {
    timed(ProfiledOp::kAttentionBackward, 2.5 * attention_flops(args.forward),
          [&] { inner_.disentangled_attention_backward(args); });
  }
  void dropout(DropoutArgs const& args) const requires TrainingPolicy<P> {
    timed(ProfiledOp::kDropout, 0.0, [&] { inner_.dropout(args); });
  }
  void adamw(AdamWArgs const& args) const requires TrainingPolicy<P> {
    timed(ProfiledOp::kAdamW, 0.0, [&] { inner_.adamw(args); });
  }
  void fill(MatrixRef const& m, float value) const requires TrainingPolicy<P> {
    timed(ProfiledOp::kFill, 0.0, [&] { inner_.fill(m, value); });
  }
  double sum_of_squares(float const* values, std::int64_t count) const requires TrainingPolicy<P> {
    double sum = 0.0;
    timed(ProfiledOp::kSumOfSquares, 0.0, [&] { sum = inner_.sum_of_squares(values, count); });
    return sum;
  }
  void fill(std::span<FloatRun const> runs, float value) const requires BatchesFloatRuns<P> {
    timed(ProfiledOp::kFill, 0.0, [&] { inner_.fill(runs, value); });
  }
  double sum_of_squares(std::span<FloatRun const> runs) const requires BatchesFloatRuns<P> {
    double sum = 0.0;
    timed(ProfiledOp::kSumOfSquares, 0.0, [&] { sum = inner_.sum_of_squares(runs); });
    return sum;
  }
  std::int64_t attention_backward_workspace_bytes(AttentionShape const& shape) const requires
      ReportsAttentionBackwardWorkspace<P> {
    return static_cast<std::int64_t>(inner_.attention_backward_workspace_bytes(shape));
  }

  ProfileReport report() const {
    std::lock_guard<std::mutex> const lock(counters_->mutex);
    return counters_->report;
  }
  void reset() const {
    std::lock_guard<std::mutex> const lock(counters_->mutex);
    counters_->report = {};
  }

 private:
  struct Counters {
    std::mutex mutex;  // a policy may be shared by host threads; the lock is taken once per operation
    ProfileReport report;
  };

  template <class Op>
  void timed(ProfiledOp kind, double flops, Op&& op) const {
    using Clock = std::chrono::steady_clock;
    inner_.fence();  // earlier queued work must not be billed to this operation
    auto const start = Clock::now();
    op();
    inner_.fence();
    double const seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::lock_guard<std::mutex> const lock(counters_->mutex);
    OpProfile& entry = counters_->report.ops[static_cast<std::size_t>(kind)];
    entry.calls += 1;
    entry.seconds += seconds;
    entry.flops += flops;
  }

  P inner_;
  std::shared_ptr<Counters> counters_;
};

}  // namespace flashdeberta
