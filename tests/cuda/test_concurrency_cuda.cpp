// The supported ways to serve several host threads from one loaded model on CUDA (docs/thread-safety.md),
// each with 8 std::threads running batches of mixed lengths, every result bit-identical to the same batch
// run on one thread beforehand, in fp32 and bf16:
//   - one model and its policy shared by every thread (all work on the policy's one stream);
//   - a stream per caller: each thread makes its own CudaPolicy and runs the shared weights on it through
//     ForwardContext and HeadInput, choosing flash or eager per call;
//   - CudaGraphForward, one runner per thread over the shared model, every call under one mutex.
// Without a GPU, cuda_test_main skips every case.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <latch>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "flashdeberta/cuda/graph_forward.hpp"
#include "flashdeberta/flashdeberta.hpp"
#include "flashdeberta/heads/heads.hpp"

namespace fd = flashdeberta;

namespace {

constexpr int kThreads = 8;
// Batches per thread: 3, or FLASHDEBERTA_CONCURRENCY_ITERATIONS (1 or 2) for compute-sanitizer's racecheck,
// under which each forward runs far slower (run_on_device.sh, step sanitize).
int const kIterations = [] {
  char const* value = std::getenv("FLASHDEBERTA_CONCURRENCY_ITERATIONS");
  return value == nullptr ? 3 : std::clamp(std::atoi(value), 1, 3);
}();

// (thread, iteration) -> one result
using Results = std::vector<std::vector<std::vector<float>>>;

std::filesystem::path fixture(char const* name) { return std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / name; }

// One job per std::thread, all released together so that they overlap; the first exception is rethrown on
// the calling thread (doctest's assertions stay there).
template <class Job>
void run_on_threads(Job const& job) {
  std::latch start(kThreads);
  std::vector<std::exception_ptr> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      try {
        job(t);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (auto const& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

// 1 to 3 sequences whose lengths vary across threads (past the 64- and 128-row tiles of the kernels); odd
// threads drop every seventh position of their first sequence, as a mask with holes does.
fd::Batch job_batch(int thread, int iteration, std::int64_t vocab) {
  static constexpr std::int64_t kLengths[] = {1, 9, 64, 65, 100, 129, 300, 31, 77, 200};
  std::uint32_t seed = 2654435761u * static_cast<std::uint32_t>(16 * thread + iteration + 1);
  fd::Batch batch;
  int const sequences = 1 + (thread + iteration) % 3;
  for (int s = 0; s < sequences; ++s) {
    std::int64_t const length = kLengths[(3 * thread + 2 * iteration + 5 * s) % 10];
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

// `expected` against what the threads got: the count of results whose bits differ, and the first of them.
void check_bitwise(std::string const& what, Results const& got, Results const& expected) {
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

// run(t, i) on the calling thread for every job (the reference), then on kThreads threads at once.
template <class Run>
void check_threads_match_one_thread(std::string const& what, Run const& run) {
  Results expected(kThreads, std::vector<std::vector<float>>(kIterations));
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kIterations; ++i) expected[t][i] = run(t, i);
  Results got(kThreads, std::vector<std::vector<float>>(kIterations));
  run_on_threads([&](int t) {
    for (int i = 0; i < kIterations; ++i) got[t][i] = run(t, i);
  });
  check_bitwise(what, got, expected);
}

char const* impl_name(fd::AttentionImpl impl) { return impl == fd::AttentionImpl::kFlash ? "flash" : "eager"; }

fd::HeadRequest every_third_token(fd::Batch const& batch) {
  fd::HeadRequest request;
  request.tokens.emplace();
  for (std::int64_t token = 0; token < batch.total_tokens(); token += 3) request.tokens->push_back(token);
  return request;
}

// The shared model and its policy: every thread calls forward_to_host on it.
void check_shared_policy(fd::DType dtype) {
  fd::CudaOptions const options{.dtype = dtype};
  auto backbone = fd::DebertaV3<fd::CudaPolicy>::load(fd::CudaPolicy(options), fixture("v3_base_like"));
  auto head_model =
      fd::DebertaV3ForMaskedLM<fd::CudaPolicy>::load(fd::CudaPolicy(options), fixture("heads/mlm_v3_nonlegacy"));
  auto const batches = job_batches(backbone.config().vocab_size);
  auto const head_batches = job_batches(head_model.config().vocab_size);
  for (fd::AttentionImpl impl : {fd::AttentionImpl::kFlash, fd::AttentionImpl::kEager}) {
    std::string const suffix = std::string(fd::dtype_name(dtype)) + ", " + impl_name(impl);
    backbone.set_attention(impl);  // between runs: no forward is in flight
    check_threads_match_one_thread("shared policy, backbone, " + suffix,
                                   [&](int t, int i) { return backbone.forward_to_host(batches[t][i]); });
    head_model.set_attention(impl);
    check_threads_match_one_thread("shared policy, masked LM, " + suffix, [&](int t, int i) {
      fd::Batch const& batch = head_batches[t][i];
      fd::HeadRequest const request = i % 2 == 1 ? every_third_token(batch) : fd::HeadRequest{};
      return head_model.forward_to_host(batch, request)["logits"].values;
    });
  }
}

// The forward of `model`'s weights on `policy` (a stream of the caller's own), as DebertaModel::forward
// does it on the model's policy.
template <class Model>
fd::HiddenStates<fd::CudaPolicy> forward_on(fd::CudaPolicy const& policy, Model const& model, fd::Batch const& batch,
                                            fd::AttentionImpl impl) {
  batch.validate(model.config());
  fd::ForwardContext<fd::CudaPolicy> const ctx(policy, batch, impl);
  fd::HiddenStates<fd::CudaPolicy> states = model.enqueue_forward(ctx);
  policy.fence();  // ctx's index arrays live until the work that reads them is done
  return states;
}

std::vector<float> to_host(fd::CudaPolicy const& policy, fd::HiddenStates<fd::CudaPolicy> const& states) {
  std::vector<float> host(static_cast<std::size_t>(states.tokens * states.hidden_size));
  policy.download(states.values, std::span<float>(host));
  return host;
}

// A stream per caller: each worker makes a CudaPolicy of its own (the model's options, so the same dtype
// and device) and runs the shared weights on it, flash or eager per call. The reference runs the same
// calls on the model's own policy, one after the other.
void check_policy_per_thread(fd::DType dtype) {
  fd::CudaOptions const options{.dtype = dtype};
  auto const backbone = fd::DebertaV3<fd::CudaPolicy>::load(fd::CudaPolicy(options), fixture("v3_base_like"));
  auto const head_model =
      fd::DebertaV3ForMaskedLM<fd::CudaPolicy>::load(fd::CudaPolicy(options), fixture("heads/mlm_v3_nonlegacy"));
  auto const batches = job_batches(backbone.config().vocab_size);
  auto const head_batches = job_batches(head_model.config().vocab_size);
  auto const impl_of = [](int t, int i) {
    return (t + i) % 2 == 0 ? fd::AttentionImpl::kFlash : fd::AttentionImpl::kEager;
  };
  auto const backbone_job = [&](fd::CudaPolicy const& on, int t, int i) {
    return to_host(on, forward_on(on, backbone, batches[t][i], impl_of(t, i)));
  };
  auto const head_job = [&](fd::CudaPolicy const& on, int t, int i) {
    fd::Batch const& batch = head_batches[t][i];
    fd::HiddenStates<fd::CudaPolicy> const hidden = forward_on(on, head_model.backbone(), batch, impl_of(t, i));
    fd::HeadRequest const request = i % 2 == 1 ? every_third_token(batch) : fd::HeadRequest{};
    fd::DeviceHeadOutput<fd::CudaPolicy> const out = head_model.head().forward(
        fd::HeadInput<fd::CudaPolicy>{on, batch, hidden, head_model.backbone().word_embeddings(), request});
    return fd::download_outputs(on, out)["logits"].values;
  };

  Results expected_backbone(kThreads, std::vector<std::vector<float>>(kIterations));
  Results expected_head = expected_backbone;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kIterations; ++i) {
      expected_backbone[t][i] = backbone_job(backbone.policy(), t, i);
      expected_head[t][i] = head_job(head_model.policy(), t, i);
    }
  }
  Results got_backbone(kThreads, std::vector<std::vector<float>>(kIterations));
  Results got_head = got_backbone;
  run_on_threads([&](int t) {
    fd::CudaPolicy const mine(options);  // this thread's stream, cuBLASLt handle and device cache
    for (int i = 0; i < kIterations; ++i) {
      got_backbone[t][i] = backbone_job(mine, t, i);
      got_head[t][i] = head_job(mine, t, i);
    }
  });
  std::string const dtype_text(fd::dtype_name(dtype));
  check_bitwise("a policy per thread, backbone, " + dtype_text, got_backbone, expected_backbone);
  check_bitwise("a policy per thread, masked LM, " + dtype_text, got_head, expected_head);
}

// CudaGraphForward is not thread-safe, and a capture needs the model's stream to itself: one runner per
// thread, and one mutex held around every call that uses the shared model.
void check_graphs_under_lock(fd::DType dtype) {
  fd::CudaOptions const options{.dtype = dtype};
  auto const model = fd::DebertaV3<fd::CudaPolicy>::load(fd::CudaPolicy(options), fixture("v3_base_like"));
  auto const batches = job_batches(model.config().vocab_size);
  Results expected(kThreads, std::vector<std::vector<float>>(kIterations));
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kIterations; ++i) expected[t][i] = model.forward_to_host(batches[t][i]);
  std::mutex model_mutex;
  Results got(kThreads, std::vector<std::vector<float>>(kIterations));
  run_on_threads([&](int t) {
    fd::CudaGraphForward graphs(model);
    for (int round = 0; round < 2; ++round) {  // the first round captures, the second replays
      for (int i = 0; i < kIterations; ++i) {
        std::lock_guard<std::mutex> const lock(model_mutex);
        got[t][i] = graphs.forward_to_host(batches[t][i]);
      }
    }
    std::lock_guard<std::mutex> const lock(model_mutex);
    graphs.clear();  // frees the graphs' memory while no other thread runs
  });
  check_bitwise("graphs under a lock, " + std::string(fd::dtype_name(dtype)), got, expected);
}

}  // namespace

TEST_CASE("cuda concurrency: one model and policy shared by 8 threads gives the single-thread floats") {
  for (fd::DType dtype : {fd::DType::kF32, fd::DType::kBF16}) check_shared_policy(dtype);
}

TEST_CASE("cuda concurrency: a policy (stream) per thread over shared weights gives the single-thread floats") {
  for (fd::DType dtype : {fd::DType::kF32, fd::DType::kBF16}) check_policy_per_thread(dtype);
}

TEST_CASE("cuda concurrency: a graph runner per thread, calls under one lock, gives the plain forward's floats") {
  for (fd::DType dtype : {fd::DType::kF32, fd::DType::kBF16}) check_graphs_under_lock(dtype);
}
