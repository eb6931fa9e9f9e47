// The checkpoint file format without a runtime: encode/parse round trip, the payload size the
// header promises, and bad input naming the file and the JSON path (the reader behind --resume).
#include <gtest/gtest.h>

#include "executor/runtime/checkpoint_format.h"

namespace parallax::executor {
namespace {

CheckpointHeader Header(Precision p) {
  CheckpointHeader h;
  h.step = 3;
  h.samples_consumed = 24;
  h.rank = 1;
  h.world_size = 2;
  h.layout = "dp=2";
  h.model = "gpt-tiny";
  h.seed = -7;
  h.precision = p;
  h.loss_scale = p == Precision::kFp16 ? 32768.0 : 1.0;
  h.loss_scale_clean_steps = 2;
  const int64_t main = p == Precision::kFp32 ? 0 : 5;
  h.groups = {{"embedding", 6, main, 5}, {"layer_0", 4, p == Precision::kFp32 ? 0 : 4, 4}};
  return h;
}

std::string File(const CheckpointHeader& h) {
  return EncodeCheckpointHeader(h) + std::string(static_cast<size_t>(CheckpointPayloadBytes(h)), '\x5a');
}

// Replaces the first `from` in the header line with `to`.
std::string Edit(std::string file, const std::string& from, const std::string& to) {
  const size_t at = file.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return file.replace(at, from.size(), to);
}

std::string RejectionOf(const std::string& bytes) {
  auto f = ParseCheckpoint(bytes, "ck/rank_1.bin");
  EXPECT_FALSE(f.ok());
  if (f) return "";
  EXPECT_EQ(f.error().kind, ErrorKind::kBadInput);
  return f.error().message;
}

TEST(CheckpointFormat, PayloadBytesFollowThePrecision) {
  // fp32: params 4 B + two fp32 moments; bf16: params 2 B + fp32 main + two moments.
  EXPECT_EQ(CheckpointPayloadBytes(Header(Precision::kFp32)), (6 * 4 + 5 * 8) + (4 * 4 + 4 * 8));
  EXPECT_EQ(CheckpointPayloadBytes(Header(Precision::kBf16)), (6 * 2 + 5 * 12) + (4 * 2 + 4 * 12));
}

TEST(CheckpointFormat, RoundTripsEveryPrecision) {
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    const CheckpointHeader h = Header(p);
    const std::string bytes = File(h);
    auto f = ParseCheckpoint(bytes, "ck/rank_1.bin");
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->payload_offset, EncodeCheckpointHeader(h).size());
    EXPECT_EQ(EncodeCheckpointHeader(f->header), EncodeCheckpointHeader(h));
    EXPECT_EQ(f->header.seed, -7);
    EXPECT_EQ(f->header.groups.size(), 2u);
    EXPECT_EQ(f->header.precision, p);
  }
}

TEST(CheckpointFormat, RejectsWrongSizesNamingThePayload) {
  const std::string ok = File(Header(Precision::kBf16));
  EXPECT_NE(RejectionOf(ok.substr(0, ok.size() - 1)).find("ck/rank_1.bin: payload: "), std::string::npos);
  EXPECT_NE(RejectionOf(ok.substr(0, ok.size() - 1)).find("truncated"), std::string::npos);
  EXPECT_NE(RejectionOf(ok + "x").find("trailing bytes"), std::string::npos);
  // A header line cut before its newline.
  EXPECT_NE(RejectionOf(ok.substr(0, 40)).find("truncated in the header line"), std::string::npos);
}

TEST(CheckpointFormat, RejectsBadHeadersNamingTheJsonPath) {
  const std::string ok = File(Header(Precision::kBf16));
  EXPECT_NE(RejectionOf("PLXCKPT2\n{}\n").find("not a parallax checkpoint"), std::string::npos);
  EXPECT_NE(RejectionOf(Edit(ok, "\"version\":1", "\"version\":9")).find("ck/rank_1.bin: /version: unsupported"),
            std::string::npos);
  EXPECT_NE(RejectionOf(Edit(ok, "\"step\":3", "\"step\":\"3\"")).find("ck/rank_1.bin: /step: expected an integer"),
            std::string::npos);
  EXPECT_NE(RejectionOf(Edit(ok, "\"rank\":1", "\"rank\":2")).find("/rank: rank 2 outside a world of 2"),
            std::string::npos);
  EXPECT_NE(RejectionOf(Edit(ok, "\"precision\":\"bf16\"", "\"precision\":\"fp4\"")).find("/precision: unknown precision \"fp4\""),
            std::string::npos);
  EXPECT_NE(RejectionOf(Edit(ok, "\"loss_scale\":1.0", "\"loss_scale\":0")).find("/loss_scale: must be > 0"),
            std::string::npos);
  EXPECT_NE(RejectionOf(Edit(ok, "\"main\":5", "\"main\":0")).find("/groups/0/main: a bf16 checkpoint keeps 5"),
            std::string::npos);
  EXPECT_NE(RejectionOf(Edit(ok, "\"params\":4}", "\"params\":4,\"extra\":1}")).find("/groups/1/extra"),
            std::string::npos);
  EXPECT_NE(RejectionOf(Edit(ok, "\"groups\":[", "\"groups\":7,\"g\":[")).find("/groups: expected an array"), std::string::npos);
  // Sizes whose byte count overflows int64 are rejected, not wrapped into a small payload.
  EXPECT_NE(RejectionOf(Edit(ok, "\"params\":6", "\"params\":4611686018427387904")).find("payload"),
            std::string::npos);
}

TEST(CheckpointFormat, LatestPointer) {
  EXPECT_EQ(*ParseLatestPointer("step_12\n", "latest"), 12);
  EXPECT_EQ(*ParseLatestPointer("step_0", "latest"), 0);
  for (const char* bad : {"", "step_", "step_-1\n", "step_12x\n", "stp_12\n", "step_99999999999999999999\n",
                          "step_ 3\n"}) {
    auto r = ParseLatestPointer(bad, "ck/latest");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().message.rfind("ck/latest: ", 0), 0u) << r.error().message;
  }
}

}  // namespace
}  // namespace parallax::executor
