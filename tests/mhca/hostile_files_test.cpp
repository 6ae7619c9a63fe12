// Hostile NIfTI volumes and cohort tables: files whose headers declare far
// more than they hold. Each is refused with a DataError naming the file,
// before the reader allocates what the header asks for (checked in a child
// process under an address-space budget well below that).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstring>
#include <string>
#include <vector>

#include <nifti2_io.h>

#include "qkv/core/atomic_file.h"
#include "qkv/medical/cohort.h"
#include "qkv/medical/cohort_data.h"
#include "qkv/medical/nifti.h"
#include "support/bounded_child.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

// A NIfTI-1 single-file header (348 bytes + the 4-byte extension flag).
std::vector<char> nifti1_header(int16_t nx, int16_t ny, int16_t nz, int16_t datatype, int16_t bitpix,
                                float vox_offset = 352) {
  nifti_1_header h;
  std::memset(&h, 0, sizeof h);
  h.sizeof_hdr = 348;
  h.dim[0] = 3;
  h.dim[1] = nx;
  h.dim[2] = ny;
  h.dim[3] = nz;
  for (int d = 4; d <= 7; ++d) h.dim[d] = 1;
  h.datatype = datatype;
  h.bitpix = bitpix;
  for (int d = 0; d <= 7; ++d) h.pixdim[d] = 1;
  h.vox_offset = vox_offset;
  std::memcpy(h.magic, "n+1", 4);
  std::vector<char> bytes(352, 0);
  std::memcpy(bytes.data(), &h, sizeof h);
  return bytes;
}

void write_gz(const std::string& path, const std::vector<char>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  }
  gzclose(f);
}

std::string scratch(const std::string& name) {
  const auto dir = fresh_dir("hostile_" + name);
  make_directories(dir);
  return dir;
}

TEST(HostileNifti, AHugeDeclaredGridIsRefusedFromTheHeader) {
  // The 416-byte file: 30000^3 uint8 voxels declared.
  const auto path = scratch("huge") + "/huge.nii";
  auto bytes = nifti1_header(30000, 30000, 30000, NIFTI_TYPE_UINT8, 8);
  bytes.resize(416, 0);
  write_file_atomic(path, bytes);
  expect_bounded_data_error(
      64 * kMiB, [&] { medical::read_nifti(path); }, path, "30000x30000x30000");
}

TEST(HostileNifti, APlainFileHoldingFewerVoxelsThanDeclaredIsRefusedBeforeAllocating) {
  // 512 MiB of int16 voxels declared in 1.3 KB; the budget is a quarter of that.
  const auto path = scratch("short") + "/short.nii";
  auto bytes = nifti1_header(512, 512, 1024, NIFTI_TYPE_INT16, 16);
  bytes.resize(1300, 0);
  write_file_atomic(path, bytes);
  expect_bounded_data_error(
      128 * kMiB, [&] { medical::read_nifti(path); }, path, "truncated");
}

TEST(HostileNifti, AShortGzipStreamCostsOnlyWhatItHolds) {
  const auto path = scratch("short_gz") + "/short.nii.gz";
  auto bytes = nifti1_header(512, 512, 1024, NIFTI_TYPE_INT16, 16);
  bytes.resize(4096, 0);
  write_gz(path, bytes);
  expect_bounded_data_error(
      256 * kMiB, [&] { medical::read_nifti(path); }, path, "truncated");
}

TEST(HostileNifti, ACorruptGzipStreamIsAGzipError) {
  const auto dir = scratch("corrupt_gz");
  const auto good = dir + "/good.nii.gz";
  medical::Volume v;
  v.dims = {4, 4, 4};
  v.voxels.assign(64, 1.0f);
  medical::write_nifti(good, v);
  const auto bytes = read_file_bytes(good);
  // The case, reported as "truncated: 0 bytes": the first deflate
  // block has the reserved type 11, so nothing decompresses at all.
  auto bad_block = bytes;
  bad_block[10] = static_cast<char>(0xff);
  const auto path = dir + "/corrupt.nii.gz";
  write_file_atomic(path, bad_block);
  expect_data_error([&] { medical::read_nifti(path); }, path, "corrupt gzip stream");
  // The data decompresses but its CRC (the trailer's first 4 bytes) does not match.
  auto bad_crc = bytes;
  bad_crc[bytes.size() - 8] = static_cast<char>(bad_crc[bytes.size() - 8] ^ 0x5a);
  const auto crc = dir + "/crc.nii.gz";
  write_file_atomic(crc, bad_crc);
  expect_data_error([&] { medical::read_nifti(crc); }, crc, "corrupt gzip stream");
}

