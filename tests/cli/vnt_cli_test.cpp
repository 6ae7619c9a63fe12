// qkv vnt end to end on the built-in shapes: a short run learns, its summary
// holds every test rotation and a confusion matrix, eval reproduces it and
// measures invariance, predict and attention work on a shape file, and bad
// input fails cleanly.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <tuple>

#include "qkv/core/npy.h"
#include "qkv/picture/png.h"
#include "qkv/pointcloud/mesh_read.h"
#include "support/cli_run.h"
#include "support/test_files.h"
#include "support/tolerance.h"

namespace fs = std::filesystem;
using qkv::testing::expect_clean_failure;
using qkv::testing::read_json;
using qkv::testing::run_qkv;
using qkv::testing::trailing_json;

// One short VNT-Net run shared by the tests of this file (trained once); not
// in an anonymous namespace, since TEST_F derives from it in the area's unit.
class VntCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(qkv::testing::fresh_dir("vnt_cli"));
    result_ = new qkv::testing::CliResult(run_qkv(
        "vnt train --data synthetic --synth-classes box,sphere,torus,cone --synth-train-per-class 20 "
        "--synth-test-per-class 6 --points-per-shape 256 --points 128 --protocol z/z --epochs 20 --batch-size 8 "
        "--lr 2e-3 --step-size 10 --gamma 0.5 --linear-dim 8 --heads 4 --head-dim 8 "
        "--model-options '{\"k\":10,\"head_hidden\":[64,32],\"dropout\":0.2}' --threads 1 --seed 3 --out " +
        *dir_));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete result_;
  }
  static std::string* dir_;
  static qkv::testing::CliResult* result_;
};
std::string* VntCli::dir_ = nullptr;
qkv::testing::CliResult* VntCli::result_ = nullptr;

