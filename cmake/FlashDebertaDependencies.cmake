# Dependencies come from Debian packages (see README). Each is looked up only when its option is on.
find_package(nlohmann_json 3.10 REQUIRED CONFIG)

if(FLASHDEBERTA_WITH_EIGEN)
  find_package(Eigen3 3.4 REQUIRED CONFIG)
  if(FLASHDEBERTA_WITH_OPENMP)
    find_package(OpenMP REQUIRED COMPONENTS CXX)
  endif()
endif()

if(FLASHDEBERTA_WITH_KOKKOS)
  find_package(Kokkos REQUIRED CONFIG)
  # Debian's Trilinos Kokkos exports a non-existent /usr/lib/include; point it at the real headers.
  if(Kokkos_INCLUDE_DIRS MATCHES "trilinos")
    get_filename_component(_flashdeberta_kokkos_inc "${Kokkos_INCLUDE_DIRS}" REALPATH)
    set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_flashdeberta_kokkos_inc}"
                                                    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${_flashdeberta_kokkos_inc}")
  endif()
endif()

if(FLASHDEBERTA_BUILD_TESTS)
  find_package(doctest REQUIRED CONFIG)
endif()
if(FLASHDEBERTA_BUILD_BENCH)
  find_package(benchmark REQUIRED CONFIG)
endif()
