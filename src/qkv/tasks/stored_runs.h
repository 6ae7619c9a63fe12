#pragma once
// A checkpoint read without its command: what `qkv.load` and any other front
// end that wants the model alone call, so that a crafted checkpoint the CLI's
// eval and predict refuse is refused here too, with the same message.
#include <nlohmann/json.hpp>
#include <string>

#include "qkv/models/model.h"
#include "qkv/train/run.h"

namespace qkv::tasks {

// The model of `checkpoint` with its weights (train::load_model_from_checkpoint),
// its run configuration in *config, after the checks the command that made
// it applies to the stored settings when it reads one (vnt and seg runs:
// load_point_run's). DataError naming the checkpoint.
models::ModelPtr load_checked_model(const train::CheckpointFile& checkpoint, nlohmann::json* config);

}  // namespace qkv::tasks
