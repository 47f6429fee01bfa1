/* rte_pmd_cleave.h - the net_cleave private API: the contract every header-split NIC PMD keeps. */
/*
 * The dataplane drives the header-split NIC through standard ethdev calls plus the functions
 * below. Today the device behind them is the reference model (hw/fpga/model) running as a DPDK
 * service over a "wire" port (net_cleave vdev); a hardware PMD for the Corundum-based FPGA must
 * keep exactly this header: same names, same struct layouts, same error codes, same dynamic field
 * name and layout. Change a layout or a signature, bump RTE_PMD_CLEAVE_API_VERSION.
 *
 * Device arguments (vdev): net_cleaveN,wire=<ethdev name>[,max_flows=N][,max_mrs=N]
 *   [,ms_committed=N][,ms_store=N][,tx_mbufs=N][,wire_args=<devargs>]. The wire is a port (ring,
 *   memif, af_packet, tap, null) that net_cleave configures, starts and stops as its own: one
 *   probed before, or, when none has that name, a vdev net_cleave probes itself and closes with
 *   itself, with wire_args (last; the rest of the string, verbatim) as its devargs, e.g.
 *   net_cleave0,wire=net_tap0,wire_args=iface=cl0,persist.
 *
 * Receive: rte_eth_rx_burst() returns one mbuf per received frame. For a frame whose payload was
 * placed, dropped or trimmed (or that had none) the mbuf holds the headers only (frame start up
 * to the payload); for a deferred frame it holds the whole frame (the copy path). Each carries a
 * struct rte_pmd_cleave_placement in the mbuf dynamic field RTE_PMD_CLEAVE_PLACEMENT_DYNFIELD,
 * RTE_MBUF_F_RX_IP_CKSUM_* / RTE_MBUF_F_RX_L4_CKSUM_* from the NIC's checks, and, when the flow
 * table matched, RTE_MBUF_F_RX_FDIR_ID with the flow id in hash.fdir.hi (as an rte_flow MARK).
 *
 * Transmit: rte_eth_tx_burst() takes
 *   - header-only descriptors: a header mbuf (Ethernet/IPv4/TCP or UDP, exactly the headers)
 *     chained to one segment over app memory, normally an extbuf (rte_pktmbuf_attach_extbuf).
 *     When that segment lies inside a registered MR the NIC reads the payload from the MR
 *     (zero copy); otherwise the PMD copies the payload segments first (counted in xstats
 *     tx_bounce). RTE_MBUF_F_TX_TCP_SEG (with tso_segsz) segments up to 64 KB;
 *     RTE_MBUF_F_TX_IP_CKSUM and RTE_MBUF_F_TX_TCP_CKSUM / _UDP_CKSUM fill checksums; the
 *     dynamic flag RTE_PMD_CLEAVE_TX_ICRC_DYNFLAG appends the RoCEv2 pad and ICRC (the header
 *     mbuf then ends with the BTH or a later RoCE header); RTE_PMD_CLEAVE_TX_CRC32C_DYNFLAG
 *     writes the Solar block CRC32C (the header mbuf is exactly Ethernet/IPv4/UDP and the
 *     32-byte Solar header; each frame's payload is the block, its CRC32C goes into the header's
 *     bytes 28..31, before the UDP checksum when one is asked).
 *     The mbuf is freed once the payload has been read: the extbuf's free callback is the send
 *     completion for the app memory (retransmissions re-issue a new descriptor). A descriptor
 *     the NIC refuses (bad headers, a frame over the MTU) is freed too and counted in oerrors.
 *   - plain single-segment frames: sent as they are, or through the NIC's checksum path when
 *     one of the checksum flags above is set (l2_len, l3_len, l4_len need not be set).
 *
 * Queues: 1 to 16 RX and TX queue pairs, as many TX as RX. A received frame reaches one RX queue:
 * a flow's frames the queue its rte_pmd_cleave_flow (or rte_flow QUEUE action) names, so a RoCE
 * QP's and a Solar connection's by its flow; other TCP/UDP the queue the RETA gives for the
 * Toeplitz hash of the IPv4 4-tuple (source address, destination address, source port,
 * destination port; 128 entries, round-robin by default; the default 40-byte key is
 * Microsoft's), which rte_eth_dev_rss_* calls read and set; ARP, ICMP, fragments, RoCE to a QP
 * and Solar to a connection without a flow, and unparsable frames queue 0. Every TX queue's
 * descriptors go out through the NIC.
 *
 * Flow rules: rte_flow_create() with ETH / IPV4 (both addresses) / TCP or UDP (ports; UDP may
 * leave the source port out) and actions MARK (the flow id) [+ QUEUE q] installs a copy-mode flow:
 * its frames arrive whole, marked, on queue q (0 without QUEUE). Zero-copy placement needs the
 * sequence state rte_flow cannot carry: rte_pmd_cleave_flow_add() below. Both share one flow-id
 * space. A UDP rule on port 4791 (7000) is a plain UDP flow: it catches the RoCE (Solar) frames
 * of the QPs (connections) that have no flow of their own.
 *
 * Threads: the NIC (the model) is used by one thread at a time. Its service body runs on a
 * service lcore when the application maps one to the service (rte_pmd_cleave_service_id(),
 * rte_service_map_lcore_set(), rte_service_runstate_set()) before it starts the port;
 * otherwise rx_burst and tx_burst run it inline, so a plain dataplane loop needs nothing else.
 * Which of the two is decided by rte_eth_dev_start(), not per burst: to change it, stop the
 * port, map or unmap the service lcore, and start the port again. The commands below take a
 * spinlock that the service body also takes (the service only trylocks, and skips a round when a
 * command holds it): they may be called from any thread, return synchronously, and never run in
 * the middle of a burst. Burst functions: one thread per queue, as usual in DPDK; threads
 * bursting on different queues at once are safe (inline, one of them runs the service for all
 * at a time).
 *
 * Errors: 0 on success, a negative errno: -ENODEV (not a net_cleave port), -EINVAL (bad
 * argument), -ENOENT (unknown MR or flow), -EEXIST (id in use), -ENOSPC (table full), -EBUSY
 * (MR still referenced by posted MSs), -ERANGE (outside the MR, or overflow), -ENOBUFS (MS list
 * and shared store exhausted), -EAGAIN (retiring an MS the cursor has not passed), -ENOMSG (no MS
 * for that message), -EACCES (an MR of another owner, or an rkey that does not allow the access).
 */
