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

if(FLASHDEBERTA_WITH_CUDA)
  # Unset, CMake would build for its compiler default (sm_75): A100-class and Hopper by default.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  enable_language(CUDA)
  # CMake 3.25 does not know how to ask nvcc for C++20 (toolchain.md, problem 3).
  if(CMAKE_VERSION VERSION_LESS 3.26 AND CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA")
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_EXTENSIONS OFF)
  find_package(CUDAToolkit REQUIRED)
endif()

if(FLASHDEBERTA_WITH_SENTENCEPIECE)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(FLASHDEBERTA_SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
endif()

if(FLASHDEBERTA_BUILD_TESTS)
  find_package(doctest REQUIRED CONFIG)
endif()
if(FLASHDEBERTA_BUILD_BENCH)
  find_package(benchmark REQUIRED CONFIG)
endif()
