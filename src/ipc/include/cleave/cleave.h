/* cleave.h - libcleave, the application side of Cleave: a C ABI with opaque handles.
 *
 * An app opens a context (one connection to cleaved), gets a shared region whose heap it
 * allocates buffers from, registers more memory if it wants, and creates notification pipes:
 * submit queues (sends), receive queues (buffers for incoming data) and completion queues. The
 * post and poll calls touch only shared memory: no syscalls, no locks.
 *
 * Flows (streams over a transport, TCP by default): cl_listen and cl_connect bind a completion
 * queue to the flows they create. Sends, receive buffers and closes are work requests on any
 * submit queue (CL_OP_FLOW_*, naming the flow). Send and receive completions and the flow's
 * events (CL_WC_EVENT: connected, accepted, data, peer closed, closed, refused) arrive on the
 * flow's CQ (close and abort complete at once on the submit queue's CQ), so
 * one CQ waited on with cl_cq_wait serves many flows, as epoll does. Data is never copied by the
 * library or the daemon on the zero-copy path: the NIC reads sends from and writes receives into
 * the app's memory. A send completes when the peer has acknowledged it; until then its memory
 * must stay unchanged. A receive completes when its buffer is full, or shorter when the peer
 * closed (the last buffer of the stream) or the flow failed. The receive window a flow
 * advertises is the room in its posted buffers: with none posted the peer can send nothing, not
 * even its FIN, so an app that only sends still posts a small buffer to see the end.
 *
 * Errors: functions returning int give 0 (or a count) on success and a negative CL_E* code on
 * failure; cl_strerror() names it. Once the daemon is gone every call fails with CL_EDAEMON; once
 * it evicted the app, with CL_EEVICTED. Neither ever hangs: a dead daemon is noticed within a
 * second, also by a thread spinning in cl_poll_cq or sleeping in cl_cq_wait.
 *
 * Thread safety, per call:
 *   cl_open, cl_close            - once per context; no other call on it may run during cl_close
 *   cl_alloc, cl_free            - any thread
 *   cl_mr_*, cl_*_create/destroy - any thread (serialised on the context's socket)
 *   cl_listen, cl_unlisten,
 *   cl_connect                   - any thread (serialised on the context's socket)
 *   cl_post_send, cl_post_recv   - one thread at a time per queue
 *   cl_ring_*                    - one thread at a time per ring, the one posting on its sq
 *   cl_pd_*, cl_qp_create/modify/
 *   query/destroy                - any thread (serialised on the context's socket)
 *   cl_qp_post_send/post_recv    - one thread at a time per QP (both calls together)
 *   cl_qp_local_dest, _exchange,
 *   _connect                     - any thread (connect: as cl_qp_modify)
 *   cl_poll_cq, cl_cq_wait       - one thread at a time per completion queue
 *   cl_strerror, accessors       - any thread
 */
#ifndef CLEAVE_CLEAVE_H
#define CLEAVE_CLEAVE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CL_API __attribute__((visibility("default")))
#else
#define CL_API
#endif

/* Error codes: Linux errno values where one fits, negated. */
enum {
  CL_OK = 0,
  CL_EPERM = -1,            /* not allowed to connect (uid/gid not in the daemon's config) */
  CL_ENOENT = -2,           /* no such pipe or MR, or no daemon socket */
  CL_EIO = -5,              /* a QP's peer reported a remote operational error */
  CL_EAGAIN = -11,          /* nothing now; try again (queue full, nothing to poll; cl_open:
                               too many of this user's connections wait for cleaved) */
  CL_ENOMEM = -12,          /* out of memory (heap, or the daemon's) */
  CL_EACCES = -13,          /* MR access rights do not allow the operation; or an operator's
                               binding reserves the port or flow for another user (listen,
                               connect) */
  CL_EFAULT = -14,          /* offset/length outside the MR */
  CL_EBUSY = -16,           /* in use (e.g. a completion queue with queues attached) */
  CL_EINVAL = -22,          /* invalid argument */
  CL_ENOSPC = -28,          /* a table is full (daemon-wide) */
  CL_EPIPE = -32,           /* the flow was closed for sending */
  CL_EPROTO = -71,          /* malformed message or descriptor */
  CL_EPROTONOSUPPORT = -93, /* the peer does not speak message mode (CL_FLOW_MESSAGE) */
  CL_EOPNOTSUPP = -95,      /* unknown opcode or flag */
  CL_EADDRINUSE = -98,      /* someone already listens on that port */
  CL_ENETUNREACH = -101,    /* no route to the destination */
  CL_ECONNABORTED = -103,   /* this app aborted the flow (CL_OP_FLOW_ABORT) */
  CL_ECONNRESET = -104,     /* the peer reset the flow */
  CL_ENOBUFS = -105,        /* the flow's send queue is full */
  CL_ETIMEDOUT = -110,      /* cl_cq_wait timed out; a flow gave up retransmitting; cleaved's
                               dataplane did not answer a control call in time (cl_open, pipe,
                               MR, flow and QP calls: nothing was done unless the app was then
                               disconnected; try again) */
  CL_ECONNREFUSED = -111,   /* the peer refused the connection */
  CL_EHOSTUNREACH = -113,   /* the next hop did not answer ARP */
  CL_EDQUOT = -122,         /* over this app's quota */
  CL_ECANCELED = -125,      /* a QP's work request flushed (the QP in ERR, or destroyed) */
  CL_EDAEMON = -1001,       /* cleaved is gone (exited, crashed or closed the connection) */
  CL_EVERSION = -1002,      /* no protocol version in common with cleaved */
  CL_EEVICTED = -1003,      /* cleaved disconnected this app for exceeding its error budget */
  CL_ENORECV = -1004,       /* a send found no posted receive buffer (completion status) */
  CL_ETRUNC = -1005         /* the receive buffer was shorter than the data (completion status) */
};

