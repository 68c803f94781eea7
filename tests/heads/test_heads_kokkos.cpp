#include "flashdeberta/kokkos/kokkos_policy.hpp"
#include "heads_bin_suite.hpp"
#include "heads_suite.hpp"

TEST_CASE("kokkos: heads: HF fixtures through KokkosPolicy") {
  flashdeberta::testing::run_head_golden_suite(flashdeberta::KokkosPolicy<>{});
}

TEST_CASE("kokkos: heads: errors through KokkosPolicy") {
  flashdeberta::testing::run_head_error_suite(flashdeberta::KokkosPolicy<>{});
}

TEST_CASE("kokkos: heads: HF fixtures from pytorch_model.bin through KokkosPolicy") {
  flashdeberta::testing::run_head_torch_bin_suite(flashdeberta::KokkosPolicy<>{});
}

#if FLASHDEBERTA_WITH_HDF5
#include "zeromodels_suite.hpp"

TEST_CASE("kokkos: heads: ZeroModels checkpoints through KokkosPolicy") {
  flashdeberta::testing::run_zeromodels_suite(flashdeberta::KokkosPolicy<>{});
}
#endif
