#!/usr/bin/env bash
# pre_commit_test.sh: every hook of .pre-commit-config.yaml over a copy of the working tree's tracked files (plus the
# config itself, committed or not); fails when a hook would change a file, printing the diff. The source tree is only
# read. Then the control: one C++ file misformatted, one with trailing whitespace, one without its final newline
# must fail, each named by its hook. Exit 77 (skip) without pre-commit, pre-commit-hooks or clang-format, or outside
# a git checkout.
#   pre_commit_test.sh SOURCE_DIR
set -euo pipefail
src=$1
venv="${DTLAB_CACHE:-$HOME/.cache/dtlab}/venv"
skip() { echo "pre_commit_test: skipped: $*" >&2; exit 77; }
[[ -x $venv/bin/pre-commit ]] || skip "no pre-commit in $venv (make setup installs it, or $venv/bin/pip install pre-commit)"
for tool in end-of-file-fixer trailing-whitespace-fixer; do
  [[ -x $venv/bin/$tool ]] || skip "no $tool in $venv (make setup installs it, or $venv/bin/pip install pre-commit-hooks)"
done
command -v clang-format > /dev/null || skip "no clang-format on PATH (Debian clang-format; make setup installs it)"
[[ -f $src/.pre-commit-config.yaml ]] || { echo "pre_commit_test: no $src/.pre-commit-config.yaml" >&2; exit 1; }
git -C "$src" rev-parse --is-inside-work-tree > /dev/null 2>&1 || skip "$src is not a git checkout (no tracked files)"

work=$(mktemp -d "${TMPDIR:-/tmp}/dtlab-pre-commit.XXXXXX")
trap 'rm -rf "$work"' EXIT
tree=$work/tree
mkdir "$tree"
# Tracked files as they are in the working tree; one deleted there (not yet committed) is left out.
( cd "$src" && { git ls-files -z; printf '.pre-commit-config.yaml\0'; } |
  while IFS= read -r -d '' f; do if [[ -e $f || -L $f ]]; then printf '%s\0' "$f"; fi; done |
  sort -zu | xargs -0 cp -P --preserve=mode --parents -t "$tree" )
git -C "$tree" init -q
git -C "$tree" add -A
count=$(git -C "$tree" ls-files | wc -l)

hooks() { ( cd "$tree" && PRE_COMMIT_HOME=$work/home "$venv/bin/pre-commit" run --color never "$@" ); }
if ! hooks --all-files --show-diff-on-failure > "$work/run.log" 2>&1; then
  cat "$work/run.log" >&2
  echo "pre_commit_test: a hook would change the files above (of $count); fix them with" \
       "'$venv/bin/pre-commit run --all-files', or exclude generated data in .pre-commit-config.yaml" >&2
  exit 1
fi
cat "$work/run.log"
echo "pre_commit_test: $count files pass every hook"

# The control: each hook must catch its own fault in a copy.
mapfile -t sources < <(git -C "$tree" ls-files '*.cpp')
cpp=${sources[0]}
printf 'int  planted ( ) {return 0 ;}\n' >> "$tree/$cpp"
printf 'planted   \n' >> "$tree/README.md"
printf 'no final newline' >> "$tree/Makefile"
git -C "$tree" add -A
if hooks --files "$cpp" README.md Makefile > "$work/control.log" 2>&1; then
  echo "pre_commit_test: the hooks passed planted faults" >&2; cat "$work/control.log" >&2; exit 1
fi
for want in "clang-format.*Failed" "fix end of files.*Failed" "trim trailing whitespace.*Failed" \
            "Fixing README.md" "Fixing Makefile"; do
  grep -qE "$want" "$work/control.log" ||
    { echo "pre_commit_test: the control missed: $want" >&2; cat "$work/control.log" >&2; exit 1; }
done
echo "pre_commit_test: the control (a misformatted $cpp, trailing spaces, no final newline) failed as it must"
