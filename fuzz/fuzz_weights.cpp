// --init-weights files (torch.save / torch::pickle_save of a dict of
// tensors), loaded into a small model. With QKV_FUZZ_SEED_DIR set, first
// writes that model's own export there as a seed.
#include <torch/torch.h>

#include <cstdlib>

#include "fuzz/fuzz_input.h"
#include "qkv/train/weights.h"

namespace {

torch::nn::Sequential& model() {
  static torch::nn::Sequential m(torch::nn::Linear(3, 4), torch::nn::Linear(4, 2));
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  torch::set_num_threads(1);
  if (const char* dir = std::getenv("QKV_FUZZ_SEED_DIR"))
    qkv::train::export_weights(*model(), std::string(dir) + "/seed.pt");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = qkv::fuzz::scratch_path("input", ".pt");
  qkv::fuzz::write_input(path, data, size);
  qkv::fuzz::expect_documented([&] { qkv::train::load_weights(*model(), path); });
  return 0;
}
