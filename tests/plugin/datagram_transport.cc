// datagram_transport.cc - "datagram": plain UDP as a transport plugin, the example for
// transport_abi.h that the registry tests load and cleaved runs (tests/integration).
//
// Unreliable and unordered, as UDP is: one kSend is one datagram, completed as soon as its
// descriptor is emitted (the NIC reads the payload from app memory after that, and Context has
// no hook that says when: an app must not rewrite a sent buffer at once); each received datagram
// fills the oldest posted kRecv buffer (cut to the buffer's length) and is dropped when none is
// posted. It never sets up zero-copy placement, so every payload comes on the copy path
// (Placed::kDeferred) and goes to app memory through Context::copy_in. No parameters, no timers.
//
// Its claim (Transport::claim): UDP to destination ports 9000-9015, found by tuple, on the NIC
// as plain UDP in copy mode. Apps listen on those ports; a connect's local port is one of them.
// DATAGRAM_NAME and DATAGRAM_FIRST_PORT build variants (tests/meson.build: one that collides
// with RoCEv2's port, one with this one's, which the registry must refuse).
//
// Built as its own shared object (tests/meson.build): only cleave_transport_plugin_v1 is
// exported, and the code depends on transport.h's inline parts and the C++ library only.
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>

#include "transport.h"
#include "transport_abi.h"

#ifndef DATAGRAM_NAME
#define DATAGRAM_NAME "datagram"
#endif
#ifndef DATAGRAM_FIRST_PORT
#define DATAGRAM_FIRST_PORT 9000
#endif

namespace {

using namespace cleave::transport;

constexpr uint8_t kUdpHeader = 8;
constexpr uint32_t kMaxPayload = 65535 - kUdpHeader - 20;  // the IPv4 total length's limit
constexpr size_t kPorts = 16;

// The ports it claims: static storage, as Claim::udp_ports asks.
constexpr std::array<uint16_t, kPorts> kClaimedPorts = [] {
  std::array<uint16_t, kPorts> a{};
  for (size_t i = 0; i < kPorts; i++)
    a[i] = uint16_t(DATAGRAM_FIRST_PORT + i);
  return a;
}();

uint16_t get16(const uint8_t* p) {
  return uint16_t(p[0] << 8 | p[1]);
}
void put16(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}

// The addresses of an IPv4 or IPv6 header; false when it is too short to hold them.
bool ip_addrs(const RxHeader& h, IpAddr* src, IpAddr* dst) {
  if (h.l3_len < 20) return false;
  const bool v6 = h.l3[0] >> 4 == 6;
  const size_t at = v6 ? 8 : 12, n = v6 ? 16 : 4;
  if (v6 && h.l3_len < 40) return false;
  src->family = dst->family = v6 ? 6 : 4;
  std::copy_n(h.l3 + at, n, src->bytes.begin());
  std::copy_n(h.l3 + at + n, n, dst->bytes.begin());
  return true;
}

// The claim's parse: ports from the UDP header, the payload is what its length says after it.
bool parse(const RxL4& in, RxParsed* out) {
  const uint32_t len = get16(in.l4 + 4);
  if (len < kUdpHeader || len > in.total) return false;
  out->header_len = kUdpHeader;
  out->payload_len = len - kUdpHeader;
  out->src_port = get16(in.l4);
  out->dst_port = get16(in.l4 + 2);
  return true;
}

class DatagramTransport final : public Transport {
 public:
  std::string_view name() const override { return DATAGRAM_NAME; }

  Claim claim() const override {
    Claim c;
    c.proto = 17;
    c.udp_ports = kClaimedPorts;
    c.key = FlowKey::kTuple;
    c.nic = NicFlow{.parser = NicParser::kUdp, .zero_copy = false, .reliable = false};
    c.min_header = kUdpHeader;
    c.parse = parse;
    return c;
  }

  std::string check_params(Params params) const override {
    if (params.empty()) return "";
    return "datagram: no parameters are known (got \"" + std::string(params[0].key) + "\")";
  }

  int listen(ListenerId listener, const Endpoint& local, Params params) override {
    if (!check_params(params).empty()) return -EINVAL;
    return listeners_.emplace(listener, local).second ? 0 : -EEXIST;
  }
  void unlisten(ListenerId listener) override { listeners_.erase(listener); }

  // No handshake: the flow is usable at once.
  int connect(FlowId flow, const FlowTuple& tuple, Params params, Context& ctx) override {
    if (tuple.proto != 17 || !check_params(params).empty()) return -EINVAL;
    if (!flows_.emplace(flow, Flow{.tuple = tuple, .id = flow}).second) return -EEXIST;
    ctx.event(Event{.flow = flow, .kind = EventKind::kConnected});
    return 0;
  }

  void rx_burst(std::span<const RxHeader> hdrs, Context& ctx) override {
    for (const RxHeader& h : hdrs) {
      if (h.l4_len < kUdpHeader || h.l4_csum == Csum::kBad) continue;
      Flow* f = h.flow != kNoFlow ? find(h.flow) : accept(h, ctx);
      if (f == nullptr) continue;
      f->received++;
      // Only the copy path carries bytes for us; an empty datagram (kNoPayload) completes nothing.
      if (h.placed != Placed::kDeferred || h.payload == nullptr) continue;
      if (f->posted.empty()) {
        f->dropped++;  // nowhere to put it: UDP drops
        continue;
      }
      const AppRequest buf = f->posted.front();
      f->posted.pop_front();
      const uint32_t n = std::min(h.payload_len, buf.len);
      const bool ok = ctx.copy_in(h.payload, n, buf.mr, buf.offset);
      // aux carries the datagram's full length, so the app sees a cut one (as MSG_TRUNC).
      ctx.event(Event{.flow = f->id,
                      .kind = EventKind::kRecvDone,
                      .status = ok ? 0 : -EFAULT,
                      .len = ok ? n : 0,
                      .aux = h.payload_len,
                      .wr_id = buf.wr_id});
    }
  }

