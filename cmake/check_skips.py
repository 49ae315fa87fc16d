#!/usr/bin/env python3
"""check_skips.py: what a ctest run skipped, by label, and whether each skip was allowed on this machine.

ctest counts a skipped test (GTEST_SKIP, SKIP_RETURN_CODE) as a success, so a suite can be green while what it
guards never ran. This reads ctest's JUnit file (`ctest --output-junit FILE`) and the build's test labels (`ctest
--show-only=json-v1`), prints per label how many tests ran, failed and skipped, and lists every skip with its
message. A skip is allowed only when a line of the allow-list (tests/skip_allowlist.txt) names the test and its
condition holds here:

  TAG  TEST-NAME-REGEX  REASON...      (fields split on whitespace; the regex matches the whole name; '#' starts a comment line)

  cpu-build  the build is not the cuda configuration (CMakeCache.txt: DTLAB_CUDA off)
  cuda-build the build is the cuda configuration (cases about the cpu build only)
  no-gpu     the GPU path cannot run here: a cpu build, or no NVIDIA device visible (/dev/nvidia<N>, and
             CUDA_VISIBLE_DEVICES not set empty)
  gpu        a cuda build with a device visible (the refusals meant for machines without one)
  always     an outside tool that `make setup` cannot install

  python3 cmake/check_skips.py --build build --junit build/ctest-junit.xml [--enforce]
      [--allowlist tests/skip_allowlist.txt] [--tests-json FILE] [--ctest ctest] [--gpu yes|no]

Exit status: 0 when every skip was allowed (without --enforce: always, after listing the others as warnings);
1 with --enforce when a test skipped that must run on this machine kind, naming it, its label and its message;
2 on bad input (a missing or unreadable JUnit file, a malformed allow-list line, an unknown tag).
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAGS = ("cpu-build", "cuda-build", "no-gpu", "gpu", "always")


class BadInput(Exception):
    pass


def read_allowlist(path):
    """[(tag, compiled regex, reason, line number)] from the allow-list file."""
    entries = []
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise BadInput(f"cannot read the allow-list {path}: {e.strerror}")
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        fields = text.split(None, 2)
        if len(fields) < 3:
            raise BadInput(f"{path}:{number}: expected 'TAG TEST-NAME-REGEX REASON', got '{line}'")
        tag, pattern, reason = fields
        if tag not in TAGS:
            raise BadInput(f"{path}:{number}: unknown tag '{tag}' (one of {', '.join(TAGS)})")
        try:
            regex = re.compile(pattern)
        except re.error as e:
            raise BadInput(f"{path}:{number}: bad regex '{pattern}': {e}")
        entries.append((tag, regex, reason, number))
    return entries


def read_junit(path):
    """{test name: (status, message)} with status 'passed', 'failed' or 'skipped', from ctest's JUnit file."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        raise BadInput(f"cannot read the JUnit file {path} (did ctest run with --output-junit?): {e}")
    results = {}
    for case in root.iter("testcase"):
        name = case.get("name")
        status = case.get("status", "run")
        skipped = case.find("skipped")
        if skipped is not None or status in ("notrun", "disabled"):
            message = (skipped.get("message") if skipped is not None else "") or status
            results[name] = ("skipped", skip_reason(case, message))
        elif case.find("failure") is not None or status == "fail":
            results[name] = ("failed", "")
        else:
            results[name] = ("passed", "")
    return results


def skip_reason(case, fallback):
    """The reason a test gave for skipping: the lines between gtest's 'FILE:LINE: Skipped' and '[  SKIPPED ]', else
    the last line of its output (a script that exits with SKIP_RETURN_CODE), else ctest's own word."""
    out = case.findtext("system-out") or ""
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if line.endswith(": Skipped") or line == "Skipped":
            reason = []
            for following in lines[i + 1:]:
                if following.startswith("[  SKIPPED ]"):
                    break
                reason.append(following)
            return " / ".join(reason)[:300] or fallback
    return lines[-1][:300] if lines else fallback


def read_labels(tests_json):
    """{test name: [labels]} from `ctest --show-only=json-v1` output."""
    labels = {}
    for test in tests_json.get("tests", []):
        names = [p.get("value") for p in test.get("properties", []) if p.get("name") == "LABELS"]
        labels[test["name"]] = sorted(names[0]) if names and names[0] else []
    return labels


