"""`attnkit.training.distributed`'s device check (the process-group parts run under torchrun
in test_training_processes.py)."""

import pytest
import torch

from attnkit.errors import UsageError
from attnkit.training.distributed import checked_device


def test_devices():
    assert checked_device(None) == "cpu" and checked_device("cpu") == "cpu"
    assert checked_device("auto") in ("cpu", "cuda:0")
    with pytest.raises(UsageError, match="unknown device"):
        checked_device("bogus")
    if not torch.cuda.is_available():
        with pytest.raises(UsageError, match="--device cuda:7"):
            checked_device("cuda:7")
