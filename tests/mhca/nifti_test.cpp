#include "qkv/medical/nifti.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

// Files are also written with nifticlib itself, so the reader is checked
// against the reference implementation rather than only against our writer.
#include <nifti2_io.h>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "support/test_files.h"

namespace fs = std::filesystem;
using qkv::medical::NiftiGeometry;
using qkv::medical::Volume;
using qkv::testing::expect_data_error;

namespace {

// A fresh, existing folder for this test's files.
std::string scratch_dir(const std::string& name) {
  const auto dir = qkv::testing::fresh_dir("nifti_" + name);
  fs::create_directories(dir);
  return dir;
}

std::array<double, 16> quatern_affine(double qb, double qc, double qd, double qx, double qy, double qz, double dx,
                                      double dy, double dz, double qfac) {
  const nifti_dmat44 m = nifti_quatern_to_dmat44(qb, qc, qd, qx, qy, qz, dx, dy, dz, qfac);
  std::array<double, 16> a{};
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) a[4 * r + c] = m.m[r][c];
  return a;
}

// An oblique, left-handed qform and a different (sheared) sform, so that a
// writer which dropped or mixed them up would be caught.
Volume test_volume() {
  Volume v;
  v.dims = {5, 4, 3};
  v.voxels.resize(static_cast<size_t>(v.size()));
  for (size_t n = 0; n < v.voxels.size(); ++n) {
    // Values whose low mantissa bits matter: any float conversion loss shows.
    v.voxels[n] = static_cast<float>(std::sin(0.7 * static_cast<double>(n) + 0.1) * 1234.5678) * 1e-3f;
  }
  v.voxels[7] = -0.0f;
  v.voxels[8] = std::numeric_limits<float>::denorm_min();
  v.voxels[9] = std::numeric_limits<float>::max();
  NiftiGeometry& g = v.geometry;
  g.spacing = {1.5, 2.0, 2.5};
  g.qform_code = 1;  // NIFTI_XFORM_SCANNER_ANAT
  g.qform = quatern_affine(0.1, 0.2, 0.3, 12.5, -30.25, 7.0, 1.5, 2.0, 2.5, -1.0);
  g.sform_code = 2;                    // NIFTI_XFORM_ALIGNED_ANAT
  g.sform = {1.4,  0.1,  0.05, -40.5,  //
             -0.2, 1.9,  0.3,  17.25,  //
             0.0,  -0.1, 2.4,  3.0,    //
             0,    0,    0,    1};
  g.xyzt_units = NIFTI_UNITS_MM | NIFTI_UNITS_SEC;
  g.description = "qkv nifti test volume";
  return v;
}

void expect_matrix_near(const std::array<double, 16>& actual, const std::array<double, 16>& expected, double tol,
                        const std::string& what) {
  for (int e = 0; e < 16; ++e) EXPECT_NEAR(actual[e], expected[e], tol) << what << " element " << e;
}

void expect_same_volume(const Volume& actual, const Volume& expected) {
  EXPECT_EQ(actual.dims, expected.dims);
  ASSERT_EQ(actual.voxels.size(), expected.voxels.size());
  // Bit-exact: float32 written, float32 read, no scaling on the way.
  EXPECT_EQ(std::memcmp(actual.voxels.data(), expected.voxels.data(), actual.voxels.size() * sizeof(float)), 0);
  const auto& a = actual.geometry;
  const auto& e = expected.geometry;
  for (int d = 0; d < 3; ++d) EXPECT_NEAR(a.spacing[d], e.spacing[d], 1e-6) << "spacing " << d;
  EXPECT_EQ(a.qform_code, e.qform_code);
  EXPECT_EQ(a.sform_code, e.sform_code);
  expect_matrix_near(a.qform, e.qform, 1e-5, "qform");
  expect_matrix_near(a.sform, e.sform, 1e-5, "sform");
  EXPECT_EQ(a.xyzt_units, e.xyzt_units);
  EXPECT_EQ(a.description, e.description);
}

std::vector<char> file_bytes(const std::string& path) { return qkv::read_file_bytes(path); }

