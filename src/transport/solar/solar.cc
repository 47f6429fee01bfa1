// solar.cc - the Solar transport (solar.h): connections, WRITE I/Os as blocks over paths, ACKs
// and NACKs, path timeouts and probes. The rules it keeps: README.md in this folder, "Behaviour".
#include "solar.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <vector>

#include "common/wire.h"

namespace cleave::transport::solar {

namespace {

constexpr uint16_t kPorts[] = {kUdpPort};
constexpr uint8_t kL4Len = uint8_t(kUdpLen + kHeaderLen);
constexpr uint8_t kEct0 = 2;
// A path's receiver ACKs at the latest every this many blocks within a burst (and at the end of
// every burst): one ACK's bitmap covers 64 sequences, and the sender's window moves per ACK.
constexpr uint32_t kAckEvery = 16;
// What a target holds for the READs it serves on one connection, whatever its peer asks: past
// either bound a new READ_REQ goes unacknowledged (the initiator sends it again after its
// timeout), so a peer cannot make the daemon hold more.
constexpr size_t kMaxServedReads = 1024;
constexpr uint32_t kMaxServedBlocks = 1u << 18;
constexpr uint8_t kCe = 3;

// A block's state at the initiator.
enum BlockBits : uint8_t {
  kSent = 1,    // sent at least once: the next transmission is a resend
  kAcked = 2,   // acknowledged: done
  kQueued = 4,  // waiting in the send queue
};

// The claim's parse: UDP and the Solar header are the header; the block is the payload.
bool parse_rx(const RxL4& in, RxParsed* out) {
  if (in.avail < kL4Len || in.total < kL4Len) return false;
  out->header_len = kL4Len;
  out->payload_len = in.whole ? in.total - kL4Len : in.nic_payload;
  out->src_port = wire::load16(in.l4);
  out->dst_port = wire::load16(in.l4 + 2);
  out->number = wire::load32(in.l4 + kUdpLen + 4);  // conn: the receiver's number
  return true;
}

// A double-ended queue in one power-of-two array, grown by doubling: std::deque's ends without
// its per-element block bookkeeping, on the paths that run per block and per ACK.
template <class T>
class Ring {
 public:
  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }
  T& front() { return buf_[head_]; }
  T& operator[](size_t i) { return buf_[(head_ + i) & mask_]; }
  void push_back(const T& v) {
    if (n_ == buf_.size()) grow();
    buf_[(head_ + n_++) & mask_] = v;
  }
  void push_front(const T& v) {
    if (n_ == buf_.size()) grow();
    head_ = (head_ - 1) & mask_;
    buf_[head_] = v;
    n_++;
  }
  void pop_front() { drop_front(1); }
  void drop_front(size_t k) {
    head_ = (head_ + k) & mask_;
    n_ -= k;
  }
  void erase(size_t i) {  // rare: the ones after it move up
    for (; i + 1 < n_; i++)
      (*this)[i] = (*this)[i + 1];
    n_--;
  }
  void clear() { head_ = n_ = 0; }

 private:
  void grow() {
    std::vector<T> b(buf_.empty() ? 16 : buf_.size() * 2);
    for (size_t i = 0; i < n_; i++)
      b[i] = (*this)[i];
    buf_.swap(b);
    head_ = 0;
    mask_ = buf_.size() - 1;
  }
  std::vector<T> buf_;
  size_t head_ = 0;
  size_t n_ = 0;
  size_t mask_ = 0;
};

}  // namespace

// One transmission in flight on a path.
struct Out {
  uint32_t seq = 0;
  uint32_t io = 0;
  uint16_t index = 0;
  uint32_t bytes = 0;
  uint64_t sent_at = 0;
  bool req = false;  // a READ_REQ (1 byte in flight), not a block
};

struct SolarTransport::Path {
  Path(const PathConfig& cfg, uint64_t now) : st(cfg, now) {}
  PathState st;
  PathInfo info;
  // Sender: transmissions in flight, oldest first (sequences only grow): an ACK touches only
  // those up to its largest sequence, at the front.
  uint32_t next_seq = 1;
  Ring<Out> out;
  uint32_t largest_acked = 0;
  bool have_largest = false;
  uint32_t last_ce = 0;
  uint64_t rto_at = 0;  // 0: not armed
  uint32_t probe_echo = 0;
  uint64_t probe_sent_at = 0;
  uint8_t route = 0;  // where its packets leave (ConnConfig::routes)
  // Receiver: what arrived, for the ACKs it sends.
  bool rx_any = false;
  uint32_t rx_largest = 0;
  uint64_t rx_sack = 0;
  uint32_t rx_ce = 0;
  uint32_t rx_unacked = 0;  // arrivals since the last ACK
  uint32_t rx_last = 0;     // the latest arrival
  bool dirty = false;       // on the burst's list of paths owing an ACK
};

// An I/O: at the initiator a WRITE (blocks to send) or a READ (blocks to receive, asked for by
// READ_REQs); at the target a READ being served (READ_BLKs to send).
struct SolarTransport::Io {
  uint64_t wr_id = 0;
  uint16_t mr = 0;
  uint64_t offset = 0;  // where block 0's bytes are in `mr` (initiator: the app's; target: volume)
  uint64_t remote = 0;  // where block 0 goes at the peer (WRITE: volume offset; READ_BLK: 0)
  uint32_t len = 0;
  uint16_t count = 0;
  uint16_t left = 0;        // blocks not yet acknowledged (sending) or not yet arrived (READ)
  bool read = false;        // initiator: a READ
  bool on_nic = false;      // READ: its buffer is posted to the NIC under the I/O id
  bool req_queued = false;  // READ: a READ_REQ waits in the queue
  bool req_sent = false;    // READ: the next READ_REQ is a resend
  uint64_t deadline = 0;    // initiator: it fails -ETIMEDOUT from then on (0: never)
  std::vector<uint8_t> blocks;
};

