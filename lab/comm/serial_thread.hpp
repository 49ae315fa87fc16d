// serial_thread.hpp: one worker thread that runs posted tasks one at a time, in the order they were posted.
//
// Collectives must be issued in the same order on every rank; a task queue per communicator keeps that order while
// the caller goes on (Comm's ring thread, the hierarchical collectives' level chains). On destruction the task in
// progress finishes (a collective blocked on a dead peer ends at the backend's timeout); tasks not started are
// dropped, with whatever promises they hold (nobody is left to wait for them).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace dtlab {

class SerialThread {
 public:
  SerialThread() : thread_([this] { run(); }) {}
  ~SerialThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  SerialThread(const SerialThread&) = delete;
  SerialThread& operator=(const SerialThread&) = delete;

  void post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    wake_.notify_one();
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        if (stopping_) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace dtlab
