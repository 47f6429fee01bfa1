// shm_abi.h - the whole contract between cleaved and libcleave: the app socket's messages, the
// shared region's layout, pipe geometry and every entry format. Change a layout, bump kAbiVersion.
//
// Trust: the daemon trusts nothing an app writes. Everything in shared memory is data the app
// may change at any moment: the daemon keeps every geometry (offsets, sizes, counts) in its own
// memory, copies each entry out before reading it, and checks the copy. Shared memory holds
// offsets, never pointers.
//
// Socket: SOCK_SEQPACKET unix socket <runtime_dir>/app.sock; one message per packet, file
// descriptors ride along with SCM_RIGHTS. Every request gets exactly one reply with the same
// `seq`; replies come in request order. The daemon authenticates the peer with SO_PEERCRED.
//
//   app -> daemon                          daemon -> app
//   Hello{versions, name}                  HelloReply{version, app id, layout, quotas} + region fd
//   PipeCreate{kind, entries, cq} [+efd]   PipeReply{pipe id, offset, entries}
//   PipeDestroy{pipe}                      Reply
//   MrReg{length, access} + memfd          MrReply{mr id}
//   MrDereg{mr}                            Reply
//   Listen{ip, port, cq, transport}        ListenReply{listener}           (version 2)
//   Unlisten{listener}                     Reply                           (version 2)
//   Connect{ip, port, cq, transport}       ConnectReply{flow}              (version 2)
//   QpCreate{cq, max wrs, params}          QpReply{qp, qpn, gid}           (version 3)
//   QpModify{qp, mask, attr}               Reply                           (version 3)
//   QpQuery{qp}                            QpQueryReply{attr}              (version 3)
//   QpDestroy{qp}                          Reply                           (version 3)
//                                          Notice{reason} (unsolicited, then the daemon closes;
//                                          kRefused may come first, instead of any reply)
//
// Region layout (one memfd per app, created, sealed and sized by the daemon):
//   [RegionHeader, one 4 KiB page][pipe area: pipes at daemon-chosen offsets][heap = MR 0]
// The header page's second cache line is the submit summary (SubmitSummary, version 4).
// Pipe layout at its offset: [PipeCtl, two cache lines][entries: count x entry size]
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace cleave::abi {

inline constexpr uint32_t kMagic = 0x314c5643;  // "CVL1" little-endian
inline constexpr uint16_t kAbiVersion = 4;      // 2: flows; 3: RoCEv2 queue pairs and RDMA; 4: the
                                                // submit summary word
inline constexpr uint16_t kAbiMinVersion = 1;   // oldest version this build still speaks
inline constexpr size_t kCacheLine = 64;
inline constexpr std::string_view kAppSocketName = "app.sock";
inline constexpr size_t kAppNameMax = 32;  // including the terminating NUL
inline constexpr size_t kMaxMessage = 256;

// ---- Shared region -----------------------------------------------------------------------------

inline constexpr uint64_t kRegionHeaderSize = 4096;
inline constexpr uint32_t kRegionHugetlb = 1u << 0;

// Written once by the daemon before the fd is passed; the library checks it after mapping.
struct RegionHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t flags;  // kRegion*
  uint32_t app_id;
  uint32_t reserved;
  uint64_t size;
  uint64_t pipe_area_offset;
  uint64_t pipe_area_size;
  uint64_t heap_offset;  // MR 0
  uint64_t heap_size;
};
static_assert(sizeof(RegionHeader) == 56);