struct SolarTransport::Conn {
  FlowId flow = kNoFlow;
  ConnConfig cfg;
  std::vector<std::unique_ptr<Path>> paths;
  ConnStats stats;
  // Initiator.
  uint32_t next_io = 1;
  std::unordered_map<uint32_t, Io> ios;
  // The I/O found last (find_io): consecutive blocks in the queue and in an ACK mostly belong
  // to one. Elements of an unordered_map stay put until erased (erase_io forgets it).
  uint32_t last_io_id = 0;
  Io* last_io = nullptr;
  uint64_t next_deadline_scan = 0;  // tick() looks for I/Os past their deadline from then on
  struct Ref {
    uint32_t io;
    uint16_t index;
  };
  Ring<Ref> queue;  // blocks to send: new ones at the back, lost ones at the front
  uint16_t rr = 0;  // the path the next block tries first
  // Target.
  bool volume_on_nic = false;
  uint32_t served_blocks = 0;   // blocks of the READs in `ios` (kMaxServedBlocks)
  std::vector<uint16_t> dirty;  // paths owing an ACK at the end of the burst
  bool touched = false;         // on touched_ in this burst
};

SolarTransport::SolarTransport() = default;
SolarTransport::~SolarTransport() = default;

namespace {

template <typename C>
auto find_io(C& c, uint32_t id) -> decltype(c.last_io) {
  if (c.last_io != nullptr && c.last_io_id == id) return c.last_io;
  auto it = c.ios.find(id);
  if (it == c.ios.end()) return nullptr;
  c.last_io_id = id;
  c.last_io = &it->second;
  return c.last_io;
}

template <typename C>
void erase_io(C& c, uint32_t id) {
  if (c.last_io_id == id) c.last_io = nullptr;
  c.ios.erase(id);
}

}  // namespace

namespace {

// A queue pair's parameters (check_params): "" or why not.
std::string parse_params(Params params, uint16_t* paths, uint32_t* block, uint64_t* timeout_ns) {
  for (const Param& p : params) {
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(p.value.data(), p.value.data() + p.value.size(), v);
    const bool number = ec == std::errc() && end == p.value.data() + p.value.size();
    if (p.key == "paths") {
      if (!number || v == 0 || v > SolarTransport::kMaxQpPaths) {
        return "paths: 1 to " + std::to_string(SolarTransport::kMaxQpPaths) + " (got \"" +
               std::string(p.value) + "\")";
      }
      *paths = uint16_t(v);
    } else if (p.key == "block") {
      if (!number || v < SolarTransport::kMinBlock || v > 4096) {
        return "block: bytes, " + std::to_string(SolarTransport::kMinBlock) +
               " to 4096 and at most the path MTU (got \"" + std::string(p.value) + "\")";
      }
      *block = uint32_t(v);
    } else if (p.key == "io_timeout_ms") {
      if (!number || v > 3'600'000) {
        return "io_timeout_ms: 0 (never) to 3600000 (got \"" + std::string(p.value) + "\")";
      }
      *timeout_ns = v * 1'000'000;
    } else {
      return "solar takes paths, block and io_timeout_ms (got \"" + std::string(p.key) + "\")";
    }
  }
  return "";
}

}  // namespace

std::string SolarTransport::check_params(Params params) const {
  uint16_t paths = 1;
  uint32_t block = 0;
  uint64_t timeout = 0;
  return parse_params(params, &paths, &block, &timeout);
}

Claim SolarTransport::claim() const {
  Claim c;
  c.proto = 17;
  c.udp_ports = kPorts;
  c.key = FlowKey::kNumber;
  c.nic.parser = NicParser::kSolar;
  c.min_header = kL4Len;
  c.parse = parse_rx;
  return c;
}

int SolarTransport::open(FlowId flow, const ConnConfig& cfg, Context& ctx) {
  if (conns_.count(flow) != 0) return -EEXIST;
  if (cfg.paths == 0 || cfg.paths > kMaxPaths || cfg.block_bytes == 0 ||
      cfg.block_bytes > kMaxTxLen || (!cfg.initiator && cfg.volume_len == 0)) {
    return -EINVAL;
  }
  auto c = std::make_unique<Conn>();
  c->flow = flow;
  c->cfg = cfg;
  PathConfig pc = cfg.path;
  pc.block_bytes = cfg.block_bytes;
  for (uint16_t p = 0; p < cfg.paths; p++) {
    c->paths.push_back(std::make_unique<Path>(pc, ctx.now_ns()));
    c->paths.back()->next_seq = cfg.first_seq;
    // The initiator spreads the paths over the routes; the target learns them (rx_burst).
    if (cfg.initiator) c->paths.back()->route = uint8_t(p % std::max<uint8_t>(cfg.routes, 1));
  }
  if (!cfg.initiator) {
    // The volume as one byte stream from offset 0: the NIC places every block by its offset.
    c->volume_on_nic =
        ctx.ms_post(flow, cfg.volume_mr, 0,
                    uint32_t(std::min<uint64_t>(cfg.volume_len, UINT32_MAX)), 0) == 0;
  }
  order_.push_back(c.get());
  conns_.emplace(flow, std::move(c));
  return 0;
}

