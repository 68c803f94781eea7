// Disentangled attention alone, v3-base shapes: 12 heads of 64, a (512, 768) projected relative table
// for each of c2p and p2c, the v3 slot table (256 log buckets, saturation at distance 512).
// Eager (HF's order of operations, (L, L) scores per head) is the baseline for flash in the same file.
//
// FLOP/s counts 4 L^2 d H (q.k^T and p.v) + 2 * 2 L (2k) d H (q.Kr^T and k.Qr^T) per sequence: the work
// of the algorithm, not of either implementation. The flash entries also report max_abs_err, their
// largest deviation from eager on the same inputs (checked once per entry, for L <= 2048).
#include <algorithm>
#include <cmath>
#include <vector>

#include "bench_common.hpp"
#include "flashdeberta/policy/profiling_policy.hpp"
#include "flashdeberta/policy/training_concepts.hpp"

namespace flashdeberta::bench {
namespace {

template <ExecutionPolicy P>
class AttentionProblem {
 public:
  AttentionProblem(P const& p, Shape s, AttentionImpl impl) : sequences_(p, s) {
    ModelConfig const c = v3_base_config();
    std::int64_t const tokens = s.batch * s.length;
    std::int64_t const width = c.all_head_size();
    RelativeSlotTable const slots = make_relative_slot_table(c);
    // One (T, 3A) buffer viewed as [Q | K | V], as the v2/v3 attention block lays out its fused projection.
    qkv_ = random_matrix(p, tokens, 3 * width, 11);
    pos_key_ = random_matrix(p, 2 * slots.span, width, 12);
    pos_query_ = random_matrix(p, 2 * slots.span, width, 13);
    slot_buffer_ = p.upload_indices(std::span<std::int32_t const>(slots.slots));
    out_ = empty_matrix(p, tokens, width);
    view_fused_qkv(args_, qkv_.ref, c.head_size, QkvLayout::kStacked);
    args_.num_heads = c.num_heads;
    args_.head_size = c.head_size;
    args_.pos_key = pos_key_.ref;
    args_.pos_query = pos_query_.ref;
    args_.relative_index = static_cast<std::int32_t const*>(slot_buffer_.data());
    args_.saturation = slots.saturation;
    args_.scale = c.attention_scale();
    args_.out = out_.ref;
    args_.sequences = sequences_.layout;
    args_.impl = impl;
  }

  AttentionArgs const& args() const { return args_; }
  AttentionArgs& mutable_args() { return args_; }

  std::vector<float> run_to_host(P const& p, AttentionImpl impl) {
    AttentionArgs a = args_;
    a.impl = impl;
    p.disentangled_attention(a);
    p.fence();
    std::vector<float> host(static_cast<std::size_t>(out_.buffer.size()));
    p.download(out_.buffer, std::span<float>(host));
    return host;
  }

 private:
  PolicySequences<P> sequences_;
  PolicyMatrix<P> qkv_, pos_key_, pos_query_, out_;
  typename P::Buffer slot_buffer_;
  AttentionArgs args_;
};

template <ExecutionPolicy P>
void attention(benchmark::State& state, Shape s, AttentionImpl impl) {
  P const p = make_policy<P>();
  AttentionProblem<P> problem(p, s, impl);
  if (impl == AttentionImpl::kFlash && s.length <= 2048) {
    std::vector<float> const flash = problem.run_to_host(p, AttentionImpl::kFlash);
    std::vector<float> const eager = problem.run_to_host(p, AttentionImpl::kEager);
    double worst = 0.0;
    for (std::size_t i = 0; i < flash.size(); ++i) worst = std::max(worst, std::fabs(double{flash[i]} - eager[i]));
    state.counters["max_abs_err"] = worst;
  }
  p.disentangled_attention(problem.args());  // warm-up (configure_run)
  p.fence();
  for (auto _ : state) {
    p.disentangled_attention(problem.args());
    p.fence();
  }
  set_rate_counters(state, static_cast<double>(s.batch * s.length), attention_flops(problem.args()));
}

// The flash backward of the same problem from the forward's log-sum-exp (what a training step runs): dQ, dK, dV
// and the relative tables' gradients. FLOP/s counts the algorithm's work: 5 L^2 d H for the tiles (S recomputed,
// dO.V^T, P^T.dO, dS^T.Q, dS.K) and 6 L W d H for the position terms (the two tables recomputed, their four
// gradient products), W the window of table rows the batch reaches.
template <TrainingPolicy P>
void attention_backward(benchmark::State& state, Shape s) {
  P const p = make_policy<P>();
  AttentionProblem<P> problem(p, s, AttentionImpl::kFlash);
  AttentionArgs& forward = problem.mutable_args();
  std::int64_t const tokens = s.batch * s.length;
  std::int64_t const width = forward.num_heads * forward.head_size;
  std::vector<float> lse(static_cast<std::size_t>(forward.num_heads * tokens));
  forward.lse = lse.data();
  p.disentangled_attention(forward);
  p.fence();
  PolicyMatrix<P> const dout = random_matrix(p, tokens, width, 14);
  PolicyMatrix<P> const dq = random_matrix(p, tokens, width, 15), dk = random_matrix(p, tokens, width, 16),
                        dv = random_matrix(p, tokens, width, 17);
  PolicyMatrix<P> const dpos_key = random_matrix(p, forward.pos_key.rows, width, 18);
  PolicyMatrix<P> const dpos_query = random_matrix(p, forward.pos_query.rows, width, 19);
  AttentionBackwardArgs const args{.forward = forward,
                                   .dout = dout.ref,
                                   .lse = lse.data(),
                                   .dq = dq.ref,
                                   .dk = dk.ref,
                                   .dv = dv.ref,
                                   .dpos_key = dpos_key.ref,
                                   .dpos_query = dpos_query.ref};
  p.disentangled_attention_backward(args);  // warm-up (configure_run)
  p.fence();
  for (auto _ : state) {
    p.disentangled_attention_backward(args);
    p.fence();
  }
  auto const l = static_cast<double>(s.length);
  double const window = std::min(2.0 * l - 1.0, static_cast<double>(forward.pos_key.rows));
  double const per_head = 2.0 * static_cast<double>(forward.head_size) * (5.0 * l * l + 6.0 * l * window);
  set_rate_counters(state, static_cast<double>(tokens), per_head * static_cast<double>(forward.num_heads * s.batch));
}

inline constexpr Shape kBackwardShapes[] = {{8, 128}, {1, 512}, {1, 2048}};

// Attention past 1024 x 1024 score elements: 3 timed iterations (configure_run).
bool const registered = [] {
  for_each_policy([]<class P>() {
    for (AttentionImpl impl : {AttentionImpl::kEager, AttentionImpl::kFlash}) {
      for (Shape s : kShapes) {
        std::string const name = std::string("attention/") + P::name() + "/" + impl_name(impl) + "/" + shape_name(s);
        auto* b = benchmark::RegisterBenchmark(name.c_str(), attention<P>, s, impl);
        configure_run(b, static_cast<double>(s.batch * s.length * s.length), 1024.0 * 1024.0);
      }
    }
    if constexpr (TrainingPolicy<P>) {
      for (Shape s : kBackwardShapes) {
        std::string const name = std::string("attention_backward/") + P::name() + "/flash/" + shape_name(s);
        auto* b = benchmark::RegisterBenchmark(name.c_str(), attention_backward<P>, s);
        configure_run(b, static_cast<double>(s.batch * s.length * s.length), 1024.0 * 1024.0);
      }
    }
  });
  return true;
}();

}  // namespace
}  // namespace flashdeberta::bench
