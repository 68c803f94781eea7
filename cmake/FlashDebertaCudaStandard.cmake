# flashdeberta_cuda_require_cxx20(TARGET [BUILD_INTERFACE]): C++20 for the CUDA compilations of every target
# that links TARGET, which is what the kernel sources and the headers they include need. BUILD_INTERFACE keeps
# the requirement out of the installed export, whose config file adds it for the consumer's own CMake.
#
# CMake before 3.26 knows no C++20 flag for nvcc: there, cuda_std_20 is an unknown compile feature. Teaching
# CMake the flag (CMAKE_CUDA20_STANDARD_COMPILE_OPTION and CMAKE_CUDA_COMPILE_FEATURES, toolchain.md problem 3)
# reaches only the targets of the directory that sets those variables, and a consumer's targets live in the
# consumer's directories: carried as that feature, the requirement fails the consumer's generate step ("The
# compiler feature cuda_std_20 is not known to CUDA compiler"). There the target carries the flag itself,
# which reaches the CUDA compilations of exactly the targets that link it, in any directory, and changes
# nothing else. Its one limit: a consumer target set to a CUDA standard below nvcc's default C++17 (for which
# CMake passes no flag) gets its own -std after ours, and nvcc keeps the last. Where CMake knows the feature,
# the feature is the better carrier: CMake merges it with the target's own standard, the higher one winning.
function(flashdeberta_cuda_require_cxx20 target)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "BUILD_INTERFACE" "" "")
  if(CMAKE_VERSION VERSION_LESS 3.26)
    set(property INTERFACE_COMPILE_OPTIONS)
    set(value "$<$<COMPILE_LANGUAGE:CUDA>:-std=c++20>")
  else()
    set(property INTERFACE_COMPILE_FEATURES)
    set(value cuda_std_20)
  endif()
  if(ARG_BUILD_INTERFACE)
    set(value "$<BUILD_INTERFACE:${value}>")
  endif()
  get_target_property(present ${target} ${property})
  if(NOT value IN_LIST present)  # find_package may load the config more than once in one directory
    set_property(TARGET ${target} APPEND PROPERTY ${property} "${value}")
  endif()
endfunction()