void SolarTransport::close(FlowId flow, Context& ctx, int status) {
  auto it = conns_.find(flow);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  for (auto& [id, io] : c.ios) {
    if (!c.cfg.initiator) continue;  // READs being served: nobody waits for them here
    if (io.on_nic) ctx.ms_retire_msg(flow, id);
    ctx.event({.flow = flow,
               .kind = io.read ? EventKind::kReadDone : EventKind::kWriteDone,
               .status = status,
               .len = 0,
               .wr_id = io.wr_id});
  }
  // The volume leaves the NIC: nothing more lands in it (the NIC flow may stay, in ERR).
  if (c.volume_on_nic) ctx.ms_retire(flow, 1);
  const ConnStats& s = c.stats;
  closed_.ios_done += s.ios_done;
  closed_.blocks_acked += s.blocks_acked;
  closed_.nacks_received += s.nacks_received;
  closed_.blocks_received += s.blocks_received;
  closed_.crc_drops += s.crc_drops;
  closed_.refused += s.refused;
  closed_.acks_sent += s.acks_sent;
  closed_.acks_received += s.acks_received;
  closed_.probe_replies += s.probe_replies;
  closed_.reads_deferred += s.reads_deferred;
  closed_.io_timeouts += s.io_timeouts;
  closed_.bad_headers += s.bad_headers;
  order_.erase(std::find(order_.begin(), order_.end(), &c));
  conns_.erase(it);
}

// ---- queue pairs --------------------------------------------------------------------------------

int SolarTransport::create_qp(FlowId flow, uint32_t qpn, const QpCaps& caps, Params params) {
  if (flow == kNoFlow) return -EINVAL;
  if (qps_.count(flow) != 0 || conns_.count(flow) != 0) return -EEXIST;
  Qp q;
  uint32_t block = 0;
  if (!parse_params(params, &q.cfg.paths, &block, &q.cfg.io_timeout_ns).empty()) return -EINVAL;
  q.block_given = block != 0;
  q.cfg.block_bytes = block;
  q.cfg.local_conn = qpn;
  q.cfg.initiator = caps.region_len == 0;
  q.cfg.volume_mr = caps.region_mr;
  q.cfg.volume_len = caps.region_len;
  q.attr.state = QpState::kReset;
  qps_.emplace(flow, q);
  return 0;
}

int SolarTransport::modify_qp(FlowId flow, const QpAttr& attr, uint32_t mask, Context& ctx) {
  auto it = qps_.find(flow);
  if (it == qps_.end()) return -ENOENT;
  Qp& q = it->second;
  const QpState from = q.attr.state;
  const QpState to = (mask & kAttrState) != 0 ? attr.state : from;
  if (to == QpState::kErr || to == QpState::kReset) {
    close(flow, ctx, -ECANCELED);
    q.attr.state = to;
    if (to == QpState::kReset) q.attr.dest_qpn = 0;
    return 0;
  }
  const bool ok = (from == QpState::kReset && to == QpState::kInit) ||
                  (from == QpState::kInit && (to == QpState::kInit || to == QpState::kRtr)) ||
                  (from == QpState::kRtr && (to == QpState::kRtr || to == QpState::kRts)) ||
                  (from == QpState::kRts && to == QpState::kRts);
  if (!ok) return -EINVAL;
  if (from == QpState::kInit && to == QpState::kRtr) {
    if ((mask & (kAttrDestQpn | kAttrPmtu)) != (kAttrDestQpn | kAttrPmtu)) return -EINVAL;
    const uint32_t m = attr.pmtu;
    if (m != 256 && m != 512 && m != 1024 && m != 2048 && m != 4096) return -EINVAL;
    if (q.block_given && q.cfg.block_bytes > m) return -EINVAL;
    q.attr.pmtu = m;
    q.attr.dest_qpn = attr.dest_qpn;
    q.cfg.remote_conn = attr.dest_qpn;
    q.cfg.routes = std::max<uint8_t>(attr.routes, 1);
    if (!q.block_given) q.cfg.block_bytes = std::max(m, kMinBlock);
  }
  if (from == QpState::kRtr && to == QpState::kRts) {
    if (const int e = open(flow, q.cfg, ctx); e != 0) return e;
  }
  q.attr.state = to;
  return 0;
}

int SolarTransport::query_qp(FlowId flow, QpAttr* attr) const {
  auto it = qps_.find(flow);
  if (it == qps_.end()) return -ENOENT;
  *attr = it->second.attr;
  return 0;
}

int SolarTransport::destroy_qp(FlowId flow, Context& ctx) {
  auto it = qps_.find(flow);
  if (it == qps_.end()) return -ENOENT;
  close(flow, ctx, -ECANCELED);
  qps_.erase(it);
  return 0;
}

uint32_t SolarTransport::max_pmtu(uint32_t l4_mtu) const {
  for (uint32_t m = 4096; m >= 256; m /= 2) {
    if (m + kL4Len <= l4_mtu) return m;
  }
  return 0;
}

NicFlow SolarTransport::rtr_nic_flow(FlowId flow, const QpAttr& /*attr*/, uint32_t /*mask*/) const {
  NicFlow n;
  n.parser = NicParser::kSolar;
  n.reliable = true;
  // The initiator's READ_BLKs land by I/O id in each READ's buffer; the target's WRITE_BLKs by
  // their offsets into the volume, one byte stream from 0.
  auto it = qps_.find(flow);
  n.messages = it == qps_.end() || it->second.cfg.initiator;
  return n;
}

// ---- sending ------------------------------------------------------------------------------------

void SolarTransport::emit(Conn& c, const Header& sh, uint16_t mr, uint64_t offset, uint32_t len,
                          bool data, Context& ctx) {
  TxDesc& d = ctx.tx_next();
  d.flow = c.flow;
  d.mr = mr;
  d.offset = offset;
  d.len = len;
  d.l4_len = kL4Len;
  d.route = c.paths[sh.path]->route;  // the caller's path is one of ours
  uint8_t* u = d.l4.data();
  wire::store16(u, udp_sport(sh.path));
  wire::store16(u + 2, kUdpPort);
  wire::store16(u + 4, uint16_t(kL4Len + len));
  wire::store16(u + 6, 0);  // the NIC's
  encode(sh, u + kUdpLen);
  if (data) {
    d.ecn = kEct0;
    d.flags = kTxParserTrailer;  // the NIC writes the block's CRC32C into the header
  }
}

