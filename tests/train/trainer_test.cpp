// The trainer on a tiny model: it learns, it resumes bit-exactly, and its run
// folder holds what the README promises.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "qkv/core/errors.h"
#include "qkv/core/text.h"
#include "qkv/data/spirals.h"
#include "qkv/models/mlp.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/trainer.h"
#include "support/test_files.h"

namespace fs = std::filesystem;
using namespace qkv;
using qkv::testing::fresh_dir;

namespace {

data::Splits spirals(uint64_t seed = 1) {
  data::SpiralsOptions o;
  o.points_per_class = 200;
  return data::random_split(data::make_spirals(o, seed), 0.2, 0.2, seed);
}

train::TrainConfig small_config(int64_t epochs) {
  train::TrainConfig c;
  c.epochs = epochs;
  c.batch_size = 32;
  c.optim.lr = 1e-2;
  c.seed = 3;
  return c;
}

models::ModelPtr make_mlp(double dropout = 0.0) {
  models::MLPOptions o;
  o.dropout = dropout;
  torch::manual_seed(7);
  return std::make_shared<models::MLP>(o);
}

train::TrainHooks quiet() {
  train::TrainHooks h;
  h.quiet = true;
  return h;
}

std::vector<at::Tensor> weights_of(const std::string& checkpoint) {
  auto model = make_mlp(0.1);
  train::load_checkpoint(checkpoint, *model, nullptr);
  std::vector<at::Tensor> out;
  for (const auto& p : model->parameters()) out.push_back(p.detach().clone());
  return out;
}

}  // namespace

TEST(Trainer, TinyModelLearnsSpirals) {
  const auto dir = fresh_dir("learns");
  auto model = make_mlp();
  auto result = train::train(*model, spirals(), small_config(30), torch::kCPU, dir, {{"test", true}}, false, quiet());
  ASSERT_FALSE(result.interrupted);
  // Chance is 1/3 accuracy and ln 3 = 1.10 loss: a model that learns gets far below.
  EXPECT_LT(result.summary.at("final_train_loss").get<double>(), 0.15);
  EXPECT_GT(result.summary.at("test").at("accuracy").get<double>(), 0.95);
  EXPECT_EQ(result.summary.at("selected_by"), "val_accuracy (max)");
}

TEST(Trainer, RunFolderHoldsConfigMetricsSummaryCheckpointsAndReport) {
  const auto dir = fresh_dir("files");
  auto model = make_mlp();
  train::train(*model, spirals(), small_config(3), torch::kCPU, dir, {{"marker", 42}}, false, quiet());
  for (const char* f : {"config.json", "metrics.jsonl", "summary.json", "report.html", "checkpoints/last.ckpt",
                        "checkpoints/best.ckpt"})
    EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  std::ifstream config(dir + "/config.json");
  EXPECT_EQ(nlohmann::json::parse(config).at("marker"), 42);
  std::ifstream metrics(dir + "/metrics.jsonl");
  std::string line;
  int epochs = 0;
  while (std::getline(metrics, line)) {
    auto row = nlohmann::json::parse(line);
    EXPECT_EQ(row.at("epoch"), ++epochs);
    for (const char* k : {"lr", "train_loss", "train_accuracy", "val_loss", "val_accuracy"})
      EXPECT_TRUE(row.contains(k)) << k;
  }
  EXPECT_EQ(epochs, 3);
  EXPECT_EQ(train::read_checkpoint_config(dir + "/checkpoints/last.ckpt").at("marker"), 42);
}