// ---- Submit summary (version 4) ----------------------------------------------------------------
//
// One word the app sets and the daemon clears, so the daemon's loop looks only at submit pipes
// that have work (as Caladan's and SmartNS's shared doorbells do) instead of at every pipe on
// every pass. Bit submit_bit(p) says "submit pipe p, or another whose id is p modulo 64, may
// have new entries". The app publishes its entries first, then sets the bit (fetch_or, release);
// the daemon exchanges the word with 0 (acquire) and then reads the pipes the bits name, so an
// entry published before a bit the daemon took is always seen. A pipe the daemon could not
// drain (its budget, a full completion pipe) stays marked in the daemon's own memory.
//
// It is a hint, never trusted: bits that name no submit pipe are ignored, and the daemon also
// sweeps every submit pipe of every app at least every kSubmitSweepUs, so an app that never
// sets the word (or clears it) is still served, only later; an app that always sets it is
// looked at on every pass, as any app with work is, with the same budget. Apps of version 3
// and older have no word: all their submit pipes are looked at on every pass.
inline constexpr uint64_t kSubmitSummaryOffset = 64;  // from the region base, in the header page
inline constexpr uint32_t kSubmitSweepUs = 100;

struct alignas(kCacheLine) SubmitSummary {
  uint64_t ready;  // app: fetch_or(submit_bit(pipe)) after producing; daemon: exchange(0)
};
static_assert(sizeof(SubmitSummary) == kCacheLine);
static_assert(kSubmitSummaryOffset >= sizeof(RegionHeader) &&
              kSubmitSummaryOffset % kCacheLine == 0 &&
              kSubmitSummaryOffset + kCacheLine <= kRegionHeaderSize);

constexpr uint64_t submit_bit(uint32_t pipe) {
  return uint64_t{1} << (pipe % 64);
}

// ---- Notification pipes ------------------------------------------------------------------------
//
// Single producer, single consumer. Entries carry a phase byte, the entry's last byte: the
// producer writes the entry, then stores phase with release; the consumer polls the phase of the
// next entry with acquire. The phase a producer writes on lap L (L = index / count) is
// (L + 1) & 1, so a zeroed ring is empty. The consumer publishes how far it has read in
// PipeCtl::consumer (its own cache line); the producer reads that only when its credits run out.

enum class PipeKind : uint8_t {
  kSubmit = 1,      // app -> daemon, SendEntry
  kRecv = 2,        // app -> daemon, RecvEntry (receive buffers)
  kCompletion = 3,  // daemon -> app, Completion
};

struct alignas(kCacheLine) PipeCtl {
  // Written by the consumer only: entries consumed so far (monotonic, never wraps in practice).
  alignas(kCacheLine) uint64_t consumer;
  // Nonzero while the consumer sleeps on its eventfd (doorbell armed): the consumer sets it
  // before sleeping and clears it on waking; the producer reads it after each burst and, when
  // set, clears it and writes the eventfd (an arm wakes once).
  alignas(kCacheLine) uint32_t sleeping;
};
static_assert(sizeof(PipeCtl) == 2 * kCacheLine);
static_assert(offsetof(PipeCtl, sleeping) == kCacheLine);

inline constexpr uint32_t kPipeMinEntries = 64;
inline constexpr uint32_t kPipeMaxEntries = 1u << 16;

// Opcodes of SendEntry. Values are ABI.
enum Opcode : uint8_t {
  kOpNop = 0,   // no data; completes at once (a ping through the dataplane)
  kOpCopy = 1,  // copy `length` bytes from (mr, offset) to (remote_mr, remote_offset), both the
                // app's own MRs: the local copy engine
  kOpSend = 2,  // deliver (mr, offset, length) into the next receive buffer posted on pipe
                // `target` (a kRecv pipe of the same app)
  // Flow requests (version 2): `target` is a flow of this app. Sends and receives complete on
  // the flow's completion pipe (the one named at listen or connect), where its events also go;
  // close and abort, and any request refused outright, complete at once on the submit pipe's.
  kOpFlowSend = 3,   // send (mr, offset, length); completes when the peer has acknowledged it
  kOpFlowRecv = 4,   // post (mr, offset, length) as the flow's next receive buffer; completes
                     // when full, or shorter at the end of the stream or on an error
  kOpFlowClose = 5,  // graceful close after the queued sends; completes at once, events follow
  kOpFlowAbort = 6,  // reset at once; pending requests complete with CL_ECONNRESET
  // RDMA on a queue pair (version 3): `target` is the QP (its flow id). kOpFlowSend and
  // kOpFlowRecv also work on a QP (SEND, and a receive for SENDs and WRITEs with immediate).
  kOpRdmaWrite = 7,  // write (mr, offset, length) to the peer's address remote_offset under the
                     // rkey in remote_mr; completes when the peer has acknowledged it
  kOpRdmaRead = 8,   // read `length` bytes from the peer's (remote_offset, rkey remote_mr) into
                     // (mr, offset); completes when they are all in place
  kOpCount,
};

