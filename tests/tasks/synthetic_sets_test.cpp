// `data synth-shapes` / `data synth-parts` as library calls: the task owns
// the output folder (core/output_policy.h), the generators only write. What
// qkv wrote is replaced only with overwrite, and not once someone changed it;
// a folder holding a user's files is never written into; a file is never
// taken for a folder.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "qkv/pointcloud/synth_parts.h"
#include "qkv/pointcloud/synth_shapes.h"
#include "qkv/tasks/classification.h"
#include "qkv/tasks/part_segmentation.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

pointcloud::SynthShapesOptions one_cone() {
  pointcloud::SynthShapesOptions o;
  o.train_per_class = 1;
  o.test_per_class = 1;
  o.classes = {"cone"};
  return o;
}

TEST(SyntheticSets, ShapesReplaceOnlyWhatQkvWroteAndOnlyWithOverwrite) {
  const std::string dir = fresh_dir("synth_sets_shapes");
  fs::create_directories(dir);
  tasks::write_synth_shapes_to(dir, one_cone(), false);  // an existing empty folder is fine
  const auto stale = fs::path(dir) / "cone" / "train" / "cone_0001.off";
  ASSERT_TRUE(fs::exists(stale));

  const std::string refused = usage_error_of([&] { tasks::write_synth_shapes_to(dir, one_cone(), false); });
  EXPECT_NE(refused.find(dir), std::string::npos) << refused;
  EXPECT_NE(refused.find("overwrite"), std::string::npos) << refused;

  tasks::write_synth_shapes_to(dir, one_cone(), true);  // replaces what qkv wrote
  // A file changed since qkv wrote it is someone's now: kept, even with overwrite.
  { std::ofstream(stale) << "edited"; }
  const std::string changed = usage_error_of([&] { tasks::write_synth_shapes_to(dir, one_cone(), true); });
  EXPECT_NE(changed.find("changed since qkv wrote it"), std::string::npos) << changed;
  EXPECT_EQ(slurp(stale), "edited");

  // A user's folder: refused even with overwrite, the user's file kept.
  const std::string mine = fresh_dir("synth_sets_mine");
  fs::create_directories(mine);
  { std::ofstream(fs::path(mine) / "notes.txt") << "mine"; }
  const std::string theirs = usage_error_of([&] { tasks::write_synth_shapes_to(mine, one_cone(), true); });
  EXPECT_NE(theirs.find(mine), std::string::npos) << theirs;
  EXPECT_EQ(slurp(fs::path(mine) / "notes.txt"), "mine");
  EXPECT_FALSE(fs::exists(fs::path(mine) / "cone"));

  const std::string file = temp_path("synth_sets_not_a_folder");
  { std::ofstream(file) << "x"; }
  EXPECT_NE(usage_error_of([&] { tasks::write_synth_shapes_to(file, one_cone(), true); }).find(file),
            std::string::npos);
  EXPECT_EQ(slurp(file), "x");
  fs::remove_all(dir);
  fs::remove_all(mine);
}

TEST(SyntheticSets, PartsFollowTheSameRule) {
  pointcloud::SynthPartsOptions o;
  o.train_per_category = 1;
  o.val_per_category = 0;
  o.test_per_category = 0;
  o.categories = {"Table"};
  const std::string dir = fresh_dir("synth_sets_parts");
  tasks::write_synth_parts_to(dir, o, false);
  const std::string refused = usage_error_of([&] { tasks::write_synth_parts_to(dir, o, false); });
  EXPECT_NE(refused.find("overwrite"), std::string::npos) << refused;
  tasks::write_synth_parts_to(dir, o, true);
  fs::remove_all(dir);
}

// Where a stored run's synthetic shapes are: its own RUN/synthetic (an empty
// synth_dir) found from the checkpoint's place, an absolute --synth-dir as
// it is; a path relative to where an older run was trained is read, never
// written, and a checkpoint outside its run folder says what to give.
TEST(SyntheticSets, AStoredRunFindsItsShapesFromItsCheckpoint) {
  tasks::ClassificationData d;
  d.source = "synthetic";
  d.locate_stored_synthetic_dir("/data/runs/a/checkpoints/best.ckpt");
  EXPECT_EQ(d.synth_dir, "/data/runs/a/synthetic");
  EXPECT_TRUE(d.synthetic_dir_may_be_written);
  d.synth_dir = "";
  d.locate_stored_synthetic_dir("checkpoints/last.ckpt");
  EXPECT_EQ(d.synth_dir, "./synthetic");
  d.synth_dir = "/shared/shapes";
  d.locate_stored_synthetic_dir("/data/runs/a/checkpoints/best.ckpt");
  EXPECT_EQ(d.synth_dir, "/shared/shapes");
  EXPECT_TRUE(d.synthetic_dir_may_be_written);

  const std::string here = fresh_dir("stored_synth_dir");
  fs::create_directories(here);
  d.synth_dir = "";
  d.locate_stored_synthetic_dir(here + "/copied.ckpt");
  EXPECT_NE(data_error_of([&] { d.load_data(); }).find("its checkpoint is not in one"), std::string::npos);
  d.synth_dir = fs::relative(here + "/missing", fs::current_path()).string();
  d.locate_stored_synthetic_dir(here + "/run/checkpoints/best.ckpt");
  EXPECT_FALSE(d.synthetic_dir_may_be_written);
  EXPECT_NE(data_error_of([&] { d.load_data(); }).find("the run's synthetic shapes are not there"), std::string::npos);
  EXPECT_FALSE(fs::exists(here + "/missing"));
  fs::remove_all(here);
}

}  // namespace
}  // namespace qkv::testing
