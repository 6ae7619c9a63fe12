// A task's train command through the library alone (what `qkv spirals train`
// and `spirals eval` do, with no CLI): the request made from settings, the run
// folder written, the model learns, eval scores the checkpoint as the run did;
// a finished run has nothing to resume; bad settings are refused by key.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include "qkv/core/fields.h"
#include "qkv/tasks/lm_task.h"
#include "qkv/tasks/mhca_task.h"
#include "qkv/tasks/recipes.h"
#include "qkv/tasks/spirals_task.h"
#include "qkv/tasks/train_task.h"
#include "qkv/train/run.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

namespace fs = std::filesystem;

tasks::GivenSetting none_given() {
  return [](const std::string&) { return false; };
}

train::RunRequest spirals_base(int64_t epochs) {
  train::RunRequest base;
  base.seed = 3;
  base.train = tasks::spirals_train_task(std::make_shared<tasks::SpiralsTrainSettings>()).defaults;
  base.train.epochs = epochs;
  base.train.seed = 3;
  return base;
}

TEST(TrainTask, SpiralsTrainsEvaluatesAndHasNothingToResume) {
  auto settings = std::make_shared<tasks::SpiralsTrainSettings>();
  settings->data.spirals.points_per_class = 200;
  const auto task = tasks::spirals_train_task(settings);
  const std::string dir = fresh_dir("train_task_spirals");
  auto request = tasks::new_train_request(task, none_given(), spirals_base(30), dir);
  EXPECT_EQ(request.command, "spirals train");
  EXPECT_EQ(request.model_name, "mlp");
  EXPECT_EQ(request.model_options.at("classes"), 3);  // the arms
  EXPECT_EQ(request.data.at("split_seed"), 3);        // the run's seed cuts the split
  const auto outcome = tasks::run_train_task(task, request, dir, false, false);
  ASSERT_FALSE(outcome.interrupted);
  EXPECT_TRUE(fs::exists(train::RunPaths{dir}.best_checkpoint()));
  const double test_accuracy = outcome.summary.at("test").at("accuracy");
  EXPECT_GT(test_accuracy, 0.8);  // three arms: chance is 1/3

  // eval of the selected checkpoint on the run's own test split is the run's test score.
  const auto metrics = tasks::evaluate_spirals_run(train::RunPaths{dir}.best_checkpoint(), "test", 0, torch::kCPU);
  EXPECT_NEAR(metrics.at("accuracy").get<double>(), test_accuracy, 1e-9);
  EXPECT_EQ(metrics.at("split"), "test");
  EXPECT_EQ(metrics.at("size"), 90);  // 15 % of 3 arms x 200 points
  // Another batch size (7 does not divide 90) scores the same shapes alike.
  const auto in_sevens = tasks::evaluate_spirals_run(train::RunPaths{dir}.best_checkpoint(), "test", 7, torch::kCPU);
  EXPECT_NEAR(in_sevens.at("accuracy").get<double>(), test_accuracy, 1e-9);
  EXPECT_NEAR(in_sevens.at("loss").get<double>(), metrics.at("loss").get<double>(),
              1e-5 * std::max(1.0, metrics.at("loss").get<double>()));
  expect_usage_error(
      [&] { tasks::evaluate_spirals_run(train::RunPaths{dir}.best_checkpoint(), "dev", 0, torch::kCPU); },
      "split dev: expected train, val or test");

  // Resumed with all epochs done: a note, nothing else; fewer epochs than done is refused by key.
  auto stored = train::stored_request(dir, task.command);
  EXPECT_NE(tasks::finished_run_note(stored, dir, false).find("nothing to do"), std::string::npos);
  train::record_resume(stored, dir, 10, 1);
  try {
    tasks::finished_run_note(stored, dir, true);
    FAIL() << "fewer epochs than done accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key, "epochs");
  }
  fs::remove_all(dir);
}

TEST(TrainTask, EvalOfAStoredRunTakesItsEvalBatchSizeUnlessGivenOne) {
  nlohmann::json config = {{"train", train::TrainConfig{}.to_json()}};
  config["train"]["batch_size"] = 24;
  EXPECT_EQ(train::stored_run_eval_batch_size(config, 0), 24);  // no --eval-batch-size: --batch-size's
  config["train"]["eval_batch_size"] = 5;
  EXPECT_EQ(train::stored_run_eval_batch_size(config, 0), 5);
  EXPECT_EQ(train::stored_run_eval_batch_size(config, 9), 9);  // eval's --batch-size wins
  config["train"].erase("eval_batch_size");                    // a run from before the setting
  EXPECT_EQ(train::stored_run_eval_batch_size(config, 0), 24);
}

