// daemon.cc - cleaved's main thread: start-up in order, the management event loop, and a clean
// shutdown (dataplane stopped, ports stopped and closed, sockets removed) on SIGTERM/SIGINT.
#include "control/daemon.h"

#include <fcntl.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include "cleave_version.h"
#include "control/app_server.h"
#include "control/eal.h"
#include "control/log.h"
#include "control/management.h"
#include "control/mgmt_server.h"
#include "control/port.h"
#include "control/sd_notify.h"
#include "control/telemetry.h"
#include "ctl_channel.h"
#include "lcore/dataplane.h"
#include "lcore/route.h"
#include "mgmt_protocol.h"
#include "shm_abi.h"

namespace cleave::dp {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTick = std::chrono::milliseconds(100);
constexpr auto kEventPeriod = std::chrono::seconds(1);

struct StartupError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The instance lock: one cleaved per runtime directory. Held (flock) for the process's life.
class InstanceLock {
 public:
  explicit InstanceLock(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw StartupError("cannot create runtime directory " + dir + ": " + ec.message());
    path_ = dir + "/cleaved.lock";
    fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw StartupError("cannot open " + path_ + ": " + std::strerror(errno));
    if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      char buf[32] = {};
      ssize_t n = pread(fd_, buf, sizeof buf - 1, 0);
      std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "unknown";
      while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' '))
        pid.pop_back();
      close(fd_);
      throw StartupError("another cleaved (pid " + pid +
                         ") is already running with runtime "
                         "directory " +
                         dir +
                         "; stop it first, or give this instance its own "
                         "runtime_dir in the configuration");
    }
    std::string pid = std::to_string(getpid()) + "\n";
    if (ftruncate(fd_, 0) != 0 || pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
      spdlog::warn("cannot write pid to {}: {}", path_, std::strerror(errno));
    }
  }
  InstanceLock(const InstanceLock&) = delete;
  InstanceLock& operator=(const InstanceLock&) = delete;
  ~InstanceLock() {
    if (ftruncate(fd_, 0) != 0) { /* best effort: the lock itself is what matters */
    }
    close(fd_);  // releases the lock
  }

 private:
  std::string path_;
  int fd_ = -1;
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// Each lcore's CPU must exist (an lcore without @CPU runs on the CPU of its number).
void check_lcores(const Config& cfg) {
  unsigned cpus = std::thread::hardware_concurrency();
  std::vector<std::pair<std::string, LcoreSpec>> all{
      {"eal.main_lcore", LcoreSpec{cfg.eal.main_lcore, std::nullopt}}};
  for (size_t i = 0; i < cfg.dataplane.lcores.size(); i++)
    all.emplace_back("dataplane lcore " + std::to_string(i), cfg.dataplane.lcores[i]);
  if (cfg.nic.service_lcore) all.emplace_back("nic.service_lcore", *cfg.nic.service_lcore);
  for (const auto& [key, l] : all) {
    if (cpus != 0 && l.cpu_or_lcore() >= cpus) {
      throw StartupError(key + " " + l.str() + " runs on CPU " + std::to_string(l.cpu_or_lcore()) +
                         " but this machine has " + std::to_string(cpus) + " CPU(s) (0-" +
                         std::to_string(cpus - 1) + "); give it one as LCORE@CPU");
    }
  }
}

// What the main thread watches between ticks: links, failures worth a log line, the watchdog.
class Supervisor {
 public:
  Supervisor(const Config& cfg, const std::vector<DpPort>& ports,
             const std::vector<std::unique_ptr<Dataplane>>& shards, const ShardChannels& ctl,
             SdNotify& sd)
      : cfg_(cfg),
        ports_(ports),
        shards_(shards),
        ctl_(ctl),
        sd_(sd),
        // systemd's advice: ping at half the interval it asked for.
        watchdog_period_(sd.watchdog() ? *sd.watchdog() / 2 : std::chrono::microseconds(0)),
        watchdog_(shards.size(), WatchdogGate(watchdog_period_)),
        link_up_(ports.size(), -1) {}

