/* Layout queries for bindings that cannot read C headers.  python/dpfl loads libdpfl.so with ctypes and declares
 * the structs of dpfl/core.h and dpfl/privacy.h again in Python; at import it checks every size and every field
 * offset it declares against these, so a library built from other headers is refused instead of read wrongly. */
#ifndef DPFL_ABI_H
#define DPFL_ABI_H

#pragma GCC visibility push(default) /* exported by libdpfl.so (dpfl/core.h) */

/* DPFL_VERSION of the library that was built. */
const char *dpfl_version(void);
/* sizeof(type) when field is NULL, offsetof(type, field) otherwise, for the public structs and enums that
 * bindings pass ("dpfl_event", "dpfl_guarantee", ...); -1 for a type or field not listed. */
long dpfl_abi_layout(const char *type, const char *field);
/* The fields of a struct generated from a schema, in order, as "name:codec:ctype,..." (codec DPFL_EVT_ENUM,
 * DPFL_EVT_F64 or DPFL_EVT_I64; ctype the C type, e.g. dpfl_adjacency), so that a binding declares the struct from
 * the library instead of repeating it: "dpfl_event"; NULL for any other type. */
const char *dpfl_abi_fields(const char *type);

#pragma GCC visibility pop

#endif
