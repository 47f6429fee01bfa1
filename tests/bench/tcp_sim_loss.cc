// tcp_sim_loss.cc - TCP goodput under random loss on the simulated network (tests/sim), against
// lossless on the same link in the same run. Deterministic: simulated time, seeded faults, so
// the figures say what the sender's loss recovery and congestion control do, not how busy this
// machine was. The same loss rate in both directions (data and ACKs), as tcp_loss.py sets it on
// the real wire.
//
// For each link (rate, one-way delay) and loss rate: `--seeds` transfers of `--mb` MB, goodput
// = bytes / (last byte received - connected) in simulated time; prints each run's goodput and
// what the sender did (retransmits, fast recoveries, RTOs, tail loss probes), then the median
// and its ratio against 0 %. Asserts nothing.
//
// --reorder P also holds back that share of frames (both directions) behind 1 to 3 later ones.
// --trace N follows the sender's window through each transfer: every fall of ssthresh, by what
// came with it (a fast recovery began, an RTO fired, neither), those that cut deeper than 0.4
// of the window before, those down to 2 MSS; it prints the first N of them.
//
// Usage: tcp_sim_loss [--mb N] [--seeds N] [--loss P,P,...] [--reorder P] [--cc NAME] [--trace N]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tcp_transfer.h"

namespace {

using namespace cleave::transport::tcp::test;

struct Link {
  const char* name;
  uint64_t rate_bps;
  uint64_t delay_ns;
};

std::vector<double> parse_list(const char* s) {
  std::vector<double> v;
  for (const char* p = s; *p != '\0';) {
    char* end = nullptr;
    v.push_back(std::strtod(p, &end));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p != '\0') break;
  }
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t mb = 64;
  int seeds = 3;
  std::vector<double> losses = {0, 0.001, 0.01, 0.05};
  std::string cc;
  double reorder = 0;
  int trace = -1;  // --trace N: count the window's reductions, print the first N
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--mb") {
      mb = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (k == "--seeds") {
      seeds = std::atoi(argv[i + 1]);
    } else if (k == "--loss") {
      losses = parse_list(argv[i + 1]);
    } else if (k == "--reorder") {
      reorder = std::strtod(argv[i + 1], nullptr);
    } else if (k == "--cc") {
      cc = argv[i + 1];
    } else if (k == "--trace") {
      trace = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr,
                   "usage: tcp_sim_loss [--mb N] [--seeds N] [--loss P,P,...] [--reorder P] "
                   "[--cc NAME] [--trace N]\n");
      return 2;
    }
  }
  const Link links[] = {{"1 Gb/s, 50 us one way", 1'000'000'000, 50'000},
                        {"10 Gb/s, 10 us one way", 10'000'000'000, 10'000}};
  std::printf(
      "tcp_sim_loss: %llu MB per transfer, %d seeds, loss both directions, reordering "
      "%g, cc %s\n",
      static_cast<unsigned long long>(mb), seeds, reorder, cc.empty() ? "default" : cc.c_str());
  for (const Link& link : links) {
    std::printf("\n%s\n", link.name);
    double base = 0;
    for (const double p : losses) {
      std::vector<double> gbps;
      for (int s = 0; s < seeds; s++) {
        Case c;
        c.name = "sim-loss";
        c.bytes = mb << 20;
        c.link.rate_bps = link.rate_bps;
        c.link.delay_ns = link.delay_ns;
        c.ab.loss = c.ba.loss = p;
        c.ab.reorder = c.ba.reorder = reorder;
        c.ab.reorder_depth = c.ba.reorder_depth = 3;
        if (!cc.empty()) c.params = {{"cc", cc}};
        Transfer t(c, 1000 + uint64_t(s));
        WindowWatch w;
        w.beta = cc == "cubic" ? 0.7 : 0.5;
        if (trace >= 0) t.on_step = [&] { w.sample(t); };
        const bool ok = t.run();
        const cleave::transport::tcp::Counters& a = tcp_of(t.net->a()).counters();
        if (!ok || !t.errors.empty() || t.done_ns == 0) {
          std::printf("  loss %5.2f %% seed %d: FAILED (%s) %s\n", p * 100, s,
                      ok ? "errors" : "stalled", t.errors.empty() ? "" : t.errors[0].c_str());
          continue;
        }
        const double g = double(t.total) * 8 / double(t.done_ns - t.connected_ns);
        gbps.push_back(g);
        std::printf(
            "  loss %5.2f %% seed %d: %6.3f Gb/s  retransmits %llu  recoveries %llu  "
            "rtos %llu  tlp %llu  longest wait %.1f ms\n",
            p * 100, s, g, static_cast<unsigned long long>(a.retransmits),
            static_cast<unsigned long long>(a.fast_recoveries),
            static_cast<unsigned long long>(a.rtos), static_cast<unsigned long long>(a.tlp_probes),
            double(t.longest_wait_ns) / 1e6);
        if (trace >= 0) {
          std::printf(
              "    reductions: %llu began an episode, %llu inside one; %llu below beta x cwnd, "
              "%llu to 2 MSS, lowest %llu B; data frames lost %llu; bytes that arrived twice "
              "%llu\n",
              static_cast<unsigned long long>(w.episodes),
              static_cast<unsigned long long>(w.inside), static_cast<unsigned long long>(w.deep),
              static_cast<unsigned long long>(w.floor),
              static_cast<unsigned long long>(w.min_ssthresh == ~0ull ? 0 : w.min_ssthresh),
              static_cast<unsigned long long>(t.net->stats(Dir::kAtoB).dropped()),
              static_cast<unsigned long long>(tcp_of(t.net->b()).counters().dup_bytes));
          for (size_t i = 0; i < w.cuts.size() && int(i) < trace; i++)
            std::printf("      %s\n", WindowWatch::describe(w.cuts[i]).c_str());
        }
      }
      const double m = median(gbps);
      if (p == 0) base = m;
      std::printf("  loss %5.2f %%: median %6.3f Gb/s, ratio %.2f\n", p * 100, m,
                  base > 0 ? m / base : 0.0);
    }
  }
  return 0;
}
