// doctest main for the Kokkos test executables: Kokkos lives for the whole run, so every policy,
// buffer and model a test creates is destroyed before Kokkos::finalize.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <Kokkos_Core.hpp>

int main(int argc, char** argv) {
  Kokkos::ScopeGuard const kokkos(argc, argv);
  doctest::Context context(argc, argv);
  return context.run();
}
