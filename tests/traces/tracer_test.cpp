// Tracer and data model: tracks per rank x stream, compact slices, identities, merge, nesting.
#include <gtest/gtest.h>

#include "tests/traces/identity_util.h"
#include "traces/tracer.h"

namespace parallax::traces {
namespace {

using testing::Id;

TEST(StringTable, InternsOncePerString) {
  StringTable t;
  EXPECT_EQ(t.Intern(""), kEmptyString);
  const StringId a = t.Intern("qkv");
  const StringId b = t.Intern("fc1");
  EXPECT_NE(a, b);
  EXPECT_EQ(t.Intern(std::string("qkv")), a);
  EXPECT_EQ(t.View(b), "fc1");
  // Views stay valid while the table grows (deque storage, SSO strings included).
  const std::string_view v = t.View(a);
  for (int i = 0; i < 10000; ++i) t.Intern("name" + std::to_string(i));
  EXPECT_EQ(v, "qkv");
  EXPECT_EQ(t.View(a).data(), v.data());
}

TEST(ChunkedVector, AppendsAcrossChunksWithoutMoving) {
  ChunkedVector<int64_t> v;
  const int64_t* first = nullptr;
  const int64_t* at_5000 = nullptr;
  constexpr int64_t kN = 200000;  // through the growing chunks and three fixed-size ones
  for (int64_t i = 0; i < kN; ++i) {
    EXPECT_EQ(v.push_back(i * 3), static_cast<size_t>(i));
    if (i == 0) first = &v[0];
    if (i == 5000) at_5000 = &v[5000];
  }
  EXPECT_EQ(v.size(), static_cast<size_t>(kN));
  EXPECT_EQ(&v[0], first);
  EXPECT_EQ(&v[5000], at_5000);
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(v[static_cast<size_t>(i)], i * 3) << i;
  int64_t k = 0;
  v.ForEach([&](int64_t x) { ASSERT_EQ(x, 3 * k++); });
  EXPECT_EQ(k, kN);
  // 64 Ki in the growing chunks, then 64 Ki per chunk: 4 x 64 Ki for 200,000.
  EXPECT_EQ(v.capacity_bytes(), size_t{4} * 65536 * sizeof(int64_t));
  ChunkedVector<int64_t> small;
  small.push_back(1);
  EXPECT_EQ(small.capacity_bytes(), 1024 * sizeof(int64_t));
}

TEST(PackedIdentity, RoundTripsAndRejectsOutOfRange) {
  const OpIdentity id = Id(123456, 511, 63, 95, OpKind::kFc2, Phase::kRecompute);
  ASSERT_TRUE(PackedIdentity::Fits(id));
  EXPECT_EQ(PackedIdentity::Pack(id).Unpack(), id);
  OpIdentity big = id;
  big.layer = 40000;
  EXPECT_FALSE(PackedIdentity::Fits(big));
  big = id;
  big.step = int64_t{1} << 40;
  EXPECT_FALSE(PackedIdentity::Fits(big));
}

TEST(Tracer, TracksAreRankTimesStream) {
  Tracer tr("predicted");
  const TrackId c0 = tr.Track(0, Stream::kCompute);
  const TrackId t0 = tr.Track(0, Stream::kTpComm);
  const TrackId c1 = tr.Track(1, Stream::kCompute);
  EXPECT_EQ(tr.Track(0, Stream::kCompute), c0);
  EXPECT_NE(c0, t0);
  EXPECT_NE(c0, c1);
  const Track& t = tr.trace().track(t0);
  EXPECT_EQ(t.pid, 0);
  EXPECT_EQ(t.rank, 0);
  EXPECT_EQ(t.stream, Stream::kTpComm);
  EXPECT_EQ(t.name, "tp-comm");
  EXPECT_EQ(t.process_name, "rank 0");
  EXPECT_EQ(tr.trace().tracks().size(), 3u);
  // A large rank outside the cache still works.
  const TrackId big = tr.Track(1 << 20, Stream::kHost);
  EXPECT_EQ(tr.Track(1 << 20, Stream::kHost), big);
}

TEST(Tracer, RecordsSlicesWithIdentityArgsAndFlags) {
  Tracer tr("predicted");
  const TrackId c = tr.Track(2, Stream::kCompute);
  const TrackId tp = tr.Track(2, Stream::kTpComm);
  const OpIdentity qkv = Id(1, 2, 0, 5, OpKind::kQkv, Phase::kFwd);
  const size_t i = tr.Record(c, tr.OpName(OpKind::kQkv), 1000, 250, qkv, SliceArgs::Compute(1.5e9));
  const size_t j = tr.Record(tp, tr.OpName(OpKind::kTpAllReduce), 1250, 80,
                             Id(1, 2, 0, 5, OpKind::kTpAllReduce, Phase::kFwd), SliceArgs::Comm(1 << 20, 4));
  const size_t k = tr.Record(c, tr.Intern("idle-wait"), 2000, 0);
  const Trace& t = tr.trace();
  ASSERT_EQ(t.slices().size(), 3u);
  const Slice& a = t.slice(i);
  EXPECT_EQ(t.Str(a.name), "qkv");
  EXPECT_EQ(t.Str(a.category), "compute");
  EXPECT_TRUE(a.has(slice_flags::kCompute));
  EXPECT_FALSE(a.has(slice_flags::kComm));
  EXPECT_EQ(t.identity(a), qkv);
  ASSERT_NE(t.args(a), nullptr);
  EXPECT_DOUBLE_EQ(t.args(a)->flops, 1.5e9);
  EXPECT_EQ(t.args(a)->bytes, -1);
  const Slice& b = t.slice(j);
  EXPECT_TRUE(b.has(slice_flags::kComm));
  EXPECT_EQ(t.Str(b.category), "tp-comm");
  EXPECT_EQ(t.args(b)->bytes, 1 << 20);
  EXPECT_EQ(t.args(b)->group_size, 4);
  EXPECT_EQ(t.args(t.slice(k)), nullptr);
  EXPECT_FALSE(t.identity(t.slice(k)).has_value());
  EXPECT_EQ(t.first_ns(), 1000);
  EXPECT_EQ(t.last_ns(), 2000);
}

TEST(Tracer, ReserveMeansNoGrowthWhileRecording) {
  Tracer tr;
  tr.Reserve(200000);
  const TrackId c = tr.Track(0, Stream::kCompute);
  const StringId n = tr.Intern("gemm");
  const size_t before = tr.trace().MemoryBytes();
  for (int64_t i = 0; i < 200000; ++i) tr.Record(c, n, i * 10, 5);
  EXPECT_EQ(tr.trace().MemoryBytes(), before);
  EXPECT_EQ(tr.trace().slices().size(), 200000u);
  // Compactness: the slice table costs 56 bytes per slice (+ < 1 chunk of slack).
  EXPECT_LE(tr.trace().slices().capacity_bytes(), 56u * (200000 + 65536));
}

TEST(Tracer, TakeLeavesAnEmptyUsableTracer) {
  Tracer tr("measured");
  tr.Record(tr.Track(0, Stream::kCompute), tr.Intern("x"), 1, 2);
  Trace t = tr.Take();
  EXPECT_EQ(t.slices().size(), 1u);
  EXPECT_EQ(t.metadata.kind, "measured");
  EXPECT_EQ(tr.trace().slices().size(), 0u);
  EXPECT_EQ(tr.trace().tracks().size(), 0u);
  tr.Record(tr.Track(0, Stream::kCompute), tr.OpName(OpKind::kFc1), 1, 2);
  EXPECT_EQ(tr.trace().Str(tr.trace().slice(0).name), "fc1");
}

TEST(Trace, MergeCombinesRanks) {
  Tracer r0, r1;
  r0.Record(r0.Track(0, Stream::kCompute), r0.Intern("a"), 0, 5);
  SliceSpec spec;
  spec.track = r1.Track(1, Stream::kCompute);
  spec.name = r1.Intern("b");
  spec.start_ns = 2;
  spec.dur_ns = 5;
  spec.category = r1.Intern("custom");
  spec.collective = r1.Intern("allreduce");
  r1.Record(spec);
  r1.Record(r1.Track(0, Stream::kCompute), r1.Intern("a"), 9, 1);
  r1.Flow(r1.Track(1, Stream::kCompute), 3, r1.Track(0, Stream::kCompute), 9, r1.Intern("send"));
  Trace t = r0.Take();
  t.Merge(r1.trace());
  EXPECT_EQ(t.tracks().size(), 2u);
  ASSERT_EQ(t.slices().size(), 3u);
  EXPECT_EQ(t.slice(2).track, t.slice(0).track);
  EXPECT_EQ(t.Str(t.slice(1).name), "b");
  EXPECT_EQ(t.Str(t.args(t.slice(1))->collective), "allreduce");
  EXPECT_EQ(t.Str(t.slice(1).category), "custom");
  ASSERT_EQ(t.flows().size(), 1u);
  EXPECT_EQ(t.track(t.flows()[0].to_track).pid, 0);
}

TEST(Trace, CheckNestingFindsPartialOverlap) {
  Tracer tr;
  const TrackId c = tr.Track(0, Stream::kCompute);
  const StringId n = tr.Intern("op");
  tr.Record(c, n, 0, 100);
  tr.Record(c, n, 10, 20);   // nested
  tr.Record(c, n, 100, 50);  // adjacent
  EXPECT_FALSE(CheckNesting(tr.trace()).has_value());
  tr.Record(c, tr.Intern("bad"), 140, 20);  // crosses 150
  auto msg = CheckNesting(tr.trace());
  ASSERT_TRUE(msg.has_value());
  EXPECT_NE(msg->find("'bad'"), std::string::npos) << *msg;
}

}  // namespace
}  // namespace parallax::traces
