// Context parallelism's causal load balance (model/cp_chunks.h): which positions a cp rank holds,
// which (query chunk, key chunk) pairs attend, and the ring's order.
#include "model/cp_chunks.h"

#include <gtest/gtest.h>

#include <set>

namespace parallax {
namespace {

TEST(CpChunks, EveryPositionIsHeldByExactlyOneCpRankInChunksIAnd2cpMinus1MinusI) {
  for (int64_t cp : {1, 2, 4}) {
    const int64_t seq = 16;
    std::multiset<int64_t> held;
    for (int64_t r = 0; r < cp; ++r) {
      for (int64_t p = 0; p < seq / cp; ++p) held.insert(CpGlobalPosition(seq, cp, r, p));
    }
    EXPECT_EQ(held.size(), static_cast<size_t>(seq));
    for (int64_t p = 0; p < seq; ++p)
      EXPECT_EQ(held.count(p), 1u) << "cp=" << cp << " position " << p;
  }
  // cp = 2, seq 16: rank 0 holds chunks 0 and 3 (positions 0-3, 12-15), rank 1 chunks 1 and 2.
  EXPECT_EQ(CpGlobalPosition(16, 2, 0, 4), 12);
  EXPECT_EQ(CpGlobalPosition(16, 2, 1, 0), 4);
  EXPECT_EQ(CpGlobalPosition(16, 2, 1, 7), 11);
  // cp = 1 keeps the sequence in order, also when it does not split in two.
  EXPECT_EQ(CpGlobalPosition(7, 1, 0, 6), 6);
}

TEST(CpChunks, EveryRankAttendsAsManyKeyChunksAsEveryOther) {
  const int64_t cp = 4;
  int64_t first = -1;
  for (int64_t r = 0; r < cp; ++r) {
    int64_t full = 0, diagonal = 0;
    for (int64_t half = 0; half < 2; ++half) {
      for (int64_t k = 0; k < CpChunkCount(cp); ++k) {
        const CpBlockVisibility v = VisibilityOf(CpChunkOf(cp, r, half), k);
        full += v == CpBlockVisibility::kFull ? 1 : 0;
        diagonal += v == CpBlockVisibility::kDiagonal ? 1 : 0;
      }
    }
    EXPECT_EQ(diagonal, 2);
    if (first < 0) first = full;
    EXPECT_EQ(full, first) << "rank " << r;
  }
}

TEST(CpChunks, TheRingHandsEveryRankEveryBlockOnceStartingWithItsOwn) {
  for (int64_t cp : {2, 3, 4}) {
    for (int64_t r = 0; r < cp; ++r) {
      std::set<int64_t> seen;
      for (int64_t step = 0; step < cp; ++step) seen.insert(CpRingSource(cp, r, step));
      EXPECT_EQ(seen.size(), static_cast<size_t>(cp));
      EXPECT_EQ(CpRingSource(cp, r, 0), r);
      // Step s's block is the one the previous rank held at step s - 1 (K/V move to the next rank).
      for (int64_t step = 1; step < cp; ++step) {
        EXPECT_EQ(CpRingSource(cp, r, step), CpRingSource(cp, (r - 1 + cp) % cp, step - 1));
      }
    }
  }
}

}  // namespace
}  // namespace parallax