TEST_F(VntCli, ShortRunLearnsAndReportsEveryTestRotation) {
  ASSERT_EQ(result_->status, 0) << result_->output;
  const auto summary = read_json(*dir_ + "/summary.json");
  // 4 classes: chance is 0.25 (this run: 0.79, one thread, deterministic). The
  // z/z test and the SO(3) test agree (invariance).
  const double z = summary.at("test").at("accuracy"), so3 = summary.at("test_so3").at("accuracy");
  EXPECT_GE(z, 0.6) << summary.dump(2);
  EXPECT_NEAR(z, so3, 0.15) << summary.dump(2);
  EXPECT_TRUE(summary.at("test").contains("balanced_accuracy"));
  const auto& confusion = summary.at("test").at("confusion");
  ASSERT_EQ(confusion.size(), 4u);
  int64_t total = 0;
  for (const auto& row : confusion)
    for (const auto& v : row) total += v.get<int64_t>();
  EXPECT_EQ(total, 24);  // 4 classes x 6 test shapes
  EXPECT_EQ(summary.at("test").at("classes").size(), 4u);
  std::ifstream report(*dir_ + "/report.html");
  const std::string html((std::istreambuf_iterator<char>(report)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("Confusion matrices"), std::string::npos);
  // The OFF tree the run generated is what the reader loaded.
  EXPECT_TRUE(fs::exists(*dir_ + "/synthetic/torus/test"));
}

TEST_F(VntCli, EvalReproducesTheSummaryAndMeasuresInvariance) {
  ASSERT_EQ(result_->status, 0) << result_->output;
  const auto summary = read_json(*dir_ + "/summary.json");
  auto r = run_qkv("vnt eval --checkpoint " + *dir_ + "/checkpoints/best.ckpt --rotate so3 --invariance 8");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto j = trailing_json(r.output);
  EXPECT_DOUBLE_EQ(j.at("accuracy").get<double>(), summary.at("test_so3").at("accuracy").get<double>());
  EXPECT_LE(j.at("invariance").at("float64").at("max_abs_logit_change").get<double>(), 1e-9) << j.dump(2);
  const auto& in_float32 = j.at("invariance").at("float32");
  EXPECT_LE(qkv::testing::relative_to_scale(in_float32.at("max_abs_logit_change").get<double>(),
                                            in_float32.at("max_abs_logit").get<double>()),
            1e-3)
      << j.dump(2);
  // A classification report per class, in JSON and, on stderr, as scikit-learn lays it out.
  const auto& confusion = j.at("confusion");
  ASSERT_EQ(j.at("per_class").size(), confusion.size());
  int64_t support = 0;
  for (size_t c = 0; c < confusion.size(); ++c) {
    int64_t row = 0, column = 0;
    for (size_t k = 0; k < confusion.size(); ++k)
      row += confusion[c][k].get<int64_t>(), column += confusion[k][c].get<int64_t>();
    const auto& entry = j.at("per_class")[c];
    EXPECT_EQ(entry.at("class"), j.at("classes")[c]);
    EXPECT_EQ(entry.at("support").get<int64_t>(), row);
    const double hit = confusion[c][c].get<double>();
    EXPECT_DOUBLE_EQ(entry.at("recall").get<double>(), row ? hit / row : 0.0);
    EXPECT_DOUBLE_EQ(entry.at("precision").get<double>(), column ? hit / column : 0.0);
    support += row;
  }
  EXPECT_EQ(j.at("weighted_avg").at("support").get<int64_t>(), support);
  for (const char* text : {"precision", "recall", "f1-score", "support", "macro avg", "weighted avg"})
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
}

TEST_F(VntCli, PredictAndAttentionOnAShapeFile) {
  ASSERT_EQ(result_->status, 0) << result_->output;
  const std::string shape = *dir_ + "/synthetic/torus/test/torus_0021.off";
  ASSERT_TRUE(fs::exists(shape));
  auto r = run_qkv("vnt predict --checkpoint " + *dir_ + "/checkpoints/best.ckpt --input " + shape +
                   " --rotate so3 --seed 5 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto j = trailing_json(r.output);
  double sum = 0;
  for (const auto& item : j.at("probabilities").items()) sum += item.value().get<double>();
  EXPECT_NEAR(sum, 1.0, 1e-5);
  EXPECT_EQ(j.at("probabilities").size(), 4u);

  const std::string out = *dir_ + "/attention";
  r = run_qkv("vnt attention --checkpoint " + *dir_ + "/checkpoints/best.ckpt --input " + shape + " --query 7 --out " +
              out);
  ASSERT_EQ(r.status, 0) << r.output;
  const auto a = trailing_json(r.output);
  EXPECT_LE(a.at("max_attention_difference").get<double>(), 1e-4 * a.at("max_attention").get<double>());
  EXPECT_TRUE(fs::exists(out + "/shape.ply"));
  EXPECT_TRUE(fs::exists(out + "/rotated.ply"));
  // Each PLY carries the attention row as a scalar property: N weights summing to 1.
  for (const char* ply : {"/shape.ply", "/rotated.ply"}) {
    const auto cloud = qkv::pointcloud::read_shape_file(out + ply);
    ASSERT_EQ(cloud.vertex_properties.size(), 1u) << ply;
    EXPECT_EQ(cloud.vertex_properties[0].name, "attention");
    double sum = 0, top = 0;
    for (const double v : cloud.vertex_properties[0].values) sum += v, top = std::max(top, v);
    EXPECT_NEAR(sum, 1.0, 1e-4) << ply;
    EXPECT_NEAR(top, a.at("max_attention").get<double>(), 1e-4) << ply;
  }
  EXPECT_DOUBLE_EQ(a.at("uniform_attention").get<double>(), 1.0 / 128);  // the run's --points
  EXPECT_EQ(a.at("scale"), "absolute");
  for (const char* png : {"/shape.png", "/rotated.png"}) {
    int64_t width = 0, height = 0;
    const auto rgb = qkv::picture::read_png_rgb(out + png, width, height);  // libpng reads it
    EXPECT_EQ(rgb.size(), static_cast<size_t>(width * height * 3)) << png;
    EXPECT_GT(width, height) << png;  // the colour bar beside the cloud
  }
  expect_clean_failure(
      run_qkv("vnt attention --checkpoint " + *dir_ + " --input " + shape + " --scale log --out " + out), 2, "--scale");
}

TEST_F(VntCli, EmbedWritesOneInvariantVectorPerShape) {
  ASSERT_EQ(result_->status, 0) << result_->output;
  const std::string checkpoint = *dir_ + "/checkpoints/best.ckpt";
  // The test split with its labels: one row per shape, in both files.
  const std::string split_out = *dir_ + "/embed-test";
  auto r = run_qkv("vnt embed --checkpoint " + checkpoint + " --split test --out " + split_out);
  ASSERT_EQ(r.status, 0) << r.output;
  const auto report = trailing_json(r.output);
  std::vector<int64_t> shape;
  const auto values = qkv::read_npy_float32(split_out + "/embeddings.npy", shape);
  ASSERT_EQ(shape.size(), 2u);
  EXPECT_EQ(shape[0], 24);  // 4 classes x 6 test shapes
  EXPECT_EQ(shape[1], report.at("dims").get<int64_t>());
  std::ifstream csv(split_out + "/embeddings.csv");
  std::string header, row;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("shape,class,f0,f1,", 0), 0u) << header;
  int64_t rows = 0;
  while (std::getline(csv, row)) {
    ++rows;
    EXPECT_EQ(row.rfind("test/", 0), 0u) << row;
    EXPECT_EQ(std::count(row.begin(), row.end(), ','), shape[1] + 1) << row;
  }
  EXPECT_EQ(rows, shape[0]);

  // A folder of shape files, as they are and turned by a random rotation (the
  // same --seed, so the same points): the embedding is rotation invariant.
  const std::string folder = *dir_ + "/synthetic/torus/test";
  auto embed_folder = [&](const std::string& out, const std::string& rotate) {
    const auto e = run_qkv("vnt embed --checkpoint " + checkpoint + " --input " + folder + " --rotate " + rotate +
                           " --seed 4 --out " + out);
    EXPECT_EQ(e.status, 0) << e.output;
    std::vector<int64_t> sizes;
    auto v = qkv::read_npy_float32(out + "/embeddings.npy", sizes);
    EXPECT_EQ(sizes.at(0), 6);
    return v;
  };
  const auto plain = embed_folder(*dir_ + "/embed-plain", "none");
  const auto turned = embed_folder(*dir_ + "/embed-so3", "so3");
  ASSERT_EQ(plain.size(), turned.size());
  double scale = 0, worst = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    scale = std::max(scale, std::abs(static_cast<double>(plain[i])));
    worst = std::max(worst, std::abs(static_cast<double>(plain[i]) - turned[i]));
  }
  EXPECT_GT(scale, 0);
  EXPECT_LE(worst, 1e-4 * scale) << "largest change " << worst << " on a scale of " << scale;

  {  // What a folder holds beside its shapes is said, not skipped silently (a .txt is a note).
    const std::string mixed = *dir_ + "/embed-mixed-input";
    fs::create_directories(mixed + "/more");
    std::vector<fs::path> shapes;
    for (const auto& e : fs::directory_iterator(folder)) shapes.push_back(e.path());
    std::sort(shapes.begin(), shapes.end());
    fs::copy_file(shapes.at(0), fs::path(mixed) / shapes.at(0).filename());
    fs::copy_file(shapes.at(1), mixed + "/more/" + shapes.at(1).filename().string());
    std::ofstream(mixed + "/photo.png") << "not a shape";
    std::ofstream(mixed + "/README.txt") << "a note";
    const auto e =
        run_qkv("vnt embed --checkpoint " + checkpoint + " --input " + mixed + " --out " + *dir_ + "/embed-mixed");
    ASSERT_EQ(e.status, 0) << e.output;
    EXPECT_NE(e.output.find(mixed + ": left out 1 file that qkv does not read as shapes (1 .png)"), std::string::npos)
        << e.output;
    std::vector<int64_t> sizes;
    qkv::read_npy_float32(*dir_ + "/embed-mixed/embeddings.npy", sizes);
    EXPECT_EQ(sizes.at(0), 2);
  }

  // Refused before anything is read or written: neither input, both, another
  // split, an output inside the input, an output that exists.
  expect_clean_failure(run_qkv("vnt embed --checkpoint " + checkpoint + " --out " + *dir_ + "/embed-none"), 2,
                       "--split");
  expect_clean_failure(run_qkv("vnt embed --checkpoint " + checkpoint + " --input " + folder + " --split test --out " +
                               *dir_ + "/embed-both"),
                       2, "--input");
  expect_clean_failure(run_qkv("vnt embed --checkpoint " + checkpoint + " --split tset --out " + *dir_ + "/embed-x"), 2,
                       "tset");
  expect_clean_failure(
      run_qkv("vnt embed --checkpoint " + checkpoint + " --input " + folder + " --out " + folder + "/embed"), 2,
      "lies inside --input");
  expect_clean_failure(run_qkv("vnt embed --checkpoint " + checkpoint + " --split test --out " + split_out), 2,
                       "--overwrite");
  for (const char* never : {"/embed-none", "/embed-both", "/embed-x"}) EXPECT_FALSE(fs::exists(*dir_ + never));
  EXPECT_FALSE(fs::exists(folder + "/embed"));
}

