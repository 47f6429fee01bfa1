// mgmt_protocol.h - the management protocol between cleaved and cleavectl (or any client).
//
// Transport: a SOCK_STREAM unix socket, <runtime_dir>/cleaved.sock. Framing: one JSON object per
// line, in both directions; a client may send several requests on one connection and gets the
// answers in order.
//
//   request:  {"version": 1, "id": 7, "command": "port.show", "args": {"name": "p0"}}
//   answer:   {"version": 1, "id": 7, "ok": true, "result": {...}}
//   error:    {"version": 1, "id": 7, "ok": false, "error": {"code": "not_found", "message":
//   "..."}}
//
// "id" is echoed and optional; "args" is optional. A request whose version is newer than the
// daemon's gets error code "unsupported_version" with the daemon's version in the message.
// Commands (version 1): status, port.show {name?}, arp.show, route.show, route.get {addr},
// stats.show, log.get, log.set {level}, app.list, app.show {id}. Additive changes keep the
// version; any change of
// meaning bumps it.
#pragma once

#include <cstddef>
#include <string_view>

namespace cleave::mgmt {

inline constexpr int kProtocolVersion = 1;
inline constexpr std::string_view kSocketName = "cleaved.sock";
inline constexpr std::string_view kDefaultRuntimeDir = "/run/cleave";
inline constexpr size_t kMaxRequestBytes = size_t{64} * 1024;
inline constexpr size_t kMaxAnswerBytes = size_t{16} * 1024 * 1024;

// Error codes.
inline constexpr std::string_view kErrBadRequest = "bad_request";
inline constexpr std::string_view kErrUnsupportedVersion = "unsupported_version";
inline constexpr std::string_view kErrUnknownCommand = "unknown_command";
inline constexpr std::string_view kErrNotFound = "not_found";
inline constexpr std::string_view kErrUnavailable = "unavailable";

}  // namespace cleave::mgmt
