#!/usr/bin/env bash
# tsan_probe.sh: ThreadSanitizer over dtlab's async paths where it can run here (docs/testing.md, "Sanitizers").
# Builds and runs two small programs with -fsanitize=thread (about a minute): the comm's serial thread
# (tsan_serial_thread.cpp, torch-free) and the async checkpoint's snapshot pattern over the uninstrumented LibTorch
# wheel (tsan_torch_snapshot.cpp). Any TSan report fails it (exit 66). A DTLAB_SANITIZE=thread build of dtlab itself
# is the fuller check (cmake/DtlabSanitizers.cmake).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source=$(cd "$here/../.." && pwd)
out=${1:-$source/build-tsan-probe}
cache=${DTLAB_CACHE:-$HOME/.cache/dtlab}
torch=$(find "$cache"/venv/lib -maxdepth 3 -path "*/site-packages/torch" -type d | head -n 1)
mkdir -p "$out"
export TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1"
flags=(-std=c++20 -fsanitize=thread -O1 -g -fno-omit-frame-pointer)
c++ "${flags[@]}" -I"$source" "$here/tsan_serial_thread.cpp" -o "$out/tsan_serial_thread"
"$out/tsan_serial_thread"
c++ "${flags[@]}" -D_GLIBCXX_USE_CXX11_ABI=1 -isystem "$torch/include" -isystem "$torch/include/torch/csrc/api/include" \
  "$here/tsan_torch_snapshot.cpp" -o "$out/tsan_torch_snapshot" -L"$torch/lib" -Wl,-rpath,"$torch/lib" -ltorch_cpu -lc10
"$out/tsan_torch_snapshot"
echo "tsan_probe: no ThreadSanitizer report"