  std::chrono::milliseconds tick() const {
    if (watchdog_period_.count() == 0) return kTick;
    return std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(watchdog_period_),
                      std::chrono::milliseconds(1), std::chrono::milliseconds(kTick));
  }

  void on_tick() {
    auto now = Clock::now();
    // The gates share a period and a start, so they fall due together: a ping when every shard
    // made progress, none when one did not.
    bool ping = true, stalled = false;
    for (size_t k = 0; k < shards_.size(); k++) {
      switch (watchdog_[k].check(shards_[k]->heartbeat(), now)) {
        case WatchdogGate::Verdict::kPing:
          break;
        case WatchdogGate::Verdict::kStalled:
          spdlog::error(
              "dataplane lcore {} (shard {}) has stopped making progress; withholding watchdog "
              "pings",
              cfg_.dataplane.lcores[k].lcore, k);
          stalled = true;
          ping = false;
          break;
        case WatchdogGate::Verdict::kWait:
          ping = false;
          break;
      }
    }
    if (ping && !stalled) sd_.send("WATCHDOG=1");
    if (now >= next_events_) {
      next_events_ = now + kEventPeriod;
      report_events();
    }
  }

 private:
  void report_events() {
    for (size_t i = 0; i < ports_.size(); i++) {
      rte_eth_link link{};
      if (rte_eth_link_get_nowait(ports_[i].port_id, &link) != 0) continue;
      int up = link.link_status == RTE_ETH_LINK_UP ? 1 : 0;
      if (up != link_up_[i]) {
        if (link_up_[i] != -1 || up == 0) {
          spdlog::info("port {} link {}", ports_[i].name, up != 0 ? "up" : "down");
        }
        link_up_[i] = up;
      }
    }
    DataplaneStats stats;
    for (size_t k = 0; k < ctl_.size(); k++) {
      auto req = ctl_[k].call(CtlRequest::make(ctl::Stats{}), std::chrono::milliseconds(200));
      if (!req) return;
      stats += req->as<ctl::Stats>().stats;
    }
    const ProtoStats& p = stats.proto;
    if (p.arp_conflicts > last_.arp_conflicts) {
      spdlog::warn("arp: {} packet(s) from another host claiming one of our addresses",
                   p.arp_conflicts - last_.arp_conflicts);
    }
    // A dead gateway fails again every retry cycle: say so once a minute, not every cycle.
    if (p.arp_failed > last_failed_logged_ && Clock::now() >= next_failed_log_) {
      spdlog::warn(
          "arp: {} resolution(s) failed after {} request(s) each; see 'cleavectl arp show'",
          p.arp_failed - last_failed_logged_, cfg_.arp.retries);
      last_failed_logged_ = p.arp_failed;
      next_failed_log_ = Clock::now() + std::chrono::minutes(1);
    }
    if (p.arp_table_full > last_.arp_table_full) {
      spdlog::warn("arp: neighbour cache full ({} entries); raise arp.max_entries",
                   cfg_.arp.max_entries);
    }
    last_ = p;
    if (sd_.enabled()) {
      uint64_t rx = 0, tx = 0;
      for (size_t i = 0; i < ports_.size(); i++) {
        rx += stats.ports[i].rx_packets;
        tx += stats.ports[i].tx_packets;
      }
      unsigned up = 0;
      for (int u : link_up_)
        up += u == 1 ? 1 : 0;
      sd_.send("STATUS=" + std::to_string(up) + "/" + std::to_string(ports_.size()) +
               " ports up, " + std::to_string(rx) + " packets in, " + std::to_string(tx) + " out");
    }
  }

  const Config& cfg_;
  const std::vector<DpPort>& ports_;
  const std::vector<std::unique_ptr<Dataplane>>& shards_;
  const ShardChannels& ctl_;
  SdNotify& sd_;
  std::chrono::microseconds watchdog_period_;  // 0: no watchdog
  std::vector<WatchdogGate> watchdog_;         // by shard
  Clock::time_point next_events_{};
  std::vector<int> link_up_;  // -1 unknown
  ProtoStats last_{};
  uint64_t last_failed_logged_ = 0;
  Clock::time_point next_failed_log_{};
};

