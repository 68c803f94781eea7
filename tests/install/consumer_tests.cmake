# flashdeberta_add_consumer_tests(PREFIX VIA [TREE dir] [AFTER test...] [REQUIRES fixture] [ARGS arg...]):
# configures the consumer project (tests/install/consumer) with CONSUMER_VIA=VIA and ARGS, builds it and runs
# its programs, one for each component this build has: CTest tests PREFIX_configure, PREFIX_build, PREFIX_run
# (a forward on eigen, through oneDNN where built), PREFIX_kokkos, PREFIX_tokenize and PREFIX_cuda (exit 77,
# skipped, without a GPU). REQUIRES names a fixture the configure step needs (the installed tree). Sets
# PREFIX_TESTS to the tests' names.
#
# The build tree is PREFIX-build unless TREE names one that the tests AFTER use too, which then run first:
# where two ways compile the same commands, the second finds the objects up to date (the CUDA kernels compile
# once for both). PREFIX_clean then deletes the programs first, so that the ones run were linked by this
# way's configuration.
#
# No build type: the programs check the package, not its speed, and their host code compiles in half the time
# of Release (the kernels' device code is optimized either way).
function(flashdeberta_add_consumer_tests prefix via)
  cmake_parse_arguments(PARSE_ARGV 2 ARG "" "TREE;REQUIRES" "AFTER;ARGS")
  set(build ${CMAKE_CURRENT_BINARY_DIR}/${prefix}-build)
  if(ARG_TREE)
    set(build ${ARG_TREE})
  endif()
  add_test(NAME ${prefix}_configure
           COMMAND ${CMAKE_COMMAND} -S ${PROJECT_SOURCE_DIR}/tests/install/consumer -B ${build}
                   -DCMAKE_BUILD_TYPE= -DCONSUMER_VIA=${via}
                   -DCONSUMER_WITH_ONEDNN=${FLASHDEBERTA_WITH_ONEDNN}
                   -DCONSUMER_WITH_KOKKOS=${FLASHDEBERTA_WITH_KOKKOS}
                   -DCONSUMER_WITH_TOKENIZERS=${FLASHDEBERTA_WITH_SENTENCEPIECE}
                   -DCONSUMER_WITH_CUDA=${FLASHDEBERTA_WITH_CUDA}
                   "-DCMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES}"
                   ${ARG_ARGS})
  set_tests_properties(${prefix}_configure PROPERTIES FIXTURES_SETUP ${prefix}_configured)
  # It compiles on both cores (the CUDA kernels alone take some 40 s of one), so CTest counts it as two jobs.
  add_test(NAME ${prefix}_build COMMAND ${CMAKE_COMMAND} --build ${build} -j2)
  set_tests_properties(${prefix}_build PROPERTIES FIXTURES_REQUIRED ${prefix}_configured
                                                  FIXTURES_SETUP ${prefix}_built PROCESSORS 2)
  set(tests ${prefix}_configure ${prefix}_build)

  set(fixtures ${PROJECT_SOURCE_DIR}/tests/fixtures)
  set(names run)  # each with its program and arguments
  set(run consumer ${fixtures}/v3_c2p)
  if(FLASHDEBERTA_WITH_KOKKOS)
    list(APPEND names kokkos)
    set(kokkos consumer_kokkos)
  endif()
  if(FLASHDEBERTA_WITH_SENTENCEPIECE)
    list(APPEND names tokenize)
    set(tokenize consumer_tokenize ${fixtures}/tokenizers/spm)
  endif()
  if(FLASHDEBERTA_WITH_CUDA)  # a host-compiled program on CudaPolicy
    list(APPEND names cuda)
    set(cuda consumer_cuda ${fixtures}/v3_c2p)
  endif()
  set(programs)
  foreach(name IN LISTS names)
    list(POP_FRONT ${name} program)
    add_test(NAME ${prefix}_${name} COMMAND ${build}/${program} ${${name}})
    set_tests_properties(${prefix}_${name} PROPERTIES FIXTURES_REQUIRED ${prefix}_built)
    if(name STREQUAL "cuda")
      set_tests_properties(${prefix}_${name} PROPERTIES SKIP_RETURN_CODE 77)
    endif()
    list(APPEND tests ${prefix}_${name})
    list(APPEND programs ${build}/${program})
  endforeach()

  set(configure_needs ${ARG_REQUIRES})
  if(ARG_TREE)
    add_test(NAME ${prefix}_clean COMMAND ${CMAKE_COMMAND} -E rm -f ${programs})
    set_tests_properties(${prefix}_clean PROPERTIES FIXTURES_SETUP ${prefix}_cleaned DEPENDS "${ARG_AFTER}")
    list(APPEND configure_needs ${prefix}_cleaned)
    list(APPEND tests ${prefix}_clean)
  endif()
  if(configure_needs)
    set_tests_properties(${prefix}_configure PROPERTIES FIXTURES_REQUIRED "${configure_needs}")
  endif()
  set(${prefix}_TESTS ${tests} PARENT_SCOPE)
endfunction()
