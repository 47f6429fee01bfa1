// roce_sim_loss.cc - RoCEv2 RC goodput on the simulated network (tests/sim, roce_pair.h), in
// simulated time: RDMA WRITE goodput against message size (what ib_write_bw prints), and goodput
// under random loss for go-back-N and for selective repeat against lossless on the same link.
// Deterministic: simulated time, seeded faults, so the figures say what the requester and the
// responder do, not how busy this machine was. Loss is the same in both directions (requests,
// ACKs and NAKs).
//
// Sizes: for each link, WRITEs of 2 B .. 8 MiB (powers of 4), `--qd` outstanding, about `--mb`
// MB of them (at least 4 × qd and at most 20000 messages); goodput = payload bytes / (last
// completion - first post), and messages/s.
// Loss: for each link, mode and loss rate, `--seeds` transfers of `--mb` MB in `--msg`-byte
// WRITEs (or READs: `--op read`), `--loss-qd` outstanding; each run's goodput and what the
// requester saw (retransmitted packets, local ACK timeouts, NAKs), then the median and its ratio
// against 0 % in that mode. Every run checks that the responder placed every byte it was sent and
// that every WRITE completed with status 0. Asserts nothing.
//
// The sim advances idle time in ticks (`--tick-us`, 50 µs by default as in tests): the
// transports' timers and the pacer are only looked at when a frame arrives or a tick passes.
//
// Usage: roce_sim_loss [--mb N] [--seeds N] [--qd N] [--loss-qd N] [--msg BYTES] [--loss P,...]
//                      [--pmtu N] [--tick-us N] [--delay-us N] [--timeout T]
//                      [--sizes-only | --loss-only]
//                      [--sr-only | --gbn-only] [--op write|read]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "roce_pair.h"

