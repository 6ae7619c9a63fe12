// qkv checkpoints (header, CRC, a torch.save zip of name -> tensor): loaded
// into a small model, with and without its Adam optimizer, and their config
// read. With QKV_FUZZ_SEED_DIR set, first writes a
// valid checkpoint there as a seed (scripts/fuzz-all does).
#include <torch/torch.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "qkv/core/crc32.h"
#include "qkv/train/checkpoint.h"

namespace {

torch::nn::Sequential& model() {
  static torch::nn::Sequential m(torch::nn::Linear(3, 4), torch::nn::BatchNorm1d(4), torch::nn::Linear(4, 2));
  return m;
}

torch::optim::Adam& optimizer() {
  static torch::optim::Adam adam(model()->parameters(), 1e-3);
  return adam;
}

void load_all_ways(const std::string& path) {
  qkv::fuzz::expect_documented([&] { qkv::train::load_checkpoint(path, *model(), nullptr); });
  qkv::fuzz::expect_documented([&] { qkv::train::load_checkpoint(path, *model(), &optimizer()); });
  qkv::fuzz::expect_documented([&] { qkv::train::read_checkpoint_config(path); });
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  torch::set_num_threads(1);
  if (const char* dir = std::getenv("QKV_FUZZ_SEED_DIR")) {
    qkv::train::TrainState s;
    s.epoch = 2;
    s.run_config = {{"model", {{"name", "fuzz"}}}};
    qkv::train::save_checkpoint(std::string(dir) + "/seed.ckpt", *model(), nullptr, s);
    // With Adam's state: one step on a batch.
    model()->train();
    model()->forward(torch::randn({4, 3})).sum().backward();
    optimizer().step();
    qkv::train::save_checkpoint(std::string(dir) + "/seed-adam.ckpt", *model(), &optimizer(), s);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = qkv::fuzz::scratch_path("input", ".ckpt");
  qkv::fuzz::write_input(path, data, size);
  load_all_ways(path);
  // The same bytes with the header's length and CRC made to match: random
  // mutations almost never keep the CRC right, and a crafted file does, so
  // this is how the payload (LibTorch's unpickler behind qkv's checks) gets
  // fuzzed. Format 1 is refused unread (QKV_READ_FORMAT1_CHECKPOINTS unset).
  constexpr size_t kHeader = 24, kMagic = 8;
  if (size >= kHeader && std::memcmp(data, "QKVCKPT2", kMagic) == 0) {
    std::vector<uint8_t> fixed(data, data + size);
    const uint64_t length = size - kHeader;
    std::memcpy(fixed.data() + 8, &length, 8);
    const uint32_t crc = qkv::crc32(fixed.data() + kHeader, length);
    std::memcpy(fixed.data() + 16, &crc, 4);
    qkv::fuzz::write_input(path, fixed.data(), fixed.size());
    load_all_ways(path);
  }
  return 0;
}
