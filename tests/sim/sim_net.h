// sim_net.h - a deterministic simulated network for transport tests: two hosts, each running a
// Transport over the NIC reference model, joined by a link with seeded fault injection.
//
// What it is: every frame a transport sends goes through its host's NicModel (header + payload
// reference merged, TSO, checksums), onto a link that applies faults, queueing, serialization and
// delay, and into the peer's NicModel (header/payload split, zero-copy placement into the peer's
// app memory), whose RX entries become the RxHeaders the peer transport sees. No DPDK, no
// threads, no wall clock: time is virtual and advances only in run_until().
//
// Determinism: every random choice is drawn from one generator per direction, seeded from the
// SimNet seed. The same seed, configuration and test code replay exactly (same faults, same
// delivery order, same counters). Put describe() in every failure message: it names the seed.
// seed_from_env() lets a failing seed be replayed without editing the test
// (CLEAVE_SIM_SEED=<seed>).
//
// Cost: frames live in a pool of fixed-size buffers that grows to the largest number in flight
// and is then reused; the link queues, reorder buffers and RX bursts are preallocated vectors.
// In steady state nothing allocates per frame, except what a test's own callbacks do.
//
// Threads: a SimNet and everything in it belong to one thread.
//
// Usage:
//   sim::HostConfig a, b;                       // addresses, NIC sizes, zero-copy or copy mode
//   a.transport = std::make_unique<MyTcp>();    // the transport each host drives (owned)
//   b.transport = std::make_unique<MyTcp>();
//   sim::Faults ab;                             // faults A -> B
//   ab.loss = 0.01;
//   sim::SimNet net(seed, sim::LinkConfig{}, ab, sim::Faults{}, std::move(a), std::move(b));
//   net.b().listen(1, 80);
//   FlowId f = net.a().connect(4000, net.b().endpoint(80));
//   uint16_t mr = net.a().add_mr(1 << 20);
//   net.a().submit({.flow = f, .kind = ReqKind::kSend, .mr = mr, .len = 1 << 20});
//   ASSERT_TRUE(net.run_until([&] { return done; }, 5'000'000'000)) << net.describe();
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nic_model.h"
#include "rdma.h"
#include "transport.h"

