// Renders printable ASCII (32..126) of a TrueType font at two pixel sizes into
// the C++ source of src/qkv/picture/glyphs.inc (on stdout): 8-bit anti-aliased
// coverage bitmaps, their placement, advances and kerning pairs. Built and run
// by scripts/make-glyphs; not part of the CMake build (it needs FreeType, qkv
// does not).
//
//   make_glyphs FONT.ttf SMALL_PX LARGE_PX > glyphs.inc
#include <ft2build.h>
#include FT_FREETYPE_H
#include FT_TRUETYPE_TABLES_H

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

constexpr int kFirst = 32, kLast = 126, kCount = kLast - kFirst + 1;
constexpr int kBytesPerLine = 24;  // hex bytes per line of the coverage array

// The font's licence, reproduced in the output as the licence asks of copies.
constexpr const char* kVeraLicence[] = {
    "Copyright (c) 2003 by Bitstream, Inc. All Rights Reserved. Bitstream Vera is a trademark of Bitstream, Inc.",
    "DejaVu changes are in public domain.",
    "",
    "Permission is hereby granted, free of charge, to any person obtaining a copy of the fonts accompanying this",
    "license (\"Fonts\") and associated documentation files (the \"Font Software\"), to reproduce and distribute the",
    "Font Software, including without limitation the rights to use, copy, merge, publish, distribute, and/or sell",
    "copies of the Font Software, and to permit persons to whom the Font Software is furnished to do so, subject",
    "to the following conditions:",
    "",
    "The above copyright and trademark notices and this permission notice shall be included in all copies of one",
    "or more of the Font Software typefaces.",
    "",
    "The Font Software may be modified, altered, or added to, and in particular the designs of glyphs or",
    "characters in the Fonts may be modified and additional glyphs or characters may be added to the Fonts, only",
    "if the fonts are renamed to names not containing either the words \"Bitstream\" or the word \"Vera\".",
    "",
    "This License becomes null and void to the extent applicable to Fonts or Font Software that has been",
    "modified and is distributed under the \"Bitstream Vera\" names.",
    "",
    "The Font Software may be sold as part of a larger software package but no copy of one or more of the Font",
    "Software typefaces may be sold by itself.",
    "",
    "THE FONT SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT",
    "LIMITED TO ANY WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT OF",
    "COPYRIGHT, PATENT, TRADEMARK, OR OTHER RIGHT. IN NO EVENT SHALL BITSTREAM OR THE GNOME FOUNDATION BE LIABLE",
    "FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, INCLUDING ANY GENERAL, SPECIAL, INDIRECT, INCIDENTAL, OR",
    "CONSEQUENTIAL DAMAGES, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF THE USE OR",
    "INABILITY TO USE THE FONT SOFTWARE OR FROM OTHER DEALINGS IN THE FONT SOFTWARE.",
    "",
    "Except as contained in this notice, the names of Gnome, the Gnome Foundation, and Bitstream Inc., shall not",
    "be used in advertising or otherwise to promote the sale, use or other dealings in this Font Software without",
    "prior written authorization from the Gnome Foundation or Bitstream Inc., respectively. For further",
    "information, contact: fonts at gnome dot org.",
};

struct Glyph {
  uint32_t offset = 0;
  int width = 0, height = 0, left = 0, top = 0, advance = 0;
};

struct Kern {
  int left, right, dx;
};

struct Face {
  int pixel_size = 0, ascent = 0, descent = 0;
  std::vector<Glyph> glyphs;
  std::vector<Kern> kerning;
};

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "make_glyphs: %s\n", message.c_str());
  std::exit(1);
}

bool fits_int8(int v) { return v >= -128 && v <= 127; }