TEST(VntCliErrors, BadInputFailsWithOneLine) {
  expect_clean_failure(run_qkv("vnt train --protocol z-so3 --out /tmp/qkv_never"), 2, "--protocol z-so3");
  expect_clean_failure(run_qkv("vnt train --protocol z/so4 --out /tmp/qkv_never"), 2, "so4");
  const std::string empty = qkv::testing::fresh_dir("vnt_empty_data");
  fs::create_directories(empty);
  expect_clean_failure(run_qkv("vnt train --data " + empty + " --out " + empty + "-run"), 1, empty);
  EXPECT_FALSE(fs::exists(empty + "-run"));
  // A run folder inside the data folder would be read as a class: refused.
  expect_clean_failure(run_qkv("vnt train --data " + empty + " --out " + empty + "/run"), 2, "lies inside --data");
  {  // --data synthetic never deletes a folder it did not write
    std::ofstream(empty + "/keep.txt") << "user data\n";
  }
  expect_clean_failure(run_qkv("vnt train --synth-dir " + empty + " --out " + empty + "-run"), 2,
                       "not empty and not written by qkv");
  EXPECT_TRUE(fs::exists(empty + "/keep.txt"));
  fs::remove_all(empty);
  {  // a generator setting refused before the run folder (or its synthetic/) is made
    const std::string never = qkv::testing::fresh_dir("vnt_bad_class");
    expect_clean_failure(run_qkv("vnt train --synth-classes cube --out " + never), 2, "cube");
    EXPECT_FALSE(fs::exists(never));
  }
  const std::string model_options = "vnt train --model-options '{\"heads\":' --out /tmp/qkv_never";
  expect_clean_failure(run_qkv(model_options), 2, "--model-options");
  // The data set the head's size: a class count given here was replaced silently.
  expect_clean_failure(run_qkv("vnt train --model-options '{\"classes\":7}' --out /tmp/qkv_never"), 2,
                       "--model-options: 'classes' is fixed by the data");
}

