#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/models/mlp.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/weights.h"
#include "support/test_files.h"

namespace fs = std::filesystem;
using namespace qkv;
using qkv::testing::temp_path;

namespace {

std::shared_ptr<models::MLP> mlp(int64_t hidden = 16) {
  models::MLPOptions o;
  o.hidden = hidden;
  return std::make_shared<models::MLP>(o);
}

}  // namespace

TEST(Checkpoint, RoundTripRestoresWeightsOptimizerRngAndState) {
  auto a = mlp();
  torch::optim::Adam opt(a->parameters(), 1e-3);
  // One step so Adam has moment buffers to save.
  a->forward(data::Batch{{{"x", torch::randn({4, 2})}}, torch::zeros({4}, torch::kLong)}).sum().backward();
  opt.step();
  train::TrainState s;
  s.epoch = 3;
  s.step_in_epoch = 5;
  s.best_epoch = 2;
  s.best_value = 0.75;
  s.history = nlohmann::json::array({{{"epoch", 1}}, {{"epoch", 2}}});
  s.run_config = {{"model", {{"name", "mlp"}}}};
  const auto path = temp_path("round.ckpt");
  torch::manual_seed(99);
  train::save_checkpoint(path, *a, &opt, s);
  const auto expected_draw = torch::rand({3});

  auto b = mlp();
  torch::optim::Adam opt_b(b->parameters(), 1e-3);
  torch::manual_seed(1);
  auto r = train::load_checkpoint(path, *b, &opt_b);
  EXPECT_TRUE(torch::equal(torch::rand({3}), expected_draw)) << "RNG state not restored";
  EXPECT_EQ(r.epoch, 3);
  EXPECT_EQ(r.step_in_epoch, 5);
  EXPECT_EQ(r.best_epoch, 2);
  EXPECT_DOUBLE_EQ(r.best_value, 0.75);
  EXPECT_EQ(r.history.size(), 2u);
  EXPECT_EQ(r.run_config.at("model").at("name"), "mlp");
  auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i]));
  // The optimizer state came along: the same gradient gives the same update.
  for (auto* m : {static_cast<models::MLP*>(a.get()), static_cast<models::MLP*>(b.get())}) {
    m->zero_grad();
    m->forward(data::Batch{{{"x", torch::ones({4, 2})}}, torch::zeros({4}, torch::kLong)}).sum().backward();
  }
  opt.step();
  opt_b.step();
  pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::allclose(pa[i], pb[i]));
}

TEST(Checkpoint, TruncatedFileIsRejectedWithItsName) {
  auto m = mlp();
  const auto path = temp_path("trunc.ckpt");
  train::save_checkpoint(path, *m, nullptr, {});
  const auto size = fs::file_size(path);
  for (uintmax_t keep : {uintmax_t{0}, uintmax_t{10}, size / 2, size - 1}) {
    fs::resize_file(path, keep);
    const auto msg = qkv::testing::data_error_of([&] { train::load_checkpoint(path, *m, nullptr); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_TRUE(msg.find("truncated") != std::string::npos || msg.find("bad header") != std::string::npos) << msg;
    train::save_checkpoint(path, *m, nullptr, {});
  }
}

TEST(Checkpoint, FlippedByteIsRejected) {
  auto m = mlp();
  const auto path = temp_path("flip.ckpt");
  train::save_checkpoint(path, *m, nullptr, {});
  auto bytes = read_file_bytes(path);
  bytes[bytes.size() / 2] ^= 0x40;
  write_file_atomic(path, bytes);
  const auto msg = qkv::testing::data_error_of([&] { train::load_checkpoint(path, *m, nullptr); });
  EXPECT_NE(msg.find("corrupt"), std::string::npos) << msg;
}

TEST(Checkpoint, OtherFilesAndOtherModelsAreRejected) {
  const auto junk = temp_path("junk.ckpt");
  write_file_atomic(junk, std::string("this is not a checkpoint at all"));
  auto m = mlp();
  EXPECT_NE(qkv::testing::data_error_of([&] { train::load_checkpoint(junk, *m, nullptr); }).find("not a qkv checkpoint"),
            std::string::npos);
  EXPECT_NE(qkv::testing::data_error_of([&] { train::load_checkpoint(temp_path("missing.ckpt"), *m, nullptr); }).find("missing.ckpt"),
            std::string::npos);
  const auto small = temp_path("small.ckpt");
  train::save_checkpoint(small, *mlp(8), nullptr, {});
  auto big = mlp(16);
  // A different architecture must not load silently.
  models::MLPOptions deeper;
  deeper.layers = 3;
  auto other = std::make_shared<models::MLP>(deeper);
  EXPECT_NE(qkv::testing::data_error_of([&] { train::load_checkpoint(small, *other, nullptr); }).find("does not fit"), std::string::npos);
}

// fuzz_checkpoint (with the CRC made to match, as a crafted file would): a
// damaged TorchScript type name made LibTorch's parser throw a standard
// exception, which left the file unnamed (and ended the fuzzer); it is a
// DataError naming the file now, from load and from the config reader.
TEST(Checkpoint, FuzzFindingsStayFixed) {
  const std::string path = std::string(QKV_SOURCE_DIR) +
                           "/fuzz/regressions/checkpoint/crash-ac37314e5b59de7eeaba055d2069597387b4ded8-crc-fixed";
  auto m = mlp();
  qkv::testing::expect_data_error([&] { train::load_checkpoint(path, *m, nullptr); }, path, "unreadable");
  qkv::testing::expect_data_error([&] { train::read_checkpoint_config(path); }, path, "unreadable");
}

TEST(Weights, ExportImportRoundTrip) {
  auto a = mlp();
  const auto path = temp_path("w.pt");
  train::export_weights(*a, path);
  auto b = mlp();
  train::load_weights(*b, path);
  auto pa = a->named_parameters(), pb = b->named_parameters();
  for (const auto& p : pa) EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
  // The file is a plain pickled dict: read it back without the model.
  auto dict = torch::pickle_load(read_file_bytes(path)).toGenericDict();
  EXPECT_EQ(static_cast<size_t>(dict.size()), pa.size());
  EXPECT_TRUE(dict.contains(c10::IValue(std::string("net.0.weight"))));
}

TEST(Weights, MismatchesAreReportedByName) {
  const auto path = temp_path("w16.pt");
  train::export_weights(*mlp(16), path);
  auto narrow = mlp(8);
  const auto msg = qkv::testing::data_error_of([&] { train::load_weights(*narrow, path); });
  EXPECT_NE(msg.find("shape mismatch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("net.0.weight [16, 2] vs model [8, 2]"), std::string::npos) << msg;
  models::MLPOptions deeper;
  deeper.hidden = 16;
  deeper.layers = 3;
  models::MLP deep(deeper);
  const auto msg2 = qkv::testing::data_error_of([&] { train::load_weights(deep, path); });
  EXPECT_NE(msg2.find("missing net.6.bias, net.6.weight;"), std::string::npos) << msg2;
  const auto junk = temp_path("junk.pt");
  write_file_atomic(junk, std::string("nope"));
  EXPECT_NE(qkv::testing::data_error_of([&] { train::load_weights(deep, junk); }).find(junk), std::string::npos);
}
