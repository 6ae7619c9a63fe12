#pragma once
// Built-in synthetic shapes: procedural triangle meshes of everyday classes
// (box, mug, chair, airplane, ...) written as a ModelNet40-style OFF tree, so
// that the point-cloud models can be trained and tested with no download.
//
// Every shape is in a canonical pose like ModelNet40's aligned meshes: y is
// up, the shape stands on the plane y = 0, its bounding box is centred on the
// y axis and its largest extent is 1. No random rotation is applied (that is
// the job of the data-set transforms); what is random is the proportions and
// the details (leg shape, back style, engines, ...), drawn from a
// std::mt19937_64 seeded per shape. The ranges are chosen so that no class can
// turn into another: classes differ by shape alone, not by size or pose.
//
// Every shape is a union of closed, outward-wound parts (faces counter-
// clockwise seen from outside), so its signed volume is positive.
#include <cstdint>
#include <string>
#include <vector>

#include "qkv/core/fields.h"
#include "qkv/pointcloud/mesh.h"

namespace qkv::pointcloud {

// The class names, in a fixed order.
std::vector<std::string> synth_shape_classes();

// One line on what the class is and what varies between its instances.
// UsageError for an unknown class.
std::string synth_shape_description(const std::string& cls);

// The parts of a class built from named parts (airplane, chair, guitar, lamp,
// mug, table): names in the order of the labels that make_synth_shape puts in
// Mesh::face_parts. Empty for the other classes, whose meshes carry no labels.
std::vector<std::string> synth_shape_part_names(const std::string& cls);

// One instance of a class; the same (cls, seed) always gives the same mesh.
// UsageError for an unknown class (the message lists the known ones).
Mesh make_synth_shape(const std::string& cls, uint64_t seed);

// The seed of file number `index` (1-based) of a class in a tree written with
// `seed`: a hash of the three, so that adding classes or files leaves the
// other files unchanged.
uint64_t synth_shape_seed(uint64_t seed, const std::string& cls, int64_t index);

struct SynthShapesOptions {
  int64_t train_per_class = 40;
  int64_t test_per_class = 10;
  uint64_t seed = 0;
  std::vector<std::string> classes;  // empty = all, in synth_shape_classes() order
};

template <typename V>
void visit_fields(SynthShapesOptions& o, V&& visit) {
  visit(Field{"train_per_class", "training shapes per class"}.range(1, 100000), o.train_per_class);
  visit(Field{"test_per_class", "test shapes per class"}.range(1, 100000), o.test_per_class);
  visit(Field{"seed", "random seed; the same seed writes the same files"}.range(0, kMaxSeed), o.seed);
  visit(Field{"classes", "comma-separated classes to write (default: all, see --list)"}, o.classes);
}

struct SynthShapesSummary {
  std::string out_dir;
  std::vector<std::string> classes;
  int64_t train_files = 0;
  int64_t test_files = 0;
  int64_t files() const { return train_files + test_files; }
};

// UsageError naming the option of the first unusable setting (negative
// counts, no files at all, an unknown or repeated class), before anything is
// written; write_synth_shapes checks it first.
void check_synth_shapes_options(const SynthShapesOptions& options);

// Writes <out>/<class>/train/<class>_0001.off ... <class>_<train>.off and
// <out>/<class>/test/<class>_<train+1>.off ... (ModelNet40's OFF tree: the
// numbering continues from train into test), plus <out>/README.txt saying what
// the tree is, the seed and the counts. The same options give byte-identical
// files. UsageError (naming the option) for negative counts, no files at all,
// an unknown or repeated class. Whether `out_dir` may be written is the
// caller's to decide (tasks claim it, core/output_policy.h).
SynthShapesSummary write_synth_shapes(const std::string& out_dir, const SynthShapesOptions& options);

}  // namespace qkv::pointcloud
