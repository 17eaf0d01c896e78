"""The walls a learner's code runs in: bubblewrap's sandbox, the zygote inside it, and their limits.

``bubblewrap`` builds the command (namespaces, the read-only view, seccomp, the unprivileged
user a root grader's sandboxes run as); ``zygote`` is the sandbox's first process, which forks a
learner's process per exercise; ``sandbox`` is the judge's handle on one submission's sandbox;
``unwalled`` is what runs where there is no bubblewrap. Nothing here judges: the judging code
(``verdict``, ``learner_proxy``) does not import this package, and nothing here imports it.
"""
