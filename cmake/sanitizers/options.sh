# shellcheck shell=bash
# options.sh: the sanitizer runtime options of `make check-asan` (sourced by check_asan.sh; docs/testing.md).
# A report stops the program with exit code 1 and a symbolized stack (llvm-symbolizer or addr2line).
#   check_initialization_order / strict_init_order: a global read before its constructor ran is an error
#   detect_stack_use_after_return: a pointer to a returned frame's local is caught, not read as stale stack
#   suppressions: lsan.supp, each entry with its reason (leaks inside LibTorch's own, uninstrumented code)
_dtlab_sanitizers=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export ASAN_OPTIONS="check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1:abort_on_error=0"
export LSAN_OPTIONS="suppressions=$_dtlab_sanitizers/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
