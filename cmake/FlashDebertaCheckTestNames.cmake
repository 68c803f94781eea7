# Build-time check of a doctest executable's case names, run after each link by flashdeberta_add_test:
#   cmake -DTEST_EXECUTABLE=<path> -P FlashDebertaCheckTestNames.cmake
# doctest_discover_tests reads the names as a CMake list, so a ";" in a name splits that case into two
# CTest tests whose --test-case filters match no case: both run nothing and pass. Such a name fails the build.
execute_process(COMMAND "${TEST_EXECUTABLE}" --list-test-cases OUTPUT_VARIABLE listing RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} --list-test-cases exited with ${status}")
endif()
string(REPLACE ";" "<semicolon>" listing "${listing}")  # one list element per name below
string(REGEX MATCHALL "[^\n]*<semicolon>[^\n]*" split_names "${listing}")
if(split_names)
  list(JOIN split_names "\n  " split_names)
  string(REPLACE "<semicolon>" ";" split_names "${split_names}")
  message(FATAL_ERROR "${TEST_EXECUTABLE}: test case names with a \";\", which CTest would split into cases that "
                      "run nothing; use another separator:\n  ${split_names}")
endif()
