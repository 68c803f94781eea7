// The concurrency tests' bodies, one per supported way of sharing a model (docs/thread-safety.md), generic over
// the policy and instantiated by each backend's executable (test_concurrency_eigen.cpp,
// test_concurrency_kokkos.cpp, tests/cuda/test_concurrency_cuda.cpp). Each runs kThreads std::threads over
// batches of mixed lengths, some with holes in their positions, and requires every result to be bit-identical
// to the same batch run on one thread beforehand:
//   - check_shared_backbone, check_shared_head_model: one model and its policy shared by every thread, flash
//     then eager attention (set between the runs, while no forward is in flight);
//   - check_policy_per_thread: threads that make policies of their own (on CUDA: a stream each) and run the
//     shared weights through ForwardContext and HeadInput, flash or eager per call, while the model's own
//     policy runs alongside them.
#pragma once

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

namespace flashdeberta::testing {

// (thread, iteration) -> one result
using ThreadResults = std::vector<std::vector<std::vector<float>>>;

// What each thread runs: `iterations` batches of 1 to `max_sequences` sequences, their lengths drawn from
// `lengths`. A backend picks lengths that straddle its kernels' tiles (host flash: 64 queries, 128 keys).
struct JobPlan {
  std::span<std::int64_t const> lengths;
  int max_sequences = 2;
  int iterations = 2;
};

// The masked-LM head model every backend shares between threads.
inline constexpr char kConcurrencyHeadFixture[] = "heads/mlm_v3_nonlegacy";

inline std::filesystem::path concurrency_fixture(char const* name) {
  return std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / name;
}

// The batch of one thread's iteration; odd threads drop every seventh position of their first sequence, as a
// mask with holes does (the per-element position path).
inline Batch job_batch(JobPlan const& plan, int thread, int iteration, std::int64_t vocab) {
  std::uint32_t seed = 2654435761u * static_cast<std::uint32_t>(16 * thread + iteration + 1);
  Batch batch;
  int const sequences = 1 + (thread + iteration) % plan.max_sequences;
  auto const lengths = static_cast<int>(plan.lengths.size());
  for (int s = 0; s < sequences; ++s) {
    std::int64_t const length = plan.lengths[static_cast<std::size_t>((3 * thread + 2 * iteration + 5 * s) % lengths)];
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

inline std::vector<std::vector<Batch>> job_batches(JobPlan const& plan, std::int64_t vocab) {
  std::vector<std::vector<Batch>> batches(kThreads);
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < plan.iterations; ++i) batches[t].push_back(job_batch(plan, t, i, vocab));
  return batches;
}

inline ThreadResults empty_results(JobPlan const& plan) {
  return ThreadResults(kThreads, std::vector<std::vector<float>>(static_cast<std::size_t>(plan.iterations)));
}

// `got` against `expected`: the count of results whose bits differ, and the first of them.
inline void check_bitwise(std::string const& what, JobPlan const& plan, ThreadResults const& got,
                          ThreadResults const& expected) {
  int differing = 0;
  std::ostringstream first;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < plan.iterations; ++i) {
      auto const& a = got[t][i];
      auto const& b = expected[t][i];
      REQUIRE_MESSAGE(!b.empty(), what << ": thread " << t << " iteration " << i << " has no outputs to compare");
      bool const same = a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
      if (!same && differing++ == 0)
        first << "thread " << t << " iteration " << i << " (" << a.size() << " vs " << b.size() << " floats)";
    }
  }
  CHECK_MESSAGE(differing == 0, what << ": " << differing << " of " << kThreads * plan.iterations
                                     << " results differ from the single-thread run, first " << first.str());
}

// run(t, i) on the calling thread for every job (the reference), then on kThreads threads at once.
template <class Run>
void check_threads_match_one_thread(std::string const& what, JobPlan const& plan, Run const& run) {
  ThreadResults expected = empty_results(plan);
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < plan.iterations; ++i) expected[t][i] = run(t, i);
  ThreadResults got = empty_results(plan);
  run_on_threads(kThreads, [&](int t) {
    for (int i = 0; i < plan.iterations; ++i) got[t][i] = run(t, i);
  });
  check_bitwise(what, plan, got, expected);
}

inline char const* impl_name(AttentionImpl impl) { return impl == AttentionImpl::kFlash ? "flash" : "eager"; }

// Odd iterations ask the head for every third token only (the row gather).
inline HeadRequest head_request(Batch const& batch, int iteration) {
  HeadRequest request;
  if (iteration % 2 == 0) return request;
  request.tokens.emplace();
  for (std::int64_t token = 0; token < batch.total_tokens(); token += 3) request.tokens->push_back(token);
  return request;
}

// One backbone shared by every thread through its plain forward.
template <ExecutionPolicy P>
void check_shared_backbone(std::string const& what, JobPlan const& plan, P const& policy, char const* fixture_name) {
  auto model = DebertaV3<P>::load(policy, concurrency_fixture(fixture_name));
  auto const batches = job_batches(plan, model.config().vocab_size);
  for (AttentionImpl impl : {AttentionImpl::kFlash, AttentionImpl::kEager}) {
    model.set_attention(impl);
    check_threads_match_one_thread(what + ": backbone, " + impl_name(impl), plan,
                                   [&](int t, int i) { return model.forward_to_host(batches[t][i]); });
  }
}

