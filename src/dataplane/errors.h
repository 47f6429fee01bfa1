// errors.h - errors inside the daemon and at the app ABI: one rule, pinned here.
//
// Inside the daemon a failure is a negative errno (transports' events, the NIC's commands, the
// app server's system calls); an app sees CL_E* codes (<cleave/cleave.h>), which are the same
// numbers where an errno fits: Linux's values, negated. So a negative errno passes to an app as
// it is, and the table below checks, code by code at compile time, that each CL_E* with an errno
// is exactly that errno. The codes from -1001 on are the ABI's own (CL_EDAEMON, CL_EVERSION,
// CL_EEVICTED, CL_ENORECV, CL_ETRUNC) and no errno becomes one, but the one exception named
// below (completion_status).
#pragma once

#include <cleave/cleave.h>

#include <cerrno>
#include <cstdint>

namespace cleave::dp {

// X(CL_E* code, the errno it is)
#define CLEAVE_ERRNO_CODES(X)            \
  X(CL_EPERM, EPERM)                     \
  X(CL_ENOENT, ENOENT)                   \
  X(CL_EIO, EIO)                         \
  X(CL_EAGAIN, EAGAIN)                   \
  X(CL_ENOMEM, ENOMEM)                   \
  X(CL_EACCES, EACCES)                   \
  X(CL_EFAULT, EFAULT)                   \
  X(CL_EBUSY, EBUSY)                     \
  X(CL_EINVAL, EINVAL)                   \
  X(CL_ENOSPC, ENOSPC)                   \
  X(CL_EPIPE, EPIPE)                     \
  X(CL_EPROTO, EPROTO)                   \
  X(CL_EPROTONOSUPPORT, EPROTONOSUPPORT) \
  X(CL_EOPNOTSUPP, EOPNOTSUPP)           \
  X(CL_EADDRINUSE, EADDRINUSE)           \
  X(CL_ENETUNREACH, ENETUNREACH)         \
  X(CL_ECONNABORTED, ECONNABORTED)       \
  X(CL_ECONNRESET, ECONNRESET)           \
  X(CL_ENOBUFS, ENOBUFS)                 \
  X(CL_ETIMEDOUT, ETIMEDOUT)             \
  X(CL_ECONNREFUSED, ECONNREFUSED)       \
  X(CL_EHOSTUNREACH, EHOSTUNREACH)       \
  X(CL_EDQUOT, EDQUOT)                   \
  X(CL_ECANCELED, ECANCELED)

#define CLEAVE_X(code, err) static_assert((code) == -(err), #code " must be -" #err);
CLEAVE_ERRNO_CODES(CLEAVE_X)
#undef CLEAVE_X

// The ABI's own codes lie past every errno.
static_assert(CL_EDAEMON < -1000 && CL_EVERSION < -1000 && CL_EEVICTED < -1000 &&
              CL_ENORECV < -1000 && CL_ETRUNC < -1000);

// A transport event's status as its app's completion carries it: the negative errno as it is,
// but a message longer than the receive buffer it filled (-EMSGSIZE on a receive) is CL_ETRUNC.
constexpr int32_t completion_status(int32_t status, bool recv) {
  return recv && status == -EMSGSIZE ? int32_t(CL_ETRUNC) : status;
}

}  // namespace cleave::dp