def ctest_listing(ctest, build):
    proc = subprocess.run([ctest, "--test-dir", build, "--show-only=json-v1"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BadInput(f"`{ctest} --test-dir {build} --show-only=json-v1` failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def cuda_build(build):
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            return any(re.match(r"DTLAB_CUDA:BOOL=(ON|1|TRUE|YES)$", line.strip(), re.I) for line in f)
    except OSError:
        return False


def gpu_visible():
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
        return False
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def tag_holds(tag, is_cuda_build, has_gpu):
    return {"cpu-build": not is_cuda_build, "cuda-build": is_cuda_build, "no-gpu": not (is_cuda_build and has_gpu),
            "gpu": is_cuda_build and has_gpu, "always": True}[tag]


def allowed_by(name, allowlist, is_cuda_build, has_gpu):
    """The allow-list entry that lets `name` skip here, or None. Second value: an entry that names the test but whose
    condition does not hold (for the message)."""
    named = None
    for tag, regex, reason, number in allowlist:
        if regex.fullmatch(name):
            if tag_holds(tag, is_cuda_build, has_gpu):
                return (tag, reason, number), None
            named = named or (tag, reason, number)
    return None, named


def print_tally(results, labels, out):
    by_label = {}
    for name, (status, _) in results.items():
        for label in labels.get(name) or ["(no label)"]:
            row = by_label.setdefault(label, {"tests": 0, "passed": 0, "failed": 0, "skipped": 0})
            row["tests"] += 1
            row[status] += 1
    out.write(f"skips by label ({len(results)} tests):\n")
    out.write(f"  {'label':<14}{'tests':>7}{'passed':>8}{'failed':>8}{'skipped':>9}\n")
    for label in sorted(by_label):
        r = by_label[label]
        out.write(f"  {label:<14}{r['tests']:>7}{r['passed']:>8}{r['failed']:>8}{r['skipped']:>9}\n")


def check(results, labels, allowlist, is_cuda_build, has_gpu, enforce, out):
    """Prints the tally and every skip; returns the number of skips not allowed here."""
    print_tally(results, labels, out)
    machine = f"{'cuda' if is_cuda_build else 'cpu'} build, {'a GPU' if has_gpu else 'no GPU'} visible"
    bad = 0
    for name in sorted(n for n, (status, _) in results.items() if status == "skipped"):
        message = results[name][1]
        label = ",".join(labels.get(name) or ["no label"])
        entry, named = allowed_by(name, allowlist, is_cuda_build, has_gpu)
        if entry:
            out.write(f"  allowed skip  {name} [{label}] ({entry[0]}: {entry[1]}): {message}\n")
            continue
        bad += 1
        why = (f"the allow-list's line {named[2]} ({named[0]}) does not hold here ({machine})" if named
               else "no allow-list line names it")
        out.write(f"  {'SKIPPED, MUST RUN' if enforce else 'warning: skipped'}  {name} [{label}]: {message} -- {why}\n")
    total = sum(1 for status, _ in results.values() if status == "skipped")
    out.write(f"skips: {total} in all, {total - bad} allowed, {bad} not allowed on this machine ({machine})\n")
    return bad


def main(argv=None):
    ap = argparse.ArgumentParser(description="per-label skip counts of a ctest run; fail on a skip not allowed here")
    ap.add_argument("--build", required=True, help="the build directory ctest ran in")
    ap.add_argument("--junit", required=True, help="ctest --output-junit FILE of that run")
    ap.add_argument("--allowlist", default=os.path.join(ROOT, "tests", "skip_allowlist.txt"))
    ap.add_argument("--tests-json", help="ctest --show-only=json-v1 output (default: run ctest for it)")
    ap.add_argument("--ctest", default="ctest")
    ap.add_argument("--gpu", choices=["yes", "no"], help="override the GPU detection (default: /dev/nvidia<N>)")
    ap.add_argument("--enforce", action="store_true", help="exit 1 on a skip the allow-list does not allow here")
    args = ap.parse_args(argv)
    try:
        allowlist = read_allowlist(args.allowlist)
        results = read_junit(args.junit)
        if args.tests_json:
            with open(args.tests_json) as f:
                listing = json.load(f)
        else:
            listing = ctest_listing(args.ctest, args.build)
    except (BadInput, OSError, json.JSONDecodeError) as e:
        print(f"check_skips: {e}", file=sys.stderr)
        return 2
    has_gpu = gpu_visible() if args.gpu is None else args.gpu == "yes"
    bad = check(results, read_labels(listing), allowlist, cuda_build(args.build), has_gpu, args.enforce, sys.stdout)
    if bad and args.enforce:
        print(f"check_skips: {bad} test(s) skipped that must run on this machine kind (listed above as SKIPPED, MUST "
              f"RUN); make it run, or, if it cannot run on such a machine, add it to {args.allowlist} with its reason",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