void SolarTransport::send_block(Conn& c, uint16_t path, uint32_t io_id, uint16_t index,
                                Context& ctx) {
  Io& io = *find_io(c, io_id);  // pump() found it
  Path& p = *c.paths[path];
  const uint64_t at = uint64_t(index) * c.cfg.block_bytes;
  const uint32_t len = uint32_t(std::min<uint64_t>(c.cfg.block_bytes, io.len - at));
  uint8_t& b = io.blocks[index];
  Header sh;
  sh.type = c.cfg.initiator ? Type::kWriteBlk : Type::kReadBlk;
  sh.flags =
      uint8_t((index + 1 == io.count ? kFlagAckReq : 0) | ((b & kSent) != 0 ? kFlagRetx : 0));
  sh.path = path;
  sh.conn = c.cfg.remote_conn;
  sh.seq = p.next_seq++;
  sh.io_id = io_id;
  sh.offset = io.remote + at;
  sh.index = index;
  sh.count = io.count;
  if ((b & kSent) != 0) p.info.blocks_resent++;
  b |= kSent;
  emit(c, sh, io.mr, io.offset + at, len, true, ctx);
  p.out.push_back({sh.seq, io_id, index, len, ctx.now_ns()});
  p.st.on_send(len);
  p.info.blocks_sent++;
  if (p.rto_at == 0) p.rto_at = ctx.now_ns() + p.st.rto_ns();
}

// A READ_REQ for the blocks of a READ from its first missing one on: 1 byte in the path's
// flight, acknowledged like a block; lost or timed out, it is asked again.
void SolarTransport::send_read_req(Conn& c, uint16_t path, uint32_t io_id, Context& ctx) {
  Io& io = *find_io(c, io_id);  // pump() found it
  Path& p = *c.paths[path];
  uint16_t from = 0;
  while (from + 1 < io.count && (io.blocks[from] & kAcked) != 0)
    from++;
  const uint64_t at = uint64_t(from) * c.cfg.block_bytes;
  Header sh;
  sh.type = Type::kReadReq;
  sh.flags = uint8_t(kFlagAckReq | (io.req_sent ? kFlagRetx : 0));
  sh.path = path;
  sh.conn = c.cfg.remote_conn;
  sh.seq = p.next_seq++;
  sh.io_id = io_id;
  sh.offset = io.remote + at;
  sh.index = from;
  sh.count = io.count;
  sh.length = uint32_t(io.len - at);
  emit(c, sh, 0, 0, 0, false, ctx);
  io.req_sent = true;
  p.out.push_back({sh.seq, io_id, from, 1, ctx.now_ns(), true});
  p.st.on_send(1);
  p.info.read_reqs++;
  if (p.rto_at == 0) p.rto_at = ctx.now_ns() + p.st.rto_ns();
}

// Blocks from the queue onto paths with room in their windows, round robin from `rr`.
void SolarTransport::pump(Conn& c, Context& ctx) {
  const uint16_t n = uint16_t(c.paths.size());
  while (!c.queue.empty()) {
    const Conn::Ref r = c.queue.front();
    Io* io = find_io(c, r.io);
    if (io != nullptr && io->read) {
      uint16_t path = n;
      for (uint16_t k = 0; k < n; k++) {
        const uint16_t p = uint16_t((c.rr + k) % n);
        if (c.paths[p]->st.can_send(1)) {
          path = p;
          break;
        }
      }
      if (path == n) return;
      c.rr = uint16_t((path + 1) % n);
      c.queue.pop_front();
      io->req_queued = false;
      send_read_req(c, path, r.io, ctx);
      continue;
    }
    if (io == nullptr || (io->blocks[r.index] & kAcked) != 0) {
      if (io != nullptr) io->blocks[r.index] &= uint8_t(~kQueued);
      c.queue.pop_front();
      continue;
    }
    const uint64_t at = uint64_t(r.index) * c.cfg.block_bytes;
    const uint32_t len = uint32_t(std::min<uint64_t>(c.cfg.block_bytes, io->len - at));
    uint16_t path = n;
    for (uint16_t k = 0; k < n; k++) {
      const uint16_t p = uint16_t((c.rr + k) % n);
      if (c.paths[p]->st.can_send(len)) {
        path = p;
        break;
      }
    }
    if (path == n) return;  // every window full, or every path down
    c.rr = uint16_t((path + 1) % n);
    c.queue.pop_front();
    io->blocks[r.index] &= uint8_t(~kQueued);
    send_block(c, path, r.io, r.index, ctx);
  }
}

void SolarTransport::requeue(Conn& c, uint32_t io_id, uint16_t index) {
  auto it = c.ios.find(io_id);
  if (it == c.ios.end()) return;
  if (it->second.read) {  // a READ_REQ: ask again for what is still missing
    if (it->second.req_queued) return;
    it->second.req_queued = true;
    c.queue.push_front({io_id, 0});
    return;
  }
  uint8_t& b = it->second.blocks[index];
  if ((b & (kAcked | kQueued)) != 0) return;
  b |= kQueued;
  c.queue.push_front({io_id, index});
}

void SolarTransport::send_ack(Conn& c, uint16_t path, uint32_t echo, uint8_t flags, Context& ctx) {
  Path& p = *c.paths[path];
  Header sh;
  sh.type = Type::kAck;
  sh.flags = flags;
  sh.path = path;
  sh.conn = c.cfg.remote_conn;
  sh.seq = p.rx_largest;
  sh.sack = p.rx_sack;
  sh.echo = echo;
  sh.ce_count = p.rx_ce;
  emit(c, sh, 0, 0, 0, false, ctx);
  p.rx_unacked = 0;
  c.stats.acks_sent++;
}

