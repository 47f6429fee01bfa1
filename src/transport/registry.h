// registry.h - transports by name: Registry, the built-in ones and those loaded from shared
// objects (transport_abi.h). Apart from transport.h so that changing it does not touch the
// interface plugins build against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "transport.h"

namespace cleave::transport {

using Factory = std::unique_ptr<Transport> (*)();

// Transports by name: the built-in ones and those loaded from shared objects. Filled on the main
// thread, at start-up and later (cleavectl transport attach). Threads: add() and load() are for
// one thread at a time (the writer); create() and entries() may run on any thread meanwhile, with
// no lock: entries sit in a fixed table of kMaxTransports and each is published by an atomic
// count (release/acquire) after it is complete, then never moved or changed. A registry must
// outlive every transport it created: a loaded object stays open until the registry is destroyed
// (global()'s never is), and a plugin's transport runs code from it.
class Registry {
 public:
  static constexpr size_t kMaxTransports = 64;

  // The process-wide registry, with the built-in transports in it.
  static Registry& global();

  // Adds a transport; throws std::invalid_argument when the name is taken or not 1 to 31
  // characters of a-z, 0-9, '_' and '-', the factory is null, the table is full, or its claim
  // (Transport::claim(), read from an instance made for the purpose) is malformed or collides
  // with a claim or reservation made before (claim_error()).
  void add(std::string_view name, std::string_view description, Factory factory);
  // Loads a transport from a shared object (see transport_abi.h); returns its name. Throws
  // std::runtime_error with the path and the reason when it cannot, among them an object this
  // registry loaded already (by any path: dlopen() gives the same handle) and a claim add()
  // would refuse.
  std::string load(const std::string& path);

  // Keeps traffic for the owner of the transports (the dataplane handles it before any claim):
  // IP protocol `proto`, or with proto 17 the UDP destination ports `udp_ports`. `by` names
  // the owner in refusals ("the dataplane (ICMP echo)"). Throws std::invalid_argument when a
  // transport or another reservation holds it; reserving the same again with the same `by` is
  // a no-op. Writer only, like add().
  void reserve(uint8_t proto, std::span<const uint16_t> udp_ports, std::string_view by);
  // Why `c` cannot be claimed now ("" when it can): no parse for a protocol it claims, UDP
  // claimed without ports (UDP is taken port by port), ports given for another protocol, port
  // 0, or a protocol or UDP port a transport or a reservation holds already (first come, first
  // served; the refusal names the holder). Any thread while no writer runs.
  std::string claim_error(const Claim& c) const;

  // nullptr when no transport has that name (or its factory made none).
  std::unique_ptr<Transport> create(std::string_view name) const;

  struct Entry {
    std::string name;
    std::string description;
    std::string origin;         // "built-in" or the shared object's path
    std::string claims;         // what its claim takes, for listings: "IP protocol 6",
                                // "UDP 4791", "UDP 9000-9015"; "" for nothing
    Factory factory = nullptr;  // built-in ones only; nullptr for a shared object's: use create()
  };
  std::span<const Entry> entries() const;

  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

 private:
  // The claim of `t` (a transport made to read it) when it may be held, else *error says why.
  Claim checked_claim(const Transport* t, std::string* error) const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cleave::transport
