"""The decoding workers' reusable shared-memory batches (shared_slots.py): reused, yet never overwritten while held."""

from types import SimpleNamespace

import pytest
import torch

from fastcore_ops.data.backends.workers import shared_slots
from fastcore_ops.data.backends.workers.shared_slots import SharedBatchSlots
from fastcore_ops.data.loader import build_loader
from fastcore_ops.data.transforms.randaugment import RandAugmentOptions

WORKERS, SLOTS = 2, 3  # the pil backend's: two workers here, prefetch 2 + 1 slots each
OPTIONS = dict(batch_size=2, image_size=16, train=True, seed=3, randaugment=RandAugmentOptions())


@pytest.fixture
def tree(coded_tree):
    return coded_tree(classes=3, per_class=4, size=24)  # 12 images: 6 batches an epoch


def _in_process_epochs(tree, epochs):
    loader = build_loader(tree, backend="pil", num_workers=0, **OPTIONS)
    batches = []
    for epoch in epochs:
        loader.set_epoch(epoch)
        batches += [(images.clone(), labels) for images, labels in loader]
    return batches


def test_batches_nobody_keeps_reuse_their_slots_and_arrive_intact(tree):
    loader = build_loader(tree, backend="pil", num_workers=WORKERS, **OPTIONS)
    sums, memory = [], set()
    for epoch in range(3):
        loader.set_epoch(epoch)
        for images, labels in loader:
            sums.append((images.double().sum().item(), labels.tolist()))
            memory.add(images.untyped_storage().data_ptr())
    loader.close()
    expected = [(images.double().sum().item(), labels.tolist()) for images, labels in _in_process_epochs(tree, range(3))]
    assert sums == expected
    # 18 batches in at most the slots' memory, plus one new block per epoch boundary: the loop
    # variable still held the last batch of an epoch when the next one began, so that slot was retired.
    assert len(memory) <= WORKERS * SLOTS + 2


def test_a_batch_the_consumer_keeps_is_never_overwritten(tree):
    loader = build_loader(tree, backend="pil", num_workers=WORKERS, **OPTIONS)
    kept = []
    for epoch in range(2):
        loader.set_epoch(epoch)
        for step, (images, labels) in enumerate(loader):
            if step % 2 == 0:
                kept.append((images, images.clone()))  # a view would do too: nothing may write under it
            else:
                kept.append((images[1:], images[1:].clone()))
    loader.close()
    for held, copy_on_arrival in kept:
        assert torch.equal(held, copy_on_arrival)


def test_an_epoch_left_unfinished_leaves_the_next_one_whole(tree):
    loader = build_loader(tree, backend="pil", num_workers=WORKERS, **OPTIONS)
    loader.set_epoch(0)
    for _ in zip(range(2), loader):
        pass  # stopped after two of six batches, with the workers' next batches in flight
    loader.set_epoch(1)
    second = [(images.clone(), labels) for images, labels in loader]
    loader.close()
    for (images, labels), (expected_images, expected_labels) in zip(second, _in_process_epochs(tree, [1]), strict=True):
        assert torch.equal(images, expected_images) and torch.equal(labels, expected_labels)


def test_the_reference_count_counts_every_holder():
    storage = torch.UntypedStorage(64)
    assert shared_slots._references(storage) == 1
    view = torch.empty(0, dtype=torch.uint8).set_(storage, 8, (8,), (1,))
    assert shared_slots._references(storage) == 2
    del view
    assert shared_slots._references(storage) == 1


def test_a_slot_is_reused_once_free_renewed_once_retired_and_never_waited_for(monkeypatch):
    slots = SharedBatchSlots(workers=1, slots_per_worker=2)
    monkeypatch.setattr(shared_slots, "get_worker_info", lambda: SimpleNamespace(id=0))
    shape = torch.Size([2, 3, 4, 4])
    kept, _ = slots.empty(shape, torch.channels_last)
    assert kept.is_shared() and kept.is_contiguous(memory_format=torch.channels_last)
    assert [slots.empty(shape, torch.channels_last)[1] for _ in range(2)] == [1, None]  # None: a fresh block
    slots.hand_over(kept, 0)
    slots.reclaim(keep_latest=False)  # `kept` is still held: slot 0 is retired; slot 1 was never handed over
    renewed, slot = slots.empty(shape, torch.contiguous_format)
    assert slot == 0 and renewed.data_ptr() != kept.data_ptr()
    address = renewed.data_ptr()
    slots.hand_over(renewed, 0)
    del renewed
    slots.reclaim(keep_latest=False)  # nothing holds it now: the same memory serves again
    assert [(images.data_ptr() == address, slot) for images, slot in [slots.empty(shape, torch.contiguous_format)]] == [(True, 0)]
    assert slots.empty(shape, torch.contiguous_format)[1] == 1


def test_the_main_process_is_told_it_needs_no_slot():
    with pytest.raises(RuntimeError, match="for DataLoader workers"):
        SharedBatchSlots(workers=1, slots_per_worker=1).empty(torch.Size([1, 3, 2, 2]), torch.contiguous_format)