void SolarTransport::send_nack(Conn& c, const Header& refused, NackReason why, Context& ctx) {
  Header sh = refused;
  sh.type = Type::kNack;
  sh.flags = 0;
  sh.conn = c.cfg.remote_conn;
  sh.reason = uint32_t(why);
  emit(c, sh, 0, 0, 0, false, ctx);
}

// A probe: an ACK with ACK_REQ over the path that is down, its echo a number of its own (it
// carries the path's receive state as any ACK does, and is counted with them).
void SolarTransport::send_probe(Conn& c, uint16_t path, Context& ctx) {
  Path& p = *c.paths[path];
  send_ack(c, path, ++p.probe_echo, kFlagAckReq, ctx);
  p.probe_sent_at = ctx.now_ns();
  p.st.on_probe_sent(ctx.now_ns());
  p.info.probes++;
}

// ---- receiving ----------------------------------------------------------------------------------

void SolarTransport::rx_burst(std::span<const RxHeader> hdrs, Context& ctx) {
  touched_.clear();
  FlowId flow = kNoFlow;  // a burst's headers mostly share a connection: found once for a run
  Conn* conn = nullptr;
  for (const RxHeader& h : hdrs) {
    if (h.flow != flow || conn == nullptr) {
      auto it = conns_.find(h.flow);
      flow = h.flow;
      conn = it == conns_.end() ? nullptr : it->second.get();
      if (conn == nullptr) continue;
    }
    Conn& c = *conn;
    Header sh;
    if (h.l4_len < kL4Len ||
        decode_udp(h.l4, size_t(h.l4_len) + h.payload_len, sh) != Error::kNone ||
        sh.conn != c.cfg.local_conn || sh.path >= c.paths.size()) {
      c.stats.bad_headers++;
      continue;
    }
    // A bad checksum on a header-only packet is a corrupted header; on a block, the NIC's
    // CRC32C verdict (or the UDP checksum's): the block is NACKed.
    if (h.l4_csum == Csum::kBad && !carries_block(sh.type)) {
      c.stats.bad_headers++;
      continue;
    }
    // The initiator chose each path's route; the target answers a path on the one it came on.
    if (!c.cfg.initiator) c.paths[sh.path]->route = h.route;
    switch (sh.type) {
      case Type::kAck:
        if ((sh.flags & kFlagAckReq) != 0) {  // a probe: answer at once, on the same path
          send_ack(c, sh.path, sh.echo, kFlagProbeReply, ctx);
          c.stats.probe_replies++;
        } else {
          c.stats.acks_received++;
          on_ack(c, sh, ctx);
        }
        break;
      case Type::kNack:
        c.stats.nacks_received++;
        on_nack(c, sh, ctx);
        break;
      case Type::kWriteBlk:
        if (c.cfg.initiator) {
          c.stats.bad_headers++;
        } else {
          rx_target(c, h, sh, ctx);
        }
        break;
      case Type::kReadReq:
        if (c.cfg.initiator) {
          c.stats.bad_headers++;
        } else if (c.ios.count(sh.io_id) == 0 && (c.ios.size() >= kMaxServedReads ||
                                                  c.served_blocks + sh.count > kMaxServedBlocks)) {
          c.stats.reads_deferred++;  // not acknowledged: it comes again
        } else if (record_arrival(c, h, sh, ctx)) {
          rx_read_req(c, sh, ctx);
        }
        break;
      case Type::kReadBlk:
        if (!c.cfg.initiator) {
          c.stats.bad_headers++;
        } else {
          rx_read_blk(c, h, sh, ctx);
        }
        break;
    }
  }
  // Every path that received data and has not acknowledged all of it does so now.
  for (Conn* c : touched_) {
    c->touched = false;
    for (uint16_t p : c->dirty) {
      Path& path = *c->paths[p];
      path.dirty = false;
      if (path.rx_unacked != 0) send_ack(*c, p, path.rx_last, 0, ctx);
    }
    c->dirty.clear();
  }
  for (Conn* c : order_)
    pump(*c, ctx);
}

// A transmission that arrived (a block taken, a READ_REQ): into the path's largest + bitmap and
// CE count, and an ACK at once or by the end of the burst. Always true (for chaining).
bool SolarTransport::record_arrival(Conn& c, const RxHeader& h, const Header& sh, Context& ctx) {
  Path& p = *c.paths[sh.path];
  bool below = false;
  if (!p.rx_any) {
    p.rx_any = true;
    p.rx_largest = sh.seq;
    p.rx_sack = 0;
  } else {
    const int32_t d = seq_diff(sh.seq, p.rx_largest);
    if (d > 0) {
      p.rx_sack = uint32_t(d) >= kSackBits ? 0 : p.rx_sack << d;
      if (uint32_t(d) <= kSackBits) p.rx_sack |= uint64_t(1) << (d - 1);
      p.rx_largest = sh.seq;
    } else if (d < 0) {
      below = true;
      if (uint32_t(-d) <= kSackBits) p.rx_sack |= uint64_t(1) << (-d - 1);
    }
  }
  const bool ce = h.ecn == kCe;
  if (ce) p.rx_ce++;
  p.rx_last = sh.seq;
  p.rx_unacked++;
  if ((sh.flags & kFlagAckReq) != 0 || below || ce || p.rx_unacked >= kAckEvery) {
    send_ack(c, sh.path, sh.seq, 0, ctx);
  } else {
    if (!p.dirty) {
      p.dirty = true;
      c.dirty.push_back(sh.path);
    }
    if (!c.touched) {
      c.touched = true;
      touched_.push_back(&c);
    }
  }
  return true;
}

