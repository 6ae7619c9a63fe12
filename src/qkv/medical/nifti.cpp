#include "qkv/medical/nifti.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

// nifti2_io.h declares the same nifti_image as nifti1_io.h with other field
// types; only this one may be included, and it reads NIfTI-1 as well.
#include <nifti2_io.h>

#include "qkv/core/atomic_file.h"
#include "qkv/core/checked.h"
#include "qkv/core/errors.h"
#include "qkv/core/file_input.h"
#include "qkv/core/text.h"

namespace qkv::medical {
namespace {

constexpr int kNifti1HeaderSize = 348;
constexpr int kNifti2HeaderSize = 540;
// NIfTI-1 single file: header, the 4-byte extension flag, then the voxels.
constexpr int kNifti1VoxOffset = kNifti1HeaderSize + 4;
// The largest volume read: 2^28 voxels (1 GiB as float) holds a 0.5 mm
// whole-brain grid many times over. A gzipped file's size says nothing about
// what it decompresses to, so this is what a declared size is checked against.
constexpr int64_t kMaxVoxels = int64_t{1} << 28;
// Where a gzipped file's voxels may start at the latest. Header extensions
// (DICOM fields, notes) take kilobytes; nifticlib allocates what they declare
// up to vox_offset, which a plain file's size bounds and a gzipped one's does not.
constexpr int64_t kMaxGzVoxOffset = int64_t{256} << 20;
// Voxel bytes are read from a gzip stream in slices of this size, so that a
// stream shorter than its header says costs only what it holds.
constexpr size_t kGzSlice = size_t{64} << 20;

// nifticlib reports its errors on stderr (debug level 1 by default) and then
// returns NULL; this module checks the header itself so that the DataError
// says what is wrong, and keeps stderr clean.
void quiet_nifticlib() {
  static const bool done = [] {
    nifti_set_debug_level(0);
    return true;
  }();
  (void)done;
}

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

struct NiftiFree {
  void operator()(nifti_image* nim) const { nifti_image_free(nim); }
};
using NiftiImage = std::unique_ptr<nifti_image, NiftiFree>;

// Reads up to `want` bytes (fewer only at the end of the file or of a cut gzip
// stream). gzread passes plain files through, so one path serves .nii and .nii.gz.
size_t gz_read_upto(gzFile file, char* buf, size_t want) {
  size_t got = 0;
  while (got < want) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(want - got, 1u << 30));
    const int n = gzread(file, buf + got, chunk);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  return got;
}

// zlib's complaint about a damaged stream, or "" when it only ended early
// (Z_BUF_ERROR is zlib's "unexpected end of file").
std::string gz_damage(gzFile file) {
  int zerr = Z_OK;
  const char* message = gzerror(file, &zerr);
  if (zerr == Z_OK || zerr == Z_BUF_ERROR) return "";
  return message && *message ? message : "read error";
}

// How many bytes the file holds once decompressed, counted only to explain a
// header nifticlib refused (a cut gzip stream still yields the bytes before the cut).
int64_t decompressed_size(const std::string& file) {
  GzFile f(gzopen(file.c_str(), "rb"));
  if (!f) return -1;
  std::vector<char> buf(1 << 20);
  int64_t total = 0;
  for (;;) {
    const int n = gzread(f.get(), buf.data(), static_cast<unsigned>(buf.size()));
    if (n <= 0) break;
    total += n;
  }
  return total;
}

template <typename T>
T field(const char* header, size_t offset, bool swapped) {
  T value;
  std::memcpy(&value, header + offset, sizeof(T));
  if (swapped) {
    char* bytes = reinterpret_cast<char*>(&value);
    for (size_t a = 0, b = sizeof(T) - 1; a < b; ++a, --b) std::swap(bytes[a], bytes[b]);
  }
  return value;
}

int32_t byte_swapped(int32_t v) { return field<int32_t>(reinterpret_cast<const char*>(&v), 0, true); }

bool is_scalar_datatype(int datatype) {
  switch (datatype) {
    case NIFTI_TYPE_UINT8:
    case NIFTI_TYPE_INT8:
    case NIFTI_TYPE_INT16:
    case NIFTI_TYPE_UINT16:
    case NIFTI_TYPE_INT32:
    case NIFTI_TYPE_UINT32:
    case NIFTI_TYPE_INT64:
    case NIFTI_TYPE_UINT64:
    case NIFTI_TYPE_FLOAT32:
    case NIFTI_TYPE_FLOAT64: return true;
    default: return false;
  }
}

// What the raw header says, checked before nifticlib sees the file.
struct RawHeader {
  int64_t file_size = 0;  // on disk
  bool gzipped = false;
  int version = 0;          // 1 or 2
  bool single_file = true;  // "n+1" / "n+2": voxels follow the header in the same file
  int64_t vox_offset = 0;
  int datatype = 0;
  int64_t nvox = 0;
  std::array<int64_t, 3> dims{0, 0, 0};
};

std::string grid_text(const std::array<int64_t, 3>& d) {
  return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
}

RawHeader check_header(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw DataError(path + ": file not found");
  if (fs::is_directory(path, ec)) throw DataError(path + ": is a folder, not a NIfTI file");
  RawHeader raw;
  raw.file_size = regular_file_size(path);
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) throw DataError(path + ": cannot open: " + std::strerror(errno));
  char h[kNifti2HeaderSize] = {};
  const size_t got = gz_read_upto(f.get(), h, sizeof h);
  raw.gzipped = !gzdirect(f.get());
  const std::string damage = gz_damage(f.get());
  if (!damage.empty()) throw DataError(path + ": corrupt gzip stream: " + damage);
  if (got < 4) throw DataError(path + ": truncated: " + std::to_string(got) + " bytes, too short for a NIfTI header");