TEST(HostileNifti, AVoxOffsetBeyondTheFileIsRefused) {
  const auto dir = scratch("vox_offset");
  const auto path = dir + "/far.nii";
  auto bytes = nifti1_header(2, 2, 2, NIFTI_TYPE_UINT8, 8, 3.0e9f);  // above INT_MAX: nifticlib would clamp it
  bytes.resize(352 + 8, 1);
  write_file_atomic(path, bytes);
  expect_data_error([&] { medical::read_nifti(path); }, path, "vox_offset");
  const auto gz = dir + "/far.nii.gz";
  write_gz(gz, bytes);
  expect_data_error([&] { medical::read_nifti(gz); }, gz, "vox_offset");
}

TEST(HostileNifti, AFifoIsRefusedWithoutOpeningIt) {
  const auto path = scratch("fifo") + "/volume.nii";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  expect_bounded_data_error(
      64 * kMiB, [&] { medical::read_nifti(path); }, path, "not a regular file");
}

// A cohort of two subjects on a 4x4x4 grid, the second volume replaced by `second`.
struct SmallCohort {
  std::string manifest, methylation;
};

SmallCohort small_cohort(const std::string& dir, const std::string& second) {
  medical::Volume v;
  v.dims = {4, 4, 4};
  v.voxels.assign(64, 1.0f);
  medical::write_nifti(dir + "/a.nii.gz", v);
  write_text_file(dir + "/manifest.csv", "subject_id,label,spect\ns1,0,a.nii.gz\ns2,1," + second + "\n");
  write_text_file(dir + "/meth.csv", "subject_id,cg1,cg2\ns1,0.1,0.2\ns2,0.3,0.4\n");
  return {dir + "/manifest.csv", dir + "/meth.csv"};
}

TEST(HostileCohort, AVolumeOffTheCheckpointsGridIsRefusedFromItsHeader) {
  // The 0.5 MB .nii.gz declaring 1024x1024x512: here a header alone.
  const auto dir = scratch("grid");
  auto big = nifti1_header(1024, 1024, 256, NIFTI_TYPE_UINT8, 8);
  write_gz(dir + "/big.nii.gz", big);
  const auto c = small_cohort(dir, "big.nii.gz");
  expect_bounded_data_error(
      256 * kMiB,
      [&] {
        medical::load_cohort(c.manifest, c.methylation, true, 1, true, {4, 4, 4});
      },
      "big.nii.gz", "grid 1024x1024x256 differs from the checkpoint's 4x4x4");
  // Without a checkpoint the first volume's grid is the reference, still checked before reading voxels.
  expect_bounded_data_error(
      256 * kMiB, [&] { medical::load_cohort(c.manifest, c.methylation, true, 1, true); }, "big.nii.gz",
      "differs from");
}

TEST(HostileCohort, AVolumeFlippedOrShiftedOnTheSameGridIsRefusedNamingBoth) {
  const auto dir = scratch("affine");
  medical::Volume v;
  v.dims = {4, 4, 4};
  v.voxels.assign(64, 1.0f);
  v.geometry = medical::mni_2mm_geometry();
  auto flipped = v;
  flipped.geometry.sform[0] = -flipped.geometry.sform[0];  // x mirrored: a left-right flip
  flipped.geometry.sform[3] = -flipped.geometry.sform[3];
  medical::write_nifti(dir + "/b.nii.gz", flipped);
  auto c = small_cohort(dir, "b.nii.gz");
  medical::write_nifti(dir + "/a.nii.gz", v);  // the first volume, in MNI orientation
  const auto message = data_error_of([&] { medical::load_cohort(c.manifest, c.methylation, true, 1, true); });
  EXPECT_NE(message.find("b.nii.gz: its orientation (RAS against LAS)"), std::string::npos) << message;
  EXPECT_NE(message.find("--reorient"), std::string::npos) << message;
  EXPECT_NE(message.find("a.nii.gz"), std::string::npos) << message;
  auto shifted = v;
  shifted.geometry.sform[7] += 4.0;  // 4 mm along y
  medical::write_nifti(dir + "/b.nii.gz", shifted);
  EXPECT_NE(data_error_of([&] { medical::load_cohort(c.manifest, c.methylation, true, 1, true); }).find("its origin"),
            std::string::npos);
  auto rounded = v;
  rounded.geometry.sform[3] += 1e-5;  // a header written by another tool
  medical::write_nifti(dir + "/b.nii.gz", rounded);
  EXPECT_EQ(medical::load_cohort(c.manifest, c.methylation, true, 1, true).size(), 2);
}

