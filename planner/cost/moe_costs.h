#pragma once
// Mixture-of-experts pricing that the op catalogue's generic collectives do not express.

#include <cstdint>

#include "planner/cost/collective.h"

namespace parallax::planner {

//! Distinct NVLink domains other than the sender's that one token's top-`k` experts sit in, in
//! expectation, when `experts` are spread evenly over `domains` domains and a token's k distinct
//! experts are drawn uniformly (balanced routing): (domains - 1) x (1 - C(E - E/D, k) / C(E, k)).
double ExpectedRemoteDomains(int64_t experts, int64_t k, int64_t domains);

//! One dispatch or combine of DeepEP's normal (high-throughput) kernels over the ep group `ep`, for
//! `copy_bytes` = one copy of the rank's routed tokens (tokens x hidden x element bytes, times the
//! routing's load factor) and top-`k` routing over `experts`. DeepSeek-V3 technical report (arXiv
//! 2412.19437, section 3.2.2) and DeepEP's README (github.com/deepseek-ai/DeepEP, "normal kernels":
//! NVLink-to-RDMA forwarding): a token crosses the network once per remote domain holding any of its
//! experts, to the GPU of the same local index there, which forwards it over NVLink to the GPUs of
//! its experts; the two run concurrently. So: the network part is ExpectedRemoteDomains copies over
//! the rank's NIC share, the NVLink part an all-to-all of the k copies inside the domain, and the
//! time the longer of the two. Inside one domain it is the all-to-all of the k copies (DeepEP's
//! intranode kernels reach NVLink's bandwidth: 153-158 GB/s of H800's 160, README table).
double DeepEpDispatchTime(const CollectiveModel& coll, double copy_bytes, int64_t k, int64_t experts,
                          const PlacedGroup& ep);

}  // namespace parallax::planner