  bool swapped = false;
  const int32_t sizeof_hdr = field<int32_t>(h, 0, false);
  if (sizeof_hdr == kNifti1HeaderSize || sizeof_hdr == kNifti2HeaderSize) {
    raw.version = sizeof_hdr == kNifti1HeaderSize ? 1 : 2;
  } else if (byte_swapped(sizeof_hdr) == kNifti1HeaderSize || byte_swapped(sizeof_hdr) == kNifti2HeaderSize) {
    raw.version = byte_swapped(sizeof_hdr) == kNifti1HeaderSize ? 1 : 2;
    swapped = true;
  } else {
    throw DataError(path + ": bad sizeof_hdr " + std::to_string(sizeof_hdr) +
                    " (a NIfTI-1 header has 348, NIfTI-2 540): not a NIfTI file");
  }
  const size_t header_size = raw.version == 1 ? kNifti1HeaderSize : kNifti2HeaderSize;
  if (got < header_size) {
    throw DataError(path + ": truncated header: " + std::to_string(got) + " of " + std::to_string(header_size) +
                    " bytes");
  }

  const char* magic = h + (raw.version == 1 ? 344 : 4);
  const char version_char = raw.version == 1 ? '1' : '2';
  if (magic[0] != 'n' || (magic[1] != '+' && magic[1] != 'i') || magic[2] != version_char || magic[3] != '\0') {
    // Analyze 7.5 shares the 348-byte header but has no orientation, so a
    // volume read from it would silently be placed wrongly in world space.
    throw DataError(path + ": no NIfTI-" + version_char + " magic (\"n+" + version_char +
                    "\"): not a NIfTI file (Analyze 7.5 is not supported)");
  }
  raw.single_file = magic[1] == '+';