// Everything after EAL init: the ports, the dataplane on its lcore, the management loop.
int serve(const Config& cfg, const EalPlan& plan, SdNotify& sd, int signal_fd) {
  rte_mempool* pool = create_pool(cfg);
  NicService nic_service(cfg);  // before the ports start; stops after they close
  std::vector<DpPort> ports = start_ports(cfg, pool);
  // Ports stop last, on every way out: after the dataplane lcore has returned.
  struct PortsGuard {
    const std::vector<DpPort>& ports;
    ~PortsGuard() { stop_ports(ports); }
  } ports_guard{ports};
  RouteTable routes(cfg.ports);
  // One shard per dataplane lcore, each with its channel, on queue `shard` of every port.
  const size_t nshards = cfg.dataplane.lcores.size();
  ShardChannels ctl(nshards);
  std::vector<std::unique_ptr<Dataplane>> shards;
  std::vector<Dataplane*> peers;
  for (size_t k = 0; k < nshards; k++) {
    shards.push_back(std::make_unique<Dataplane>(
        DataplaneParams::from_config(cfg, rte_get_tsc_hz(), uint16_t(k)), ports, routes, pool,
        ctl[k]));
    peers.push_back(shards.back().get());
  }
  for (auto& dp : shards)
    dp->set_peers(peers);
  // Stops and waits for the shards launched so far, on every way out.
  size_t launched = 0;
  struct LaunchGuard {
    const Config& cfg;
    std::vector<std::unique_ptr<Dataplane>>& shards;
    size_t& launched;
    ~LaunchGuard() {
      for (size_t k = 0; k < launched; k++)
        shards[k]->request_stop();
      for (size_t k = 0; k < launched; k++)
        rte_eal_wait_lcore(cfg.dataplane.lcores[k].lcore);
    }
  } launch_guard{cfg, shards, launched};
  for (size_t k = 0; k < nshards; k++) {
    const LcoreSpec& l = cfg.dataplane.lcores[k];
    if (int r = rte_eal_remote_launch(Dataplane::lcore_main, shards[k].get(), l.lcore); r != 0) {
      throw StartupError("cannot launch dataplane shard " + std::to_string(k) + " on lcore " +
                         l.str() + ": " + std::strerror(-r));
    }
    launched++;
    spdlog::info("dataplane shard {} running on lcore {}", k, l.str());
  }

  int exit_code = kExitOk;
  {
    Fd epoll(epoll_create1(EPOLL_CLOEXEC));
    const char* hooks = std::getenv("CLEAVE_TEST_HOOKS");
    std::vector<unsigned> lcores;
    for (const LcoreSpec& l : cfg.dataplane.lcores)
      lcores.push_back(l.lcore);
    DaemonInfo info{cfg.source,
                    cfg.runtime_dir,
                    plan.hugepages,
                    cfg.eal.main_lcore,
                    lcores,
                    Clock::now(),
                    hooks != nullptr && std::string_view(hooks) == "1"};
    if (info.test_hooks) spdlog::warn("CLEAVE_TEST_HOOKS=1: test hooks (debug.*) are enabled");
    Management mgmt(info, cfg, ports, routes, ctl);
    if (nic_service.running()) mgmt.set_nic_service(&nic_service);
    std::optional<MgmtServer> server;
    std::optional<AppServer> apps;
    Supervisor sup(cfg, ports, shards, ctl, sd);
    Fd timer(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    try {
      // The configuration's bindings go through the same path as flow.attach, before any app or
      // operator can connect. load_transports() checked them already; a refusal here still
      // names the binding's line.
      const auto& bindings = cfg.transports.bindings;
      for (size_t i = 0; i < bindings.size(); i++) {
        const TransportBinding& tb = bindings[i];
        try {
          FlowBinding b;
          b.tuple = tb.tuple;
          b.local_port = tb.tuple ? tb.local.port : tb.port;
          b.local_ip = tb.local.ip;
          b.remote_ip = tb.remote.ip;
          b.remote_port = tb.remote.port;
          b.uid = tb.uid;
          b.transport = tb.transport;
          b.params = tb.params;
          mgmt.attach(std::move(b));
        } catch (const MgmtError& e) {
          throw StartupError(
              ConfigError{cfg.source, tb.pos.line, tb.pos.col,
                          "transports.bindings[" + std::to_string(i) + "]: " + e.what()}
                  .str());
        }
      }
      server.emplace(
          cfg.runtime_dir + "/" + std::string(mgmt::kSocketName), epoll.get(),
          [&](std::string_view cmd, const nlohmann::json& args) { return mgmt.handle(cmd, args); },
          MgmtLimits{{cfg.management.max_clients, cfg.management.max_clients_per_uid},
                     cfg.management.requests_per_turn});
      mgmt.set_control(&*server);
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(sup.tick()).count();
      itimerspec its{};
      its.it_interval.tv_sec = its.it_value.tv_sec = ns / 1000000000;
      its.it_interval.tv_nsec = its.it_value.tv_nsec = ns % 1000000000;
      timerfd_settime(timer.get(), 0, &its, nullptr);
      for (int fd : {signal_fd, timer.get()}) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd, &ev);
      }
      std::vector<uint16_t> port_ids;
      port_ids.reserve(ports.size());
      for (const DpPort& p : ports)
        port_ids.push_back(p.port_id);
      apps.emplace(cfg, cfg.runtime_dir + "/" + std::string(abi::kAppSocketName), epoll.get(), ctl,
                   port_ids);
      mgmt.set_apps(&*apps);
      if (cfg.eal.telemetry) register_telemetry(&mgmt);

      spdlog::info("ready: control socket {}, app socket {}", server->path(), apps->path());
      sd.send("READY=1\nSTATUS=running");

      for (bool running = true; running;) {
        epoll_event evs[16];
        int n = epoll_wait(epoll.get(), evs, 16, -1);
        if (n < 0 && errno != EINTR)
          throw std::runtime_error("epoll_wait: " + std::string(std::strerror(errno)));
        for (int i = 0; i < n; i++) {
          int fd = evs[i].data.fd;
          if (fd == signal_fd) {
            signalfd_siginfo si{};
            if (read(signal_fd, &si, sizeof si) != sizeof si) continue;
            if (si.ssi_signo == SIGHUP) {
              spdlog::warn(
                  "SIGHUP ignored: cleaved does not reload its configuration; restart "
                  "it to apply changes");
              continue;
            }
            spdlog::info("{} received: shutting down", strsignal(static_cast<int>(si.ssi_signo)));
            running = false;
          } else if (fd == timer.get()) {
            uint64_t expirations = 0;
            if (read(fd, &expirations, sizeof expirations) > 0) {
              sup.on_tick();
              apps->on_tick();
            }
          } else if (!apps->on_event(fd, evs[i].events)) {
            server->on_event(fd, evs[i].events);
          }
        }
      }
    } catch (const std::exception& e) {
      spdlog::error("{}", e.what());
      exit_code = kExitFailure;
    }
    sd.send("STOPPING=1");
    register_telemetry(nullptr);
    mgmt.set_apps(nullptr);
    mgmt.set_control(nullptr);
    apps.reset();    // tells apps, reclaims them while the dataplane still answers
    server.reset();  // removes the control socket
  }
  return exit_code;  // launch_guard stops the shards, then ports_guard the ports
}

}  // namespace

