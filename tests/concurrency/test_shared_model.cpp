// One loaded backbone and one head model, each shared by 8 std::threads that run batches of mixed lengths
// (each thread its own, some with holes in their positions) through flash and eager attention: every
// result is bit-identical to the same batch run on one thread beforehand. On EigenPolicy (each std::thread
// then runs its own OpenMP team where OpenMP is on) and on KokkosPolicy<Serial>. Also the other supported
// form: threads that bring policies of their own and share the weights of one model, choosing the attention
// per call (docs/thread-safety.md).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "flashdeberta/flashdeberta.hpp"
#include "flashdeberta/heads/heads.hpp"
#include "run_on_threads.hpp"
#if defined(FLASHDEBERTA_TEST_EIGEN)
#include "flashdeberta/eigen/eigen_policy.hpp"
#endif
#if defined(FLASHDEBERTA_TEST_KOKKOS)
#include "flashdeberta/kokkos/kokkos_policy.hpp"
#endif

namespace fd = flashdeberta;
using fd::testing::kThreads;
using fd::testing::run_on_threads;

namespace {

constexpr int kIterations = 2;  // batches per thread and attention implementation

// (thread, iteration) -> one result
using Results = std::vector<std::vector<std::vector<float>>>;

std::filesystem::path fixture(char const* name) { return std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / name; }

// The batch of one thread's iteration: 1 or 2 sequences whose lengths vary across threads and straddle the
// host flash tiles (64 queries, 128 keys); odd threads drop every seventh position of their first sequence,
// as a mask with holes does (the per-element position path).
fd::Batch job_batch(int thread, int iteration, std::int64_t vocab) {
  static constexpr std::int64_t kLengths[] = {1, 9, 64, 65, 100, 129, 31, 77};
  std::uint32_t seed = 2654435761u * static_cast<std::uint32_t>(16 * thread + iteration + 1);
  fd::Batch batch;
  int const sequences = 1 + (thread + iteration) % 2;
  for (int s = 0; s < sequences; ++s) {
    std::int64_t const length = kLengths[(3 * thread + 2 * iteration + 5 * s) % 8];
    bool const holes = thread % 2 == 1 && s == 0;
    std::int32_t position = 0;
    for (std::int64_t kept = 0; kept < length; ++position) {
      if (holes && position % 7 == 3) continue;
      seed = seed * 1664525u + 1013904223u;
      batch.input_ids.push_back(static_cast<std::int32_t>((seed >> 8) % static_cast<std::uint32_t>(vocab)));
      batch.positions.push_back(position);
      ++kept;
    }
    batch.cu_seqlens.push_back(static_cast<std::int32_t>(batch.input_ids.size()));
  }
  return batch;
}

std::vector<std::vector<fd::Batch>> job_batches(std::int64_t vocab) {
  std::vector<std::vector<fd::Batch>> batches(kThreads);
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kIterations; ++i) batches[t].push_back(job_batch(t, i, vocab));
  return batches;
}

// Every thread's iteration as `run` computes it: first all on the calling thread, one after the other (the
// reference), then on kThreads threads at once; the two must agree bit for bit.
template <class Run>
void check_threads_match_one_thread(std::string const& what, Run const& run) {
  Results expected(kThreads, std::vector<std::vector<float>>(kIterations));
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kIterations; ++i) expected[t][i] = run(t, i);
  Results got(kThreads, std::vector<std::vector<float>>(kIterations));
  run_on_threads(kThreads, [&](int t) {
    for (int i = 0; i < kIterations; ++i) got[t][i] = run(t, i);
  });
  int differing = 0;
  std::ostringstream first;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kIterations; ++i) {
      auto const& a = got[t][i];
      auto const& b = expected[t][i];
      REQUIRE_MESSAGE(!b.empty(), what << ": thread " << t << " iteration " << i << " has no outputs to compare");
      bool const same = a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
      if (!same && differing++ == 0)
        first << "thread " << t << " iteration " << i << " (" << a.size() << " vs " << b.size() << " floats)";
    }
  }
  CHECK_MESSAGE(differing == 0, what << ": " << differing << " of " << kThreads * kIterations
                                     << " results differ from the single-thread run, first " << first.str());
}

char const* impl_name(fd::AttentionImpl impl) { return impl == fd::AttentionImpl::kFlash ? "flash" : "eager"; }

// One model shared by every thread through its plain forward; the attention is set between the runs,
// while no forward is in flight (set_attention is the one mutating call).
template <class P>
void check_shared_backbone(P const& policy, char const* fixture_name) {
  auto model = fd::DebertaV3<P>::load(policy, fixture(fixture_name));
  auto const batches = job_batches(model.config().vocab_size);
  for (fd::AttentionImpl impl : {fd::AttentionImpl::kFlash, fd::AttentionImpl::kEager}) {
    model.set_attention(impl);
    check_threads_match_one_thread(std::string("backbone, ") + impl_name(impl),
                                   [&](int t, int i) { return model.forward_to_host(batches[t][i]); });
  }
}

