"""Decoding through a Titan memory costs the same whatever the pending chunk holds: a token is
written into the pending buffers in place and read with one chunk's weights, never copying the
chunk so far or padding the query to a whole chunk (results equal the one-call form: test_memory)."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from memexp.methods.titan.memory import NeuralMemory

HK, D, H, C = 2, 16, 4, 256


class Allocated(TorchDispatchMode):
    """Elements of the new tensors operations return (views and in-place writes allocate none)."""

    def __init__(self) -> None:
        super().__init__()
        self.elements = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not any(r.alias_info is not None for r in func._schema.returns):
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    self.elements += t.numel()
        return out


def qkv(T, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(1, T, H, D, generator=g), torch.randn(1, T, HK, D, generator=g),
            torch.randn(1, T, HK, D, generator=g))


@torch.no_grad()
def test_a_decoded_token_allocates_the_same_at_any_fill_and_far_less_than_a_chunk():
    torch.manual_seed(0)
    memory = NeuralMemory(HK, D, C, 2 * C, 1.0)
    state = memory.init_state(1, torch.device("cpu"))
    position = 2 * C + 1
    memory(*qkv(position, 0), state, 0)  # two chunks written, one token pending
    per_token = {}
    buffers = set()
    for step in range(C - 3):
        with Allocated() as seen:
            memory(*qkv(1, step + 1), state, position)
        position += 1
        per_token[state.filled] = seen.elements
        buffers.add(state.buffer_k.data_ptr())
    assert state.filled == C - 2
    chunk_elements = C * HK * D  # what the pending chunk holds (keys; values as many)
    assert per_token[5] == per_token[C // 2] == per_token[C - 2]
    assert per_token[C - 2] < chunk_elements / 8
    assert len(buffers) == 1  # the buffer grew to a whole chunk once and was written in place since


@torch.no_grad()
def test_token_by_token_equals_one_call():
    torch.manual_seed(0)
    memory = NeuralMemory(HK, D, 8, 16, 1.0)
    q, k, v = qkv(37, 3)
    whole = memory(q, k, v, memory.init_state(1, torch.device("cpu")), 0)
    state = memory.init_state(1, torch.device("cpu"))
    pieces = [memory(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], state, t) for t in range(37)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), whole, rtol=1e-5, atol=1e-6)
