#include "flashdeberta/kokkos/kokkos_policy.hpp"
#include "gliner_suite.hpp"

TEST_CASE("kokkos: gliner: GLiNER fixtures through KokkosPolicy") {
  flashdeberta::testing::run_gliner_fixture_suite(flashdeberta::KokkosPolicy<>{});
}
