#pragma once
// A scratch folder for one CLI test: a 2-rank CPU cluster file and an empty cost database (the
// roofline prices), removed when the test ends.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "run_command.h"

namespace parallax::test {

struct Scratch {
  explicit Scratch(const std::string& name)
      : dir(std::filesystem::temp_directory_path() / ("parallax_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    cluster = WriteTempFile(
        name + "_cluster.json",
        R"({"kind":"cluster","version":1,"name":"local","nodes":1,"gpus_per_node":2,"device":"cpu",)"
        R"("intra_node":{"bandwidth_GBps":5,"latency_us":1},"inter_node":{"bandwidth_GBps":1.25,"latency_us":20}})");
    db_file = (dir / "db.json").string();
    std::ofstream(db_file) << R"({"kind":"costdb","version":1,"device":"cpu"})";
  }
  ~Scratch() { std::filesystem::remove_all(dir); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  std::filesystem::path dir;
  std::string cluster, db_file;
};

}  // namespace parallax::test