/* MR access: what cleaved and the NIC may do with the memory. */
enum {
  CL_ACCESS_READ = 1 << 0,  /* source of sends and copies */
  CL_ACCESS_WRITE = 1 << 1, /* target of receives and copies */
  CL_ACCESS_REMOTE_READ = 1 << 2,
  CL_ACCESS_REMOTE_WRITE = 1 << 3
};

/* Opcodes of cl_send_wr. */
enum {
  CL_OP_NOP = 0,  /* completes at once: a round trip through the dataplane */
  CL_OP_COPY = 1, /* copy between two of the app's own MRs */
  CL_OP_SEND = 2, /* into the next buffer posted on receive queue `target` */
  /* On flow `flow` (completions go to the flow's CQ): */
  CL_OP_FLOW_SEND = 3,  /* send (mr, offset, length); completes when acknowledged */
  CL_OP_FLOW_RECV = 4,  /* receive into (mr, offset, length) */
  CL_OP_FLOW_CLOSE = 5, /* graceful close after the queued sends (FIN) */
  CL_OP_FLOW_ABORT = 6, /* reset now; pending requests and CL_EV_CLOSED carry CL_ECONNABORTED */
  /* Completion opcodes of queue pairs (cl_qp_post_send); SENDs complete as CL_OP_FLOW_SEND and
   * receives as CL_OP_FLOW_RECV. */
  CL_OP_RDMA_WRITE = 7,
  CL_OP_RDMA_READ = 8
};

/* cl_wc.flags */
enum {
  CL_WC_RECV = 1 << 0,
  CL_WC_IMM = 1 << 1,
  CL_WC_EVENT = 1 << 2,
  CL_WC_RDMA_WRITE = 1 << 3 /* a QP receive consumed by an RDMA WRITE with immediate */
};

/* cl_wc.opcode when CL_WC_EVENT is set; cl_wc.flow names the flow. */
enum {
  CL_EV_CONNECTED = 1,   /* cl_connect's flow is open */
  CL_EV_ACCEPTED = 2,    /* a new flow from a listener; wr_id is the listener id */
  CL_EV_PEER_CLOSED = 3, /* the peer will send no more data */
  CL_EV_CLOSED = 4,      /* the flow is gone (status: 0, or why); its id may be reused */
  CL_EV_REFUSED = 5,     /* cl_connect failed (status says why); the flow id is free */
  CL_EV_DATA = 6         /* length more bytes arrived in order into the posted receive buffers,
                          * before those buffers completed: read them in place (request and
                          * response protocols); the buffers still complete as usual */
};

typedef uint32_t cl_flow;

typedef struct cl_ctx cl_ctx;
typedef struct cl_mr cl_mr;
typedef struct cl_cq cl_cq;
typedef struct cl_sq cl_sq;
typedef struct cl_rq cl_rq;

struct cl_open_attr {
  const char* socket_path; /* NULL: $CLEAVE_APP_SOCKET, else /run/cleave/app.sock */
  const char* name;        /* shown by cleavectl app list; NULL: the program's name */
};

struct cl_send_wr {
  uint64_t wr_id;
  const cl_mr* mr; /* NULL: the region heap (cl_alloc memory) */
  uint64_t offset; /* into mr */
  uint32_t length;
  uint32_t opcode;     /* CL_OP_* */
  const cl_mr* dst_mr; /* CL_OP_COPY destination; NULL: the heap */
  uint64_t dst_offset; /* CL_OP_COPY */
  const cl_rq* target; /* CL_OP_SEND */
  uint32_t imm;        /* CL_OP_SEND: handed to the receive completion */
  cl_flow flow;        /* CL_OP_FLOW_* */
};

struct cl_recv_wr {
  uint64_t wr_id;
  const cl_mr* mr; /* NULL: the heap */
  uint64_t offset;
  uint32_t length;
};

