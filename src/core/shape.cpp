// src/core/shape.cpp — Shape, contiguous strides, broadcasting and dim wrapping.
#include "ember/shape.hpp"

#include <sstream>

#include "ember/error.hpp"

namespace ember {

void Shape::assign(const int64_t* p, size_t n) {
  EMBER_CHECK(n <= static_cast<size_t>(kMaxRank), "Shape: rank ", n,
              " is over the limit (expected at most ", kMaxRank, " dims)");
  for (size_t i = 0; i < n; ++i) dims_[i] = p[i];
  rank_ = static_cast<int>(n);
}

Shape Shape::filled(int rank, int64_t value) {
  Shape s;
  s.resize(rank, value);
  return s;
}

int64_t Shape::at(int i) const {
  const int j = i < 0 ? i + rank_ : i;
  EMBER_ASSERT(j >= 0 && j < rank_, "Shape::at out of range");
  return dims_[j];
}

void Shape::push_back(int64_t v) {
  EMBER_CHECK(rank_ < kMaxRank, "Shape: rank ", rank_ + 1, " is over the limit (expected at most ",
              kMaxRank, " dims)");
  dims_[rank_++] = v;
}

void Shape::insert(int pos, int64_t v) {
  EMBER_CHECK(rank_ < kMaxRank, "Shape: rank ", rank_ + 1, " is over the limit (expected at most ",
              kMaxRank, " dims)");
  for (int i = rank_; i > pos; --i) dims_[i] = dims_[i - 1];
  dims_[pos] = v;
  ++rank_;
}

void Shape::erase(int pos) {
  for (int i = pos; i + 1 < rank_; ++i) dims_[i] = dims_[i + 1];
  --rank_;
}

void Shape::resize(int rank, int64_t fill) {
  EMBER_CHECK(rank >= 0 && rank <= kMaxRank, "Shape: rank ", rank,
              " is over the limit (expected at most ", kMaxRank, " dims)");
  for (int i = rank_; i < rank; ++i) dims_[i] = fill;
  rank_ = rank;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != o.dims_[i]) return false;
  return true;
}

std::ostream& operator<<(std::ostream& out, const Shape& s) { return out << s.to_string(); }

Shape contiguous_strides(const Shape& shape) {
  Shape st = Shape::filled(shape.size(), 1);
  int64_t acc = 1;
  for (int i = shape.size() - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= shape[i] > 0 ? shape[i] : 1;
  }
  return st;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const int rank = a.size() > b.size() ? a.size() : b.size();
  Shape out = Shape::filled(rank, 1);
  for (int i = 0; i < rank; ++i) {
    const int ia = a.size() - rank + i;
    const int ib = b.size() - rank + i;
    const int64_t da = ia >= 0 ? a[ia] : 1;
    const int64_t db = ib >= 0 ? b[ib] : 1;
    EMBER_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a.to_string(), " and ",
                b.to_string(), " cannot be broadcast (dim ", i - rank, " is ", da, " vs ", db,
                "; expected equal sizes or 1)");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int wrap_dim(int64_t dim, int rank, const char* op) {
  const int64_t r = rank == 0 ? 1 : rank;
  EMBER_CHECK(dim >= -r && dim < r, op, ": dim ", dim, " is out of range (expected in [", -r, ", ",
              r - 1, "] for a rank-", rank, " tensor)");
  return static_cast<int>(dim < 0 ? dim + r : dim);
}

}  // namespace ember