void put_bytes(const std::string& path, const std::vector<char>& bytes) { qkv::write_file_atomic(path, bytes); }

template <typename T>
void patch(std::vector<char>& bytes, size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof value);
}

// Writes a file with nifticlib: `dims` is NIfTI's dim[0..7], `fill` sets
// voxel n of the raw data.
void write_with_nifticlib(const std::string& path, const std::vector<int64_t>& dims, int datatype, int nifti_type,
                          const std::function<void(nifti_image*, int64_t)>& fill, double slope = 0.0,
                          double inter = 0.0) {
  int64_t dim[8] = {0, 1, 1, 1, 1, 1, 1, 1};
  for (size_t d = 0; d < dims.size(); ++d) dim[d] = dims[d];
  nifti_image* nim = nifti_make_new_nim(dim, datatype, 1);
  ASSERT_NE(nim, nullptr);
  for (int64_t n = 0; n < nim->nvox; ++n) fill(nim, n);
  nim->scl_slope = slope;
  nim->scl_inter = inter;
  ASSERT_EQ(nifti_set_filenames(nim, path.c_str(), 0, 1), 0);
  nim->nifti_type = nifti_type;  // after set_filenames, which guesses NIfTI-1 from ".nii"
  nifti_image_write(nim);
  nifti_image_free(nim);
  ASSERT_TRUE(fs::exists(path)) << path;
}

template <typename T>
std::function<void(nifti_image*, int64_t)> fill_with(const std::function<double(int64_t)>& value) {
  return [value](nifti_image* nim, int64_t n) { static_cast<T*>(nim->data)[n] = static_cast<T>(value(n)); };
}

// A value every integer type holds, signed ones also negative.
double int_value(int64_t n, bool is_signed) { return static_cast<double>(n % 50) - (is_signed ? 20.0 : 0.0); }

}  // namespace

TEST(Nifti, RoundTripsThroughNiiAndNiiGz) {
  const auto dir = scratch_dir("roundtrip");
  const Volume written = test_volume();
  for (const std::string name : {"v.nii", "v.nii.gz"}) {
    SCOPED_TRACE(name);
    const auto path = dir + "/" + name;
    qkv::medical::write_nifti(path, written);
    expect_same_volume(qkv::medical::read_nifti(path), written);
  }
  const auto plain = file_bytes(dir + "/v.nii");
  EXPECT_EQ(plain.size(), 352 + 4 * written.voxels.size());
  const auto gz = file_bytes(dir + "/v.nii.gz");
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);  // gzip magic: really compressed
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  // Atomic writes leave nothing but the two files.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);
}

TEST(Nifti, WrittenHeaderIsWhatNifticlibExpects) {
  const auto path = scratch_dir("header") + "/h.nii";
  const Volume v = test_volume();
  qkv::medical::write_nifti(path, v);
  nifti_image* nim = nifti_image_read(path.c_str(), 1);
  ASSERT_NE(nim, nullptr);
  EXPECT_EQ(nim->nifti_type, NIFTI_FTYPE_NIFTI1_1);
  EXPECT_EQ(nim->datatype, NIFTI_TYPE_FLOAT32);
  EXPECT_EQ(nim->ndim, 3);
  EXPECT_EQ(nim->iname_offset, 352);
  EXPECT_NEAR(nim->qfac, -1.0, 1e-6);
  EXPECT_TRUE(nim->scl_slope == 0.0 || nim->scl_slope == 1.0);
  EXPECT_EQ(nim->scl_inter, 0.0);
  EXPECT_EQ(std::memcmp(nim->data, v.voxels.data(), v.voxels.size() * sizeof(float)), 0);
  nifti_image_free(nim);
}

