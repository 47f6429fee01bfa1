// app_fuzz.cc - the app socket (src/dataplane/app_server.*, src/ipc/unix_msg.h, the messages of
// src/ipc/shm_abi.h): apps connect to a real AppServer over SOCK_SEQPACKET and send it messages
// from the input, with file descriptors riding along (eventfds, sealed and unsealed memfds of any
// size, /dev/null, several at once), as an app would. The daemon's main loop is played by the
// harness (epoll, on_event, on_tick); the dataplane answers over the control channel
// (fake_dataplane.h, with the real AppPath for the app tables).
//
// Messages are built with the right header or a fuzzed one (magic, version, type, length) and a
// body straight from the input, so every message type's checks and handlers (hello, pipes, MRs,
// listen and connect, queue pairs) and the framing (short, long, truncated, descriptors where
// none belong) are reached.
//
// Invariants: every message gets exactly one reply, of the type its request calls for or a
// protocol error (CL_EPROTO) after which the daemon closes the connection; replies carry the
// magic, the request's sequence number and a status of 0 or a CL_E* code; an accepted hello
// brings the app's region, whose header names the app; and when every app has gone, the daemon
// holds no app (neither it nor the dataplane) and no file descriptor it did not hold before.
#include <cleave/cleave.h>
#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "config.h"
#include "control/app_server.h"
#include "ctl_channel.h"
#include "fake_dataplane.h"
#include "fuzz_input.h"
#include "shm_abi.h"
#include "unix_msg.h"

