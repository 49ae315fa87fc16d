// tsan_torch_snapshot.cpp: ThreadSanitizer probe of the async checkpoint's pattern (lab/train/train_checkpoint.cpp)
// against the uninstrumented LibTorch wheel (cmake/sanitizers/tsan_probe.sh): the main thread clones the state into
// a snapshot, a background thread reads every snapshot tensor and frees them while the main thread goes on with
// LibTorch's own multi-threaded CPU ops, then joins. Shows whether TSan can run dtlab's threads over LibTorch here.
#include <cstdio>
#include <thread>
#include <vector>

#include <torch/torch.h>

int main() {
  at::Tensor weights = torch::randn({256, 256});
  std::vector<at::Tensor> snapshot;
  for (int i = 0; i < 4; ++i) snapshot.push_back(weights.clone());
  double written = 0;
  std::thread background([&snapshot, &written] {
    for (const at::Tensor& t : snapshot) written += t.sum().item<double>();
    snapshot.clear();  // the snapshot's memory is freed on the background thread, as in the saver
  });
  for (int step = 0; step < 20; ++step) weights = torch::mm(weights, weights).tanh();
  background.join();
  std::printf("tsan_torch_snapshot: snapshot sum %.3f, %d intra-op threads\n", written, at::get_num_threads());
  return 0;
}
