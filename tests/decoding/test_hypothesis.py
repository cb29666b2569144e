import torch
from torch import nn

from attnkit.decoding.hypothesis import inference


def test_inference_switches_a_training_model_to_eval_and_back():
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    with inference(model):
        assert not model.training and not model[1].training
        assert torch.is_inference_mode_enabled()
    assert model.training and model[1].training


def test_inference_leaves_an_eval_model_untouched(monkeypatch):
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5)).eval()
    calls = []
    monkeypatch.setattr(nn.Module, "train", lambda self, mode=True: calls.append(mode))
    with inference(model):
        assert not model.training
    assert calls == [] and not model.training