void SolarTransport::rx_target(Conn& c, const RxHeader& h, const Header& sh, Context& ctx) {
  if (h.l4_csum == Csum::kBad) {
    c.stats.crc_drops++;
    send_nack(c, sh, NackReason::kBadCrc, ctx);
    return;
  }
  const uint32_t len = h.payload_len;
  if (sh.offset > c.cfg.volume_len || len > c.cfg.volume_len - sh.offset) {
    c.stats.refused++;
    send_nack(c, sh, NackReason::kOutOfRange, ctx);
    return;
  }
  if (h.placed == Placed::kDeferred && !ctx.copy_in(h.payload, len, c.cfg.volume_mr, sh.offset)) {
    c.stats.refused++;
    send_nack(c, sh, NackReason::kOutOfRange, ctx);
    return;
  }
  c.stats.blocks_received++;
  record_arrival(c, h, sh, ctx);
}

// The target serves a READ: the blocks asked for, as READ_BLKs from its volume, sent and
// resent like a write's blocks. A resent READ_REQ (RETX) for a READ being served queues again
// what the initiator has not acknowledged from its index on.
void SolarTransport::rx_read_req(Conn& c, const Header& sh, Context& ctx) {
  const uint64_t bs = c.cfg.block_bytes;
  const uint64_t head = uint64_t(sh.index) * bs;  // bytes of the I/O before the first asked for
  const uint64_t blocks = (uint64_t(sh.length) + bs - 1) / bs;
  if (sh.offset < head || sh.offset > c.cfg.volume_len ||
      sh.length > c.cfg.volume_len - sh.offset || sh.index + blocks != sh.count) {
    c.stats.refused++;
    send_nack(c, sh, NackReason::kOutOfRange, ctx);
    return;
  }
  auto it = c.ios.find(sh.io_id);
  if (it == c.ios.end()) {
    Io& io = c.ios[sh.io_id];
    io.mr = c.cfg.volume_mr;
    io.offset = sh.offset - head;
    io.remote = 0;
    io.len = uint32_t(head + sh.length);
    io.count = sh.count;
    io.left = uint16_t(blocks);
    io.blocks.assign(sh.count, kQueued);
    c.served_blocks += sh.count;
    for (uint16_t i = 0; i < sh.count; i++) {
      if (i < sh.index) {
        io.blocks[i] = kAcked;
      } else {
        c.queue.push_back({sh.io_id, i});
      }
    }
    return;
  }
  if ((sh.flags & kFlagRetx) == 0) return;  // a duplicate
  for (uint16_t i = sh.index; i < it->second.count; i++) {
    if ((it->second.blocks[i] & kSent) != 0) requeue(c, sh.io_id, i);
  }
}

// A READ's block at the initiator: placed by the NIC into the buffer posted under the I/O id
// (or copied in there), counted once; the READ completes when every block has arrived.
void SolarTransport::rx_read_blk(Conn& c, const RxHeader& h, const Header& sh, Context& ctx) {
  if (h.l4_csum == Csum::kBad) {
    c.stats.crc_drops++;
    send_nack(c, sh, NackReason::kBadCrc, ctx);
    return;
  }
  auto it = c.ios.find(sh.io_id);
  if (it == c.ios.end() || !it->second.read) {
    record_arrival(c, h, sh, ctx);  // a late copy of a READ done: acknowledged, not written
    return;
  }
  Io& io = it->second;
  const uint32_t len = h.payload_len;
  if (sh.index >= io.count || sh.offset != uint64_t(sh.index) * c.cfg.block_bytes ||
      sh.offset > io.len || len > io.len - sh.offset) {
    c.stats.refused++;
    send_nack(c, sh, NackReason::kOutOfRange, ctx);
    return;
  }
  if (h.placed == Placed::kDeferred && !ctx.copy_in(h.payload, len, io.mr, io.offset + sh.offset)) {
    c.stats.refused++;
    send_nack(c, sh, NackReason::kOutOfRange, ctx);
    return;
  }
  c.stats.blocks_received++;
  record_arrival(c, h, sh, ctx);
  uint8_t& b = io.blocks[sh.index];
  if ((b & kAcked) != 0) return;
  b |= kAcked;
  if (--io.left == 0) finish(c, sh.io_id, 0, ctx);
}

// An I/O of the initiator ends: its event, its buffer back from the NIC.
void SolarTransport::finish(Conn& c, uint32_t io_id, int status, Context& ctx) {
  Io* found = find_io(c, io_id);
  if (found == nullptr) return;
  Io& io = *found;
  if (io.on_nic) ctx.ms_retire_msg(c.flow, io_id);
  ctx.event({.flow = c.flow,
             .kind = io.read ? EventKind::kReadDone : EventKind::kWriteDone,
             .status = status,
             .len = status == 0 ? io.len : 0,
             .wr_id = io.wr_id});
  if (status == 0) c.stats.ios_done++;
  erase_io(c, io_id);
}

void SolarTransport::block_acked(Conn& c, uint32_t io_id, uint16_t index, Context& ctx) {
  Io* found = find_io(c, io_id);
  if (found == nullptr) return;
  Io& io = *found;
  uint8_t& b = io.blocks[index];
  if ((b & kAcked) != 0) return;
  b |= kAcked;
  c.stats.blocks_acked++;
  if (--io.left != 0) return;
  if (c.cfg.initiator) return finish(c, io_id, 0, ctx);
  c.stats.ios_done++;  // the target: a READ served
  c.served_blocks -= io.count;
  erase_io(c, io_id);
}