  int64_t dim[8];
  for (int d = 0; d < 8; ++d) {
    dim[d] = raw.version == 1 ? field<int16_t>(h, 40 + 2 * d, swapped) : field<int64_t>(h, 16 + 8 * d, swapped);
  }
  raw.datatype = raw.version == 1 ? field<int16_t>(h, 70, swapped) : field<int16_t>(h, 12, swapped);
  const double vox_offset =
      raw.version == 1 ? field<float>(h, 108, swapped) : static_cast<double>(field<int64_t>(h, 168, swapped));
  if (!(vox_offset >= 0 && vox_offset < 1e15)) {
    throw DataError(path + ": bad vox_offset " + std::to_string(vox_offset));
  }
  raw.vox_offset = static_cast<int64_t>(vox_offset);
  // In a .nii the voxels follow the header and its 4-byte extension flag. A
  // smaller offset (0, which some writers leave) says nothing sure of where
  // they are: nifticlib reads them from the header's end, 4 bytes early for
  // a file laid out as usual, so the volume would come out shifted.
  const int64_t first_voxel_byte = static_cast<int64_t>(header_size) + 4;
  if (raw.single_file && raw.vox_offset < first_voxel_byte)
    throw DataError(path + ": bad vox_offset " + std::to_string(raw.vox_offset) + ": a single-file NIfTI-" +
                    std::to_string(raw.version) + "'s voxels start at byte " + std::to_string(first_voxel_byte) +
                    " or later (the header and its extension flag); the writer left the header wrong");
  if (raw.single_file && !raw.gzipped && raw.vox_offset > raw.file_size) {
    throw DataError(path + ": bad vox_offset " + std::to_string(raw.vox_offset) + ": beyond the file's " +
                    std::to_string(raw.file_size) + " bytes");
  }
  if (raw.gzipped && raw.vox_offset > kMaxGzVoxOffset) {
    throw DataError(path + ": bad vox_offset " + std::to_string(raw.vox_offset) + ": more than " +
                    std::to_string(kMaxGzVoxOffset) + " bytes of header and extensions");
  }

  if (dim[0] < 1 || dim[0] > 7) {
    throw DataError(path + ": bad dim[0] = " + std::to_string(dim[0]) + " (the number of dimensions must be 1..7)");
  }
  for (int d = 1; d <= dim[0]; ++d) {
    if (dim[d] < 1) {
      throw DataError(path + ": bad dim[" + std::to_string(d) + "] = " + std::to_string(dim[d]) +
                      " (sizes must be positive)");
    }
  }
  if (dim[0] < 3) {
    throw DataError(path + ": only " + std::to_string(dim[0]) + " dimensions (dim[0] = " + std::to_string(dim[0]) +
                    "); need a 3-D volume");
  }
  int64_t frames = 1;
  for (int d = 4; d <= dim[0]; ++d) {
    if (!checked_mul(frames, dim[d], frames)) throw DataError(path + ": bad dims (the voxel count overflows)");
  }
  if (frames > 1) {
    throw DataError(path + ": " + std::to_string(frames) + " frames (dims 4..7 of a " + std::to_string(dim[0]) +
                    "-D image); need a single 3-D volume");
  }
  // The voxel size, as the file holds it: nifticlib turns a pixdim that is
  // NaN or infinite into 1 mm without a word.
  for (int d = 1; d <= 3; ++d) {
    const double size =
        raw.version == 1 ? field<float>(h, 76 + 4 * d, swapped) : field<double>(h, 104 + 8 * d, swapped);
    if (!std::isfinite(size))
      throw DataError(path + ": its voxel size pixdim[" + std::to_string(d) + "] is " +
                      (std::isnan(size) ? "NaN" : "infinite"));
  }
  raw.nvox = frames;
  for (int d = 1; d <= 3; ++d) {
    if (!checked_mul(raw.nvox, dim[d], raw.nvox)) throw DataError(path + ": bad dims (the voxel count overflows)");
    raw.dims[static_cast<size_t>(d - 1)] = dim[d];
  }

  if (!is_scalar_datatype(raw.datatype)) {
    const char* name = nifti_datatype_string(raw.datatype);
    throw DataError(path + ": datatype " + (name ? name : "?") + " (" + std::to_string(raw.datatype) +
                    ") is not supported; need a scalar integer or float volume");
  }
  return raw;
}

