// The cohort's CSV/TSV files: the first byte picks the reader (manifest,
// methylation table, CpG list), the rest is the file.
#include "fuzz/fuzz_input.h"
#include "qkv/medical/cohort.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = qkv::fuzz::scratch_path("input", ".csv");
  if (size == 0) return 0;
  qkv::fuzz::write_input(path, data + 1, size - 1);
  switch (data[0] % 3) {
    case 0: qkv::fuzz::expect_documented([&] { qkv::medical::read_manifest(path); }); break;
    case 1: qkv::fuzz::expect_documented([&] { qkv::medical::read_methylation_table(path); }); break;
    default: qkv::fuzz::expect_documented([&] { qkv::medical::read_cpg_list(path); }); break;
  }
  return 0;
}
