# Build-time check of a doctest executable's case names, run after each link by flashdeberta_add_test:
#   cmake -DTEST_EXECUTABLE=<path> -P FlashDebertaCheckTestNames.cmake
# doctest_discover_tests reads the names as a CMake list, so a ";" in a name splits that case into two
# CTest tests whose --test-case filters match no case: both run nothing and pass; an unbalanced "[" or "]" makes
# CMake read the rest of the listing as one element, and ctest then fails to load the file. Such a name fails
# the build.
execute_process(COMMAND "${TEST_EXECUTABLE}" --list-test-cases OUTPUT_VARIABLE listing RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} --list-test-cases exited with ${status}")
endif()
string(REPLACE ";" "<semicolon>" listing "${listing}")  # one list element per name below
string(REGEX MATCHALL "[^\n]*<semicolon>[^\n]*" split_names "${listing}")
string(REGEX REPLACE "\\[doctest\\][^\n]*" "" names_only "${listing}")  # doctest's own banner lines
# an "[" with no "]" after it on its line, or a "]" with no "[" before it
string(REGEX MATCHALL "[^\n]*\\[[^]\n]*\n|\n[^[\n]*\\][^\n]*" bracket_names "\n${names_only}\n")
if(bracket_names)
  list(JOIN bracket_names "\n  " bracket_names)
  string(REPLACE "<semicolon>" ";" bracket_names "${bracket_names}")
  message(FATAL_ERROR "${TEST_EXECUTABLE}: test case names with \"[\" or \"]\", unbalanced, which break "
                      "CTest's reading of the test list; use another notation:\n  ${bracket_names}")
endif()
if(split_names)
  list(JOIN split_names "\n  " split_names)
  string(REPLACE "<semicolon>" ";" split_names "${split_names}")
  message(FATAL_ERROR "${TEST_EXECUTABLE}: test case names with a \";\", which CTest would split into cases that "
                      "run nothing; use another separator:\n  ${split_names}")
endif()
