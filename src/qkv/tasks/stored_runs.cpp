#include "qkv/tasks/stored_runs.h"

#include "qkv/tasks/classification.h"
#include "qkv/tasks/part_segmentation.h"
#include "qkv/tasks/point_runs.h"
#include "qkv/train/run.h"

namespace qkv::tasks {

models::ModelPtr load_checked_model(const train::CheckpointFile& checkpoint, nlohmann::json* config) {
  nlohmann::json stored;
  auto model = train::load_model_from_checkpoint(checkpoint, &stored);
  const std::string command = stored.value("command", "");
  if (command == kClassificationCommand) checked_stored_point_data<ClassificationData>(checkpoint, stored);
  if (command == kPartSegmentationCommand) checked_stored_point_data<PartSegData>(checkpoint, stored);
  if (config) *config = std::move(stored);
  return model;
}

}  // namespace qkv::tasks
