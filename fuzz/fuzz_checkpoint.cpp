// qkv checkpoints (header, CRC, LibTorch archive): loaded into a small
// model, and their config read. With QKV_FUZZ_SEED_DIR set, first writes a
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

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  torch::set_num_threads(1);
  if (const char* dir = std::getenv("QKV_FUZZ_SEED_DIR")) {
    qkv::train::TrainState s;
    s.epoch = 2;
    s.run_config = {{"model", {{"name", "fuzz"}}}};
    qkv::train::save_checkpoint(std::string(dir) + "/seed.ckpt", *model(), nullptr, s);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = qkv::fuzz::scratch_path("input", ".ckpt");
  qkv::fuzz::write_input(path, data, size);
  qkv::fuzz::expect_documented([&] { qkv::train::load_checkpoint(path, *model(), nullptr); });
  qkv::fuzz::expect_documented([&] { qkv::train::read_checkpoint_config(path); });
  // The same bytes with the header's length and CRC made to match: random
  // mutations almost never keep the CRC right, and a crafted file does, so
  // this is how the payload (LibTorch's archive and unpickler) gets fuzzed.
  constexpr size_t kHeader = 24, kMagic = 8;
  if (size >= kHeader && std::memcmp(data, "QKVCKPT1", kMagic) == 0) {
    std::vector<uint8_t> fixed(data, data + size);
    const uint64_t length = size - kHeader;
    std::memcpy(fixed.data() + 8, &length, 8);
    const uint32_t crc = qkv::crc32(fixed.data() + kHeader, length);
    std::memcpy(fixed.data() + 16, &crc, 4);
    qkv::fuzz::write_input(path, fixed.data(), fixed.size());
    qkv::fuzz::expect_documented([&] { qkv::train::load_checkpoint(path, *model(), nullptr); });
    qkv::fuzz::expect_documented([&] { qkv::train::read_checkpoint_config(path); });
  }
  return 0;
}
