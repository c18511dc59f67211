# sinkscope_module(NAME [EXCLUDE FILE...]): a static library sinkscope_NAME from src/NAME/*.cpp
# (plus src/NAME/torch/*.cpp when the torch runtime is built) with the public include directory,
# leaving out the EXCLUDE files (absolute paths; a library of their own). A module folder with no
# sources yet compiles one empty file.
function(sinkscope_module name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "EXCLUDE")
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${name}/*.cpp)
  if(arg_EXCLUDE)
    list(REMOVE_ITEM sources ${arg_EXCLUDE})
  endif()
  if(SINKSCOPE_WITH_TORCH)
    file(GLOB torch_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${name}/torch/*.cpp)
    list(APPEND sources ${torch_sources})
  endif()
  if(NOT sources)
    set(sources ${CMAKE_BINARY_DIR}/empty_${name}.cpp)
    file(WRITE ${sources} "// module ${name} has no sources yet\n")
  endif()
  add_library(sinkscope_${name} STATIC ${sources})
  target_include_directories(sinkscope_${name} PUBLIC ${CMAKE_SOURCE_DIR}/include)
endfunction()

# sinkscope_test_suite(MODULE LIBS...): tests/MODULE/test_*.cpp -> test_MODULE (label unit),
# tests/MODULE/golden_*.cpp -> golden_MODULE (label golden),
# tests/MODULE/integration_*.cpp -> integration_MODULE (label integration); tests/MODULE/torch/
# adds its files of each kind when the torch runtime is built.
function(sinkscope_test_suite module)
  set(libs ${ARGN})
  foreach(kind test golden integration)
    file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/${module}/${kind}_*.cpp)
    if(SINKSCOPE_WITH_TORCH)
      file(GLOB torch_sources CONFIGURE_DEPENDS
           ${CMAKE_SOURCE_DIR}/tests/${module}/torch/${kind}_*.cpp)
      list(APPEND sources ${torch_sources})
    endif()
    if(NOT sources)
      continue()
    endif()
    if(kind STREQUAL "test")
      set(label unit)
    else()
      set(label ${kind})
    endif()
    set(target ${kind}_${module})
    add_executable(${target} ${sources})
    target_link_libraries(${target} PRIVATE ${libs} sinkscope_testing GTest::gtest_main)
    gtest_discover_tests(${target} DISCOVERY_MODE PRE_TEST
      PROPERTIES LABELS ${label} ENVIRONMENT "SINKSCOPE_SHARED=${SINKSCOPE_SHARED_DIR}")
  endforeach()
endfunction()
