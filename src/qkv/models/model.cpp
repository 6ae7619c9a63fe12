#include "qkv/models/model.h"

#include "qkv/core/errors.h"

namespace qkv::models {

at::Tensor Model::features(const data::Batch&) {
  throw UsageError("features: this model gives no embedding (the VNT-Net, vnt-local and VN-DGCNN classifiers do)");
}

}  // namespace qkv::models