TEST(Nifti, ReadsEveryScalarDatatypeWrittenByNifticlibWithScaling) {
  const auto dir = scratch_dir("types");
  struct Case {
    int datatype;
    bool is_signed;
    std::function<void(nifti_image*, int64_t)> (*fill)(const std::function<double(int64_t)>&);
  };
  const std::vector<Case> cases = {
      {NIFTI_TYPE_UINT8, false, fill_with<uint8_t>}, {NIFTI_TYPE_INT8, true, fill_with<int8_t>},
      {NIFTI_TYPE_INT16, true, fill_with<int16_t>},  {NIFTI_TYPE_UINT16, false, fill_with<uint16_t>},
      {NIFTI_TYPE_INT32, true, fill_with<int32_t>},  {NIFTI_TYPE_UINT32, false, fill_with<uint32_t>},
      {NIFTI_TYPE_INT64, true, fill_with<int64_t>},  {NIFTI_TYPE_UINT64, false, fill_with<uint64_t>},
      {NIFTI_TYPE_FLOAT32, true, fill_with<float>},  {NIFTI_TYPE_FLOAT64, true, fill_with<double>},
  };
  for (const auto& c : cases) {
    const std::string type = nifti_datatype_string(c.datatype);
    SCOPED_TRACE(type);
    const auto path = dir + "/" + type + ".nii";
    const bool is_signed = c.is_signed;
    write_with_nifticlib(path, {3, 4, 3, 2}, c.datatype, NIFTI_FTYPE_NIFTI1_1,
                         c.fill([is_signed](int64_t n) { return int_value(n, is_signed); }), 2.0, -1.0);
    const Volume v = qkv::medical::read_nifti(path);
    EXPECT_EQ(v.dims, (std::array<int64_t, 3>{4, 3, 2}));
    ASSERT_EQ(v.voxels.size(), 24u);
    for (int64_t n = 0; n < 24; ++n) EXPECT_EQ(v.voxels[n], int_value(n, is_signed) * 2 - 1) << "voxel " << n;
  }
}

TEST(Nifti, ZeroSlopeMeansUnscaled) {
  const auto path = scratch_dir("noscale") + "/s.nii";
  write_with_nifticlib(path, {3, 2, 2, 2}, NIFTI_TYPE_INT16, NIFTI_FTYPE_NIFTI1_1,
                       fill_with<int16_t>([](int64_t n) { return 3.0 * n; }), 0.0, 5.0);
  const Volume v = qkv::medical::read_nifti(path);
  for (int64_t n = 0; n < 8; ++n) EXPECT_EQ(v.voxels[n], 3.0f * n);
}

TEST(Nifti, VoxelOrderIsIFastest) {
  const auto path = scratch_dir("order") + "/o.nii";
  write_with_nifticlib(path, {3, 4, 3, 2}, NIFTI_TYPE_INT16, NIFTI_FTYPE_NIFTI1_1,
                       fill_with<int16_t>([](int64_t n) { return static_cast<double>(n); }));
  const Volume v = qkv::medical::read_nifti(path);
  EXPECT_EQ(v.at(3, 0, 0), 3.0f);
  EXPECT_EQ(v.at(0, 1, 0), 4.0f);
  EXPECT_EQ(v.at(0, 0, 1), 12.0f);
  EXPECT_EQ(v.at(3, 2, 1), 23.0f);
}