struct cl_wc {
  uint64_t wr_id;
  int32_t status; /* 0 or a negative CL_E* code */
  uint32_t length;
  uint32_t opcode;
  uint32_t flags; /* CL_WC_* */
  uint32_t imm;
  cl_flow flow; /* CL_OP_FLOW_* completions and events */
};

/* ---- Context ----
 * Every control call (cl_open, registration, queue and flow set-up) waits for the daemon's reply
 * up to $CLEAVE_CTL_TIMEOUT_MS milliseconds as read at cl_open (100 to 600000; default 30000),
 * then fails with CL_EDAEMON for good. A daemon that dies is noticed at once. */
CL_API int cl_open(const struct cl_open_attr* attr /* may be NULL */, cl_ctx** out);
CL_API int cl_close(cl_ctx* ctx); /* frees every queue, MR and heap block of the context */
CL_API uint32_t cl_app_id(const cl_ctx* ctx);
CL_API const char* cl_strerror(int err);

/* ---- Heap in the shared region (MR 0) ---- */
/* Returns NULL when the heap cannot satisfy the request; align is a power of two (0 = 64). */
CL_API void* cl_alloc(cl_ctx* ctx, size_t size, size_t align);
CL_API void cl_free(cl_ctx* ctx, void* ptr);
/* Offset of a heap pointer, for work requests with mr == NULL; UINT64_MAX if ptr is not in the
 * heap. */
CL_API uint64_t cl_heap_offset(const cl_ctx* ctx, const void* ptr);

/* ---- Memory regions ----
 * Registers the first `length` bytes of a memfd (created with MFD_ALLOW_SEALING; the library
 * seals it against shrinking so the daemon can never fault on it). The fd stays the caller's. */
CL_API int cl_mr_reg(cl_ctx* ctx, int memfd, uint64_t length, unsigned access, cl_mr** out);
CL_API int cl_mr_dereg(cl_mr* mr);
CL_API void* cl_mr_addr(const cl_mr* mr);
CL_API uint64_t cl_mr_length(const cl_mr* mr);
CL_API uint32_t cl_mr_id(const cl_mr* mr);

/* ---- Queues ----
 * entries: a power of two, 64..65536 (and within the quota). A completion queue must be able to
 * hold a completion for every entry of the queues attached to it. `doorbell` gives the CQ an
 * eventfd so cl_cq_wait can sleep; `spin_us` is how long cl_cq_wait spins before sleeping.
 * The destroy calls (and cl_mr_dereg) free the handle whatever they return, the daemon's error
 * or CL_EDAEMON, except CL_EBUSY: cl_cq_destroy of a CQ that queues or flows use, and
 * cl_mr_dereg of an MR while the app has open flows, keep the handle. */
CL_API int cl_cq_create(cl_ctx* ctx, uint32_t entries, int doorbell, uint32_t spin_us, cl_cq** out);
CL_API int cl_cq_destroy(cl_cq* cq);
CL_API int cl_sq_create(cl_ctx* ctx, cl_cq* cq, uint32_t entries, cl_sq** out);
CL_API int cl_sq_destroy(cl_sq* sq);
CL_API int cl_rq_create(cl_ctx* ctx, cl_cq* cq, uint32_t entries, cl_rq** out);
CL_API int cl_rq_destroy(cl_rq* rq);

/* Post up to n requests; returns how many were posted (0..n; fewer when the queue is full) or a
 * negative code. Checks what the library can (lengths, MR rights); the daemon checks again. A
 * request the library rejects fails the whole call: nothing of it is posted. */
CL_API int cl_post_send(cl_sq* sq, const struct cl_send_wr* wr, unsigned n);
CL_API int cl_post_recv(cl_rq* rq, const struct cl_recv_wr* wr, unsigned n);
/* Take up to n completions; returns how many (0 when none) or a negative code. */
CL_API int cl_poll_cq(cl_cq* cq, struct cl_wc* wc, unsigned n);
/* Wait until a completion is ready: spins spin_us, then sleeps on the doorbell (if any).
 * timeout_ms < 0 waits forever. Returns 0, CL_ETIMEDOUT, or an error. */
CL_API int cl_cq_wait(cl_cq* cq, int timeout_ms);

