// The concurrency suite (concurrency_suite.hpp) on EigenPolicy: each std::thread then runs its own OpenMP
// team where OpenMP is on. Without OpenMP (the ThreadSanitizer build, since TSan cannot see libgomp's
// synchronization) the policy runs single-threaded and opens no OpenMP region.
#include "concurrency_suite.hpp"
#include "flashdeberta/eigen/eigen_policy.hpp"

namespace fd = flashdeberta;

namespace {

#if defined(_OPENMP)
constexpr int kOmpThreads = 2;
#else
constexpr int kOmpThreads = 1;
#endif

// Lengths that straddle the host flash tiles (64 queries, 128 keys).
constexpr std::int64_t kLengths[] = {1, 9, 64, 65, 100, 129, 31, 77};
constexpr fd::testing::JobPlan kPlan{.lengths = kLengths, .max_sequences = 2, .iterations = 2};

}  // namespace

TEST_CASE("concurrency: eigen: one backbone shared by 8 threads gives the single-thread floats") {
  fd::testing::check_shared_backbone("eigen", kPlan, fd::EigenPolicy(kOmpThreads), "v3_base_like");
}

TEST_CASE("concurrency: eigen: one masked-LM model shared by 8 threads gives the single-thread logits") {
  fd::testing::check_shared_head_model("eigen", kPlan, fd::EigenPolicy(kOmpThreads));
}

TEST_CASE("concurrency: eigen: a policy per thread over shared weights gives the shared policy's floats") {
  fd::testing::check_policy_per_thread<fd::EigenPolicy>("eigen", kPlan, "v3_base_like",
                                                        [] { return fd::EigenPolicy(kOmpThreads); });
}
