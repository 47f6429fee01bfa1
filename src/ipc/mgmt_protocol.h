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
// stats.show, nic.show {name?}, log.get, log.set {level}, app.list, app.show {id}, and:
//
//   flow.list       {"flows": [flow], "listeners": [{id, app, transport, local}],
//                    "transports": [names the dataplane runs], "bindings": [binding]}
//   flow.show {id}  one flow; not_found when there is none with that id
//   flow.attach {port | tuple: {local, remote}, uid?, transport?, params?: {key: value}}
//                   binds a local port (its listeners, and connects to that remote port), or
//                   TCP flows by address (tuple: "ip:port" each, "*" for any address or port),
//                   to a transport and its parameters for flows opened from now on; uid: only
//                   that user's apps may listen on the port / accept or connect on the tuple.
//                   Answers the binding; bad_request with the transport's reason when it
//                   refuses, or when 64 tuple bindings exist. Without transport a port keeps
//                   its current one (tcp when it has none), a tuple gets tcp.
//   flow.detach {port | tuple: {local, remote}}
//                   removes that binding and answers it; not_found when there is none
//   transport.list  {"transports": [{name, description, origin ("built-in" or the plugin's
//                    path), instantiated, flows, listeners}]}
//   transport.attach {path}
//                   loads a transport plugin (an absolute path) into the running daemon;
//                   answers {name, description, origin}; bad_request with the reason when the
//                   registry refuses it (not loadable, no entry point, ABI version, name taken,
//                   already loaded) or the path is relative
//
//   flow:    {id, app (null: none), transport, local "ip:port", remote "ip:port", info, info_keys}
//            info: the transport's flow_info (text as strings, counters as numbers); info_keys:
//            its keys in the order the dataplane reported them (JSON objects keep none).
//   binding: {port, uid (null: any), transport, params: {key: value}}, or for a tuple binding
//            {tuple: {local, remote}, uid, transport, params}
//
// Additive changes keep the version; any change of meaning bumps it.
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
