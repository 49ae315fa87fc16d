#!/usr/bin/env python3
"""tidy_cached.py: clang-tidy over every C++ source of the build, each file's verdict cached by what it depends on.

A file's key is the SHA-256 of: the clang-tidy version, the .clang-tidy file, the file's compile command, and the
contents of every file ninja's dependency log says its object read (its precompiled header's too), with the
clone's and the build's paths replaced by placeholders, so a fresh clone elsewhere reuses the verdicts. A key seen
clean before is skipped; anything else runs clang-tidy with every warning an error. So `make check` lints the whole
tree and still costs only what changed. Cache: $DTLAB_CACHE/clang-tidy (default ~/.cache/dtlab/clang-tidy).

  python3 cmake/tidy_cached.py BUILD_DIR [-j N]
Exit status: 0 when every file is clean, 1 when clang-tidy reported anything (its output is printed).
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def file_digest(path, memo, portable):
    """SHA-256 of a file's contents with the clone's paths replaced (CMake's generated files, such as the
    precompiled header's wrapper, name the checkout: a fresh clone elsewhere must still get the same key)."""
    if path not in memo:
        h = hashlib.sha256()
        try:
            with open(path, "rb") as f:
                h.update(portable(f.read().decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape"))
        except OSError:
            h.update(b"<missing>")
        memo[path] = h.hexdigest()
    return memo[path]


def ninja_deps(build, output):
    """The files ninja recorded as read when it compiled `output` (a path relative to the build dir)."""
    text = subprocess.run(["ninja", "-C", build, "-t", "deps", output], capture_output=True, text=True).stdout
    return [line.strip() for line in text.splitlines()[1:] if line.startswith("    ")]


def clang_database(build, entries, jobs):
    """A compile database for clang-tidy in BUILD/tidy, for the (directory, command, file) entries given.

    CMake's precompiled headers are GCC's (.gch), which clang cannot read, and parsing the LibTorch headers in every
    file costs about a minute each. So each distinct set of flags gets one clang PCH of the header the target
    precompiles (built here, ~30 s each, only for the flags of files still to check), and the commands include that
    instead: the same declarations, parsed once per run."""
    out_dir = os.path.join(build, "tidy")
    shutil.rmtree(out_dir, ignore_errors=True)  # a PCH older than a header it read is refused by clang: rebuild
    os.makedirs(out_dir)
    pchs = {}  # flags -> (header, pch path)
    rewritten = []
    for directory, command, src in entries:
        include = re.search(r"\s-include\s+(\S+/cmake_pch\.hxx)", command)
        command = command.replace(" -Winvalid-pch", "")
        if include:
            header = re.search(r'#include "([^"]+)"', open(include.group(1)).read()).group(1)
            flags = re.sub(r"\s-o\s+\S+|\s-c\s+\S+", "", command.replace(include.group(0), ""))
            name = hashlib.sha256((flags + header).encode()).hexdigest()[:16] + ".pch"
            pchs.setdefault(flags, (header, os.path.join(out_dir, name)))
            command = command.replace(include.group(0), " -include-pch " + pchs[flags][1])
        rewritten.append({"directory": directory, "command": command, "file": src})

    def build_pch(item):
        flags, (header, path) = item
        argv = shlex.split(flags)  # as clang-tidy reads the database's command: quotes and escapes undone
        argv[0] = "clang++"  # the flags are GCC's compile line; clang accepts them
        r = subprocess.run(argv + ["-x", "c++-header", header, "-o", path + ".tmp"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"clang-tidy: cannot build a clang PCH of {header}:\n{r.stderr}")
        os.replace(path + ".tmp", path)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(build_pch, [item for item in pchs.items() if not os.path.exists(item[1][1])]))
    with open(os.path.join(out_dir, "compile_commands.json"), "w") as f:
        json.dump(rewritten, f)
    return out_dir


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build")
    parser.add_argument("-j", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    cache = os.path.join(os.environ.get("DTLAB_CACHE", os.path.expanduser("~/.cache/dtlab")), "clang-tidy")
    os.makedirs(cache, exist_ok=True)
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, text=True).stdout
    config_path = os.path.join(ROOT, ".clang-tidy")
    config = open(config_path, "rb").read() if os.path.exists(config_path) else b""

    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    def portable(text):
        """The key must not depend on where the clone lives (CI lints a fresh clone each time)."""
        return text.replace(build, "<build>").replace(ROOT, "<source>")

    memo = {}
    jobs = []
    commands = {}
    for e in entries:
        src = os.path.abspath(os.path.join(e["directory"], e["file"]))
        if not src.startswith(ROOT + os.sep) or src.startswith(build) or not src.endswith(".cpp"):
            continue
        command = e.get("command") or " ".join(e.get("arguments", []))
        output = re.search(r"\s-o\s+(\S+)", command)
        deps = ninja_deps(build, output.group(1)) if output else []
        pch = re.search(r"-include\s+(\S+/cmake_pch\.hxx)", command)
        if pch:  # the precompiled header's own inputs (torch headers) are not in the object's deps
            deps += ninja_deps(build, os.path.relpath(pch.group(1), build) + ".gch")
        h = hashlib.sha256()
        h.update(version.encode())
        h.update(config)
        h.update(portable(command).encode())
        # ninja records a dependency relative to the build dir or absolute, depending on how it was configured:
        # absolute first, then in placeholder form, so both spellings give one key.
        paths = {os.path.normpath(d if os.path.isabs(d) else os.path.join(build, d)) for d in deps} | {src}
        for name, path in sorted((portable(p), p) for p in paths):
            h.update(name.encode())
            h.update(file_digest(path, memo, portable).encode())
        jobs.append((src, h.hexdigest()))
        commands[src] = (e["directory"], command)

    todo = [(src, key) for src, key in jobs if not os.path.exists(os.path.join(cache, key))]
    print(f"clang-tidy: {len(jobs)} files, {len(jobs) - len(todo)} unchanged since a clean run, {len(todo)} to check",
          flush=True)

    tidy_db = clang_database(build, [commands[src] + (src,) for src, _ in todo], args.j)

    def run(job):
        src, key = job
        r = subprocess.run(["clang-tidy", "-p", tidy_db, "--quiet", "--warnings-as-errors=*", src],
                           capture_output=True, text=True)
        # clang-tidy prints "N warnings generated" for suppressed system-header warnings; only diagnostics count.
        clean = r.returncode == 0 and not re.search(r"(warning|error):", r.stdout)
        if clean:
            open(os.path.join(cache, key), "w").close()
        return src, clean, r.stdout + r.stderr

    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j)) as pool:
        for src, clean, output in pool.map(run, todo):
            if not clean:
                failed += 1
                print(f"--- {os.path.relpath(src, ROOT)}\n{output}", flush=True)
    print(f"clang-tidy: {failed} of {len(todo)} checked files have findings" if failed else "clang-tidy: clean")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