namespace cleave::sim {

using transport::AppRequest;
using transport::Endpoint;
using transport::Event;
using transport::EventKind;
using transport::FlowId;
using transport::FlowTuple;
using transport::ListenerId;
using transport::Params;

// ---- faults and counters (one direction) --------------------------------------------------------

// What the link does to frames in one direction. Probabilities are per frame, 0 = never. Faults
// apply where a frame enters the link, in this order: MTU check, `down`, drop_if, loss (and
// bursts), CE marking, corruption (header, payload, checksum), truncation, duplication, then the
// ordering stage (reorder holds, window reversal), then the queue (tail drop), serialization and
// delay (the link's, plus path_delay_if's). `down` is also checked on arrival, so frames in flight
// when the path goes down are lost. Every field may be changed between (or during) runs: the next
// frame sees the new value.
struct Faults {
  double loss = 0;
  // Probability that a loss starts a burst: the frames after it are lost too, a burst being
  // uniform in [2, loss_burst_len] frames, the first loss included, and lasting at most
  // loss_burst_max_ns (a congestion episode, not a count that would swallow a sender's backed-off
  // retransmissions seconds later).
  double loss_burst = 0;
  uint32_t loss_burst_len = 8;
  uint64_t loss_burst_max_ns = 1'000'000;
  // Hold a frame and send it after k later frames, k uniform in [1, reorder_depth]; or after
  // reorder_max_hold_ns when fewer follow (a held last frame is late, not lost).
  double reorder = 0;
  uint32_t reorder_depth = 3;
  uint64_t reorder_max_hold_ns = 100'000;
  // Collect the next reverse_window frames (this one first) and send them in reverse order; a
  // window not full after reorder_max_hold_ns goes out reversed as it is.
  double reverse = 0;
  uint32_t reverse_window = 8;
  // 1-3 extra copies (uniform), right behind the original.
  double duplicate = 0;
  // One bit flipped: anywhere in the IP and L4 headers; anywhere in the payload (frames without
  // payload are left alone); in the L4 checksum field.
  double corrupt_header = 0;
  double corrupt_payload = 0;
  double corrupt_checksum = 0;
  // Cut the frame to a length uniform in [1, len - 1].
  double truncate = 0;
  // Set ECN CE on frames that carry ECT(0) or ECT(1) (and fix the IP checksum, as a router does).
  double ce = 0;
  // Drop everything while true: a path going down and up.
  bool down = false;
  // Targeted drops: true drops the frame (Ethernet/IPv4/L4 as sent, before any other fault).
  std::function<bool(std::span<const uint8_t> frame)> drop_if;
  // Targeted delays: the frame is held back this many ns (0: not), frames after it pass it;
  // asked after drop_if and the random faults.
  std::function<uint64_t(std::span<const uint8_t> frame)> delay_if;
  // Paths through a fabric: this many ns of propagation delay added to the frame's after its
  // serialization (as an ECMP path longer or more loaded than another does), so frames on a
  // faster path overtake those sent before them on a slower one.
  std::function<uint64_t(std::span<const uint8_t> frame)> path_delay_if;
};

// What the link did, per direction. Every frame sent is delivered or counted in exactly one drop
// counter (duplicates add to `sent`'s total: sent + duplicated = delivered + drops + in flight).
struct LinkStats {
  uint64_t sent = 0;       // frames the NIC put on the link
  uint64_t delivered = 0;  // frames handed to the receiving host
  uint64_t delivered_bytes = 0;
  uint64_t lost = 0;            // random loss, bursts included
  uint64_t burst_lost = 0;      // of those, lost in a burst after its first frame
  uint64_t dropped_down = 0;    // while `down`, on entry or on arrival
  uint64_t dropped_filter = 0;  // drop_if
  uint64_t dropped_mtu = 0;     // IP length > mtu
  uint64_t dropped_queue = 0;   // queue_bytes exceeded (tail drop)
  uint64_t duplicated = 0;      // extra copies made
  uint64_t reordered = 0;       // frames held back
  uint64_t reversals = 0;       // windows reversed
  uint64_t corrupted_header = 0;
  uint64_t corrupted_payload = 0;
  uint64_t corrupted_checksum = 0;
  uint64_t truncated = 0;
  uint64_t ce_marked = 0;
  uint64_t max_queue_bytes = 0;  // the largest backlog seen, in wire bytes
  uint64_t corrupted() const { return corrupted_header + corrupted_payload + corrupted_checksum; }
  uint64_t dropped() const {
    return lost + dropped_down + dropped_filter + dropped_mtu + dropped_queue;
  }
  bool operator==(const LinkStats&) const = default;
};

// The link, the same both ways. FIFO per direction: a frame waits for the ones before it, is
// serialized at `rate_bps` ((length + overhead_bytes) * 8 / rate), then arrives `delay_ns` later.
struct LinkConfig {
  uint64_t delay_ns = 20'000;          // one way
  uint64_t rate_bps = 10'000'000'000;  // 0: infinite (no serialization delay)
  uint32_t mtu = 1500;                 // largest IP packet; larger frames are dropped
  uint64_t queue_bytes = 0;            // backlog limit in wire bytes (tail drop); 0: none
  uint32_t overhead_bytes = 24;        // preamble, FCS and gap per frame on the wire
};

// ---- hosts --------------------------------------------------------------------------------------

struct HostConfig {
  uint32_t ip = 0;               // host order; 0: 10.0.0.1 for A, 10.0.0.2 for B
  std::array<uint8_t, 6> mac{};  // all zero: 02:00:00:00:00:01 / :02
  // The NIC's tables. Smaller than the NIC's defaults so a SimNet builds in microseconds; the
  // behaviour is the same.
  nic::NicConfig nic = small_nic();
  bool zero_copy = true;  // TCP flows on the NIC in kZeroCopy, else kCopy
  // Message flows (flow_open/flow_synced with `messages`) go on the NIC with message semantics,
  // as on net_cleave; false: as on the generic backend, a byte-stream NIC flow that refuses
  // message MSs (-EOPNOTSUPP), so every segment takes the copy path.
  bool nic_messages = true;
  bool drop_bad_csum = false;  // drop frames with a bad L4 checksum instead of delivering
  std::unique_ptr<transport::Transport> transport;  // required; owned by the host
  // Every event the transport emits, in order. It may call Host::submit() (queued for the next
  // app burst), nothing else on the host: it runs inside the transport's calls.
  std::function<void(const Event&)> on_event;

