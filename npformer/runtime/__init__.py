"""Settings of the whole process, made only by the programs that want them.

``cores``: BLAS threads and the fast track's cores; ``memory``: keeping freed memory for
reuse (glibc); ``signals``: Ctrl-C, SIGTERM and SIGHUP as a request to stop. Importing
npformer changes none of them.
"""