// nifti_image_write of libnifti2 3.0.1 writes a NIfTI-1 header even for
// nifti_type NIFTI2_*, so the NIfTI-2 files are assembled from the header that
// nifticlib's own nifti_convert_nim2n2hdr makes, and the raw voxels.
TEST(Nifti, ReadsNifti2WithNifticlibHeaders) {
  const auto dir = scratch_dir("nifti2");
  int64_t dim[8] = {3, 6, 5, 4, 1, 1, 1, 1};
  nifti_image* nim = nifti_make_new_nim(dim, NIFTI_TYPE_FLOAT64, 1);
  ASSERT_NE(nim, nullptr);
  for (int64_t n = 0; n < nim->nvox; ++n) static_cast<double*>(nim->data)[n] = 0.25 * static_cast<double>(n) - 3;
  nim->scl_slope = 4.0;
  nim->scl_inter = 0.5;
  nim->sform_code = NIFTI_XFORM_MNI_152;
  const auto mni = qkv::medical::mni_2mm_geometry().sform;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) nim->sto_xyz.m[r][c] = mni[4 * r + c];
  const std::vector<char> data(static_cast<char*>(nim->data), static_cast<char*>(nim->data) + nim->nvox * nim->nbyper);

  nifti_2_header single{}, pair{};
  nim->nifti_type = NIFTI_FTYPE_NIFTI2_1;
  nim->iname_offset = 544;
  ASSERT_EQ(nifti_convert_nim2n2hdr(nim, &single), 0);
  nim->nifti_type = NIFTI_FTYPE_NIFTI2_2;
  nim->iname_offset = 0;
  ASSERT_EQ(nifti_convert_nim2n2hdr(nim, &pair), 0);
  nifti_image_free(nim);
  ASSERT_EQ(single.sizeof_hdr, 540);
  ASSERT_EQ(std::string(single.magic), "n+2");
  ASSERT_EQ(std::string(pair.magic), "ni2");

  std::vector<char> nii(reinterpret_cast<const char*>(&single), reinterpret_cast<const char*>(&single) + 540);
  nii.resize(544, 0);
  nii.insert(nii.end(), data.begin(), data.end());
  put_bytes(dir + "/n2.nii", nii);
  {
    gzFile f = gzopen((dir + "/n2.nii.gz").c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, nii.data(), static_cast<unsigned>(nii.size())), static_cast<int>(nii.size()));
    ASSERT_EQ(gzclose(f), Z_OK);
  }
  put_bytes(dir + "/pair.hdr",
            std::vector<char>(reinterpret_cast<const char*>(&pair), reinterpret_cast<const char*>(&pair) + 540));
  put_bytes(dir + "/pair.img", data);

  for (const std::string name : {"n2.nii", "n2.nii.gz", "pair.hdr"}) {
    SCOPED_TRACE(name);
    const Volume v = qkv::medical::read_nifti(dir + "/" + name);
    EXPECT_EQ(v.dims, (std::array<int64_t, 3>{6, 5, 4}));
    ASSERT_EQ(v.voxels.size(), 120u);
    for (int64_t n = 0; n < v.size(); ++n) EXPECT_EQ(v.voxels[n], (0.25f * n - 3) * 4 + 0.5f) << "voxel " << n;
    EXPECT_EQ(v.geometry.sform_code, NIFTI_XFORM_MNI_152);
    expect_matrix_near(v.geometry.sform, mni, 1e-9, "sform");
  }

  // The voxels of a header/image pair live in the .img: a short one is named.
  put_bytes(dir + "/pair.img", std::vector<char>(data.begin(), data.end() - 8));
  expect_data_error([&] { qkv::medical::read_nifti(dir + "/pair.hdr"); }, dir + "/pair.img", "truncated");
}

TEST(Nifti, ReadsByteSwappedFiles) {
  const auto dir = scratch_dir("swapped");
  const Volume v = test_volume();
  qkv::medical::write_nifti(dir + "/native.nii", v);
  auto bytes = file_bytes(dir + "/native.nii");
  nifti_1_header h;
  std::memcpy(&h, bytes.data(), sizeof h);
  nifti_swap_as_nifti1(&h);
  std::memcpy(bytes.data(), &h, sizeof h);
  nifti_swap_4bytes(static_cast<int64_t>(v.voxels.size()), bytes.data() + 352);
  put_bytes(dir + "/swapped.nii", bytes);
  ASSERT_NE(std::memcmp(bytes.data(), file_bytes(dir + "/native.nii").data(), 4), 0);
  expect_same_volume(qkv::medical::read_nifti(dir + "/swapped.nii"), v);
}

TEST(Nifti, FourDimensionalFileWithOneFrameIsAVolume) {
  const auto path = scratch_dir("oneframe") + "/f.nii";
  write_with_nifticlib(path, {4, 3, 3, 2, 1}, NIFTI_TYPE_UINT8, NIFTI_FTYPE_NIFTI1_1,
                       fill_with<uint8_t>([](int64_t n) { return static_cast<double>(n); }));
  const Volume v = qkv::medical::read_nifti(path);
  EXPECT_EQ(v.dims, (std::array<int64_t, 3>{3, 3, 2}));
  EXPECT_EQ(v.voxels.back(), 17.0f);
}

