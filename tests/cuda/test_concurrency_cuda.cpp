// The concurrency suite (tests/concurrency/concurrency_suite.hpp) on CudaPolicy, in fp32 and bf16: one model and
// its policy shared by every thread (all work on the policy's one stream), and a stream per caller (each thread
// makes its own CudaPolicy with the model's options and runs the shared weights on it through ForwardContext and
// HeadInput). Then what only CUDA has: CudaGraphForward, one runner per thread over the shared model, every call
// under one mutex (docs/thread-safety.md). Without a GPU, cuda_test_main skips every case.
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>

#include "../concurrency/concurrency_suite.hpp"
#include "flashdeberta/cuda/graph_forward.hpp"

namespace fd = flashdeberta;
namespace ft = fd::testing;

namespace {

// Past the 64- and 128-row tiles of the kernels, and beyond 256.
constexpr std::int64_t kLengths[] = {1, 9, 64, 65, 100, 129, 300, 31, 77, 200};

// Batches per thread: 3, or FLASHDEBERTA_CONCURRENCY_ITERATIONS (1 or 2) for compute-sanitizer's racecheck,
// under which each forward runs far slower (run_on_device.sh, step sanitize).
ft::JobPlan const kPlan{.lengths = kLengths, .max_sequences = 3, .iterations = [] {
                          char const* value = std::getenv("FLASHDEBERTA_CONCURRENCY_ITERATIONS");
                          return value == nullptr ? 3 : std::clamp(std::atoi(value), 1, 3);
                        }()};

constexpr fd::DType kDTypes[] = {fd::DType::kF32, fd::DType::kBF16};

std::string label(fd::DType dtype) { return "cuda " + std::string(fd::dtype_name(dtype)); }

// CudaGraphForward is not thread-safe, and a capture needs the model's stream to itself: one runner per
// thread, and one mutex held around every call that uses the shared model.
void check_graphs_under_lock(fd::DType dtype) {
  fd::CudaOptions const options{.dtype = dtype};
  auto const model =
      fd::DebertaV3<fd::CudaPolicy>::load(fd::CudaPolicy(options), ft::concurrency_fixture("v3_base_like"));
  auto const batches = ft::job_batches(kPlan, model.config().vocab_size);
  ft::ThreadResults expected = ft::empty_results(kPlan);
  for (int t = 0; t < ft::kThreads; ++t)
    for (int i = 0; i < kPlan.iterations; ++i) expected[t][i] = model.forward_to_host(batches[t][i]);
  std::mutex model_mutex;
  ft::ThreadResults got = ft::empty_results(kPlan);
  ft::run_on_threads(ft::kThreads, [&](int t) {
    fd::CudaGraphForward graphs(model);
    for (int round = 0; round < 2; ++round) {  // the first round captures, the second replays
      for (int i = 0; i < kPlan.iterations; ++i) {
        std::lock_guard<std::mutex> const lock(model_mutex);
        got[t][i] = graphs.forward_to_host(batches[t][i]);
      }
    }
    std::lock_guard<std::mutex> const lock(model_mutex);
    graphs.clear();  // frees the graphs' memory while no other thread runs
  });
  ft::check_bitwise(label(dtype) + ": graphs under a lock", kPlan, got, expected);
}

}  // namespace

// The backbone and the head model each on a policy of its own, as separately loaded models are.
TEST_CASE("cuda concurrency: one model and policy shared by 8 threads gives the single-thread floats") {
  for (fd::DType dtype : kDTypes) {
    ft::check_shared_backbone(label(dtype), kPlan, fd::CudaPolicy({.dtype = dtype}), "v3_base_like");
    ft::check_shared_head_model(label(dtype), kPlan, fd::CudaPolicy({.dtype = dtype}));
  }
}

// The models' options, so the same dtype and device: the weights are stored in the model's dtype.
TEST_CASE("cuda concurrency: a policy (stream) per thread over shared weights gives the single-thread floats") {
  for (fd::DType dtype : kDTypes) {
    ft::check_policy_per_thread<fd::CudaPolicy>(label(dtype), kPlan, "v3_base_like",
                                                [dtype] { return fd::CudaPolicy({.dtype = dtype}); });
  }
}

TEST_CASE("cuda concurrency: a graph runner per thread, calls under one lock, gives the plain forward's floats") {
  for (fd::DType dtype : kDTypes) check_graphs_under_lock(dtype);
}
