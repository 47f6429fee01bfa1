// qp.cc - connecting queue pairs: this side's half of a connection (cl_qp_local_dest), the
// exchange of halves over an out-of-band stream socket (cl_qp_exchange), and the walk from RESET
// to RTS towards the peer's half (cl_qp_connect), and block I/O over Solar QPs (cl_blk_*).
// Built on the public calls only.
//
// The exchange is one text line each way, in the spirit of ibv_rc_pingpong's "LID:QPN:PSN:GID"
// (the format is in cleave.h). The peer is untrusted: the line is read a byte at a time, so
// nothing past its newline is taken from the socket (the app may use the socket afterwards), at
// most kLineMax bytes are read, and the whole exchange is bounded by the caller's timeout.
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "internal.h"

namespace {

constexpr char kLinePrefix[] = "CLEAVE-RC 1 ";
// "CLEAVE-RC 1 " qpn:psn:gid:rkey:addr:length "\n": fixed widths of hex digits.
constexpr size_t kPrefixLen = sizeof kLinePrefix - 1;
constexpr size_t kLineLen = kPrefixLen + 6 + 1 + 6 + 1 + 32 + 1 + 8 + 1 + 16 + 1 + 16 + 1;
constexpr size_t kLineMax = 128;  // a peer's line is read no further than this
static_assert(kLineLen <= kLineMax);

constexpr uint32_t kPsnMask = 0xffffff;

int64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

// Waits for `events` on fd until the deadline (-1: none). 0 when ready, or a CL_E* code.
int wait_fd(int fd, short events, int64_t deadline) {
  for (;;) {
    int ms = -1;
    if (deadline >= 0) {
      int64_t left = deadline - now_ms();
      if (left <= 0) return CL_ETIMEDOUT;
      ms = left > INT32_MAX ? INT32_MAX : static_cast<int>(left);
    }
    pollfd p{fd, events, 0};
    int r = poll(&p, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -errno;
    if (r == 0) continue;  // the deadline check above decides
    if ((p.revents & POLLNVAL) != 0) return CL_EINVAL;
    return 0;  // readable, writable, or an error or hang-up the next call reports
  }
}

int write_all(int fd, const char* p, size_t n, int64_t deadline) {
  while (n > 0) {
    if (int e = wait_fd(fd, POLLOUT, deadline)) return e;
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && errno == ENOTSOCK) w = write(fd, p, n);  // a pipe, in tests
    if (w < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (w < 0) return -errno;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

// Reads one line (without its newline) into buf, a byte at a time. CL_EPROTO when no newline
// comes within kLineMax bytes, CL_ECONNRESET at EOF before it.
int read_line(int fd, char (&buf)[kLineMax + 1], size_t* len, int64_t deadline) {
  size_t n = 0;
  for (;;) {
    if (int e = wait_fd(fd, POLLIN, deadline)) return e;
    char c;
    ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT);
    if (r < 0 && errno == ENOTSOCK) r = read(fd, &c, 1);
    if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (r < 0) return -errno;
    if (r == 0) return CL_ECONNRESET;
    if (c == '\n') break;
    if (n == kLineMax) return CL_EPROTO;
    buf[n++] = c;
  }
  buf[n] = '\0';
  *len = n;
  return 0;
}

// `digits` hex digits (either case) at *p, advancing it; false if they are not.
bool hex_field(const char** p, unsigned digits, uint64_t* out) {
  uint64_t v = 0;
  for (unsigned i = 0; i < digits; i++) {
    char c = (*p)[i];
    unsigned d;
    if (c >= '0' && c <= '9') {
      d = static_cast<unsigned>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      d = static_cast<unsigned>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      d = static_cast<unsigned>(c - 'A' + 10);
    } else {
      return false;
    }
    v = v << 4 | d;
  }
  *p += digits;
  *out = v;
  return true;
}

bool parse_line(const char* line, size_t len, cl_qp_dest* d) {
  if (len != kLineLen - 1 || std::memcmp(line, kLinePrefix, kPrefixLen) != 0) return false;
  const char* p = line + kPrefixLen;
  uint64_t qpn, psn, rkey, addr, length;
  auto sep = [&p] { return *p++ == ':'; };
  if (!hex_field(&p, 6, &qpn) || !sep() || !hex_field(&p, 6, &psn) || !sep()) return false;
  for (uint8_t& g : d->gid) {
    uint64_t b;
    if (!hex_field(&p, 2, &b)) return false;
    g = static_cast<uint8_t>(b);
  }
  if (!sep() || !hex_field(&p, 8, &rkey) || !sep() || !hex_field(&p, 16, &addr) || !sep() ||
      !hex_field(&p, 16, &length))
    return false;
  d->qpn = static_cast<uint32_t>(qpn);
  d->psn = static_cast<uint32_t>(psn);
  d->rkey = static_cast<uint32_t>(rkey);
  d->addr = addr;
  d->length = length;
  return true;
}

// A random first PSN: the kernel's generator; if it fails (it does not on any Linux cleaved
// runs on), the clock mixed (splitmix64), which is still unpredictable enough for a PSN.
uint32_t random_psn() {
  uint32_t v;
  ssize_t r;
  do {
    r = getrandom(&v, sizeof v, 0);
  } while (r < 0 && errno == EINTR);
  if (r != static_cast<ssize_t>(sizeof v)) {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t z = (uint64_t(ts.tv_sec) << 30 ^ uint64_t(ts.tv_nsec)) + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    v = static_cast<uint32_t>(z ^ (z >> 31));
  }
  return v & kPsnMask;
}

bool ipv4_mapped(const uint8_t (&gid)[16]) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid, kPrefix, sizeof kPrefix) == 0;
}

}  // namespace