  void app_burst(std::span<const AppRequest> reqs, Context& ctx) override {
    for (const AppRequest& r : reqs) {
      Flow* f = find(r.flow);
      const EventKind done = r.kind == ReqKind::kRecv ? EventKind::kRecvDone : EventKind::kSendDone;
      if (f == nullptr) {
        ctx.event(Event{.flow = r.flow, .kind = done, .status = -ENOTCONN, .wr_id = r.wr_id});
        continue;
      }
      switch (r.kind) {
        case ReqKind::kSend:
          send(*f, r, ctx);
          break;
        case ReqKind::kRecv:
          f->posted.push_back(r);
          break;
        case ReqKind::kClose:  // nothing queued to wait for: closing is forgetting
        case ReqKind::kAbort:
          close_flow(*f, r.kind == ReqKind::kClose ? 0 : -ECONNABORTED, ctx);
          break;
        case ReqKind::kWrite:  // no RDMA over datagrams
        case ReqKind::kRead:
          ctx.event(Event{
              .flow = r.flow,
              .kind = r.kind == ReqKind::kWrite ? EventKind::kWriteDone : EventKind::kReadDone,
              .status = -EOPNOTSUPP,
              .wr_id = r.wr_id});
          break;
      }
    }
  }

  void tick(Context& /*ctx*/) override {}

  bool flow_info(FlowId flow, InfoSink& out) const override {
    auto it = flows_.find(flow);
    if (it == flows_.end()) return false;
    const Flow& f = it->second;
    out.number("local_port", f.tuple.local.port);
    out.number("remote_port", f.tuple.remote.port);
    out.number("sent", f.sent);
    out.number("received", f.received);
    out.number("dropped", f.dropped);
    out.number("posted", f.posted.size());
    return true;
  }
  size_t flow_count() const override { return flows_.size(); }

 private:
  struct Flow {
    FlowTuple tuple;
    FlowId id = kNoFlow;
    std::deque<AppRequest> posted;  // kRecv buffers, oldest first
    uint64_t sent = 0, received = 0, dropped = 0;
  };

  Flow* find(FlowId flow) {
    auto it = flows_.find(flow);
    return it == flows_.end() ? nullptr : &it->second;
  }

  // A datagram for a listener from a new peer opens a flow. The app learns of it from kAccepted
  // and posts buffers only then, so this first datagram is usually dropped: UDP promises nothing.
  Flow* accept(const RxHeader& h, Context& ctx) {
    if (!h.has_listener || !listeners_.contains(h.listener)) return nullptr;
    FlowTuple t{.proto = 17};
    if (!ip_addrs(h, &t.remote.ip, &t.local.ip)) return nullptr;
    t.remote.port = get16(h.l4);
    t.local.port = get16(h.l4 + 2);
    const FlowId id = ctx.flow_open(h.listener, t, 0, false);  // no sequence numbers to place by
    if (id == kNoFlow) return nullptr;
    Flow& f = flows_.emplace(id, Flow{.tuple = t, .id = id}).first->second;
    ctx.event(Event{.flow = id, .kind = EventKind::kAccepted, .aux = h.listener});
    return &f;
  }

  // One descriptor: our 8-byte header and the payload by reference, which the NIC reads. The
  // checksum is left 0 for the NIC to fill in (the dataplane asks it for L4 checksum offload).
  void send(Flow& f, const AppRequest& r, Context& ctx) {
    if (r.len > kMaxPayload) {
      ctx.event(Event{
          .flow = r.flow, .kind = EventKind::kSendDone, .status = -EMSGSIZE, .wr_id = r.wr_id});
      return;
    }
    TxDesc& d = ctx.tx_next();
    d.flow = r.flow;
    d.len = r.len;
    d.mr = r.mr;
    d.offset = r.offset;
    d.l4_len = kUdpHeader;
    put16(&d.l4[0], f.tuple.local.port);
    put16(&d.l4[2], f.tuple.remote.port);
    put16(&d.l4[4], kUdpHeader + r.len);
    put16(&d.l4[6], 0);
    f.sent++;
    // Unreliable: "done" means handed to the NIC, not acknowledged by the peer.
    ctx.event(Event{.flow = r.flow, .kind = EventKind::kSendDone, .len = r.len, .wr_id = r.wr_id});
  }

  void close_flow(Flow& f, int32_t status, Context& ctx) {
    const FlowId id = f.id;
    for (const AppRequest& b : f.posted) {
      ctx.event(
          Event{.flow = id, .kind = EventKind::kRecvDone, .status = status, .wr_id = b.wr_id});
    }
    flows_.erase(id);
    ctx.event(Event{.flow = id, .kind = EventKind::kClosed, .status = status});
    ctx.flow_closed(id);
  }

  std::unordered_map<FlowId, Flow> flows_;
  std::unordered_map<ListenerId, Endpoint> listeners_;
};

void* create() {
  return static_cast<Transport*>(new DatagramTransport());
}

}  // namespace

extern "C" const cleave_transport_plugin* cleave_transport_plugin_v1(void) {
  static const cleave_transport_plugin plugin = {
      .abi_version = CLEAVE_TRANSPORT_ABI_VERSION,
      .struct_size = sizeof(cleave_transport_plugin),
      .name = DATAGRAM_NAME,
      .description = "UDP datagrams, unreliable (example plugin)",
      .create = create,
  };
  return &plugin;
}
