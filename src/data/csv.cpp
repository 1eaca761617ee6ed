// src/data/csv.cpp — CSV reader: numeric features, numeric or text labels.
//
// One example per line; every column but the label becomes an f32 feature, the label
// column becomes i64 (all integers, or text labels mapped to class indices) or f32. Fields may be
// double-quoted ("" is a quote inside quotes); quoted fields cannot span lines. Whitespace around a
// field is ignored, as are blank lines, a UTF-8 byte-order mark and Windows line ends. Errors name
// the file, the 1-based line number and the 1-based field number.
//
// Note [CSV header detection]
// With has_header unset, the first non-blank line is a header unless every one of its
// fields parses as a number: a file of numbers alone starts with data, so its first row is
// not lost, while a header needs only one non-numeric name. has_header forces either way:
// true for a header made only of numbers ("0,1,2"); false for data, so that a non-number
// in the first line is reported as a bad field instead of being taken for a header.
//
// Note [CSV text labels]
// A label column that is not all numbers holds class names. They are mapped to class indices
// in sorted (byte-wise) order of the distinct names, as sklearn's LabelEncoder does, so the
// mapping depends only on which names occur, not on the order of the rows: a shuffled copy
// of the file, or a test file with every class, maps the same way. PyTorch has no CSV
// reader; its datasets (ImageFolder) sort class names too. CsvData::classes lists the names
// (index i = class i). CsvOptions::classes imposes a mapping instead (the training file's,
// for a test file or for prediction): then every label must be in it, and an unknown label
// is an error naming it and the known classes. A numeric label column with classes given is
// looked up as text too ("3" must be a listed name).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string_view>
#include <vector>

#include "ember/data/readers.hpp"

namespace ember::data {
namespace {

constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53: larger doubles skip integers

template <typename... Args>
[[noreturn]] void fail(const std::string& where, const Args&... args) {
  detail::throw_error(detail::concat("read_csv: ", where, ": ", args...));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_blank(std::string_view s) { return trim(s).empty(); }

// Splits `line` into trimmed fields; returns an error message (empty on success).
std::string split_fields(std::string_view line, char delimiter, std::vector<std::string>& fields) {
  fields.clear();
  size_t i = 0;
  for (;;) {
    std::string field;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i < line.size() && line[i] == '"') {
      ++i;
      for (;;) {
        if (i >= line.size())
          return detail::concat("field ", fields.size() + 1, " has an unterminated quote");
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += line[i++];
      }
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i < line.size() && line[i] != delimiter)
        return detail::concat("field ", fields.size() + 1, " has text after its closing quote");
    } else {
      const size_t start = i;
      while (i < line.size() && line[i] != delimiter) ++i;
      field = std::string(trim(line.substr(start, i - start)));
    }
    fields.push_back(std::move(field));
    if (i >= line.size()) return {};
    ++i;  // the delimiter
  }
}

// Parses a whole field as a number; returns an error message (empty on success).
std::string parse_number(std::string_view text, double& value) {
  std::string_view s = trim(text);
  if (s.empty()) return "is empty (expected a number)";
  if (s.front() == '+') s.remove_prefix(1);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec == std::errc::result_out_of_range) return "is out of range for a number";
  if (ec != std::errc() || end != s.data() + s.size()) return "is not a number";
  return {};
}

// Resolves the label column to an index in [0, columns).
int64_t label_index(const std::string& path, const CsvOptions& options, bool has_header,
                    const std::vector<std::string>& names, int64_t columns) {
  if (const auto* name = std::get_if<std::string>(&options.label_column)) {
    if (!has_header && options.has_header.has_value())
      fail(path, "label column '", *name,
           "' is given by name but has_header is false (give an index)");
    if (!has_header)
      fail(
          path, "label column '", *name,
          "' is given by name but the first line is all numbers, so it was read "
          "as data, not a header (give an index, or set has_header = true to read it as a header)");
    int64_t found = -1;
    for (size_t c = 0; c < names.size(); ++c) {
      if (names[c] != *name) continue;
      if (found >= 0)
        fail(path, "label column '", *name, "' names columns ", found + 1, " and ", c + 1,
             " (expected a unique name)");
      found = static_cast<int64_t>(c);
    }
    if (found < 0) {
      std::string list;
      for (const std::string& n : names) list += (list.empty() ? "'" : ", '") + n + "'";
      fail(path, "no column named '", *name, "' (columns: ", list, ")");
    }
    return found;
  }
  const int64_t given = std::get<int64_t>(options.label_column);
  const int64_t index = given < 0 ? given + columns : given;
  if (index < 0 || index >= columns)
    fail(path, "label column ", given, " is out of range (the file has ", columns, " columns)");
  return index;
}

}  // namespace

