#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "qkv/core/atomic_file.h"
#include "qkv/core/crc32.h"
#include "qkv/core/errors.h"
#include "qkv/models/mlp.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/weights.h"
#include "support/paths.h"
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

TEST(Checkpoint, ADivergedRunsNaNStateIsReadBackAsNaN) {
  // JSON writes NaN as null: a run whose loss went NaN must still resume and
  // be read (its best value and loss sum come back NaN, not an error).
  auto a = mlp();
  train::TrainState s;
  s.epoch = 1;
  s.best_epoch = 1;
  s.best_value = std::numeric_limits<double>::quiet_NaN();
  s.partial_loss_sum = std::numeric_limits<double>::quiet_NaN();
  s.history = nlohmann::json::array({{{"epoch", 1}, {"val_loss", std::numeric_limits<double>::quiet_NaN()}}});
  s.run_config = {{"model", {{"name", "mlp"}}}};
  const auto path = temp_path("nan_state.ckpt");
  train::save_checkpoint(path, *a, nullptr, s);
  const auto r = train::read_checkpoint_state(path);
  EXPECT_EQ(r.best_epoch, 1);
  EXPECT_TRUE(std::isnan(r.best_value));
  EXPECT_TRUE(std::isnan(r.partial_loss_sum));
  EXPECT_TRUE(r.history.at(0).at("val_loss").is_null());
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
  EXPECT_NE(
      qkv::testing::data_error_of([&] { train::load_checkpoint(junk, *m, nullptr); }).find("not a qkv checkpoint"),
      std::string::npos);
  EXPECT_NE(qkv::testing::data_error_of([&] {
              train::load_checkpoint(temp_path("missing.ckpt"), *m, nullptr);
            }).find("missing.ckpt"),
            std::string::npos);
  const auto small = temp_path("small.ckpt");
  train::save_checkpoint(small, *mlp(8), nullptr, {});
  auto big = mlp(16);
  // A different architecture must not load silently.
  models::MLPOptions deeper;
  deeper.layers = 3;
  auto other = std::make_shared<models::MLP>(deeper);
  EXPECT_NE(qkv::testing::data_error_of([&] { train::load_checkpoint(small, *other, nullptr); }).find("does not fit"),
            std::string::npos);
}

namespace {

// A checkpoint file around any payload: header with a matching length and
// CRC, as a crafted file would have.
void write_checkpoint_file(const std::string& path, const char* magic, const std::vector<char>& payload) {
  std::vector<char> file(24 + payload.size(), 0);
  const uint64_t length = payload.size();
  const uint32_t crc = qkv::crc32(payload.data(), payload.size());
  std::memcpy(file.data(), magic, 8);
  std::memcpy(file.data() + 8, &length, 8);
  std::memcpy(file.data() + 16, &crc, 4);
  if (!payload.empty()) std::memcpy(file.data() + 24, payload.data(), payload.size());
  write_file_atomic(path, file);
}

std::map<std::string, at::Tensor> entries_of(const std::string& path) {
  const auto bytes = read_file_bytes(path);
  return train::read_tensor_dict(std::vector<char>(bytes.begin() + 24, bytes.end()), path, "checkpoint");
}

// One step of `make` on a fresh model, saved; the same state loaded into a
// second model and optimizer must give the same next step.
template <typename MakeOptimizer>
void expect_optimizer_round_trip(MakeOptimizer make, const std::string& name) {
  auto a = mlp(), b = mlp();
  auto opt_a = make(a->parameters());
  auto opt_b = make(b->parameters());
  auto step = [](models::MLP& m, torch::optim::Optimizer& o, float x) {
    m.zero_grad();
    m.forward(data::Batch{{{"x", torch::full({4, 2}, x)}}, torch::zeros({4}, torch::kLong)}).sum().backward();
    o.step();
  };
  step(*a, *opt_a, 1.0f);
  const auto path = temp_path(name + ".ckpt");
  train::save_checkpoint(path, *a, opt_a.get(), {});
  train::load_checkpoint(path, *b, opt_b.get());
  step(*a, *opt_a, -2.0f);
  step(*b, *opt_b, -2.0f);
  auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::allclose(pa[i], pb[i], 1e-6, 1e-7)) << name << " " << i;
}

}  // namespace

TEST(Checkpoint, SgdMomentumAndAdamWStateRoundTrip) {
  expect_optimizer_round_trip(
      [](std::vector<at::Tensor> p) {
        return std::make_unique<torch::optim::SGD>(p, torch::optim::SGDOptions(0.1).momentum(0.9));
      },
      "sgd");
  expect_optimizer_round_trip(
      [](std::vector<at::Tensor> p) {
        return std::make_unique<torch::optim::AdamW>(p, torch::optim::AdamWOptions(0.01).amsgrad(true));
      },
      "adamw");
}