// Renders one size, appending the bitmaps to `coverage`.
Face render(FT_Face face, int pixel_size, std::vector<uint8_t>& coverage) {
  if (FT_Set_Pixel_Sizes(face, 0, static_cast<FT_UInt>(pixel_size))) fail("cannot set the pixel size");
  Face out;
  out.pixel_size = pixel_size;
  for (int c = kFirst; c <= kLast; ++c) {
    const FT_UInt index = FT_Get_Char_Index(face, static_cast<FT_ULong>(c));
    if (index == 0) fail("the font has no glyph for character " + std::to_string(c));
    // The font's own hinting at the default target: crisp stems, whole-pixel advances.
    if (FT_Load_Glyph(face, index, FT_LOAD_DEFAULT) || FT_Render_Glyph(face->glyph, FT_RENDER_MODE_NORMAL))
      fail("cannot render character " + std::to_string(c));
    const FT_GlyphSlot slot = face->glyph;
    const FT_Bitmap& bitmap = slot->bitmap;
    if (bitmap.pixel_mode != FT_PIXEL_MODE_GRAY || bitmap.num_grays != 256) fail("unexpected bitmap format");
    Glyph g;
    g.offset = static_cast<uint32_t>(coverage.size());
    g.width = static_cast<int>(bitmap.width);
    g.height = static_cast<int>(bitmap.rows);
    g.left = slot->bitmap_left;
    g.top = slot->bitmap_top;
    g.advance = static_cast<int>((slot->advance.x + 32) >> 6);
    if (g.width > 255 || g.height > 255 || !fits_int8(g.left) || !fits_int8(g.top) || g.advance > 255 || g.advance < 0)
      fail("character " + std::to_string(c) + " does not fit the table's field sizes");
    for (int y = 0; y < g.height; ++y) {
      const uint8_t* row = bitmap.buffer + static_cast<ptrdiff_t>(y) * bitmap.pitch;
      coverage.insert(coverage.end(), row, row + g.width);
    }
    if (g.height > 0) {
      out.ascent = std::max(out.ascent, g.top);
      out.descent = std::max(out.descent, g.height - g.top);
    }
    out.glyphs.push_back(g);
  }
  if (FT_HAS_KERNING(face)) {
    for (int a = kFirst; a <= kLast; ++a)
      for (int b = kFirst; b <= kLast; ++b) {
        FT_Vector k{};
        if (FT_Get_Kerning(face, FT_Get_Char_Index(face, static_cast<FT_ULong>(a)),
                           FT_Get_Char_Index(face, static_cast<FT_ULong>(b)), FT_KERNING_DEFAULT, &k))
          fail("cannot read the kerning table");
        const int dx = static_cast<int>(k.x >> 6);  // grid-fitted: whole pixels
        if (dx != 0) {
          if (!fits_int8(dx)) fail("a kerning value does not fit int8_t");
          out.kerning.push_back({a, b, dx});
        }
      }
  }
  return out;
}

std::string char_comment(int c) {
  if (c == '\\') return "backslash";
  if (c == ' ') return "space";
  return std::string("'") + static_cast<char>(c) + "'";
}