// What the header declares against what may be read: checked before anything
// the size of the volume is allocated.
void check_sizes(const std::string& path, const RawHeader& raw) {
  if (raw.nvox > kMaxVoxels) {
    throw DataError(path + ": declares a " + grid_text(raw.dims) + " grid (" + std::to_string(raw.nvox) +
                    " voxels), more than the " + std::to_string(kMaxVoxels) + " a volume may have");
  }
  // A plain single file must hold every voxel the header declares.
  if (raw.single_file && !raw.gzipped) {
    int nb = 0, swapsize = 0;
    nifti_datatype_sizes(raw.datatype, &nb, &swapsize);
    const int64_t need = raw.nvox * nb;  // no overflow: nvox <= kMaxVoxels, nb <= 16
    if (raw.file_size - raw.vox_offset < need) {
      throw DataError(path + ": truncated: the header declares " + grid_text(raw.dims) + " voxels (" +
                      std::to_string(need) + " bytes after byte " + std::to_string(raw.vox_offset) +
                      "), the file holds " + std::to_string(raw.file_size - raw.vox_offset));
    }
  }
}

// Called when nifticlib cannot parse a header that passed check_header: says
// "truncated" when the file holds fewer bytes than the header promises, which
// is by far the usual cause.
[[noreturn]] void throw_header_failure(const std::string& path, const RawHeader& raw, int64_t need) {
  if (raw.single_file) {
    const int64_t size = decompressed_size(path);
    if (size >= 0 && size - raw.vox_offset < need) {
      throw DataError(path + ": truncated: the header promises " + std::to_string(need) + " voxel bytes after byte " +
                      std::to_string(raw.vox_offset) + ", the file holds " +
                      std::to_string(std::max<int64_t>(0, size - raw.vox_offset)));
    }
  }
  throw DataError(path + ": nifticlib cannot read the header (inconsistent fields, or a gzipped file not named .gz)");
}

// Reads the voxels ourselves rather than with nifti_image_load, which silently
// replaces NaN and infinite floats by 0: such a volume must be rejected, not
// quietly zero-filled. Returns them in this machine's byte order.
std::vector<char> read_voxel_bytes(const std::string& path, const nifti_image& nim) {
  const std::string data_file = nim.iname ? nim.iname : path;
  const std::string where = data_file == path ? std::string("the file") : data_file;
  const int64_t need = nim.nvox * nim.nbyper;
  const int64_t size = data_file == path ? 0 : regular_file_size(data_file);
  GzFile f(gzopen(data_file.c_str(), "rb"));
  if (!f) throw DataError(path + ": cannot open " + where + ": " + std::strerror(errno));
  // Skipping by reading works the same for plain and gzipped files.
  std::vector<char> skip(static_cast<size_t>(std::min<int64_t>(nim.iname_offset, 1 << 20)));
  int64_t skipped = 0;
  while (skipped < nim.iname_offset) {
    const size_t step = static_cast<size_t>(std::min<int64_t>(nim.iname_offset - skipped, 1 << 20));
    const size_t n = gz_read_upto(f.get(), skip.data(), step);
    skipped += static_cast<int64_t>(n);
    if (n < step) break;
  }
  if (data_file != path && gzdirect(f.get()) && size - nim.iname_offset < need) {
    throw DataError(path + ": truncated: the header promises " + std::to_string(need) + " voxel bytes after byte " +
                    std::to_string(nim.iname_offset) + ", " + where + " holds " +
                    std::to_string(std::max<int64_t>(0, size - nim.iname_offset)));
  }
  // Grown slice by slice: a plain file's size was checked against `need`
  // already, but a gzip stream's length is known only by reading it.
  std::vector<char> bytes;
  size_t got = 0;
  if (skipped >= nim.iname_offset) {
    while (got < static_cast<size_t>(need)) {
      const size_t step = std::min(static_cast<size_t>(need) - got, kGzSlice);
      bytes.resize(got + step);
      const size_t n = gz_read_upto(f.get(), bytes.data() + got, step);
      got += n;
      if (n < step) break;
    }
  }
  if (static_cast<int64_t>(got) < need) {
    const std::string damage = gz_damage(f.get());
    if (damage.empty()) {
      throw DataError(path + ": truncated: the header promises " + std::to_string(need) + " voxel bytes after byte " +
                      std::to_string(nim.iname_offset) + ", " + where + " holds " + std::to_string(got));
    }
    throw DataError(path + ": corrupt gzip stream in the voxel data: " + damage);
  }
  if (!gzdirect(f.get())) {
    // zlib checks the stream's CRC only once it reads past the last byte.
    char past_end;
    (void)gzread(f.get(), &past_end, 1);
    const std::string damage = gz_damage(f.get());
    if (!damage.empty()) throw DataError(path + ": corrupt gzip stream in the voxel data: " + damage);
  }
  if (nim.byteorder != nifti_short_order() && nim.swapsize > 1) {
    nifti_swap_Nbytes(nim.nvox, nim.swapsize, bytes.data());
  }
  return bytes;
}