TEST(HostileCohort, IdsThatAreNotUtf8TextAreRefusedNamingTheirLine) {
  // A Latin-1 export's 'sub-\xe91' and 'sub-\xe81' were both recorded as 'sub-\ufffd1' (one subject of
  // two), and a UTF-16 file's ids held NUL bytes, which cut the message short.
  const auto dir = scratch("not_utf8");
  write_file_atomic(dir + "/latin1.csv", std::string("subject_id,cg01\nsub-1,0.5\nsub-\xe9"
                                                     "1,0.5\n"));
  expect_data_error([&] { medical::read_methylation_table(dir + "/latin1.csv"); }, dir + "/latin1.csv",
                    ": line 3: subject id 'sub-?1' is not UTF-8 text");
  const char nul[] =
      "subject_id,cg0\0"
      "1\nsub-1,0.5\n";
  write_file_atomic(dir + "/nul.csv", std::string(nul, sizeof nul - 1));
  expect_data_error([&] { medical::read_methylation_table(dir + "/nul.csv"); }, dir + "/nul.csv",
                    ": line 1: CpG id 'cg0?1' is not UTF-8 text");
}

TEST(HostileCohort, AMethylationHeaderLineOverTheLimitIsRefused) {
  // The 53 MB single header line: refused at that line, holding at most a few times the file.
  const auto path = scratch("long_header") + "/meth.csv";
  std::string header = "subject_id";
  header.reserve(40u << 20);
  for (int c = 0; header.size() < (40u << 20); ++c) header += ",cg" + std::to_string(10000000 + c);
  write_file_atomic(path, header + "\n");
  expect_bounded_data_error(
      300 * kMiB, [&] { medical::read_methylation_table(path); }, path, "longer than 32 MiB");
}

TEST(HostileCohort, ManyColumnsTimesManyLinesIsNotReservedUpFront) {
  // 200k CpG columns and 200k one-byte lines would reserve 4e10 floats if lines x columns were trusted.
  const auto path = scratch("lines_x_cols") + "/meth.csv";
  std::string text = "subject_id";
  for (int c = 0; c < 200000; ++c) text += ",cg" + std::to_string(c);
  text += "\n";
  for (int r = 0; r < 200000; ++r) text += "x\n";
  write_file_atomic(path, text);
  expect_bounded_data_error(
      256 * kMiB, [&] { medical::read_methylation_table(path); }, path, "fields");
}

TEST(HostileCohort, AFifoManifestIsRefused) {
  const auto path = scratch("fifo_manifest") + "/manifest.csv";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  expect_bounded_data_error(
      64 * kMiB, [&] { medical::read_manifest(path); }, path, "not a regular file");
  expect_bounded_data_error(
      64 * kMiB, [&] { medical::read_methylation_table(path); }, path, "not a regular file");
}

TEST(HostileCohort, SubjectsMissingMostValuesAreNamedAndLeftOutOnRequest) {
  const auto dir = scratch("sparse");
  write_text_file(dir + "/manifest.csv", "subject_id,label,spect\ns1,0,a.nii.gz\ns2,1,b.nii.gz\ns3,1,c.nii.gz\n");
  write_text_file(dir + "/meth.csv",
                  "subject_id,cg1,cg2,cg3,cg4\ns1,0.1,0.2,0.3,0.4\ns2,NA,NA,NA,NA\ns3,0.5,NA,NA,0.6\n");
  const std::string manifest = dir + "/manifest.csv", table = dir + "/meth.csv";
  ::testing::internal::CaptureStderr();
  const auto all = medical::load_cohort(manifest, table, false, 1);
  const std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(all.size(), 3);
  EXPECT_NE(warned.find("2 subjects have at least half their beta-values missing: s2 (100%), s3 (50%)"),
            std::string::npos)
      << warned;
  ::testing::internal::CaptureStderr();
  const auto kept = medical::load_cohort(manifest, table, false, 1, false, {}, 0.5);
  const std::string dropped = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(kept.subject_ids, (std::vector<std::string>{"s1", "s3"}));
  EXPECT_EQ(kept.methylation.values.size(), 8u);
  EXPECT_NE(dropped.find("left out 1 subject with more than 50% of their beta-values missing: s2 (100%)"),
            std::string::npos)
      << dropped;
  expect_usage_error([&] { medical::load_cohort(manifest, table, false, 1, true, {}, 0.25); }, "max_missing 0.25");
}

}  // namespace
}  // namespace qkv::testing
