/* Ctrl-C / SIGTERM for the commands that run rounds (dpfl train, dpfl serve, rank 0 under mpirun): the first asks
 * the run to stop after the round in progress (the library then writes the interrupted run's summary.json and
 * model.bin; its checkpoint is the last round's) and says how to continue; the handler is reset, so a second one
 * ends the process at once (the checkpoint of the last round stays valid).  A signal the process started with
 * ignored is left ignored (nohup; a shell's background job without job control). */
#include "cli.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_flag, stop_signal;
static char stop_line[1400];
static size_t stop_len;

static void on_stop_signal(int sig)
{
    stop_flag = 1;
    stop_signal = sig;
    ssize_t w = write(2, stop_line, stop_len);
    (void)w;
}

volatile sig_atomic_t *cli_stop_catch(const char *resume_how)
{
    int n = snprintf(stop_line, sizeof stop_line, "\ndpfl: interrupted: stopping after the round in progress (again: "
                     "quit now); continue with: %s\n", resume_how);
    stop_len = n < 0 ? 0 : (size_t)n < sizeof stop_line ? (size_t)n : sizeof stop_line - 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    const int sigs[2] = {SIGINT, SIGTERM};
    for (int i = 0; i < 2; i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(sigs[i], &sa, NULL);
    }
    return &stop_flag;
}

int cli_stop_status(void)
{
    return stop_flag ? 128 + (int)stop_signal : 0; /* the shell's code for a process ended by that signal */
}
