"""Shared-memory buffers that DataLoader workers write their batches into, reused batch after batch.

Why not let each batch make its own shared block, as torch's collate does: a fresh block costs
the worker a new shared-memory file and a page fault for each 4 KiB page as it writes the
pixels, about 16 ms per float32 batch of 64 x 176 x 176 here (a quarter of a millisecond per
image, about a fifth of what decoding it costs). A slot written before is already mapped, in the
worker and, through torch's cache of shared storages, in the main process. Copying each batch
out there would cost the main process a pass over every batch, so it is not copied.

So the main process hands the slot's own memory to the consumer and takes a slot back only once
nothing outside this module refers to its memory any more (``reclaim``). A batch the consumer
keeps is never overwritten: its slot is retired, and the worker gives that slot new memory. Each
worker has more slots than it can have batches in flight and held; should none be free anyway,
it makes a fresh block for that batch instead of waiting.
"""

from __future__ import annotations

import torch
from torch.utils.data import get_worker_info

_FREE, _BUSY, _RETIRED = 0, 1, 2


def _references(storage: torch.UntypedStorage) -> int:
    # torch has no public use count for a storage; this private one is what its own tests use,
    # and test_shared_slots fails loudly should it change meaning.
    return torch._C._storage_Use_Count(storage._cdata)


class SharedBatchSlots:
    """``slots_per_worker`` reusable float32 batch buffers for each of ``workers`` DataLoader workers.

    Made in the main process before the workers start. A worker asks for an output buffer with
    ``empty``; the main process calls ``hand_over`` for each batch it passes on and ``reclaim``
    before it asks the workers for more.

    >>> slots = SharedBatchSlots(workers=2, slots_per_worker=4)
    >>> images, slot = slots.empty(torch.Size([4, 3, 8, 8]), torch.contiguous_format)  # in a worker  # doctest: +SKIP
    >>> slots.hand_over(images, slot)                                               # in the main process  # doctest: +SKIP
    """

    def __init__(self, workers: int, slots_per_worker: int):
        self.slots_per_worker = slots_per_worker
        # One state per slot (_FREE, _BUSY from a worker's write until reclaimed, _RETIRED when the
        # consumer kept the batch in it), shared with the workers.
        self._state = torch.zeros(workers * slots_per_worker, dtype=torch.uint8).share_memory_()
        # Worker side: this worker's storage for each of its slots. Main side: the storage of each
        # slot handed over and not yet reclaimed, which also keeps the slot mapped in this process.
        self._storages: dict[int, torch.UntypedStorage] = {}
        self._handed_over: list[int] = []  # main side, oldest first

    def empty(self, shape: torch.Size, memory_format: torch.memory_format) -> tuple[torch.Tensor, int | None]:
        """(a float32 tensor of ``shape`` in shared memory, its slot), for a worker to write a batch into.

        The slot is None when all of this worker's slots are busy: the tensor is then a fresh block.
        """
        strides = torch.empty(shape, device="meta", memory_format=memory_format).stride()
        nbytes = shape.numel() * 4
        slot = self._usable_slot()
        if slot is None:
            return torch.empty(0).set_(torch.UntypedStorage._new_shared(nbytes), 0, shape, strides), None
        storage = self._storages.get(slot)
        if storage is None or storage.nbytes() < nbytes or self._state[slot] == _RETIRED:
            # First use, a larger batch (progressive resizing), or the consumer has the old memory.
            storage = self._storages[slot] = torch.UntypedStorage._new_shared(nbytes)
        self._state[slot] = _BUSY
        return torch.empty(0).set_(storage, 0, shape, strides), slot

    def _usable_slot(self) -> int | None:
        worker = get_worker_info()
        if worker is None:
            raise RuntimeError("SharedBatchSlots.empty is for DataLoader workers; the main process needs no shared memory")
        first = worker.id * self.slots_per_worker
        usable = (self._state[first:first + self.slots_per_worker] != _BUSY).nonzero()
        return first + int(usable[0]) if len(usable) else None

    def hand_over(self, images: torch.Tensor, slot: int) -> None:
        """Note that the batch ``images``, which a worker wrote in ``slot``, goes to the consumer now."""
        self._storages[slot] = images.untyped_storage()
        self._handed_over.append(slot)

    def reclaim(self, *, keep_latest: bool) -> None:
        """Free the slots of handed-over batches nothing refers to any more; retire those still in use.

        keep_latest: leave the most recent batch alone, as the consumer's loop variable still
        holds it while it asks for the next one. Without it (before a new pass over the data)
        every slot is settled, and one still marked busy but never handed over, from a pass
        left unfinished, is freed: its batch will never be read.
        """
        pending = self._handed_over[-1:] if keep_latest else []
        for slot in self._handed_over[:len(self._handed_over) - len(pending)]:
            if _references(self._storages[slot]) == 1:  # ours only: the consumer is done with it
                self._state[slot] = _FREE
            else:
                self._state[slot] = _RETIRED
                del self._storages[slot]  # the consumer's now; the worker makes the slot new memory
        self._handed_over = pending
        if not keep_latest:
            self._state[self._state == _BUSY] = _FREE
