#pragma once
// Test inputs for the GUI tests: a hand-built trace with known slices, and real traces made at
// runtime by the parallax CLI (simulate; run under mpirun when it is available).

#include <QDir>
#include <QProcess>
#include <QString>
#include <cstdlib>
#include <string>

#include "traces/chrome_writer.h"
#include "traces/tracer.h"

namespace parallax::gui::test {

inline QString DataDir() {
  QDir().mkpath(GUI_TEST_DIR);
  return GUI_TEST_DIR;
}

//! Runs a command through the shell; returns its exit status.
inline int Shell(const std::string& cmd) { return std::system(cmd.c_str()) == 0 ? 0 : 1; }

//! Rank r (r = 0, 1): compute "gemm" slices of 100 ns every 200 ns (i = 0..9, start 1000 + 200 i),
//! each with a nested "inner" child [start + 10, +50); tp-comm "allreduce" of 300 ns at
//! 1000 + 500 j (j = 0..3) with 1 MB over 2 ranks; a flow from tp-comm at 1100 to compute at
//! 1450; a memory counter.
inline traces::Trace KnownTrace() {
  traces::Tracer t("measured");
  for (int64_t r = 0; r < 2; ++r) {
    const auto c = t.Track(r, traces::Stream::kCompute);
    const auto tp = t.Track(r, traces::Stream::kTpComm);
    for (int64_t i = 0; i < 10; ++i) {
      OpIdentity id;
      id.rank = r;
      id.layer = static_cast<int>(i);
      id.op = OpKind::kFc1;
      t.Record(c, t.Intern("gemm"), 1000 + 200 * i, 100, id, traces::SliceArgs::Compute(1e6));
      t.Record(c, t.Intern("inner"), 1000 + 200 * i + 10, 50);
    }
    for (int64_t j = 0; j < 4; ++j) {
      OpIdentity id;
      id.rank = r;
      id.op = OpKind::kTpAllReduce;
      id.phase = Phase::kComm;
      id.microbatch = static_cast<int>(j);
      t.Record(tp, t.Intern("allreduce"), 1000 + 500 * j, 300, id,
               traces::SliceArgs::Comm(1000000, 2));
    }
    // Rank r's all-reduce 0 -> rank r's gemm 2 (a launch-like arrow across streams).
    t.Flow(tp, 1100, c, 1450, t.Intern("launch"));
    t.Counter(c, t.Intern("memory"), t.Intern("allocated_bytes"), 1000, 1e6);
    t.Counter(c, t.Intern("memory"), t.Intern("allocated_bytes"), 2000, 3e6);
  }
  return t.Take();
}

//! Two pipeline stages (ranks 0 and 1), four micro-batches forward then backward (1F1B-like
//! order is not the point): per micro-batch a host thread launches three kernels
//! (cudaLaunchKernel, 8 us each, a launch -> kernel flow to the compute stream 20 us later),
//! kernels qkv / attn / fc of 120, 200, 160 us, then a pp_send on rank 0's pp-comm matched by a
//! pp_recv on rank 1 (send -> recv flow), and backward in reverse. A memory counter per rank
//! ("memory" / "allocated_bytes") rises by 2 GiB per forward micro-batch and falls by as much per
//! backward one, from a 1 GiB base. Written to `flows.json` in the test data folder.
inline QString FlowsTrace() {
  const QString path = DataDir() + "/flows.json";
  traces::Tracer t("measured");
  constexpr int64_t kUs = 1000, kGiB = int64_t{1} << 30;
  const char* kernels[] = {"qkv", "attn", "fc"};
  const int64_t durs[] = {120 * kUs, 200 * kUs, 160 * kUs};
  const OpKind ops[] = {OpKind::kQkv, OpKind::kAttnCore, OpKind::kFc1};
  for (int64_t r = 0; r < 2; ++r) {
    const auto host = t.Track(r, traces::Stream::kHost);
    const auto compute = t.Track(r, traces::Stream::kCompute);
    const auto pp = t.Track(r, traces::Stream::kPpComm);
    const auto mem = t.Intern("memory"), series = t.Intern("allocated_bytes");
    int64_t bytes = kGiB;
    t.Counter(compute, mem, series, 0, static_cast<double>(bytes));
    // Rank 1 starts when rank 0's first activations arrive.
    int64_t clock = 10 * kUs + r * 560 * kUs;
    for (int phase = 0; phase < 2; ++phase) {
      for (int mb = 0; mb < 4; ++mb) {
        const int64_t mb_start = clock;
        for (int k = 0; k < 3; ++k) {
          const int kk = phase == 0 ? k : 2 - k;
          const int64_t launch = clock + k * 10 * kUs;
          const int64_t start = std::max(launch + 20 * kUs, k == 0 ? launch + 20 * kUs : clock);
          t.Record(host, t.Intern("cudaLaunchKernel"), launch, 8 * kUs);
          OpIdentity id;
          id.rank = r;
          id.stage = static_cast<int>(r);
          id.microbatch = mb;
          id.layer = 0;
          id.op = ops[kk];
          id.phase = phase == 0 ? Phase::kFwd : Phase::kBwd;
          const std::string name = std::string(kernels[kk]) + (phase == 0 ? "" : "_bwd");
          t.Record(compute, t.Intern(name), start, durs[kk] * (phase == 0 ? 1 : 2), id,
                   traces::SliceArgs::Compute(1e12));
          t.Flow(host, launch + 4 * kUs, compute, start, t.Intern("launch"));
          clock = start + durs[kk] * (phase == 0 ? 1 : 2);
        }
        bytes += phase == 0 ? 2 * kGiB : -2 * kGiB;
        t.Counter(compute, mem, series, phase == 0 ? mb_start : clock, static_cast<double>(bytes));
        if (r == 0 && phase == 0) {  // activations to stage 1
          const auto pp1 = t.Track(1, traces::Stream::kPpComm);
          OpIdentity id;
          id.rank = 0;
          id.microbatch = mb;
          id.op = OpKind::kPpSend;
          id.phase = Phase::kComm;
          t.Record(pp, t.Intern("pp_send"), clock, 40 * kUs, id, traces::SliceArgs::Comm(64 << 20, 2));
          id.rank = 1;
          id.op = OpKind::kPpRecv;
          t.Record(pp1, t.Intern("pp_recv"), clock + 5 * kUs, 40 * kUs, id,
                   traces::SliceArgs::Comm(64 << 20, 2));
          t.Flow(pp, clock + 2 * kUs, pp1, clock + 44 * kUs, t.Intern("pp_send"));
        }
        clock += 20 * kUs;
      }
    }
  }
  const traces::Trace trace = t.Take();
  if (!traces::WriteChromeTrace(trace, path.toStdString()).ok()) return {};
  return path;
}

//! `parallax simulate` of a 4-rank gpt-tiny layout on a local cluster: the predicted trace.
inline QString SimulatedTrace() {
  const QString dir = DataDir();
  const QString cluster = dir + "/cluster.json";
  const QString out = dir + "/predicted.json";
  static bool made = false;  // once per test program, fresh for each run
  if (made) return out;
  made = true;
  QFile f(cluster);
  f.open(QIODevice::WriteOnly);
  f.write(
      R"({"kind":"cluster","version":1,"name":"local","nodes":1,"gpus_per_node":2,"device":"cpu",)"
      R"("intra_node":{"bandwidth_GBps":5,"latency_us":1},"inter_node":{"bandwidth_GBps":1.25,"latency_us":20}})");
  f.close();
  Shell(std::string(PARALLAX_CLI) + " simulate --model gpt-tiny --cluster " +
        cluster.toStdString() + " --plan tp=2,micro_batch=2,global_batch=8 --all-ranks --trace " +
        out.toStdString() + " > /dev/null");
  return out;
}

//! `mpirun -np 2 parallax run` of the same layout: the measured trace ("" without MPI).
inline QString MeasuredTrace() {
  const std::string mpi = PARALLAX_MPIEXEC;
  if (mpi.empty()) return {};
  const QString out = DataDir() + "/measured.json";
  static bool made = false;
  if (made) return QFile::exists(out) ? out : QString();
  made = true;
  QFile::remove(out);
  Shell(mpi + " --oversubscribe -np 2 " + PARALLAX_CLI +
        " run --model gpt-tiny --plan tp=2,micro_batch=2,global_batch=8 --steps 2 --trace " +
        out.toStdString() + " > /dev/null 2>&1");
  return QFile::exists(out) ? out : QString();
}

//! `mpirun -np 3 parallax run` of synchronous parameter servers (2 workers, 1 dedicated server):
//! a classic-mode trace with exchange lanes and push/pull flows ("" without MPI).
inline QString ClassicTrace() {
  const std::string mpi = PARALLAX_MPIEXEC;
  if (mpi.empty()) return {};
  const QString out = DataDir() + "/classic_ps.json";
  static bool made = false;
  if (made) return QFile::exists(out) ? out : QString();
  made = true;
  QFile::remove(out);
  Shell(mpi + " --oversubscribe -np 3 " + PARALLAX_CLI +
        " run --model gpt-tiny --plan dp=2,sync=ps,servers=1,global_batch=8 --steps 2 --trace " +
        out.toStdString() + " > /dev/null 2>&1");
  return QFile::exists(out) ? out : QString();
}

//! `parallax plan --candidates` for gpt-tiny on the local cluster.
inline QString CandidatesFile() {
  SimulatedTrace();  // writes the cluster
  const QString out = DataDir() + "/candidates.json";
  static bool made = false;
  if (made) return out;
  made = true;
  Shell(std::string(PARALLAX_CLI) + " plan --model gpt-tiny --cluster " +
        (DataDir() + "/cluster.json").toStdString() + " --candidates " + out.toStdString() +
        " > /dev/null");
  return out;
}

inline QString KinetoTrace() {
  return QString(PARALLAX_TEST_DATA_DIR) + "/traces/kineto/trace_diff__control__control.json.gz";
}

}  // namespace parallax::gui::test