#ifndef RTE_PMD_CLEAVE_H
#define RTE_PMD_CLEAVE_H

#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RTE_PMD_CLEAVE_API_VERSION 4

/** Name of the mbuf dynamic field holding struct rte_pmd_cleave_placement. */
#define RTE_PMD_CLEAVE_PLACEMENT_DYNFIELD "rte_pmd_cleave_placement"

/*
 * enum rte_pmd_cleave_decision, _defer_reason, _parser, _flow_mode and _csum, the
 * RTE_PMD_CLEAVE_MR_REMOTE_* access bits and RTE_PMD_CLEAVE_NO_FLOW: generated from
 * hw/fpga/spec/nic_spec.py, the source the reference model and the RTL take them from too.
 */
#include "rte_pmd_cleave_defs.h"

/**
 * Placement metadata of one received frame, in the mbuf dynamic field. 32 bytes, 4-byte
 * aligned, so it fits the mbuf's dynamic area next to others. A payload that straddles MSs is
 * placed contiguously in stream order; mr/offset give where its first placed byte landed
 * (seq + trimmed in stream terms), the transport knows the rest from the MSs it posted.
 */
struct rte_pmd_cleave_placement {
  uint32_t flow_id;     /**< RTE_PMD_CLEAVE_NO_FLOW on a flow-table miss */
  uint32_t seq;         /**< TCP sequence number, RoCE PSN or Solar tx sequence of the frame */
  uint32_t msg_seq;     /**< message semantics: the message whose MS was written */
  uint32_t placed;      /**< payload bytes written to app memory */
  uint32_t offset_lo;   /**< first placed byte: offset in the MR, bits 31..0 */
  uint16_t offset_hi;   /**< ... bits 47..32 */
  uint16_t mr;          /**< first placed byte: MR id */
  uint16_t payload_len; /**< payload bytes in the frame (no pad, no ICRC) */
  uint16_t trimmed;     /**< bytes cut before the cursor */
  uint8_t decision;     /**< enum rte_pmd_cleave_decision */
  uint8_t reason;       /**< enum rte_pmd_cleave_defer_reason */
  uint8_t parser;       /**< enum rte_pmd_cleave_parser */
  uint8_t flags;        /**< RTE_PMD_CLEAVE_F_* below */
};

