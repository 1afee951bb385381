/* The deployment commands of the dpfl binary when it is built without ZeroMQ and OpenMPI linked in (the default
 * where either is available): dpfl serve, join and keygen, and dpfl train under mpirun, replace this process by
 * dpfl-deploy with the same command line.  dpfl-deploy is the same program with cmd_net.c and mpi_train.c and the
 * two libraries; everything else (accounting, training in one process, reports) runs here without loading them.
 * Loading OpenMPI's and ZeroMQ's ~25 shared libraries took about 2 ms of every dpfl start (`dpfl account` is a
 * whole process, and that was a third of it).
 *
 * dpfl-deploy is looked for beside this executable (a build directory: build/dpfl and build/dpfl-deploy), then in
 * the installed DPFL_LIBEXECDIR (make install puts it there). */
#include "dpfl/run.h"
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef DPFL_LIBEXECDIR
#error "DPFL_LIBEXECDIR must be defined (the Makefile compiles it into front.o)"
#endif

#define DEPLOY_NAME "dpfl-deploy"

static int deploy_exec(const char *what)
{
    char path[PATH_MAX + sizeof DEPLOY_NAME];
    ssize_t n = readlink("/proc/self/exe", path, PATH_MAX - 1);
    char *slash = NULL;
    if (n > 0) {
        path[n] = '\0';
        slash = strrchr(path, '/');
    }
    if (slash) memcpy(slash + 1, DEPLOY_NAME, sizeof DEPLOY_NAME);
    if (!slash || access(path, X_OK)) snprintf(path, sizeof path, "%s/" DEPLOY_NAME, DPFL_LIBEXECDIR);
    fflush(stdout);
    fflush(stderr);
    char *argv0 = cli_main_argv[0];
    cli_main_argv[0] = path;
    execv(path, cli_main_argv);
    int e = errno;
    cli_main_argv[0] = argv0;
    return cli_error("%s runs in %s (the dpfl with ZeroMQ and OpenMPI), which cannot be started: %s (make builds "
                     "it beside dpfl; make install puts it in %s)",
                     what, path, strerror(e), DPFL_LIBEXECDIR);
}

int cli_serve(int argc, char **argv)
{
    (void)argc, (void)argv;
    return deploy_exec("dpfl serve");
}

int cli_join(int argc, char **argv)
{
    (void)argc, (void)argv;
    return deploy_exec("dpfl join");
}

int cli_keygen(int argc, char **argv)
{
    (void)argc, (void)argv;
    return deploy_exec("dpfl keygen");
}

int cli_mpi_train(const dpfl_config *cfg, const dpfl_run_options *opt)
{
    (void)cfg, (void)opt;
    return deploy_exec("dpfl train under mpirun");
}