template <typename T>
void to_float(const void* data, int64_t n, double slope, double inter, bool scale, float* out) {
  const T* in = static_cast<const T*>(data);
  for (int64_t v = 0; v < n; ++v) {
    out[v] = scale ? static_cast<float>(static_cast<double>(in[v]) * slope + inter) : static_cast<float>(in[v]);
  }
}

std::array<double, 16> row_major(const nifti_dmat44& m) {
  std::array<double, 16> out{};
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) out[4 * r + c] = m.m[r][c];
  return out;
}

nifti_dmat44 to_dmat44(const std::array<double, 16>& a) {
  nifti_dmat44 m;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) m.m[r][c] = a[4 * r + c];
  return m;
}

std::vector<char> gzip(const std::vector<char>& bytes, const std::string& path) {
  z_stream zs{};
  // windowBits 15 + 16: the gzip wrapper that .gz readers (and nifticlib) expect.
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw DataError(path + ": cannot start gzip compression");
  }
  std::vector<char> out(deflateBound(&zs, static_cast<uLong>(bytes.size())) + 64);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  size_t in_left = bytes.size();
  size_t produced = 0;
  int rc = Z_OK;
  // avail_in / avail_out are 32-bit, so large volumes go through in slices.
  while (rc != Z_STREAM_END) {
    if (zs.avail_in == 0 && in_left > 0) {
      zs.avail_in = static_cast<uInt>(std::min<size_t>(in_left, 1u << 30));
      in_left -= zs.avail_in;
    }
    if (produced == out.size()) out.resize(out.size() * 2);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    zs.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - produced, 1u << 30));
    const uInt before = zs.avail_out;
    rc = deflate(&zs, in_left == 0 ? Z_FINISH : Z_NO_FLUSH);
    produced += before - zs.avail_out;
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      deflateEnd(&zs);
      throw DataError(path + ": gzip compression failed");
    }
  }
  deflateEnd(&zs);
  out.resize(produced);
  return out;
}

