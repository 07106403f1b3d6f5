#include "sim/calibrate/nccl_tests_parse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>

#include "sim/calibrate/text_input.hpp"
#include "sim/core/errors.hpp"
#include "sim/network/collectives.hpp"

namespace dtsim::calibrate {

using taskgraph::CollectiveOp;

const std::vector<NcclTest>& nccl_tests() {
  static const std::vector<NcclTest> tests{
      {"all_reduce_perf", CollectiveOp::AllReduce}, {"all_gather_perf", CollectiveOp::AllGather},
      {"reduce_scatter_perf", CollectiveOp::ReduceScatter}, {"alltoall_perf", CollectiveOp::AllToAll},
      {"sendrecv_perf", CollectiveOp::SendRecv}, {"broadcast_perf", CollectiveOp::Broadcast},
      {"reduce_perf", CollectiveOp::Reduce}};
  return tests;
}

namespace {

// "All_Reduce-perf" -> "allreduce": names compared without case, '_', '-' or the "perf" suffix.
std::string squash(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != '_' && c != '-') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}
std::string squashed_test(const NcclTest& t) { return squash(std::string(t.binary).substr(0, std::string(t.binary).size() - 5)); }

// The test a name contains (the longest match: "allreduce" before "reduce"), or none.
const NcclTest* test_in(const std::string& name) {
  const std::string s = squash(name);
  const NcclTest* best = nullptr;
  for (const auto& t : nccl_tests())
    if (s.find(squashed_test(t)) != std::string::npos && (!best || squashed_test(t).size() > squashed_test(*best).size())) best = &t;
  return best;
}

// The test `name` is (all_reduce_perf, all_reduce, all-reduce, all_to_all...), or none.
const NcclTest* test_named(const std::string& name) {
  for (const auto& t : nccl_tests())
    if (squash(name) == squashed_test(t) || squash(name) == squashed_test(t) + "perf") return &t;
  return nullptr;
}

std::vector<std::string> test_names() {
  std::vector<std::string> out;
  for (const auto& t : nccl_tests()) out.emplace_back(t.binary);
  return out;
}

// Where the columns are: "size", each "time"/"cputime" (out of place, then in place) and the
// "algbw"/"busbw" after the first.
struct Columns {
  std::size_t size = 0, algbw = 0, busbw = 0;
  std::vector<std::size_t> times;
  std::size_t needed() const { return std::max({size, algbw, busbw, times.back()}) + 1; }
};

std::optional<Columns> header_columns(const std::string& text) {
  if (text.empty() || text.front() != '#') return std::nullopt;
  const auto f = fields(text.substr(1));
  Columns c;
  bool has_size = false, has_count = false;
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i] == "size") has_size = true, c.size = i;
    if (f[i] == "count") has_count = true;
    if (f[i] == "time" || f[i] == "cputime") c.times.push_back(i);
    if (f[i] == "algbw" && c.times.size() == 1 && c.algbw == 0) c.algbw = i;
    if (f[i] == "busbw" && c.times.size() == 1 && c.busbw == 0) c.busbw = i;
  }
  if (!has_size || !has_count || c.times.empty() || c.algbw == 0 || c.busbw == 0) return std::nullopt;
  return c;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
}

}  // namespace

