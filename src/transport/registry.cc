// registry.cc - transports by name: the built-in ones, and those loaded from shared objects
// through the versioned entry point of transport_abi.h.
#include "registry.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "transport/rocev2/rc.h"
#include "transport/solar/solar.h"
#include "transport/tcp/tcp.h"
#include "transport_abi.h"

namespace cleave::transport {

namespace {

constexpr size_t kMaxName = 31;

// Every field load() reads: a plugin built against an older, shorter struct is refused.
constexpr size_t kPluginSizeV1 =
    offsetof(cleave_transport_plugin, create) + sizeof(cleave_transport_plugin::create);

// "" when `name` can be a transport's name, else why not. Names appear in configuration files
// and cleavectl output, hence the small alphabet.
std::string name_error(std::string_view name) {
  if (name.empty()) return "a transport name may not be empty";
  if (name.size() > kMaxName) {
    return "transport name \"" + std::string(name) + "\" is longer than " +
           std::to_string(kMaxName) + " characters";
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) {
      return "transport name \"" + std::string(name) +
             "\" may only hold the characters a-z, 0-9, '_' and '-'";
    }
  }
  return "";
}

// Closes a handle that load() refused; the message says why it was refused, not dlclose's fate.
void close_quietly(void* handle) {
  if (handle != nullptr) dlclose(handle);
}

// dlerror()'s text without the "<path>: " glibc starts it with: load()'s message has the path.
std::string dl_reason(const std::string& path, const char* fallback) {
  const char* err = dlerror();
  std::string why = err != nullptr ? err : fallback;
  if (why.starts_with(path + ": ")) why.erase(0, path.size() + 2);
  return why;
}

constexpr uint8_t kUdp = 17;

// A claim's traffic in a listing: "IP protocol 6", "UDP 4791", "UDP 7, 9000-9015"; "" for none.
std::string claims_text(const Claim& c) {
  if (c.proto == 0) return "";
  if (c.proto != kUdp) return "IP protocol " + std::to_string(c.proto);
  std::vector<uint16_t> ports(c.udp_ports.begin(), c.udp_ports.end());
  std::sort(ports.begin(), ports.end());
  ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
  std::string out = "UDP";
  for (size_t i = 0; i < ports.size();) {
    size_t j = i;
    while (j + 1 < ports.size() && ports[j + 1] == ports[j] + 1)
      j++;
    out += (i == 0 ? " " : ", ") + std::to_string(ports[i]);
    if (j != i) out += "-" + std::to_string(ports[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

struct Registry::Impl {
  // A fixed table: an entry, once published by `count` (release), is never moved or changed, so
  // create() and entries() may read it from other threads while the one writer adds the next.
  std::array<Entry, kMaxTransports> entries;
  // Parallel to entries: the plugin's create() for entries from shared objects, else nullptr
  // (Entry::factory is a plain function pointer and cannot carry it).
  std::array<void* (*)(), kMaxTransports> plugin_create{};
  std::atomic<size_t> count{0};
  // dlopen() handles of the loaded objects and their transports' names, closed in reverse
  // order by ~Impl. Writer only.
  std::vector<std::pair<void*, std::string>> handles;
  // Who holds the traffic claimed or reserved so far, as refusals name it: by IP protocol
  // (UDP's is never held whole) and by UDP destination port. Writer only.
  std::array<std::string, 256> proto_holder;
  std::map<uint16_t, std::string> udp_holder;

  const std::string* holder(uint8_t proto, uint16_t port) const {
    if (proto != kUdp) return proto_holder[proto].empty() ? nullptr : &proto_holder[proto];
    auto it = udp_holder.find(port);
    return it == udp_holder.end() ? nullptr : &it->second;
  }

  // Writer only: `c` (claim_error() found nothing wrong) is `who`'s from now on.
  void hold(const Claim& c, const std::string& who) {
    if (c.proto == 0) return;
    if (c.proto != kUdp) {
      proto_holder[c.proto] = who;
      return;
    }
    for (uint16_t port : c.udp_ports)
      udp_holder[port] = who;
  }

  std::span<const Entry> published() const {
    return {entries.data(), count.load(std::memory_order_acquire)};
  }

  const Entry* find(std::string_view name, size_t* index) const {
    std::span<const Entry> es = published();
    for (size_t i = 0; i < es.size(); i++) {
      if (es[i].name == name) {
        *index = i;
        return &es[i];
      }
    }
    return nullptr;
  }

  // The reason `name` cannot be added, or "".
  std::string add_error(std::string_view name) const {
    std::string err = name_error(name);
    size_t i = 0;
    if (err.empty() && find(name, &i) != nullptr) {
      err = "transport name \"" + std::string(name) + "\" is taken (by " + entries[i].origin + ")";
    }
    if (err.empty() && count.load(std::memory_order_relaxed) == kMaxTransports) {
      err = "the registry is full (" + std::to_string(kMaxTransports) + " transports)";
    }
    return err;
  }

  // Writer only: fills the next slot, then publishes it.
  void publish(Entry e, void* (*create)()) {
    const size_t n = count.load(std::memory_order_relaxed);
    entries[n] = std::move(e);
    plugin_create[n] = create;
    count.store(n + 1, std::memory_order_release);
  }

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    for (auto it = handles.rbegin(); it != handles.rend(); ++it)
      dlclose(it->first);
  }
};

// The one place built-in transports are added to the process-wide registry.
static void add_builtins(Registry& reg) {
  reg.add("tcp", "TCP on headers, interoperates with Linux (RFC 9293, SACK, NewReno/CUBIC/DCTCP)",
          tcp::make_transport);
  // Queue pairs are made by their owner (the dataplane's qp_create), never by listen or connect.
  reg.add("rocev2", "RoCEv2 reliable connection (IBTA), go-back-N or selective repeat, DCQCN",
          [] { return std::unique_ptr<Transport>(std::make_unique<roce::RcTransport>()); });
  // Its connections are queue pairs too: apps name it in their QP's parameters.
  reg.add("solar", "Solar block storage over N paths (UDP 7000), per-path windows, paths fail over",
          solar::make_transport);
}

Registry& Registry::global() {
  // Never destroyed: a transport may still be alive at exit (a static, a thread not joined), and
  // destroying the registry would dlclose the code under it.
  static Registry* const reg = [] {
    auto* r = new Registry();
    add_builtins(*r);
    return r;
  }();
  return *reg;
}

Registry::Registry() : impl_(std::make_unique<Impl>()) {}
Registry::~Registry() = default;

void Registry::add(std::string_view name, std::string_view description, Factory factory) {
  if (std::string err = impl_->add_error(name); !err.empty()) throw std::invalid_argument(err);
  const std::string who = "transport \"" + std::string(name) + "\"";
  if (factory == nullptr) throw std::invalid_argument(who + " has no factory");
  std::string err;
  const Claim c = checked_claim(factory().get(), &err);
  if (!err.empty()) throw std::invalid_argument(who + ": " + err);
  impl_->hold(c, who);
  impl_->publish(
      Entry{std::string(name), std::string(description), "built-in", claims_text(c), factory},
      nullptr);
}

void Registry::reserve(uint8_t proto, std::span<const uint16_t> udp_ports, std::string_view by) {
  // What `by` holds already (the configuration loaded into this registry again) stays as it is.
  auto held = [&](uint16_t port) {
    const std::string* h = impl_->holder(proto, port);
    return h != nullptr && *h == by;
  };
  std::vector<uint16_t> ports;
  std::copy_if(udp_ports.begin(), udp_ports.end(), std::back_inserter(ports),
               [&](uint16_t port) { return !held(port); });
  if (proto == kUdp ? !udp_ports.empty() && ports.empty() : held(0)) return;
  Claim c;
  c.proto = proto;
  c.udp_ports = ports;
  c.parse = [](const RxL4&, RxParsed*) { return false; };  // checked like a claim, never run
  if (std::string err = claim_error(c); !err.empty()) {
    throw std::invalid_argument(std::string(by) + ": " + err);
  }
  impl_->hold(c, std::string(by));
}

Claim Registry::checked_claim(const Transport* t, std::string* error) const {
  if (t == nullptr) {
    *error = "it made no transport to read its claim from";
    return {};
  }
  Claim c = t->claim();
  *error = claim_error(c);
  return c;
}

std::string Registry::claim_error(const Claim& c) const {
  if (c.proto == 0) return "";
  const std::string proto = c.proto == kUdp ? "UDP" : "IP protocol " + std::to_string(c.proto);
  if (c.parse == nullptr) return "its claim on " + proto + " has no parse function";
  if (c.proto != kUdp) {
    if (!c.udp_ports.empty()) return "its claim names UDP ports but takes " + proto;
    if (const std::string* h = impl_->holder(c.proto, 0)) {
      return "it claims " + proto + ", which " + *h + " holds";
    }
    return "";
  }
  if (c.udp_ports.empty()) {
    return "it claims UDP without destination ports (UDP is claimed port by port)";
  }
  for (uint16_t port : c.udp_ports) {
    if (port == 0) return "it claims UDP port 0";
    if (const std::string* h = impl_->holder(kUdp, port)) {
      return "it claims UDP port " + std::to_string(port) + ", which " + *h + " holds";
    }
  }
  return "";
}

std::string Registry::load(const std::string& path) {
  auto fail = [&](void* handle, const std::string& why) {
    close_quietly(handle);
    return std::runtime_error(path + ": " + why);
  };

  // RTLD_NOW: an unresolved symbol fails here, not in the middle of a burst. RTLD_LOCAL: two
  // plugins may define the same symbols without one binding to the other's.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) throw fail(nullptr, "cannot load: " + dl_reason(path, "dlopen failed"));
  // The same object again (by this path or another): dlopen() counted one more reference to
  // the handle we hold, which fail() gives back.
  for (const auto& [h, loaded] : impl_->handles) {
    if (h == handle) throw fail(handle, "already loaded (transport \"" + loaded + "\")");
  }
  dlerror();  // clear: a stale error would pass for dlsym's
  void* sym = dlsym(handle, CLEAVE_TRANSPORT_PLUGIN_SYMBOL);
  if (sym == nullptr) {
    const std::string why = dl_reason(path, "its value is null");
    throw fail(handle, "not a Cleave transport: no entry point " +
                           std::string(CLEAVE_TRANSPORT_PLUGIN_SYMBOL) + " (" + why + ")");
  }
  // POSIX guarantees that a dlsym() result converts to a function pointer.
  auto entry = reinterpret_cast<const cleave_transport_plugin* (*)()>(sym);
  const cleave_transport_plugin* p = entry();
  if (p == nullptr) throw fail(handle, "the entry point returned no description");
  if (p->abi_version != CLEAVE_TRANSPORT_ABI_VERSION) {
    throw fail(handle, "built for transport ABI version " + std::to_string(p->abi_version) +
                           ", this build of Cleave has version " +
                           std::to_string(CLEAVE_TRANSPORT_ABI_VERSION) +
                           ": rebuild it against this transport.h");
  }
  if (p->struct_size < kPluginSizeV1) {
    throw fail(handle, "its struct cleave_transport_plugin is " + std::to_string(p->struct_size) +
                           " bytes, at least " + std::to_string(kPluginSizeV1) + " expected");
  }
  if (p->name == nullptr) throw fail(handle, "the plugin has no name");
  if (p->create == nullptr) throw fail(handle, "the plugin has no create function");
  std::string name(p->name);
  if (std::string err = impl_->add_error(name); !err.empty()) throw fail(handle, err);
  // Its claim, from an instance made for the purpose and deleted at once, while its code is
  // loaded (a refusal closes the object). The claim's functions and ports are the object's.
  std::string err;
  const Claim c =
      checked_claim(std::unique_ptr<Transport>(static_cast<Transport*>(p->create())).get(), &err);
  if (!err.empty()) throw fail(handle, "transport \"" + name + "\": " + err);

  impl_->hold(c, "transport \"" + name + "\"");
  impl_->handles.emplace_back(handle, name);
  impl_->publish(
      Entry{name, p->description != nullptr ? p->description : "", path, claims_text(c), nullptr},
      p->create);
  return name;
}

std::unique_ptr<Transport> Registry::create(std::string_view name) const {
  size_t i = 0;
  const Entry* e = impl_->find(name, &i);
  if (e == nullptr) return nullptr;
  if (e->factory != nullptr) return e->factory();
  // create() made a Transport and converted that pointer to void*: converting back is exact.
  return std::unique_ptr<Transport>(static_cast<Transport*>(impl_->plugin_create[i]()));
}

std::span<const Registry::Entry> Registry::entries() const {
  return impl_->published();
}

}  // namespace cleave::transport
