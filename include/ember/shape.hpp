// ember/shape.hpp — a tensor's sizes or strides: at most kMaxRank entries, no heap.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <string>
#include <vector>

namespace ember {

inline constexpr int kMaxRank = 8;

/// Fixed-capacity list of dimensions (also used for strides). Rank over kMaxRank throws.
/// Example: Shape s{2, 3}; s.numel() == 6; s.to_string() == "[2, 3]".
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.size()); }
  Shape(const std::vector<int64_t>& dims) { assign(dims.data(), dims.size()); }  // NOLINT
  Shape(std::span<const int64_t> dims) { assign(dims.data(), dims.size()); }     // NOLINT
  static Shape filled(int rank, int64_t value);

  int size() const { return rank_; }
  bool empty() const { return rank_ == 0; }
  int64_t& operator[](int i) { return dims_[i]; }
  int64_t operator[](int i) const { return dims_[i]; }
  /// Entry `i` counted from the end when negative (back(-1) is the last).
  int64_t at(int i) const;
  const int64_t* begin() const { return dims_; }
  const int64_t* end() const { return dims_ + rank_; }
  int64_t* begin() { return dims_; }
  int64_t* end() { return dims_ + rank_; }
  const int64_t* data() const { return dims_; }
  void push_back(int64_t v);
  void insert(int pos, int64_t v);
  void erase(int pos);
  void resize(int rank, int64_t fill = 1);
  int64_t numel() const;
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  std::string to_string() const;
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  void assign(const int64_t* p, size_t n);
  int64_t dims_[kMaxRank] = {};
  int rank_ = 0;
};

std::ostream& operator<<(std::ostream& out, const Shape& s);

/// Row-major (C-contiguous) strides, in elements, for `shape`.
Shape contiguous_strides(const Shape& shape);
/// The broadcast of two shapes (NumPy rules); throws naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
/// Wraps a possibly negative dim into [0, rank); throws naming `op` when out of range.
int wrap_dim(int64_t dim, int rank, const char* op);

}  // namespace ember
