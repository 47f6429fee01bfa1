/* bad_plugin.c - broken transport plugins, one per build, for Registry::load()'s refusals.
 *
 * tests/meson.build builds this file several times, each with one -D below changed from the
 * good default: BAD_PLUGIN_ENTRY (the exported symbol's name), BAD_PLUGIN_ABI, BAD_PLUGIN_SIZE
 * (struct_size), BAD_PLUGIN_NAME. BAD_PLUGIN_ABI is also the previous version, which a registry
 * must refuse as it refuses any other. It is C on purpose: it also proves transport_abi.h compiles
 * as C. Its create() makes nothing: with every field good (a valid, free name) the registry
 * calls it for the transport's claim and refuses the plugin for it.
 */
#include <stddef.h>

#include "transport_abi.h"

#ifndef BAD_PLUGIN_ENTRY
#define BAD_PLUGIN_ENTRY cleave_transport_plugin_v1
#endif
#ifndef BAD_PLUGIN_ABI
#define BAD_PLUGIN_ABI CLEAVE_TRANSPORT_ABI_VERSION
#endif
#ifndef BAD_PLUGIN_SIZE
#define BAD_PLUGIN_SIZE sizeof(struct cleave_transport_plugin)
#endif
#ifndef BAD_PLUGIN_NAME
#define BAD_PLUGIN_NAME "bad"
#endif

static void* create(void) {
  return NULL;
}

CLEAVE_TRANSPORT_EXPORT const struct cleave_transport_plugin* BAD_PLUGIN_ENTRY(void);

const struct cleave_transport_plugin* BAD_PLUGIN_ENTRY(void) {
  static const struct cleave_transport_plugin plugin = {
      BAD_PLUGIN_ABI, BAD_PLUGIN_SIZE, BAD_PLUGIN_NAME, "a broken plugin for the tests", create,
  };
  return &plugin;
}