// A run trained from one folder is read from any other, and after a move:
// it records its own synthetic shapes as RUN/synthetic, not as a path from
// where it was trained, which a read-only command would have written into.
TEST(VntCliStoredRuns, ARunIsReadFromAnyFolderAndWritesNothingThere) {
  const std::string root = qkv::testing::fresh_dir("vnt_stored_run");
  fs::create_directories(root + "/trained_here");
  fs::create_directories(root + "/elsewhere");
  const std::string qkv = qkv::testing::qkv_command();
  const auto made = qkv::testing::run_shell(
      "cd " + root + "/trained_here && " + qkv +
      " vnt train --synth-classes box,sphere --synth-train-per-class 4 --synth-test-per-class 2 "
      "--points-per-shape 64 --points 32 --epochs 1 --batch-size 4 --val-fraction 0 --linear-dim 4 --heads 2 "
      "--head-dim 4 --threads 1 --out run 2>&1");
  ASSERT_EQ(made.status, 0) << made.output;
  EXPECT_EQ(read_json(root + "/trained_here/run/config.json").at("data").at("synth_dir"), "");
  const double accuracy = read_json(root + "/trained_here/run/summary.json").at("test").at("accuracy");
  fs::rename(root + "/trained_here/run", root + "/moved");
  const auto eval = qkv::testing::run_shell("cd " + root + "/elsewhere && " + qkv +
                                            " vnt eval --checkpoint ../moved --rotate none --threads 1 2>&1");
  ASSERT_EQ(eval.status, 0) << eval.output;
  EXPECT_DOUBLE_EQ(trailing_json(eval.output).at("accuracy").get<double>(), accuracy);
  EXPECT_TRUE(fs::is_empty(root + "/elsewhere"));
  EXPECT_TRUE(fs::is_empty(root + "/trained_here"));
  // A split the run does not have is refused, not scored as 0 of 0.
  expect_clean_failure(run_qkv("vnt eval --checkpoint " + root + "/moved --split val"), 2,
                       "--split val: the run's val split holds no shapes (it was trained with val_fraction 0)");
  // A file name that is a folder (export-weights sub/) is refused before anything is written.
  expect_clean_failure(qkv::testing::run_shell("cd " + root + "/elsewhere && " + qkv +
                                               " export-weights --checkpoint ../moved --output sub/ 2>&1"),
                       2, "sub/: names a folder; name a file");
  EXPECT_TRUE(fs::is_empty(root + "/elsewhere"));
  fs::remove_all(root);
}