int cl_qp_local_dest(cl_qp* qp, const cl_mr* mr, cl_qp_dest* out) {
  if (qp == nullptr || out == nullptr) return CL_EINVAL;
  if (mr != nullptr && mr->ctx != qp->ctx) return CL_EINVAL;
  *out = {};
  out->qpn = qp->qpn;
  out->psn = random_psn();
  out->gid[10] = 0xff;
  out->gid[11] = 0xff;
  for (int i = 0; i < 4; i++)
    out->gid[12 + i] = static_cast<uint8_t>(qp->ip >> (24 - 8 * i));
  if (mr != nullptr) {
    out->rkey = mr->rkey;
    out->addr = 0;  // zero-based
    out->length = mr->length;
  }
  return 0;
}

int cl_qp_exchange(int fd, const cl_qp_dest* local, cl_qp_dest* remote, int timeout_ms) {
  if (fd < 0 || local == nullptr || remote == nullptr) return CL_EINVAL;
  if (local->qpn > kPsnMask || local->psn > kPsnMask) return CL_EINVAL;
  int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
  char line[kLineMax + 1];
  int n = std::snprintf(line, sizeof line, "%s%06" PRIx32 ":%06" PRIx32 ":", kLinePrefix,
                        local->qpn, local->psn);
  for (uint8_t g : local->gid)
    n += std::snprintf(line + n, sizeof line - static_cast<size_t>(n), "%02x", g);
  n += std::snprintf(line + n, sizeof line - static_cast<size_t>(n),
                     ":%08" PRIx32 ":%016" PRIx64 ":%016" PRIx64 "\n", local->rkey, local->addr,
                     local->length);
  if (static_cast<size_t>(n) != kLineLen) return CL_EINVAL;  // cannot happen: fixed widths
  if (int e = write_all(fd, line, static_cast<size_t>(n), deadline)) return e;
  size_t len = 0;
  if (int e = read_line(fd, line, &len, deadline)) return e;
  cl_qp_dest d{};
  if (!parse_line(line, len, &d)) return CL_EPROTO;
  *remote = d;
  return 0;
}

