// roce_golden.cc - golden RoCEv2 packets: drives the real RcTransport between two simulated hosts
// (sim/roce_pair.h) until it has sent every opcode it has, the ACK and each NAK and a CNP (for a
// CE-marked packet), checks every frame (IPv4, UDP 4791 from 49152-65535, headers that
// roce::parse accepts, the ICRC by common/wire.h's one), and writes them all into a pcap
// (classic libpcap, LINKTYPE_ETHERNET) for tshark (tests/unit/test_roce_golden.py).
//
//   roce_golden OUT.pcap [--golden FILE]
//
// --golden writes the first frame of each kind as `NAME hex`, one per line, to FILE ('-':
// stdout): the format of tests/golden/roce_rc.txt, which is how that file is regenerated after
// an intended change of the wire format (tests/README.md). Deterministic: a fixed seed, no random
// faults, virtual time; the same build writes the same bytes. Exit status 0, or 1 with what went
// wrong on stderr.
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/wire.h"
#include "roce_pair.h"

namespace {

using namespace cleave;
using sim::Dir;
using sim::RoceConfig;
using sim::RocePair;
using transport::AppRequest;
using transport::ReqKind;
namespace roce = transport::roce;

constexpr size_t kEth = 14;
constexpr size_t kIp = 20;
constexpr size_t kL4 = kEth + kIp;
constexpr size_t kBth = kL4 + roce::kUdpLen;
constexpr uint64_t kSeed = 1;

struct Captured {
  uint64_t ns = 0;
  std::vector<uint8_t> bytes;
};

// What a frame is, for the golden file: the opcode's name, and for an ACK opcode its AETH
// syndrome's kind.
std::string kind_of(std::span<const uint8_t> f) {
  if (f.size() < kBth + roce::kBthLen) return "SHORT";
  const uint8_t op = f[kBth];
  if (op != roce::kAck) return std::string(roce::op_name(op));
  if (f.size() < kBth + roce::kBthLen + roce::kAethLen) return "SHORT";
  const uint8_t syn = f[kBth + roce::kBthLen];
  if (roce::syndrome_is_ack(syn)) return "ACK";
  if (roce::syndrome_is_rnr(syn)) return "RNR_NAK";
  switch (syn) {
    case roce::kSynPsnError:
      return "NAK_PSN_SEQUENCE_ERROR";
    case roce::kSynInvalid:
      return "NAK_INVALID_REQUEST";
    case roce::kSynAccess:
      return "NAK_REMOTE_ACCESS_ERROR";
    default:
      return "NAK_REMOTE_OPERATIONAL_ERROR";
  }
}

// Every kind the transport must have sent (and the CNP), in the golden file's order.
const std::vector<std::string_view> kExpected = {
    "SEND_FIRST",
    "SEND_MIDDLE",
    "SEND_LAST",
    "SEND_LAST_IMM",
    "SEND_ONLY",
    "SEND_ONLY_IMM",
    "WRITE_FIRST",
    "WRITE_MIDDLE",
    "WRITE_LAST",
    "WRITE_LAST_IMM",
    "WRITE_ONLY",
    "WRITE_ONLY_IMM",
    "READ_REQUEST",
    "READ_RESP_FIRST",
    "READ_RESP_MIDDLE",
    "READ_RESP_LAST",
    "READ_RESP_ONLY",
    "ACK",
    "NAK_PSN_SEQUENCE_ERROR",
    "RNR_NAK",
    "NAK_REMOTE_ACCESS_ERROR",
    "CNP",
};

// What is wrong with a frame as a RoCEv2 packet we sent, or empty.
std::string check_frame(std::span<const uint8_t> f) {
  if (f.size() < kBth + roce::kBthLen + roce::kIcrcLen) return "shorter than its headers";
  if (wire::load16(&f[12]) != 0x0800 || f[kEth] != 0x45 || f[kEth + 9] != 17) {
    return "not IPv4 (no options) and UDP";
  }
  if (wire::load16(&f[kEth + 2]) != f.size() - kEth) return "IP length is not the frame's";
  if (wire::csum_fold(wire::csum_partial(&f[kEth], kIp, 0)) != 0) return "bad IP checksum";
  if (wire::load16(&f[kL4 + 4]) != f.size() - kL4) return "UDP length is not the frame's";
  roce::Headers h;
  size_t hdr_len = 0;
  const roce::ParseError e = roce::parse(&f[kL4], f.size() - kL4, h, &hdr_len);
  if (e != roce::ParseError::kNone) {
    return "roce::parse: " + std::string(roce::parse_error_name(e));
  }
  if (h.dst_port != roce::kUdpPort || h.src_port < 49152) return "UDP ports";
  if (h.pkey != 0xFFFF) return "P_Key";
  if (f.size() < kL4 + hdr_len + h.pad + roce::kIcrcLen) return "shorter than its pad";
  const size_t payload = f.size() - kL4 - hdr_len - h.pad - roce::kIcrcLen;
  if (h.pad != (4 - payload % 4) % 4) return "PadCnt does not pad the payload to 4 bytes";
  if (!wire::roce_icrc_ok(&f[kEth], f.size() - kEth)) return "bad ICRC";
  return {};
}

// Classic libpcap, microsecond timestamps, written little-endian byte by byte so every host
// writes the same file.
class Pcap {
 public:
  explicit Pcap(FILE* f) : f_(f) {
    put32(0xA1B2C3D4);  // magic
    put16(2);           // version 2.4
    put16(4);
    put32(0);      // thiszone
    put32(0);      // sigfigs
    put32(65535);  // snaplen
    put32(1);      // LINKTYPE_ETHERNET
  }
  void frame(uint64_t ns, std::span<const uint8_t> b) {
    put32(uint32_t(ns / 1'000'000'000));
    put32(uint32_t(ns / 1000 % 1'000'000));
    put32(uint32_t(b.size()));
    put32(uint32_t(b.size()));
    std::fwrite(b.data(), 1, b.size(), f_);
  }

 private:
  void put16(uint16_t v) {
    const uint8_t b[2] = {uint8_t(v), uint8_t(v >> 8)};
    std::fwrite(b, 1, 2, f_);
  }
  void put32(uint32_t v) {
    const uint8_t b[4] = {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)};
    std::fwrite(b, 1, 4, f_);
  }
  FILE* f_;
};

// The traffic. Each step posts requests and runs until they complete; a step that does not
// complete as it should is a failure (the frames would not be the ones the golden file names).
class Run {
 public:
  explicit Run(std::vector<Captured>& out) : out_(out) {}

