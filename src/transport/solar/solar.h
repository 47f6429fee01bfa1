// solar.h - the Solar transport: connections between an initiator and a target over N paths,
// WRITE and READ I/Os cut into self-describing blocks, each one packet with its own offset and a
// transmit sequence never reused, acknowledged per path (largest + SACK bitmap + echo + CE
// count), spread over the paths by each path's window, resent on any path that is up, with paths
// going down after k timeouts in a row and coming back by probes. The initiator sends WRITE
// blocks and READ_REQs; the target sends READ_BLKs, the same way. Behaviour: README.md here.
//
// A connection is made out of band, as RoCE's queue pairs are, and is one: its owner makes a
// queue pair (QpControl, rdma.h) whose QP number is our connection number, names the target's
// volume at create (QpCaps::region_*: an initiator has none), and moves it to RTR with the peer's
// number (dest_qpn) and address and a path MTU (a block is at most one), then to RTS, which
// opens the connection. Its NIC flow (rtr_nic_flow: the Solar parser; the target's placing by
// offset into its volume, the initiator's by message, the I/O id, into each READ's buffer)
// finds its packets by connection number. open() does the same for a flow its owner steered
// here by other means (the simulated network's tests). Never through listen() or connect().
//
// Headers only: a block is named by (mr, offset, len) in app memory and sent with
// kTxParserTrailer (the NIC writes its CRC32C into the header); the target's NIC places it by
// its offset. On the copy path the transport only says where a deferred block belongs.
//
// Threads: one instance belongs to one dataplane lcore (transport.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rdma.h"
#include "solar_path.h"
#include "solar_wire.h"
#include "transport.h"

namespace cleave::transport::solar {

// One connection, as both ends agreed it out of band.
struct ConnConfig {
  bool initiator = true;     // sends WRITE_BLKs; false: the target, which holds the volume
  uint32_t local_conn = 0;   // our number for it: the peer's packets carry it
  uint32_t remote_conn = 0;  // the peer's number: ours carry it
  uint16_t paths = 1;        // 1 to kMaxPaths; path p leaves from UDP source port 0xC000 | p
  // The flow's routes to the peer (QpAttr::routes: through as many local ports). The initiator
  // sends path p on route p % routes; the target sends each path's packets on the route that
  // path's last packet came on (route 0 until one has).
  uint8_t routes = 1;
  uint32_t block_bytes = 4096;
  uint32_t first_seq = 1;  // every path's first transmit sequence (tests start near 2^32)
  // Target: the volume, one MR, posted to the NIC at open() so blocks land by their offsets.
  uint16_t volume_mr = 0;
  uint64_t volume_len = 0;
  PathConfig path;  // each path's (block_bytes is the connection's)
  // Initiator: an I/O not done this long after it was given completes with -ETIMEDOUT (every
  // path down, or a target that lost it); checked every 1/16 of it (at least 1 ms). 0: never.
  uint64_t io_timeout_ns = 30'000'000'000;
};

// One path of a connection, for tests and management.
struct PathInfo {
  bool up = true;
  uint8_t route = 0;  // the route its packets leave on (ConnConfig::routes)
  uint64_t cwnd = 0;
  uint64_t srtt_ns = 0;
  uint64_t rto_ns = 0;
  uint64_t inflight = 0;
  uint64_t blocks_sent = 0;    // WRITE_BLKs sent on it, resends included
  uint64_t blocks_resent = 0;  // of those, resends (RETX)
  uint64_t acked = 0;          // transmissions acknowledged
  uint64_t lost = 0;           // transmissions found lost (3 below the largest acknowledged)
  uint64_t timeouts = 0;
  uint64_t downs = 0;  // times it was declared down
  uint64_t ups = 0;    // times a probe's reply brought it back
  uint64_t probes = 0;
  uint64_t read_reqs = 0;  // READ_REQs sent on it (initiator)
};

// Counters of one connection (both roles).
struct ConnStats {
  uint64_t ios_done = 0;
  uint64_t blocks_acked = 0;     // initiator: blocks acknowledged (each once)
  uint64_t nacks_received = 0;   // initiator
  uint64_t blocks_received = 0;  // target: WRITE_BLKs taken (placed or copied), duplicates too
  uint64_t crc_drops = 0;        // target: blocks dropped for a bad CRC32C (NACKed)
  uint64_t refused = 0;          // target: blocks NACKed out of range
  uint64_t acks_sent = 0;
  uint64_t acks_received = 0;
  uint64_t probe_replies = 0;   // target: probes answered
  uint64_t reads_deferred = 0;  // target: READ_REQs left unacknowledged, past what it holds
  uint64_t io_timeouts = 0;     // initiator: I/Os failed -ETIMEDOUT
  uint64_t bad_headers = 0;     // refused by the codec, or another connection's number
};

class SolarTransport final : public Transport, public QpControl {
 public:
  SolarTransport();
  ~SolarTransport() override;

  std::string_view name() const override { return "solar"; }
  // A queue pair's: "paths N" (1 to kMaxQpPaths, default 1), "block B" (bytes, kMinBlock up to
  // the path MTU; default the path MTU), "io_timeout_ms T" (0 to 3600000, 0 never; default
  // 30000).
  std::string check_params(Params params) const override;
  Claim claim() const override;
  QpControl* qp_control() override { return this; }

