// Which host attention kernels this build compiled in, against the flags it was built with. scripts/test.sh
// builds the tests twice so that both host code paths run the golden, head and op tests: natively
// (FLASHDEBERTA_NATIVE, the AVX-512 micro-kernels of flash_microkernel.hpp on a CPU that has AVX-512F) and
// portably (the Eigen path). If flags got lost or leaked in, one of the two would silently test the other's path.
#include <doctest/doctest.h>

#include <string>

#include "flashdeberta/eigen/eigen_policy.hpp"
#include "flashdeberta/eigen/host_kernels.hpp"
#include "flashdeberta/eigen/ops/attention_flash.hpp"

#ifndef FLASHDEBERTA_TEST_NATIVE
#error "FLASHDEBERTA_TEST_NATIVE must be defined (tests/unit/CMakeLists.txt)"
#endif

namespace {

bool cpu_has_avx512f() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

}  // namespace

TEST_CASE("host flash attention: the compiled kernels match the build's target") {
  namespace detail = flashdeberta::eigen_ops::detail;
  bool const compiled = detail::kHasFlashMicrokernel;
  // The operations the policy runs may be compiled apart from this file (flashdeberta::eigen_ops): the same target.
  CHECK(flashdeberta::eigen_flash_microkernels() == compiled);
  bool const cpu = cpu_has_avx512f();
  std::string const build = FLASHDEBERTA_TEST_NATIVE ? "-march=native" : "portable";
  std::string const path = compiled ? "AVX-512 micro-kernels (head size 64)" : "Eigen products";
  MESSAGE("build: " << build << "; CPU AVX-512F: " << std::string(cpu ? "yes" : "no")
                    << "; flash attention path: " << path);
  if (FLASHDEBERTA_TEST_NATIVE) {
    CHECK(compiled == cpu);  // -march=native reached this test
  } else {
    CHECK_FALSE(compiled);  // nothing (CXXFLAGS, a toolchain file) turned AVX-512 on in the portable build
  }
  // The dispatch point: head size 64 (v3_base_like, base and large checkpoints) takes the micro-kernels
  // exactly when they are compiled in; other head sizes always take Eigen's products.
  CHECK(detail::PackedHead(detail::kMicroHeadSize, 128, 512, true).enabled == compiled);
  CHECK_FALSE(detail::PackedHead(32, 128, 512, true).enabled);
}