int run_daemon(const Config& cfg) {
  setup_logging(cfg.log.format, cfg.log.level);
  spdlog::info("cleaved {} starting with configuration {}", CLEAVE_VERSION, cfg.source);
  SdNotify sd;

  // Signals are taken by signalfd in the main thread; block them before EAL starts threads so
  // every thread inherits the mask.
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGTERM, SIGINT, SIGHUP})
    sigaddset(&set, s);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  Fd signal_fd(signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));

  int code = kExitOk;
  try {
    check_lcores(cfg);
    InstanceLock lock(cfg.runtime_dir);
    unsigned long huge = free_hugepages();
    EalPlan plan = plan_eal(cfg, huge);
    if (!plan.hugepages) {
      spdlog::warn("running without hugepages ({}); see README 'Hugepages' for the setup",
                   cfg.eal.hugepages == HugepageMode::kOff ? "eal.hugepages: off"
                                                           : "none free on a mounted hugetlbfs");
    }
    route_dpdk_logs();
    init_eal(plan);
    try {
      code = serve(cfg, plan, sd, signal_fd.get());
    } catch (...) {
      rte_eal_cleanup();
      throw;
    }
    rte_eal_cleanup();
  } catch (const std::exception& e) {
    spdlog::critical("{}", e.what());
    sd.send("STATUS=failed: " + std::string(e.what()));
    return kExitFailure;
  }
  spdlog::info("cleaved stopped");
  return code;
}

}  // namespace cleave::dp