#define RTE_PMD_CLEAVE_F_NFRAGS_MASK 0x07u  /**< MSs the payload was written into (0..4) */
#define RTE_PMD_CLEAVE_F_OUT_OF_ORDER 0x08u /**< placed past a hole */
#define RTE_PMD_CLEAVE_F_IP_CSUM_SHIFT 4    /**< 2 bits: enum rte_pmd_cleave_csum */
#define RTE_PMD_CLEAVE_F_L4_CSUM_SHIFT 6    /**< 2 bits: TCP/UDP checksum, ICRC or CRC32C */

/** Registers (once per process; idempotent) and returns the dynamic field's offset, or -1. */
int rte_pmd_cleave_placement_offset(void);

/** The placement of a received mbuf; `offset` from rte_pmd_cleave_placement_offset(). */
static inline struct rte_pmd_cleave_placement* rte_pmd_cleave_placement_get(struct rte_mbuf* m,
                                                                            int offset) {
  return RTE_MBUF_DYNFIELD(m, offset, struct rte_pmd_cleave_placement*);
}

static inline uint64_t rte_pmd_cleave_placement_mr_offset(
    const struct rte_pmd_cleave_placement* p) {
  return ((uint64_t)p->offset_hi << 32) | p->offset_lo;
}

/** Name of the mbuf dynamic TX flag asking the NIC for the RoCEv2 pad (BTH PadCnt) and ICRC. */
#define RTE_PMD_CLEAVE_TX_ICRC_DYNFLAG "rte_pmd_cleave_tx_icrc"

/** Registers (once per process; idempotent) and returns the ICRC flag's bit in ol_flags, or -1. */
int rte_pmd_cleave_tx_icrc_bit(void);

/** Name of the mbuf dynamic TX flag asking the NIC for the Solar block CRC32C. */
#define RTE_PMD_CLEAVE_TX_CRC32C_DYNFLAG "rte_pmd_cleave_tx_crc32c"

/** Registers (once per process; idempotent) and returns the CRC32C flag's bit, or -1. */
int rte_pmd_cleave_tx_crc32c_bit(void);

/**
 * A flow-table entry. Addresses and ports in host byte order; src is the remote peer. A RoCE
 * flow (dst_port 4791) is a QP: frames find it by (src_ip, dst_ip, BTH DestQP = qpn) whatever
 * their source port, so two QPs between the same hosts are two flows. A Solar flow (dst_port
 * 7000) is a connection, found the same way by the connection id in its header (bytes 4..7 of
 * the UDP payload) = qpn: two connections between the same hosts are two flows. Both take any
 * source port (src_port is ignored) and a qpn below 2^24 (-EINVAL otherwise, or on another
 * dst_port); a frame whose number no flow has, or a Solar one of 2^24 or more, misses.
 */
struct rte_pmd_cleave_flow {
  uint32_t src_ip;
  uint32_t dst_ip;
  uint16_t src_port; /**< UDP parsers: 0 matches any source port */
  uint16_t dst_port;
  uint8_t proto;            /**< 6 TCP, 17 UDP */
  uint8_t mode;             /**< enum rte_pmd_cleave_flow_mode */
  uint8_t parser;           /**< enum rte_pmd_cleave_parser */
  uint8_t reliable;         /**< 1: place by sequence/offset against the cursor; 0: next MS */
  uint8_t messages;         /**< 1: a message number selects the MS (Solar I/O id, RoCE SEND, TCP
                                 message option: hw/fpga/docs/formats.md section 2) */
  uint8_t selective_repeat; /**< RoCE: 1: the QP recovers by selective repeat, and requests past
                                 the expected PSN may be placed; 0: go-back-N, only the request
                                 at the PSN the NIC expects next is placed, others deferred
                                 unwritten (RTE_PMD_CLEAVE_DEFER_OUT_OF_SEQUENCE) */
  uint16_t queue;           /**< the RX queue its frames reach (below the port's RX queue count) */
  uint32_t initial_seq;     /**< TCP: first payload byte expected; RoCE: first PSN (Solar: none,
                                 its cursor starts at 0) */
  uint32_t pmtu;            /**< RoCE: payload bytes per first/middle packet (0: 4096) */
  uint64_t initial_offset;  /**< Solar without messages: stream offset of the first MS */
  uint32_t qpn;             /**< RoCE: the local QP number; Solar: the local connection number
                                 (24 bits: the number the peer's frames carry) */
  uint32_t owner;           /**< RoCE: protection domain; peers reach only MRs of this owner */
};