// A head model (masked LM: the backbone, the head's GEMMs and the tied decoder) shared by every thread.
template <ExecutionPolicy P>
void check_shared_head_model(std::string const& what, JobPlan const& plan, P const& policy) {
  auto model = DebertaV3ForMaskedLM<P>::load(policy, concurrency_fixture(kConcurrencyHeadFixture));
  auto const batches = job_batches(plan, model.config().vocab_size);
  for (AttentionImpl impl : {AttentionImpl::kFlash, AttentionImpl::kEager}) {
    model.set_attention(impl);
    check_threads_match_one_thread(what + ": masked LM, " + impl_name(impl), plan, [&](int t, int i) {
      Batch const& batch = batches[t][i];
      return model.forward_to_host(batch, head_request(batch, i))["logits"].values;
    });
  }
}

// The forward of `model`'s weights on `policy`, as DebertaModel::forward does it on the model's own policy.
template <ExecutionPolicy P, class Model>
HiddenStates<P> forward_on(P const& policy, Model const& model, Batch const& batch, AttentionImpl impl) {
  batch.validate(model.config());  // enqueue_forward does not check ids
  ForwardContext<P> const ctx(policy, batch, impl);
  HiddenStates<P> states = model.enqueue_forward(ctx);
  policy.fence();  // ctx's index arrays live until the work that reads them is done
  return states;
}

template <ExecutionPolicy P>
std::vector<float> hidden_to_host(P const& policy, HiddenStates<P> const& states) {
  std::vector<float> host(static_cast<std::size_t>(states.tokens * states.hidden_size));
  policy.download(states.values, std::span<float>(host));
  return host;
}

inline bool same_bits(std::vector<float> const& a, std::vector<float> const& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Threads that make policies of their own (as a server gives each worker one; make_policy runs on the worker
// thread, concurrently with the others, and must give the model's device and dtype) and share the weights of
// one backbone and one head model, flash or eager per call. Odd iterations run on the models' own policies,
// alongside the threads' policies. Every result must be the model's own policy's floats on one thread.
template <ExecutionPolicy P, class MakePolicy>
void check_policy_per_thread(std::string const& what, JobPlan const& plan, char const* backbone_fixture,
                             MakePolicy const& make_policy) {
  auto const backbone = DebertaV3<P>::load(make_policy(), concurrency_fixture(backbone_fixture));
  auto const head_model = DebertaV3ForMaskedLM<P>::load(make_policy(), concurrency_fixture(kConcurrencyHeadFixture));
  auto const batches = job_batches(plan, backbone.config().vocab_size);
  auto const head_batches = job_batches(plan, head_model.config().vocab_size);
  auto const impl_of = [](int t, int i) { return (t + i) % 2 == 0 ? AttentionImpl::kFlash : AttentionImpl::kEager; };
  auto const backbone_job = [&](P const& on, int t, int i) {
    return hidden_to_host(on, forward_on(on, backbone, batches[t][i], impl_of(t, i)));
  };
  auto const head_job = [&](P const& on, int t, int i) {
    Batch const& batch = head_batches[t][i];
    HiddenStates<P> const hidden = forward_on(on, head_model.backbone(), batch, impl_of(t, i));
    DeviceHeadOutput<P> const out = head_model.head().forward(
        HeadInput<P>{on, batch, hidden, head_model.backbone().word_embeddings(), head_request(batch, i)});
    return download_outputs(on, out)["logits"].values;
  };

  // On one thread first: a policy of the caller's own computes the same floats as the model's, so that a
  // difference below is the threads', not the policy's (threads 0 and 1: a batch without and one with holes).
  {
    P const own = make_policy();
    for (int t = 0; t < 2; ++t) {
      REQUIRE_MESSAGE(same_bits(backbone_job(backbone.policy(), t, 0), backbone_job(own, t, 0)),
                      what << ": backbone, thread " << t << ": a policy of its own differs from the model's");
      REQUIRE_MESSAGE(same_bits(head_job(head_model.policy(), t, 0), head_job(own, t, 0)),
                      what << ": masked LM, thread " << t << ": a policy of its own differs from the model's");
    }
  }

  ThreadResults expected_backbone = empty_results(plan);
  ThreadResults expected_head = empty_results(plan);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < plan.iterations; ++i) {
      expected_backbone[t][i] = backbone_job(backbone.policy(), t, i);
      expected_head[t][i] = head_job(head_model.policy(), t, i);
    }
  }
  ThreadResults got_backbone = empty_results(plan);
  ThreadResults got_head = empty_results(plan);
  run_on_threads(kThreads, [&](int t) {
    P const mine = make_policy();
    for (int i = 0; i < plan.iterations; ++i) {
      bool const shared = i % 2 == 1;
      got_backbone[t][i] = backbone_job(shared ? backbone.policy() : mine, t, i);
      got_head[t][i] = head_job(shared ? head_model.policy() : mine, t, i);
    }
  });
  check_bitwise(what + ": a policy per thread, backbone", plan, got_backbone, expected_backbone);
  check_bitwise(what + ": a policy per thread, masked LM", plan, got_head, expected_head);
}

}  // namespace flashdeberta::testing
