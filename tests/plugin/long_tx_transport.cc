// long_tx_transport.cc - "long-tx": a test plugin that hands each send to the NIC as one
// descriptor of the length the app asked, however long, so the dataplane's refusal of
// descriptors over transport::kMaxTxLen can be tested from a real plugin (management_test.cc).
//
// A connect succeeds at once (no handshake); a kSend becomes one descriptor over the app's memory
// with a 20-byte TCP-shaped header (the flow's ports, data offset 5, ACK) and completes as soon as
// it is emitted; a kRecv completes with -EOPNOTSUPP; received segments are ignored. Built as its
// own shared object (tests/meson.build), like the datagram example it is not.
#include <cerrno>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "transport.h"
#include "transport_abi.h"

namespace {

using namespace cleave::transport;

constexpr uint8_t kHeader = 20;

void put16(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}

class LongTxTransport final : public Transport {
 public:
  std::string_view name() const override { return "long-tx"; }
  std::string check_params(Params params) const override {
    return params.empty() ? "" : "long-tx: no parameters are known";
  }
  int listen(ListenerId, const Endpoint&, Params) override { return -EOPNOTSUPP; }
  void unlisten(ListenerId) override {}

  int connect(FlowId flow, const FlowTuple& tuple, Params params, Context& ctx) override {
    if (!check_params(params).empty()) return -EINVAL;
    if (!flows_.emplace(flow, tuple).second) return -EEXIST;
    ctx.event(Event{.flow = flow, .kind = EventKind::kConnected});
    return 0;
  }

  void rx_burst(std::span<const RxHeader>, Context&) override {}

  void app_burst(std::span<const AppRequest> reqs, Context& ctx) override {
    for (const AppRequest& r : reqs) {
      auto it = flows_.find(r.flow);
      if (it == flows_.end()) continue;
      switch (r.kind) {
        case ReqKind::kSend: {
          // No length check on purpose: this is the descriptor the dataplane must refuse.
          TxDesc& d = ctx.tx_next();
          d.flow = r.flow;
          d.len = r.len;
          d.mr = r.mr;
          d.offset = r.offset;
          d.l4_len = kHeader;
          d.l4.fill(0);
          put16(&d.l4[0], it->second.local.port);
          put16(&d.l4[2], it->second.remote.port);
          d.l4[12] = 5 << 4;
          d.l4[13] = 0x10;  // ACK
          ctx.event(
              Event{.flow = r.flow, .kind = EventKind::kSendDone, .len = r.len, .wr_id = r.wr_id});
          break;
        }
        case ReqKind::kClose:
        case ReqKind::kAbort:
          flows_.erase(it);
          ctx.event(Event{.flow = r.flow, .kind = EventKind::kClosed});
          ctx.flow_closed(r.flow);
          break;
        default:
          ctx.event(Event{.flow = r.flow,
                          .kind = r.kind == ReqKind::kRecv    ? EventKind::kRecvDone
                                  : r.kind == ReqKind::kWrite ? EventKind::kWriteDone
                                                              : EventKind::kReadDone,
                          .status = -EOPNOTSUPP,
                          .wr_id = r.wr_id});
          break;
      }
    }
  }

  void tick(Context&) override {}
  bool flow_info(FlowId flow, InfoSink&) const override { return flows_.contains(flow); }
  size_t flow_count() const override { return flows_.size(); }

 private:
  std::unordered_map<FlowId, FlowTuple> flows_;
};

void* create() {
  return static_cast<Transport*>(new LongTxTransport());
}

}  // namespace

extern "C" const cleave_transport_plugin* cleave_transport_plugin_v1(void) {
  static const cleave_transport_plugin plugin = {
      .abi_version = CLEAVE_TRANSPORT_ABI_VERSION,
      .struct_size = sizeof(cleave_transport_plugin),
      .name = "long-tx",
      .description = "test plugin: one descriptor per send, whatever its length",
      .create = create,
  };
  return &plugin;
}
