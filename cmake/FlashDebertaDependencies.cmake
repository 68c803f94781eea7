# Dependencies come from Debian packages (see README). Each is looked up only when its option is on.
find_package(nlohmann_json 3.10 REQUIRED CONFIG)

if(FLASHDEBERTA_WITH_EIGEN)
  find_package(Eigen3 3.4 REQUIRED CONFIG)
  if(FLASHDEBERTA_WITH_OPENMP)
    find_package(OpenMP REQUIRED COMPONENTS CXX)
  endif()
endif()

if(FLASHDEBERTA_WITH_ONEDNN)
  if(NOT FLASHDEBERTA_WITH_EIGEN)
    message(FATAL_ERROR "FLASHDEBERTA_WITH_ONEDNN needs FLASHDEBERTA_WITH_EIGEN: oneDNN serves the Eigen backend")
  endif()
  if(NOT FLASHDEBERTA_DNNL_INCLUDE_DIR OR NOT FLASHDEBERTA_DNNL_LIBRARY)
    message(FATAL_ERROR "FLASHDEBERTA_WITH_ONEDNN: oneapi/dnnl/dnnl.hpp or libdnnl not found (apt-get install libdnnl-dev)")
  endif()
  # The code uses oneDNN 2.x's API (matmul::desc, output scales), which 3.0 removed.
  file(STRINGS "${FLASHDEBERTA_DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h" _flashdeberta_dnnl_version
       REGEX "#define DNNL_VERSION_(MAJOR|MINOR) ")
  string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*" "\\1.\\2" _flashdeberta_dnnl_version
         "${_flashdeberta_dnnl_version}")
  if(_flashdeberta_dnnl_version VERSION_LESS 2.6 OR NOT _flashdeberta_dnnl_version VERSION_LESS 3.0)
    message(FATAL_ERROR "FLASHDEBERTA_WITH_ONEDNN: oneDNN ${_flashdeberta_dnnl_version} found; 2.6 to 2.x is supported")
  endif()
  # Debian's oneDNN threads through GNU OpenMP (DNNL_CPU_RUNTIME OMP in dnnl_config.h). A program whose own
  # OpenMP is another runtime (clang's libomp) would hold two thread pools, each spinning while the other works.
  if(FLASHDEBERTA_WITH_OPENMP AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    message(WARNING "oneDNN from Debian uses libgomp; ${CMAKE_CXX_COMPILER_ID}'s OpenMP runtime beside it "
                    "oversubscribes the cores (docs/host-dtypes.md)")
  endif()
  message(STATUS "oneDNN ${_flashdeberta_dnnl_version}: ${FLASHDEBERTA_DNNL_LIBRARY}")
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
  # Unset, CMake would build for its compiler default (sm_75 alone). The GPUs DeBERTa is served on: T4 (sm_75: fp32
  # and fp16 on CUDA cores, no bfloat16), A100 / A10 / RTX 30 (80, 86), L4 / RTX 40 (89), H100 / H200 (90).
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 75 80 86 89 90)
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

if(FLASHDEBERTA_WITH_HDF5)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(FLASHDEBERTA_HDF5 REQUIRED IMPORTED_TARGET hdf5)
endif()

if(FLASHDEBERTA_WITH_SENTENCEPIECE)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(FLASHDEBERTA_SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
endif()

# The flashdeberta program reads its command line through CLI11 (Debian: libcli11-dev, 2.1 or later for
# options whose callback runs as they are read, which --help uses).
# `flashdeberta serve` speaks HTTP through Boost.Beast over Asio (header-only; Debian: libboost1.81-dev) and
# inflates gzip and deflate request bodies with zlib (zlib1g-dev).
if(FLASHDEBERTA_BUILD_APPS AND FLASHDEBERTA_WITH_EIGEN)
  find_package(CLI11 2.1 REQUIRED CONFIG)
  find_package(Boost 1.74 REQUIRED)
  find_package(ZLIB REQUIRED)
  find_package(Threads REQUIRED)
endif()

if(FLASHDEBERTA_BUILD_TESTS)
  find_package(doctest REQUIRED CONFIG)
endif()
if(FLASHDEBERTA_BUILD_BENCH)
  find_package(benchmark REQUIRED CONFIG)
endif()