  bool fail(const std::string& what, RocePair& p) {
    std::fprintf(stderr, "roce_golden: %s\n%s\n", what.c_str(), p.describe().c_str());
    return false;
  }

  // Taps a pair's frames into `out_`, its virtual time offset by `base_ns`.
  void tap(RocePair& p, uint64_t base_ns) {
    p.net->set_tap([this, &p, base_ns](Dir, std::span<const uint8_t> f) {
      out_.push_back({base_ns + p.net->now_ns(), std::vector<uint8_t>(f.begin(), f.end())});
    });
  }

  // Posts `r` at A and a receive of `recv_len` at B first when it is not 0; runs until A has
  // one more completion (and B too when it got a receive), which must have `status`.
  bool op(RocePair& p, AppRequest r, uint32_t recv_len, int status = 0) {
    const size_t na = p.a.events.size();
    const size_t nb = p.b.events.size();
    if (recv_len > 0) {
      p.post(p.net->b(), {.kind = ReqKind::kRecv, .len = recv_len, .offset = b_off, .wr_id = 100});
      b_off += 4096;
    }
    r.offset = a_off;
    a_off += 4096;
    p.post(p.net->a(), r);
    if (!p.run_until_events(p.a, na + 1, 1'000'000'000) ||
        (recv_len > 0 && !p.run_until_events(p.b, nb + 1, 1'000'000'000))) {
      return fail("no completion for wr_id " + std::to_string(r.wr_id), p);
    }
    if (p.a.events[na].status != status) {
      return fail("wr_id " + std::to_string(r.wr_id) + " completed with " +
                      std::to_string(p.a.events[na].status),
                  p);
    }
    return true;
  }

  uint64_t a_off = 0;
  uint64_t b_off = 0;

 private:
  std::vector<Captured>& out_;
};

// Small PMTU so multi-packet messages stay small; lengths that are not multiples of 4 so the
// pad is exercised (515 = 256 + 256 + 3: first, middle, last with PadCnt 1). The SEND only
// carries 17 bytes: tshark 4.0's RPC-over-RDMA heuristic (rpcrdma_infiniband) throws on an RC
// SEND only or last whose payload is under 13 bytes and marks the frame "[Malformed Packet:
// RPCoRDMA]" after decoding its InfiniBand headers correctly (docs/testing.md).
constexpr uint32_t kPmtu = 256;
constexpr uint32_t kLong = 2 * kPmtu + 3;

RoceConfig config() {
  RoceConfig c;
  c.pmtu = kPmtu;
  c.mr_bytes = 1u << 20;
  c.caps = {64, 64};
  return c;
}

bool traffic(std::vector<Captured>& frames) {
  std::vector<Captured> caught;
  Run run(caught);
  RocePair p(kSeed, config());
  if (!p.ok) return run.fail("the QPs did not reach RTS", p);
  run.tap(p, 0);
  p.fill(p.net->a(), 0, 1u << 19, 7);
  p.fill(p.net->b(), 1u << 19, 1u << 19, 8);
  const uint32_t rkey = p.b.mr;
  const uint64_t va = 1u << 19;
  using transport::kReqImm;
  bool ok =
      run.op(p, {.kind = ReqKind::kSend, .len = kLong, .wr_id = 1}, 4096) &&
      run.op(p, {.kind = ReqKind::kSend, .len = 17, .wr_id = 2}, 4096) &&
      run.op(
          p,
          {.kind = ReqKind::kSend, .len = kLong, .wr_id = 3, .imm = 0x01020304, .flags = kReqImm},
          4096) &&
      run.op(p, {.kind = ReqKind::kSend, .len = 5, .wr_id = 4, .imm = 0xA0B0C0D0, .flags = kReqImm},
             4096) &&
      run.op(
          p,
          {.kind = ReqKind::kWrite, .len = kLong, .wr_id = 5, .rkey = rkey, .remote_addr = 0x10000},
          0) &&
      run.op(p,
             {.kind = ReqKind::kWrite, .len = 7, .wr_id = 6, .rkey = rkey, .remote_addr = 0x11000},
             0) &&
      run.op(p,
             {.kind = ReqKind::kWrite,
              .len = kLong,
              .wr_id = 7,
              .imm = 0x11223344,
              .flags = kReqImm,
              .rkey = rkey,
              .remote_addr = 0x12000},
             4096) &&
      run.op(p,
             {.kind = ReqKind::kWrite,
              .len = 9,
              .wr_id = 8,
              .imm = 0x55667788,
              .flags = kReqImm,
              .rkey = rkey,
              .remote_addr = 0x13000},
             4096) &&
      run.op(p, {.kind = ReqKind::kRead, .len = kLong, .wr_id = 9, .rkey = rkey, .remote_addr = va},
             0) &&
      run.op(
          p,
          {.kind = ReqKind::kRead, .len = 6, .wr_id = 10, .rkey = rkey, .remote_addr = va + 0x1000},
          0);
  if (!ok) return false;

  // PSN sequence error: the first SEND middle of a four-packet SEND is lost once, so B sees the
  // next one past a gap and NAKs; A goes back.
  p.net->faults(Dir::kAtoB).drop_if = [dropped = false](std::span<const uint8_t> f) mutable {
    if (dropped || f.size() <= kBth || f[kBth] != roce::kSendMiddle) return false;
    dropped = true;
    return true;
  };
  if (!run.op(p, {.kind = ReqKind::kSend, .len = 3 * kPmtu + 32, .wr_id = 11}, 4096)) {
    return false;
  }
  p.net->faults(Dir::kAtoB).drop_if = nullptr;
  if (p.b.rc->counters().naks_sent != 1) return run.fail("no PSN sequence error NAK", p);

  // RNR NAK: a SEND with no receive posted; the receive comes once B has NAKed.
  const size_t na = p.a.events.size();
  p.post(p.net->a(), {.kind = ReqKind::kSend, .len = 20, .offset = run.a_off, .wr_id = 12});
  if (!p.net->run_until([&] { return p.b.rc->counters().rnr_naks_sent > 0; }, 100'000'000)) {
    return run.fail("no RNR NAK", p);
  }
  p.post(p.net->b(), {.kind = ReqKind::kRecv, .len = 100, .offset = run.b_off, .wr_id = 13});
  if (!p.run_until_events(p.a, na + 1, 1'000'000'000) || p.a.events[na].status != 0) {
    return run.fail("the SEND after the RNR NAK did not complete", p);
  }
  p.net->run_for(1'000'000);  // the last ACKs
  uint64_t end = p.net->now_ns();

  // Remote access error: a WRITE with an rkey naming no MR, on a second pair (the error moves
  // the QP to ERR).
  {
    std::vector<Captured> c2;
    Run run2(c2);
    RocePair q(kSeed + 1, config());
    if (!q.ok) return run2.fail("the second pair's QPs did not reach RTS", q);
    const uint64_t base = end + 1'000'000;
    run2.tap(q, base);
    if (!run2.op(q,
                 {.kind = ReqKind::kWrite,
                  .len = 100,
                  .wr_id = 21,
                  .rkey = uint32_t(q.b.mr + 5),
                  .remote_addr = 0},
                 0, -EACCES)) {
      return false;
    }
    q.net->run_for(1'000'000);
    end = base + q.net->now_ns();
    caught.insert(caught.end(), c2.begin(), c2.end());
  }

  // A CNP: a third pair whose link marks every ECN-capable frame from A CE (DCQCN is on: every
  // RoCE packet is ECT(0)); B's notification point answers the first with a CNP at DSCP 48.
  {
    std::vector<Captured> c3;
    Run run3(c3);
    RoceConfig c = config();
    c.ab.ce = 1.0;
    RocePair q(kSeed + 2, c);
    if (!q.ok) return run3.fail("the third pair's QPs did not reach RTS", q);
    const uint64_t base = end + 1'000'000;
    run3.tap(q, base);
    if (!run3.op(q, {.kind = ReqKind::kWrite, .len = 100, .wr_id = 31, .rkey = q.b.mr}, 0)) {
      return false;
    }
    q.net->run_for(1'000'000);
    if (q.b.rc->counters().cnps_sent == 0) return run3.fail("no CNP", q);
    caught.insert(caught.end(), c3.begin(), c3.end());
  }
  frames = std::move(caught);
  return true;
}

std::string hex(std::span<const uint8_t> b) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(b.size() * 2);
  for (uint8_t x : b) {
    s += kDigits[x >> 4];
    s += kDigits[x & 15];
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const char* pcap_path = nullptr;
  const char* golden_path = nullptr;
  for (int i = 1; i < argc; i++) {
    const std::string_view a = argv[i];
    if (a == "--golden" && i + 1 < argc) {
      golden_path = argv[++i];
    } else if (!a.empty() && a[0] != '-' && pcap_path == nullptr) {
      pcap_path = argv[i];
    } else {
      pcap_path = nullptr;
      break;
    }
  }
  if (pcap_path == nullptr) {
    std::fprintf(stderr, "usage: roce_golden OUT.pcap [--golden FILE|-]\n");
    return 2;
  }

  std::vector<Captured> frames;
  if (!traffic(frames)) return 1;

  bool ok = true;
  std::vector<std::string> kinds;
  for (size_t i = 0; i < frames.size(); i++) {
    kinds.push_back(kind_of(frames[i].bytes));
    const std::string bad = check_frame(frames[i].bytes);
    if (!bad.empty()) {
      std::fprintf(stderr, "roce_golden: frame %zu (%s): %s\n", i + 1, kinds.back().c_str(),
                   bad.c_str());
      ok = false;
    }
  }
  std::string golden;
  for (std::string_view want : kExpected) {
    size_t i = 0;
    while (i < frames.size() && kinds[i] != want)
      i++;
    if (i == frames.size()) {
      std::fprintf(stderr, "roce_golden: no %.*s frame\n", int(want.size()), want.data());
      ok = false;
      continue;
    }
    golden += std::string(want) + " " + hex(frames[i].bytes) + "\n";
  }

  FILE* f = std::fopen(pcap_path, "wb");
  if (f == nullptr) {
    std::fprintf(stderr, "roce_golden: %s: %s\n", pcap_path, std::strerror(errno));
    return 1;
  }
  Pcap pcap(f);
  for (const Captured& c : frames)
    pcap.frame(c.ns, c.bytes);
  if (std::fclose(f) != 0) {
    std::fprintf(stderr, "roce_golden: %s: %s\n", pcap_path, std::strerror(errno));
    return 1;
  }
  if (golden_path != nullptr) {
    FILE* g = std::string_view(golden_path) == "-" ? stdout : std::fopen(golden_path, "w");
    if (g == nullptr || std::fputs(golden.c_str(), g) < 0 || (g != stdout && std::fclose(g))) {
      std::fprintf(stderr, "roce_golden: %s: %s\n", golden_path, std::strerror(errno));
      return 1;
    }
  }
  std::fprintf(stderr, "roce_golden: %zu frames, %zu kinds, %s\n", frames.size(), kExpected.size(),
               ok ? "all checked" : "FAILED");
  return ok ? 0 : 1;
}
