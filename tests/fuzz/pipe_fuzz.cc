// pipe_fuzz.cc - the dataplane's app path (src/dataplane/apps.*) serving a hostile app: submit
// and receive entries, pipe indexes and raw bytes in the app's shared memory, all from the input.
//
// The app's memory is one arena: guards, a read-write heap MR, a read-only MR, a write-only MR,
// and its pipes (two submit, two receive, two completion). The app writes entries through the
// same PipeProducer libcleave uses, or any bytes anywhere in its submit and receive pipes and in
// its completion pipes' control lines (its own completion entries it leaves alone: only it reads
// them). A fake flow path behind FlowHandler answers flow requests done, refused, taken or wait.
//
// Invariants, checked after every poll, beyond "no crash":
// - the dataplane wrote only where it may: writable MRs, completion entries, the sleeping flag
//   of completion pipes (taken when it rings) and the consumer index of submit and receive
//   pipes; guards, the read-only MR, submit and receive entries and everything else are
//   unchanged;
// - every flow request reached the flow path with a window inside an MR that allows it, and the
//   MR's NIC id;
// - every completion the app reads names a pipe of this completion pipe, a known opcode unless
//   it failed, and a status of 0 or a negative CL_E* code; the daemon never posts more
//   completions than it counts, and an app it evicted is no longer served.
#include <cleave/cleave.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <vector>

#include "fuzz_input.h"
#include "lcore/apps.h"
#include "pipe.h"

namespace cleave::fuzz {
namespace {

using dp::AppPath;
using dp::DpApp;
using dp::FlowAdmit;

constexpr uint64_t kHz = 1'000'000;  // the fake TSC: 1 MHz
constexpr size_t kGuard = 128;
constexpr size_t kHeap = 8192, kRo = 4096, kWo = 4096;

struct Range {
  size_t off;
  size_t len;
};

// The app: its arena, its tables as the daemon holds them, and its own pipe ends.
struct App {
  // Pipes 0-2: a completion, a submit and a receive pipe; 3-5: another submit pipe, a small
  // completion pipe (it fills) and another receive pipe on it.
  static constexpr uint16_t kCq = 0, kSq = 1, kRq = 2, kCq2 = 4;
  static constexpr std::array<uint32_t, 6> kEntries = {64, 64, 64, 64, 8, 64};
  static constexpr std::array<abi::PipeKind, 6> kKinds = {
      abi::PipeKind::kCompletion, abi::PipeKind::kSubmit,     abi::PipeKind::kRecv,
      abi::PipeKind::kSubmit,     abi::PipeKind::kCompletion, abi::PipeKind::kRecv};
  static constexpr std::array<uint16_t, 6> kCqOf = {0, kCq, kCq, kCq2, 0, kCq2};

  App(uint32_t error_budget, int doorbell) {
    size_t at = kGuard;
    auto take = [&](size_t n) {
      const size_t o = at;
      at += (n + 63) / 64 * 64 + kGuard;
      return o;
    };
    heap = take(kHeap);
    ro = take(kRo);
    wo = take(kWo);
    for (size_t i = 0; i < kKinds.size(); i++)
      pipe_off[i] = take(abi::pipe_bytes(kKinds[i], kEntries[i]));
    mem.assign(at / 64 + 1, Line{});
    std::memset(base(), 0xEE, at);
    for (size_t i = 0; i < kKinds.size(); i++)
      std::memset(base() + pipe_off[i], 0, abi::pipe_bytes(kKinds[i], kEntries[i]));
    size = at;

    dp.id = 1;
    dp.error_budget = error_budget;
    dp.mrs.resize(4);  // MR 3 is not registered
    dp.mrs[0] = {base() + heap, kHeap, abi::kAccessRead | abi::kAccessWrite, 11, 0};
    dp.mrs[1] = {base() + ro, kRo, abi::kAccessRead, 12, 0};
    dp.mrs[2] = {base() + wo, kWo, abi::kAccessWrite, 13, 0};
    dp.pipes.resize(kKinds.size() + 1);  // the last one unused
    for (size_t i = 0; i < kKinds.size(); i++) {
      ipc::PipeView v = ipc::pipe_at(base(), pipe_off[i]);
      dp::DpPipe& p = dp.pipes[i];
      p.kind = kKinds[i];
      p.cq = kCqOf[i];
      switch (kKinds[i]) {
        case abi::PipeKind::kSubmit:
          p.sq = {v.ctl, static_cast<abi::SendEntry*>(v.ring), kEntries[i]};
          sq_out[i == kSq ? 0 : 1] = {v.ctl, static_cast<abi::SendEntry*>(v.ring), kEntries[i]};
          writable.push_back({pipe_off[i], sizeof(uint64_t)});  // PipeCtl::consumer
          break;
        case abi::PipeKind::kRecv:
          p.rq = {v.ctl, static_cast<abi::RecvEntry*>(v.ring), kEntries[i]};
          rq_out[i == kRq ? 0 : 1] = {v.ctl, static_cast<abi::RecvEntry*>(v.ring), kEntries[i]};
          writable.push_back({pipe_off[i], sizeof(uint64_t)});
          break;
        case abi::PipeKind::kCompletion:
          p.cq_out = {v.ctl, static_cast<abi::Completion*>(v.ring), kEntries[i]};
          p.doorbell_fd = i == kCq ? doorbell : -1;
          cq_in[i == kCq ? 0 : 1] = {v.ctl, static_cast<abi::Completion*>(v.ring), kEntries[i]};
          // The consumer's sleeping flag, which the producer clears when it rings, and the ring.
          writable.push_back({pipe_off[i] + offsetof(abi::PipeCtl, sleeping), sizeof(uint32_t)});
          writable.push_back(
              {pipe_off[i] + sizeof(abi::PipeCtl), kEntries[i] * sizeof(abi::Completion)});
          break;
      }
    }
    writable.push_back({heap, kHeap});
    writable.push_back({wo, kWo});
    std::sort(writable.begin(), writable.end(),
              [](const Range& a, const Range& b) { return a.off < b.off; });
    before.resize(size);
  }

