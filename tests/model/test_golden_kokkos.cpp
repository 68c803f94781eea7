#include "flashdeberta/kokkos/kokkos_policy.hpp"
#include "golden_suite.hpp"

TEST_CASE("kokkos: HF fixtures through KokkosPolicy") {
  flashdeberta::testing::run_golden_suite(flashdeberta::KokkosPolicy<>{});
}
