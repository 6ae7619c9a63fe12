#pragma once
// Built-in synthetic part-segmentation data: the procedural shapes of
// synth_shapes that are built from named parts (airplane: body, wing, tail,
// engine; chair: back, seat, leg, arm; guitar: head, neck, body; lamp: base,
// shade, bulb, pole; mug: handle, body; table: top, leg, support), sampled on
// their surfaces with a part label per point and written in ShapeNet-part's
// text layout under the matching ShapeNet category, whose global part ids
// they take (Airplane 0-3, Chair 12-15, ...), so that the real reader loads it.
#include <cstdint>
#include <string>
#include <vector>

#include "qkv/core/fields.h"

namespace qkv::pointcloud {

// The ShapeNet-part categories the generator can write, in its order.
std::vector<std::string> synth_part_categories();
// The part names of one of them, in the order of its part ids.
std::vector<std::string> synth_part_names(const std::string& category);

struct SynthPartsOptions {
  int64_t train_per_category = 32;
  int64_t val_per_category = 8;
  int64_t test_per_category = 8;
  int64_t points_per_shape = 2600;  // surface samples written per shape (ShapeNet-part files hold ~2,600)
  uint64_t seed = 0;
  std::vector<std::string> categories;  // empty = all synth_part_categories()
};

// ShapeNet-part's categories are classes here, as in every qkv command.
template <typename V>
void visit_fields(SynthPartsOptions& o, V&& visit) {
  visit(Field{"train_per_category", "training shapes per class", "train-per-class"}.range(1, 100000).was(
            "train-per-category"),
        o.train_per_category);
  // At least 1: seg train reads ShapeNet-part's val list, as its own --synth-val-per-class says.
  visit(Field{"val_per_category", "validation shapes per class", "val-per-class"}.range(1, 100000).was(
            "val-per-category"),
        o.val_per_category);
  visit(Field{"test_per_category", "test shapes per class", "test-per-class"}.range(1, 100000).was("test-per-category"),
        o.test_per_category);
  visit(Field{"points_per_shape", "surface points written per shape"}.range(1, 1 << 20), o.points_per_shape);
  visit(Field{"seed", "random seed; the same seed writes the same files"}.range(0, kMaxSeed), o.seed);
  visit(Field{"categories", "comma-separated classes (default: all, see --list)", "classes"}.was("categories"),
        o.categories);
}

struct SynthPartsSummary {
  std::vector<std::string> categories;
  int64_t shapes[3] = {0, 0, 0};  // train, val, test
  int64_t files() const { return shapes[0] + shapes[1] + shapes[2]; }
};

// UsageError naming the option of the first unusable setting (negative
// counts, nothing to write, no points, an unknown or repeated category),
// before anything is written; returns the categories' names.
std::vector<std::string> check_synth_parts_options(const SynthPartsOptions& options);

// Writes synsetoffset2category.txt, <synset>/<token>.txt ("x y z nx ny nz
// part" lines: surface points, unit face normals, global part ids),
// train_test_split/shuffled_{train,val,test}_file_list.json and README.txt.
// The same options give byte-identical files. UsageError (naming the option)
// for negative counts, nothing to write, an unknown or repeated category.
// Whether `out_dir` may be written is the caller's to decide (tasks claim it,
// core/output_policy.h).
SynthPartsSummary write_synth_parts(const std::string& out_dir, const SynthPartsOptions& options);

}  // namespace qkv::pointcloud
