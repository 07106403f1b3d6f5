#pragma once
// Quantities as people read them in the planner's table: three significant digits and a unit
// ("$13.3 M", "41.2 days", "786 k", "312 MWh"), never a bare "13308029".
#include <string>

namespace dtsim::sweep {

// x with three significant digits and the largest of "", " k", " M", " B", " T" that keeps it
// at least 1: 0.5 -> "0.500", 1234 -> "1.23 k", 13308029 -> "13.3 M".
std::string human_number(double x);
std::string human_money(double usd);       // "$13.3 M"
std::string human_days(double seconds);    // "41.2 days"; under a day "5.3 hours", under an hour "12 min", under a minute "9 s"
std::string human_energy(double kwh);      // "312 MWh"
std::string human_gib(double bytes);       // "0.6 GiB"

}  // namespace dtsim::sweep
