#include "flashdeberta/kokkos/kokkos_policy.hpp"
#include "gliner_batch_suite.hpp"
#include "gliner_suite.hpp"

TEST_CASE("kokkos: gliner: GLiNER fixtures through KokkosPolicy") {
  flashdeberta::testing::run_gliner_fixture_suite(flashdeberta::KokkosPolicy<>{});
}

TEST_CASE("kokkos: gliner: a batch with per-text label sets gives each text its result alone") {
  flashdeberta::testing::run_gliner_batch_matches_single(flashdeberta::KokkosPolicy<>{}, 0.0);
}
