#pragma once
// NIfTI-1 and NIfTI-2 volumes (.nii, .nii.gz) through nifticlib: any stored
// datatype is read as float with scl_slope / scl_inter applied, and float
// volumes are written back with the geometry (qform, sform, pixdim, units) of
// the volume they came from, so that a map computed on a subject's grid opens
// aligned with that subject's scan in any viewer. In a build without
// nifticlib, reading and writing refuse by name (runtime/build_parts.h); the
// geometry stays.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace qkv::medical {

// Everything needed to place a voxel grid in world space, as NIfTI stores it.
struct NiftiGeometry {
  std::array<double, 3> spacing{1.0, 1.0, 1.0};  // pixdim[1..3], mm
  int qform_code = 0;                            // NIFTI_XFORM_*; 0 = unset
  int sform_code = 0;
  std::array<double, 16> qform{};  // voxel (i, j, k, 1) -> world (x, y, z, 1), row-major 4x4
  std::array<double, 16> sform{};
  int xyzt_units = 2;  // NIFTI_UNITS_MM
  std::string description;

  // The affine a reader should use: sform if set, else qform, else scaling by spacing.
  std::array<double, 16> affine() const;
};

struct Volume {
  std::array<int64_t, 3> dims{0, 0, 0};  // nx, ny, nz (NIfTI dim[1..3])
  std::vector<float> voxels;             // i fastest: index i + nx * (j + ny * k)
  NiftiGeometry geometry;

  int64_t size() const { return dims[0] * dims[1] * dims[2]; }
  float& at(int64_t i, int64_t j, int64_t k) { return voxels[i + dims[0] * (j + dims[1] * k)]; }
  float at(int64_t i, int64_t j, int64_t k) const { return voxels[i + dims[0] * (j + dims[1] * k)]; }
};

// Reads a 3-D volume (a 4-D file with one frame is accepted; more frames, or
// fewer than 3 dimensions, is a DataError). Any datatype nifticlib reads
// (uint8, int16, int32, float32, float64, ...) comes back as float with
// scl_slope (when non-zero) and scl_inter applied. Throws DataError naming the
// file for a missing, truncated or malformed file (bad sizeof_hdr, bad dims,
// fewer voxel bytes than the header promises) and for NaN or infinite voxels.
// Volumes above 2^28 voxels are refused from the header, and a plain file
// must hold every voxel it declares, before the volume is allocated; a FIFO
// or device is refused without being opened.
Volume read_nifti(const std::string& path);

// The grid {nx, ny, nz} a file declares, from its header alone (magic, dims
// and datatype checked; not yet whether the voxels fit): for checking a set
// of files against the grid a model expects before any volume is loaded.
std::array<int64_t, 3> read_nifti_grid(const std::string& path);

// Writes float32 NIfTI-1 with the volume's geometry; gzip when the path ends
// in ".nii.gz". Atomic: the file is complete or absent (write_file_atomic).
// Throws DataError naming the file on failure, UsageError for a path that does
// not end in .nii or .nii.gz or a volume whose voxel count does not match dims.
void write_nifti(const std::string& path, const Volume& volume);

// The MNI152 2 mm grid the paper's SPECT volumes live on: 91 x 109 x 91, origin
// voxel (45, 63, 36), with the standard sform/qform (code 4, MNI).
NiftiGeometry mni_2mm_geometry();

}  // namespace qkv::medical
