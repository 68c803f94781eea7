// The concurrency suite (concurrency_suite.hpp) on KokkosPolicy<> (Serial in the tested builds: with Kokkos
// < 3.5 its operations take one process-wide lock, docs/thread-safety.md). v3_mask_hole (hidden size 32) rather
// than v3_base_like (128): Kokkos has one kernel for every head size, and its team GEMM under ThreadSanitizer
// took minutes at the larger size.
#include "concurrency_suite.hpp"
#include "flashdeberta/kokkos/kokkos_policy.hpp"

namespace fd = flashdeberta;

namespace {

// Lengths that straddle the host flash tiles (64 queries, 128 keys).
constexpr std::int64_t kLengths[] = {1, 9, 64, 65, 100, 129, 31, 77};
constexpr fd::testing::JobPlan kPlan{.lengths = kLengths, .max_sequences = 2, .iterations = 2};

}  // namespace

TEST_CASE("concurrency: kokkos: one backbone shared by 8 threads gives the single-thread floats") {
  fd::testing::check_shared_backbone("kokkos", kPlan, fd::KokkosPolicy<>{}, "v3_mask_hole");
}

TEST_CASE("concurrency: kokkos: one masked-LM model shared by 8 threads gives the single-thread logits") {
  fd::testing::check_shared_head_model("kokkos", kPlan, fd::KokkosPolicy<>{});
}

// Each thread's policy gets an execution space instance of its own.
TEST_CASE("concurrency: kokkos: a policy per thread over shared weights gives the shared policy's floats") {
  fd::testing::check_policy_per_thread<fd::KokkosPolicy<>>(
      "kokkos", kPlan, "v3_mask_hole", [] { return fd::KokkosPolicy<>(Kokkos::DefaultExecutionSpace()); });
}