// A crafted format-2 file with a valid CRC: every entry is checked before
// the model, the optimizer or the RNG change.
TEST(Checkpoint, DamagedEntriesAreRefusedBeforeAnythingChanges) {
  auto a = mlp();
  torch::optim::Adam opt(a->parameters(), 1e-3);
  a->forward(data::Batch{{{"x", torch::randn({4, 2})}}, torch::zeros({4}, torch::kLong)}).sum().backward();
  opt.step();
  const auto good = temp_path("good.ckpt");
  train::save_checkpoint(good, *a, &opt, {});
  const auto entries = entries_of(good);
  ASSERT_TRUE(entries.count("optimizer/0/0/exp_avg"));
  ASSERT_TRUE(entries.count("model/net.0.weight"));

  const auto bad = temp_path("bad.ckpt");
  auto expect_refused = [&](std::map<std::string, at::Tensor> changed, const std::string& words) {
    write_checkpoint_file(bad, "QKVCKPT2", train::tensor_dict_bytes(changed));
    auto b = mlp();
    torch::optim::Adam opt_b(b->parameters(), 1e-3);
    const auto before = b->parameters()[0].clone();
    qkv::testing::expect_data_error([&] { train::load_checkpoint(bad, *b, &opt_b); }, bad, words);
    EXPECT_TRUE(torch::equal(b->parameters()[0], before)) << words;
    EXPECT_TRUE(opt_b.state().empty()) << words;
  };
  auto changed = entries;
  changed["optimizer/0/0/exp_avg"] = torch::zeros({3, 3});
  expect_refused(changed, "'optimizer/0/0/exp_avg' is [3, 3]");
  changed = entries;
  changed["optimizer/0/999/exp_avg"] = torch::zeros({1});
  expect_refused(changed, "names no parameter of this model ('optimizer/0/999/exp_avg')");
  changed = entries;
  changed["optimizer/0/x/step"] = torch::zeros({1});
  expect_refused(changed, "names no parameter");
  changed = entries;
  changed["optimizer/0/0/exp_avg"] = entries.at("optimizer/0/0/exp_avg").to(torch::kLong);
  expect_refused(changed, "'optimizer/0/0/exp_avg' is not floating point");
  changed = entries;
  changed["optimizer/0/0/step"] = torch::tensor(-3, torch::kLong);
  expect_refused(changed, "step is not a step count");
  changed = entries;
  changed.erase("optimizer/0/0/exp_avg_sq");
  expect_refused(changed, "lacks optimizer/0/0/exp_avg_sq");
  changed = entries;
  changed["optimizer/kind"] = changed["config"].slice(0, 0, 0);
  expect_refused(changed, "checkpoint's optimizer is '', this run's is 'adam'");
  changed = entries;
  changed["state"] = torch::zeros({4});
  expect_refused(changed, "field 'state' is not text");
  changed = entries;
  changed["rng"] = torch::zeros({7}, torch::kUInt8);
  expect_refused(changed, "'rng' is [7] Byte, not this LibTorch's generator state");
  changed = entries;
  changed["model/net.0.weight"] = torch::zeros({5, 5});
  expect_refused(changed, "shape mismatch net.0.weight [5, 5]");

  // What a diverged run saved is refused by name, weights and optimizer
  // state alike; restored as it was only when asked (the trainer's own
  // reload, --allow-non-finite).
  changed = entries;
  changed["model/net.0.weight"] = entries.at("model/net.0.weight").clone().fill_(INFINITY);
  expect_refused(changed, "'model/net.0.weight' holds 32 NaN or infinite values");
  changed = entries;
  changed["optimizer/0/0/exp_avg_sq"] = entries.at("optimizer/0/0/exp_avg_sq").clone().fill_(NAN);
  expect_refused(changed, "'optimizer/0/0/exp_avg_sq' holds 32 NaN or infinite values");
  changed = entries;
  changed["model/net.0.weight"] = entries.at("model/net.0.weight").clone().fill_(INFINITY);
  write_checkpoint_file(bad, "QKVCKPT2", train::tensor_dict_bytes(changed));
  {
    auto b = mlp();
    torch::optim::Adam opt_b(b->parameters(), 1e-3);
    train::load_checkpoint(bad, *b, &opt_b, /*accept_non_finite=*/true);
    EXPECT_TRUE(torch::isinf(b->named_parameters()["net.0.weight"]).all().item<bool>());
  }

  // A payload that is a valid zip but not a dict of tensors.
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert(std::string("state"), std::string("{}"));
  write_checkpoint_file(bad, "QKVCKPT2", torch::pickle_save(c10::IValue(dict)));
  auto m = mlp();
  qkv::testing::expect_data_error([&] { train::load_checkpoint(bad, *m, nullptr); }, bad,
                                  "not a qkv checkpoint (expected a dict of name -> tensor");
  // The wrong optimizer for the run.
  torch::optim::SGD sgd(m->parameters(), 0.1);
  qkv::testing::expect_data_error([&] { train::load_checkpoint(good, *m, &sgd); }, good,
                                  "checkpoint's optimizer is 'adam', this run's is 'sgd'");
}

