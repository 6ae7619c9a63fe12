#include "qkv/pointcloud/render.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"

namespace qkv::pointcloud {
using namespace picture;  // the drawing of the pictures
namespace {

constexpr int64_t kMargin = 12;
constexpr Rgb kBlack{0, 0, 0}, kGrey{90, 90, 90}, kMarker{0, 200, 255};

// Every pixel within `radius` of (px, py), shaded a little toward the rim so
// that overlapping discs read as surfaces.
void draw_disc(RgbImage& image, double px, double py, double radius, Rgb c) {
  for (auto y = static_cast<int64_t>(py - radius); y <= static_cast<int64_t>(py + radius); ++y)
    for (auto x = static_cast<int64_t>(px - radius); x <= static_cast<int64_t>(px + radius); ++x) {
      const double d2 = (x - px) * (x - px) + (y - py) * (y - py);
      if (d2 > radius * radius) continue;
      const double shade = 1.0 - 0.35 * d2 / (radius * radius);
      image.set(
          x, y,
          {static_cast<uint8_t>(c[0] * shade), static_cast<uint8_t>(c[1] * shade), static_cast<uint8_t>(c[2] * shade)});
    }
}

// A ring of the given thickness, blended at its edges.
void draw_ring(RgbImage& image, double px, double py, double radius, double thickness, Rgb c) {
  const double reach = radius + thickness;
  for (auto y = static_cast<int64_t>(py - reach); y <= static_cast<int64_t>(py + reach); ++y)
    for (auto x = static_cast<int64_t>(px - reach); x <= static_cast<int64_t>(px + reach); ++x) {
      const double d = std::hypot(x - px, y - py);
      const double coverage = std::clamp(thickness / 2 + 0.5 - std::abs(d - radius), 0.0, 1.0);
      if (coverage > 0) image.blend(x, y, c, coverage);
    }
}

}  // namespace

std::vector<uint8_t> render_points_png(const Mesh& cloud, const PointPicture& picture) {
  if (cloud.vertices.empty()) throw DataError("render_points_png: empty point cloud");
  const size_t n = cloud.vertices.size();
  if (picture.marked_point >= static_cast<int64_t>(n))
    throw DataError("render_points_png: marked point " + std::to_string(picture.marked_point) + " of " +
                    std::to_string(n));
  if (picture.size < 64 || picture.size > 8192)
    throw DataError("render_points_png: size " + std::to_string(picture.size) + " is outside 64..8192");
  const int64_t size = picture.size;

  // Layout: title band, the cloud's square, the side panel (bar, legend), notes.
  const int64_t title_h = picture.title.empty() ? 0 : text_height(TextSize::Large) + kMargin;
  const int64_t bar_w = 22, bar_h = std::min<int64_t>(size / 2, 240);
  int64_t panel_w = 0;
  if (picture.colourbar)
    panel_w = colourbar_width(bar_w, bar_h, picture.bar_lo, picture.bar_hi, picture.bar_label) + kMargin;
  for (const auto& [name, colour] : picture.legend)
    panel_w = std::max(panel_w, text_height(TextSize::Small) + 8 + text_width(name, TextSize::Small) + 2 * kMargin);
  const int64_t notes_h = static_cast<int64_t>(picture.notes.size()) * (text_height(TextSize::Small) + 3);
  RgbImage image(size + panel_w, title_h + size + notes_h + (notes_h ? kMargin : 0));
  if (!picture.title.empty()) draw_text(image, kMargin, kMargin / 2 + 2, picture.title, kBlack, TextSize::Large);

  // Camera: yaw 35 degrees about y (up), then pitch 25 degrees down.
  const double yaw = 35 * M_PI / 180, pitch = 25 * M_PI / 180;
  std::vector<std::array<double, 3>> view(n);  // screen x, screen y, depth
  for (size_t i = 0; i < n; ++i) {
    const auto& v = cloud.vertices[i];
    const double x1 = std::cos(yaw) * v[0] + std::sin(yaw) * v[2], z1 = -std::sin(yaw) * v[0] + std::cos(yaw) * v[2];
    const double y2 = std::cos(pitch) * v[1] - std::sin(pitch) * z1, z2 = std::sin(pitch) * v[1] + std::cos(pitch) * z1;
    view[i] = {x1, y2, z2};
  }
  double cx = 0, cy = 0, extent = 1e-12;
  for (const auto& p : view) cx += p[0] / static_cast<double>(n), cy += p[1] / static_cast<double>(n);
  for (const auto& p : view) extent = std::max({extent, std::abs(p[0] - cx), std::abs(p[1] - cy)});
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return view[a][2] < view[b][2]; });
  const double scale = 0.45 * static_cast<double>(size) / extent;
  const double radius = std::max(1.5, static_cast<double>(size) / 160.0);
  auto screen = [&](size_t i) {
    return std::pair<double, double>{
        static_cast<double>(size) / 2.0 + (view[i][0] - cx) * scale,
        static_cast<double>(title_h) + static_cast<double>(size) / 2.0 - (view[i][1] - cy) * scale};
  };
  for (const size_t i : order) {
    const auto [px, py] = screen(i);
    draw_disc(image, px, py, radius, cloud.colors.empty() ? Rgb{110, 110, 110} : cloud.colors[i]);
  }
  if (picture.marked_point >= 0) {
    // Over everything, also when the point is hidden behind others: a dark
    // and a bright ring read on both ends of the colour map.
    const auto i = static_cast<size_t>(picture.marked_point);
    const auto [px, py] = screen(i);
    draw_disc(image, px, py, radius, cloud.colors.empty() ? Rgb{110, 110, 110} : cloud.colors[i]);
    draw_ring(image, px, py, 3.5 * radius, 3.0, kBlack);
    draw_ring(image, px, py, 3.5 * radius, 1.5, kMarker);
    if (!picture.marked_label.empty())
      draw_text(image, static_cast<int64_t>(px + 3.5 * radius + 6),
                static_cast<int64_t>(py) - text_height(TextSize::Small) / 2, picture.marked_label, kBlack);
  }

  int64_t panel_y = title_h + kMargin + 2 * text_height(TextSize::Small);
  if (picture.colourbar) {
    draw_colourbar(image, size, panel_y, bar_w, bar_h, picture.bar_lo, picture.bar_hi, picture.bar_label);
    panel_y += bar_h + 2 * kMargin + text_height(TextSize::Small);
  }
  if (!picture.legend.empty()) draw_legend(image, size, panel_y, picture.legend);
  int64_t note_y = title_h + size;
  for (const auto& note : picture.notes) {
    draw_text(image, kMargin, note_y, note, kGrey);
    note_y += text_height(TextSize::Small) + 3;
  }
  return encode_png(image, "point-cloud picture");
}

void write_points_png(const std::string& path, const Mesh& cloud, const PointPicture& picture) {
  const auto png = render_points_png(cloud, picture);
  write_file_atomic(path, png.data(), png.size());
}

Rgb part_colour(int64_t local_part) {
  static const Rgb palette[] = {{228, 26, 28}, {55, 126, 184}, {77, 175, 74},   {152, 78, 163},
                                {255, 127, 0}, {166, 86, 40},  {247, 129, 191}, {153, 153, 153}};
  return palette[static_cast<size_t>(local_part) % (sizeof palette / sizeof palette[0])];
}

}  // namespace qkv::pointcloud