TEST(TrainTask, BadSettingsAreRefusedByKeyBeforeAnyFile) {
  auto settings = std::make_shared<tasks::SpiralsTrainSettings>();
  settings->data.spirals.classes = 1;
  const std::string dir = fresh_dir("train_task_refused");
  try {
    tasks::new_train_request(tasks::spirals_train_task(settings), none_given(), spirals_base(1), dir);
    FAIL() << "one arm accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key, "classes");
  }
  EXPECT_FALSE(fs::exists(dir));

  // lm: a task given beside a text file is refused by the key the user set.
  auto lm = std::make_shared<tasks::LmTrainSettings>();
  lm->data.text = temp_path("train_task_corpus.txt");
  write_text_file(lm->data.text, "some text to learn from\n");
  const std::set<std::string> given = {"task"};
  try {
    tasks::new_train_request(
        tasks::lm_train_task(lm), [&](const std::string& k) { return given.count(k) > 0; }, {}, dir);
    FAIL() << "task and text accepted together";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key, "task");
    EXPECT_EQ(e.problem, "and {text} exclude each other");
  }
  // Without the task given, the text run is prepared and selects by loss.
  train::RunRequest lm_base;
  lm_base.train = tasks::lm_train_task(lm).defaults;
  const auto request = tasks::new_train_request(tasks::lm_train_task(lm), none_given(), lm_base, dir);
  EXPECT_EQ(request.model_name, "transformer-lm");
  EXPECT_EQ(request.train.select_metric, "loss");
  EXPECT_FALSE(fs::exists(dir));
}

// The whole command through tasks::train_command: a new run, then a resume
// that may only say where and how long it goes on (refused by key), and a
// recipe set by key on the settings the caller did not give.
TEST(TrainTask, TrainCommandResumesByKeyAndAppliesRecipesToSettings) {
  auto settings = std::make_shared<tasks::SpiralsTrainSettings>();
  settings->data.spirals.points_per_class = 50;
  const auto task = tasks::spirals_train_task(settings);
  const std::string dir = fresh_dir("train_command_spirals");
  tasks::TrainCall call;
  call.run.seed = 3;
  call.run.threads = 1;
  call.run.out = dir;
  call.train = spirals_base(2).train;
  const auto first = tasks::train_command(task, call);
  EXPECT_EQ(first.dir, dir);
  EXPECT_EQ(first.rank, 0);
  EXPECT_EQ(first.summary.at("epochs"), 2);

  tasks::TrainCall resume;
  resume.resume = dir;
  resume.run.threads = 1;
  resume.train = call.train;
  resume.given = {"resume", "lr"};
  try {
    tasks::train_command(task, resume);
    FAIL() << "a new lr accepted on resume";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key, "lr");
  }
  resume.given = {"resume", "epochs"};
  resume.train.epochs = 3;
  EXPECT_EQ(tasks::train_command(task, resume).summary.at("epochs"), 3);
  resume.given = {"resume"};
  EXPECT_TRUE(tasks::train_command(task, resume).nothing_to_do);
  fs::remove_all(dir);

  // A recipe fills by key what the caller left unset; given keys win; the
  // record names keys. (vnn is vnt train's: SGD, lr 0.1, StepLR.)
  const auto& vnn = tasks::find_recipe("vnt train", "vnn");
  train::TrainConfig config;
  config.optim.lr = 0.05;
  const auto record = tasks::apply_recipe(vnn, {[](const std::string& key) { return key == "lr"; },
                                                [&](const std::string& key, const std::string& value) {
                                                  return set_field_from_text(config, key, value, "recipe vnn");
                                                }});
  EXPECT_EQ(config.optim.optimizer, "sgd");
  EXPECT_DOUBLE_EQ(config.optim.lr, 0.05);
  EXPECT_TRUE(record.at("set").contains("optimizer"));
  EXPECT_FALSE(record.at("set").contains("points"));  // not a TrainConfig setting: skipped
  EXPECT_EQ(record.at("kept_from_command_line"), nlohmann::json::array({"lr"}));
  try {
    tasks::check_recipe_models(vnn, {"vnt"});
    FAIL() << "vnn accepted for vnt";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key, "recipe");
  }
}

// mhca cv's networks train as mhca train's do by default (the paper's
// epochs, batch and optimiser), whoever builds the settings: the CLI, Python
// or a test.
TEST(TrainTask, MhcaCrossValidationTrainsWithTheTrainCommandsDefaults) {
  const auto train = tasks::mhca_train_task(std::make_shared<tasks::MhcaTrainSettings>()).defaults;
  EXPECT_EQ(tasks::CVOptions{}.train.to_json(), train.to_json());
  EXPECT_EQ(train.epochs, 200);
  EXPECT_EQ(train.batch_size, 16);
}

}  // namespace
}  // namespace qkv::testing