// Format 1 (LibTorch's TorchScript archive, qkv before 2026-12-02) is read
// only when the user says the file is theirs.
TEST(Checkpoint, FormatOneIsReadOnlyWhenTheUserTrustsIt) {
  auto a = mlp();
  torch::serialize::OutputArchive root, model_archive;
  a->save(model_archive);
  root.write("model", model_archive);
  root.write("state", c10::IValue(std::string(R"({"epoch":4,"step_in_epoch":0,"global_step":8,"partial_loss_sum":0,)"
                                              R"("partial_count":0,"partial_correct":0,"partial_seconds":0,)"
                                              R"("best_epoch":3,"best_value":0.5,"train_seconds":1,"history":[]})")));
  root.write("config", c10::IValue(std::string(R"({"model":{"name":"mlp"}})")));
  std::ostringstream stream;
  root.save_to(stream);
  const std::string payload = stream.str();
  const auto path = temp_path("format1.ckpt");
  write_checkpoint_file(path, "QKVCKPT1", std::vector<char>(payload.begin(), payload.end()));

  auto b = mlp();
  ::unsetenv("QKV_READ_FORMAT1_CHECKPOINTS");
  qkv::testing::expect_data_error([&] { train::load_checkpoint(path, *b, nullptr); }, path, "format-1 qkv checkpoint");
  qkv::testing::expect_data_error([&] { train::read_checkpoint_config(path); }, path,
                                  "set QKV_READ_FORMAT1_CHECKPOINTS=1 to read it");
  ::setenv("QKV_READ_FORMAT1_CHECKPOINTS", "1", 1);
  const auto s = train::load_checkpoint(path, *b, nullptr);
  EXPECT_EQ(train::read_checkpoint_config(path).at("model").at("name"), "mlp");
  ::unsetenv("QKV_READ_FORMAT1_CHECKPOINTS");
  EXPECT_EQ(s.epoch, 4);
  EXPECT_EQ(s.best_epoch, 3);
  auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i]));
}

// fuzz_checkpoint (with the CRC made to match, as a crafted file would):
// - crash-ac37...: a damaged TorchScript type name made LibTorch's parser
//   throw a standard exception, which left the file unnamed; a DataError
//   naming the file now, from load and from the config reader;
// - crash-710b...: a segmentation fault inside LibTorch 1.13's TorchScript
//   importer (ScriptTypeParser::parseClassConstant). Both are format-1
//   payloads, which are refused by default; the first is also read with the
//   user's consent. The second is never read here: it still crashes LibTorch.
// - crash-adfc...: below.
TEST(Checkpoint, FuzzFindingsStayFixed) {
  const std::string dir = std::string(qkv::testing::source_dir()) + "/fuzz/regressions/checkpoint/";
  auto m = mlp();
  for (const std::string name : {"crash-ac37314e5b59de7eeaba055d2069597387b4ded8-crc-fixed",
                                 "crash-710bd12e3115238cc3b93480db2d70f7299ca578-crc-fixed"}) {
    const std::string path = dir + name;
    ::unsetenv("QKV_READ_FORMAT1_CHECKPOINTS");
    qkv::testing::expect_data_error([&] { train::load_checkpoint(path, *m, nullptr); }, path, "format-1");
    qkv::testing::expect_data_error([&] { train::read_checkpoint_config(path); }, path, "format-1");
  }
  const std::string path = dir + "crash-ac37314e5b59de7eeaba055d2069597387b4ded8-crc-fixed";
  ::setenv("QKV_READ_FORMAT1_CHECKPOINTS", "1", 1);
  qkv::testing::expect_data_error([&] { train::load_checkpoint(path, *m, nullptr); }, path, "unreadable");
  qkv::testing::expect_data_error([&] { train::read_checkpoint_config(path); }, path, "unreadable");
  ::unsetenv("QKV_READ_FORMAT1_CHECKPOINTS");
  // Format 2, crash-adfc...: a storage whose pickle declares 213 bytes over
  // an 8-byte record; LibTorch sized the storage by the pickle, and reading
  // the 'state' text overflowed the heap (ASan). Storages are now checked
  // against their records' sizes, for weights files too.
  const std::string oversized = dir + "crash-adfcd121a15d0b360608aaccf0a8c558d0a0e4e8-crc-fixed";
  qkv::testing::expect_data_error([&] { train::load_checkpoint(oversized, *m, nullptr); }, oversized,
                                  "reaches past the data stored for it");
  qkv::testing::expect_data_error([&] { train::read_checkpoint_config(oversized); }, oversized,
                                  "reaches past the data stored for it");
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
