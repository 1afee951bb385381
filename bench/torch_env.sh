# Sourced by bench/run.sh and bench/compare_pytorch.sh: how the PyTorch reference is run, as a user of Debian's
# python3-torch runs it.  Sets PYPRE (an `env` prefix) and PY.
#  - OpenBLAS: Debian's PyTorch is meant to run on the OpenMP build of OpenBLAS (libopenblas0-openmp), which
#    shares PyTorch's OpenMP threads; the pthread build (what dpfl links) spins its own threads against them.  The
#    reference therefore loads the OpenMP build through LD_LIBRARY_PATH, for the PyTorch process only, on both
#    cores (no OPENBLAS_NUM_THREADS limit).  dpfl keeps its own BLAS.
#  - tcmalloc (libtcmalloc-minimal4): PyTorch's per-example code allocates heavily; the issues' figures used it.
PY=/usr/bin/python3 # Debian's python3-torch installs for the system Python
[ -x "$PY" ] || PY=python3
OMPBLAS=/usr/lib/x86_64-linux-gnu/openblas-openmp
TC=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
PYPRE="env"
[ -f "$TC" ] && PYPRE="$PYPRE LD_PRELOAD=$TC"
if [ -d "$OMPBLAS" ]; then
  PYPRE="$PYPRE LD_LIBRARY_PATH=$OMPBLAS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  echo "warning: libopenblas0-openmp is not installed: the PyTorch reference runs on the pthread OpenBLAS," \
       "slower than PyTorch users see it (apt-get install libopenblas0-openmp)" >&2
fi