CsvData read_csv(const std::string& path, const CsvOptions& options) {
  EMBER_CHECK(options.delimiter != '"' && options.delimiter != '\n' && options.delimiter != '\r',
              "read_csv: delimiter '", options.delimiter,
              "' (expected a character other than a quote or line end)");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open (", std::strerror(errno), ")");

  std::string line;
  int64_t line_number = 0;
  // Reads the next non-blank line; false at the end of the file.
  auto next_line = [&]() -> bool {
    while (std::getline(in, line)) {
      ++line_number;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line_number == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
      if (!is_blank(line)) return true;
    }
    return false;
  };
  auto where = [&]() { return detail::concat(path, ":", line_number); };

  std::vector<std::string> fields, names;
  if (!next_line())
    fail(path, "empty file (expected ",
         options.has_header.value_or(true) ? "a header line" : "data rows", ")");
  if (auto err = split_fields(line, options.delimiter, fields); !err.empty()) fail(where(), err);
  const int64_t columns = static_cast<int64_t>(fields.size());
  const int64_t header_line = line_number;
  bool has_header = true;  // Note [CSV header detection]
  if (options.has_header) {
    has_header = *options.has_header;
  } else {
    double unused = 0.0;
    bool all_numbers = true;
    for (const std::string& f : fields)
      all_numbers = all_numbers && parse_number(f, unused).empty();
    has_header = !all_numbers;
  }
  if (has_header) {
    names = fields;
  } else {
    for (int64_t c = 0; c < columns; ++c) names.push_back(std::to_string(c));
  }
  const int64_t label =
      options.has_label ? label_index(path, options, has_header, names, columns) : -1;
  if (columns - (label >= 0 ? 1 : 0) == 0) {
    // One column that is the label: most often a file with another delimiter read whole.
    std::string hint;
    for (char d : {';', '\t', '|', ' '})
      if (d != options.delimiter && line.find(d) != std::string::npos) {
        hint = d == '\t' ? std::string("'\\t'") : std::string("'") + d + "'";
        break;
      }
    fail(path, "no feature columns (line ", header_line, " has ", columns, " field",
         columns == 1 ? "" : "s", " with delimiter '", options.delimiter, "'",
         label >= 0 ? ", and it is the label" : "",
         hint.empty() ? std::string(")")
                      : "; the line holds " + hint + ": set CsvOptions::delimiter to it)");
  }

  std::vector<float> features;
  std::vector<double> labels;
  std::vector<std::string> label_text;  // every label as written (Note [CSV text labels])
  std::vector<int64_t> label_line;      // its line, for an error about it
  bool numeric_labels = options.classes.empty();
  bool integer_labels = true;
  int64_t rows = 0;
  bool first_is_data = !has_header;  // then `fields` already holds the first row
  for (;;) {
    if (first_is_data) {
      first_is_data = false;
    } else {
      if (!next_line()) break;
      if (auto err = split_fields(line, options.delimiter, fields); !err.empty())
        fail(where(), err);
    }
    if (static_cast<int64_t>(fields.size()) != columns)
      fail(where(), fields.size(), " fields (expected ", columns, ", as in line ", header_line,
           ")");
    ++rows;
    for (int64_t c = 0; c < columns; ++c) {
      double v = 0.0;
      if (c == label) {
        if (trim(fields[c]).empty())
          fail(where(), "field ", c + 1, " '' is empty (expected a number or a class name; label ",
               "column '", names[c], "')");
        label_text.push_back(fields[c]);
        label_line.push_back(line_number);
        if (numeric_labels && !parse_number(fields[c], v).empty()) numeric_labels = false;
        if (!numeric_labels) continue;
        labels.push_back(v);
        integer_labels = integer_labels && std::trunc(v) == v && std::fabs(v) <= kMaxExactInteger;
        continue;
      }
      if (auto err = parse_number(fields[c], v); !err.empty())
        fail(where(), "field ", c + 1, " '", fields[c], "' ", err, " (column '", names[c], "')");
      // Features are f32: a finite value beyond its range would silently become inf.
      if (std::isfinite(v) && !std::isfinite(static_cast<float>(v)))
        fail(where(), "field ", c + 1, " '", fields[c], "' is out of range for f32 (|value| > ",
             std::numeric_limits<float>::max(), "; column '", names[c], "')");
      features.push_back(static_cast<float>(v));
    }
  }
  if (in.bad()) fail(path, "read error (", std::strerror(errno), ")");
  if (rows == 0) fail(path, "no data rows (expected at least one after the header)");

  CsvData out;
  out.inputs =
      from_vector(features, {rows, columns - (label >= 0 ? 1 : 0)}, {.device = Device::cpu()});
  if (label < 0) {
    // no label column: labels stay undefined
  } else if (!numeric_labels) {  // Note [CSV text labels]
    std::vector<std::string> classes = options.classes;
    if (classes.empty()) {
      classes = label_text;
      std::sort(classes.begin(), classes.end());
      classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
    }
    std::vector<int64_t> ints(label_text.size());
    for (size_t i = 0; i < label_text.size(); ++i) {
      const auto found = std::find(classes.begin(), classes.end(), label_text[i]);
      if (found == classes.end()) {
        std::string known;
        for (const std::string& c : classes) known += (known.empty() ? "'" : ", '") + c + "'";
        fail(detail::concat(path, ":", label_line[i]), "label '", label_text[i], "' (column '",
             names[label], "') is not a known class (expected one of ", known, ")");
      }
      ints[i] = static_cast<int64_t>(found - classes.begin());
    }
    out.labels = from_vector(ints, {rows}, {.device = Device::cpu()});
    out.classes = std::move(classes);
  } else if (integer_labels) {
    std::vector<int64_t> ints(labels.size());
    for (size_t i = 0; i < labels.size(); ++i) ints[i] = static_cast<int64_t>(labels[i]);
    out.labels = from_vector(ints, {rows}, {.device = Device::cpu()});
  } else {
    std::vector<float> floats(labels.begin(), labels.end());
    out.labels = from_vector(floats, {rows}, {.device = Device::cpu()});
  }
  for (int64_t c = 0; c < columns; ++c)
    if (c != label) out.feature_names.push_back(names[c]);
  if (label >= 0) out.label_name = names[label];
  return out;
}

}  // namespace ember::data
