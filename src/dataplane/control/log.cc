// log.cc - spdlog setup, the journald priority prefix, and DPDK's log stream redirected.
#include "control/log.h"

#include <rte_log.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace cleave::dp {

namespace {

// "%*" in a pattern: the syslog priority of the line's level, as journald reads it.
class PriorityFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm& /*tm*/,
              spdlog::memory_buf_t& dest) override {
    char p = '6';
    switch (msg.level) {
      case spdlog::level::trace:
      case spdlog::level::debug:
        p = '7';
        break;
      case spdlog::level::info:
        p = '6';
        break;
      case spdlog::level::warn:
        p = '4';
        break;
      case spdlog::level::err:
        p = '3';
        break;
      default:
        p = '2';
        break;
    }
    dest.push_back(p);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<PriorityFlag>();
  }
};

// DPDK writes each message with one stdio call; split it into lines at DPDK's level.
ssize_t dpdk_log_write(void* /*cookie*/, const char* buf, size_t size) {
  spdlog::level::level_enum lvl = spdlog::level::info;
  switch (rte_log_cur_msg_loglevel()) {
    case RTE_LOG_EMERG:
    case RTE_LOG_ALERT:
    case RTE_LOG_CRIT:
      lvl = spdlog::level::critical;
      break;
    case RTE_LOG_ERR:
      lvl = spdlog::level::err;
      break;
    case RTE_LOG_WARNING:
      lvl = spdlog::level::warn;
      break;
    case RTE_LOG_NOTICE:
      lvl = spdlog::level::info;
      break;
    case RTE_LOG_INFO:
      lvl = spdlog::level::debug;
      break;
    default:
      lvl = spdlog::level::trace;
      break;
  }
  std::string_view s(buf, size);
  while (!s.empty()) {
    size_t nl = s.find('\n');
    std::string_view line = s.substr(0, nl);
    if (!line.empty()) spdlog::log(lvl, "dpdk: {}", line);
    if (nl == std::string_view::npos) break;
    s.remove_prefix(nl + 1);
  }
  return static_cast<ssize_t>(size);
}

}  // namespace

void setup_logging(LogFormat format, std::string_view level) {
  if (format == LogFormat::kAuto) {
    format = std::getenv("JOURNAL_STREAM") != nullptr ? LogFormat::kJournald : LogFormat::kPlain;
  }
  auto logger = std::make_shared<spdlog::logger>("cleaved",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  if (format == LogFormat::kJournald) {
    formatter->add_flag<PriorityFlag>('*').set_pattern("<%*>%v");
  } else {
    formatter->set_pattern("%Y-%m-%d %H:%M:%S.%e %-5l %v");
  }
  logger->set_formatter(std::move(formatter));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  set_log_level(level);
}

bool set_log_level(std::string_view level) {
  auto l = spdlog::level::from_str(std::string(level));
  // from_str maps unknown names to "off": accept "off" only when asked for.
  if (l == spdlog::level::off && level != "off") return false;
  spdlog::set_level(l);
  return true;
}

std::string log_level() {
  auto sv = spdlog::level::to_string_view(spdlog::get_level());
  return std::string(sv.data(), sv.size());
}

void route_dpdk_logs() {
  cookie_io_functions_t io{};
  io.write = dpdk_log_write;
  FILE* f = fopencookie(nullptr, "w", io);
  if (f == nullptr) return;
  setvbuf(f, nullptr, _IONBF, 0);
  rte_openlog_stream(f);
}

}  // namespace cleave::dp
