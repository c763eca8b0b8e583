// Where the Hopper attention kernels' producers ask for a head's rows (flashtma::Fold,
// attention/hopper/flash_tma.cuh), on the CPU: by head, the head's own rows; over the QKV product's
// rows (rows_maps, step 18), every element the coordinates name through the rows map's strides is
// the element the copy by head (qkv_heads_kernel's layout) held at that head, row and column.
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "attention/hopper/flash_tma.cuh"

namespace {

TEST(AttentionFold, ByHeadIsTheHeadsOwnRows) {
  const flashtma::Fold by_head{};
  for (int head : {0, 1, 47})
    for (int row : {0, 63, 64, 1023}) {
      const flashtma::Fold::At at = by_head.at(row, head, 1024);
      EXPECT_EQ(at.row, row);
      EXPECT_EQ(at.head, head);
    }
}

// The QKV rows of `batch` sequences of `seq` tokens, `heads` heads of width d (each token's row: Q's
// heads, K's, V's, 3 heads d values), and the rows map's element (column c, token t, head h) at
// c + t ld + h d from the part's first column (rows_map's strides: ld a token, d a head). Each
// element of the rows holds its own index, so equal values are the same element.
void expect_fold_matches_copy_by_head(int batch, int heads, int seq, int d) {
  SCOPED_TRACE("batch " + std::to_string(batch) + ", heads " + std::to_string(heads) + ", seq " +
               std::to_string(seq) + ", d " + std::to_string(d));
  const std::size_t dm = std::size_t(heads) * d, ld = 3 * dm, tokens = std::size_t(batch) * seq;
  std::vector<std::size_t> rows(tokens * ld);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  const flashtma::Fold fold{heads};
  for (int part = 0; part < 3; ++part)  // Q, K, V: the map's base at part heads d
    for (int bh = 0; bh < batch * heads; ++bh)
      for (int r = 0; r < seq; ++r) {
        const flashtma::Fold::At at = fold.at(r, bh, seq);
        ASSERT_GE(at.head, 0);
        ASSERT_LT(at.head, heads);
        ASSERT_LT(std::size_t(at.row), tokens);
        for (int c = 0; c < d; ++c) {
          // qkv_heads_kernel's copy: head bh = b heads + h, its row r from token b seq + r, columns
          // part heads d + h d + c.
          const int b = bh / heads, h = bh % heads;
          const std::size_t by_head = rows[(std::size_t(b) * seq + r) * ld + part * dm + std::size_t(h) * d + c];
          const std::size_t through_map = rows[part * dm + c + std::size_t(at.row) * ld + std::size_t(at.head) * d];
          ASSERT_EQ(through_map, by_head) << "part " << part << ", head " << bh << ", row " << r << ", column " << c;
        }
      }
}

TEST(AttentionFold, OverRowsEachHeadReadsWhatTheCopyByHeadHeld) {
  expect_fold_matches_copy_by_head(1, 1, 13, 128);  // the check shapes' head sizes and sequences
  expect_fold_matches_copy_by_head(2, 2, 65, 64);
  expect_fold_matches_copy_by_head(3, 12, 40, 64);  // GPT-2 small's heads, three sequences
  expect_fold_matches_copy_by_head(2, 5, 17, 128);
}

// A box of the kernels' rows from row r on of head bh runs to row r + box - 1: past seq it reads the
// next sequence's first rows of the same head (the kernels mask them), never another head's.
TEST(AttentionFold, ABoxPastItsSequenceStaysInItsHead) {
  const int heads = 12, seq = 65, box = 128;
  const flashtma::Fold fold{heads};
  for (int bh = 0; bh < 3 * heads; ++bh) {
    const flashtma::Fold::At first = fold.at(64, bh, seq);
    EXPECT_EQ(first.head, bh % heads);
    // Row seq of head bh is row 0 of the same head in the next sequence: the box's rows past seq.
    const flashtma::Fold::At next = fold.at(0, bh + heads, seq);
    EXPECT_EQ(next.head, first.head);
    EXPECT_EQ(next.row, fold.at(seq, bh, seq).row);
    EXPECT_LT(first.row, next.row);
    EXPECT_LE(next.row, first.row + box - 1);
  }
}

}  // namespace