/* ---- Flows ----
 * Addresses are struct sockaddr_in (AF_INET; host and port in network order, as for bind(2)).
 * `transport` NULL or "": the one the operator attached to the port, else "tcp".
 * cl_listen: accept flows to addr (INADDR_ANY: any of the daemon's addresses); each arrives as a
 *   CL_EV_ACCEPTED completion on cq. CL_EADDRINUSE when the port is taken.
 * cl_connect: opens a flow to addr from an ephemeral port; *flow is its id at once, and
 *   CL_EV_CONNECTED or CL_EV_REFUSED follows on cq. Requests on the flow may be posted before
 *   CL_EV_CONNECTED, except while cleaved still resolves the next hop by ARP (before the SYN
 *   leaves): then they complete with CL_EAGAIN, to be posted again after CL_EV_CONNECTED.
 * Every flow counts in the app's quota of flows (with its QPs, and its listeners' accepted flows
 * from their SYN on) until the app gets its CL_EV_CLOSED or CL_EV_REFUSED: past it cl_connect
 * (and cl_qp_create) fail with CL_EDQUOT, and a listener accepts no more until a flow ends.
 * A CQ bound to flows must have room for their completions: the daemon takes a flow request
 * only while the flow's CQ can hold its completion, so a CQ that is not polled stalls its flows'
 * submit queues, never loses a completion.
 * Flows need a cleaved that speaks ABI version 2: with an older one these calls and the
 * CL_OP_FLOW_* requests fail with CL_EOPNOTSUPP. */
struct sockaddr_in;
CL_API int cl_listen(cl_ctx* ctx, cl_cq* cq, const struct sockaddr_in* addr, const char* transport,
                     uint32_t* listener);
CL_API int cl_unlisten(cl_ctx* ctx, uint32_t listener);
CL_API int cl_connect(cl_ctx* ctx, cl_cq* cq, const struct sockaddr_in* addr, const char* transport,
                      cl_flow* flow);

/* ---- Receive rings (PipeDevice-style stream receive) ----
 * A ring of `size` bytes of the app's memory that the library keeps posted to one flow as
 * consecutive CL_OP_FLOW_RECV chunks, in ring order, so the stream lands in the ring contiguously
 * and without a copy. cl_ring_recv returns a pointer to the bytes readable now and
 * cl_ring_recv_done releases them; a chunk whose bytes are all released (and whose completion
 * came back) is posted again, which reopens the flow's receive window.
 *
 * The app keeps polling its CQ and hands every completion (of the flow's CQ, and of the submit
 * queue's CQ if that is another) to cl_ring_consume first: 1 means the ring took it (its chunks'
 * completions, CL_EV_DATA and CL_EV_PEER_CLOSED of its flow) and the app should ignore it; 0
 * means it is the app's. CL_EV_CLOSED of the flow is noted and returns 0, so the app sees the
 * flow end too; after it the ring takes no more events (the flow id may be reused).
 *
 * Rules: create the ring once the flow is open (after CL_EV_CONNECTED or CL_EV_ACCEPTED) and
 * before anything is received on it: the ring must be the flow's only receiver, since it counts
 * CL_EV_DATA bytes from the stream's start. The flow's CQ needs room for one completion per
 * chunk. One thread at a time per ring, and it posts on `sq`: no other thread may post on that
 * submit queue meanwhile. cl_ring_recv, cl_ring_recv_done and cl_ring_consume take no locks,
 * allocate nothing and make no syscalls.
 *
 * cl_ring_create: `addr` NULL makes the library cl_alloc `size` bytes from the heap (mr must be
 *   NULL), freed by cl_ring_destroy; else [addr, addr + size) must lie in mr (NULL: the heap)
 *   with CL_ACCESS_WRITE. chunk 0 means 256 KiB; a ring is cut into at least two chunks (a
 *   smaller one into two halves: a lone chunk could stall with a tail below the window's scale
 *   unit) and at most 4096.
 *   Posts the chunks before it returns (those the submit queue has room for; the rest follow on
 *   later calls). CL_EINVAL for bad arguments, CL_EFAULT/CL_EACCES for memory outside mr or
 *   without write access, CL_ENOMEM when the heap has no room.
 * cl_ring_recv: the readable bytes from the oldest unreleased one, contiguous up to the ring's
 *   end (the next call returns the wrapped part); NULL and *len = 0 when none is readable now.
 *   Also retries postings a full submit queue held back.
 * cl_ring_recv_done: releases the oldest n bytes (n at most what is readable: CL_EINVAL, and
 *   nothing released, otherwise); returns 0, or the error a posting met (also kept as status).
 * cl_ring_status: 0 while more may arrive; 1 once the stream ended (the peer closed; what
 *   cl_ring_recv still returns is the last of it); a negative CL_E* code once the flow failed
 *   (CL_ECONNRESET, CL_ETIMEDOUT, ...) or a posting did: bytes that arrived before stay readable.
 * cl_ring_destroy: CL_EBUSY, keeping the ring, while chunks are posted to a flow that is still
 *   open (abort or close it and hand the completions to the ring until CL_EV_CLOSED): the NIC
 *   may still write into them. Once the daemon is gone it always frees the ring. */