void SolarTransport::on_ack(Conn& c, const Header& sh, Context& ctx) {
  Path& p = *c.paths[sh.path];
  const uint64_t now = ctx.now_ns();
  if ((sh.flags & kFlagProbeReply) != 0) {
    if (!p.st.up() && sh.echo == p.probe_echo) {
      p.st.on_probe_reply(now, now - p.probe_sent_at);
      p.info.ups++;
      p.rto_at = 0;
    }
    return;
  }
  PathAck a;
  a.now_ns = now;
  if (!p.have_largest || seq_diff(sh.seq, p.largest_acked) > 0) {
    p.largest_acked = sh.seq;
    p.have_largest = true;
  }
  const int32_t ce = int32_t(sh.ce_count - p.last_ce);
  if (ce > 0) {
    a.ce_blocks = uint32_t(ce);
    p.last_ce = sh.ce_count;
  }
  // Only transmissions up to the ACK's largest can be acknowledged or found lost by it: the front
  // of `out`, oldest first. Those neither (within 3 of the largest acknowledged, not in the
  // bitmap) stay in front, in order.
  uint64_t lost = 0;
  size_t seen = 0;
  size_t kept = 0;  // moved to the front as they are passed (at most 3)
  while (seen < p.out.size() && seq_diff(p.out[seen].seq, sh.seq) <= 0) {
    const Out o = p.out[seen++];
    if (o.seq == sh.echo) {
      const uint64_t held = uint64_t(sh.ack_delay_us) * 1000;
      if (now - o.sent_at > held) a.rtt_ns = now - o.sent_at - held;
    }
    if (sack_has(sh.seq, sh.sack, o.seq)) {
      a.acked_bytes += o.bytes;
      p.info.acked++;
      if (!o.req) {
        a.acked_blocks++;
        block_acked(c, o.io, o.index, ctx);
      }
    } else if (seq_diff(p.largest_acked, o.seq) >= 3) {
      lost += o.bytes;
      p.info.lost++;
      requeue(c, o.io, o.index);
    } else {
      p.out[kept++] = o;  // the sequences within 3 of the largest acknowledged
    }
  }
  // The kept ones, in order, just before the rest; the ones resolved leave the front.
  for (size_t k = kept; k-- > 0;)
    p.out[seen - kept + k] = p.out[k];
  p.out.drop_front(seen - kept);
  p.st.on_ack(a);
  if (lost != 0) p.st.on_loss(lost, now);
  if (a.acked_bytes != 0) p.rto_at = p.out.empty() ? 0 : now + p.st.rto_ns();
}

// A refused block: it arrived (not a loss), but goes again (bad CRC), or its I/O fails.
void SolarTransport::on_nack(Conn& c, const Header& sh, Context& ctx) {
  Path& p = *c.paths[sh.path];
  // It must name a transmission in flight as it was sent: a NACK may answer a packet whose
  // header was corrupted on the way (its UDP checksum failed), and then names something else.
  size_t at = 0;
  while (at < p.out.size() &&
         (p.out[at].seq != sh.seq || p.out[at].io != sh.io_id || p.out[at].index != sh.index)) {
    at++;
  }
  if (at == p.out.size()) return;  // already resolved (found lost, or a timeout), or not ours
  const Out refused = p.out[at];
  p.out.erase(at);
  p.st.on_refused(refused.bytes);
  if (sh.reason == uint32_t(NackReason::kBadCrc)) {
    requeue(c, refused.io, refused.index);
    return;
  }
  const int status = sh.reason == uint32_t(NackReason::kOutOfRange) ? -EINVAL : -EIO;
  if (c.cfg.initiator) return finish(c, refused.io, status, ctx);
  // The target: the initiator does not want that READ (any more).
  if (const Io* io = find_io(c, refused.io); io != nullptr) {
    c.served_blocks -= io->count;
    erase_io(c, refused.io);
  }
}

// ---- the app ------------------------------------------------------------------------------------

void SolarTransport::app_burst(std::span<const AppRequest> reqs, Context& ctx) {
  for (const AppRequest& r : reqs) {
    auto it = conns_.find(r.flow);
    const EventKind done = r.kind == ReqKind::kRead ? EventKind::kReadDone : EventKind::kWriteDone;
    auto fail = [&](int err) {
      ctx.event({.flow = r.flow, .kind = done, .status = err, .len = 0, .wr_id = r.wr_id});
    };
    if (it == conns_.end()) {
      // A queue pair in ERR flushes what it is given, as one in RESET, INIT or RTR refuses it.
      auto q = qps_.find(r.flow);
      fail(q != qps_.end() && q->second.attr.state == QpState::kErr ? -ECANCELED : -EINVAL);
      continue;
    }
    Conn& c = *it->second;
    if ((r.kind != ReqKind::kWrite && r.kind != ReqKind::kRead) || !c.cfg.initiator) {
      fail(-EOPNOTSUPP);
      continue;
    }
    const uint64_t count = (uint64_t(r.len) + c.cfg.block_bytes - 1) / c.cfg.block_bytes;
    if (r.len == 0 || count > 0xFFFF || r.remote_addr > UINT64_MAX - r.len) {
      fail(-EINVAL);
      continue;
    }
    const uint32_t id = c.next_io++;
    Io& io = c.ios[id];
    io.wr_id = r.wr_id;
    io.deadline = c.cfg.io_timeout_ns != 0 ? ctx.now_ns() + c.cfg.io_timeout_ns : 0;
    io.mr = r.mr;
    io.offset = r.offset;
    io.remote = r.remote_addr;
    io.len = r.len;
    io.count = io.left = uint16_t(count);
    if (r.kind == ReqKind::kRead) {
      // Its buffer goes to the NIC under the I/O id, so READ_BLKs land by their offsets in it;
      // when the NIC refuses, they come on the copy path.
      io.read = true;
      io.on_nic = ctx.ms_post(c.flow, r.mr, r.offset, r.len, id) == 0;
      io.blocks.assign(count, 0);
      io.req_queued = true;
      c.queue.push_back({id, 0});
    } else {
      io.blocks.assign(count, kQueued);
      for (uint16_t i = 0; i < count; i++)
        c.queue.push_back({id, i});
    }
    pump(c, ctx);
  }
}

