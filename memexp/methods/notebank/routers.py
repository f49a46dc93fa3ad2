"""NoteBank's routers by name (`method.router`), registered without importing router.py (torch, BM25).

Each target is a class built as `cls(replay_budget)`, or `cls(replay_budget, router_seed)` when its
entry says `seeded=True`, or `cls(replay_budget, router_model)` when it says `encoder=True` (such a
router has `prepare(device, dtype)`, called with the loaded backbone); the registered name becomes
the router's `name`.
"""

from memexp.core.registry import ROUTERS

ROUTERS.register("native", "memexp.methods.notebank.router:NativeRouter")
ROUTERS.register("random", "memexp.methods.notebank.router:RandomRouter", seeded=True)
ROUTERS.register("bm25", "memexp.methods.notebank.router:BM25Router")
ROUTERS.register("embedding", "memexp.methods.notebank.router:EmbeddingRouter")
ROUTERS.register("oracle", "memexp.methods.notebank.router:OracleRouter")
ROUTERS.register("bge", "memexp.methods.notebank.bge_router:BGERouter", encoder=True)