// Access rights of an MR: what the daemon and NIC may do with it.
inline constexpr uint32_t kAccessRead = 1u << 0;   // read: source of sends and copies
inline constexpr uint32_t kAccessWrite = 1u << 1;  // write: target of receives and copies
inline constexpr uint32_t kAccessRemoteRead = 1u << 2;
inline constexpr uint32_t kAccessRemoteWrite = 1u << 3;
inline constexpr uint32_t kAccessAll = 0xf;

// Submit pipe entry: one cache line.
struct SendEntry {
  uint64_t wr_id;          // echoed in the completion
  uint64_t offset;         // into `mr`
  uint64_t remote_offset;  // kOpCopy: into `remote_mr`
  uint32_t length;
  uint32_t mr;
  uint32_t remote_mr;  // kOpCopy: destination MR
  uint32_t target;     // kOpSend: the receive pipe's id
  uint32_t imm;        // carried to the receive completion (kOpSend)
  uint8_t opcode;      // Opcode
  uint8_t flags;       // kSend*; 0 before version 3
  uint8_t reserved[17];
  uint8_t phase;
};
static_assert(sizeof(SendEntry) == kCacheLine);

// SendEntry::flags (version 3)
inline constexpr uint8_t kSendImm = 1u << 0;  // on a QP, kOpFlowSend and kOpRdmaWrite: carry
                                              // `imm` to the peer (with immediate)
static_assert(offsetof(SendEntry, opcode) == 44);
static_assert(offsetof(SendEntry, phase) == 63);

// Receive pipe entry: a buffer for incoming data. Four per cache line. The app's wr_id stays in
// the library: the completion names the entry by its index in the pipe.
struct RecvEntry {
  uint64_t offset;
  uint32_t length;
  uint16_t mr;
  uint8_t reserved;
  uint8_t phase;
};
static_assert(sizeof(RecvEntry) == 16);
static_assert(kCacheLine % sizeof(RecvEntry) == 0);
static_assert(offsetof(RecvEntry, phase) == 15);

inline constexpr uint8_t kCompRecv = 1u << 0;   // a receive completion: wr_id is the entry index
                                                // (a QP's receive, opcode kOpFlowRecv: the app's)
inline constexpr uint8_t kCompImm = 1u << 1;    // imm is valid
inline constexpr uint8_t kCompEvent = 1u << 2;  // a flow event: opcode is an EventCode
inline constexpr uint8_t kCompRdmaWrite = 1u << 3;  // a QP receive an RDMA WRITE with immediate
                                                    // consumed: length is what it wrote

// Flow events (version 2), in Completion::opcode with kCompEvent. `flow` names the flow.
enum EventCode : uint8_t {
  kEvConnected = 1,   // an active open completed
  kEvAccepted = 2,    // a listener accepted a new flow; wr_id is the listener id
  kEvPeerClosed = 3,  // the peer will send no more data
  kEvClosed = 4,      // the flow is gone (closed, reset or failed: status); its id is free
  kEvRefused = 5,     // an active open failed (status: refused, timed out, unreachable)
  kEvData = 6,        // `length` more in-order bytes are in the flow's posted receive buffers
                      // (counted from the first byte of the oldest incomplete one); sent at most
                      // once per burst, and coalesced while the completion pipe is full
};