// One sample per batch cannot train batch norm (its running variance turns
// NaN): refused before the run folder is made, where the model has one.
TEST(VntCliStoredRuns, OneSamplePerBatchIsRefusedForABatchNormModel) {
  const std::string out = qkv::testing::fresh_dir("vnt_batch_of_one");
  const std::string args =
      "vnt train --synth-classes box,sphere --synth-train-per-class 2 --synth-test-per-class 1 "
      "--points-per-shape 64 --points 32 --epochs 1 --val-fraction 0 --linear-dim 4 --heads 2 --head-dim 4 "
      "--threads 1 --out " +
      out;
  expect_clean_failure(run_qkv(args + " --batch-size 1"), 2,
                       "--batch-size 1: this model's batch norm needs at least 2 samples per training batch");
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(out);
}

TEST(VntCliResume, ResumedRunEqualsAnUninterruptedOne) {
  // Training views draw FPS starts, scales, shifts and rotations from the
  // global generator, which checkpoints carry: the resumed run must match.
  const std::string dir = qkv::testing::fresh_dir("vnt_resume");
  const std::string args =
      "vnt train --data synthetic --synth-classes box,sphere,torus,cone --synth-train-per-class 10 "
      "--synth-test-per-class 3 --points 64 --points-per-shape 128 --batch-size 8 --linear-dim 8 --heads 2 "
      "--head-dim 4 --model-options '{\"k\":8}' --threads 1 --seed 2 ";
  ASSERT_EQ(run_qkv(args + "--epochs 2 --out " + dir + "/a").status, 0);
  auto r = run_qkv("vnt train --resume " + dir + "/a --epochs 4 --threads 1");
  ASSERT_EQ(r.status, 0) << r.output;
  ASSERT_EQ(run_qkv(args + "--epochs 4 --out " + dir + "/b").status, 0);
  std::ifstream a(dir + "/a/metrics.jsonl"), b(dir + "/b/metrics.jsonl");
  std::string la, lb;
  int rows = 0;
  while (std::getline(a, la) && std::getline(b, lb)) {
    const auto ja = nlohmann::json::parse(la), jb = nlohmann::json::parse(lb);
    ++rows;
    EXPECT_EQ(ja.at("train_loss").get<double>(), jb.at("train_loss").get<double>()) << "epoch " << rows;
    EXPECT_EQ(ja.at("val_loss").get<double>(), jb.at("val_loss").get<double>());
  }
  EXPECT_EQ(rows, 4);
  fs::remove_all(dir);
}

