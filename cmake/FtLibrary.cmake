# ft_library(<name> <source>... [LINK <link arguments>...]): a static library of ft's product
# code as every folder builds one: its sources, headers included by their path from the project
# root ("shm/ring.h"), ft's warnings as errors on its own sources (never on a dependency's
# headers' users), and what it links, PUBLIC/PRIVATE as target_link_libraries takes them.
# What each folder's library may link is checked afterwards against cmake/layers.txt.
# A library with more to say (extra include directories, per-file flags) adds it after the call.
function(ft_library name)
  cmake_parse_arguments(PARSE_ARGV 1 _ft "" "" "LINK")
  add_library(${name} STATIC ${_ft_UNPARSED_ARGUMENTS})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE ${FT_WARNINGS})
  if(_ft_LINK)
    target_link_libraries(${name} ${_ft_LINK})
  endif()
endfunction()
