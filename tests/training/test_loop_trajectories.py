"""Every recipe trains through memexp.training.loop and takes the steps its own loop took before.

The expected values were produced by the recipes' own AdamW loops, before they shared one loop
(commit 055335b, whose tests/training/loss_trajectories.py imports the training command from its
old place, memexp.training):

    git checkout 055335b && PYTHONPATH=$PWD OMP_NUM_THREADS=1 python -m tests.training.loss_trajectories

Each line there is (the loss of every backward pass, the sum of |x| over the tensors the run
saved). The shared loop reproduces them bit for bit on this machine (float64 repr equal): it does
the same operations in the same order. The learning rate of the cosine recipes is now
floor + (peak - floor) x ..., where tiny_gdn and notebank_lora wrote peak x (0.1 + 0.9 x ...): the
two doubles may differ in their last bit, which the fp32 update rounds away. The tolerances below
only allow another CPU's summation order; a changed schedule, batch or clip moves the first
losses by 1e-4 or more and the checksum far more.
"""

from __future__ import annotations

import pytest

from tests.training.loss_trajectories import trajectory

OLD = {
    "tiny_gdn": ([5.790501117706299, 5.734695911407471, 5.738090515136719, 5.670657634735107, 5.638519287109375,
                  5.524412155151367, 5.601471900939941, 5.449825763702393, 5.323405742645264, 5.127358913421631,
                  5.197265625, 5.064577102661133, 5.157765865325928, 5.262722969055176], 12086.348601146812),
    "tiny_gdn_words": ([12.036863327026367, 12.031811714172363, 19.578102111816406, 19.8031063079834,
                        19.459239959716797], 28870.50491446464),
    "tiny_llama_niah": ([5.774143218994141, 5.819836616516113, 5.64683198928833, 5.773248195648193,
                         5.657891750335693, 5.675389289855957], 8984.525558177804),
    "notebank_lora": ([5.165040016174316, 4.854429721832275, 4.456943988800049, 4.728698253631592,
                       4.386654376983643, 4.353771209716797, 3.9982268810272217, 4.0519537925720215],
                      448.7032076971882),
    "titan_llama": ([2.7893333435058594, 2.7764124870300293, 2.794158697128296, 2.7664449214935303,
                     2.7973575592041016, 2.7687270641326904, 2.784329652786255, 2.769576072692871,
                     5.536940097808838, 5.5474443435668945, 5.519628047943115, 5.507662773132324],
                    2080.551303362372),
    "tiny_titan": ([2.7397303581237793, 2.9192922115325928, 2.780475378036499, 2.811431407928467],
                   427.94806332380995),
}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("trajectories")


@pytest.mark.parametrize("recipe", list(OLD))
def test_the_shared_loop_takes_the_old_loops_steps(recipe, root):
    if recipe == "tiny_titan" and not (root / "tiny_llama_niah").is_dir():
        trajectory("tiny_llama_niah", root)  # its base model
    losses, checksum = trajectory(recipe, root)
    want_losses, want_checksum = OLD[recipe]
    assert len(losses) == len(want_losses)
    assert losses == pytest.approx(want_losses, rel=1e-6, abs=0)
    assert checksum == pytest.approx(want_checksum, rel=1e-7, abs=0)
