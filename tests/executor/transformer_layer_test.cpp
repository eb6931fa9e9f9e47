// One transformer layer on the CPU backend, outside a trainer: what its backward pass leaves behind
// when an op inside the recompute phase fails.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "executor/cpu/cpu_backend.h"
#include "executor/runtime/context.h"
#include "executor/runtime/param_group.h"
#include "executor/runtime/transformer_layer.h"
#include "model/presets.h"

namespace parallax::executor {
namespace {

// Refuses raw allocations of one block size, calling `on_refuse` each time.
class RefusingBackend final : public CpuBackend {
 public:
  int64_t refuse_bytes = -1;
  std::function<void()> on_refuse;

 protected:
  void* RawAllocate(int64_t bytes) override {
    if (bytes != refuse_bytes) return CpuBackend::RawAllocate(bytes);
    if (on_refuse) on_refuse();
    return nullptr;
  }
};

Tensor Filled(RuntimeContext& ctx, int64_t n, float scale) {
  auto t = ctx.Act(n);
  EXPECT_TRUE(t);
  std::vector<float> host(static_cast<size_t>(n));
  for (size_t i = 0; i < host.size(); ++i) host[i] = scale * static_cast<float>(static_cast<int64_t>(i % 17) - 8);
  ctx.backend->CopyToDevice(t->ptr(), host.data(), DType::kF32, n);
  return std::move(t).value();
}

// Selective recompute rebuilds the attention statistics in backward, full recompute reruns the
// whole forward pass; both in phase recompute. Memory refused there for the statistics fails the
// backward pass, and the recorder is back in the backward phase it was in.
TEST(TransformerLayer, AnErrorInsideRecomputeLeavesTheRecorderInItsFormerPhase) {
  for (Recompute mode : {Recompute::kSelective, Recompute::kFull}) {
    SCOPED_TRACE(ToString(mode));
    RefusingBackend be;
    OpRecorder rec(&be, 0);
    RuntimeContext ctx;
    ctx.backend = &be;
    ctx.rec = &rec;
    ctx.model = *ModelPreset("gpt-tiny");
    ctx.layout.recompute = mode;
    ctx.seq = ctx.local_seq = ctx.model.seq_len;
    ctx.batch = 2;
    ctx.tokens = ctx.local_tokens = ctx.seq * ctx.batch;
    LayerParamIndex ix;
    ParamGroup group("layer0", LayerParamSpecs(ctx.model, 0, &ix), 1, 0);
    ASSERT_TRUE(group.Materialize(be, {0, 1, 0}, 7, DType::kF32));
    TransformerLayer layer(0, &group, ix);

    const int64_t n = ctx.local_tokens * ctx.model.hidden;
    rec.set_where({.microbatch = 1, .stage = 0, .phase = Phase::kFwd});
    LayerCache cache;
    auto y = layer.Forward(ctx, Filled(ctx, n, 0.05f), cache);
    ASSERT_TRUE(y) << y.error().message;

    const OpRecorder::Where backward{.microbatch = 1, .stage = 0, .phase = Phase::kBwd};
    rec.set_where(backward);
    const AttentionShape shape{.batch = ctx.batch, .seq = ctx.seq, .heads = ctx.model.heads,
                               .kv_heads = ctx.model.kv_heads, .head_dim = ctx.model.head_dim()};
    be.refuse_bytes = (shape.stats_floats() * 4 + 511) / 512 * 512;  // the allocator's block for them
    Phase refused_in = Phase::kOptim;
    be.on_refuse = [&] { refused_in = rec.where().phase; };
    auto dx = layer.Backward(ctx, cache, Filled(ctx, n, 0.01f));
    ASSERT_FALSE(dx);
    EXPECT_NE(dx.error().message.find("out of memory"), std::string::npos) << dx.error().message;
    EXPECT_EQ(refused_in, Phase::kRecompute);
    EXPECT_EQ(rec.where().phase, backward.phase);
    EXPECT_EQ(rec.where().microbatch, backward.microbatch);
    EXPECT_EQ(rec.where().stage, backward.stage);
  }
}

}  // namespace
}  // namespace parallax::executor
