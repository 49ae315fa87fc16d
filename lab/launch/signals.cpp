// signals.cpp: the launcher's signal handling — INT, TERM and HUP ask the supervisor to stop the job, CHLD wakes it
// (through a self-pipe, so its poll() returns at once) — and readable signal names for its messages.
#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>

#include <unistd.h>

#include "lab/launch/launch_internal.hpp"

namespace dtlab::launch_internal {
namespace {

// Written from signal handlers: the wake-up pipe (so poll() returns at once) and the last stop signal.
int g_wakeup_write_fd = -1;
volatile sig_atomic_t g_stop_signal = 0;
volatile sig_atomic_t g_stop_signal_count = 0;

void wake_supervisor() {
  const int saved_errno = errno;
  if (g_wakeup_write_fd >= 0) {
    const char byte = 0;
    [[maybe_unused]] const ssize_t ignored = ::write(g_wakeup_write_fd, &byte, 1);
  }
  errno = saved_errno;
}

void on_stop_signal(int signal_number) {
  g_stop_signal = signal_number;
  g_stop_signal_count = g_stop_signal_count + 1;
  wake_supervisor();
}

void on_child_signal(int) { wake_supervisor(); }

}  // namespace

// "SIGKILL (9)" — the conventional name plus the number; unknown signals fall back to strsignal().
std::string signal_name(int signal_number) {
  struct Named {
    int number;
    const char* name;
  };
  static const Named kNames[] = {
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},   {SIGTRAP, "SIGTRAP"},
      {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"},
      {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"}, {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
      {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
  };
  for (const Named& entry : kNames) {
    if (entry.number == signal_number) return std::string(entry.name) + " (" + std::to_string(signal_number) + ")";
  }
  const char* description = strsignal(signal_number);
  return std::string(description ? description : "signal") + " (" + std::to_string(signal_number) + ")";
}

void set_wakeup_fd(int fd) { g_wakeup_write_fd = fd; }
int last_stop_signal() { return g_stop_signal; }
sig_atomic_t stop_signal_count() { return g_stop_signal_count; }
void reset_stop_signals() {
  g_stop_signal = 0;
  g_stop_signal_count = 0;
}

SignalScope::SignalScope() {
  install(SIGINT, on_stop_signal, 0);
  install(SIGTERM, on_stop_signal, 1);
  install(SIGHUP, on_stop_signal, 2);
  install(SIGCHLD, on_child_signal, 3);
  install(SIGPIPE, SIG_IGN, 4);  // a closed stdout must not kill the supervisor; ranks get SIG_DFL back
}

SignalScope::~SignalScope() {
  const int numbers[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
  for (int i = 0; i < 5; ++i) sigaction(numbers[i], &previous_[i], nullptr);
}

void SignalScope::install(int signal_number, void (*handler)(int), int slot) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(signal_number, &action, &previous_[slot]);
}

}  // namespace dtlab::launch_internal
