// process_test.cpp: the one fork/exec helper (lab/process.hpp) — exit-code conventions, redirection, environment,
// working directory, sessions and output capture, with /bin/sh as the child.
#include "lab/process.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

namespace dtlab {
namespace {

ProcessResult run_shell(const std::string& script, ProcessSpec spec = {}) {
  spec.argv = {"/bin/sh", "-c", script};
  return run_process(spec, /*capture_output=*/true);
}

TEST(Process, ExitCodeAndCapturedOutputInOrder) {
  const ProcessResult r = run_shell("echo out; echo err >&2; exit 3");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.output, "out\nerr\n");
}

TEST(Process, SignalledChildIs128PlusSignal) {
  const ProcessResult r = run_shell("kill -TERM $$");
  EXPECT_EQ(r.signal, SIGTERM);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM);
}

TEST(Process, MissingProgramIs127WithTheConfiguredMessage) {
  ProcessSpec spec{.argv = {"/nonexistent/dtlab-no-such-program"},
                   .exec_error_before = "x: cannot execute '",
                   .exec_error_after = "': "};
  const ProcessResult r = run_process(spec, true);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(r.output, "x: cannot execute '/nonexistent/dtlab-no-such-program': No such file or directory\n");
}

TEST(Process, NotExecutableIs126AndSilentByDefault) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "dtlab_process_test_not_executable";
  std::ofstream(file) << "#!/bin/sh\n";
  std::filesystem::permissions(file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const ProcessResult r = run_process(ProcessSpec{.argv = {file.string()}}, true);
  std::filesystem::remove(file);
  EXPECT_EQ(r.exit_code, 126);
  EXPECT_EQ(r.output, "");
}

TEST(Process, SearchesPathAndSetsEnvironmentAndWorkingDirectory) {
  const ProcessResult r = run_process(ProcessSpec{.argv = {"sh", "-c", "echo \"$DTLAB_PROCESS_TEST\"; pwd"},
                                                  .search_path = true,
                                                  .environment = std::vector<std::string>{"DTLAB_PROCESS_TEST=yes"},
                                                  .working_directory = "/"},
                                      true);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "yes\n/\n");
}

TEST(Process, WorkingDirectoryThatCannotBeEnteredIs126) {
  const ProcessResult r = run_shell("true", ProcessSpec{.working_directory = "/nonexistent/dtlab-no-such-dir"});
  EXPECT_EQ(r.exit_code, 126);
}

TEST(Process, NewSessionAndNullStdin) {
  // A session leader's session id is its pid; stdin from /dev/null reads nothing.
  const ProcessResult r = run_shell("test \"$(cut -d' ' -f6 /proc/$$/stat)\" = \"$$\" && echo leader; cat; echo end",
                                    ProcessSpec{.new_session = true, .stdin_fd = kNullDevice});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "leader\nend\n");
}

TEST(Process, SpawnAndWaitForExit) {
  const pid_t pid = spawn(ProcessSpec{.argv = {"/bin/sh", "-c", "exit 7"}});
  EXPECT_EQ(wait_for_exit(pid), 7);
  EXPECT_EQ(wait_for_exit(pid), -1);  // already reaped
}

TEST(Process, FindsProgramsOnPath) {
  EXPECT_TRUE(find_on_path("sh").has_value());
  EXPECT_FALSE(find_on_path("dtlab-no-such-program-anywhere").has_value());
}

}  // namespace
}  // namespace dtlab