void print_face(const Face& f, const char* name) {
  std::printf("\n// %d px: every glyph lies within %d rows above and %d rows below the baseline.\n", f.pixel_size,
              f.ascent, f.descent);
  std::printf("constexpr GlyphBitmap k%sGlyphs[%d] = {\n", name, kCount);
  for (int i = 0; i < kCount; ++i) {
    const Glyph& g = f.glyphs[static_cast<size_t>(i)];
    std::printf("    {%u, %d, %d, %d, %d, %d},  // %s\n", g.offset, g.width, g.height, g.left, g.top, g.advance,
                char_comment(kFirst + i).c_str());
  }
  std::printf("};\n");
  std::printf("constexpr GlyphKern k%sKerning[%zu] = {", name, std::max<size_t>(f.kerning.size(), 1));
  if (f.kerning.empty()) std::printf("{0, 0, 0}");  // no pairs: one that never matches
  for (size_t i = 0; i < f.kerning.size(); ++i) {
    const Kern& k = f.kerning[i];
    std::printf("%s{%d, %d, %d},", i % 8 == 0 ? "\n    " : " ", k.left, k.right, k.dx);
  }
  std::printf("\n};\n");
  std::printf("constexpr GlyphFace k%sFace{%d, %d, %d, k%sGlyphs, k%sKerning, %zu};\n", name, f.pixel_size, f.ascent,
              f.descent, name, name, f.kerning.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) fail("usage: make_glyphs FONT.ttf SMALL_PX LARGE_PX");
  const std::string font_path = argv[1];
  const int small_px = std::atoi(argv[2]), large_px = std::atoi(argv[3]);
  if (small_px < 4 || small_px > 64 || large_px < 4 || large_px > 64) fail("pixel sizes must be 4..64");

  FT_Library library;
  if (FT_Init_FreeType(&library)) fail("cannot start FreeType");
  FT_Face face;
  if (FT_New_Face(library, font_path.c_str(), 0, &face)) fail("cannot open " + font_path);
  FT_Int major = 0, minor = 0, patch = 0;
  FT_Library_Version(library, &major, &minor, &patch);
  const auto* head = static_cast<const TT_Header*>(FT_Get_Sfnt_Table(face, FT_SFNT_HEAD));
  const double revision = head ? head->Font_Revision / 65536.0 : 0.0;
  const std::string font_name = font_path.substr(font_path.find_last_of('/') + 1);

  std::vector<uint8_t> coverage;
  const Face small = render(face, small_px, coverage);
  const Face large = render(face, large_px, coverage);

  std::printf("// GENERATED by scripts/make-glyphs from %s %s (%s, font revision %.2f, FreeType %d.%d.%d).\n",
              face->family_name, face->style_name, font_name.c_str(), revision, major, minor, patch);
  std::printf("// Do not edit: change scripts/make_glyphs.cpp or the sizes in scripts/make-glyphs and run it again.\n");
  std::printf(
      "//\n// The glyph bitmaps below are rendered from DejaVu Sans, a derivative of Bitstream Vera, under the\n");
  std::printf("// Bitstream Vera licence:\n//\n");
  for (const char* line : kVeraLicence) std::printf("//%s%s\n", *line ? "   " : "", line);
  std::printf(
      "//\n"
      "// Printable ASCII %d..%d at two sizes, hinted by the font, with 8-bit anti-aliased coverage (0 none, 255\n"
      "// full), rows top first. Included by qkv/picture/raster.cpp inside its own anonymous namespace; needs "
      "<cstdint>.\n\n",
      kFirst, kLast);
  std::printf(
      "struct GlyphBitmap {\n"
      "  uint32_t offset;  // index of its top-left coverage byte in kGlyphCoverage\n"
      "  uint8_t width, height;  // of the bitmap (0 x 0 for a space)\n"
      "  int8_t left;  // columns from the pen position to the bitmap's left edge\n"
      "  int8_t top;  // rows from the bitmap's top edge down to the baseline\n"
      "  uint8_t advance;  // columns the pen moves on to the next character\n"
      "};\n\n"
      "struct GlyphKern {\n"
      "  uint8_t left, right;  // the pair of characters\n"
      "  int8_t dx;  // columns added to the left one's advance\n"
      "};\n\n"
      "struct GlyphFace {\n"
      "  int pixel_size;  // the em square, in pixels\n"
      "  int ascent, descent;  // every glyph's ink lies within these rows above and below the baseline\n"
      "  const GlyphBitmap* glyphs;  // %d, for characters %d..%d\n"
      "  const GlyphKern* kerning;  // sorted by (left, right)\n"
      "  int kerning_pairs;\n"
      "};\n\n",
      kCount, kFirst, kLast);
  std::printf("constexpr int kFirstGlyph = %d, kLastGlyph = %d;\n\n", kFirst, kLast);
  std::printf("constexpr uint8_t kGlyphCoverage[%zu] = {", coverage.size());
  for (size_t i = 0; i < coverage.size(); ++i)
    std::printf("%s0x%02x,", i % kBytesPerLine == 0 ? "\n    " : "", coverage[i]);
  std::printf("\n};\n");
  print_face(small, "Small");
  print_face(large, "Large");

  FT_Done_Face(face);
  FT_Done_FreeType(library);
  return 0;
}
