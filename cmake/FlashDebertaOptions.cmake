# Every optional dependency and every optional part of the build is an option.
option(FLASHDEBERTA_WITH_EIGEN "Build the Eigen/OpenMP host backend (flashdeberta::eigen)" ON)
option(FLASHDEBERTA_WITH_KOKKOS "Build the Kokkos backend (flashdeberta::kokkos)" ON)
option(FLASHDEBERTA_WITH_OPENMP "Use OpenMP threads in the Eigen backend" ON)
option(FLASHDEBERTA_BUILD_TESTS "Build the doctest suites" ${PROJECT_IS_TOP_LEVEL})
option(FLASHDEBERTA_BUILD_BENCH "Build the Google Benchmark suites" ${PROJECT_IS_TOP_LEVEL})
option(FLASHDEBERTA_BUILD_EXAMPLES "Build the CLI and the examples" ${PROJECT_IS_TOP_LEVEL})
option(FLASHDEBERTA_SANITIZE "Build tests with AddressSanitizer and UBSan" OFF)