TEST(Nifti, MissingFileIsADataErrorNamingIt) {
  const auto path = scratch_dir("missing") + "/absent.nii.gz";
  expect_data_error([&] { qkv::medical::read_nifti(path); }, path, "not found");
}

TEST(Nifti, TruncatedFilesAreDataErrors) {
  const auto dir = scratch_dir("truncated");
  const Volume v = test_volume();
  qkv::medical::write_nifti(dir + "/whole.nii", v);
  qkv::medical::write_nifti(dir + "/whole.nii.gz", v);
  auto plain = file_bytes(dir + "/whole.nii");
  auto gz = file_bytes(dir + "/whole.nii.gz");

  const auto cut_data = dir + "/cut_data.nii";
  put_bytes(cut_data, std::vector<char>(plain.begin(), plain.end() - 10));
  expect_data_error([&] { qkv::medical::read_nifti(cut_data); }, cut_data, "truncated");

  const auto cut_header = dir + "/cut_header.nii";
  put_bytes(cut_header, std::vector<char>(plain.begin(), plain.begin() + 200));
  expect_data_error([&] { qkv::medical::read_nifti(cut_header); }, cut_header, "truncated");

  const auto cut_gz = dir + "/cut.nii.gz";
  put_bytes(cut_gz, std::vector<char>(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(gz.size() * 3 / 4)));
  expect_data_error([&] { qkv::medical::read_nifti(cut_gz); }, cut_gz, "truncated");

  // A gzip stream holding a whole header but too few voxels.
  const auto short_gz = dir + "/short.nii.gz";
  {
    std::vector<char> raw(plain.begin(), plain.end() - 40);
    gzFile f = gzopen(short_gz.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, raw.data(), static_cast<unsigned>(raw.size())), static_cast<int>(raw.size()));
    gzclose(f);
  }
  expect_data_error([&] { qkv::medical::read_nifti(short_gz); }, short_gz, "truncated");
}

TEST(Nifti, MalformedHeadersAreDataErrors) {
  const auto dir = scratch_dir("malformed");
  qkv::medical::write_nifti(dir + "/good.nii", test_volume());
  const auto good = file_bytes(dir + "/good.nii");

  auto bad_size = good;
  patch<int32_t>(bad_size, 0, 100);
  put_bytes(dir + "/sizeof.nii", bad_size);
  expect_data_error([&] { qkv::medical::read_nifti(dir + "/sizeof.nii"); }, dir + "/sizeof.nii", "sizeof_hdr 100");

  auto no_magic = good;
  std::memcpy(no_magic.data() + 344, "\0\0\0\0", 4);
  put_bytes(dir + "/magic.nii", no_magic);
  expect_data_error([&] { qkv::medical::read_nifti(dir + "/magic.nii"); }, dir + "/magic.nii", "magic");

  auto two_d = good;
  patch<int16_t>(two_d, 40, 2);  // dim[0]
  put_bytes(dir + "/2d.nii", two_d);
  expect_data_error([&] { qkv::medical::read_nifti(dir + "/2d.nii"); }, dir + "/2d.nii", "need a 3-D volume");

  auto eight_d = good;
  patch<int16_t>(eight_d, 40, 8);
  put_bytes(dir + "/8d.nii", eight_d);
  expect_data_error([&] { qkv::medical::read_nifti(dir + "/8d.nii"); }, dir + "/8d.nii", "dim[0] = 8");

  auto zero_size = good;
  patch<int16_t>(zero_size, 44, 0);  // dim[2]
  put_bytes(dir + "/zero.nii", zero_size);
  expect_data_error([&] { qkv::medical::read_nifti(dir + "/zero.nii"); }, dir + "/zero.nii", "dim[2] = 0");

  // vox_offset 0 (some writers leave it): nifticlib would read from byte
  // 348, 4 bytes before where such a file's voxels are.
  for (const float offset : {0.0f, 348.0f}) {
    auto early = good;
    patch<float>(early, 108, offset);
    put_bytes(dir + "/early.nii", early);
    expect_data_error([&] { qkv::medical::read_nifti(dir + "/early.nii"); }, dir + "/early.nii",
                      "voxels start at byte 352 or later");
  }

  const auto empty = dir + "/empty.nii";
  put_bytes(empty, {});
  expect_data_error([&] { qkv::medical::read_nifti(empty); }, empty, "truncated");
}

