#pragma once
// Human-readable numbers for terminal tables.

#include <cstdint>
#include <string>

namespace parallax::cli {

//! 1.23K / 4.56M / 7.89G / 1.75T (powers of 1000).
std::string HumanCount(double v);
//! Bytes in binary units: 512 B, 1.50 KiB, 2.00 GiB.
std::string HumanBytes(int64_t bytes);
//! Seconds as ms / s.
std::string HumanSeconds(double s);

}  // namespace parallax::cli
