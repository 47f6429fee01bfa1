// daemon.cc - cleaved's main thread: start-up in order, the management event loop, and a clean
// shutdown (dataplane stopped, ports stopped and closed, sockets removed) on SIGTERM/SIGINT.
#include "daemon.h"

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

#include "app_server.h"
#include "cleave_version.h"
#include "ctl_channel.h"
#include "dataplane.h"
#include "eal.h"
#include "log.h"
#include "management.h"
#include "mgmt_protocol.h"
#include "mgmt_server.h"
#include "port.h"
#include "route.h"
#include "sd_notify.h"
#include "shm_abi.h"
#include "telemetry.h"

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

void check_lcores(const Config& cfg) {
  unsigned cpus = std::thread::hardware_concurrency();
  for (auto [key, lcore] : {std::pair{"eal.main_lcore", cfg.eal.main_lcore},
                            std::pair{"dataplane.lcore", cfg.dataplane.lcore}}) {
    if (cpus != 0 && lcore >= cpus) {
      throw StartupError(std::string(key) + " is " + std::to_string(lcore) +
                         " but this machine has " + std::to_string(cpus) + " CPU(s) (0-" +
                         std::to_string(cpus - 1) + ")");
    }
  }
}

// What the main thread watches between ticks: links, failures worth a log line, the watchdog.
class Supervisor {
 public:
  Supervisor(const Config& cfg, const std::vector<DpPort>& ports, const Dataplane& dp,
             CtlChannel& ctl, SdNotify& sd)
      : cfg_(cfg),
        ports_(ports),
        dp_(dp),
        ctl_(ctl),
        sd_(sd),
        // systemd's advice: ping at half the interval it asked for.
        watchdog_period_(sd.watchdog() ? *sd.watchdog() / 2 : std::chrono::microseconds(0)),
        watchdog_(watchdog_period_),
        link_up_(ports.size(), -1) {}

  std::chrono::milliseconds tick() const {
    if (watchdog_period_.count() == 0) return kTick;
    return std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(watchdog_period_),
                      std::chrono::milliseconds(1), std::chrono::milliseconds(kTick));
  }

  void on_tick() {
    auto now = Clock::now();
    switch (watchdog_.check(dp_.heartbeat(), now)) {
      case WatchdogGate::Verdict::kPing:
        sd_.send("WATCHDOG=1");
        break;
      case WatchdogGate::Verdict::kStalled:
        spdlog::error("dataplane lcore {} has stopped making progress; withholding watchdog pings",
                      cfg_.dataplane.lcore);
        break;
      case WatchdogGate::Verdict::kWait:
        break;
    }
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
    auto req = std::make_unique<CtlRequest>();
    req->op = CtlOp::kStats;
    req = ctl_.call(std::move(req), std::chrono::milliseconds(200));
    if (!req) return;
    const ProtoStats& p = req->stats.proto;
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
        rx += req->stats.ports[i].rx_packets;
        tx += req->stats.ports[i].tx_packets;
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
  const Dataplane& dp_;
  CtlChannel& ctl_;
  SdNotify& sd_;
  std::chrono::microseconds watchdog_period_;  // 0: no watchdog
  WatchdogGate watchdog_;
  Clock::time_point next_events_{};
  std::vector<int> link_up_;  // -1 unknown
  ProtoStats last_{};
  uint64_t last_failed_logged_ = 0;
  Clock::time_point next_failed_log_{};
};

// Everything after EAL init: the ports, the dataplane on its lcore, the management loop.
int serve(const Config& cfg, const EalPlan& plan, SdNotify& sd, int signal_fd) {
  rte_mempool* pool = create_pool(cfg);
  std::vector<DpPort> ports = start_ports(cfg, pool);
  // Ports stop last, on every way out: after the dataplane lcore has returned.
  struct PortsGuard {
    const std::vector<DpPort>& ports;
    ~PortsGuard() { stop_ports(ports); }
  } ports_guard{ports};
  RouteTable routes(cfg.ports);
  CtlChannel ctl;
  Dataplane dp(DataplaneParams::from_config(cfg, rte_get_tsc_hz()), ports, routes, pool, ctl);
  if (int r = rte_eal_remote_launch(Dataplane::lcore_main, &dp, cfg.dataplane.lcore); r != 0) {
    throw StartupError("cannot launch the dataplane on lcore " +
                       std::to_string(cfg.dataplane.lcore) + ": " + std::strerror(-r));
  }
  spdlog::info("dataplane running on lcore {}", cfg.dataplane.lcore);

  int exit_code = kExitOk;
  {
    Fd epoll(epoll_create1(EPOLL_CLOEXEC));
    const char* hooks = std::getenv("CLEAVE_TEST_HOOKS");
    DaemonInfo info{cfg.source,
                    cfg.runtime_dir,
                    plan.hugepages,
                    cfg.eal.main_lcore,
                    cfg.dataplane.lcore,
                    Clock::now(),
                    hooks != nullptr && std::string_view(hooks) == "1"};
    if (info.test_hooks) spdlog::warn("CLEAVE_TEST_HOOKS=1: test hooks (debug.*) are enabled");
    Management mgmt(info, cfg, ports, routes, ctl);
    std::optional<MgmtServer> server;
    std::optional<AppServer> apps;
    Supervisor sup(cfg, ports, dp, ctl, sd);
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
  dp.request_stop();
  rte_eal_wait_lcore(cfg.dataplane.lcore);
  return exit_code;
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