int cl_qp_connect(cl_qp* qp, const cl_qp_dest* local, const cl_qp_dest* remote,
                  const cl_qp_attr* opt, unsigned opt_mask) {
  if (qp == nullptr || local == nullptr || remote == nullptr) return CL_EINVAL;
  if (opt == nullptr && opt_mask != 0) return CL_EINVAL;
  if ((opt_mask & ~unsigned{cleave::abi::kQpAttrAll}) != 0) return CL_EOPNOTSUPP;
  if ((opt_mask & CL_QP_STATE) != 0) return CL_EINVAL;  // the walk's to choose
  if (((opt_mask & CL_QP_AV) == 0 && !ipv4_mapped(remote->gid)) || remote->qpn > kPsnMask ||
      remote->psn > kPsnMask || local->psn > kPsnMask)
    return CL_EINVAL;

  cl_qp_attr a{};
  a.qp_access_flags = CL_ACCESS_REMOTE_READ | CL_ACCESS_REMOTE_WRITE;
  // 4096, or less when the port towards the peer carries less (RTR refuses a PMTU over it).
  a.path_mtu = qp->max_pmtu >= 256 && qp->max_pmtu < 4096 ? qp->max_pmtu : 4096;
  a.dest_qp_num = remote->qpn;
  a.rq_psn = remote->psn;
  std::memcpy(&a.remote_ip, remote->gid + 12, 4);  // network order, as the GID has it
  a.max_dest_rd_atomic = 16;
  a.min_rnr_timer = 12;
  a.sq_psn = local->psn;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 16;
  // The caller's fields replace the defaults; the two without one go only when asked for.
  auto take = [&](unsigned bit, auto member) {
    if ((opt_mask & bit) != 0) a.*member = opt->*member;
  };
  take(CL_QP_ACCESS_FLAGS, &cl_qp_attr::qp_access_flags);
  take(CL_QP_PATH_MTU, &cl_qp_attr::path_mtu);
  take(CL_QP_DEST_QPN, &cl_qp_attr::dest_qp_num);
  take(CL_QP_RQ_PSN, &cl_qp_attr::rq_psn);
  take(CL_QP_AV, &cl_qp_attr::remote_ip);
  take(CL_QP_MAX_DEST_RD_ATOMIC, &cl_qp_attr::max_dest_rd_atomic);
  take(CL_QP_MIN_RNR_TIMER, &cl_qp_attr::min_rnr_timer);
  take(CL_QP_SELECTIVE_REPEAT, &cl_qp_attr::selective_repeat);
  take(CL_QP_SQ_PSN, &cl_qp_attr::sq_psn);
  take(CL_QP_TIMEOUT, &cl_qp_attr::timeout);
  take(CL_QP_RETRY_CNT, &cl_qp_attr::retry_cnt);
  take(CL_QP_RNR_RETRY, &cl_qp_attr::rnr_retry);
  take(CL_QP_MAX_QP_RD_ATOMIC, &cl_qp_attr::max_rd_atomic);
  take(CL_QP_RATE_LIMIT, &cl_qp_attr::rate_limit_kbps);

  a.qp_state = CL_QPS_INIT;
  if (int e = cl_qp_modify(qp, &a, CL_QP_STATE | CL_QP_ACCESS_FLAGS)) return e;
  a.qp_state = CL_QPS_RTR;
  unsigned rtr = CL_QP_STATE | CL_QP_PATH_MTU | CL_QP_DEST_QPN | CL_QP_RQ_PSN | CL_QP_AV |
                 CL_QP_MAX_DEST_RD_ATOMIC | CL_QP_MIN_RNR_TIMER |
                 (opt_mask & CL_QP_SELECTIVE_REPEAT);
  if (int e = cl_qp_modify(qp, &a, rtr)) return e;
  a.qp_state = CL_QPS_RTS;
  unsigned rts = CL_QP_STATE | CL_QP_SQ_PSN | CL_QP_TIMEOUT | CL_QP_RETRY_CNT | CL_QP_RNR_RETRY |
                 CL_QP_MAX_QP_RD_ATOMIC | (opt_mask & CL_QP_RATE_LIMIT);
  return cl_qp_modify(qp, &a, rts);
}

// ---- block I/O over Solar: a QP of the solar transport, and RDMA WRITE and READ on it ----

int cl_blk_create(cl_pd* pd, cl_cq* cq, const cl_mr* volume, uint32_t depth, const char* params,
                  cl_qp** out) {
  if (out == nullptr) return CL_EINVAL;
  *out = nullptr;
  if (depth == 0) return CL_EINVAL;
  char p[cleave::abi::kQpParamsMax];
  int n = volume != nullptr
              ? std::snprintf(p, sizeof p, "transport solar volume %" PRIu32 " %s",
                              cl_mr_id(volume), params != nullptr ? params : "")
              : std::snprintf(p, sizeof p, "transport solar %s", params != nullptr ? params : "");
  if (n < 0 || size_t(n) >= sizeof p) return CL_EINVAL;
  cl_qp_init_attr a{};
  a.cq = cq;
  a.max_send_wr = depth;
  a.max_recv_wr = 1;  // Solar takes no receives
  a.params = p;
  return cl_qp_create(pd, &a, out);
}

namespace {

int blk_post(cl_qp* qp, uint32_t opcode, uint64_t wr_id, const cl_mr* mr, uint64_t offset,
             uint32_t length, uint64_t at) {
  cl_qp_wr w{};
  w.wr_id = wr_id;
  w.mr = mr;
  w.offset = offset;
  w.length = length;
  w.opcode = opcode;
  w.remote_addr = at;
  return cl_qp_post_send(qp, &w, 1);
}

}  // namespace

int cl_blk_write(cl_qp* qp, uint64_t wr_id, const cl_mr* mr, uint64_t offset, uint32_t length,
                 uint64_t at) {
  return blk_post(qp, CL_WR_RDMA_WRITE, wr_id, mr, offset, length, at);
}

int cl_blk_read(cl_qp* qp, uint64_t wr_id, const cl_mr* mr, uint64_t offset, uint32_t length,
                uint64_t at) {
  return blk_post(qp, CL_WR_RDMA_READ, wr_id, mr, offset, length, at);
}