typedef struct cl_ring cl_ring;
struct cl_ring_attr {
  cl_sq* sq;       /* the ring posts its chunks here */
  cl_flow flow;    /* an open flow with nothing received yet */
  const cl_mr* mr; /* NULL: the heap */
  void* addr;      /* the ring's first byte, in mr; NULL: allocated from the heap */
  uint64_t size;   /* ring bytes, > 0 */
  uint32_t chunk;  /* bytes per posted chunk; 0: 256 KiB */
};
CL_API int cl_ring_create(cl_ctx* ctx, const struct cl_ring_attr* attr, cl_ring** out);
CL_API int cl_ring_destroy(cl_ring* ring);
CL_API int cl_ring_consume(cl_ring* ring, const struct cl_wc* wc);
CL_API void* cl_ring_recv(cl_ring* ring, size_t* len);
CL_API int cl_ring_recv_done(cl_ring* ring, size_t n);
CL_API int cl_ring_status(const cl_ring* ring);
/* ---- Messages on a flow ----
 * cl_listen_ex and cl_connect_ex are cl_listen and cl_connect with flags. CL_FLOW_MESSAGE opens
 * the flow in message mode (TCP): each CL_OP_FLOW_SEND is one message (1 byte to 1 GB) and each
 * CL_OP_FLOW_RECV takes exactly one message, in order: its completion has the message's length
 * in `length` and again in `imm`. A buffer shorter than its message gets the message's first
 * bytes, status CL_ETRUNC, `length` the bytes written and `imm` the message's length; the rest
 * of that message is dropped, never delivered into the next buffer. No CL_EV_DATA events.
 * The boundaries travel in a TCP option (docs/transports.md), so both ends must be Cleave
 * in message mode: a connect to a peer without it (Linux) ends in CL_EV_REFUSED with status
 * CL_EPROTONOSUPPORT (after a RST to the peer), and a message-mode listener answers stream
 * connects with a RST (ECONNREFUSED at a Linux peer); stream flows are unchanged. A peer sends a
 * message only while the receiver has a receive posted for it: post receives ahead. Transports
 * without message mode answer CL_EOPNOTSUPP; a cleaved older than message mode answers CL_EINVAL.
 * Flags the library does not know: CL_EOPNOTSUPP. */
enum { CL_FLOW_MESSAGE = 1 << 0 };
CL_API int cl_listen_ex(cl_ctx* ctx, cl_cq* cq, const struct sockaddr_in* addr,
                        const char* transport, unsigned flags, uint32_t* listener);
CL_API int cl_connect_ex(cl_ctx* ctx, cl_cq* cq, const struct sockaddr_in* addr,
                         const char* transport, unsigned flags, cl_flow* flow);

