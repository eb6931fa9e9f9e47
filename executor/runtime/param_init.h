#pragma once
// Counter-based parameter initialisation: element i of a parameter gets a value that depends
// only on (seed, parameter name, global index i). Every layout — any TP split, any ZeRO shard —
// therefore starts from exactly the weights of the single-process reference, and a rank
// generates only the elements it holds.

#include <cstdint>
#include <string_view>

namespace parallax::executor {

//! Stream key of one parameter (FNV-1a of the name mixed with the seed).
uint64_t ParamKey(int64_t seed, std::string_view name);
//! N(0, std^2) sample number `index` of stream `key` (splitmix64 + Box-Muller).
float NormalAt(uint64_t key, int64_t index, float std);
//! Uniform [0, 1) sample number `index` of stream `key`.
double UniformAt(uint64_t key, int64_t index);
uint64_t SplitMix64(uint64_t x);

}  // namespace parallax::executor