TEST(Trainer, ResumeAfterInterruptionEqualsUninterruptedRun) {
  at::set_num_threads(1);
  // Dropout makes the run depend on the RNG state too, which the checkpoint must carry.
  const auto straight = fresh_dir("straight");
  {
    auto model = make_mlp(0.1);
    train::train(*model, spirals(), small_config(4), torch::kCPU, straight, {}, false, quiet());
  }
  const auto broken = fresh_dir("broken");
  {
    auto model = make_mlp(0.1);
    auto hooks = quiet();
    hooks.stop_after_steps = 17;  // mid-epoch 2 (11 batches per epoch)
    auto r = train::train(*model, spirals(), small_config(4), torch::kCPU, broken, {}, false, hooks);
    ASSERT_TRUE(r.interrupted);
  }
  {
    // Mess with the global RNG in between, as a new process would.
    torch::manual_seed(12345);
    auto model = make_mlp(0.1);
    auto r = train::train(*model, spirals(), small_config(4), torch::kCPU, broken, {}, true, quiet());
    ASSERT_FALSE(r.interrupted);
  }
  auto a = weights_of(straight + "/checkpoints/last.ckpt");
  auto b = weights_of(broken + "/checkpoints/last.ckpt");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
  std::ifstream m1(straight + "/metrics.jsonl"), m2(broken + "/metrics.jsonl");
  std::string l1, l2;
  while (std::getline(m1, l1)) {
    ASSERT_TRUE(std::getline(m2, l2));
    auto r1 = nlohmann::json::parse(l1), r2 = nlohmann::json::parse(l2);
    EXPECT_DOUBLE_EQ(r1.at("train_loss").get<double>(), r2.at("train_loss").get<double>());
    EXPECT_DOUBLE_EQ(r1.at("val_loss").get<double>(), r2.at("val_loss").get<double>());
  }
  EXPECT_FALSE(std::getline(m2, l2));
}

TEST(Trainer, NaNInputIsAClearError) {
  auto x = torch::randn({64, 2});
  x[5][1] = std::numeric_limits<float>::quiet_NaN();
  auto all = std::make_shared<data::TensorDataset>(std::map<std::string, at::Tensor>{{"x", x}},
                                                   torch::randint(0, 3, {64}, torch::kLong));
  data::Splits s{all, std::make_shared<data::SubsetDataset>(all, std::vector<int64_t>{}),
                 std::make_shared<data::SubsetDataset>(all, std::vector<int64_t>{})};
  auto model = make_mlp();
  try {
    train::train(*model, s, small_config(1), torch::kCPU, fresh_dir("nan"), {}, false, quiet());
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("NaN"), std::string::npos) << e.what();
  }
}

// An MLP whose forward in training (or in eval mode) runs out of GPU memory at
// one call, as LibTorch's CUDA allocator would (its message, as c10::Error).
class OutOfMemoryAt : public models::MLP {
 public:
  OutOfMemoryAt(int64_t call, const models::MLPOptions& o, bool in_training = true)
      : models::MLP(o), fail_at_(call), in_training_(in_training) {}
  at::Tensor forward(const data::Batch& batch) override {
    if (is_training() == in_training_ && ++calls_ == fail_at_)
      TORCH_CHECK(false,
                  "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of "
                  "which 1.06 GiB is free.\nIf reserved but unallocated memory is large ...");
    return models::MLP::forward(batch);
  }

 private:
  int64_t fail_at_, calls_ = 0;
  bool in_training_;
};

TEST(Trainer, OutOfGpuMemoryIsOneLineNamingTheBatchSizeAndResumeContinues) {
  const auto dir = fresh_dir("oom");
  torch::manual_seed(7);
  OutOfMemoryAt model(11 + 5, models::MLPOptions{});  // step 5 of epoch 2 (11 batches an epoch)
  try {
    train::train(model, spirals(), small_config(3), torch::kCPU, dir, {}, false, quiet());
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("out of GPU memory in training step 5 of epoch 2 at batch size 32 (LibTorch could not "
                         "allocate 2.00 GiB on cuda:0; a smaller {batch_size} may fit; checkpoints written so far "
                         "are intact",
                         0),
              0u)
        << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  // Epoch 1's checkpoint is intact, and --resume finishes the run from it.
  EXPECT_EQ(train::read_checkpoint_state(dir + "/checkpoints/last.ckpt").epoch, 1);
  auto healthy = make_mlp();
  const auto r = train::train(*healthy, spirals(), small_config(3), torch::kCPU, dir, {}, true, quiet());
  EXPECT_FALSE(r.interrupted);
  EXPECT_EQ(train::read_checkpoint_state(dir + "/checkpoints/last.ckpt").epoch, 3);
}

