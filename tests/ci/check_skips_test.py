#!/usr/bin/env python3
"""check_skips_test.py: cmake/check_skips.py on real ctest runs of a small throwaway project (so the JUnit file is
the one this ctest writes): a skip the allow-list does not name fails under --enforce, naming the test, its label
and its reason; an allowed one passes; an entry whose condition does not hold here (a no-gpu entry in a cuda build
with a GPU) does not allow; a malformed allow-list is an error; and the repository's own allow-list parses.

    python3 tests/ci/check_skips_test.py CMAKE CTEST      (ctest runs it as CheckSkips.*, label unit)
"""
import io
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "cmake"))
import check_skips  # noqa: E402

CMAKE, CTEST = "cmake", "ctest"

# Four tests the way this repository's tests skip: a script exiting 77 (SKIP_RETURN_CODE) and a gtest case
# (gtest_discover_tests' SKIP_REGULAR_EXPRESSION), one passing test and one skipping GPU case.
PROJECT = textwrap.dedent(r"""
    cmake_minimum_required(VERSION 3.20)
    project(skips NONE)
    enable_testing()
    add_test(NAME ClusterTest.MustRunAsRoot COMMAND sh -c "echo 'needs CAP_NET_ADMIN and CAP_SYS_ADMIN'; exit 77")
    set_tests_properties(ClusterTest.MustRunAsRoot PROPERTIES SKIP_RETURN_CODE 77 LABELS "unit;launch")
    add_test(NAME Ecosystem.PerfettoCounts COMMAND sh -c "echo 'SKIP: no trace_processor_shell binary'; exit 77")
    set_tests_properties(Ecosystem.PerfettoCounts PROPERTIES SKIP_RETURN_CODE 77 LABELS ecosystem)
    add_test(NAME GpuTraining.OnTheDevice
             COMMAND sh -c "printf '[ RUN      ] GpuTraining.OnTheDevice\ngpu_test.cpp:48: Skipped\nno CUDA device visible\n\n[  SKIPPED ] GpuTraining.OnTheDevice (0 ms)\n'")
    set_tests_properties(GpuTraining.OnTheDevice PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]" LABELS gpu)
    add_test(NAME Analysis.Passes COMMAND sh -c "exit 0")
    set_tests_properties(Analysis.Passes PROPERTIES LABELS analysis)
""")


