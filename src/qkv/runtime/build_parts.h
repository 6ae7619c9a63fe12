#pragma once
// The optional libraries a build of qkv was made with. CMake takes each one it
// finds, unless QKV_WITHOUT names it (docs/build.md); NCCL comes with a
// LibTorch that has CUDA (2.x) and needs Gloo's part. A build without one has
// every command, and the readers that need the library refuse with one line
// naming the file and what to install. `qkv doctor` lists them.
#include <string>
#include <vector>

namespace qkv {

enum class Part { Hdf5, Nifti, XGBoost, Gloo, Nccl };

struct PartInfo {
  Part part;
  const char* name;     // "HDF5"
  const char* package;  // Debian's development package, "libhdf5-dev"
  const char* gives;    // what it reads or runs, for the refusal and the doctor
  bool built;
};

// Every optional part, in a fixed order.
const std::vector<PartInfo>& optional_parts();

// The entry of optional_parts() for `part`.
const PartInfo& part_info(Part part);

inline bool built_with(Part part) { return part_info(part).built; }

// Throws DataError "<what>: this qkv was built without HDF5, which reads ...;
// rebuild it where HDF5 (libhdf5-dev) is found (docs/build.md)".
[[noreturn]] void refuse_without(Part part, const std::string& what);

}  // namespace qkv
