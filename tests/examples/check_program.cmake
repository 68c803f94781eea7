# Runs one program and checks both its exit status and its output, for CTest. PASS_REGULAR_EXPRESSION alone
# makes CTest ignore the exit status, so a program that prints the right answer and then crashes, or exits
# non-zero on a LeakSanitizer or UBSan report, would pass.
#   cmake [-DEXPECTED_EXIT=<status>] [-DSTDOUT_REGEX=<re>] [-DSTDERR_REGEX=<re>] -P check_program.cmake -- <program> <args>...
# EXPECTED_EXIT defaults to 0. The expressions are CMake's (as for PASS_REGULAR_EXPRESSION) and match anywhere in
# their stream unless anchored with ^ / $. Registered by flashdeberta_add_program_test (tests/CMakeLists.txt).
set(command "")
set(after_separator FALSE)
math(EXPR last_argument "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last_argument})
  if(after_separator)
    string(REPLACE ";" "\\;" argument "${CMAKE_ARGV${i}}")  # one argument, even with a ";" in it
    list(APPEND command "${argument}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(after_separator TRUE)
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "check_program.cmake: no program given after --")
endif()
if(NOT DEFINED EXPECTED_EXIT)
  set(EXPECTED_EXIT 0)
endif()

execute_process(COMMAND ${command} RESULT_VARIABLE status OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)

set(failures "")
if(NOT status STREQUAL EXPECTED_EXIT)  # a signal gives a text such as "Segmentation fault"
  string(APPEND failures "\n  exit status: ${status}, expected ${EXPECTED_EXIT}")
endif()
if(NOT "${STDOUT_REGEX}" STREQUAL "" AND NOT stdout MATCHES "${STDOUT_REGEX}")
  string(APPEND failures "\n  stdout does not match: ${STDOUT_REGEX}")
endif()
if(NOT "${STDERR_REGEX}" STREQUAL "" AND NOT stderr MATCHES "${STDERR_REGEX}")
  string(APPEND failures "\n  stderr does not match: ${STDERR_REGEX}")
endif()
list(JOIN command " " command_line)
if(failures)
  message(FATAL_ERROR "${command_line}${failures}\n--- stdout:\n${stdout}\n--- stderr:\n${stderr}")
endif()
message(STATUS "${command_line}: exit ${status}, output as expected")