Volume read_nifti_unguarded(const std::string& path) {
  quiet_nifticlib();
  const RawHeader raw = check_header(path);
  check_sizes(path, raw);
  const int64_t nbyper = [&] {
    int nb = 0, swapsize = 0;
    nifti_datatype_sizes(raw.datatype, &nb, &swapsize);
    return static_cast<int64_t>(nb);
  }();

  NiftiImage nim(nifti_image_read(path.c_str(), 0));
  if (!nim) throw_header_failure(path, raw, raw.nvox * nbyper);
  if (nim->datatype != raw.datatype || nim->nvox != raw.nvox || nim->nbyper != nbyper) {
    throw DataError(path + ": nifticlib reads the header differently (datatype " + std::to_string(nim->datatype) +
                    ", " + std::to_string(nim->nvox) + " voxels)");
  }
  // nifticlib clamps a vox_offset it cannot hold (above INT_MAX for NIfTI-1)
  // instead of refusing it: voxels would come from the wrong place.
  if (raw.single_file && raw.vox_offset >= kNifti1VoxOffset && nim->iname_offset != raw.vox_offset) {
    throw DataError(path + ": bad vox_offset " + std::to_string(raw.vox_offset) + " (nifticlib would read voxels at " +
                    std::to_string(nim->iname_offset) + ")");
  }
  const std::vector<char> data = read_voxel_bytes(path, *nim);

  Volume vol;
  vol.dims = {nim->nx, nim->ny, nim->nz};
  vol.voxels.resize(static_cast<size_t>(nim->nvox));
  const double slope = nim->scl_slope;
  const double inter = nim->scl_inter;
  // NIfTI: scl_slope == 0 means "no scaling"; a non-finite one is treated the same
  // rather than turning every voxel into NaN. The identity is skipped so that
  // float volumes come back bit-exact (x * 1 + 0 turns -0 into +0).
  const bool scale = slope != 0.0 && std::isfinite(slope) && !(slope == 1.0 && inter == 0.0);
  float* out = vol.voxels.data();
  const int64_t n = nim->nvox;
  switch (nim->datatype) {
    case NIFTI_TYPE_UINT8: to_float<uint8_t>(data.data(), n, slope, inter, scale, out); break;
    case NIFTI_TYPE_INT8: to_float<int8_t>(data.data(), n, slope, inter, scale, out); break;
    case NIFTI_TYPE_INT16: to_float<int16_t>(data.data(), n, slope, inter, scale, out); break;
    case NIFTI_TYPE_UINT16: to_float<uint16_t>(data.data(), n, slope, inter, scale, out); break;
    case NIFTI_TYPE_INT32: to_float<int32_t>(data.data(), n, slope, inter, scale, out); break;
    case NIFTI_TYPE_UINT32: to_float<uint32_t>(data.data(), n, slope, inter, scale, out); break;
    case NIFTI_TYPE_INT64: to_float<int64_t>(data.data(), n, slope, inter, scale, out); break;
    case NIFTI_TYPE_UINT64: to_float<uint64_t>(data.data(), n, slope, inter, scale, out); break;
    case NIFTI_TYPE_FLOAT32: to_float<float>(data.data(), n, slope, inter, scale, out); break;
    case NIFTI_TYPE_FLOAT64: to_float<double>(data.data(), n, slope, inter, scale, out); break;
    default: throw DataError(path + ": unsupported datatype " + std::to_string(nim->datatype));
  }
  for (int64_t v = 0; v < n; ++v) {
    if (!std::isfinite(out[v])) {
      const int64_t i = v % vol.dims[0], j = (v / vol.dims[0]) % vol.dims[1], k = v / (vol.dims[0] * vol.dims[1]);
      throw DataError(path + ": voxel (" + std::to_string(i) + ", " + std::to_string(j) + ", " + std::to_string(k) +
                      ") is " + (std::isnan(out[v]) ? "NaN" : "infinite") +
                      (scale ? " after scl_slope/scl_inter" : ""));
    }
  }

  NiftiGeometry& g = vol.geometry;
  g.spacing = {nim->dx, nim->dy, nim->dz};
  g.qform_code = nim->qform_code;
  g.sform_code = nim->sform_code;
  g.qform = row_major(nim->qto_xyz);
  g.sform = row_major(nim->sto_xyz);
  g.xyzt_units = nim->xyz_units | nim->time_units;
  g.description.assign(nim->descrip, strnlen(nim->descrip, sizeof nim->descrip));
  // A NaN in the affine compares as equal to anything in the cohort's
  // geometry checks and turns no axis in reorientation: refused where read.
  const auto check_finite = [&](const std::array<double, 16>& m, const char* name) {
    for (size_t e = 0; e < 12; ++e)
      if (!std::isfinite(m[e]))
        throw DataError(path + ": its " + name + " holds " + (std::isnan(m[e]) ? "NaN" : "an infinity") + " (row " +
                        std::to_string(e / 4) + ", column " + std::to_string(e % 4) + ")");
  };
  if (g.sform_code > 0) check_finite(g.sform, "sform");
  if (g.qform_code > 0) check_finite(g.qform, "qform (quaternion, offsets and pixdim)");
  return vol;
}

}  // namespace

Volume read_nifti(const std::string& path) {
  return guard_memory(path, "a NIfTI volume", [&] { return read_nifti_unguarded(path); });
}

std::array<int64_t, 3> read_nifti_grid(const std::string& path) {
  return guard_memory(path, "a NIfTI header", [&] { return check_header(path).dims; });
}

