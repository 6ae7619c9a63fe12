// --recipe end to end: what each recipe puts into config.json (optimizer,
// schedule, batch, smoothing, dropout, votes, up axis), that options given on
// the command line win, and the refusals; the up axis chosen per layout; the
// 1.37M preset.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "qkv/train/optim.h"
#include "qkv/train/trainer.h"
#include "support/cli_run.h"
#include "support/test_files.h"

namespace fs = std::filesystem;
using qkv::testing::expect_clean_failure;
using qkv::testing::read_json;
using qkv::testing::run_qkv;

namespace {

// A few small synthetic shapes: the recipes' sizes (batch 32, 1,024 points)
// would make a test run minutes long, so these options override them.
const std::string kSmallShapes =
    "--data synthetic --synth-classes box,sphere,torus --synth-train-per-class 12 --synth-test-per-class 2 "
    "--points-per-shape 128 --points 64 --epochs 1 --threads 1 --seed 1";

bool contains(const nlohmann::json& array, const std::string& value) {
  for (const auto& v : array)
    if (v == value) return true;
  return false;
}

}  // namespace

TEST(Recipe, VnnIsTheReferenceClassificationScript) {
  const std::string out = qkv::testing::fresh_dir("recipe_vnn");
  const auto r = run_qkv("vnt train --recipe vnn " + kSmallShapes + " --out " + out + "/run");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto config = read_json(out + "/run/config.json");
  EXPECT_EQ(config.at("model").at("name"), "vn-dgcnn");  // the recipe's model when --model is not given
  const auto& t = config.at("train");
  EXPECT_EQ(t.at("optimizer"), "sgd");
  EXPECT_DOUBLE_EQ(t.at("lr").get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(t.at("momentum").get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(t.at("weight_decay").get<double>(), 1e-4);
  EXPECT_EQ(t.at("batch_size"), 32);
  EXPECT_EQ(t.at("drop_last"), false);
  EXPECT_DOUBLE_EQ(t.at("label_smoothing").get<double>(), 0.2);
  EXPECT_EQ(t.at("label_smoothing_over"), "others");
  // StepLR(20, 0.7) stepped before each epoch: 0.1 until epoch 18, 0.07 from epoch 19 (0-based).
  const auto train = qkv::train::TrainConfig::from_json(t);
  const auto lr = [&](int64_t e) { return qkv::train::lr_at(train.optim, e, 250); };
  EXPECT_DOUBLE_EQ(lr(0), 0.1);
  EXPECT_DOUBLE_EQ(lr(18), 0.1);
  EXPECT_NEAR(lr(19), 0.07, 1e-15);
  EXPECT_NEAR(lr(20), 0.07, 1e-15);
  EXPECT_NEAR(lr(40), 0.049, 1e-15);
  const auto& d = config.at("data");
  EXPECT_EQ(d.at("sampling"), "first");
  EXPECT_DOUBLE_EQ(d.at("point_dropout").get<double>(), 0.875);
  EXPECT_EQ(d.at("votes"), 3);
  EXPECT_EQ(d.at("up_axis"), 2);  // pytorch3d's RotateAxisAngle(axis="Z")
  EXPECT_EQ(d.at("random_scale"), true);
  EXPECT_EQ(d.at("random_shift"), true);
  // The record says what the recipe set, from where, and what the command line kept.
  const auto& recipe = config.at("recipe");
  EXPECT_EQ(recipe.at("name"), "vnn");
  EXPECT_NE(recipe.at("set").at("lr").at("source").get<std::string>().find("train_cls.py"), std::string::npos);
  EXPECT_TRUE(contains(recipe.at("kept_from_command_line"), "points"));
  EXPECT_FALSE(recipe.at("set").contains("points"));
  EXPECT_EQ(d.at("points"), 64);
  // eval takes the run's votes by default and says so. (33 training shapes
  // in batches of 32 without --drop-last: the last batch of one is skipped,
  // so the head's batch norm keeps finite statistics and eval reads them.)
  const auto e = run_qkv("vnt eval --checkpoint " + out + "/run/checkpoints/best.ckpt --rotate z --threads 1");
  ASSERT_EQ(e.status, 0) << e.output;
  EXPECT_EQ(qkv::testing::trailing_json(e.output).at("votes"), 3) << e.output;
  fs::remove_all(out);
}

TEST(Recipe, GivenOptionsWinAndMismatchesAreRefused) {
  const std::string out = qkv::testing::fresh_dir("recipe_override");
  const auto r = run_qkv("vnt train --recipe vnn --lr 0.05 --votes 1 " + kSmallShapes + " --out " + out + "/run");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto config = read_json(out + "/run/config.json");
  EXPECT_DOUBLE_EQ(config.at("train").at("lr").get<double>(), 0.05);
  EXPECT_EQ(config.at("data").at("votes"), 1);
  EXPECT_EQ(config.at("train").at("optimizer"), "sgd");
  EXPECT_TRUE(contains(config.at("recipe").at("kept_from_command_line"), "lr"));
  // A recipe for another model, an unknown recipe, and a recipe on a resume.
  expect_clean_failure(run_qkv("vnt train --recipe vnn --model vnt --out " + out + "/x"), 2, "--recipe vnn");
  expect_clean_failure(run_qkv("vnt train --recipe vnm --out " + out + "/x"), 2, "vnt-paper, scanobjectnn, vnn");
  expect_clean_failure(run_qkv("seg train --recipe vnn --out " + out + "/x"), 2, "--recipe vnn");
  expect_clean_failure(run_qkv("vnt train --resume " + out + "/run --recipe vnn"), 2, "--recipe");
  EXPECT_FALSE(fs::exists(out + "/x"));
  fs::remove_all(out);
}

TEST(Recipe, OnlyCommandsWithRecipesOfferTheOption) {
  const auto lm = run_qkv("lm train --help");
  ASSERT_EQ(lm.status, 0) << lm.output;
  EXPECT_EQ(lm.output.find("--recipe"), std::string::npos) << lm.output;
  const auto vnt = run_qkv("vnt train --help");
  EXPECT_NE(vnt.output.find("(docs/reproduction.md):\n"), std::string::npos) << vnt.output;
  EXPECT_NE(vnt.output.find("vnt-paper:"), std::string::npos) << vnt.output;
  expect_clean_failure(run_qkv("spirals train --recipe x"), 2, "--recipe");
}

TEST(Recipe, VnnSegDecaysLearningRateAndBatchNormMomentum) {
  const std::string out = qkv::testing::fresh_dir("recipe_vnn_seg");
  const auto r = run_qkv(
      "seg train --recipe vnn-seg --data synthetic --synth-classes Table,Lamp --synth-train-per-class 8 "
      "--synth-val-per-class 2 --synth-test-per-class 2 --synth-points-per-shape 200 --points-per-shape 128 "
      "--points 64 --epochs 1 --threads 1 --out " +
      out + "/run");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto config = read_json(out + "/run/config.json");
  EXPECT_EQ(config.at("model").at("name"), "vn-dgcnn-seg");
  const auto t = qkv::train::TrainConfig::from_json(config.at("train"));
  EXPECT_EQ(t.optim.optimizer, "adam");
  EXPECT_EQ(t.batch_size, 16);
  EXPECT_DOUBLE_EQ(t.label_smoothing, 0.2);
  // lr 0.001 x 0.5^(epoch // 20), at least 1e-5; momentum 0.1 x 0.5^(epoch // 20), at least 0.01.
  const auto lr = [&](int64_t e) { return qkv::train::lr_at(t.optim, e, 250); };
  EXPECT_DOUBLE_EQ(lr(0), 1e-3);
  EXPECT_DOUBLE_EQ(lr(19), 1e-3);
  EXPECT_DOUBLE_EQ(lr(20), 5e-4);
  EXPECT_DOUBLE_EQ(lr(40), 2.5e-4);
  EXPECT_DOUBLE_EQ(lr(240), 1e-5);  // 0.001 x 0.5^12 = 2.4e-7, floored
  EXPECT_DOUBLE_EQ(qkv::train::batch_norm_momentum_at(t, 0), 0.1);
  EXPECT_DOUBLE_EQ(qkv::train::batch_norm_momentum_at(t, 20), 0.05);
  EXPECT_DOUBLE_EQ(qkv::train::batch_norm_momentum_at(t, 40), 0.025);
  EXPECT_DOUBLE_EQ(qkv::train::batch_norm_momentum_at(t, 100), 0.01);  // 0.003125, floored
  EXPECT_EQ(config.at("data").at("up_axis"), 2);
  fs::remove_all(out);
}

TEST(UpAxis, ChosenFromTheLayoutAndPrinted) {
  const std::string out = qkv::testing::fresh_dir("up_axis");
  // The synthetic shapes stand on y.
  auto r = run_qkv("vnt train " + kSmallShapes + " --model vn-dgcnn --batch-size 8 --out " + out + "/synthetic");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("up axis: y (the synthetic layout's"), std::string::npos) << r.output;
  EXPECT_EQ(read_json(out + "/synthetic/config.json").at("data").at("up_axis"), 1);
  // So do they given as the folder qkv wrote them to (its layout reads as
  // ModelNet40's OFF tree, which stands on z).
  r = run_qkv("vnt train --data " + out +
              "/synthetic/synthetic --points-per-shape 128 --points 64 --epochs 1 "
              "--threads 1 --model vn-dgcnn --batch-size 8 --out " +
              out + "/as_folder");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("up axis: y (the synthetic layout's"), std::string::npos) << r.output;
  EXPECT_EQ(read_json(out + "/as_folder/config.json").at("data").at("up_axis"), 1);
  // ModelNet40's OFF meshes stand on z: the same shapes as an OFF tree named like the distribution.
  const std::string tree = out + "/ModelNet40";
  fs::create_directories(tree);
  for (const char* cls : {"box", "sphere"})
    for (const char* split : {"train", "test"}) {
      const std::string to = tree + "/" + cls + "/" + split;
      fs::create_directories(to);
      int copied = 0;
      for (const auto& f : fs::directory_iterator(out + "/synthetic/synthetic/" + cls + "/" + split))
        if (copied++ < 4) fs::copy_file(f.path(), to + "/" + f.path().filename().string());
    }
  r = run_qkv("vnt train --data " + tree +
              " --points-per-shape 128 --points 64 --epochs 1 --threads 1 "
              "--model vn-dgcnn --batch-size 4 --out " +
              out + "/off");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("up axis: z (the ModelNet40 layout's"), std::string::npos) << r.output;
  EXPECT_EQ(read_json(out + "/off/config.json").at("data").at("up_axis"), 2);
  // embed reads a split from the folder the run recorded: an output inside
  // it is refused, as inside --data (it had been written there, a new "class").
  expect_clean_failure(
      run_qkv("vnt embed --checkpoint " + out + "/off --split test --threads 1 --out " + tree + "/embed"), 2,
      "lies inside " + tree + " (listed in --checkpoint ");
  EXPECT_FALSE(fs::exists(tree + "/embed"));
  // An explicit axis is kept and not announced.
  r = run_qkv("vnt train --data " + tree +
              " --up-axis 1 --points-per-shape 128 --points 64 --epochs 1 --threads 1 "
              "--model vn-dgcnn --batch-size 4 --out " +
              out + "/explicit");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("up axis:"), std::string::npos) << r.output;
  EXPECT_EQ(read_json(out + "/explicit/config.json").at("data").at("up_axis"), 1);
  fs::remove_all(out);
}

TEST(Preset, Vnt137mIsWithinOnePercentOfThePaper) {
  for (const char* model : {"vnt", "vnt+n"}) {
    const auto r = run_qkv(std::string("params --count --model ") + model + " --model-options vnt-1.37m");
    ASSERT_EQ(r.status, 0) << r.output;
    const double count = std::stod(r.output);
    EXPECT_NEAR(count, 1.37e6, 0.01 * 1.37e6) << model;
  }
  const auto r = run_qkv("params --model vnt");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("vnt-1\\.37m +1359712 ")));
  expect_clean_failure(run_qkv("params --model vnt --model-options vnt-2m"), 2, "vnt-1.37m");
  expect_clean_failure(run_qkv("params --model mlp --model-options vnt-1.37m"), 2, "it has none");
}