TEST(Trainer, OutOfGpuMemoryInEvaluationNamesTheBatchAndItsSize) {
  torch::manual_seed(7);
  const auto splits = spirals();
  OutOfMemoryAt model(2, models::MLPOptions{}, /*in_training=*/false);
  const int64_t n = splits.test->size(), batches = (n + 4) / 5;
  ASSERT_GE(batches, 2);
  try {
    train::evaluate(model, *splits.test, 5, torch::kCPU);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    // {eval_batch_size}: the front end names it --eval-batch-size (train and eval alike).
    EXPECT_EQ(std::string(e.what()), "out of GPU memory evaluating batch 2 of " + std::to_string(batches) +
                                         " at batch size 5 (LibTorch could not allocate 2.00 GiB on cuda:0; a "
                                         "smaller {eval_batch_size} may fit)");
  }
  // Any other error passes unchanged.
  struct Broken : models::MLP {
    Broken() : models::MLP(models::MLPOptions{}) {}
    at::Tensor forward(const data::Batch&) override { TORCH_CHECK(false, "shape mismatch"); }
  } broken;
  try {
    train::evaluate(broken, *splits.test, 5, torch::kCPU);
    FAIL() << "expected c10::Error";
  } catch (const c10::Error& e) {
    EXPECT_EQ(qkv::first_line(e.what_without_backtrace()), "shape mismatch");
  }
}

TEST(Trainer, BadConfigIsAUsageErrorNamingTheOption) {
  // The library names the setting's key; the CLI reports it as the flag.
  auto c = small_config(0);
  try {
    c.validate();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key, "epochs");
    EXPECT_NE(std::string(e.what()).find("epochs must be at least 1"), std::string::npos) << e.what();
  }
  c = small_config(1);
  c.optim.optimizer = "adagrad";
  EXPECT_THROW(c.validate(), UsageError);
  c = small_config(1);
  c.select_metric = "f1";
  auto model = make_mlp();
  try {
    train::train(*model, spirals(), c, torch::kCPU, fresh_dir("metric"), {}, false, quiet());
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("select_metric"), std::string::npos);
  }
}

TEST(Trainer, SelectionIgnoresTestData) {
  // A test split full of one label the model never sees during selection:
  // selection must still be on validation data, so the chosen epoch does not
  // change when the test data change.
  auto base = spirals(2);
  auto run = [&](data::DatasetPtr test, const std::string& name) {
    auto model = make_mlp();
    data::Splits s{base.train, base.val, test};
    return train::train(*model, s, small_config(5), torch::kCPU, fresh_dir(name), {}, false, quiet()).summary;
  };
  auto a = run(base.test, "sel_a");
  auto b = run(base.train, "sel_b");
  EXPECT_EQ(a.at("selected_epoch"), b.at("selected_epoch"));
  EXPECT_EQ(a.at("val"), b.at("val"));
}

TEST(EpochLine, AWideLineWrapsBeforeTheValidationMetrics) {
  nlohmann::json row = {{"epoch", 3},           {"lr", 0.001},      {"train_loss", 0.5},
                        {"val_accuracy", 0.75}, {"val_shapes", 40}, {"seconds", 1.25}};
  const auto short_line = qkv::train::epoch_line_text(row, 20);
  EXPECT_EQ(short_line, "epoch 3/20 lr 0.001 train_loss 0.5000 val_accuracy 0.7500 val_shapes 40 (1.2 s)");
  for (const char* key :
       {"train_class_miou", "train_instance_miou", "train_accuracy", "val_class_miou", "val_instance_miou", "val_loss"})
    row[key] = 0.123456;
  const auto text = qkv::train::epoch_line_text(row, 20);
  const auto newline = text.find('\n');
  ASSERT_NE(newline, std::string::npos) << text;
  EXPECT_EQ(text.find('\n', newline + 1), std::string::npos);
  EXPECT_LE(newline, 150u);
  EXPECT_LE(text.size() - newline - 1, 150u);
  EXPECT_EQ(text.compare(newline, 9, "\n    val_"), 0) << text;
  EXPECT_NE(text.find("(1.2 s)"), std::string::npos);
}