/* ---- RDMA: RoCEv2 reliable-connection queue pairs, verbs-style ----
 * A protection domain (PD) is the context's: cl_pd_alloc gives it once (CL_EBUSY for a second),
 * and every MR of the context belongs to it. An MR registered with CL_ACCESS_REMOTE_READ or
 * _WRITE has an rkey a peer names it by; remote addresses are zero-based (an offset into the
 * MR), like IBV_ACCESS_ZERO_BASED. cl_mr_lkey is the MR's id.
 *
 * A queue pair is a flow of cleaved's rocev2 transport (cleavectl qp list shows it), or of its
 * solar transport when its params say "transport solar" (see "Block I/O over Solar"). It starts in
 * RESET; cl_qp_modify moves it RESET -> INIT (qp_access_flags) -> RTR (path_mtu, dest_qp_num,
 * rq_psn, and the peer's address: CL_QP_AV) -> RTS (sq_psn, timeout, retry_cnt, rnr_retry), as
 * ibv_modify_qp does; any state may go to ERR or RESET. CL_EINVAL for a transition or value it
 * does not take. All its completions go to init_attr.cq, whose room must cover max_send_wr +
 * max_recv_wr; the daemon takes a request only while the CQ can hold its completion.
 *
 * Work requests: cl_qp_post_send takes SEND, SEND with immediate, RDMA WRITE (with immediate)
 * and RDMA READ; cl_qp_post_recv posts receive buffers, consumed by the peer's SENDs and WRITEs
 * with immediate, in order. Completions (cl_poll_cq on the QP's CQ): wc.flow is cl_qp_flow(qp);
 * wc.opcode CL_OP_FLOW_SEND, CL_OP_RDMA_WRITE, CL_OP_RDMA_READ, or CL_OP_FLOW_RECV with
 * CL_WC_RECV (and CL_WC_IMM with imm; CL_WC_RDMA_WRITE when a WRITE with immediate consumed it,
 * length then being what it wrote). Status: 0, CL_ETIMEDOUT (retries ran out), CL_EBUSY (RNR
 * retries ran out), CL_EACCES (the peer refused the rkey), CL_EINVAL (the peer found the request
 * invalid, e.g. a SEND longer than its receive: that receive fails with CL_ETRUNC), CL_EIO, and
 * CL_ECANCELED (flushed: the QP is in ERR, or destroyed). A failed request moves the QP to ERR;
 * the peer's QP goes to ERR as well when it refused the request (CL_EACCES, CL_EINVAL).
 *
 * Library side: the QP's requests and receives travel to cleaved on a submit queue of the
 * library's own, bound to the CQ, of the next power of two >= max(64, max_send_wr + max_recv_wr)
 * entries; the CQ's room (as for cl_sq_create: CL_EINVAL when it lacks it) counts max_send_wr +
 * max_recv_wr. A QP needs a cleaved that speaks ABI version 3: with an older one cl_pd_alloc,
 * cl_qp_create and the others fail with CL_EOPNOTSUPP and nothing is sent. cl_qp_post_send and
 * cl_qp_post_recv check what the library can, all or nothing as cl_post_send: CL_EOPNOTSUPP for
 * an unknown opcode, CL_EINVAL for a length over 1 GiB, CL_EFAULT for (offset, length) outside
 * the local MR (or remote_addr + length past 2^64), CL_EACCES when the local MR lacks the right
 * (SEND and WRITE read it: CL_ACCESS_READ; READ and receives write it: CL_ACCESS_WRITE). The
 * daemon checks again, and the peer checks the rkey. cl_qp_modify: CL_EOPNOTSUPP for mask bits
 * it does not know, CL_EINVAL for a qp_state past CL_QPS_ERR; cl_qp_query reads everything.
 *
 * Connecting: cl_qp_local_dest fills this side's half (QP number, a random first PSN, the GID,
 * and an MR's rkey, address and length to offer); cl_qp_exchange swaps halves over a connected
 * stream socket, one text line each way as ibv_rc_pingpong does; cl_qp_connect moves the QP to
 * RTS towards the peer's half.
 *
 * The line (version 1) is 101 characters and a newline, as printf would make it from
 *
 *   "CLEAVE-RC 1 %06x:%06x:%s:%08x:%016llx:%016llx\n", qpn, psn, gid, rkey, addr, length
 *
 * where %s is the 16 GID bytes in order, two hex digits each (32). Every field has exactly that
 * many hex digits; written in lowercase, read in either case. Anything else is CL_EPROTO:
 * another prefix or version, another length, a character that is not a hex digit or ':' where
 * one belongs, or no newline within 128 bytes. The peer's line is read a byte at a time, so no
 * byte after its newline is taken from the socket. EOF before the newline: CL_ECONNRESET. */
typedef struct cl_pd cl_pd;
typedef struct cl_qp cl_qp;

enum cl_qp_state {
  CL_QPS_RESET = 0,
  CL_QPS_INIT = 1,
  CL_QPS_RTR = 2,
  CL_QPS_RTS = 3,
  CL_QPS_ERR = 4
};

/* cl_qp_modify mask bits, and which fields of cl_qp_attr they set. */
enum {
  CL_QP_STATE = 1 << 0,
  CL_QP_PATH_MTU = 1 << 1,
  CL_QP_DEST_QPN = 1 << 2,
  CL_QP_RQ_PSN = 1 << 3,
  CL_QP_SQ_PSN = 1 << 4,
  CL_QP_TIMEOUT = 1 << 5,
  CL_QP_RETRY_CNT = 1 << 6,
  CL_QP_RNR_RETRY = 1 << 7,
  CL_QP_MIN_RNR_TIMER = 1 << 8,
  CL_QP_MAX_QP_RD_ATOMIC = 1 << 9,
  CL_QP_MAX_DEST_RD_ATOMIC = 1 << 10,
  CL_QP_ACCESS_FLAGS = 1 << 11,
  CL_QP_SELECTIVE_REPEAT = 1 << 12, /* Cleave's IRN-style recovery: both ends must set it */
  CL_QP_RATE_LIMIT = 1 << 13,
  CL_QP_AV = 1 << 14 /* remote_ip */
};

struct cl_qp_attr {
  uint32_t qp_state;          /* enum cl_qp_state */
  uint32_t path_mtu;          /* bytes: 256, 512, 1024, 2048, 4096 */
  uint32_t dest_qp_num;       /* the peer's QP number */
  uint32_t rq_psn;            /* the first PSN expected from the peer */
  uint32_t sq_psn;            /* our first PSN */
  uint32_t remote_ip;         /* the peer's IPv4 address (its GID), network order */
  uint32_t qp_access_flags;   /* CL_ACCESS_REMOTE_READ | CL_ACCESS_REMOTE_WRITE */
  uint8_t timeout;            /* local ACK timeout 4.096 us * 2^timeout; 0: none */
  uint8_t retry_cnt;          /* 0..7 */
  uint8_t rnr_retry;          /* 0..7, 7: forever */
  uint8_t min_rnr_timer;      /* the RNR NAK timer code this side sends (IBTA table) */
  uint8_t max_rd_atomic;      /* READs outstanding as requester, 1..16 */
  uint8_t max_dest_rd_atomic; /* READs queued as responder, 1..16 */
  uint8_t selective_repeat;   /* 0 or 1 */
  uint8_t reserved;
  uint64_t rate_limit_kbps; /* the sending rate's ceiling; 0: none */
};

