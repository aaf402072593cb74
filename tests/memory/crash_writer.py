"""Subprocess for the crash test: writes nodes forever, printing each id once it is committed."""

import sys

import numpy as np

from gateway.memory.nodes import NodeDraft
from gateway.memory.store import MemoryStore

store = MemoryStore(sys.argv[1])
rng = np.random.default_rng(int(sys.argv[2]))
k = 0
while True:
    vec = rng.standard_normal(384).astype(np.float32)
    tags = ("kind:event", f"source:writer{sys.argv[2]}", f"seq:{k}")
    node = store.insert(NodeDraft("anna", "observation", f"event {k} " + "x" * 2000, 5, 1.0, tags, vec / np.linalg.norm(vec)), 1.0)
    print(node.id, flush=True)
    k += 1