/** Registers app memory [base, base+len) as MR `id` (below the max_mrs devarg) of `owner`. */
int rte_pmd_cleave_mr_add(uint16_t port, uint16_t id, void* base, uint64_t len, uint32_t owner);
/**
 * The same, reachable by RoCE peers of flows with the same owner: rkey = tag << 16 | id, with
 * `access` RTE_PMD_CLEAVE_MR_REMOTE_* bits. A WRITE another key, owner, access or range would
 * need is deferred (RTE_PMD_CLEAVE_DEFER_REMOTE_ACCESS). Pick a new tag when reusing an id.
 */
int rte_pmd_cleave_mr_add_remote(uint16_t port, uint16_t id, void* base, uint64_t len,
                                 uint32_t owner, uint8_t access, uint16_t tag);
/** Removes MR `id`; -EBUSY while posted MSs or READ sinks refer to it. */
int rte_pmd_cleave_mr_remove(uint16_t port, uint16_t id);

/** Adds flow `id` (below the max_flows devarg). */
int rte_pmd_cleave_flow_add(uint16_t port, uint32_t id, const struct rte_pmd_cleave_flow* flow);
/** Removes flow `id` and drops its MSs. */
int rte_pmd_cleave_flow_remove(uint16_t port, uint32_t id);
/** Switches a flow between zero-copy and copy mode. */
int rte_pmd_cleave_flow_set_mode(uint16_t port, uint32_t id, enum rte_pmd_cleave_flow_mode mode);

/**
 * Posts a Memory Segment [offset, offset+len) of MR `mr` on the flow's MS list. Byte streams:
 * it continues where the previous MS ends (on an empty TCP list it starts at the cursor).
 * Message flows: `msg` names the message the MS receives; ignored otherwise.
 */
int rte_pmd_cleave_ms_post(uint16_t port, uint32_t flow, uint16_t mr, uint64_t offset, uint32_t len,
                           uint32_t msg);
/** TCP: the next byte the transport expects; RoCE: its ePSN. Never moves backwards. */
int rte_pmd_cleave_cursor_update(uint16_t port, uint32_t flow, uint32_t cursor);
/** Retires the `count` oldest MSs (byte streams: only those wholly before the cursor). */
int rte_pmd_cleave_ms_retire(uint16_t port, uint32_t flow, uint32_t count);
/** Message flows: retires the MS of message `msg` wherever it is in the list. */
int rte_pmd_cleave_ms_retire_msg(uint16_t port, uint32_t flow, uint32_t msg);

/**
 * The same three commands posted, as a driver's doorbell write is: queued for the NIC, never
 * waiting for it (the calls above wait while the NIC service runs the model). Each RX/TX queue
 * has its own command queue (1024), posted to only by the thread that owns the queue (as its
 * bursts are), so no poster ever waits for another, even one descheduled on a shared CPU. A
 * queue's commands are applied in the order they were posted, before the NIC's next run over
 * the wire and before any other command on the port runs, so a command that follows sees them.
 * Returns 0, -EINVAL (queue not below the configured count) or -ENODEV; a command the NIC
 * refuses is counted in its nic_cmd_err_* xstats, not returned. When the command queue is full,
 * the command runs at once, after the ones queued, as the calls above do.
 */
int rte_pmd_cleave_post_cursor_update(uint16_t port, uint16_t queue, uint32_t flow,
                                      uint32_t cursor);
int rte_pmd_cleave_post_ms_retire(uint16_t port, uint16_t queue, uint32_t flow, uint32_t count);
int rte_pmd_cleave_post_ms_retire_msg(uint16_t port, uint16_t queue, uint32_t flow, uint32_t msg);