// ---- timers -------------------------------------------------------------------------------------

void SolarTransport::tick(Context& ctx) {
  const uint64_t now = ctx.now_ns();
  for (Conn* c : order_) {
    for (uint16_t i = 0, n = uint16_t(c->paths.size()); i < n; i++) {  // n <= kMaxPaths
      Path& p = *c->paths[i];
      if (p.rto_at != 0 && now >= p.rto_at) {
        p.rto_at = 0;
        p.info.timeouts++;
        if (p.st.on_timeout(now)) p.info.downs++;
        // Everything in flight on the path goes again, on whichever paths are up.
        for (size_t k = 0; k < p.out.size(); k++)
          requeue(*c, p.out[k].io, p.out[k].index);
        p.out.clear();
      }
      if (p.st.probe_due(now)) send_probe(*c, i, ctx);
    }
    if (c->cfg.initiator && c->cfg.io_timeout_ns != 0 && now >= c->next_deadline_scan) {
      expire(*c, ctx);
    }
    pump(*c, ctx);
  }
}

// I/Os past their deadline fail -ETIMEDOUT. A scan of the I/Os in flight (at most the app's
// queue depth) every 1/16 of the timeout, so one fires at most that much late.
void SolarTransport::expire(Conn& c, Context& ctx) {
  const uint64_t now = ctx.now_ns();
  c.next_deadline_scan = now + std::max<uint64_t>(c.cfg.io_timeout_ns / 16, 1'000'000);
  std::vector<uint32_t>& late = late_;
  late.clear();
  for (const auto& [id, io] : c.ios) {
    if (io.deadline != 0 && now >= io.deadline) late.push_back(id);
  }
  for (uint32_t id : late) {
    c.stats.io_timeouts++;
    finish(c, id, -ETIMEDOUT, ctx);
  }
}

// ---- management ---------------------------------------------------------------------------------

bool SolarTransport::path_info(FlowId flow, uint16_t path, PathInfo* out) const {
  auto it = conns_.find(flow);
  if (it == conns_.end() || path >= it->second->paths.size()) return false;
  const Path& p = *it->second->paths[path];
  *out = p.info;
  out->route = p.route;
  out->up = p.st.up();
  out->cwnd = p.st.cwnd();
  out->srtt_ns = p.st.srtt_ns();
  out->rto_ns = p.st.rto_ns();
  out->inflight = p.st.inflight();
  return true;
}

const ConnStats* SolarTransport::conn_stats(FlowId flow) const {
  auto it = conns_.find(flow);
  return it == conns_.end() ? nullptr : &it->second->stats;
}

bool SolarTransport::flow_info(FlowId flow, InfoSink& out) const {
  auto it = conns_.find(flow);
  if (it == conns_.end()) return false;
  const Conn& c = *it->second;
  out.text("role", c.cfg.initiator ? "initiator" : "target");
  out.number("conn", c.cfg.local_conn);
  out.number("peer_conn", c.cfg.remote_conn);
  out.number("block_bytes", c.cfg.block_bytes);
  out.number("paths", c.paths.size());
  out.number("routes", c.cfg.routes);
  out.number("ios_in_flight", c.ios.size());
  out.number("ios_done", c.stats.ios_done);
  out.number("blocks_acked", c.stats.blocks_acked);
  out.number("blocks_received", c.stats.blocks_received);
  out.number("crc_drops", c.stats.crc_drops);
  out.number("reads_deferred", c.stats.reads_deferred);
  out.number("io_timeouts", c.stats.io_timeouts);
  out.number("nacks_received", c.stats.nacks_received);
  std::array<char, 32> key{};
  for (uint16_t i = 0, n = uint16_t(c.paths.size()); i < n; i++) {  // n <= kMaxPaths
    PathInfo pi;
    path_info(flow, i, &pi);
    auto put = [&](const char* what, uint64_t v) {
      std::snprintf(key.data(), key.size(), "path%u_%s", unsigned(i), what);
      out.number(key.data(), v);
    };
    std::snprintf(key.data(), key.size(), "path%u_state", unsigned(i));
    out.text(key.data(), pi.up ? "up" : "down");
    put("route", pi.route);
    put("cwnd", pi.cwnd);
    put("srtt_ns", pi.srtt_ns);
    put("rto_ns", pi.rto_ns);
    put("sent", pi.blocks_sent);
    put("resent", pi.blocks_resent);
    put("timeouts", pi.timeouts);
    put("downs", pi.downs);
    put("ups", pi.ups);
  }
  return true;
}

void SolarTransport::stats(InfoSink& out) const {
  ConnStats s = closed_;
  for (const auto& [flow, c] : conns_) {
    s.ios_done += c->stats.ios_done;
    s.crc_drops += c->stats.crc_drops;
    s.bad_headers += c->stats.bad_headers;
    s.reads_deferred += c->stats.reads_deferred;
    s.io_timeouts += c->stats.io_timeouts;
  }
  out.number("connections", conns_.size());
  out.number("ios_done", s.ios_done);
  out.number("crc_drops", s.crc_drops);
  out.number("bad_headers", s.bad_headers);
  out.number("reads_deferred", s.reads_deferred);
  out.number("io_timeouts", s.io_timeouts);
}

std::unique_ptr<Transport> make_transport() {
  return std::make_unique<SolarTransport>();
}

}  // namespace cleave::transport::solar
