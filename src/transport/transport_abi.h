/* transport_abi.h - the entry point a transport shared object exports, for Registry::load().
 *
 * A plugin is a shared object that exports one C function, cleave_transport_plugin_v1(), which
 * returns a pointer to a static cleave_transport_plugin describing the transport. The registry
 * dlopen()s the object (RTLD_NOW | RTLD_LOCAL), looks the symbol up, and refuses the object
 * unless abi_version is CLEAVE_TRANSPORT_ABI_VERSION, struct_size covers every field below, and
 * name is a valid, unused transport name (1 to 31 characters of a-z, 0-9, '_' and '-').
 *
 * The entry point is C so that finding it needs no C++ name mangling; what it hands out is not.
 * create() returns a cleave::transport::Transport* made with `new`, as void*, and the registry
 * deletes it through Transport's virtual destructor. So a plugin must be built:
 *   - against the same transport.h as the daemon: CLEAVE_TRANSPORT_ABI_VERSION is bumped
 *     whenever transport.h changes in any way a compiled plugin could notice (a virtual
 *     function, a struct layout, an inline function of Context), and a plugin built against
 *     another version is refused at load time;
 *   - with the same C++ standard library (and compatible compiler ABI) as the daemon, since
 *     std::string, std::span and exceptions cross the boundary.
 * create() converts to Transport* before void* (static_cast<Transport*>(new X)); converting the
 * derived pointer straight to void* is wrong when Transport is not X's first base. It returns
 * NULL rather than throw when it cannot make a transport.
 *
 * Lifetime: the registry keeps a loaded object open until the registry itself is destroyed, and
 * the process-wide registry never closes one. Every transport created from a plugin must be
 * destroyed before the registry that loaded it: its code lives in the object.
 *
 * Usable from C and C++; tests/plugin/datagram_transport.cc is a complete example plugin.
 */
#ifndef CLEAVE_TRANSPORT_ABI_H
#define CLEAVE_TRANSPORT_ABI_H

#include <stdint.h>

#define CLEAVE_TRANSPORT_ABI_VERSION 8

/* The entry point's name, for dlsym(). The _v1 is the shape of the struct below; a change to
 * the struct that old registries cannot read gets a new entry point name. */
#define CLEAVE_TRANSPORT_PLUGIN_SYMBOL "cleave_transport_plugin_v1"

/* Exports the entry point even when the plugin is built with -fvisibility=hidden. */
#if defined(__GNUC__)
#define CLEAVE_TRANSPORT_EXPORT __attribute__((visibility("default")))
#else
#define CLEAVE_TRANSPORT_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

struct cleave_transport_plugin {
  uint32_t abi_version;    /* CLEAVE_TRANSPORT_ABI_VERSION the plugin was built with */
  uint32_t struct_size;    /* sizeof(struct cleave_transport_plugin) the plugin was built with */
  const char* name;        /* the transport's name in the registry; also Transport::name() */
  const char* description; /* one line for listings; may be NULL */
  /* A new cleave::transport::Transport* (see above) as void*, or NULL. */
  void* (*create)(void);
};

/* Returns a pointer to a static description; called once, on the main thread, by load(). */
CLEAVE_TRANSPORT_EXPORT const struct cleave_transport_plugin* cleave_transport_plugin_v1(void);

#ifdef __cplusplus
}
#endif

#endif /* CLEAVE_TRANSPORT_ABI_H */