// Completion pipe entry: two per cache line.
struct Completion {
  uint64_t wr_id;   // SendEntry::wr_id, or the receive entry's index (kCompRecv)
  uint32_t length;  // bytes moved
  int32_t status;   // 0, or a negative CL_E* code
  uint32_t imm;
  uint16_t pipe;   // the submit or receive pipe this completes an entry of
  uint8_t opcode;  // the SendEntry opcode (kOpSend for receives)
  uint8_t flags;   // kComp*
  uint32_t flow;   // flow requests and events: the flow
  uint8_t reserved[3];
  uint8_t phase;
};
static_assert(sizeof(Completion) == 32);
static_assert(offsetof(Completion, flow) == 24);
static_assert(kCacheLine % sizeof(Completion) == 0);
static_assert(offsetof(Completion, phase) == 31);

constexpr uint32_t entry_size(PipeKind k) {
  switch (k) {
    case PipeKind::kSubmit:
      return sizeof(SendEntry);
    case PipeKind::kRecv:
      return sizeof(RecvEntry);
    case PipeKind::kCompletion:
      return sizeof(Completion);
  }
  return 0;
}

// Bytes a pipe of `entries` takes in the pipe area, a multiple of the cache line.
constexpr uint64_t pipe_bytes(PipeKind k, uint32_t entries) {
  return sizeof(PipeCtl) + uint64_t{entries} * entry_size(k);
}

// ---- Socket messages ---------------------------------------------------------------------------

enum class MsgType : uint16_t {
  kHello = 1,
  kHelloReply = 2,
  kPipeCreate = 3,
  kPipeReply = 4,
  kPipeDestroy = 5,
  kMrReg = 6,
  kMrReply = 7,
  kMrDereg = 8,
  kReply = 9,    // status only
  kNotice = 10,  // daemon -> app, unsolicited: why the daemon is about to close the connection
  kListen = 11,  // version 2
  kListenReply = 12,
  kUnlisten = 13,
  kConnect = 14,
  kConnectReply = 15,
  kQpCreate = 16,  // version 3
  kQpReply = 17,
  kQpModify = 18,
  kQpQuery = 19,
  kQpQueryReply = 20,
  kQpDestroy = 21,
};

struct MsgHeader {
  uint32_t magic;    // kMagic
  uint16_t version;  // the negotiated version (kAbiVersion in Hello)
  uint16_t type;     // MsgType
  uint32_t seq;      // chosen by the app, echoed in the reply
  int32_t status;    // replies: 0 or a negative CL_E* code
};
static_assert(sizeof(MsgHeader) == 16);

struct Hello {
  MsgHeader h;
  uint16_t min_version;
  uint16_t max_version;
  uint32_t flags;          // none defined
  char name[kAppNameMax];  // NUL-terminated, printable; shown by `cleavectl app`
};

struct Quotas {
  uint64_t memory_bytes;  // region plus registered MRs
  uint32_t pipes;
  uint32_t mrs;
  uint32_t flows;
  uint32_t pipe_entries;  // largest pipe
};

struct HelloReply {
  MsgHeader h;  // status CL_EVERSION: min/max_version say what the daemon speaks
  uint16_t min_version;
  uint16_t max_version;
  uint32_t app_id;
  uint64_t region_size;
  uint64_t pipe_area_offset;
  uint64_t pipe_area_size;
  uint64_t heap_offset;
  uint64_t heap_size;
  uint32_t region_flags;  // kRegion*
  uint32_t reserved;
  Quotas quotas;
};

inline constexpr uint32_t kPipeDoorbell = 1u << 0;  // an eventfd rides along (kCompletion only)

struct PipeCreate {
  MsgHeader h;
  uint8_t kind;  // PipeKind
  uint8_t reserved[3];
  uint32_t entries;  // power of two, kPipeMinEntries..min(kPipeMaxEntries, quota)
  uint32_t cq;       // kSubmit, kRecv: the completion pipe their completions go to
  uint32_t flags;    // kPipe*
};

