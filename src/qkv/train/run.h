#pragma once
// The run record: what a training run is made from, its config.json, training
// it in its folder (fresh or resumed), and rebuilding its model from a
// checkpoint. Every train command and every fold of `mhca cv` is a run; the
// CLI only fills a RunRequest from options.
#include <c10/core/Device.h>

#include <nlohmann/json.hpp>
#include <string>

#include "qkv/core/output_policy.h"
#include "qkv/data/dataset.h"
#include "qkv/models/model.h"
#include "qkv/train/trainer.h"

namespace qkv::train {

// The files of a run folder.
struct RunPaths {
  std::string dir;
  std::string config() const { return dir + "/config.json"; }
  std::string metrics() const { return dir + "/metrics.jsonl"; }
  std::string summary() const { return dir + "/summary.json"; }
  std::string report() const { return dir + "/report.html"; }
  std::string last_checkpoint() const { return dir + "/checkpoints/last.ckpt"; }
  std::string best_checkpoint() const { return dir + "/checkpoints/best.ckpt"; }
  // The files above, relative to the folder.
  static std::vector<std::string> names() {
    return {"config.json", "metrics.jsonl",         "summary.json",
            "report.html", "checkpoints/last.ckpt", "checkpoints/best.ckpt"};
  }
};

// Who may write in a run folder, decided in one place. New: the folder must
// be missing or empty (created); Overwrite: files qkv wrote there before are
// removed first, a user's files stay; Resume: a folder `command` made,
// continued with its ledger (core/output_policy.h). Messages name `key`
// ("out", "resume"), which the CLI says as its flag.
enum class RunFolderMode { New, Overwrite, Resume };
RunFolderMode run_folder_mode(bool resume, bool overwrite);

class RunFolder {
 public:
  // open()'s refusals without its effects, for a command that reads its data
  // between checking its outputs and writing them.
  static void check(const std::string& dir, RunFolderMode mode, const std::string& command,
                    const std::string& key = "out");
  // Checks and claims the folder; while the RunFolder lives, every write
  // below it is recorded, and replacing a file qkv did not write there is
  // refused. Move-only: the claim ends with the RunFolder.
  static RunFolder open(const std::string& dir, RunFolderMode mode, const std::string& command,
                        const std::string& key = "out");

  const RunPaths& paths() const { return paths_; }
  const std::string& dir() const { return paths_.dir; }
  // After a failure before the run wrote anything (data that cannot be
  // loaded): the claim of a new folder ends, and the folder's ledger goes if
  // it lists nothing, with the folder itself when open() created it. A
  // resumed folder is left as it is, and held.
  void release_if_unused() noexcept;

 private:
  RunPaths paths_;
  OutputClaim claim_;
  RunFolderMode mode_ = RunFolderMode::New;
  bool created_ = false;
};

struct RunRequest {
  std::string command;     // "vnt train": the command that made the run (checked on resume, eval, predict)
  std::string model_name;  // registry name
  nlohmann::json model_options = nlohmann::json::object();
  nlohmann::json data = nlohmann::json::object();  // the task's data settings: enough to rebuild the data
  std::string init_weights;                        // optional name->tensor .pt dict
  uint64_t seed = 0;
  std::string device = "cpu";
  TrainConfig train;  // as first recorded; a resume may only extend the epochs
  // The --recipe the options came from (name, source, what it set and what
  // the command line kept), or null.
  nlohmann::json recipe;
  // One object per --resume (qkv version, epochs, threads, from_epoch), so
  // config.json keeps the original settings and says what changed.
  nlohmann::json resumes = nlohmann::json::array();
  // What the model may cost (--max-params): this call's, not recorded.
  models::ModelLimits limits;
};

// Whether the model registry builds `name` (XGBoost runs are recorded too, but
// not built from the registry).
bool is_registered_model(const std::string& name);

// config.json (and every checkpoint's copy): the request, model options with
// their defaults filled in, the qkv version, BLAS and threads in use.
nlohmann::json run_config(const RunRequest& request);

// The settings the trainer runs with: the recorded ones, with the epochs of
// the latest resume.
TrainConfig effective_train_config(const RunRequest& request);

// The request stored in DIR's last checkpoint, for --resume DIR. UsageError if
// there is no checkpoint or another command made the run; DataError if the
// stored configuration is incomplete.
RunRequest stored_request(const std::string& dir, const std::string& command);

// Records a resume: `epochs` > 0 extends (or shortens) the run, `world_size`
// is where it runs now (it must equal the stored one).
void record_resume(RunRequest& request, const std::string& dir, int64_t epochs, int64_t world_size);

// Builds the model, loads --init-weights, trains it into `dir` and returns the
// trainer's result. With `resume`, continues from dir's last checkpoint. A
// data-parallel run (request.train.parallel) joins its process group here.
// `trained`, if given, receives the model (with the selected weights).
TrainResult execute_run(const RunRequest& request, const std::string& dir, bool resume, const data::Splits& splits,
                        TrainHooks hooks = {}, models::ModelPtr* trained = nullptr);

// A model fitted without the trainer (XGBoost): its config.json and
// summary.json, written as a trained run's are.
void write_fitted_run(const RunRequest& request, const std::string& dir, const nlohmann::json& summary);

// What --checkpoint and qkv.load() take: a checkpoint file as it is, or a
// run folder's checkpoints/best.ckpt (xgboost.json for an XGBoost run).
// UsageError "PATH: no such file" or "PATH is a folder without ...".
std::string resolve_checkpoint(const std::string& path);

// A checkpoint to read and how: the model it stores is built within
// `limits` (--max-params), and NaN or infinite weights are refused unless
// `allow_non_finite` (--allow-non-finite). A path alone reads with the
// defaults, as a test or a caller that was told nothing else does.
struct CheckpointFile {
  std::string path;
  models::ModelLimits limits;
  bool allow_non_finite = false;

  CheckpointFile() = default;
  CheckpointFile(std::string file) : path(std::move(file)) {}  // NOLINT(google-explicit-constructor)
  CheckpointFile(const char* file) : path(file) {}             // NOLINT(google-explicit-constructor)
};

// Builds a registered model from a checkpoint's run configuration and loads
// its weights. With expected_command, a checkpoint made by another command
// is a DataError naming the file.
models::ModelPtr load_model_from_checkpoint(const CheckpointFile& checkpoint, nlohmann::json* run_config = nullptr,
                                            const std::string& expected_command = "");

// `checkpoint`'s model's weights written to the file `output` as a
// name->tensor dict (export_weights), which Python's torch.load reads. The
// output is checked before the checkpoint is read and claimed before it is
// written (core/output_policy.h: an existing file only with `overwrite`, and
// only one qkv wrote); refusals name the setting "output".
void export_checkpoint_weights(const CheckpointFile& checkpoint, const std::string& output, bool overwrite);

// A few lines a person reads at the end of a run: the selected epoch, the
// headline validation and test metrics, where the run folder is.
std::string run_summary_text(const nlohmann::json& summary, const std::string& dir, const std::string& test_label = "");

}  // namespace qkv::train