  uint8_t* base() { return reinterpret_cast<uint8_t*>(mem.data()); }

  // Bytes outside the writable ranges are what they were before the poll.
  void check_untouched() {
    size_t at = 0;
    for (const Range& w : writable) {
      FUZZ_CHECK(std::memcmp(before.data() + at, base() + at, w.off - at) == 0);
      at = w.off + w.len;
    }
    FUZZ_CHECK(std::memcmp(before.data() + at, base() + at, size - at) == 0);
  }

  struct alignas(64) Line {
    uint8_t b[64];
  };
  std::vector<Line> mem;
  size_t size = 0;
  size_t heap = 0, ro = 0, wo = 0;
  std::array<size_t, 6> pipe_off{};
  std::vector<Range> writable;
  std::vector<uint8_t> before;
  DpApp dp;
  std::array<ipc::PipeProducer<abi::SendEntry>, 2> sq_out;
  std::array<ipc::PipeProducer<abi::RecvEntry>, 2> rq_out;
  std::array<ipc::PipeConsumer<abi::Completion>, 2> cq_in;
  uint64_t read = 0;  // completions the app took
};

// The flow path behind the app path: checks what reaches it, answers by the request's wr_id.
class FakeFlows final : public dp::FlowHandler {
 public:
  FlowAdmit flow_request(DpApp& a, const abi::SendEntry& e, uint16_t nic_mr, abi::Completion& c,
                         uint64_t) override {
    FUZZ_CHECK(e.opcode >= abi::kOpFlowSend && e.opcode < abi::kOpCount);
    FUZZ_CHECK(e.flags == 0 || e.flags == abi::kSendImm);
    const bool data = e.opcode == abi::kOpFlowSend || e.opcode == abi::kOpFlowRecv ||
                      e.opcode == abi::kOpRdmaWrite || e.opcode == abi::kOpRdmaRead;
    if (data) {
      FUZZ_CHECK(e.mr < a.mrs.size() && a.mrs[e.mr].length != 0);
      const dp::DpMr& m = a.mrs[e.mr];
      FUZZ_CHECK(e.offset <= m.length && e.length <= m.length - e.offset);
      const uint32_t need = e.opcode == abi::kOpFlowSend || e.opcode == abi::kOpRdmaWrite
                                ? abi::kAccessRead
                                : abi::kAccessWrite;
      FUZZ_CHECK((m.access & need) == need && nic_mr == m.nic_mr);
    } else {
      FUZZ_CHECK(e.length == 0 && nic_mr == 0);
    }
    calls++;
    switch (e.wr_id % 4) {
      case 0:
        c.status = 0;
        return FlowAdmit::kDone;
      case 1:
        c.status = CL_ENOENT;  // no such flow
        return FlowAdmit::kDone;
      case 2:
        return FlowAdmit::kTaken;
      default:
        return FlowAdmit::kWait;
    }
  }
  uint64_t calls = 0;
};

// 0 or a CL_E* code (the errno-like ones and cleave's own, down to CL_ETRUNC).
bool known_status(int32_t s) {
  return s <= 0 && s >= CL_ETRUNC;
}

}  // namespace
}  // namespace cleave::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cleave;
  using namespace cleave::fuzz;
  static const int doorbell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  Reader r(data, size);
  App app(1 + r.u8() % 32, doorbell);
  AppPath path(2, 1 + r.u8() % 64, kHz);
  FakeFlows flows;
  path.set_flow_handler(&flows);
  uint64_t now = 1'000'000;
  FUZZ_CHECK(path.attach(&app.dp, now));

  while (!r.done()) {
    switch (r.u8() % 6) {
      case 0: {  // the app submits requests
        auto& sq = app.sq_out[r.u8() & 1];
        for (unsigned n = r.u8() % 8; n > 0; n--) {
          abi::SendEntry e{};
          auto b = r.bytes(sizeof e - 1);
          std::memcpy(&e, b.data(), b.size());
          sq.produce(&e, 1);
        }
        break;
      }
      case 1: {  // the app posts receive buffers
        auto& rq = app.rq_out[r.u8() & 1];
        for (unsigned n = r.u8() % 8; n > 0; n--) {
          abi::RecvEntry e{};
          auto b = r.bytes(sizeof e - 1);
          std::memcpy(&e, b.data(), b.size());
          rq.produce(&e, 1);
        }
        break;
      }
      case 2: {  // the dataplane polls
        now += uint64_t(r.u16()) * 100;
        std::memcpy(app.before.data(), app.base(), app.size);
        const bool was_evicted = app.dp.evicted;
        const uint64_t completions = app.dp.counters.completions;
        const unsigned served = path.poll(now);
        app.check_untouched();
        if (was_evicted) FUZZ_CHECK(served == 0 && app.dp.counters.completions == completions);
        FUZZ_CHECK(app.dp.evicted == app.dp.evict.load());
        break;
      }
      case 3: {  // the app reads completions
        const size_t which = r.u8() & 1;
        const uint16_t cq = which == 0 ? App::kCq : App::kCq2;
        abi::Completion c[16];
        const unsigned n = app.cq_in[which].consume(c, r.u8() % 16);
        app.read += n;
        for (unsigned i = 0; i < n; i++) {
          FUZZ_CHECK(known_status(c[i].status));
          FUZZ_CHECK(c[i].pipe < App::kKinds.size() && App::kCqOf[c[i].pipe] == cq);
          if (c[i].flags & abi::kCompRecv) {
            FUZZ_CHECK(App::kKinds[c[i].pipe] == abi::PipeKind::kRecv);
            FUZZ_CHECK(c[i].opcode == abi::kOpSend);
          } else {
            FUZZ_CHECK(App::kKinds[c[i].pipe] == abi::PipeKind::kSubmit);
            FUZZ_CHECK(c[i].opcode < abi::kOpCount || c[i].status != 0);
          }
        }
        break;
      }
      case 4: {  // the app writes raw bytes into a pipe it may write
        const size_t p = r.u8() % App::kKinds.size();
        const uint64_t bytes = abi::pipe_bytes(App::kKinds[p], App::kEntries[p]);
        // Completion entries are the app's to read, not to forge: its own checks above rely on
        // them; everything else in its pipes is fair game.
        const uint64_t room =
            App::kKinds[p] == abi::PipeKind::kCompletion ? sizeof(abi::PipeCtl) : bytes;
        const uint64_t off = r.u16() % room;
        auto b = r.bytes(std::min<uint64_t>(r.u8() % 24, room - off));
        std::memcpy(app.base() + app.pipe_off[p] + off, b.data(), b.size());
        break;
      }
      case 5: {  // the app sleeps on its first completion pipe, or wakes
        auto* ctl = reinterpret_cast<abi::PipeCtl*>(app.base() + app.pipe_off[App::kCq]);
        ctl->sleeping = r.u8() & 1;
        break;
      }
    }
  }
  FUZZ_CHECK(app.read <= app.dp.counters.completions);
  uint64_t errors = 0;
  for (uint64_t e : app.dp.counters.errors)
    errors += e;
  FUZZ_CHECK(errors == app.dp.counters.errors_total);
  path.detach(app.dp.id);
  return 0;
}
