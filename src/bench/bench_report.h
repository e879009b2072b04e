#pragma once
// The results of `tetra bench --synthetic` as a table for people and as JSON (--json): every
// time beside its floor, the ceilings they were measured against, and the headline ratios.
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "bench/bench_runner.h"

namespace tetra::bench {

// `command`: the command line that produced the report; `date`: ISO 8601 UTC.
nlohmann::json report_json(const BenchReport& r, const std::string& command, const std::string& date);
void print_report(const BenchReport& r, std::ostream& out);

// The current time as "2026-11-29T12:34:56Z".
std::string utc_now();

}  // namespace tetra::bench