namespace {

// A mesh as another tool would save it: Wavefront OBJ or ASCII STL.
std::string mesh_as_obj(const qkv::pointcloud::Mesh& m) {
  std::string out = "# exported\n";
  for (const auto& v : m.vertices)
    out += "v " + std::to_string(v[0]) + " " + std::to_string(v[1]) + " " + std::to_string(v[2]) + "\n";
  for (const auto& f : m.faces)
    out += "f " + std::to_string(f[0] + 1) + " " + std::to_string(f[1] + 1) + " " + std::to_string(f[2] + 1) + "\n";
  return out;
}

std::string mesh_as_ascii_stl(const qkv::pointcloud::Mesh& m) {
  std::string out = "solid exported\n";
  for (const auto& f : m.faces) {
    out += " facet normal 0 0 0\n  outer loop\n";
    for (const auto i : f) {
      const auto& v = m.vertices[static_cast<size_t>(i)];
      out += "   vertex " + std::to_string(v[0]) + " " + std::to_string(v[1]) + " " + std::to_string(v[2]) + "\n";
    }
    out += "  endloop\n endfacet\n";
  }
  return out + "endsolid exported\n";
}

// The README's "Your own shapes" commands, as printed.
std::vector<std::string> readme_own_shapes_commands() {
  std::ifstream in(std::string(qkv::testing::source_dir()) + "/README.md");
  std::string line;
  bool inside = false;
  std::vector<std::string> commands;
  while (std::getline(in, line)) {
    if (line.rfind("**Your own shapes**", 0) == 0) inside = true;
    if (inside && line.rfind("    qkv vnt ", 0) == 0) commands.push_back(line.substr(4));
    if (inside && line.rfind("A run whose test predictions", 0) == 0) break;
  }
  return commands;
}

}  // namespace

// A folder of one's own meshes, three classes in three formats, y up, laid
// out flat: the README's commands train on it as printed, find y, report
// the layout and nothing skipped, and predict a file.
// The mean training accuracy of a run's last `last` epochs, after checking
// that metrics.jsonl holds `epochs` of them.
static double last_epochs_train_accuracy(const std::string& run, size_t epochs, size_t last) {
  std::ifstream metrics(run + "/metrics.jsonl");
  std::vector<double> accuracy;
  for (std::string line; std::getline(metrics, line);)
    accuracy.push_back(nlohmann::json::parse(line).at("train_accuracy").get<double>());
  EXPECT_EQ(accuracy.size(), epochs);
  if (accuracy.size() < last) return 0;
  double sum = 0;
  for (size_t e = accuracy.size() - last; e < accuracy.size(); ++e) sum += accuracy[e];
  return sum / static_cast<double>(last);
}

TEST(VntCliOwnShapes, TheReadmeExampleRunsAsPrinted) {
  const auto commands = readme_own_shapes_commands();
  ASSERT_EQ(commands.size(), 2u);
  const auto dir = qkv::testing::fresh_dir("vnt_own_shapes");
  const auto made = run_qkv(
      "data synth-shapes --classes table,cone,torus --train-per-class 8 --test-per-class 2 "
      "--seed 2 --out " +
      dir + "/synthetic");
  ASSERT_EQ(made.status, 0) << made.output;
  int written = 0;
  for (const char* cls : {"table", "cone", "torus"})
    for (const char* split : {"train", "test"})
      for (const auto& entry : fs::directory_iterator(dir + "/synthetic/" + cls + "/" + split)) {
        const auto mesh = qkv::pointcloud::read_shape_file(entry.path().string());
        const std::string stem = dir + "/my_shapes/" + cls + "/" + cls + "_" + std::to_string(written++ % 10);
        if (std::string(cls) == "table")
          qkv::testing::write_text_file(stem + ".obj", mesh_as_obj(mesh));
        else if (std::string(cls) == "cone")
          qkv::testing::write_text_file(stem + ".stl", mesh_as_ascii_stl(mesh));
        else {
          fs::create_directories(fs::path(stem).parent_path());
          fs::copy_file(entry.path(), stem + ".off");
        }
      }
  ASSERT_EQ(written, 30);
  for (const auto& command : commands) {
    ASSERT_EQ(command.rfind("qkv ", 0), 0u) << command;
    const auto r = qkv::testing::run_shell("cd " + dir + " && " + qkv::testing::qkv_command() + " " +
                                           command.substr(4) + " --threads 1 2>&1");
    ASSERT_EQ(r.status, 0) << command << "\n" << r.output;
    if (command.find("vnt train") != std::string::npos) {
      EXPECT_NE(r.output.find("my_shapes (flat layout, detected): 24 train / 6 test shapes, 3 classes"),
                std::string::npos)
          << r.output;
      EXPECT_NE(r.output.find("up axis: y (--up-axis auto"), std::string::npos) << r.output;
      EXPECT_EQ(r.output.find("skipped"), std::string::npos) << r.output;
      EXPECT_EQ(r.output.find("warning: up axis"), std::string::npos) << r.output;
      const auto summary = read_json(dir + "/runs/mine/summary.json");
      EXPECT_EQ(read_json(dir + "/runs/mine/config.json").at("data").at("up_axis"), 1);
      // It learns: over the last 5 epochs most training clouds are classified
      // (chance is 1/3; about 0.85 here, noisy from epoch to epoch under the
      // augmentation); the 6 test shapes are too few for a stable bound.
      EXPECT_GE(last_epochs_train_accuracy(dir + "/runs/mine", 20, 5), 0.7);
      EXPECT_TRUE(summary.at("test").contains("accuracy"));
    } else {
      EXPECT_NE(r.output.find("table"), std::string::npos) << r.output;
    }
  }
  fs::remove_all(dir);
}

