"""Every backbone exposes the rows of its input embedding table (NoteBank's input-embedding
router reads them), and that router runs end to end on a real architecture."""

import pytest
import torch
from backbone_checks import check_method_end_to_end
from torch import nn

from memexp.backbones import load_backbone

TINY = ["tiny_gdn_random", "tiny_gdn2_random", "tiny_mamba2_random", "tiny_qwen35_random", "tiny_llama_random"]


@pytest.mark.parametrize("name", TINY)
def test_input_embeddings_are_the_embedding_table_rows(name):
    backbone = load_backbone(name)
    tables = [m for m in backbone.model.modules() if isinstance(m, nn.Embedding)]
    assert len(tables) == 1
    ids = [5, 0, 5, 17]
    rows = backbone.input_embeddings(ids)
    assert rows.shape == (4, tables[0].embedding_dim)
    torch.testing.assert_close(rows, tables[0].weight[ids])


def test_embedding_router_runs_on_mamba2():
    memory, _ = check_method_end_to_end(load_backbone("tiny_mamba2_random"), "notebank", router="embedding")
    assert "embedding" in memory.extra.derived