  // ---- queue pairs (QpControl): one connection each ----
  // `caps.region_len` > 0: the target, whose volume is (region_mr, region_len); else the
  // initiator. The QP number is the connection number the peer's packets carry.
  int create_qp(FlowId flow, uint32_t qpn, const QpCaps& caps, Params params) override;
  // RESET->INIT; INIT->RTR needs the peer's number (kAttrDestQpn) and a path MTU (kAttrPmtu)
  // that holds a block, and takes the routes the dataplane found (attr.routes); RTR->RTS opens
  // the connection; ERR and RESET close it, its I/Os
  // completing with -ECANCELED. RoCE's attributes (PSNs, timers, retries, access, selective
  // repeat, rate) are taken and ignored: Solar keeps its own per path.
  int modify_qp(FlowId flow, const QpAttr& attr, uint32_t mask, Context& ctx) override;
  int query_qp(FlowId flow, QpAttr* attr) const override;
  int destroy_qp(FlowId flow, Context& ctx) override;
  uint32_t max_pmtu(uint32_t l4_mtu) const override;
  NicFlow rtr_nic_flow(FlowId flow, const QpAttr& attr, uint32_t mask) const override;
  bool multi_route() const override { return true; }

  static constexpr uint16_t kMaxQpPaths = 64;
  static constexpr uint32_t kMinBlock = 256;

  // Connections are opened by their owner (open()), never by listen or connect.
  int listen(ListenerId, const Endpoint&, Params) override { return -EOPNOTSUPP; }
  void unlisten(ListenerId) override {}
  int connect(FlowId, const FlowTuple&, Params, Context&) override { return -EOPNOTSUPP; }

  // Opens a connection on `flow`, a flow its owner steered here (the Solar NIC flow: any source
  // port, placed by offset). A target posts its volume to the NIC; when the NIC refuses
  // (-EOPNOTSUPP, the generic backend) its blocks come on the copy path and go in by copy_in.
  // 0, -EEXIST (the flow has a connection), -EINVAL (a bad configuration).
  int open(FlowId flow, const ConnConfig& cfg, Context& ctx);
  // Forgets the connection; its I/Os complete with `status`.
  void close(FlowId flow, Context& ctx, int status = -ECONNABORTED);

  // kWrite (initiator): write (mr, offset, len) at volume offset remote_addr; one kWriteDone
  // when every block is acknowledged. kRead (initiator): read len bytes from volume offset
  // remote_addr into (mr, offset); one kReadDone when every block has arrived intact. Others
  // complete at once with -EOPNOTSUPP, a bad request with -EINVAL.
  void rx_burst(std::span<const RxHeader> hdrs, Context& ctx) override;
  void app_burst(std::span<const AppRequest> reqs, Context& ctx) override;
  void tick(Context& ctx) override;

  bool flow_info(FlowId flow, InfoSink& out) const override;
  size_t flow_count() const override { return conns_.size(); }
  void stats(InfoSink& out) const override;

  // For tests and management: false / nullptr when the flow or path is unknown.
  bool path_info(FlowId flow, uint16_t path, PathInfo* out) const;
  const ConnStats* conn_stats(FlowId flow) const;

 private:
  struct Conn;
  struct Path;
  struct Io;
  // A queue pair: its attributes and the connection RTS opens.
  struct Qp {
    QpAttr attr;
    ConnConfig cfg;
    bool block_given = false;  // "block" in its parameters; else the path MTU's
  };

  void rx_target(Conn& c, const RxHeader& h, const Header& sh, Context& ctx);
  void on_ack(Conn& c, const Header& sh, Context& ctx);
  void on_nack(Conn& c, const Header& sh, Context& ctx);
  void pump(Conn& c, Context& ctx);
  void send_block(Conn& c, uint16_t path, uint32_t io_id, uint16_t index, Context& ctx);
  void send_read_req(Conn& c, uint16_t path, uint32_t io_id, Context& ctx);
  void rx_read_req(Conn& c, const Header& sh, Context& ctx);
  void rx_read_blk(Conn& c, const RxHeader& h, const Header& sh, Context& ctx);
  bool record_arrival(Conn& c, const RxHeader& h, const Header& sh, Context& ctx);
  void finish(Conn& c, uint32_t io_id, int status, Context& ctx);
  void expire(Conn& c, Context& ctx);
  void send_ack(Conn& c, uint16_t path, uint32_t echo, uint8_t flags, Context& ctx);
  void send_nack(Conn& c, const Header& refused, NackReason why, Context& ctx);
  void send_probe(Conn& c, uint16_t path, Context& ctx);
  void emit(Conn& c, const Header& sh, uint16_t mr, uint64_t offset, uint32_t len, bool data,
            Context& ctx);
  void block_acked(Conn& c, uint32_t io_id, uint16_t index, Context& ctx);
  void requeue(Conn& c, uint32_t io_id, uint16_t index);
  bool block_pending(const Conn& c, uint32_t io_id, uint16_t index) const;

  std::unordered_map<FlowId, Qp> qps_;
  std::unordered_map<FlowId, std::unique_ptr<Conn>> conns_;
  std::vector<Conn*> order_;    // conns_ in open order, for tick()
  std::vector<Conn*> touched_;  // targets that received data in this burst
  std::vector<uint32_t> late_;  // expire()'s I/Os past their deadline
  ConnStats closed_;            // counters of connections closed
};

// The registry's factory.
std::unique_ptr<Transport> make_transport();

}  // namespace cleave::transport::solar
