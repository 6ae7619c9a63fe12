// NIfTI-1 and NIfTI-2 volumes: an input starting with the gzip magic is
// written as .nii.gz (nifticlib decides by the name), anything else as .nii.
#include "fuzz/fuzz_input.h"
#include "qkv/medical/nifti.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string plain = qkv::fuzz::scratch_path("input", ".nii");
  static const std::string gz = qkv::fuzz::scratch_path("input", ".nii.gz");
  const bool gzipped = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  const std::string& path = gzipped ? gz : plain;
  qkv::fuzz::write_input(path, data, size);
  qkv::fuzz::expect_documented([&] { qkv::medical::read_nifti(path); });
  qkv::fuzz::expect_documented([&] { qkv::medical::read_nifti_grid(path); });
  return 0;
}
