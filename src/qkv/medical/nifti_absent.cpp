// A build without nifticlib (not found, or QKV_WITHOUT names it): reading or
// writing a volume refuses with the line runtime/build_parts.h words, naming
// the file; the geometry (nifti_geometry.cpp) stays.
#include "qkv/medical/nifti.h"
#include "qkv/runtime/build_parts.h"

namespace qkv::medical {

Volume read_nifti(const std::string& path) { refuse_without(Part::Nifti, path); }

std::array<int64_t, 3> read_nifti_grid(const std::string& path) { refuse_without(Part::Nifti, path); }

void write_nifti(const std::string& path, const Volume&) { refuse_without(Part::Nifti, path); }

}  // namespace qkv::medical