namespace {

using namespace cleave;
using transport::EventKind;
using transport::ReqKind;

struct Link {
  const char* name;
  uint64_t rate_bps;
};

struct Options {
  uint64_t mb = 64;
  int seeds = 3;
  uint32_t qd = 16;
  // Loss runs: 64 KiB WRITEs (ib_write_bw's default size), 4 outstanding. More outstanding
  // bytes only queue on a 10 Gb/s link (the requester paces at 100 Gb/s) and are resent by
  // go-back-N; past the local ACK timeout (1 ms) they time out (see docs/testing.md).
  uint32_t loss_qd = 4;
  uint32_t msg = 64u << 10;
  uint64_t tick_ns = 50'000;
  uint64_t delay_ns = 3'000;
  uint8_t timeout = 8;  // local ACK timeout 4.096 µs × 2^8 ≈ 1 ms, as roce_pair.h
  uint32_t pmtu = 4096;
  std::vector<double> losses = {0, 0.001, 0.01, 0.05};
  bool sizes = true;
  bool loss = true;
  bool gbn = true;
  bool sr = true;
  ReqKind op = ReqKind::kWrite;  // the loss runs' operation
};

struct Result {
  bool ok = false;
  std::string why;
  uint64_t messages = 0;
  uint64_t bytes = 0;
  uint64_t ns = 0;
  transport::roce::RcCounters a;  // the requester
  transport::roce::RcCounters b;  // the responder
  double gbps() const { return ns == 0 ? 0 : double(bytes) * 8 / double(ns); }
  double mps() const { return ns == 0 ? 0 : double(messages) * 1e9 / double(ns); }
};

// `n` WRITEs of `size` bytes from A to B (or READs by A from B), `qd` outstanding at all
// times, on a pair built from `cfg`. They cycle through both MRs (they may overlap: only the
// timing matters here).
Result run(const sim::RoceConfig& cfg, uint64_t seed, uint64_t tick_ns, ReqKind op, uint32_t size,
           uint64_t n, uint32_t qd) {
  Result r;
  sim::RocePair p(seed, cfg);
  if (!p.ok) {
    r.why = "connect";
    return r;
  }
  p.net->set_tick_ns(tick_ns);
  const uint64_t slots = std::max<uint64_t>(1, cfg.mr_bytes / std::max<uint32_t>(size, 4096));
  const uint64_t t0 = p.net->now_ns();
  uint64_t posted = 0;
  uint64_t done = 0;
  while (done < n) {
    for (; posted < n && posted - done < qd; posted++) {
      const uint64_t off = (posted % slots) * std::max<uint32_t>(size, 4096);
      p.post(p.net->a(), {.kind = op,
                          .len = size,
                          .offset = off,
                          .wr_id = posted,
                          .rkey = p.b.mr,
                          .remote_addr = off});
    }
    // Simulated time, bounded: a stalled QP is a failed run, not a hang.
    if (!p.run_until_events(p.a, done + 1, 2'000'000'000)) {
      r.why = "stalled";
      break;
    }
    for (; done < p.a.events.size(); done++) {
      const transport::Event& e = p.a.events[done];
      const EventKind want = op == ReqKind::kRead ? EventKind::kReadDone : EventKind::kWriteDone;
      if (e.kind != want || e.status != 0 || e.wr_id != done) {
        r.why = "request " + std::to_string(e.wr_id) + " status " + std::to_string(e.status);
        n = 0;  // stop
        break;
      }
    }
  }
  r.ns = p.net->now_ns() - t0;
  r.messages = done;
  r.bytes = done * size;
  r.a = p.a.rc->counters();
  r.b = p.b.rc->counters();
  const transport::roce::RcCounters& dst = op == ReqKind::kRead ? r.a : r.b;
  r.ok = n != 0 && done == n && dst.placed_bytes + dst.copied_bytes >= r.bytes;
  if (!r.ok && r.why.empty()) r.why = "bytes not placed";
  return r;
}

sim::RoceConfig link_config(const Link& link, const Options& o) {
  sim::RoceConfig c;
  c.link.rate_bps = link.rate_bps;
  c.link.delay_ns = o.delay_ns;
  c.link.mtu = o.pmtu + 104;  // the PMTU plus headers (4200 for 4096)
  c.pmtu = o.pmtu;
  c.timeout = o.timeout;
  return c;
}

std::string human(uint64_t b) {
  char s[32];
  if (b >= (1u << 20)) {
    std::snprintf(s, sizeof s, "%llu MiB", static_cast<unsigned long long>(b >> 20));
  } else if (b >= 1024) {
    std::snprintf(s, sizeof s, "%llu KiB", static_cast<unsigned long long>(b >> 10));
  } else {
    std::snprintf(s, sizeof s, "%llu B", static_cast<unsigned long long>(b));
  }
  return s;
}

void sizes(const Link& link, const Options& o) {
  std::printf("\nWRITE goodput against size: %s, %.1f us one way, qd %u, tick %.1f us\n", link.name,
              double(o.delay_ns) / 1000, o.qd, double(o.tick_ns) / 1000);
  std::printf("  %9s %8s %10s %12s %9s %9s\n", "size", "msgs", "Gb/s", "msgs/s", "pkts", "acks");
  for (uint64_t size = 2; size <= (8u << 20); size *= 4) {
    const uint64_t n =
        std::clamp<uint64_t>((o.mb << 20) / size, uint64_t(o.qd) * 4, uint64_t(20000));
    const Result r =
        run(link_config(link, o), 1, o.tick_ns, ReqKind::kWrite, uint32_t(size), n, o.qd);
    if (!r.ok) {
      std::printf("  %9s FAILED (%s)\n", human(size).c_str(), r.why.c_str());
      continue;
    }
    std::printf("  %9s %8llu %10.3f %12.0f %9llu %9llu\n", human(size).c_str(),
                static_cast<unsigned long long>(r.messages), r.gbps(), r.mps(),
                static_cast<unsigned long long>(r.a.tx_packets),
                static_cast<unsigned long long>(r.a.acks_received));
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void losses(const Link& link, const Options& o, bool sr) {
  std::printf("\n%s, %.1f us one way, %s: %llu MB in %s %ss, qd %u, tick %.1f us\n", link.name,
              double(o.delay_ns) / 1000, sr ? "selective repeat" : "go-back-N",
              static_cast<unsigned long long>(o.mb), human(o.msg).c_str(),
              o.op == ReqKind::kRead ? "READ" : "WRITE", o.loss_qd, double(o.tick_ns) / 1000);
  const uint64_t n = std::max<uint64_t>(1, (o.mb << 20) / o.msg);
  double base = 0;
  for (const double loss : o.losses) {
    std::vector<double> gbps;
    for (int s = 0; s < o.seeds; s++) {
      sim::RoceConfig c = link_config(link, o);
      c.selective_repeat = sr;
      c.ab.loss = c.ba.loss = loss;
      const Result r = run(c, 1000 + uint64_t(s), o.tick_ns, o.op, o.msg, n, o.loss_qd);
      if (!r.ok) {
        std::printf("  loss %5.2f %% seed %d: FAILED (%s) after %llu of %llu writes\n", loss * 100,
                    s, r.why.c_str(), static_cast<unsigned long long>(r.messages),
                    static_cast<unsigned long long>(n));
        continue;
      }
      gbps.push_back(r.gbps());
      std::printf(
          "  loss %5.2f %% seed %d: %7.3f Gb/s  pkts %llu  retransmits %llu  timeouts %llu  "
          "naks %llu  ooo %llu  dup %llu  copied %llu KiB\n",
          loss * 100, s, r.gbps(), static_cast<unsigned long long>(r.a.tx_packets),
          static_cast<unsigned long long>(r.a.retransmits),
          static_cast<unsigned long long>(r.a.timeouts),
          static_cast<unsigned long long>(r.a.naks_received),
          static_cast<unsigned long long>(r.b.out_of_sequence),
          static_cast<unsigned long long>(r.b.duplicates),
          static_cast<unsigned long long>(r.b.copied_bytes >> 10));
    }
    const double m = median(gbps);
    if (loss == 0) base = m;
    std::printf("  loss %5.2f %%: median %7.3f Gb/s, ratio %.2f\n", loss * 100, m,
                base > 0 ? m / base : 0.0);
  }
}

std::vector<double> parse_list(const char* s) {
  std::vector<double> v;
  for (const char* p = s; *p != '\0';) {
    char* end = nullptr;
    v.push_back(std::strtod(p, &end));
    if (end == p) break;
    p = *end == ',' ? end + 1 : end;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    const std::string k = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (k == "--sizes-only") {
      o.loss = false;
    } else if (k == "--loss-only") {
      o.sizes = false;
    } else if (k == "--sr-only") {
      o.gbn = false;
    } else if (k == "--gbn-only") {
      o.sr = false;
    } else if (v != nullptr && k == "--mb") {
      o.mb = std::strtoull(v, nullptr, 10);
      i++;
    } else if (v != nullptr && k == "--seeds") {
      o.seeds = std::atoi(v);
      i++;
    } else if (v != nullptr && k == "--qd") {
      o.qd = uint32_t(std::strtoul(v, nullptr, 10));
      i++;
    } else if (v != nullptr && k == "--loss-qd") {
      o.loss_qd = uint32_t(std::strtoul(v, nullptr, 10));
      i++;
    } else if (v != nullptr && k == "--msg") {
      o.msg = uint32_t(std::strtoul(v, nullptr, 10));
      i++;
    } else if (v != nullptr && k == "--loss") {
      o.losses = parse_list(v);
      i++;
    } else if (v != nullptr && k == "--pmtu") {
      o.pmtu = uint32_t(std::strtoul(v, nullptr, 10));
      i++;
    } else if (v != nullptr && k == "--tick-us") {
      o.tick_ns = uint64_t(std::strtod(v, nullptr) * 1000);
      i++;
    } else if (v != nullptr && k == "--timeout") {
      o.timeout = uint8_t(std::min(31ul, std::strtoul(v, nullptr, 10)));
      i++;
    } else if (v != nullptr && k == "--op" &&
               (std::strcmp(v, "write") == 0 || std::strcmp(v, "read") == 0)) {
      o.op = std::strcmp(v, "read") == 0 ? ReqKind::kRead : ReqKind::kWrite;
      i++;
    } else if (v != nullptr && k == "--delay-us") {
      o.delay_ns = uint64_t(std::strtod(v, nullptr) * 1000);
      i++;
    } else {
      std::fprintf(
          stderr,
          "usage: roce_sim_loss [--mb N] [--seeds N] [--qd N] [--loss-qd N] [--msg BYTES] "
          "[--loss P,P,...] [--pmtu N] [--tick-us N] [--delay-us N] [--timeout T] [--sizes-only | "
          "--loss-only] "
          "[--sr-only | --gbn-only] [--op write|read]\n");
      return 2;
    }
  }
  if (o.qd == 0 || o.loss_qd == 0 || o.msg == 0 || o.msg > (64u << 20) || o.tick_ns == 0 ||
      o.pmtu < 256 || o.pmtu > 4096 || (o.pmtu & (o.pmtu - 1)) != 0) {
    std::fprintf(stderr,
                 "roce_sim_loss: --qd, --loss-qd and --msg must be > 0, --msg <= 64 MiB, --pmtu a "
                 "power of two in 256..4096\n");
    return 2;
  }
  const Link links[] = {{"10 Gb/s", 10'000'000'000}, {"100 Gb/s", 100'000'000'000}};
  std::printf("roce_sim_loss: PMTU %u, link MTU %u, RoCE pair from tests/sim/roce_pair.h\n", o.pmtu,
              o.pmtu + 104);
  for (const Link& link : links) {
    if (o.sizes) sizes(link, o);
    if (o.loss && o.gbn) losses(link, o, false);
    if (o.loss && o.sr) losses(link, o, true);
  }
  return 0;
}