TEST(Nifti, SeveralFramesAreADataError) {
  const auto path = scratch_dir("frames") + "/series.nii";
  write_with_nifticlib(path, {4, 3, 3, 2, 3}, NIFTI_TYPE_FLOAT32, NIFTI_FTYPE_NIFTI1_1,
                       fill_with<float>([](int64_t n) { return 1.0; }));
  expect_data_error([&] { qkv::medical::read_nifti(path); }, path, "3 frames");
}

TEST(Nifti, NonScalarDatatypesAreDataErrors) {
  const auto dir = scratch_dir("nonscalar");
  write_with_nifticlib(dir + "/c.nii", {3, 2, 2, 2}, NIFTI_TYPE_COMPLEX64, NIFTI_FTYPE_NIFTI1_1,
                       [](nifti_image*, int64_t) {});
  expect_data_error([&] { qkv::medical::read_nifti(dir + "/c.nii"); }, dir + "/c.nii", "COMPLEX64");
  write_with_nifticlib(dir + "/rgb.nii", {3, 2, 2, 2}, NIFTI_TYPE_RGB24, NIFTI_FTYPE_NIFTI1_1,
                       [](nifti_image*, int64_t) {});
  expect_data_error([&] { qkv::medical::read_nifti(dir + "/rgb.nii"); }, dir + "/rgb.nii", "RGB24");
}

TEST(Nifti, NonFiniteVoxelsAreDataErrorsNamingTheVoxel) {
  const auto dir = scratch_dir("nonfinite");
  Volume v = test_volume();
  v.at(1, 2, 0) = 1.0f;  // a finite value at an index easily confused with the bad one
  v.at(1, 2, 2) = std::numeric_limits<float>::quiet_NaN();
  v.at(4, 3, 2) = std::numeric_limits<float>::quiet_NaN();
  qkv::medical::write_nifti(dir + "/nan.nii", v);
  expect_data_error([&] { qkv::medical::read_nifti(dir + "/nan.nii"); }, dir + "/nan.nii", "voxel (1, 2, 2) is NaN");

  // Finite as int16, infinite as float once scaled.
  write_with_nifticlib(dir + "/inf.nii", {3, 3, 3, 3}, NIFTI_TYPE_INT16, NIFTI_FTYPE_NIFTI1_1,
                       fill_with<int16_t>([](int64_t n) { return n == 1 + 3 * (2 + 3 * 1) ? 30000.0 : 1.0; }), 1e36,
                       0.0);
  expect_data_error([&] { qkv::medical::read_nifti(dir + "/inf.nii"); }, dir + "/inf.nii",
                    "voxel (1, 2, 1) is infinite");
}

