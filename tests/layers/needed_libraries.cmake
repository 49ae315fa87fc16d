# needed_libraries.cmake: cmake -DREADELF=... -DPROGRAMS="a;b" -P needed_libraries.cmake — fails when one of the
# programs needs a LibTorch library (libtorch*, libc10*) at load time (readelf -d, NEEDED entries).
foreach(program IN LISTS PROGRAMS)
  execute_process(COMMAND ${READELF} -d ${program} OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readelf -d ${program} failed (${rc})")
  endif()
  string(REGEX MATCHALL "NEEDED[^\n]*\\[(libtorch|libc10)[^]]*\\]" torch "${dynamic}")
  if(torch)
    message(FATAL_ERROR "${program} is torch-free by the layer rules but needs: ${torch}")
  endif()
  message(STATUS "${program}: no LibTorch library needed")
endforeach()
