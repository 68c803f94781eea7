# Every optional dependency and every optional part of the build is an option.
option(FLASHDEBERTA_WITH_EIGEN "Build the Eigen/OpenMP host backend (flashdeberta::eigen)" ON)
option(FLASHDEBERTA_WITH_KOKKOS "Build the Kokkos backend (flashdeberta::kokkos)" ON)
option(FLASHDEBERTA_WITH_OPENMP "Use OpenMP threads in the Eigen backend" ON)
option(FLASHDEBERTA_BUILD_TESTS "Build the doctest suites" ${PROJECT_IS_TOP_LEVEL})
option(FLASHDEBERTA_BUILD_BENCH "Build the Google Benchmark suites" ${PROJECT_IS_TOP_LEVEL})
option(FLASHDEBERTA_BUILD_APPS "Build the flashdeberta program: the CLI and its HTTP server (apps/)" ${PROJECT_IS_TOP_LEVEL})
option(FLASHDEBERTA_BUILD_EXAMPLES "Build the API samples (examples/)" ${PROJECT_IS_TOP_LEVEL})
option(FLASHDEBERTA_SANITIZE "Build the tests, the CLI and the examples with AddressSanitizer and UBSan" OFF)
if(FLASHDEBERTA_SANITIZE)
  # For every C++ target of this build (not the package's exported targets): the CLI and example tests run
  # the programs themselves, so those need the checks as much as the test executables. C++ only: nvcc
  # does not take these flags (tests/cuda is left out of such builds). Fuzz targets add -fsanitize=fuzzer
  # to the same set of sanitizers, so the two combine in one build (tests/fuzz/CMakeLists.txt).
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address;-fsanitize=undefined;-fno-sanitize-recover=all;-fno-omit-frame-pointer>")
  add_link_options("$<$<LINK_LANGUAGE:CXX>:-fsanitize=address;-fsanitize=undefined>")
endif()
option(FLASHDEBERTA_TSAN "Build tests/concurrency with ThreadSanitizer (tests/concurrency/run_tsan.sh)" OFF)
if(FLASHDEBERTA_TSAN AND FLASHDEBERTA_SANITIZE)
  message(FATAL_ERROR "FLASHDEBERTA_TSAN and FLASHDEBERTA_SANITIZE cannot be combined: TSan excludes ASan")
endif()

# CUDA backend: on by default when a CUDA compiler is found (nvcc on PATH, CUDACXX, or the toolkit's default
# /usr/local/cuda), off otherwise, so machines without the toolkit configure unchanged.
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
endif()
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  set(_flashdeberta_cuda_default ON)
else()
  set(_flashdeberta_cuda_default OFF)
endif()
option(FLASHDEBERTA_WITH_CUDA "Build the CUDA backend (flashdeberta::cuda)" ${_flashdeberta_cuda_default})
# The library is header-only, so its host speed is set by the flags of the program that includes it:
# without -march=native, Eigen on x86-64 uses SSE2 only and the AVX-512 attention kernels are compiled
# out (docs/benchmarks.md). ON builds the CLI, the examples and the host tests for this machine; the
# programs then need a CPU with the same instruction sets.
option(FLASHDEBERTA_NATIVE "Build the CLI, examples and host tests with -march=native" OFF)

# oneDNN 2.x (Debian's libdnnl-dev, 2.6) for the host backend's bf16 and int8 linear layers (flashdeberta::onednn,
# docs/host-dtypes.md): on by default when its header and library are found and the Eigen backend is built.
# Found by hand, not through its CMake config: Debian's dnnl-config.cmake requires OpenCL's development files
# (its GPU runtime), which the CPU path never uses, and fails the whole configure without them.
find_path(FLASHDEBERTA_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
find_library(FLASHDEBERTA_DNNL_LIBRARY dnnl)
set(_flashdeberta_onednn_default OFF)
if(FLASHDEBERTA_WITH_EIGEN AND FLASHDEBERTA_DNNL_INCLUDE_DIR AND FLASHDEBERTA_DNNL_LIBRARY)
  set(_flashdeberta_onednn_default ON)
endif()
option(FLASHDEBERTA_WITH_ONEDNN "Use oneDNN for bf16 and int8 linear layers in the Eigen backend (flashdeberta::onednn)"
       ${_flashdeberta_onednn_default})

# flashdeberta_pkg_config_default(VAR MODULE): VAR is ON when pkg-config finds MODULE, the default of an option
# for an optional library.
find_package(PkgConfig QUIET)
function(flashdeberta_pkg_config_default var module)
  set(${var} OFF PARENT_SCOPE)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(_flashdeberta_${module}_probe QUIET ${module})
    if(_flashdeberta_${module}_probe_FOUND)
      set(${var} ON PARENT_SCOPE)
    endif()
  endif()
endfunction()

# SentencePiece tokenizers (flashdeberta::tokenizers, DeBERTa v2/v3): on by default when pkg-config finds
# libsentencepiece. The v1 BPE tokenizer needs no library and is part of flashdeberta::core.
flashdeberta_pkg_config_default(_flashdeberta_sentencepiece_default sentencepiece)
option(FLASHDEBERTA_WITH_SENTENCEPIECE "Build the SentencePiece tokenizers (flashdeberta::tokenizers)"
       ${_flashdeberta_sentencepiece_default})

# ZeroModels' Keras checkpoints (HDF5 weights, io/zeromodels.hpp): on by default when pkg-config finds libhdf5
# (Debian: libhdf5-dev). Without it such a directory is refused with a message naming the package.
flashdeberta_pkg_config_default(_flashdeberta_hdf5_default hdf5)
option(FLASHDEBERTA_WITH_HDF5 "Read ZeroModels' Keras (HDF5) checkpoints through libhdf5" ${_flashdeberta_hdf5_default})

# The Python package (python/, module flashdeberta): on by default when pybind11 (Debian's pybind11-dev) and
# Python 3's headers are found. It is built for Debian's /usr/bin/python3 when that exists (the interpreter
# Debian's pybind11 and numpy belong to), else for the first python3 on PATH; -DPython_EXECUTABLE=... picks
# another. Off by default in a subproject, which then leaves Python's cache entries to the consumer.
set(_flashdeberta_python_default OFF)
if(PROJECT_IS_TOP_LEVEL OR FLASHDEBERTA_BUILD_PYTHON)
  if(NOT DEFINED Python_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "Python interpreter the package is built for")
  endif()
  find_package(Python COMPONENTS Interpreter Development.Module QUIET)
  set(PYBIND11_FINDPYTHON ON)
  find_package(pybind11 CONFIG QUIET)
  # An ASan extension cannot load into python3.
  if(PROJECT_IS_TOP_LEVEL AND Python_FOUND AND pybind11_FOUND AND NOT FLASHDEBERTA_SANITIZE)
    set(_flashdeberta_python_default ON)
  endif()
endif()
option(FLASHDEBERTA_BUILD_PYTHON "Build the Python package (python/, needs pybind11 and numpy)"
       ${_flashdeberta_python_default})
