"""What differs between training jobs, behind one interface the trainer calls: one registered class each.

A task class registers by name where it is defined (:mod:`fastcore_ops.training.tasks.registry`); the
commands find a run's task by its configuration's ``task`` and ask the class what differs:
its models, its data check and fingerprint, what it builds. The instance it builds turns a
batch into model outputs, scores them with the training loss, counts the samples a batch
holds (images, or tokens), and evaluates: it returns sums that the trainer adds over
processes, then turns them into named metrics. Everything else (events, methods,
precision, checkpoints, resume, DDP, timing, progress) belongs to the trainer and is shared.

    >>> from fastcore_ops.training.tasks.classification import ImageClassification
    >>> ImageClassification.metric, ImageClassification.higher_is_better
    ('top1', True)
"""

from fastcore_ops.training.tasks.base import Task

__all__ = ["Task"]