/**
 * Interrupts. The NIC raises a vector; the host delivers it as a write of 1 to the eventfd bound
 * to the vector (VFIO signals an MSI-X vector's eventfd so on hardware; here whoever runs the
 * model writes it). A driver raises a vector to wake a thread without a system call of its own.
 * irq_bind: binds the next free vector to `fd` (the PMD keeps a duplicate of it, closed by
 * unbind or at close) and returns it, or -ENOSPC (4096 vectors bound), -EBADF, -ENODEV.
 * irq_unbind: delivers what was posted before it, then frees the vector; -ENOENT if unbound.
 * post_irq: raises the vector, posted on `queue` as the commands above are; a vector bound to
 * nothing is counted (xstat irq_errors), delivered ones too (irqs).
 */
int rte_pmd_cleave_irq_bind(uint16_t port, int fd);
int rte_pmd_cleave_irq_unbind(uint16_t port, uint32_t vector);
int rte_pmd_cleave_post_irq(uint16_t port, uint16_t queue, uint32_t vector);
/** RoCE: a message starts at `psn` and the next SEND is message `next_msg`. */
int rte_pmd_cleave_roce_resync(uint16_t port, uint32_t flow, uint32_t psn, uint32_t next_msg);

/**
 * RoCE requester: READ responses of the READ whose request had PSN `psn` are placed into
 * [offset, offset+len) of MR `mr` (the flow owner's, else -EACCES), by PSN, whatever the cursor:
 * PSNs psn .. psn + max(1, ceil(len / pmtu)) - 1, not overlapping another posted READ's (-EINVAL).
 * Up to 16 per flow (-ENOBUFS beyond). Placements report msg_seq = psn.
 */
int rte_pmd_cleave_read_post(uint16_t port, uint32_t flow, uint32_t psn, uint16_t mr,
                             uint64_t offset, uint32_t len);
/** The READ posted at `psn` completed or was abandoned: its responses are deferred again. */
int rte_pmd_cleave_read_retire(uint16_t port, uint32_t flow, uint32_t psn);
/**
 * RoCE responder: 0 (and the MR id in *mr when not NULL) if the flow's peer may access
 * [va, va+len) of the MR `rkey` names with `access` (RTE_PMD_CLEAVE_MR_REMOTE_* bits), by the
 * rule WRITE placement keeps; -EACCES if not, -ENOENT for an unknown flow, -EINVAL when the flow
 * is not RoCE or no access is asked.
 */
int rte_pmd_cleave_rkey_check(uint16_t port, uint32_t flow, uint32_t rkey, uint64_t va,
                              uint64_t len, uint8_t access, uint16_t* mr);

/** The rte_service id of the port's NIC service (the model), for mapping a service lcore. */
int rte_pmd_cleave_service_id(uint16_t port, uint32_t* service_id);

/** A direction of the wire, for seeded fault injection. */
enum rte_pmd_cleave_fault_dir {
  RTE_PMD_CLEAVE_FAULT_RX = 0, /**< frames from the wire, before the NIC sees them */
  RTE_PMD_CLEAVE_FAULT_TX = 1, /**< frames the NIC puts on the wire */
};

/** Seeded wire faults of one direction: each a probability per frame in [0, 1). */
struct rte_pmd_cleave_fault {
  double loss;      /**< the frame is lost */
  double reorder;   /**< the frame is held back and sent after 3 later ones (or when idle) */
  double duplicate; /**< the frame is sent twice */
  uint64_t seed;    /**< the same seed and frames give the same faults */
};

/**
 * Test equipment, not NIC function: loss, reordering and duplication on the wire side of the NIC
 * (RX before the NIC parses a frame, TX as merged frames leave it), seeded so a run replays.
 * All zero turns them off (held frames still leave). No corruption: the NIC checksums behind it.
 * Counted in xstats fault_{rx,tx}_{dropped,reordered,duplicated}. -EINVAL for a probability
 * outside [0, 1); a hardware PMD answers -ENOTSUP.
 */
int rte_pmd_cleave_fault_set(uint16_t port, enum rte_pmd_cleave_fault_dir dir,
                             const struct rte_pmd_cleave_fault* fault);

#ifdef __cplusplus
}
#endif

#endif /* RTE_PMD_CLEAVE_H */
