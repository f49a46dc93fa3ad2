"""`memexp latency ... titan_layers=1,2` (Titan-Llama's Fig. 4): Plain on the unmodified backbone and
Titan with each number of converted layers, each timed on its own backbone."""

from __future__ import annotations

import json

import memexp.cli.latency as latency_command
import memexp.run.latency as latency
from memexp.methods.titan.layer import TitanLayer


def test_titan_layers_times_plain_and_each_conversion_on_its_own_backbone(monkeypatch, capsys):
    seen = []
    real = latency.measure_latency

    def spy(backbone, methods, inputs, new_tokens, repeats):
        seen.append((sum(isinstance(layer, TitanLayer) for layer in backbone.layers), len(inputs[0].context_ids)))
        return real(backbone, methods, inputs, new_tokens, repeats)

    monkeypatch.setattr(latency, "measure_latency", spy)
    rc = latency_command.main(["backbone=tiny_llama_random", "method=titan", "method.segment_length=16", "method.test_batch=32",
                       "lengths=40,72", "repeats=1", "new_tokens=2", "inputs=synthetic", "titan_layers=1,2", "--json"])
    assert rc == 0
    # Plain (0 converted layers), then k = 1 and k = 2, each at both lengths
    assert seen == [(0, 40), (0, 72), (1, 40), (1, 72), (2, 40), (2, 72)]
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r["length"], r["layers"]) for r in rows] == [(40, 1), (40, 2), (72, 1), (72, 2)]
    for r in rows:
        assert r["latency_ratio"] == r["titan_seconds"] / r["plain_seconds"] > 0
        assert r["peak_ratio"] == r["titan_peak_bytes"] / r["plain_peak_bytes"]