  static nic::NicConfig small_nic() {
    nic::NicConfig c;
    c.max_flows = 1024;
    c.max_mrs = 64;
    c.ms_store_entries = 1u << 14;
    return c;
  }
};

// Per host, what happened to frames, descriptors and commands.
struct HostStats {
  uint64_t rx_frames = 0;        // frames from the link
  uint64_t rx_to_transport = 0;  // headers given to rx_burst
  uint64_t rx_bursts = 0;
  uint64_t rx_placed = 0;  // decisions of those delivered (Placed)
  uint64_t rx_trimmed = 0;
  uint64_t rx_dup_dropped = 0;
  uint64_t rx_deferred = 0;
  uint64_t rx_no_payload = 0;
  uint64_t rx_bad_ip = 0;         // dropped: not IPv4, bad IP header or checksum, fragment, not L4
  uint64_t rx_truncated = 0;      // dropped: the frame ends before its headers or IP length
  uint64_t rx_bad_l4_header = 0;  // dropped: TCP data offset or UDP length inconsistent
  uint64_t rx_bad_csum = 0;       // L4 checksum bad (delivered with kBad unless drop_bad_csum)
  uint64_t rx_bad_udp_csum = 0;   // dropped: RoCEv2 with a UDP checksum that is wrong
  uint64_t rx_sw_csum = 0;        // L4 checksums the host checked because the NIC did not
  uint64_t rx_no_flow = 0;        // dropped: no flow and no listener
  uint64_t tx_descs = 0;
  uint64_t tx_frames = 0;
  uint64_t tx_bytes = 0;
  uint64_t tx_no_flow = 0;   // descriptors for an unknown flow (dropped)
  uint64_t tx_bad_desc = 0;  // l4_len out of range, or len over kMaxTxLen (dropped)
  uint64_t tx_errors = 0;    // the NIC refused the request (bad header, DMA fault, too long)
  uint64_t cmd_errors = 0;   // NIC commands that failed
  uint64_t app_requests = 0;
  std::array<uint64_t, 7> events{};  // by EventKind
};

class SimNet;
class Link;
class FramePool;
namespace detail {
// A frame on the link: a FramePool slot and the frame's length.
struct Frame {
  uint32_t slot = 0;
  uint32_t len = 0;
};
}  // namespace detail

// Ring storage for Context, a base so it is built before Context takes spans of it.
struct HostRings {
  std::array<transport::TxDesc, 64> tx{};
  std::array<Event, 64> ev{};
};

// One host: a NicModel, app memory, a transport and the tables a dataplane keeps around it.
// Flow ids are also the NIC's flow ids. A host is made by SimNet and lives as long as it.
class Host final : private HostRings, public transport::Context, public transport::RdmaContext {
 public:
  ~Host();
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;

  // App memory: a new zeroed MR of `bytes`, registered in the NIC. Returns its id.
  uint16_t add_mr(size_t bytes);
  std::span<uint8_t> mr(uint16_t id);

  uint32_t ip() const { return ip_; }
  Endpoint endpoint(uint16_t port) const { return {transport::IpAddr::v4(ip_), port}; }
  const std::string& name() const { return name_; }
  transport::Transport& transport() { return *transport_; }
  nic::NicModel& nic() { return nic_; }
  const HostStats& stats() const { return stats_; }
  uint64_t events(EventKind k) const { return stats_.events[size_t(k)]; }
  void set_event_handler(std::function<void(const Event&)> f) { on_event_ = std::move(f); }

  // Passive open on this host's address: transport.listen; frames to `port` that match no flow
  // are then delivered with `listener` set. Returns the transport's result.
  int listen(ListenerId listener, uint16_t port, Params params = {});
  void unlisten(ListenerId listener);
  // Active open: a flow id and the tuple (this host, local_port) <-> remote, then
  // transport.connect (its first segment goes out at once). kNoFlow when the flow table is full
  // or the transport refused (its error in *err).
  FlowId connect(uint16_t local_port, const Endpoint& remote, uint8_t proto = 6, Params params = {},
                 int* err = nullptr);
  // RoCEv2: a flow for a local QP `qpn` talking to `remote_ip`, steered on the NIC (RoCE parser,
  // zero-copy or copy mode as configured, SENDs by message number) from `initial_psn` on with
  // `pmtu`, placing as the QP recovers (go-back-N: in order only). The owner's half of an RTR
  // transition; the transport's is modify_qp. Its tuple is (this host:4791) <-> (remote_ip:4791).
  // kNoFlow when the NIC refuses it.
  FlowId roce_flow(uint32_t remote_ip, uint32_t qpn, uint32_t initial_psn, uint32_t pmtu,
                   bool selective_repeat = false);
  // Solar: a flow for the Solar packets from `remote_ip` to UDP port `port` of this host (the
  // NIC's Solar port, 7000) for this host's connection number `conn` (the one the peer's headers
  // carry), from any source port (every path's), steered on the NIC with the Solar parser, which
  // finds it by that number (CRC32C checked, zero-copy or copy mode as configured); without
  // `messages` its blocks are placed by their offsets into the MSs posted from stream offset 0 (a
  // target's volume), with them by I/O id. A descriptor with kTxParserTrailer on it asks the NIC
  // for the block's CRC32C. Its tuple is (this host:port) <-> (remote_ip:0): the frames the NIC
  // leaves without a flow (a bad UDP checksum, say) find it from any source port too, so the
  // host's own table holds one Solar flow per peer. kNoFlow when the NIC refuses it.
  FlowId solar_flow(uint32_t remote_ip, uint16_t port, uint32_t conn, bool messages = false);
  // What the peer may do to an MR through its rkey (nic::MrAccess; add_mr allows both).
  void set_mr_access(uint16_t mr, uint8_t access);

