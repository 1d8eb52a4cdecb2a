"""The launch wing: a folder of recipes run through `pkmixer train`, one process per run, and followed.

* `tasks`: one run as a task (its recipe, run folder, record and log in ``DIR/launch/``, and its process);
* `executors`: where tasks run (:data:`~.executors.EXECUTORS`: this machine, or SLURM through submitit);
* `lock`: who is launching a folder;
* `records`: the run records, the recorded train.py arguments and the folder's id in ``DIR/launch/``;
* `ownership`: a run folder's owner and what it was asked to train (its launch marker: stale runs);
* `liveness`: whether the process a record names is the one that wrote it (PID, start time, boot);
* `state_files`: reading and writing those files (regular files only, JSON of a known shape, written whole);
* `errors`: the wing's exceptions;
* `launcher`: `pkmixer launch` (plan, lock, start, wait) and `pkmixer status` (each run's state).

It stands beside ``experiments/`` (whose recipes, train.py and run-folder reader it uses) and imports nothing above.
"""