class CheckSkips(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="dtlab_check_skips_")
        src, cls.build = os.path.join(cls.tmp.name, "src"), os.path.join(cls.tmp.name, "build")
        os.makedirs(src)
        with open(os.path.join(src, "CMakeLists.txt"), "w") as f:
            f.write(PROJECT)
        subprocess.run([CMAKE, "-S", src, "-B", cls.build], check=True, capture_output=True)
        cls.junit = os.path.join(cls.tmp.name, "junit.xml")
        run = subprocess.run([CTEST, "--test-dir", cls.build, "--output-junit", cls.junit], capture_output=True,
                             text=True)
        assert run.returncode == 0, "ctest counts skips as passes; it failed instead:\n" + run.stdout + run.stderr

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_checker(self, allowlist_text, *extra):
        path = os.path.join(self.tmp.name, "allow.txt")
        with open(path, "w") as f:
            f.write(allowlist_text)
        out, err = io.StringIO(), io.StringIO()
        stdout, stderr = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            rc = check_skips.main(["--build", self.build, "--junit", self.junit, "--allowlist", path,
                                   "--ctest", CTEST, *extra])
        finally:
            sys.stdout, sys.stderr = stdout, stderr
        return rc, out.getvalue() + err.getvalue()

    ALLOW_GPU_AND_PERFETTO = ("# comment\n"
                              "no-gpu  GpuTraining\\..*  needs a device\n"
                              "always  Ecosystem\\.Perfetto.*  no trace_processor_shell\n")

    def test_a_skip_the_list_does_not_name_fails_naming_test_label_and_reason(self):
        rc, text = self.run_checker(self.ALLOW_GPU_AND_PERFETTO, "--enforce", "--gpu", "no")
        self.assertEqual(rc, 1, text)
        self.assertIn("SKIPPED, MUST RUN  ClusterTest.MustRunAsRoot [launch,unit]: needs CAP_NET_ADMIN and "
                      "CAP_SYS_ADMIN -- no allow-list line names it", text)
        self.assertIn("skips: 3 in all, 2 allowed, 1 not allowed", text)
        self.assertIn("1 test(s) skipped that must run", text)

    def test_allowed_skips_pass_and_are_counted_by_label(self):
        rc, text = self.run_checker(self.ALLOW_GPU_AND_PERFETTO + "always ClusterTest\\..* no root here\n",
                                    "--enforce", "--gpu", "no")
        self.assertEqual(rc, 0, text)
        self.assertIn("allowed skip  GpuTraining.OnTheDevice [gpu] (no-gpu: needs a device): no CUDA device visible",
                      text)
        self.assertIn("allowed skip  Ecosystem.PerfettoCounts [ecosystem] (always: no trace_processor_shell): SKIP: "
                      "no trace_processor_shell binary", text)
        # label, tests, passed, failed, skipped
        self.assertRegex(text, r"\n  analysis\s+1\s+1\s+0\s+0\n")
        self.assertRegex(text, r"\n  unit\s+1\s+0\s+0\s+1\n")
        self.assertIn("skips: 3 in all, 3 allowed, 0 not allowed", text)

    def test_without_enforce_a_bad_skip_is_a_warning(self):
        rc, text = self.run_checker(self.ALLOW_GPU_AND_PERFETTO, "--gpu", "no")
        self.assertEqual(rc, 0, text)
        self.assertIn("warning: skipped  ClusterTest.MustRunAsRoot", text)

    def test_a_no_gpu_entry_does_not_hold_in_a_cuda_build_with_a_gpu(self):
        cache = os.path.join(self.build, "CMakeCache.txt")
        with open(cache) as f:
            saved = f.read()
        try:
            with open(cache, "a") as f:
                f.write("DTLAB_CUDA:BOOL=ON\n")
            rc, text = self.run_checker(self.ALLOW_GPU_AND_PERFETTO + "always ClusterTest\\..* no root here\n",
                                        "--enforce", "--gpu", "yes")
        finally:
            with open(cache, "w") as f:
                f.write(saved)
        self.assertEqual(rc, 1, text)
        self.assertIn("GpuTraining.OnTheDevice [gpu]: no CUDA device visible -- the allow-list's line 2 (no-gpu) "
                      "does not hold here (cuda build, a GPU visible)", text)

    def test_bad_input_is_an_error_not_a_pass(self):
        rc, text = self.run_checker("sometimes  Foo\\..*  a reason\n", "--enforce")
        self.assertEqual(rc, 2, text)
        self.assertIn("allow.txt:1: unknown tag 'sometimes'", text)
        rc, text = self.run_checker("always Foo\n", "--enforce")
        self.assertEqual(rc, 2, text)
        self.assertIn("expected 'TAG TEST-NAME-REGEX REASON'", text)
        rc, _ = self.run_checker("", "--enforce", "--junit", os.path.join(self.tmp.name, "missing.xml"))
        self.assertEqual(rc, 2)

    def test_the_repositorys_allow_list_parses_and_allows_no_cluster_test(self):
        entries = check_skips.read_allowlist(os.path.join(ROOT, "tests", "skip_allowlist.txt"))
        self.assertGreater(len(entries), 5)
        for name in ("ClusterTest.RankFailureStopsTheJobAndRemovesTheCluster", "ClusterParity/ClusterParity.Ddp/0",
                     "CommBench.OnAnEmulatedCluster", "PreCommit.TreePassesEveryHook",
                     "Report.LoadsInHeadlessChromium", "Torchrun.MatchesDtlabLaunchBitForBit"):
            self.assertEqual(check_skips.allowed_by(name, entries, False, False), (None, None), name)
        allowed, _ = check_skips.allowed_by("Ecosystem.PerfettoCountsTheTraceSlicesOfEveryLane", entries, False, False)
        self.assertIsNotNone(allowed)
        refusal = "GpuTraining.CudaInACpuBuildOrWithoutADeviceIsAClearError"
        self.assertIsNone(check_skips.allowed_by(refusal, entries, False, False)[0])  # it must run without a GPU
        self.assertIsNotNone(check_skips.allowed_by(refusal, entries, True, True)[0])


if __name__ == "__main__":
    if len(sys.argv) >= 3:
        CMAKE, CTEST = sys.argv[1], sys.argv[2]
        del sys.argv[1:3]
    unittest.main(verbosity=2)