  // Queued; given to transport.app_burst in bursts of up to 32 by the next run step.
  void submit(const AppRequest& req) { pending_.push_back(req); }

  // The tuple of an open flow, or null.
  const FlowTuple* flow_tuple(FlowId flow) const;
  size_t flows_open() const { return by_tuple_.size(); }

  // ---- transport::Context ----
  int ms_post(FlowId flow, uint16_t mr, uint64_t offset, uint32_t len, uint32_t msg) override;
  int cursor_update(FlowId flow, uint32_t cursor) override;
  int ms_retire(FlowId flow, uint32_t count) override;
  int ms_retire_msg(FlowId flow, uint32_t msg) override;
  bool copy_in(const uint8_t* src, uint32_t len, uint16_t mr, uint64_t offset) override;
  FlowId flow_open(ListenerId listener, const FlowTuple& tuple, uint32_t initial_seq,
                   bool messages) override;
  void flow_synced(FlowId flow, uint32_t initial_seq, bool messages) override;
  void flow_closed(FlowId flow) override;
  transport::RdmaContext* rdma() override { return this; }
  // ---- transport::RdmaContext ----
  int rkey_check(FlowId flow, uint32_t rkey, uint64_t va, uint32_t len, bool write, uint16_t* mr,
                 uint64_t* offset) override;
  int roce_resync(FlowId flow, uint32_t psn, uint32_t next_msg) override;
  int read_post(FlowId flow, uint32_t psn, uint16_t mr, uint64_t offset, uint32_t len) override;
  int read_retire(FlowId flow, uint32_t psn) override;

 private:
  friend class SimNet;

  struct Flow {
    FlowTuple tuple;
    uint16_t ip_id = 0;
    bool used = false;
    bool on_nic = false;
    bool messages = false;      // the transport's segments name their messages
    bool nic_messages = false;  // ...and the NIC flow places by them
    bool solar = false;         // a Solar flow (solar_flow)
  };
  // The software flow table's key: the tuple as received (remote = source).
  struct Key {
    uint32_t remote_ip = 0;
    uint32_t local_ip = 0;
    uint16_t remote_port = 0;
    uint16_t local_port = 0;
    uint8_t proto = 0;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  using Frame = detail::Frame;
  static constexpr size_t kRxBurst = 32;
  static constexpr size_t kAppBurst = 32;

  Host(HostConfig cfg, std::string name, const uint64_t* clock, FramePool* pool);

  // Driven by SimNet.
  void rx_frame(Frame f);  // classify one frame; the burst goes up when full
  void rx_flush();         // give the pending burst to the transport
  bool app_flush();        // pending app requests to the transport; false when none
  void tick();
  bool app_pending() const { return !pending_.empty(); }

  void drain_tx(std::span<transport::TxDesc> descs) override;
  void drain_events(std::span<const Event> events) override;

  void send_desc(const transport::TxDesc& d);
  void send_oversize(const nic::TxRequest& req, Flow& fl);
  void poll_tx();
  FlowId alloc_flow(const FlowTuple& tuple);
  void free_flow(FlowId id);
  int nic_err(nic::Err e);
  void sync_now() { set_now(*clock_); }

  std::string name_;
  uint32_t ip_ = 0;
  std::array<uint8_t, 6> mac_{};
  std::array<uint8_t, 6> peer_mac_{};
  bool zero_copy_ = true;
  bool nic_messages_ = true;
  bool drop_bad_csum_ = false;
  nic::NicModel nic_;
  std::unique_ptr<transport::Transport> transport_;
  std::function<void(const Event&)> on_event_;
  const uint64_t* clock_;
  FramePool* pool_;
  Link* out_ = nullptr;
  HostStats stats_;