struct PipeReply {
  MsgHeader h;
  uint32_t pipe;
  uint32_t entries;
  uint64_t offset;  // of the PipeCtl, from the region base
};

struct PipeDestroy {
  MsgHeader h;
  uint32_t pipe;
  uint32_t reserved;
};

struct MrReg {
  MsgHeader h;
  uint64_t length;  // bytes of the memfd to register, from offset 0
  uint32_t access;  // kAccess*
  uint32_t reserved;
};

struct MrReply {
  MsgHeader h;
  uint32_t mr;
  uint32_t rkey;  // version 3: the key RoCE peers name the MR by (its remote access), else 0
};

struct MrDereg {
  MsgHeader h;
  uint32_t mr;
  uint32_t reserved;
};

struct Reply {
  MsgHeader h;
};

enum class NoticeReason : uint32_t {
  kShutdown = 1,  // the daemon is stopping
  kEvicted = 2,   // the app exceeded its error budget
  // The daemon will not serve this connection, told as it accepts it (so before any Hello, and
  // in any version); h.status says why: CL_EPERM, no apps.allow rule admits the peer's uid;
  // CL_EAGAIN, too many of that uid's connections are waiting to say hello.
  kRefused = 3,
};

struct Notice {
  MsgHeader h;
  uint32_t reason;  // NoticeReason
  uint32_t reserved;
};

// ---- Flows (version 2) -------------------------------------------------------------------------

inline constexpr size_t kTransportNameMax = 32;  // including the terminating NUL

// Listen and Connect, one layout (FlowOpen), and their replies (FlowOpenReply: the listener's or
// the flow's id).
//   Listen:  accept flows to (ip, port); ip 0 is any of the daemon's addresses. Accepted flows
//            report kEvAccepted on `cq`, and all their completions go there.
//   Connect: open a flow to (ip, port) from an ephemeral local port. The reply names the flow at
//            once; kEvConnected or kEvRefused follows on `cq`, where all its completions go.
// The transport is the one the operator attached to the port (cleavectl flow attach), else
// `transport`, else "tcp".
// flags: kFlowMessage asks for message mode (TCP: one message per send and per receive, see
// docs/transports.md); a daemon that does not know a flag answers CL_EINVAL (before
// message mode it was a reserved field, always checked to be 0).
inline constexpr uint16_t kFlowMessage = 1;
struct FlowOpen {
  MsgHeader h;
  uint32_t ip;  // host order
  uint16_t port;
  uint16_t flags;  // kFlow*
  uint32_t cq;
  uint32_t reserved2;
  char transport[kTransportNameMax];  // NUL-terminated; "" for the default
};
using Listen = FlowOpen;
using Connect = FlowOpen;

struct FlowOpenReply {
  MsgHeader h;
  uint32_t id;  // the listener (kListenReply) or the flow (kConnectReply)
  uint32_t reserved;
};
using ListenReply = FlowOpenReply;
using ConnectReply = FlowOpenReply;

struct Unlisten {
  MsgHeader h;
  uint32_t listener;
  uint32_t reserved;
};

// ---- Queue pairs (version 3) -------------------------------------------------------------------
//
// A RoCEv2 RC queue pair is a flow of the rocev2 transport: its id is a flow id (SendEntry
// target, Completion flow) and all its completions go to its `cq`. The app's protection domain
// is the app: a QP's peer reaches the app's MRs registered with remote access (MrReply::rkey),
// and no other app's. RDMA addresses are zero-based: a remote address is an offset into the MR
// the rkey names.
//
// QpCreate: a QP in RESET with room for max_send_wr requests and max_recv_wr receives (1..4096
//   each), and the rocev2 transport's parameters as text, "key value" pairs separated by spaces
//   (`dcqcn on|off`, `dcqcn_*`, `spray N`, `reorder K`: docs/transports.md). The reply has the QP's
//   number (24 bits), the daemon's IPv4 address (its first port's), which is the QP's GID as an
//   IPv4-mapped IPv6 address, and the largest PMTU that port's MTU carries.
// QpModify: ibv_modify_qp with the mask bits of QpAttrMask; moving to RTR needs the peer's
//   address (kQpAttrRemoteIp) besides pmtu, dest_qpn and rq_psn, and a pmtu whose packets fit
//   the MTU of the port towards it (CL_EINVAL otherwise: no fragmentation, no silent loss).
// QpQuery: the attributes now. QpDestroy: pending requests complete with CL_ECANCELED first.