namespace cleave::fuzz {
namespace {

using abi::MsgType;

struct World {
  World() {
    eal_init("fuzz_app");
    spdlog::set_level(spdlog::level::off);
    const std::string yaml =
        "apps:\n  max_apps: 4\n  quota: {memory_mb: 8, region_mb: 1, pipes: 6,"
        " mrs: 3, flows: 8, pipe_entries: 256, error_budget: 64}\n"
        "  allow:\n    - uid: " +
        std::to_string(getuid()) +
        "\neal: {hugepages: off}\n"
        "ports:\n  - name: p0\n    device: net_null0\n    ipv4: 10.0.0.1/24\n";
    dp::ConfigResult r = dp::parse_config(yaml, "fuzz");
    if (!r.config) std::abort();
    cfg = *r.config;
    ctl = std::make_unique<dp::ShardChannels>(1);
    fake = std::make_unique<FakeDataplane>((*ctl)[0]);
    epfd = epoll_create1(EPOLL_CLOEXEC);
    path = "/tmp/cleave-fuzz-app-" + std::to_string(getpid()) + ".sock";
    server = std::make_unique<dp::AppServer>(cfg, path, epfd, *ctl, std::vector<uint16_t>{});
  }
  dp::Config cfg;
  std::unique_ptr<dp::ShardChannels> ctl;
  std::unique_ptr<FakeDataplane> fake;
  int epfd = -1;
  std::string path;
  std::unique_ptr<dp::AppServer> server;
};

World* g_world = nullptr;

size_t open_fds() {
  size_t n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = readdir(d))
    n += e->d_name[0] != '.';
  closedir(d);
  return n - 1;  // the directory's own
}

// The daemon's loop: everything ready, until nothing is.
void pump() {
  epoll_event ev[16];
  for (int rounds = 0; rounds < 64; rounds++) {
    const int n = epoll_wait(g_world->epfd, ev, 16, 0);
    if (n <= 0) return;
    for (int i = 0; i < n; i++)
      g_world->server->on_event(ev[i].data.fd, ev[i].events);
  }
}

// The apps' messages: their type, size and the reply type each calls for.
struct Kind {
  MsgType type;
  size_t size;
  MsgType reply;
};
constexpr std::array<Kind, 12> kKinds = {{
    {MsgType::kHello, sizeof(abi::Hello), MsgType::kHelloReply},
    {MsgType::kPipeCreate, sizeof(abi::PipeCreate), MsgType::kPipeReply},
    {MsgType::kPipeDestroy, sizeof(abi::PipeDestroy), MsgType::kReply},
    {MsgType::kMrReg, sizeof(abi::MrReg), MsgType::kMrReply},
    {MsgType::kMrDereg, sizeof(abi::MrDereg), MsgType::kReply},
    {MsgType::kListen, sizeof(abi::FlowOpen), MsgType::kListenReply},
    {MsgType::kConnect, sizeof(abi::FlowOpen), MsgType::kConnectReply},
    {MsgType::kUnlisten, sizeof(abi::Unlisten), MsgType::kReply},
    {MsgType::kQpCreate, sizeof(abi::QpCreate), MsgType::kQpReply},
    {MsgType::kQpModify, sizeof(abi::QpModify), MsgType::kReply},
    {MsgType::kQpQuery, sizeof(abi::QpId), MsgType::kQpQueryReply},
    {MsgType::kQpDestroy, sizeof(abi::QpId), MsgType::kReply},
}};

// A descriptor to send along, made as the input says; -1 for none.
int make_fd(uint8_t kind, uint32_t size) {
  switch (kind % 6) {
    case 1:
      return eventfd(0, EFD_CLOEXEC);
    case 2:
    case 3: {
      int fd = memfd_create("fuzz-mr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
      if (fd < 0) return -1;
      if (ftruncate(fd, size % (4 << 20)) != 0) {
        close(fd);
        return -1;
      }
      if (kind % 6 == 2) fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK);
      return fd;
    }
    case 4:
      return open("/dev/null", O_RDWR | O_CLOEXEC);
    default:
      return -1;
  }
}

// Sends one message with up to two descriptors (the daemon takes at most one).
bool send_with_fds(int sock, const uint8_t* buf, size_t len, int fd1, int fd2) {
  if (fd2 < 0) return ipc::send_msg(sock, buf, len, fd1, MSG_DONTWAIT) == ssize_t(len);
  iovec iov{const_cast<uint8_t*>(buf), len};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = cbuf;
  m.msg_controllen = sizeof cbuf;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(2 * sizeof(int));
  const int fds[2] = {fd1, fd2};
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  return sendmsg(sock, &m, MSG_DONTWAIT | MSG_NOSIGNAL) == ssize_t(len);
}

struct Client {
  int fd = -1;
  uint16_t version = abi::kAbiVersion;  // what the app asked for in its hello
  uint32_t seq = 1;
};

bool known_status(int32_t s) {
  return s <= 0 && s >= CL_ETRUNC;
}

// After one message: exactly one reply, as `want` calls for, or CL_EPROTO and the end.
void expect_reply(Client& c, const abi::MsgHeader& sent, const Kind* want) {
  alignas(8) uint8_t buf[abi::kMaxMessage + 64];
  int fds[4];
  int nfds = 0;
  bool trunc = false;
  const ssize_t n = ipc::recv_msg(c.fd, buf, sizeof buf, MSG_DONTWAIT, fds, 4, &nfds, &trunc);
  FUZZ_CHECK(n >= ssize_t(sizeof(abi::MsgHeader)) && !trunc);
  abi::MsgHeader h;
  std::memcpy(&h, buf, sizeof h);
  FUZZ_CHECK(h.magic == abi::kMagic && known_status(h.status));
  const auto type = MsgType(h.type);
  const bool protocol_error = type == MsgType::kReply && h.status == CL_EPROTO;
  FUZZ_CHECK(protocol_error || (want != nullptr && type == want->reply));
  // The request's sequence number; a message too short to have one is answered with 0.
  FUZZ_CHECK(h.seq == sent.seq || (protocol_error && h.seq == 0));
  if (type == MsgType::kHelloReply && h.status == 0) {
    // The region comes along; its header names the app.
    abi::HelloReply r;
    FUZZ_CHECK(size_t(n) == sizeof r && nfds == 1);
    std::memcpy(&r, buf, sizeof r);
    void* p = mmap(nullptr, r.region_size, PROT_READ, MAP_SHARED, fds[0], 0);
    FUZZ_CHECK(p != MAP_FAILED);
    const auto* rh = static_cast<const abi::RegionHeader*>(p);
    FUZZ_CHECK(rh->magic == abi::kMagic && rh->app_id == r.app_id);
    munmap(p, r.region_size);
  } else {
    FUZZ_CHECK(nfds == 0);
  }
  for (int i = 0; i < nfds; i++)
    close(fds[i]);
  // Nothing more, unless the connection ended (a protocol error, a refused hello).
  const ssize_t more = ipc::recv_msg(c.fd, buf, sizeof buf, MSG_DONTWAIT, fds, 4, &nfds, &trunc);
  for (int i = 0; i < nfds; i++)
    close(fds[i]);
  FUZZ_CHECK(more == -EAGAIN || more == 0);
  if (protocol_error) FUZZ_CHECK(more == 0);
  if (more == 0) {
    close(c.fd);
    c.fd = -1;
  }
}

}  // namespace
}  // namespace cleave::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  cleave::fuzz::g_world = new cleave::fuzz::World();
  // The world lives as long as the process; its socket file must not outlive it.
  std::atexit([] { unlink(cleave::fuzz::g_world->path.c_str()); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cleave;
  using namespace cleave::fuzz;
  const size_t baseline = open_fds();
  Reader r(data, size);
  std::array<Client, 3> clients;
  while (!r.done()) {
    const uint8_t op = r.u8();
    Client& c = clients[(op >> 4) % clients.size()];
    switch (op % 4) {
      case 0: {  // an app connects
        if (c.fd >= 0) break;
        c = Client{};
        c.fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::memcpy(a.sun_path, g_world->path.c_str(), g_world->path.size() + 1);
        FUZZ_CHECK(connect(c.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        pump();
        break;
      }
      case 1: {  // a message
        const uint8_t how = r.u8();
        const Kind* k = (how & 0x80) ? nullptr : &kKinds[how % kKinds.size()];
        std::vector<uint8_t> msg(k != nullptr ? k->size : 16 + r.u8() % 160);
        abi::MsgHeader h{};
        h.magic = (how & 0x40) ? r.u32() : abi::kMagic;
        h.version = (how & 0x20) ? r.u16() : c.version;
        h.type = k != nullptr ? uint16_t(k->type) : r.u16();
        h.seq = c.seq++;
        auto body = r.bytes(msg.size() - sizeof h);
        std::memcpy(msg.data(), &h, sizeof h);
        if (!body.empty()) std::memcpy(msg.data() + sizeof h, body.data(), body.size());
        if (k != nullptr && k->type == MsgType::kHello) {
          abi::Hello hello;
          std::memcpy(&hello, msg.data(), sizeof hello);
          c.version = std::min(hello.max_version, abi::kAbiVersion);
        }
        // A length other than the message's: cut or padded.
        if (const int8_t delta = int8_t(r.u8()); delta != 0 && (how & 0x10)) {
          msg.resize(std::clamp<ssize_t>(ssize_t(msg.size()) + delta, 1, abi::kMaxMessage + 8));
        }
        const uint8_t fd_kind = r.u8();
        const uint32_t fd_size = r.u32();
        const int fd1 = make_fd(fd_kind, fd_size);
        const int fd2 = (fd_kind & 0x80) ? make_fd(fd_kind >> 3, fd_size) : -1;
        const bool sent = c.fd >= 0 && send_with_fds(c.fd, msg.data(), msg.size(), fd1, fd2);
        if (fd1 >= 0) close(fd1);
        if (fd2 >= 0) close(fd2);
        if (!sent) break;
        pump();
        expect_reply(c, h, k);
        break;
      }
      case 2:  // an app goes
        if (c.fd >= 0) {
          close(c.fd);
          c.fd = -1;
          pump();
        }
        break;
      case 3:
        g_world->server->on_tick();
        pump();
        break;
    }
  }
  for (Client& c : clients) {
    if (c.fd >= 0) close(c.fd);
  }
  pump();
  FUZZ_CHECK(g_world->server->apps() == 0);
  dp::ctl::AppCountersList list;
  list.rows.reserve(FakeDataplane::kMaxApps);
  auto q = (*g_world->ctl)[0].call(dp::CtlRequest::make(std::move(list)), std::chrono::seconds(5));
  FUZZ_CHECK(q != nullptr && q->as<dp::ctl::AppCountersList>().rows.empty());
  FUZZ_CHECK(open_fds() == baseline);
  return 0;
}
