// The heads through CudaPolicy in fp32 against the HF fixtures at 1e-5, and their errors: the suites
// shared with the host policies (tests/heads/heads_suite.hpp). Without a GPU, cuda_test_main skips them.
#include "../heads/heads_suite.hpp"
#include "flashdeberta/cuda/cuda_policy.hpp"

TEST_CASE("cuda: heads: HF fixtures through CudaPolicy in fp32") {
  flashdeberta::testing::run_head_golden_suite(flashdeberta::CudaPolicy{});
}

TEST_CASE("cuda: heads: errors through CudaPolicy") {
  flashdeberta::testing::run_head_error_suite(flashdeberta::CudaPolicy{});
}

#if FLASHDEBERTA_WITH_HDF5
#include "../heads/zeromodels_suite.hpp"

TEST_CASE("cuda: heads: ZeroModels checkpoints through CudaPolicy in fp32") {
  flashdeberta::testing::run_zeromodels_suite(flashdeberta::CudaPolicy{});
}
#endif
