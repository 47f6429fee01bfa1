// mgmt_fuzz.cc - the management protocol (src/ipc/mgmt_protocol.h): each line of the input is a
// request line as a client writes it on the control socket, answered by MgmtServer::answer()
// with the real Management::handle() behind it (src/dataplane/mgmt_server.*, management.*), and
// the dataplane answering over the control channel (fake_dataplane.h: bindings checked by the
// real transports). The JSON parser, the request's envelope, every command's arguments (ports,
// tuples "ip:port" with wildcards, uids, transports and their parameters, addresses, ids, fault
// probabilities, log levels) and the answers' rendering all see the input.
//
// transport.attach is refused by the harness: it would dlopen() whatever path the input names.
//
// Invariants: every answer is one line of JSON, an object with the protocol's version, "ok" and,
// when ok, a result, else an error whose code is one the protocol defines: never "internal",
// which means an exception escaped a command's checks; and it echoes the request's id.
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "config.h"
#include "control/management.h"
#include "control/mgmt_server.h"
#include "ctl_channel.h"
#include "fake_dataplane.h"
#include "fuzz_input.h"
#include "lcore/route.h"
#include "mgmt_protocol.h"

namespace cleave::fuzz {
namespace {

using nlohmann::json;

struct World {
  World() {
    eal_init("fuzz_mgmt");
    spdlog::set_level(spdlog::level::off);
    dp::ConfigResult r = dp::parse_config(
        "ports:\n  - name: p0\n    device: net_null0\n    ipv4: 10.0.0.1/24\n", "fuzz");
    if (!r.config) std::abort();
    cfg = *r.config;
    routes = std::make_unique<dp::RouteTable>(std::vector<dp::PortConfig>{});  // as `ports`
    ctl = std::make_unique<dp::ShardChannels>(1);
    fake = std::make_unique<FakeDataplane>((*ctl)[0]);
    mgmt = std::make_unique<dp::Management>(dp::DaemonInfo{}, cfg, ports, *routes, *ctl);
    epfd = epoll_create1(EPOLL_CLOEXEC);
    path = "/tmp/cleave-fuzz-mgmt-" + std::to_string(getpid()) + ".sock";
    server = std::make_unique<dp::MgmtServer>(
        path, epfd, [this](std::string_view command, const json& args) {
          if (command == "transport.attach") {
            throw dp::MgmtError(mgmt::kErrBadRequest, "transport.attach: not in the fuzzer");
          }
          return mgmt->handle(command, args);
        });
  }
  dp::Config cfg;
  std::vector<dp::DpPort> ports;  // none: port and NIC commands find nothing
  std::unique_ptr<dp::RouteTable> routes;
  std::unique_ptr<dp::ShardChannels> ctl;
  std::unique_ptr<FakeDataplane> fake;
  std::unique_ptr<dp::Management> mgmt;
  int epfd = -1;
  std::string path;
  std::unique_ptr<dp::MgmtServer> server;
};

World* g_world = nullptr;

void check_answer(std::string_view line, const std::string& a) {
  FUZZ_CHECK(!a.empty() && a.find('\n') == std::string::npos);
  json j = json::parse(a, nullptr, false);
  FUZZ_CHECK(!j.is_discarded() && j.is_object());
  FUZZ_CHECK(j.contains("version") && j["version"] == mgmt::kProtocolVersion);
  FUZZ_CHECK(j.contains("ok") && j["ok"].is_boolean() && j.contains("id"));
  if (j["ok"].get<bool>()) {
    FUZZ_CHECK(j.contains("result"));
  } else {
    static const std::set<std::string_view> codes = {
        mgmt::kErrBadRequest, mgmt::kErrUnsupportedVersion, mgmt::kErrUnknownCommand,
        mgmt::kErrNotFound, mgmt::kErrUnavailable};
    FUZZ_CHECK(j.contains("error") && j["error"].is_object());
    const json& e = j["error"];
    FUZZ_CHECK(e.contains("code") && e["code"].is_string() && e.contains("message"));
    if (!codes.contains(e["code"].get<std::string>())) {
      std::fprintf(stderr, "request: %.*s\nanswer: %s\n", int(line.size()), line.data(), a.c_str());
      FUZZ_CHECK(!"an answer with an error code the protocol does not define");
    }
  }
  const json req = json::parse(line, nullptr, false);
  if (!req.is_discarded() && req.is_object() && req.contains("id")) {
    FUZZ_CHECK(j["id"] == req["id"]);
  }
}

}  // namespace
}  // namespace cleave::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  cleave::fuzz::g_world = new cleave::fuzz::World();
  // The world lives as long as the process; its socket file must not outlive it.
  std::atexit([] { unlink(cleave::fuzz::g_world->path.c_str()); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cleave::fuzz;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  g_world->fake->reset();
  // As MgmtServer splits a client's stream: one request per line, blank lines skipped.
  size_t at = 0;
  while (at <= in.size()) {
    size_t nl = in.find('\n', at);
    if (nl == std::string_view::npos) nl = in.size();
    const std::string_view line = in.substr(at, nl - at);
    at = nl + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    check_answer(line, g_world->server->answer(line));
  }
  spdlog::set_level(spdlog::level::off);  // log.set may have turned it on
  return 0;
}