struct cl_qp_init_attr {
  cl_cq* cq;            /* every completion of the QP */
  uint32_t max_send_wr; /* 1..4096 */
  uint32_t max_recv_wr; /* 1..4096 */
  const char* params;   /* NULL, or "key value ...": "transport solar" picks the QP's transport
                           (default rocev2), "volume <MR id>" a Solar target's volume (cl_blk_*),
                           "via A,B" the peer's other addresses (Solar: routes, cl_blk_create);
                           the others are the transport's (rocev2: "dcqcn on",
                           "spray 8" with CL_QP_SELECTIVE_REPEAT) */
};

enum {
  CL_WR_SEND = 0,
  CL_WR_SEND_WITH_IMM = 1,
  CL_WR_RDMA_WRITE = 2,
  CL_WR_RDMA_WRITE_WITH_IMM = 3,
  CL_WR_RDMA_READ = 4
};

struct cl_qp_wr {
  uint64_t wr_id;
  const cl_mr* mr;      /* local memory: NULL is the heap */
  uint64_t offset;      /* into mr */
  uint32_t length;      /* 0 .. 1 GiB */
  uint32_t opcode;      /* CL_WR_* */
  uint32_t imm;         /* *_WITH_IMM */
  uint32_t rkey;        /* RDMA: the peer's MR */
  uint64_t remote_addr; /* RDMA: offset into the peer's MR */
};

/* This side's half of a connection, and the peer's. */
struct cl_qp_dest {
  uint32_t qpn;
  uint32_t psn;
  uint8_t gid[16]; /* IPv4-mapped: ::ffff:a.b.c.d */
  uint32_t rkey;   /* an MR offered to the peer (0: none) */
  uint64_t addr;   /* its first byte's remote address (zero-based: 0) */
  uint64_t length; /* its length */
};

CL_API int cl_pd_alloc(cl_ctx* ctx, cl_pd** out);
CL_API int cl_pd_dealloc(cl_pd* pd);         /* CL_EBUSY while QPs of it exist */
CL_API uint32_t cl_mr_lkey(const cl_mr* mr); /* cl_mr_id: UINT32_MAX for NULL */
CL_API uint32_t cl_mr_rkey(const cl_mr* mr); /* 0: no remote access (or a daemon before v3) */

CL_API int cl_qp_create(cl_pd* pd, const struct cl_qp_init_attr* attr, cl_qp** out);
CL_API int cl_qp_modify(cl_qp* qp, const struct cl_qp_attr* attr, unsigned mask);
CL_API int cl_qp_query(cl_qp* qp, struct cl_qp_attr* attr);
/* Pending requests complete with CL_ECANCELED on the CQ first; frees the handle. */
CL_API int cl_qp_destroy(cl_qp* qp);
CL_API uint32_t cl_qp_num(const cl_qp* qp); /* 0 for NULL */
CL_API cl_flow cl_qp_flow(const cl_qp* qp); /* UINT32_MAX for NULL */
/* Post up to n requests; returns how many were posted (fewer when the QP's queue is full) or a
 * negative code, as cl_post_send. One thread at a time per QP for both calls. */
CL_API int cl_qp_post_send(cl_qp* qp, const struct cl_qp_wr* wr, unsigned n);
CL_API int cl_qp_post_recv(cl_qp* qp, const struct cl_recv_wr* wr, unsigned n);

/* mr may be NULL (rkey 0). The PSN is random (24 bits). */
CL_API int cl_qp_local_dest(cl_qp* qp, const cl_mr* mr, struct cl_qp_dest* out);
/* Writes local's line to fd, reads the peer's (both within timeout_ms; < 0 forever); *remote is
 * written only on success. CL_EPROTO for a line that does not parse, CL_ETIMEDOUT,
 * CL_ECONNRESET at EOF, or a negative errno of the socket. */
CL_API int cl_qp_exchange(int fd, const struct cl_qp_dest* local, struct cl_qp_dest* remote,
                          int timeout_ms);
