# Header-only and pkg-config dependencies that Debian ships without CMake configs.
find_path(GUDHI_INCLUDE_DIR gudhi/Rips_complex.h)
find_path(SPECTRA_INCLUDE_DIR Spectra/SymEigsSolver.h)
find_package(Boost REQUIRED)
if(GUDHI_INCLUDE_DIR)
  target_include_directories(sinkscope_metrics SYSTEM PUBLIC ${GUDHI_INCLUDE_DIR})
else()
  message(FATAL_ERROR "GUDHI headers not found: install libgudhi-dev (scripts/install-deps.sh)")
endif()
if(SPECTRA_INCLUDE_DIR)
  target_include_directories(sinkscope_metrics SYSTEM PUBLIC ${SPECTRA_INCLUDE_DIR})
else()
  message(FATAL_ERROR "Spectra headers not found: install libspectra-dev (scripts/install-deps.sh)")
endif()
target_link_libraries(sinkscope_metrics PUBLIC Boost::headers)

# Google Highway (libhwy-dev): the vectorised pair kernels of the head distances (Jensen-Shannon's
# logarithm, Gram corrections), compiled for every x86 target and dispatched at run time.
find_package(hwy REQUIRED)
target_link_libraries(sinkscope_metrics PRIVATE hwy::hwy)
# src/metrics/pair_kernels.cpp includes itself once per SIMD target (HWY_TARGET_INCLUDE), by a
# path relative to src/.
target_include_directories(sinkscope_metrics PRIVATE ${CMAKE_SOURCE_DIR}/src)

find_package(PkgConfig REQUIRED)
function(sinkscope_link_pcre2 target)
  pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
  target_link_libraries(${target} PUBLIC PkgConfig::PCRE2)
endfunction()

# libsentencepiece (libsentencepiece-dev): the reference implementation in the torch-free
# tokenizer tests only. The library reads .model files itself: libsentencepiece.so bundles its
# own protobuf, whose symbols clash with libtorch's libprotobuf (a crash at load time).
find_library(SENTENCEPIECE_LIBRARY sentencepiece REQUIRED)
find_library(SENTENCEPIECE_TRAIN_LIBRARY sentencepiece_train REQUIRED)
find_path(SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h REQUIRED)
