// unix_msg.h - one message over the app socket (SOCK_SEQPACKET) with file descriptors riding
// along by SCM_RIGHTS, for both cleaved and libcleave. Descriptors beyond what the caller takes
// are closed, so a peer can never make the receiver leak them.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cleave::ipc {

// Sends one message with `fd` attached when fd >= 0. Returns sendmsg's result (EINTR retried).
inline ssize_t send_msg(int sock, const void* buf, size_t len, int fd, int flags) {
  iovec iov{const_cast<void*>(buf), len};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  if (fd >= 0) {
    m.msg_control = cbuf;
    m.msg_controllen = sizeof cbuf;
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  ssize_t n;
  do {
    n = sendmsg(sock, &m, flags | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

// Receives one message into buf and keeps the first max_fds descriptors that came with it (close
// on exec) in fds, closing the rest. Returns its length, 0 on EOF, or -errno. `truncated` says
// the message or its descriptors did not fit.
inline ssize_t recv_msg(int sock, void* buf, size_t len, int flags, int* fds, int max_fds,
                        int* nfds, bool* truncated) {
  iovec iov{buf, len};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * 8)];
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = cbuf;
  m.msg_controllen = sizeof cbuf;
  ssize_t n;
  do {
    n = recvmsg(sock, &m, flags | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  *nfds = 0;
  *truncated = false;
  if (n < 0) return -errno;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; i++) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (*nfds < max_fds) {
        fds[(*nfds)++] = fd;
      } else {
        close(fd);
      }
    }
  }
  *truncated = (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  return n;
}

}  // namespace cleave::ipc
