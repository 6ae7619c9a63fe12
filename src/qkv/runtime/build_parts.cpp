#include "qkv/runtime/build_parts.h"

#include <stdexcept>

#include "qkv/core/errors.h"

// CMake defines these for this file alone (1 where the library was found and
// not left out), so that no other file's compile line changes with them.
#if !defined(QKV_WITH_HDF5) || !defined(QKV_WITH_NIFTI) || !defined(QKV_WITH_XGBOOST) || !defined(QKV_WITH_GLOO) || \
    !defined(QKV_WITH_NCCL)
#error "build_parts.cpp is compiled with QKV_WITH_HDF5, _NIFTI, _XGBOOST, _GLOO and _NCCL from CMakeLists.txt"
#endif

namespace qkv {

const std::vector<PartInfo>& optional_parts() {
  static const std::vector<PartInfo> parts = {
      {Part::Hdf5, "HDF5", "libhdf5-dev",
       "reads the .h5 data sets (ModelNet40's modelnet40_ply_hdf5_2048, ShapeNet-part's hdf5_data)",
       QKV_WITH_HDF5 != 0},
      {Part::Nifti, "NIfTI", "libnifti2-dev", "reads and writes NIfTI volumes (.nii, .nii.gz: every MHCA cohort)",
       QKV_WITH_NIFTI != 0},
      {Part::XGBoost, "XGBoost", "libxgboost-dev",
       "selects MHCA's CpG features and trains the XGBoost baseline (mhca select, cv and train)",
       QKV_WITH_XGBOOST != 0},
      {Part::Gloo, "Gloo", "libgloo-dev",
       "joins the ranks of data-parallel training (qkv launch, --world-size above 1)", QKV_WITH_GLOO != 0},
      {Part::Nccl, "NCCL", "a PyTorch 2.11 or later with CUDA, and Gloo's headers",
       "joins data-parallel ranks on GPUs (--dist-backend nccl, the default with --device cuda)", QKV_WITH_NCCL != 0},
  };
  return parts;
}

const PartInfo& part_info(Part part) {
  for (const auto& p : optional_parts())
    if (p.part == part) return p;
  throw std::logic_error("part_info: a Part missing from optional_parts()");
}

void refuse_without(Part part, const std::string& what) {
  const PartInfo& p = part_info(part);
  throw DataError(what + ": this qkv was built without " + p.name + ", which " + p.gives + "; rebuild it where " +
                  p.name + " (" + p.package + ") is found (docs/build.md)");
}

}  // namespace qkv
