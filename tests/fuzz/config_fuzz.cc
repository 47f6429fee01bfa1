// config_fuzz.cc - the YAML configuration loader (src/dataplane/config.*) on the input as the
// text of a configuration file.
//
// Invariants: parse_config() reports every problem as an error and throws nothing; it gives a
// configuration exactly when there is no error; every error names the file, a position inside
// the text (1-based, line at most one past the last) and a message, in file order; and a
// configuration it accepts keeps the rules the loader promises (ports present and within
// kMaxPorts, unique names, the polling lcore apart from the main one, absolute runtime dir,
// NIC MS sizes in whole chunks, apps admitted by a uid or a gid).
#include <algorithm>
#include <set>
#include <string>
#include <string_view>

#include "config.h"
#include "fuzz_input.h"
#include "stats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cleave::dp;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ConfigResult r;
  try {
    r = parse_config(text, "fuzz.yaml");
  } catch (...) {
    FUZZ_CHECK(!"parse_config threw");
  }
  FUZZ_CHECK(r.config.has_value() == r.errors.empty());
  const int lines = int(std::count(text.begin(), text.end(), '\n')) + 1;
  for (size_t i = 0; i < r.errors.size(); i++) {
    const ConfigError& e = r.errors[i];
    FUZZ_CHECK(e.file == "fuzz.yaml" && !e.message.empty());
    FUZZ_CHECK(e.line >= 1 && e.line <= lines + 1 && e.col >= 1);
    if (i > 0) {
      const ConfigError& p = r.errors[i - 1];
      FUZZ_CHECK(p.line < e.line || (p.line == e.line && p.col <= e.col));
    }
    FUZZ_CHECK(e.str().find(e.message) != std::string::npos);
  }
  if (!r.config) return 0;
  const Config& c = *r.config;
  FUZZ_CHECK(c.source == "fuzz.yaml");
  FUZZ_CHECK(!c.ports.empty() && c.ports.size() <= kMaxPorts);
  std::set<std::string> names;
  for (const PortConfig& p : c.ports) {
    FUZZ_CHECK(!p.name.empty() && names.insert(p.name).second);
    FUZZ_CHECK(!p.device.empty());
  }
  // Every lcore has one role: the main thread, a shard, the NIC service.
  FUZZ_CHECK(!c.dataplane.lcores.empty() && c.dataplane.lcores.size() <= kMaxShards);
  std::set<uint32_t> lcores{c.eal.main_lcore};
  for (const LcoreSpec& l : c.dataplane.lcores)
    FUZZ_CHECK(lcores.insert(l.lcore).second);
  if (c.nic.service_lcore) FUZZ_CHECK(lcores.insert(c.nic.service_lcore->lcore).second);
  FUZZ_CHECK(!c.runtime_dir.empty() && c.runtime_dir[0] == '/' && c.runtime_dir.size() <= 80);
  FUZZ_CHECK(c.nic.ms_committed % 16 == 0 && c.nic.ms_store % 16 == 0);
  for (const AppRule& a : c.apps.allow)
    FUZZ_CHECK(a.uid.has_value() != a.gid.has_value());
  return 0;
}