// Two classes of the same random blobs told apart by their colour alone: a
// run with --point-features rgb learns them under SO(3) rotations, records
// the features, and predicts from a file's colour; a feature the files lack
// is refused before the run folder is made.
TEST(VntCliPointFeatures, ColourAloneTellsTheClassesApart) {
  const auto dir = qkv::testing::fresh_dir("vnt_point_features");
  std::mt19937 rng(4);
  std::normal_distribution<float> gauss;
  std::uniform_int_distribution<int> jitter(-20, 20);
  for (const auto& [cls, red, blue] : {std::tuple<const char*, int, int>{"red", 220, 30}, {"blue", 30, 220}})
    for (int i = 0; i < 14; ++i) {
      std::string ply =
          "ply\nformat ascii 1.0\nelement vertex 200\nproperty float x\nproperty float y\n"
          "property float z\nproperty uchar red\nproperty uchar green\nproperty uchar blue\nend_header\n";
      for (int p = 0; p < 200; ++p)
        ply += std::to_string(gauss(rng)) + " " + std::to_string(gauss(rng)) + " " + std::to_string(0.5f * gauss(rng)) +
               " " + std::to_string(red + jitter(rng)) + " 40 " + std::to_string(blue + jitter(rng)) + "\n";
      qkv::testing::write_text_file(dir + "/clouds/" + cls + "/" + cls + "_" + std::to_string(i) + ".ply", ply);
    }
  const std::string train = "vnt train --data " + dir +
                            "/clouds --points 64 --epochs 20 --batch-size 8 --lr 3e-3 "
                            "--protocol so3/so3 --linear-dim 8 --heads 2 --head-dim 4 --model-options "
                            "'{\"k\":8,\"blocks\":1,\"head_hidden\":[16]}' --threads 1 --seed 1 ";
  const auto r = run_qkv(train + "--point-features rgb --out " + dir + "/run");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto config = read_json(dir + "/run/config.json");
  EXPECT_EQ(config.at("data").at("point_features"), "rgb");
  EXPECT_EQ(config.at("model").at("options").at("point_features"), 3);
  EXPECT_GE(last_epochs_train_accuracy(dir + "/run", 20, 5), 0.85) << "chance is 0.5";
  const auto predicted = run_qkv("vnt predict --checkpoint " + dir + "/run --input " + dir +
                                 "/clouds/blue/blue_3.ply --rotate so3 --seed 5");
  ASSERT_EQ(predicted.status, 0) << predicted.output;
  EXPECT_NE(predicted.output.find("blue_3.ply: blue"), std::string::npos) << predicted.output;
  expect_clean_failure(run_qkv(train + "--point-features intensity --out " + dir + "/none"), 1,
                       "no per-point 'intensity' (the file holds: rgb)");
  EXPECT_FALSE(fs::exists(dir + "/none"));
  fs::remove_all(dir);
}
