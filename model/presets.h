#pragma once
// Built-in models, devices and clusters (datasheet figures; sources in presets.cpp).

#include <optional>
#include <string>
#include <vector>

#include "model/cluster_spec.h"
#include "model/device_spec.h"
#include "model/model_spec.h"

namespace parallax {

std::optional<ModelSpec> ModelPreset(const std::string& name);
std::optional<DeviceSpec> DevicePreset(const std::string& name);
//! A cluster preset with its default node count (1 unless the preset says otherwise).
std::optional<ClusterSpec> ClusterPreset(const std::string& name);

std::vector<std::string> ModelPresetNames();
std::vector<std::string> DevicePresetNames();
std::vector<std::string> ClusterPresetNames();

}  // namespace parallax
