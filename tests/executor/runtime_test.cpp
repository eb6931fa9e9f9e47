// Single-process tests of the parallel runtime: rank layout, stage split, data, layout-independent
// initialisation, and training behaviour that needs no second rank (gradient accumulation,
// recompute, checkpoint/resume, data corpus).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "executor/cpu/cpu_backend.h"
#include "executor/cpu/local_communicator.h"
#include "executor/runtime/checkpoint.h"
#include "executor/runtime/data.h"
#include "executor/runtime/param_group.h"
#include "executor/runtime/process_groups.h"
#include "executor/runtime/sharded_model.h"
#include "executor/runtime/trainer.h"
#include "executor/runtime/transformer_layer.h"
#include "model/param_groups.h"
#include "model/stage_split.h"
#include "tests/executor/train_helpers.h"

namespace parallax::executor {
namespace {

using testing::MaxRelDiff;
using testing::TinyPlan;
using testing::Train;

TEST(ProcessGroups, MegatronRankOrder) {
  Layout l;
  l.dp = 2;
  l.tp = 2;
  l.pp = 3;
  std::set<int64_t> seen;
  for (int64_t r = 0; r < l.world_size(); ++r) {
    const RankCoords c = CoordsOf(l, r);
    EXPECT_EQ(c.cp_idx, 0);
    EXPECT_EQ(r, c.tp_idx + l.tp * (c.dp_idx + l.dp * c.pp_idx));
    EXPECT_EQ(RankOf(l, c), r);
    seen.insert(r);
  }
  EXPECT_EQ(seen.size(), 12u);
  EXPECT_EQ(TpGroupRanks(l, 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(DpGroupRanks(l, 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(PpGroupRanks(l, 5), (std::vector<int>{1, 5, 9}));
  EXPECT_EQ(EmbeddingGroupRanks(l, 9), (std::vector<int>{1, 9}));
  EXPECT_EQ(EmbeddingGroupRanks(l, 5), (std::vector<int>{5}));
  // Without context parallelism the dp x cp group is the dp group.
  for (int64_t r = 0; r < l.world_size(); ++r) EXPECT_EQ(DpCpGroupRanks(l, r), DpGroupRanks(l, r));
}

TEST(ProcessGroups, WithoutContextParallelNoCpCommunicatorIsCreated) {
  auto world = LocalCommunicator();
  Layout l;
  auto g = CreateProcessGroups(l, *world, false);
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(g->cp, nullptr);
  EXPECT_EQ(g->dp_cp, nullptr);
  EXPECT_EQ(&g->DpCp(), g->dp.get());
}

// Megatron-Core's order with cp (parallel_state.initialize_model_parallel, order "tp-cp-ep-dp-pp"):
// tp fastest, then cp, dp, pp; dp x cp groups join the cp and dp ranks of one (tp, pp) place.
TEST(ProcessGroups, ContextParallelRanksFollowTensorParallelInTheOrder) {
  Layout l;
  l.tp = 2;
  l.cp = 2;
  l.dp = 2;
  l.pp = 2;
  for (int64_t r = 0; r < l.world_size(); ++r) {
    const RankCoords c = CoordsOf(l, r);
    EXPECT_EQ(r, c.tp_idx + 2 * (c.cp_idx + 2 * (c.dp_idx + 2 * c.pp_idx)));
    EXPECT_EQ(RankOf(l, c), r);
  }
  EXPECT_EQ(TpGroupRanks(l, 13), (std::vector<int>{12, 13}));
  EXPECT_EQ(CpGroupRanks(l, 13), (std::vector<int>{13, 15}));
  EXPECT_EQ(DpGroupRanks(l, 13), (std::vector<int>{9, 13}));
  EXPECT_EQ(DpCpGroupRanks(l, 13), (std::vector<int>{9, 11, 13, 15}));
  EXPECT_EQ(PpGroupRanks(l, 13), (std::vector<int>{5, 13}));
  EXPECT_EQ(EmbeddingGroupRanks(l, 13), (std::vector<int>{5, 13}));
  // Every rank lies in exactly one group of each kind, at the index IndexInGroup gives.
  for (RankGroup g : {RankGroup::kTp, RankGroup::kCp, RankGroup::kDp, RankGroup::kDpCp, RankGroup::kPp}) {
    std::set<int> covered;
    for (int64_t r = 0; r < l.world_size(); ++r) {
      const std::vector<int> members = GroupRanks(l, r, g);
      EXPECT_EQ(members[static_cast<size_t>(IndexInGroup(l, CoordsOf(l, r), g))], r);
      covered.insert(members.begin(), members.end());
    }
    EXPECT_EQ(covered.size(), 16u);
  }
}

// Multi-token-prediction modules are counted by the planner (their parameter groups,
// model/param_groups.h) but not built by the executor: a dense model with one is refused as bad
// input before any group is built, as an MoE one is.
TEST(Trainer, RefusesMultiTokenPredictionAsBadInput) {
  Plan plan = TinyPlan("micro_batch=2", 4);
  plan.model.mtp_layers = 1;
  auto world = LocalCommunicator();
  CpuBackend be;
  auto t = Trainer::Create(plan, be, *world, {});
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().kind, ErrorKind::kBadInput);
  EXPECT_EQ(t.error().message, "model: the executor does not run multi-token prediction (mtp_layers) yet");
}

TEST(ShardedModel, StageLayersCoverEveryLayerOnce) {
  for (int64_t layers : {4, 7, 24}) {
    for (int64_t stages : {1, 2, 3, 4}) {
      int64_t next = 0;
      for (int64_t s = 0; s < stages; ++s) {
        const LayerRange r = StageLayers(layers, stages, s);
        EXPECT_EQ(r.first, next);
        EXPECT_GE(r.count, layers / stages);
        EXPECT_LE(r.count, layers / stages + 1);
        next = r.end();
      }
      EXPECT_EQ(next, layers);
    }
  }
}

// Every rank of `layout` builds exactly the groups model/param_groups.h lists: names, order, stage,
// layer, parameters per TP rank, norm membership, the chunk's outer groups and each pass's acquire order.
void ExpectBuiltGroupsMatchTheDefinition(const ModelSpec& m, const std::string& layout) {
  auto l = ParseInlineLayout(layout);
  ASSERT_TRUE(l) << l.error().message;
  TrainingSpec training;
  training.precision = Precision::kFp32;
  for (int64_t rank = 0; rank < l->world_size(); ++rank) {
    SCOPED_TRACE(layout + " rank " + std::to_string(rank));
    CpuBackend be;
    ProcessGroups pg;
    pg.coords = CoordsOf(*l, rank);
    RuntimeContext ctx;
    ctx.backend = &be;
    ctx.groups = &pg;
    ctx.model = m;
    ctx.training = training;
    ctx.layout = *l;
    ctx.tp = l->tp;
    auto sm = ShardedModel::Build(ctx);
    ASSERT_TRUE(sm) << sm.error().message;
    const auto defs = RankParamGroups(m, *l, DefaultImplementation(), training.precision, pg.coords.pp_idx);
    const std::vector<ParamGroup*>& built = (*sm)->groups();
    ASSERT_EQ(built.size(), defs.size());
    std::vector<ParamGroup*> outer;
    for (size_t i = 0; i < defs.size(); ++i) {
      EXPECT_EQ(built[i]->name(), defs[i].name) << i;
      EXPECT_EQ(built[i]->stage, defs[i].stage) << defs[i].name;
      EXPECT_EQ(built[i]->layer, defs[i].layer) << defs[i].name;
      EXPECT_EQ(built[i]->size(), defs[i].params) << defs[i].name;
      EXPECT_EQ(built[i]->counts_in_norm, defs[i].counts_in_norm) << defs[i].name;
      EXPECT_EQ(built[i] == (*sm)->tied_pair(), defs[i].tied_pair) << defs[i].name;
      if (defs[i].kind != ParamGroupKind::kLayer) outer.push_back(built[i]);
    }
    std::vector<ParamGroup*> chunk_outer;
    for (Chunk& ch : (*sm)->chunks()) {
      for (ParamGroup* g : ch.other_groups) chunk_outer.push_back(g);
      // What the pipeline runner acquires for the embedding and the head pass, in its order.
      auto acquired = [&](ChunkPass pass) {
        std::vector<ParamGroup*> out;
        for (size_t i : AcquireOrder(defs, ch.stage, pass)) out.push_back(built[i]);
        return out;
      };
      if (ch.first) {
        std::vector<ParamGroup*> runner{(*sm)->words()};
        if ((*sm)->positions() != nullptr) runner.push_back((*sm)->positions());
        EXPECT_EQ(runner, acquired(ChunkPass::kEmbedding));
      }
      if (ch.last) {
        std::vector<ParamGroup*> runner{(*sm)->head_group()};
        if ((*sm)->lm_group() != (*sm)->head_group()) runner.push_back((*sm)->lm_group());
        EXPECT_EQ(runner, acquired(ChunkPass::kHead));
      }
    }
    EXPECT_EQ(chunk_outer, outer);
  }
}

TEST(ShardedModel, BuildsTheGroupsTheDefinitionLists) {
  const ModelSpec gpt = *ModelPreset("gpt-tiny");  // tied, learned positions, LayerNorm with biases
  ModelSpec llama = gpt;                           // untied, rotary, RMSNorm, no biases, SwiGLU
  llama.tie_embeddings = false;
  llama.position = PositionKind::kRotary;
  llama.norm = NormKind::kRmsNorm;
  llama.bias = false;
  llama.mlp = MlpKind::kSwiglu;
  llama.kv_heads = 2;
  ModelSpec deep = gpt;
  deep.layers = 8;
  ExpectBuiltGroupsMatchTheDefinition(gpt, "dp=1,tp=1,pp=1");
  ExpectBuiltGroupsMatchTheDefinition(gpt, "dp=2,tp=2,pp=2,zero=3,micro_batch=1,global_batch=4");
  ExpectBuiltGroupsMatchTheDefinition(llama, "dp=1,tp=2,pp=2,zero=1");
  ExpectBuiltGroupsMatchTheDefinition(llama, "dp=1,tp=1,pp=1,zero=2");
  ExpectBuiltGroupsMatchTheDefinition(deep, "dp=1,tp=1,pp=2,schedule=interleaved,virtual_stages=2");
  // The explicit split: the first rank 1 layer, the second 7, or 2 and 6 over two chunks each.
  ExpectBuiltGroupsMatchTheDefinition(deep, "dp=1,tp=1,pp=2,first_stage_layers=1");
  ExpectBuiltGroupsMatchTheDefinition(deep, "dp=1,tp=1,pp=2,first_stage_layers=2,schedule=interleaved,virtual_stages=2");
}

TEST(ShardedModel, RecomputeModulesBeyondTheAttentionCoreAreRefusedByNameNotRunAsSomethingElse) {
  // The executor's selective recompute reruns the attention core; layernorm and moe_act are priced
  // only, and a plan asking for them is refused rather than run with other activations kept.
  EXPECT_TRUE(ValidateForExecution(testing::TinyPlan("micro_batch=2,recompute=selective", 8), 1));
  EXPECT_TRUE(ValidateForExecution(testing::TinyPlan("micro_batch=2,recompute_modules=core_attn", 8), 1));
  Status st = ValidateForExecution(testing::TinyPlan("micro_batch=2,recompute_modules=layernorm+moe_act", 8), 1);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("recompute_modules=layernorm+moe_act: the executor's selective recompute reruns "
                                    "the attention core only"),
            std::string::npos)
      << st.error().message;
}

TEST(Data, SamplesAreDeterministicAndPartitionedOverReplicas) {
  auto d = DataSource::Create({"", 11}, 256, 16);
  ASSERT_TRUE(d);
  std::vector<int32_t> a(17), b(17), c(17);
  (*d)->Sample(5, a.data());
  (*d)->Sample(5, b.data());
  (*d)->Sample(6, c.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (int32_t t : a) EXPECT_TRUE(t >= 0 && t < 256);
  // dp=2, micro_batch=2, global_batch=8: the replicas' micro-batches tile the step's samples.
  std::set<int64_t> samples;
  for (int64_t dp_idx = 0; dp_idx < 2; ++dp_idx) {
    for (int64_t mb = 0; mb < 2; ++mb) {
      const int64_t first = FirstSample(3, 8, 2, dp_idx, 2, mb);
      samples.insert(first);
      samples.insert(first + 1);
    }
  }
  EXPECT_EQ(samples, (std::set<int64_t>{24, 25, 26, 27, 28, 29, 30, 31}));
  std::vector<int32_t> in, tgt;
  (*d)->Batch(4, 2, &in, &tgt);
  std::vector<int32_t> s5(17);
  (*d)->Sample(5, s5.data());
  EXPECT_EQ(in[3 * 2 + 1], s5[3]);   // row = position * batch + b
  EXPECT_EQ(tgt[3 * 2 + 1], s5[4]);
}

TEST(Data, ByteCorpusReadsWindowsOfTheFile) {
  const std::string path = ::testing::TempDir() + "/corpus.txt";
  std::ofstream(path) << "hello parallax, a byte-level corpus for tests";
  auto d = DataSource::Create({path, 1}, 256, 8);
  ASSERT_TRUE(d);
  std::vector<int32_t> s(9);
  (*d)->Sample(0, s.data());
  EXPECT_EQ(s[0], 'h');
  EXPECT_EQ(s[8], 'r');
  (*d)->Sample(1, s.data());
  EXPECT_EQ(s[0], 'r');
  EXPECT_FALSE(DataSource::Create({path, 1}, 128, 8));                      // vocab < 256
  EXPECT_FALSE(DataSource::Create({"/nonexistent/corpus", 1}, 256, 8));     // missing file
}

// Host copy of `n` elements at `p` (the runtime itself never reads backend memory directly).
std::vector<float> Host(Backend& be, DevPtr p, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  be.CopyToHost(out.data(), DType::kF32, p, n);
  return out;
}

TEST(ParamGroup, TensorAndZeroShardsAreSlicesOfTheFullParameters) {
  CpuBackend be;
  const ModelSpec m = *ModelPreset("gpt-tiny");
  LayerParamIndex ix;
  ParamGroup full("layer1", LayerParamSpecs(m, 1, &ix), 1, 0);
  ASSERT_TRUE(full.Materialize(be, {0, 1, 0}, 9, DType::kF32));
  const std::vector<float> all = Host(be, full.values().ptr(), full.values().numel());
  for (int64_t tp_idx = 0; tp_idx < 2; ++tp_idx) {
    ParamGroup shard("layer1", LayerParamSpecs(m, 1, &ix), 2, tp_idx);
    ASSERT_TRUE(shard.Materialize(be, {0, 1, 0}, 9, DType::kF32));
    const std::vector<float> mine = Host(be, shard.values().ptr(), shard.values().numel());
    // wq is split by rows (heads): local row r is global row tp_idx*rows/2 + r.
    const ParamSpec& wq = shard.spec(static_cast<size_t>(ix.wq));
    for (int64_t r = 0; r < wq.local_rows; ++r) {
      for (int64_t c = 0; c < wq.local_cols; ++c) {
        ASSERT_EQ(mine[static_cast<size_t>(wq.offset + r * wq.local_cols + c)],
                  all[static_cast<size_t>(full.spec(static_cast<size_t>(ix.wq)).offset + (wq.row0 + r) * wq.cols + c)]);
      }
    }
    // wo is split by columns.
    const ParamSpec& wo = shard.spec(static_cast<size_t>(ix.wo));
    for (int64_t r = 0; r < wo.local_rows; ++r) {
      for (int64_t c = 0; c < wo.local_cols; ++c) {
        ASSERT_EQ(mine[static_cast<size_t>(wo.offset + r * wo.local_cols + c)],
                  all[static_cast<size_t>(full.spec(static_cast<size_t>(ix.wo)).offset + r * wo.cols + wo.col0 + c)]);
      }
    }
  }
  // ZeRO-3 shards hold consecutive slices of the flat buffer.
  for (int64_t dp_idx = 0; dp_idx < 3; ++dp_idx) {
    ParamGroup z("layer1", LayerParamSpecs(m, 1, &ix), 1, 0);
    ASSERT_TRUE(z.Materialize(be, {3, 3, dp_idx}, 9, DType::kF32));
    EXPECT_EQ(z.params_storage_size(), z.shard_size());
    const std::vector<float> zs = Host(be, z.values().ptr(), z.shard_size());
    for (int64_t i = 0; i < z.shard_size() && z.shard_begin() + i < full.size(); ++i) {
      ASSERT_EQ(zs[static_cast<size_t>(i)], all[static_cast<size_t>(z.shard_begin() + i)]);
    }
  }
}

TEST(ParamGroup, InitialWeightsDoNotDependOnTheThreadsThatGenerateThem) {
  // A layer of 2.9M values (two of Materialize's 1M-value chunks and a partial one), made on one
  // thread, on five (more threads than chunks) and as a ZeRO-3 shard that starts mid-chunk.
  CpuBackend be;
  ModelSpec m = *ModelPreset("gpt-tiny");
  m.hidden = 512;
  m.heads = 8;
  m.ffn_hidden = 2048;
  LayerParamIndex ix;
  ParamGroup one("layer0", LayerParamSpecs(m, 0, &ix), 1, 0);
  ASSERT_TRUE(one.Materialize(be, {0, 1, 0}, 4, DType::kF32, 1));
  ASSERT_GT(one.size(), 2 << 20);
  const std::vector<float> ref = Host(be, one.values().ptr(), one.size());
  ParamGroup many("layer0", LayerParamSpecs(m, 0, &ix), 1, 0);
  ASSERT_TRUE(many.Materialize(be, {0, 1, 0}, 4, DType::kF32, 5));
  EXPECT_EQ(Host(be, many.values().ptr(), many.size()), ref);
  ParamGroup shard("layer0", LayerParamSpecs(m, 0, &ix), 1, 0);
  ASSERT_TRUE(shard.Materialize(be, {3, 3, 1}, 4, DType::kF32, 3));
  const std::vector<float> mine = Host(be, shard.values().ptr(), shard.shard_size());
  for (int64_t i = 0; i < shard.shard_size(); ++i) {
    ASSERT_EQ(mine[static_cast<size_t>(i)], ref[static_cast<size_t>(shard.shard_begin() + i)]) << i;
  }
}

TEST(SelfCommunicator, QueuesSendsByTag) {
  CpuBackend be;
  SelfCommunicator c;
  Stream& s = be.stream(StreamKind::kPpComm);
  auto a = be.Allocate(2, DType::kF32, MemoryKind::kWorkspace), b = be.Allocate(2, DType::kF32, MemoryKind::kWorkspace);
  auto out = be.Allocate(2, DType::kF32, MemoryKind::kWorkspace);
  ASSERT_TRUE(a && b && out);
  const float av[2] = {1, 2}, bv[2] = {3, 4};
  be.CopyToDevice(a->ptr(), av, DType::kF32, 2);
  be.CopyToDevice(b->ptr(), bv, DType::kF32, 2);
  ASSERT_TRUE(c.Send(a->ptr(), 2, 0, 5, s));
  ASSERT_TRUE(c.Send(b->ptr(), 2, 0, 6, s));
  ASSERT_TRUE(c.Recv(out->ptr(), 2, 0, 6, s));
  ASSERT_TRUE(be.Synchronize());
  EXPECT_EQ(Host(be, out->ptr(), 2)[0], 3);
  ASSERT_TRUE(c.Recv(out->ptr(), 2, 0, 5, s));
  ASSERT_TRUE(be.Synchronize());
  EXPECT_EQ(Host(be, out->ptr(), 2)[1], 2);
  // Nothing left to receive: an error (sticky on the stream), not a hang.
  Status st = c.Recv(out->ptr(), 2, 0, 5, s);
  EXPECT_FALSE(st && be.Synchronize());
}

// Whole-model check: the analytic gradient of the step loss w.r.t. the largest-gradient elements
// of every parameter equals a central finite difference of the loss.
void ExpectGradientsMatchFiniteDifferences(const Plan& plan) {
  auto world = LocalCommunicator();
  CpuBackend be;
  auto t = Trainer::Create(plan, be, *world, {});
  ASSERT_TRUE(t) << t.error().message;
  Trainer& tr = **t;
  ASSERT_TRUE(tr.ComputeGradients());
  int checked = 0;
  for (ParamGroup* g : tr.model().groups()) {
    const std::vector<float> grads = Host(be, g->grads().ptr(), g->grads().numel());
    for (size_t pi = 0; pi < g->params().size(); ++pi) {
      const ParamSpec& p = g->spec(pi);
      // The largest-magnitude gradient element of this parameter.
      std::vector<int64_t> idx(static_cast<size_t>(p.numel()));
      for (int64_t i = 0; i < p.numel(); ++i) idx[static_cast<size_t>(i)] = p.offset + i;
      std::partial_sort(idx.begin(), idx.begin() + std::min<int64_t>(1, p.numel()), idx.end(), [&](int64_t a, int64_t b) {
        return std::abs(grads[static_cast<size_t>(a)]) > std::abs(grads[static_cast<size_t>(b)]);
      });
      for (int k = 0; k < std::min<int64_t>(1, p.numel()); ++k) {
        const int64_t i = idx[static_cast<size_t>(k)];
        const DevPtr w = g->values().at(i);
        const float keep = Host(be, w, 1)[0], h = 2e-3f;
        auto set = [&](float v) { be.CopyToDevice(w, &v, DType::kF32, 1); };
        set(keep + h);
        const double up = *tr.ComputeGradients();
        set(keep - h);
        const double down = *tr.ComputeGradients();
        set(keep);
        const double fd = (up - down) / (2.0 * h), an = grads[static_cast<size_t>(i)];
        EXPECT_NEAR(an, fd, 0.05 * std::abs(fd) + 2e-5) << g->name() << " " << p.name << " element " << i - p.offset;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 15);
}

TEST(Training, WholeModelGradientsMatchFiniteDifferences) {
  ExpectGradientsMatchFiniteDifferences(TinyPlan("micro_batch=2", 4));
}

TEST(Training, LocalAttentionGradientsMatchFiniteDifferences) {
  ExpectGradientsMatchFiniteDifferences(testing::LocalAttentionPlan("micro_batch=2", 4, false));
  ExpectGradientsMatchFiniteDifferences(testing::LocalAttentionPlan("micro_batch=2", 4, true));
}

// The window acts where the model puts it: a window as long as the sequence is full attention, a
// short one changes the losses, and so does making every layer local instead of every other one.
TEST(Training, LocalAttentionWindowsActOnTheLayersThatHaveThem) {
  auto world = LocalCommunicator();
  Plan full = testing::LlamaTinyPlan("micro_batch=2", 8);
  Plan whole = testing::LocalAttentionPlan("micro_batch=2", 8, false);
  whole.model.attention_window = whole.model.seq_len;
  const Plan sliding = testing::LocalAttentionPlan("micro_batch=2", 8, false);
  Plan every = sliding;
  every.model.full_attention_every = 0;
  auto a = Train(full, *world, 5), b = Train(whole, *world, 5), c = Train(sliding, *world, 5),
       d = Train(every, *world, 5);
  ASSERT_TRUE(a && b && c && d) << (a ? b ? c ? d.error().message : c.error().message : b.error().message
                                      : a.error().message);
  EXPECT_LT(MaxRelDiff(b->losses, a->losses), 1e-6);
  EXPECT_GT(MaxRelDiff(c->losses, a->losses), 1e-3);
  EXPECT_GT(MaxRelDiff(d->losses, c->losses), 1e-3);
}

// fp16 dynamic loss scaling: an overflow skips exactly that step (no update) and halves the scale;
// the run then continues in step with the same data.
TEST(MixedPrecision, Fp16OverflowSkipsTheStepAndHalvesTheScale) {
  auto world = LocalCommunicator();
  Plan plan = TinyPlan("micro_batch=2", 4);
  plan.training.precision = Precision::kFp16;
  auto run = [&](int64_t inject) {
    CpuBackend be;
    TrainerOptions o;
    o.inject_overflow_step = inject;
    auto t = Trainer::Create(plan, be, *world, o);
    EXPECT_TRUE(t);
    std::vector<StepResult> out;
    for (int i = 0; i < 4; ++i) {
      auto r = (*t)->Step();
      EXPECT_TRUE(r) << r.error().message;
      out.push_back(*r);
    }
    return out;
  };
  const auto clean = run(-1), hit = run(1);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(hit[static_cast<size_t>(i)].skipped, i == 1) << "step " << i;
    EXPECT_FALSE(clean[static_cast<size_t>(i)].skipped);
    EXPECT_EQ(clean[static_cast<size_t>(i)].loss_scale, 65536.0);
  }
  EXPECT_EQ(hit[0].loss_scale, 65536.0);
  EXPECT_EQ(hit[1].loss_scale, 32768.0);
  EXPECT_EQ(hit[3].loss_scale, 32768.0);
  // Step 1 changed nothing: step 2 of the hit run sees the weights after step 0, so its forward
  // loss equals what the clean run would compute for step 2's data from step-1 weights -- which
  // differs from the clean run's step 2. Step 0 and step 1 losses (computed before any skip) agree.
  EXPECT_DOUBLE_EQ(hit[0].loss, clean[0].loss);
  EXPECT_DOUBLE_EQ(hit[1].loss, clean[1].loss);
  EXPECT_NE(hit[2].loss, clean[2].loss);
}

// bf16 and fp16 training follow fp32's loss curve (fp32 main weights, fp32 gradients).
TEST(MixedPrecision, HalfPrecisionFollowsFp32) {
  auto world = LocalCommunicator();
  auto losses = [&](Precision p) {
    Plan plan = TinyPlan("micro_batch=2", 4);
    plan.training.precision = p;
    auto r = Train(plan, *world, 10);
    EXPECT_TRUE(r) << r.error().message;
    return r->losses;
  };
  const auto f32 = losses(Precision::kFp32), bf16 = losses(Precision::kBf16), f16 = losses(Precision::kFp16);
  EXPECT_LT(MaxRelDiff(bf16, f32), 2e-3);
  EXPECT_LT(MaxRelDiff(f16, f32), 2e-3);
  EXPECT_NE(bf16, f32);  // it really ran in bf16
}

TEST(Training, LossStartsNearUniformAndDecreases) {
  auto world = LocalCommunicator();
  auto r = Train(TinyPlan("micro_batch=2", 8), *world, 20);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NEAR(r->losses[0], std::log(256.0), 0.1);
  EXPECT_LT(r->losses[19], r->losses[0] - 0.3) << "training does not learn";
}

TEST(Training, GradientAccumulationEqualsOneLargeMicroBatch) {
  auto world = LocalCommunicator();
  auto one = Train(TinyPlan("micro_batch=8", 8), *world, 6);
  auto accum = Train(TinyPlan("micro_batch=2", 8), *world, 6);
  auto single = Train(TinyPlan("micro_batch=1", 8), *world, 6);
  ASSERT_TRUE(one && accum && single);
  EXPECT_LT(MaxRelDiff(accum->losses, one->losses), 1e-4);
  EXPECT_LT(MaxRelDiff(single->losses, one->losses), 1e-4);
}

TEST(Training, RecomputeModesGiveTheSameLossesWithLessMemory) {
  auto world = LocalCommunicator();
  auto none = Train(TinyPlan("micro_batch=4,recompute=none", 8), *world, 5);
  auto sel = Train(TinyPlan("micro_batch=4,recompute=selective", 8), *world, 5);
  auto full = Train(TinyPlan("micro_batch=4,recompute=full", 8), *world, 5);
  ASSERT_TRUE(none && sel && full);
  EXPECT_LT(MaxRelDiff(sel->losses, none->losses), 1e-5);
  EXPECT_LT(MaxRelDiff(full->losses, none->losses), 1e-5);
  EXPECT_LT(sel->peak_bytes, none->peak_bytes);
  EXPECT_LT(full->peak_bytes, sel->peak_bytes);
}

TEST(Training, LlamaStyleModelTrains) {
  // RMSNorm, SwiGLU, rotary positions, no biases, untied head, grouped-query attention.
  const Plan p = testing::LlamaTinyPlan("micro_batch=2", 8);
  auto world = LocalCommunicator();
  auto r = Train(p, *world, 20);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_LT(r->losses[19], r->losses[0] - 0.3);
  // And its gradients are right.
  ExpectGradientsMatchFiniteDifferences(p);
}

TEST(Training, ResumeFromCheckpointReproducesTheUninterruptedRun) {
  auto world = LocalCommunicator();
  const Plan p = TinyPlan("micro_batch=2", 4);
  auto straight = Train(p, *world, 6);
  ASSERT_TRUE(straight);
  const std::string dir = ::testing::TempDir() + "/parallax_ckpt_single";
  std::filesystem::remove_all(dir);
  std::vector<double> resumed;
  {
    CpuBackend be;
    auto t = Trainer::Create(p, be, *world, {});
    ASSERT_TRUE(t);
    for (int i = 0; i < 3; ++i) resumed.push_back((*t)->Step()->loss);
    ASSERT_TRUE(PrepareCheckpointDir(*world, dir));
    ASSERT_TRUE((*t)->SaveCheckpoint(dir));
  }
  {
    CpuBackend be;
    auto t = Trainer::Create(p, be, *world, {});
    ASSERT_TRUE(t);
    Status st = (*t)->LoadCheckpoint(dir);
    ASSERT_TRUE(st) << st.error().message;
    EXPECT_EQ((*t)->step(), 3);
    for (int i = 0; i < 3; ++i) resumed.push_back((*t)->Step()->loss);
  }
  EXPECT_EQ(resumed, straight->losses);  // bit-identical: same process, same order of operations
  // A different layout refuses the checkpoint.
  CpuBackend be;
  auto other = Trainer::Create(TinyPlan("micro_batch=1", 4), be, *world, {});
  ASSERT_TRUE(other);
  Status st = (*other)->LoadCheckpoint(dir);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("cannot resume"), std::string::npos) << st.error().message;
  // A damaged checkpoint is bad input naming the file, never a crash or a partial load.
  const std::string rank_file = dir + "/step_3/rank_0.bin";
  std::string bytes;
  {
    std::ifstream in(rank_file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  auto expect_bad = [&](const std::string& contents, const std::string& file, const std::string& what) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << contents;
    CpuBackend be2;
    auto t = Trainer::Create(p, be2, *world, {});
    ASSERT_TRUE(t);
    Status s = (*t)->LoadCheckpoint(dir);
    ASSERT_FALSE(s) << what;
    EXPECT_EQ(s.error().kind, ErrorKind::kBadInput) << s.error().message;
    EXPECT_EQ(s.error().message.rfind(file + ": ", 0), 0u) << s.error().message;
    EXPECT_NE(s.error().message.find(what), std::string::npos) << s.error().message;
  };
  expect_bad(bytes.substr(0, bytes.size() - 3), rank_file, "truncated");
  expect_bad(bytes + "x", rank_file, "trailing bytes");
  expect_bad("step_3x\n", dir + "/latest", "expected \"step_<k>\"");
}

TEST(Training, BadPlansAreRejectedWithTheRule) {
  auto world = LocalCommunicator();
  CpuBackend be;
  auto t = Trainer::Create(TinyPlan("dp=2", 8), be, *world, {});
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("mpirun -np 2"), std::string::npos) << t.error().message;
  Plan p = TinyPlan("micro_batch=2", 8);
  p.layout.tp = 3;
  auto t2 = Trainer::Create(p, be, *world, {});
  ASSERT_FALSE(t2);
}

}  // namespace
}  // namespace parallax::executor
