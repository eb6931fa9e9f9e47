# Warnings for our own targets only (third-party code keeps its own flags).
function(parallax_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${PARALLAX_WERROR}>>:-Werror>)
endfunction()

# parallax_library(name SOURCES ... DEPS ...): a static library rooted at the repository top,
# so includes read "model/model_spec.h".
function(parallax_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  parallax_warnings(${name})
endfunction()

# parallax_test(name SOURCES ... LIBS ... LABELS ... [WORKING_DIRECTORY dir]): one GoogleTest
# executable registered as one ctest entry per test case via gtest_discover_tests.
function(parallax_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    PARALLAX_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    PARALLAX_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data"
    PARALLAX_BINARY_DIR="${PROJECT_BINARY_DIR}")
  parallax_warnings(${name})
  if(PARALLAX_TEST_COMPILE_OPTIONS)
    target_compile_options(${name} PRIVATE ${PARALLAX_TEST_COMPILE_OPTIONS})
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  gtest_discover_tests(${name}
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
    DISCOVERY_TIMEOUT 60)
endfunction()