  std::vector<std::vector<uint8_t>> mrs_;
  std::vector<Flow> flows_;  // by FlowId
  std::vector<FlowId> free_ids_;
  std::unordered_map<Key, FlowId, KeyHash> by_tuple_;
  std::vector<std::pair<uint16_t, ListenerId>> listeners_;  // by local port

  std::vector<AppRequest> pending_;
  std::vector<AppRequest> app_work_;

  // RX burst: the entries hold the headers the NIC returned; the frames stay alive until the
  // transport has seen them (deferred payloads point into them).
  size_t rx_n_ = 0;
  std::array<nic::RxEntry, kRxBurst> rx_entries_{};
  std::array<transport::RxHeader, kRxBurst> rx_hdrs_{};
  std::array<Frame, kRxBurst> rx_frames_{};

  // TX scratch: the header template, per-frame buffers for the NIC, completions.
  std::array<uint8_t, 14 + 20 + transport::kMaxL4Header> tx_hdr_{};
  std::vector<std::span<uint8_t>> tx_bufs_;
  std::vector<uint32_t> tx_lens_;
  std::vector<uint32_t> tx_slots_;
  std::vector<uint8_t> tx_flat_;
  std::vector<nic::TxFrame> tx_flat_frames_;
  std::array<nic::TxCompletion, 64> tx_done_{};
};

// ---- the network --------------------------------------------------------------------------------

enum class Dir : uint8_t { kAtoB = 0, kBtoA = 1 };

class SimNet {
 public:
  SimNet(uint64_t seed, const LinkConfig& link, Faults a_to_b, Faults b_to_a, HostConfig a,
         HostConfig b);
  ~SimNet();
  SimNet(const SimNet&) = delete;
  SimNet& operator=(const SimNet&) = delete;

  Host& a() { return *a_; }
  Host& b() { return *b_; }
  uint64_t now_ns() const { return now_; }
  uint64_t seed() const { return seed_; }
  const LinkConfig& link() const { return link_; }

  // The faults of one direction, to change between or during runs.
  Faults& faults(Dir d);
  const LinkStats& stats(Dir d) const;
  // Zeroes both directions' LinkStats (e.g. after a handshake the test does not count).
  void reset_stats();
  // Frames on the link or held by its ordering stage.
  size_t in_flight(Dir d) const;

  // Runs the loop until done() is true (checked before every step) or max_ns of virtual time
  // have passed; false on timeout. One step: release held frames that are due, deliver every
  // frame that has arrived (rx bursts to the receiving host), give queued app requests to the
  // transports, tick both transports, flush their rings. Then the clock jumps to the next frame
  // arrival or hold deadline, or by tick_ns when there is none sooner (transport timers are
  // internal, so idle time advances in ticks).
  bool run_until(const std::function<bool()>& done, uint64_t max_ns);
  // Runs for ns of virtual time.
  void run_for(uint64_t ns);
  void set_tick_ns(uint64_t ns) { tick_ns_ = ns == 0 ? 1 : ns; }

  // Puts a frame of the test's own on the link in direction `d`, as if the sending host's NIC
  // had sent it: faults, queueing and delay apply (frames longer than the pool's slots are cut).
  // For forged or replayed frames from an attacker on the wire (tests/fuzz).
  void inject(Dir d, std::span<const uint8_t> frame);

  // Every delivered frame, as it reaches the receiving host (for tests and traces).
  void set_tap(std::function<void(Dir, std::span<const uint8_t>)> tap) { tap_ = std::move(tap); }

  // The seed, the link, both directions' faults and counters and the hosts' counters: for
  // failure messages.
  std::string describe() const;

  // CLEAVE_SIM_SEED from the environment when set (decimal or 0x hex), else `fallback`.
  static uint64_t seed_from_env(uint64_t fallback);

 private:
  bool step();

  uint64_t seed_;
  LinkConfig link_;
  uint64_t now_ = 0;
  uint64_t tick_ns_ = 50'000;
  std::unique_ptr<FramePool> pool_;
  std::array<std::unique_ptr<Link>, 2> links_;
  std::unique_ptr<Host> a_;
  std::unique_ptr<Host> b_;
  std::function<void(Dir, std::span<const uint8_t>)> tap_;
};

}  // namespace cleave::sim
