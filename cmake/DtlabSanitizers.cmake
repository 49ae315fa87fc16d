# DtlabSanitizers.cmake: the sanitizer builds (`make check-asan`; docs/testing.md, "Sanitizers").
#   DTLAB_SANITIZE=address  AddressSanitizer + UndefinedBehaviorSanitizer on every dtlab target. Any undefined
#                           behaviour stops the program (-fno-sanitize-recover), as a memory error does.
#   DTLAB_SANITIZE=thread   ThreadSanitizer on every dtlab target (cmake/sanitizers/tsan_probe.sh is the quick
#                           check over the async paths that runs here; docs/testing.md).
# LibTorch, gloo and the system libraries stay uninstrumented: the sanitizers see dtlab's own code, and the memory
# and calls it hands to them. -O1 -g1 (line tables) keeps the reports' stacks exact and the build shorter than -O3.
# Tests are listed when ctest runs (PRE_TEST), so the build never runs an instrumented program.
set(DTLAB_SANITIZE "" CACHE STRING "Sanitizer build: address (ASan + UBSan) | thread (TSan) | empty (none)")
set_property(CACHE DTLAB_SANITIZE PROPERTY STRINGS "" address thread)

if(DTLAB_SANITIZE STREQUAL "address")
  set(_dtlab_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined)
elseif(DTLAB_SANITIZE STREQUAL "thread")
  set(_dtlab_sanitize_flags -fsanitize=thread)
elseif(DTLAB_SANITIZE)
  message(FATAL_ERROR "DTLAB_SANITIZE='${DTLAB_SANITIZE}': expected address, thread or empty")
endif()

if(_dtlab_sanitize_flags)
  if(DTLAB_CUDA)
    message(FATAL_ERROR "DTLAB_SANITIZE=${DTLAB_SANITIZE} is for the cpu configuration (nvcc does not take the flags)")
  endif()
  add_compile_options(${_dtlab_sanitize_flags} -fno-omit-frame-pointer -O1 -g1)
  add_link_options(${_dtlab_sanitize_flags})
  set(CMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE PRE_TEST)
  message(STATUS "  ✓ sanitizers: ${_dtlab_sanitize_flags} (dtlab's code; LibTorch uninstrumented)")
endif()
