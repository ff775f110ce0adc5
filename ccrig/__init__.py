"""ccrig: a test rig for congestion-control research on real Linux kernels.

The house has floors (README.md, "The floors"). This package is the ground floor: errors, the one command
runner and its log, units and spec field types, needs, samples and the process-stopping helper. It imports
nothing of ours. The domain packages stand on it and install beneath this name from their own folders:
ccrig.topologies (topologies/), ccrig.qdiscs (qdiscs/), ccrig.tcp_modules (tcp_modules/), ccrig.analysis
(analysis/); ccrig.experiments (experiments/: spec, runner, command line) is the top floor, and nothing below it
imports it.
"""
