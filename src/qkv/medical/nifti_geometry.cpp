// The geometry of NIfTI volumes, which needs no nifticlib: a build without it
// (runtime/build_parts.h) still places voxels in world space and knows the
// MNI grid of the MHCA paper's volumes.
#include "qkv/medical/nifti.h"

namespace qkv::medical {
namespace {

// The NIfTI-1 standard's codes (nifti1.h: NIFTI_XFORM_MNI_152, NIFTI_UNITS_MM).
constexpr int kXformMni152 = 4;
constexpr int kUnitsMm = 2;

}  // namespace

std::array<double, 16> NiftiGeometry::affine() const {
  if (sform_code > 0) return sform;
  if (qform_code > 0) return qform;
  return {spacing[0], 0,          0,          0,  //
          0,          spacing[1], 0,          0,  //
          0,          0,          spacing[2], 0,  //
          0,          0,          0,          1};
}

NiftiGeometry mni_2mm_geometry() {
  NiftiGeometry g;
  g.spacing = {2.0, 2.0, 2.0};
  g.qform_code = kXformMni152;
  g.sform_code = kXformMni152;
  g.sform = {-2, 0, 0, 90,    //
             0,  2, 0, -126,  //
             0,  0, 2, -72,   //
             0,  0, 0, 1};
  g.qform = g.sform;
  g.xyzt_units = kUnitsMm;
  return g;
}

}  // namespace qkv::medical
