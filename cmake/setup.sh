#!/usr/bin/env bash
# dtlab setup: installs what dtlab needs on Debian 12, idempotently.
#   Debian packages (compilers' libraries, gnuplot, ccache, gloo headers) via apt,
#   LibTorch as the PyPI wheel torch==2.11.0 into a cached venv outside the clone.
# Fast when everything is present: it only checks. As non-root it installs nothing
# and prints exactly what is missing (exit 1).
# Env: DTLAB_CACHE (default ~/.cache/dtlab), DTLAB_PYTHON (default python3).
set -euo pipefail

TORCH_VERSION="2.11.0"
CACHE="${DTLAB_CACHE:-$HOME/.cache/dtlab}"
VENV="$CACHE/venv"
PYTHON="${DTLAB_PYTHON:-python3}"
STAMP="$VENV/.dtlab-torch-$TORCH_VERSION"

# Debian packages: header-only / dev libraries and tools used by the build, tests and report.
DEB_PACKAGES=(
  build-essential cmake ninja-build git ccache python3-venv
  nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev             # trace.json.gz (lab/instrument/trace.cpp)
  libgloo-dev            # headers only: the wheel does not ship gloo/*.h (see docs/architecture.md)
  iproute2               # ip and tc build the emulated cluster (lab/launch/cluster.cpp)
  util-linux             # setpriv drops capabilities in the cluster tests' no-privilege case
  gnuplot-nox clang-format clang-tidy
  chromium               # the report opened in a real browser (tests/analysis/browser_check.py)
  clang                  # clang++ builds clang-tidy's PCH of the LibTorch headers (cmake/tidy_cached.py)
)
# Python packages in the venv besides torch: numpy (torch warns without it; reference scripts), safetensors (a test
# opens dtlab checkpoints the way PyTorch users do); the readers tests/ecosystem/ checks dtlab's outputs with:
# tensorboard (event files), HolisticTraceAnalysis (traces; brings pandas, also read_csv of `dtlab export csv`),
# perfetto (its trace processor; the shell binary it downloads on first use is not on PyPI); pre-commit and
# pre-commit-hooks (.pre-commit-config.yaml, tests/habits/). Pinned to the versions the tests were written against.
# A venv made before an entry was added gets it through the second stamp, named after the list.
PIP_EXTRA=(numpy safetensors tensorboard==2.21.0 HolisticTraceAnalysis==0.5.0 perfetto==0.59.1 pre-commit==4.7.0
           pre-commit-hooks==6.0.0)
PIP_STAMP="$VENV/.dtlab-pip-$(IFS=-; echo "${PIP_EXTRA[*]}")"

missing_debs=()
for p in "${DEB_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing_debs+=("$p")
  fi
done
need_torch=0
[[ -f "$STAMP" ]] || need_torch=1
need_pip=0
[[ -f "$PIP_STAMP" ]] || need_pip=1

if [[ ${#missing_debs[@]} -eq 0 && $need_torch -eq 0 && $need_pip -eq 0 ]]; then
  echo "dtlab setup: everything present (torch $TORCH_VERSION in $VENV)"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "dtlab setup: not root, so nothing was installed. Missing:" >&2
  [[ ${#missing_debs[@]} -gt 0 ]] && echo "  Debian packages: ${missing_debs[*]}" >&2 &&
    echo "    -> sudo apt-get install -y ${missing_debs[*]}" >&2
  if [[ $need_torch -eq 1 ]]; then
    echo "  LibTorch: torch==$TORCH_VERSION in $VENV" >&2
    echo "    -> $PYTHON -m venv $VENV && $VENV/bin/pip install torch==$TORCH_VERSION ${PIP_EXTRA[*]} && touch $STAMP" >&2
  fi
  if [[ $need_pip -eq 1 && $need_torch -eq 0 ]]; then
    echo "  Python packages in $VENV: ${PIP_EXTRA[*]}" >&2
    echo "    -> $VENV/bin/pip install ${PIP_EXTRA[*]} && touch $PIP_STAMP" >&2
  fi
  exit 1
fi

if [[ ${#missing_debs[@]} -gt 0 ]]; then
  echo "dtlab setup: apt-get install ${missing_debs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing_debs[@]}"
fi

if [[ $need_torch -eq 1 ]]; then
  echo "dtlab setup: installing torch==$TORCH_VERSION into $VENV (first time only, ~5 GB)"
  mkdir -p "$CACHE"
  [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --progress-bar off --disable-pip-version-check \
    "torch==$TORCH_VERSION" "${PIP_EXTRA[@]}"
  "$VENV/bin/python" -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('$TORCH_VERSION') else 1)" ||
    { echo "dtlab setup: torch in $VENV is not $TORCH_VERSION" >&2; exit 1; }
  touch "$STAMP"
fi
if [[ ! -f "$PIP_STAMP" ]]; then
  echo "dtlab setup: pip install ${PIP_EXTRA[*]} into $VENV"
  "$VENV/bin/pip" install --quiet --progress-bar off --disable-pip-version-check "${PIP_EXTRA[@]}"
  touch "$PIP_STAMP"
fi
echo "dtlab setup: done"