// A head model (masked LM: the backbone, the head's GEMMs and the tied decoder) shared by every thread; odd
// iterations ask for every third token only (the row gather).
template <class P>
void check_shared_head_model(P const& policy) {
  auto model = fd::DebertaV3ForMaskedLM<P>::load(policy, fixture("heads/mlm_v3_nonlegacy"));
  auto const batches = job_batches(model.config().vocab_size);
  for (fd::AttentionImpl impl : {fd::AttentionImpl::kFlash, fd::AttentionImpl::kEager}) {
    model.set_attention(impl);
    check_threads_match_one_thread(std::string("masked LM, ") + impl_name(impl), [&](int t, int i) {
      fd::Batch const& batch = batches[t][i];
      fd::HeadRequest request;
      if (i % 2 == 1) {
        request.tokens.emplace();
        for (std::int64_t token = 0; token < batch.total_tokens(); token += 3) request.tokens->push_back(token);
      }
      return model.forward_to_host(batch, request)["logits"].values;
    });
  }
}

// Threads that make policies of their own (as a server gives each worker one) and share the model's
// weights through ForwardContext, picking flash or eager per call: the same floats as the model's own
// policy gives on one thread. make_policy runs on the worker thread, concurrently with the others.
template <class P, class MakePolicy>
void check_policy_per_thread(P const& policy, char const* fixture_name, MakePolicy const& make_policy) {
  auto const model = fd::DebertaV3<P>::load(policy, fixture(fixture_name));
  auto const batches = job_batches(model.config().vocab_size);
  auto const run = [&](P const& on, int t, int i) {
    fd::Batch const& batch = batches[t][i];
    fd::AttentionImpl const impl = (t + i) % 2 == 0 ? fd::AttentionImpl::kFlash : fd::AttentionImpl::kEager;
    batch.validate(model.config());
    fd::ForwardContext<P> const ctx(on, batch, impl);
    fd::HiddenStates<P> const states = model.enqueue_forward(ctx);
    on.fence();
    std::vector<float> host(static_cast<std::size_t>(states.tokens * states.hidden_size));
    on.download(states.values, std::span<float>(host));
    return host;
  };
  for (int t = 0; t < kThreads; ++t) {
    std::vector<float> const shared = run(model.policy(), t, 0);
    std::vector<float> const own = run(make_policy(), t, 0);
    REQUIRE(shared.size() == own.size());
    REQUIRE(std::memcmp(shared.data(), own.data(), own.size() * sizeof(float)) == 0);
  }
  check_threads_match_one_thread("a policy per thread", [&](int t, int i) {
    if (i > 0) return run(model.policy(), t, i);  // the shared policy runs alongside the threads' own
    return run(make_policy(), t, i);
  });
}

}  // namespace

#if defined(FLASHDEBERTA_TEST_EIGEN)
namespace {
// OpenMP threads inside each std::thread where the build has OpenMP; without it (the ThreadSanitizer build,
// since TSan cannot see libgomp's synchronization) the policy runs single-threaded and opens no OpenMP region.
#if defined(_OPENMP)
constexpr int kOmpThreads = 2;
#else
constexpr int kOmpThreads = 1;
#endif
}  // namespace

TEST_CASE("concurrency: eigen: one backbone shared by 8 threads gives the single-thread floats") {
  check_shared_backbone(fd::EigenPolicy(kOmpThreads), "v3_base_like");
}

TEST_CASE("concurrency: eigen: one masked-LM model shared by 8 threads gives the single-thread logits") {
  check_shared_head_model(fd::EigenPolicy(kOmpThreads));
}

TEST_CASE("concurrency: eigen: a policy per thread over shared weights gives the shared policy's floats") {
  check_policy_per_thread(fd::EigenPolicy(kOmpThreads), "v3_base_like", [] { return fd::EigenPolicy(kOmpThreads); });
}
#endif

#if defined(FLASHDEBERTA_TEST_KOKKOS)
// v3_mask_hole (hidden size 32) rather than v3_base_like (128): Kokkos has one kernel for every head size,
// and its team GEMM under ThreadSanitizer took minutes at the larger size.
TEST_CASE("concurrency: kokkos: one backbone shared by 8 threads gives the single-thread floats") {
  check_shared_backbone(fd::KokkosPolicy<>{}, "v3_mask_hole");
}

TEST_CASE("concurrency: kokkos: one masked-LM model shared by 8 threads gives the single-thread logits") {
  check_shared_head_model(fd::KokkosPolicy<>{});
}

TEST_CASE("concurrency: kokkos: a policy per thread over shared weights gives the shared policy's floats") {
  check_policy_per_thread(fd::KokkosPolicy<>{}, "v3_mask_hole",
                          [] { return fd::KokkosPolicy<>(Kokkos::DefaultExecutionSpace()); });
}
#endif