inline constexpr size_t kQpParamsMax = 128;  // including the terminating NUL

enum QpState : uint8_t { kQpReset = 0, kQpInit = 1, kQpRtr = 2, kQpRts = 3, kQpErr = 4 };

enum QpAttrMask : uint32_t {
  kQpAttrState = 1u << 0,
  kQpAttrPmtu = 1u << 1,
  kQpAttrDestQpn = 1u << 2,
  kQpAttrRqPsn = 1u << 3,
  kQpAttrSqPsn = 1u << 4,
  kQpAttrTimeout = 1u << 5,
  kQpAttrRetryCnt = 1u << 6,
  kQpAttrRnrRetry = 1u << 7,
  kQpAttrMinRnrTimer = 1u << 8,
  kQpAttrMaxRdAtomic = 1u << 9,
  kQpAttrMaxDestRdAtomic = 1u << 10,
  kQpAttrAccess = 1u << 11,  // kAccessRemoteRead/Write bits
  kQpAttrSelectiveRepeat = 1u << 12,
  kQpAttrRateLimit = 1u << 13,
  kQpAttrRemoteIp = 1u << 14,  // the peer's address (its GID), RTR
  kQpAttrAll = (1u << 15) - 1,
};

struct QpAttr {
  uint8_t state;  // QpState
  uint8_t timeout;
  uint8_t retry_cnt;
  uint8_t rnr_retry;
  uint8_t min_rnr_timer;
  uint8_t max_rd_atomic;
  uint8_t max_dest_rd_atomic;
  uint8_t selective_repeat;  // 0 or 1
  uint32_t access;           // kAccessRemote*
  uint32_t pmtu;             // bytes: 256, 512, 1024, 2048 or 4096
  uint32_t dest_qpn;
  uint32_t rq_psn;
  uint32_t sq_psn;
  uint32_t remote_ip;  // host order
  uint64_t rate_limit_kbps;
};
static_assert(sizeof(QpAttr) == 40);

struct QpCreate {
  MsgHeader h;
  uint32_t cq;
  uint32_t max_send_wr;
  uint32_t max_recv_wr;
  uint32_t reserved;
  char params[kQpParamsMax];  // NUL-terminated
};

struct QpReply {
  MsgHeader h;
  uint32_t qp;        // the QP's flow id
  uint32_t qpn;       // its number on the wire
  uint32_t ip;        // the daemon's address (host order): the QP's GID
  uint32_t max_pmtu;  // the largest PMTU its MTU carries (RTR refuses more): 256..4096, 0 none
};

struct QpModify {
  MsgHeader h;
  uint32_t qp;
  uint32_t mask;  // QpAttrMask
  QpAttr attr;
};

struct QpId {
  MsgHeader h;
  uint32_t qp;
  uint32_t reserved;
};
using QpQuery = QpId;
using QpDestroy = QpId;

struct QpQueryReply {
  MsgHeader h;
  QpAttr attr;
};

static_assert(sizeof(Hello) <= kMaxMessage && sizeof(HelloReply) <= kMaxMessage);
static_assert(sizeof(QpCreate) <= kMaxMessage && sizeof(QpModify) <= kMaxMessage);
static_assert(sizeof(FlowOpen) <= kMaxMessage);
static_assert(sizeof(PipeCreate) <= kMaxMessage && sizeof(MrReg) <= kMaxMessage);

// MR 0 is the region's heap; registered MRs get ids from 1.
inline constexpr uint32_t kHeapMr = 0;

}  // namespace cleave::abi
