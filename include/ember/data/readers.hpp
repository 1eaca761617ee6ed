// ember/data/readers.hpp — file readers: IDX (MNIST-style tensors) and numeric CSV.
//
// Every reader throws ember::Error naming the file and what is wrong with it: a corrupt
// or truncated file never yields a partial tensor.
//
//   Tensor images = data::read_idx("train-images-idx3-ubyte.gz");       // u8 [60000, 28, 28]
//   data::CsvData iris = data::read_csv("iris.csv", {.label_column = "species"});
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ember/tensor.hpp"

namespace ember::data {

// ---- IDX ----
//
// Layout: magic bytes 0x00 0x00 <type> <rank>, `rank` big-endian u32 sizes, then the
// elements in row-major order, big-endian. Type codes and the dtype each is read as:
//   0x08 u8 -> u8    0x09 i8 -> i32    0x0B i16 -> i32
//   0x0C i32 -> i32  0x0D f32 -> f32   0x0E f64 -> f64
// A file starting with the gzip magic (1f 8b) is decompressed as it is read.

/// Reads an IDX file (plain or gzip-compressed) into a CPU tensor. Throws when the magic,
/// type code, rank (1 to 8) or sizes are invalid, or when the data is shorter or longer
/// than the sizes say. Example: Tensor y = read_idx("t10k-labels-idx1-ubyte.gz");  // u8 [10000]
Tensor read_idx(const std::string& path);

/// Writes `t` (u8, i32, f32 or f64; rank 1 to 8) as an IDX file, gzip-compressed when `gzip`.
/// Example: write_idx("labels-idx1-ubyte.gz", labels.to(DType::u8), true);
void write_idx(const std::string& path, const Tensor& t, bool gzip = false);

// ---- CSV ----

struct CsvOptions {
  /// The label column, by header name or by 0-based index (negative counts from the end).
  std::variant<int64_t, std::string> label_column = int64_t{-1};
  /// False: the file has no label column; every column is a feature (labels undefined).
  bool has_label = true;
  /// Whether the first line names the columns. Unset (the default): it does unless every
  /// field in it parses as a number, in which case it is the first data row. Set true to
  /// force a header (columns named by numbers), false to force data (`--no-header`).
  std::optional<bool> has_header = std::nullopt;
  char delimiter = ',';
  /// Text labels' class names, class i first (as CsvData::classes returns them). Empty (the
  /// default): a label column that is not all numbers is mapped to the sorted distinct
  /// labels (Note [CSV text labels]). Given: every label is looked up here, so a test file
  /// gets its training file's indices, and a label not in the list is an error.
  std::vector<std::string> classes{};
};

struct CsvData {
  Tensor inputs{};  // f32 [N, F]: every column but the label, in order
  Tensor labels{};  // [N]: i64 when every label is an integer or text labels were mapped,
                    // else f32 (undefined when has_label is false)
  std::vector<std::string> feature_names{};  // F names ("0", "1", ... without a header)
  std::string label_name{};
  /// Text labels: the class names, index i = class i (sorted, or options.classes). Empty
  /// when the labels are numbers.
  std::vector<std::string> classes{};
};

/// Reads a CSV file of numeric features: one example per line, fields separated by
/// `delimiter`, optionally double-quoted; blank lines are skipped. The label column may hold
/// numbers or text (class names, mapped to indices in sorted order: Note [CSV text labels]
/// in src/data/csv.cpp). The first line is a header unless
/// has_header says otherwise or (has_header unset) every field in it is a number. Throws naming the
/// file, the line and the field for a field that is not a number or a row with the wrong number of
/// fields, and for an empty file, a file with no data rows or an unknown label column. Example:
/// CsvData d = read_csv("data.csv", {.label_column = 0, .has_header = false});
CsvData read_csv(const std::string& path, const CsvOptions& options = {});

}  // namespace ember::data
