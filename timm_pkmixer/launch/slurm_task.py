"""What a SLURM array task of `pkmixer launch --executor slurm` calls on its node (:class:`SlurmTask`, pickled by
submitit). Kept apart from :mod:`.executors` because it imports submitit, which `pkmixer launch --help` and
`pkmixer status` must not."""
import dataclasses
import os

from submitit.helpers import Checkpointable

from .tasks import Task, execute

__all__ = ['SlurmTask']


class SlurmTask(Checkpointable):
    """:func:`~timm_pkmixer.launch.tasks.execute` of one task, with the task's CPUs as train.py's threads.

    Checkpointable (submitit's: its ``checkpoint`` resubmits the same call): when SLURM times the task out or
    preempts it, submitit requeues it, and the requeued task resumes the run from its ``last.pth.tar`` (``execute``
    decides that when it starts)."""

    def __call__(self, task: Task) -> int:
        job = os.environ.get('SLURM_ARRAY_JOB_ID', os.environ.get('SLURM_JOB_ID', ''))
        index = os.environ.get('SLURM_ARRAY_TASK_ID')
        cpus = os.environ.get('SLURM_CPUS_PER_TASK')
        if cpus and cpus.isdigit() and '--threads' not in task.argv:
            threads = max(1, int(cpus) // max(1, task.nproc))
            task = dataclasses.replace(task, argv=(*task.argv, '--threads', str(threads)))
        return execute(task, job=f'{job}_{index}' if index is not None else job)
