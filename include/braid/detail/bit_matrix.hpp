// Rows of bits stored contiguously: reachability sets for thousands of ops
// in n*n/8 bytes, with word-wide union and test.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace braid::detail {

class BitMatrix {
public:
    BitMatrix() = default;
    BitMatrix(std::size_t rows, std::size_t cols)
        : rows_(rows), cols_(cols), words_per_row_((cols + 63) / 64),
          bits_(rows * words_per_row_, 0) {}

    std::size_t rows() const noexcept { return rows_; }
    std::size_t cols() const noexcept { return cols_; }
    std::size_t words_per_row() const noexcept { return words_per_row_; }

    bool test(std::size_t r, std::size_t c) const noexcept {
        return (row(r)[c / 64] >> (c % 64)) & 1u;
    }
    void set(std::size_t r, std::size_t c) noexcept {
        row(r)[c / 64] |= std::uint64_t{1} << (c % 64);
    }
    void reset(std::size_t r, std::size_t c) noexcept {
        row(r)[c / 64] &= ~(std::uint64_t{1} << (c % 64));
    }
    // row(dst) |= row(src)
    void or_row(std::size_t dst, std::size_t src) noexcept {
        std::uint64_t* d = row(dst);
        const std::uint64_t* s = row(src);
        for (std::size_t w = 0; w < words_per_row_; ++w) d[w] |= s[w];
    }
    std::size_t count(std::size_t r) const noexcept {
        std::size_t n = 0;
        const std::uint64_t* p = row(r);
        for (std::size_t w = 0; w < words_per_row_; ++w) n += static_cast<std::size_t>(std::popcount(p[w]));
        return n;
    }
    // First column >= from set in row r and clear in `mask` (a row of the same
    // width, or nullptr for none); cols() when there is none.
    std::size_t find_next(std::size_t r, std::size_t from, const std::uint64_t* mask = nullptr) const noexcept {
        if (from >= cols_) return cols_;
        const std::uint64_t* p = row(r);
        std::size_t w = from / 64;
        std::uint64_t word = p[w] & (~std::uint64_t{0} << (from % 64));
        if (mask) word &= ~mask[w];
        while (true) {
            if (word) {
                std::size_t c = w * 64 + static_cast<std::size_t>(std::countr_zero(word));
                return c < cols_ ? c : cols_;
            }
            if (++w >= words_per_row_) return cols_;
            word = p[w];
            if (mask) word &= ~mask[w];
        }
    }

    std::uint64_t* row(std::size_t r) noexcept { return bits_.data() + r * words_per_row_; }
    const std::uint64_t* row(std::size_t r) const noexcept { return bits_.data() + r * words_per_row_; }

private:
    std::size_t rows_ = 0;
    std::size_t cols_ = 0;
    std::size_t words_per_row_ = 0;
    std::vector<std::uint64_t> bits_;
};

}  // namespace braid::detail