void write_nifti(const std::string& path, const Volume& volume) {
  quiet_nifticlib();
  const bool gzipped = ends_with(path, ".nii.gz");
  if (!gzipped && !ends_with(path, ".nii")) {
    throw UsageError(path + ": a NIfTI output path must end in .nii or .nii.gz");
  }
  int64_t count = 1;
  for (int d = 0; d < 3; ++d) {
    // NIfTI-1 stores dims as 16-bit shorts.
    if (volume.dims[d] < 1 || volume.dims[d] > SHRT_MAX) {
      throw UsageError(path + ": volume dim " + std::to_string(d) + " = " + std::to_string(volume.dims[d]) +
                       " (NIfTI-1 needs 1.." + std::to_string(SHRT_MAX) + ")");
    }
    count *= volume.dims[d];
  }
  if (static_cast<int64_t>(volume.voxels.size()) != count) {
    throw UsageError(path + ": volume has " + std::to_string(volume.voxels.size()) + " voxels, its dims " +
                     std::to_string(volume.dims[0]) + "x" + std::to_string(volume.dims[1]) + "x" +
                     std::to_string(volume.dims[2]) + " need " + std::to_string(count));
  }

  const NiftiGeometry& g = volume.geometry;
  nifti_1_header h;
  std::memset(&h, 0, sizeof h);
  h.sizeof_hdr = kNifti1HeaderSize;
  h.regular = 'r';
  h.dim[0] = 3;
  for (int d = 1; d <= 7; ++d) h.dim[d] = d <= 3 ? static_cast<short>(volume.dims[d - 1]) : 1;
  h.datatype = NIFTI_TYPE_FLOAT32;
  h.bitpix = 32;
  for (int d = 0; d <= 7; ++d) h.pixdim[d] = 1.0f;
  for (int d = 1; d <= 3; ++d) h.pixdim[d] = static_cast<float>(g.spacing[d - 1]);
  h.vox_offset = static_cast<float>(kNifti1VoxOffset);
  h.scl_slope = 1.0f;
  h.scl_inter = 0.0f;
  h.xyzt_units = static_cast<char>(g.xyzt_units & 0xFF);
  std::strncpy(h.descrip, g.description.c_str(), sizeof h.descrip - 1);

  h.qform_code = static_cast<short>(g.qform_code);
  h.sform_code = static_cast<short>(g.sform_code);
  if (g.qform_code > 0) {
    double qb, qc, qd, qx, qy, qz, dx, dy, dz, qfac;
    nifti_dmat44_to_quatern(to_dmat44(g.qform), &qb, &qc, &qd, &qx, &qy, &qz, &dx, &dy, &dz, &qfac);
    h.quatern_b = static_cast<float>(qb);
    h.quatern_c = static_cast<float>(qc);
    h.quatern_d = static_cast<float>(qd);
    h.qoffset_x = static_cast<float>(qx);
    h.qoffset_y = static_cast<float>(qy);
    h.qoffset_z = static_cast<float>(qz);
    // A reader rebuilds the qform from the quaternion and pixdim, so pixdim
    // must be the qform's own voxel size (and pixdim[0] its handedness).
    h.pixdim[0] = static_cast<float>(qfac);
    h.pixdim[1] = static_cast<float>(dx);
    h.pixdim[2] = static_cast<float>(dy);
    h.pixdim[3] = static_cast<float>(dz);
  }
  for (int c = 0; c < 4; ++c) {
    h.srow_x[c] = static_cast<float>(g.sform[c]);
    h.srow_y[c] = static_cast<float>(g.sform[4 + c]);
    h.srow_z[c] = static_cast<float>(g.sform[8 + c]);
  }
  std::memcpy(h.magic, "n+1", 4);

  static_assert(sizeof(nifti_1_header) == kNifti1HeaderSize, "nifti_1_header layout");
  std::vector<char> bytes(kNifti1VoxOffset + volume.voxels.size() * sizeof(float), 0);
  std::memcpy(bytes.data(), &h, sizeof h);
  // bytes 348..351 stay zero: "no extensions".
  std::memcpy(bytes.data() + kNifti1VoxOffset, volume.voxels.data(), volume.voxels.size() * sizeof(float));
  if (gzipped) bytes = gzip(bytes, path);
  write_file_atomic(path, bytes);
}

}  // namespace qkv::medical
