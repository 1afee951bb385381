/* Files and folders, private to the library: the folder maker shared by the run directory (fl/run.c), a deployed
 * client's state folder (net/client.c), the key folder (net/keys.c) and the dataset cache (data/fetch.c).  The
 * checksummed file functions themselves are public (dpfl/core.h). */
#ifndef DPFL_CORE_FILE_H
#define DPFL_CORE_FILE_H

#include "dpfl/core.h"
#include "core/cpu.h"

/* mkdir -p: path and every missing parent, with mode (0755 shared, 0700 private to the user); a folder that
 * exists already is fine.  path: at most 1023 bytes (the callers' file paths inside it are 1100-byte buffers).
 * One-line error naming the folder that could not be made and why. */
DPFL_HIDDEN dpfl_status dpfl_file_make_dirs(const char *path, unsigned mode, dpfl_error *err);

#endif
