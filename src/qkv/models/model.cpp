#include "qkv/models/model.h"

#include "qkv/core/errors.h"

namespace qkv::models {

at::Tensor Model::features(const data::Batch&) {
  throw UsageError("features: this model gives no embedding (the VNT-Net, vnt-local and VN-DGCNN classifiers do)");
}

AttentionMaps Model::attention_maps(const data::Batch&) {
  throw UsageError(
      "attention_maps: this model has no attention over the points (the VNT-Net models do: vnt, vnt+n, "
      "vnt-local, vnt-seg)");
}

}  // namespace qkv::models