namespace {

struct Scan {
  std::map<int, std::string> hosts;  // rank -> host
  std::string started;               // "# Collective test starting: NAME" (nccl-tests >= 2.15)
  std::optional<Columns> columns;
};

// One "# ..." line: a rank, the test's name, the column header or the average bus bandwidth.
void read_comment(const Line& l, const std::string& file, Scan& s, NcclTestsFile& out) {
  static const std::regex rank(R"(^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+.*)");
  static const std::regex started(R"(^#\s*Collective test starting:\s*(\S+).*)");
  static const std::regex avg(R"(^#\s*Avg bus bandwidth\s*:\s*(\S+).*)");
  std::smatch m;
  if (std::regex_match(l.text, m, rank)) {
    const int r = std::stoi(m[1].str().substr(0, 9));
    if (!s.hosts.emplace(r, m[2].str()).second) throw InputError(file, std::to_string(l.number), fmt::format("rank {} is listed twice", r));
  } else if (std::regex_match(l.text, m, started)) {
    s.started = m[1].str();
  } else if (std::regex_match(l.text, m, avg)) {
    out.avg_busbw = number_at(file, l.number, m[1].str(), "the average bus bandwidth");
  } else if (auto c = header_columns(l.text)) {
    s.columns = c;
  }
}

void read_row(const Line& l, const std::vector<std::string>& f, const std::string& file, const Scan& s, NcclTestsFile& out) {
  const std::string at = std::to_string(l.number);
  if (!s.columns) throw InputError(file, at, "a table row before nccl-tests' column header (\"#  size  count  type ...\")");
  const Columns& c = *s.columns;
  if (f.size() < c.needed())
    throw InputError(file, at, fmt::format("{} columns, the header names at least {}", f.size(), c.needed()));
  NcclTestsRow r;
  r.line = l.number;
  r.size = number_at(file, l.number, f[c.size], "size");
  double sum = 0;
  for (std::size_t t : c.times) sum += number_at(file, l.number, f[t], "time");
  r.time_us = sum / static_cast<double>(c.times.size());
  r.algbw = number_at(file, l.number, f[c.algbw], "algbw");
  r.busbw = number_at(file, l.number, f[c.busbw], "busbw");
  if (r.size < 0 || r.algbw < 0 || r.busbw < 0) throw InputError(file, at, "a negative size or bandwidth");
  if (r.size == 0) {
    ++out.zero_rows;
    return;
  }
  if (!(r.time_us > 0)) throw InputError(file, at, "a row of bytes that took no time");
  out.rows.push_back(r);
}

Scan scan(const std::string& file, NcclTestsFile& out) {
  Scan s;
  for (const auto& l : read_lines(file)) {
    const auto f = fields(l.text);
    if (f.empty()) continue;
    if (f.front().front() == '#') {
      read_comment(l, file, s, out);
      continue;
    }
    // Anything else that is not a row (NCCL_DEBUG lines, a shell prompt) is not the table's.
    if (all_digits(f.front())) read_row(l, f, file, s, out);
  }
  if (s.hosts.empty())
    throw InputError(file, "", "no \"#  Rank ... on HOST device ...\" lines: nccl-tests prints one per rank, and calibrate needs them "
                               "to know how many GPUs took part and on how many nodes");
  if (s.hosts.rbegin()->first != static_cast<int>(s.hosts.size()) - 1)
    throw InputError(file, "", fmt::format("ranks 0 to {} are not all listed", s.hosts.rbegin()->first));
  if (out.rows.empty()) throw InputError(file, "", "no table rows with a size above 0 bytes");
  for (const auto& [r, h] : s.hosts) out.host_of_rank.push_back(h);
  return s;
}

// OP= before the file, the test's own header line, or the file's name, in that order.
void name_the_test(const std::string& prefix, const Scan& s, NcclTestsFile& out) {
  const NcclTest* from_prefix = prefix.empty() ? nullptr : test_named(prefix);
  if (!prefix.empty() && !from_prefix)
    throw InputError(out.path, "", fmt::format("\"{}=\" names no test calibrate reads (known: {})", prefix, fmt::join(test_names(), ", ")));
  const NcclTest* from_header = s.started.empty() ? nullptr : test_in(s.started);
  if (!s.started.empty() && !from_header)
    throw InputError(out.path, "", fmt::format("\"{}\" is not a test calibrate reads (known: {})", s.started, fmt::join(test_names(), ", ")));
  if (from_prefix && from_header && from_prefix != from_header)
    throw InputError(out.path, "", fmt::format("given as {}, but its header says {}", from_prefix->binary, s.started));
  const NcclTest* from_name = test_in(std::filesystem::path(out.path).filename().string());
  const NcclTest* t = from_prefix ? from_prefix : from_header ? from_header : from_name;
  if (!t)
    throw InputError(out.path, "", fmt::format("which test is this? Its header does not say (nccl-tests before 2.15) and its name does not "
                                               "contain one: name the file after the test (all_reduce_perf.txt) or write OP=FILE, "
                                               "OP one of {}", fmt::join(test_names(), ", ")));
  out.test = t->binary;
  out.op = t->op;
  out.op_from = from_prefix ? "given before \"=\"" : from_header ? "its header" : "its file name";
}

// nccl-tests' busbw is algbw times the operation's factor (doc/PERFORMANCE.md): a table whose
// ratio is another operation's was read as the wrong test.
void check_ratio(const NcclTestsFile& f) {
  const int n = f.ranks();
  const double want = network::bus_bandwidth_factor(f.op, n);
  for (const auto& r : f.rows) {
    if (r.algbw < 1.0) continue;  // printed to 2 decimals: too few digits below 1 GB/s
    const double ratio = r.busbw / r.algbw;
    if (std::fabs(ratio / want - 1) <= 0.02) continue;
    std::string fits;
    for (const auto& t : nccl_tests())
      if (std::fabs(ratio / network::bus_bandwidth_factor(t.op, n) - 1) <= 0.02) fits += fits.empty() ? t.binary : std::string("/") + t.binary;
    throw InputError(f.path, std::to_string(r.line),
                     fmt::format("busbw/algbw is {:.3f}, not {}'s {:.3f} on {} ranks (it was named by {}){}", ratio, f.test, want, n,
                                 f.op_from, fits.empty() ? "" : fmt::format(": it is {}'s", fits)));
  }
}

}  // namespace

NcclTestsFile parse_nccl_tests(const std::string& spec) {
  NcclTestsFile out;
  std::string prefix;
  const auto eq = spec.find('=');
  // OP=FILE only when the part before "=" is a plain name: a path may hold "=" too.
  std::error_code ec;
  if (eq != std::string::npos && spec.substr(0, eq).find('/') == std::string::npos &&
      (test_named(spec.substr(0, eq)) || !std::filesystem::exists(spec, ec)))
    prefix = spec.substr(0, eq);
  out.path = prefix.empty() ? spec : spec.substr(eq + 1);
  const Scan s = scan(out.path, out);
  name_the_test(prefix, s, out);
  check_ratio(out);
  return out;
}

}  // namespace dtsim::calibrate
