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
// daemon's gets error code "unsupported_version" with the daemon's version in the message. A
// request longer than kMaxRequestBytes gets "bad_request" and the connection is closed. A
// connection the daemon closes to make room, or refuses because the user's connections are all
// busy, gets one "unavailable" error line (id null) first.
// Commands (version 1): status, port.show {name?}, arp.show, route.show, route.get {addr},
// stats.show, nic.show {name?}, log.get, log.set {level}, app.list, app.show {id}, and:
//
//   flow.list {start?, max?}
//                   {"flows": [flow], "listeners": [{id, app, shard, transport, local}],
//                    "transports": [names the dataplane runs], "bindings": [binding]}
//                   (each flow has its "shard" too). With start or max, one page: at most max
//                   (1..256, default 256) rows from position start (default 0; shard after
//                   shard, in each listeners first, then flows, each by id; the shard is
//                   start's high 8 bits), and "next": the start of the following page, null
//                   after the last. The
//                   dataplane builds one page at a time between its packets, so listing 100 K
//                   flows page by page never holds up its packet path; a flow that exists for
//                   the whole listing is in exactly one page, one opened or closed meanwhile
//                   may be in none. Without either: the whole listing in one answer (built from
//                   pages; a large one can outgrow kMaxAnswerBytes). cleavectl pages.
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
//                    path), claims ("IP protocol 6", "UDP 4791", "" for none), instantiated,
//                    flows, listeners}]}
//   transport.attach {path}
//                   loads a transport plugin (an absolute path) into the running daemon;
//                   answers {name, description, origin}; bad_request with the reason when the
//                   registry refuses it (not loadable, no entry point, ABI version, name taken,
//                   already loaded) or the path is relative
//
//   status          {daemon, version, protocol, pid, uptime_s, config, runtime_dir, hugepages,
//                    main_lcore, dataplane: {lcore (shard 0's), lcores (by shard), state,
//                    iterations (summed)}, ports: {total, link_up},
//                    log_level, control_socket: {clients, max_clients, max_clients_per_uid,
//                    requests_per_turn, max_request_bytes, accepted, refused, evicted, reaped,
//                    requests, oversized, deferred}, app_socket: {apps, max_apps, pending,
//                    max_pending, max_pending_per_uid, accepted, refused, refused_not_allowed,
//                    evicted, reaped, hello_timeouts, dataplane_timeouts, late_attaches, limbo}}
//   debug.ctl_stall {mode: off | queued | attach}
//                   test equipment, only when cleaved runs with CLEAVE_TEST_HOOKS=1 (otherwise
//                   unknown_command): control requests stall as if the dataplane's lcore did
//                   (queued: none is taken; attach: an app attach is taken and held)
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
