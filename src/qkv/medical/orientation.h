#pragma once
// Which way a volume's voxel axes point in world space, and turning a volume
// to RAS+ (voxel axes i, j, k running towards Right, Anterior, Superior, the
// NIfTI world frame) by permuting and flipping its axes, as nibabel's
// as_closest_canonical does. No resampling: every voxel keeps its value and
// its place in the world; only the order of the stored voxels and the affine
// change.
#include <array>
#include <string>

#include "qkv/medical/nifti.h"

namespace qkv::medical {

// The axis codes of a geometry's affine (sform, else qform, else spacing):
// for each voxel axis the world direction it runs most along, "R"/"L",
// "A"/"P", "S"/"I"; e.g. "RAS", "LPS", "ASR". An affine with a voxel axis of
// no direction is a DataError naming `source` (the volume's file).
std::string orientation_code(const NiftiGeometry& geometry, const std::string& source = "volume");

// The volume with its axes permuted and flipped so that its orientation code
// is "RAS" and every voxel lies where it lay (the sform and qform, where set,
// are rewritten to match; the spacing is permuted). An oblique affine is taken
// only if it is within kMaxObliqueDegrees of the axes (it is reduced to the
// nearest axis order, as nibabel's io_orientation does, and its small
// rotation is kept in the affine). DataError naming `path` for an affine
// whose 3x3 part is singular, or one more oblique than that: it would stay
// oblique, "turned to RAS+" or not.
Volume reorient_to_ras(const Volume& volume, const std::string& path);

// The angle, in degrees, by which a voxel axis may differ from the world axis
// it is mapped to and still be taken as aligned (our choice: scanners store
// slightly tilted grids; 30 degrees is another orientation, not a tilt).
inline constexpr double kMaxObliqueDegrees = 5.0;

}  // namespace qkv::medical