/* INIT (remote read and write allowed), RTR and RTS towards `remote`, with `local`'s PSN. `opt`
 * (may be NULL) overrides the defaults for the fields in opt_mask. The steps and the defaults:
 *
 *   INIT  CL_QP_ACCESS_FLAGS (CL_ACCESS_REMOTE_READ | CL_ACCESS_REMOTE_WRITE)
 *   RTR   CL_QP_PATH_MTU (4096, or the largest the daemon's port carries if less),
 *         CL_QP_DEST_QPN (remote->qpn), CL_QP_RQ_PSN (remote->psn), CL_QP_AV (the last 4
 *         bytes of remote->gid), CL_QP_MAX_DEST_RD_ATOMIC (16), CL_QP_MIN_RNR_TIMER (12),
 *         CL_QP_SELECTIVE_REPEAT (only if in opt_mask)
 *   RTS   CL_QP_SQ_PSN (local->psn), CL_QP_TIMEOUT (14), CL_QP_RETRY_CNT (7),
 *         CL_QP_RNR_RETRY (7), CL_QP_MAX_QP_RD_ATOMIC (16), CL_QP_RATE_LIMIT (only if in
 *         opt_mask)
 *
 * CL_EINVAL for CL_QP_STATE in opt_mask, a remote GID that is not IPv4-mapped (unless CL_QP_AV
 * is in opt_mask), or a QPN or PSN over 24 bits; else the first failing step's error (the QP
 * stays where that step found it). */
CL_API int cl_qp_connect(cl_qp* qp, const struct cl_qp_dest* local, const struct cl_qp_dest* remote,
                         const struct cl_qp_attr* opt, unsigned opt_mask);

/* ---- Block I/O over Solar ----
 * Solar, cleaved's block transport, moves blocks between an initiator and a target over one or
 * more paths (UDP source ports 0xC000 | path, to port 7000), each with its own congestion window
 * and RTT; a path that stops answering is declared down, its blocks go over the others at once,
 * and it comes back by itself when probes are answered again. A connection is a queue pair of
 * the solar transport, made by cl_blk_create and connected as any QP (cl_qp_local_dest,
 * cl_qp_exchange, cl_qp_connect): the QP numbers are the connection's numbers; PSNs, RoCE's
 * timers and access flags are taken and ignored. cleavectl qp list shows it, with its paths.
 *
 * The target exports a volume: an MR of its own registered with CL_ACCESS_REMOTE_READ |
 * CL_ACCESS_REMOTE_WRITE (CL_EACCES otherwise), which its peer writes and reads at byte offsets,
 * with no key, while the QP is in RTS. The initiator (volume NULL) posts I/Os: cl_blk_write
 * writes `length` bytes of (mr, offset) at volume offset `at`; cl_blk_read reads `length` bytes
 * from volume offset `at` into (mr, offset). Each I/O is cut into blocks (params "block"), each
 * one packet with its own offset and CRC32C, and completes once on the QP's CQ: opcode
 * CL_OP_RDMA_WRITE when every block is acknowledged, CL_OP_RDMA_READ when every block has
 * arrived intact; wc.wr_id, wc.length. Status 0; CL_EINVAL when the range passes the volume's
 * end, the I/O has more than 65535 blocks, or the QP is not in RTS; CL_EOPNOTSUPP on the
 * target's QP; CL_ECANCELED when the QP went to ERR or was destroyed first; CL_ETIMEDOUT when it
 * was not done io_timeout_ms after it was posted (every path down that long). Blocks lost,
 * corrupted or on a path that went down are sent again: an I/O does not fail for them.
 *
 * params: NULL or "paths N block B io_timeout_ms T via A,B": paths 1..64 (default 1), block
 * 256..4096 bytes and at most the path MTU (default the path MTU), io_timeout_ms 0 (never) to
 * 3600000 (default 30000); via: the peer's other addresses (at most 3; its first is the one
 * cl_qp_connect gives), each reached through another of cleaved's ports: the connection gets a
 * route to each (CL_EINVAL at create past the daemon's ports less one, at connect for one reached
 * through a port another route takes; CL_ENETUNREACH for none), and path p goes over route
 * p % routes, so a cut wire takes down only the paths on it. The peer gives ours likewise.
 * depth (1..4096): I/Os in flight at most (the QP's max_send_wr); the CQ needs room for
 * depth + 1 completions. It is cl_qp_create with params
 * "transport solar volume <cl_mr_id(volume)> " + params.
 * cl_blk_write, cl_blk_read: 1 when posted, 0 when `depth` I/Os are in flight, or an error as
 * cl_qp_post_send gives (the local MR needs CL_ACCESS_READ to write from, _WRITE to read into). */
CL_API int cl_blk_create(cl_pd* pd, cl_cq* cq, const cl_mr* volume, uint32_t depth,
                         const char* params, cl_qp** out);
CL_API int cl_blk_write(cl_qp* qp, uint64_t wr_id, const cl_mr* mr, uint64_t offset,
                        uint32_t length, uint64_t at);
CL_API int cl_blk_read(cl_qp* qp, uint64_t wr_id, const cl_mr* mr, uint64_t offset, uint32_t length,
                       uint64_t at);

#ifdef __cplusplus
}
#endif

#endif /* CLEAVE_CLEAVE_H */
