# The GoogleTest programs compile without optimization (-O0) in an optimized build: a test file
# of many TEST bodies costs the optimizer 2-5x its parse time (proto's codec_test.cc: 66 s at
# -O2 -g, 14 s at -O0), and test code was over half of a clean build's compile time. What they
# test keeps the build's flags: the ft libraries they link, the workloads and gpusim are built as
# users build them. The sanitizer builds do the same: a sanitizer checks -O0 code as well.
if(NOT CMAKE_BUILD_TYPE MATCHES "^(RelWithDebInfo|Release)$")
  return()
endif()

function(_ft_targets_below dir out)
  get_property(_targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(_subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(_sub IN LISTS _subdirs)
    _ft_targets_below(${_sub} _below)
    list(APPEND _targets ${_below})
  endforeach()
  set(${out} ${_targets} PARENT_SCOPE)
endfunction()

# They share one precompiled header of GoogleTest, fmt and the standard headers most of them
# include: gtest.h alone takes 2.3 s to compile here, in each of ~260 test files (16 sampled
# files: 37.9 CPU-s with the shared header, 49.7 without). The
# header is built once by ft_test_pch, an executable with the test programs' flags (-O0, -fPIE):
# GCC uses a precompiled header only under the flags it was made with, and otherwise reads the
# headers themselves, so a program whose flags differ still builds, only slower.
# GCC only: clang (make lint, make fuzz) validates a precompiled header's -D macros against the
# program's more strictly, several test programs define their own, and it was not tried there.
set(_ft_test_pch OFF)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(_ft_test_pch ON)
  add_executable(ft_test_pch ${PROJECT_SOURCE_DIR}/tests/util/test_pch_main.cc)
  target_link_libraries(ft_test_pch PRIVATE GTest::gtest fmt::fmt)
  target_compile_options(ft_test_pch PRIVATE ${FT_WARNINGS} $<$<COMPILE_LANGUAGE:CXX>:-O0>)
  target_precompile_headers(ft_test_pch PRIVATE
    <gtest/gtest.h> <fmt/format.h>
    <algorithm> <atomic> <chrono> <cstdint> <cstring> <map> <memory> <optional> <set> <string>
    <string_view> <thread> <vector>)
endif()

_ft_targets_below(${PROJECT_SOURCE_DIR} _ft_all_targets)
foreach(_target IN LISTS _ft_all_targets)
  get_target_property(_type ${_target} TYPE)
  if(NOT _type STREQUAL "EXECUTABLE" OR _target STREQUAL "ft_test_pch")
    continue()
  endif()
  get_target_property(_libs ${_target} LINK_LIBRARIES)
  if(_libs MATCHES "GTest::")
    # After the build type's -O2 on the command line, so it wins.
    target_compile_options(${_target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O0>)
    if(_ft_test_pch)
      # fmt's headers read FMT_SHARED, which linking fmt defines: every program links it so that
      # every one matches the header.
      target_link_libraries(${_target} PRIVATE fmt::fmt)
      target_precompile_headers(${_target} REUSE_FROM ft_test_pch)
    endif()
  endif()
endforeach()
