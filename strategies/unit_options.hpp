#pragma once
// Settings a mechanism unit declares and reads itself (strategies/unit.hpp: UnitEntry::read), kept
// by name: a new unit adds no field to ParallelismSpec and no line to the scenario loader.
#include <map>
#include <string>

namespace dtsim::strategies {

struct UnitOptions {
  std::map<std::string, bool> flags;
  std::map<std::string, double> numbers;
  std::map<std::string, std::string> texts;
  // What was read (every declared key holds its default where the file gives none); false, 0 and
  // "" for a key the unit never declared.
  bool flag(const std::string& key) const;
  double number(const std::string& key) const;
  std::string text(const std::string& key) const;
};

// Every unit's settings, by the object of the parallelism section they are read from.
using UnitSettings = std::map<std::string, UnitOptions>;

}  // namespace dtsim::strategies