TEST(Nifti, WriteRejectsBadPathsAndShapesAsUsageErrors) {
  const auto dir = scratch_dir("usage");
  Volume v = test_volume();
  EXPECT_THROW(qkv::medical::write_nifti(dir + "/v.txt", v), qkv::UsageError);
  EXPECT_THROW(qkv::medical::write_nifti(dir + "/v.gz", v), qkv::UsageError);
  v.voxels.pop_back();
  EXPECT_THROW(qkv::medical::write_nifti(dir + "/v.nii", v), qkv::UsageError);
  Volume empty;
  EXPECT_THROW(qkv::medical::write_nifti(dir + "/e.nii", empty), qkv::UsageError);
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(Nifti, WriteIntoMissingFolderIsADataErrorNamingThePath) {
  const auto path = scratch_dir("nofolder") + "/not/there/v.nii.gz";
  expect_data_error([&] { qkv::medical::write_nifti(path, test_volume()); }, path, "");
  EXPECT_FALSE(fs::exists(fs::path(path).parent_path()));
}

TEST(Nifti, AffinePrefersSformThenQformThenSpacing) {
  NiftiGeometry g = test_volume().geometry;
  EXPECT_EQ(g.affine(), g.sform);
  g.sform_code = 0;
  EXPECT_EQ(g.affine(), g.qform);
  g.qform_code = 0;
  EXPECT_EQ(g.affine(), (std::array<double, 16>{1.5, 0, 0, 0, 0, 2.0, 0, 0, 0, 0, 2.5, 0, 0, 0, 0, 1}));
}

TEST(Nifti, MniGeometryPutsTheOriginVoxelAtWorldZero) {
  const NiftiGeometry g = qkv::medical::mni_2mm_geometry();
  EXPECT_EQ(g.qform_code, NIFTI_XFORM_MNI_152);
  EXPECT_EQ(g.sform_code, NIFTI_XFORM_MNI_152);
  const auto a = g.affine();
  const double voxel[4] = {45, 63, 36, 1};
  for (int r = 0; r < 4; ++r) {
    double world = 0;
    for (int c = 0; c < 4; ++c) world += a[4 * r + c] * voxel[c];
    EXPECT_DOUBLE_EQ(world, r == 3 ? 1.0 : 0.0) << "row " << r;
  }
  // Written and read back, the qform (stored as a quaternion) is still the same grid.
  Volume v;
  v.dims = {91, 109, 91};
  v.voxels.assign(static_cast<size_t>(v.size()), 0.5f);
  v.geometry = g;
  const auto path = scratch_dir("mni") + "/mni.nii.gz";
  qkv::medical::write_nifti(path, v);
  expect_same_volume(qkv::medical::read_nifti(path), v);
}

TEST(Nifti, ReadsTheAichaAtlasOnTheMniGrid) {
  const std::string path = "/usr/share/mricron/templates/AICHAmc.nii.gz";
  if (!fs::exists(path)) GTEST_SKIP() << path << " is not installed";
  const Volume v = qkv::medical::read_nifti(path);
  EXPECT_EQ(v.dims, (std::array<int64_t, 3>{91, 109, 91}));
  expect_matrix_near(v.geometry.affine(), qkv::medical::mni_2mm_geometry().affine(), 1e-3, "affine");
}

TEST(Nifti, AnAffineHoldingNaNIsRefusedWhereItIsRead) {
  // A NaN compares as equal in the cohort's geometry check: one such volume
  // made every other one "agree" with it.
  const auto dir = scratch_dir("nan_affine");
  Volume v = test_volume();
  v.geometry.sform[6] = std::numeric_limits<double>::quiet_NaN();
  qkv::medical::write_nifti(dir + "/sform.nii", v);
  expect_data_error([&] { qkv::medical::read_nifti(dir + "/sform.nii"); }, dir + "/sform.nii",
                    "its sform holds NaN (row 1, column 2)");
  // An infinite offset likewise. (nifticlib itself turns a quaternion
  // parameter, offset or pixdim that is not finite into 0 or 1: the qform
  // cannot carry one.)
  v = test_volume();
  v.geometry.sform[3] = std::numeric_limits<double>::infinity();
  qkv::medical::write_nifti(dir + "/offset.nii", v);
  expect_data_error([&] { qkv::medical::read_nifti(dir + "/offset.nii"); }, dir + "/offset.nii",
                    "its sform holds an infinity (row 0, column 3)");
  // A voxel size (pixdim[1..3], float32 from byte 80 of a NIfTI-1 header)
  // that is not finite, which nifticlib would take for 1 mm.
  for (const auto& [d, value, said] : {std::tuple{1, std::numeric_limits<float>::quiet_NaN(), "NaN"},
                                       std::tuple{3, std::numeric_limits<float>::infinity(), "infinite"}}) {
    const std::string path = dir + "/pixdim" + std::to_string(d) + ".nii";
    qkv::medical::write_nifti(path, test_volume());
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(76 + 4 * d);
    file.write(reinterpret_cast<const char*>(&value), sizeof value);
    file.close();
    expect_data_error([&] { qkv::medical::read_nifti(path); }, path,
                      "its voxel size pixdim[" + std::to_string(d) + "] is " + said);
    expect_data_error([&] { qkv::medical::read_nifti_grid(path); }, path, "its voxel size");
  }
}
